"""Perturbed MAP ("Bayesian bootstrapping") for the standard model, by batched damped Newton.

The surrogate loss of lemma `mapestimatelemma` (warmPref-PS) / `chapter4mapestimatelemma` (PSPL) with the
perturbations of Eq. `final_surrogate_perturbed_loss` / `surrogate_perturbed_loss`, for several raters
i = 1..R each with its own belief ϑ_i and competence (β_i, λ_i):

    L'(θ, ϑ) = 1/(2σ²) Σ_s (R_s + σ ζ_s − ⟨A_s, θ⟩)²                                   (L1', online rewards)
             + Σ_n ω_n [softplus(z_n) − Y_n z_n],   z_n = β_i⟨x1_n − x0_n, ϑ_i⟩, i = rater(n)  (L2', L1' PSPL)
             + Σ_i λ_i²/2 ‖θ − ϑ_i + ϑ'_i‖² + ½ (θ − μ0 − θ')ᵀ Σ0⁻¹ (θ − μ0 − θ')            (L3')

with ζ_s ~ N(0, 1), ω_n ~ Bern(p_offline) for offline and Bern(p_online) for online comparisons,
θ' ~ N(0, Σ0), ϑ'_i ~ N(0, I/λ_i²). ``softplus(z) − Y z = −log P(Y | x0, x1, ϑ)`` for the Bradley–Terry
likelihood of Eq. `rater_preference_dist` (Y = 0: x0 preferred).

Departures from the text, and why:

* L1 is written in the thesis as ½ Σ (R_s + ζ_s − ⟨A_s, θ⟩)² (i.e. σ = 1); we keep the Gaussian likelihood
  with a general σ (weight 1/σ², noise σζ). Both coincide for σ = 1, and with this scaling the bootstrap
  is *exact* posterior sampling on Gaussian–linear data (randomised least squares) — tested.
* The thesis samples θ' ~ N(μ0, Σ0) and ϑ' ~ N(μ0, I/λ²) but then centres the anchor at μ0 + θ'; that
  would centre the randomised prior at 2μ0. We draw θ' ~ N(0, Σ0), ϑ' ~ N(0, I/λ²) so that the anchor
  μ0 + θ' is a draw from the prior (identical when μ0 = 0, as in the thesis' experiments).
* The perturbed L2' printed in the thesis has ``+ ln(...)`` inside the bracket (a sign typo); we use the
  negative log-likelihood of the lemma.

All B×M problems (B independent data sets, M perturbations each) are solved together by damped Newton
with an Armijo backtracking line search; the loss is strictly convex so Newton converges quadratically.
Convergence (gradient 2-norm ≤ ``tol``) is reported per problem, not assumed. The Newton systems are
solved directly (dense Cholesky, or for d ≥ 32 by eliminating the ϑ_i, which couple to θ only through
λ_i² I) or, for many samples per data set, by preconditioned CG with exact Hessian products and one
preconditioner per data set shared by its M problems (:class:`_NewtonCG`); for small d (≤ 8, the
default ``solver="auto"``) :class:`_NewtonCG` solves them exactly per sample instead, its data blocks from
one matrix product (:meth:`_NewtonCG.exact_step`). Comparisons with equal or opposite differences Δ are
evaluated once (:class:`_RaterRows`: an exact regrouping of the same sum). The estimator is the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from bayescrl.inference.options import ENGINE_OPTIONS
from bayescrl.models.linear import BTLinearProblem
from bayescrl.utils.checks import number, positive_int
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.seeding import bernoulli, draw


@dataclass
class MAPResult:
    """Solutions of M (perturbed) MAP problems per data set.

    ``theta [B?,M,d]``, ``vartheta [B?,M,R,d]``, ``grad_norm [B?,M]``, ``converged [B?,M]`` (bool),
    ``iters`` (Newton iterations run), ``loss [B?,M]``; ``hessian [B?,M,D,D]`` (D = (R+1)d, variables
    ordered θ, ϑ_1, ..., ϑ_R) when requested.
    """

    theta: torch.Tensor
    vartheta: torch.Tensor
    grad_norm: torch.Tensor
    converged: torch.Tensor
    iters: int
    loss: torch.Tensor | None = None
    hessian: torch.Tensor | None = None

    @property
    def all_converged(self) -> bool:
        return bool(self.converged.all())


@dataclass
class Perturbation:
    """One set of perturbations 𝒫 = {ζ, ω, θ', ϑ'} per (data set, sample), already combined.

    ``pref_weight [B,M,N]`` (ω, zero on padding), ``reward_target [B,M,T]`` (R + σζ),
    ``theta_anchor [B,M,d]`` (μ0 + θ'), ``vartheta_shift [B,M,R,d]`` (ϑ').
    """

    pref_weight: torch.Tensor
    reward_target: torch.Tensor
    theta_anchor: torch.Tensor
    vartheta_shift: torch.Tensor


def sample_perturbation(
    problem: BTLinearProblem,
    num_samples: int,
    *,
    p_offline: float = 0.5,
    p_online: float = 1.0,
    online_reward_noise: bool = True,
    anchor_prior: bool = True,
    generator: torch.Generator | None = None,
) -> Perturbation:
    """Draw the perturbation set 𝒫_t of Algorithm `alg:practical_Prefwarm-PS` (batched).

    With one generator per batch row (``utils.seeding``), row b's draws equal the single problem's
    only when every row has the same padded lengths ``N`` and ``T`` (the draws are taken over the
    padded shapes); the bandit and PSPL runners keep them equal (same offline size, fixed capacities).
    """
    number(p_offline, "p_offline", 0.0, 1.0, strict=True)  # Bernoulli weight probabilities in (0, 1]
    number(p_online, "p_online", 0.0, 1.0, strict=True)
    num_samples = positive_int(num_samples, "num_samples")
    pb = problem.batch_view()
    B, M, d, R = pb.y.shape[0], num_samples, pb.dim, pb.num_raters
    dev, dt = pb.device, pb.mu0.dtype
    N, T = pb.y.shape[1], pb.r.shape[1]
    kw = {"device": dev, "dtype": dt}
    p = torch.where(pb.pref_online, torch.tensor(p_online, dtype=dt, device=dev), p_offline)
    p = p.unsqueeze(1).expand(B, M, N)
    w = bernoulli(p, generator) if (p_offline < 1 or p_online < 1) else torch.ones_like(p)
    w = w * pb.pref_mask.unsqueeze(1)
    r = pb.r.unsqueeze(1).expand(B, M, T)
    if online_reward_noise:
        r = r + problem.noise_sd * draw(torch.randn, (B, M, T), generator, **kw)
    if anchor_prior:
        chol = torch.linalg.cholesky(pb.cov0)
        anchor = pb.mu0 + draw(torch.randn, (B, M, d), generator, **kw) @ chol.mT
        lam = pb.lam.expand(B, R)  # lam may be [R] or [B, R]
        shift = draw(torch.randn, (B, M, R, d), generator, **kw) / lam[:, None, :, None]
    else:
        anchor = pb.mu0.expand(B, M, d).clone()
        shift = torch.zeros(B, M, R, d, device=dev, dtype=dt)
    return Perturbation(w, r, anchor, shift)


def _softplus(z: torch.Tensor) -> torch.Tensor:
    """log(1 + eˣ) to float64 precision: torch's default returns x from x > 20, dropping e⁻ˣ ≥ 2·10⁻⁹."""
    return F.softplus(z, threshold=36.0)  # e⁻³⁶ is below float64's resolution of 36


class _Terms:
    """Per-problem constants of the loss, shared by the M perturbations of one data set."""

    def __init__(self, pb: BTLinearProblem):
        B, R, d = pb.y.shape[0], pb.num_raters, pb.dim
        dt = pb.mu0.dtype
        self.pb = pb
        self.d, self.R = d, R
        self.prec0 = torch.cholesky_inverse(torch.linalg.cholesky(pb.cov0))  # Σ0⁻¹ [d,d]
        self.inv_var = 1.0 / pb.noise_sd**2
        xm = pb.x * pb.reward_mask.unsqueeze(-1)
        self.x = xm  # [B,T,d], padding rows are zero
        self.rmask = pb.reward_mask.to(dt)  # [B,T]
        self.gram = xm.mT @ xm * self.inv_var  # [B,d,d]
        self.beta = pb.beta.expand(B, R).to(dt)
        self.lam2 = pb.lam.expand(B, R).to(dt) ** 2
        self.delta = pb.x1 - pb.x0  # [B,N,d]
        self.y = pb.y.to(dt)
        onehot = F.one_hot(pb.rater, R).to(dt) * pb.pref_mask.unsqueeze(-1)  # [B,N,R]
        self.onehot = onehot
        self.beta_n = (onehot * self.beta[:, None, :]).sum(-1)  # β of the row's rater [B,N]
        self.has_pref = pb.y.shape[1] > 0
        self._rows: _RaterRows | None = None

    @property
    def rows(self) -> _RaterRows:
        """The comparisons regrouped per (data set, rater) (built on first use)."""
        if self._rows is None:
            self._rows = _RaterRows(self.pb, self.delta, self.beta)
        return self._rows

    def pref_logits(self, vartheta: torch.Tensor) -> torch.Tensor:
        """z_n = β_i⟨Δ_n, ϑ_i⟩ for the rater i of row n: [B,M,N]."""
        u = torch.einsum("bnd,bmrd->bmnr", self.delta, vartheta)
        return (u * self.onehot.unsqueeze(1)).sum(-1) * self.beta_n.unsqueeze(1)

    def loss(self, theta, vartheta, pert: Perturbation) -> torch.Tensor:
        res = pert.reward_target - torch.einsum("btd,bmd->bmt", self.x, theta)
        l1 = 0.5 * self.inv_var * (res**2 * self.rmask.unsqueeze(1)).sum(-1)
        l2 = torch.zeros_like(l1)
        if self.has_pref:
            z = self.pref_logits(vartheta)
            l2 = (pert.pref_weight * (_softplus(z) - self.y.unsqueeze(1) * z)).sum(-1)
        dv = theta.unsqueeze(-2) - vartheta + pert.vartheta_shift  # [B,M,R,d]
        l3 = 0.5 * (self.lam2.unsqueeze(1) * (dv**2).sum(-1)).sum(-1)
        da = theta - pert.theta_anchor
        l3 = l3 + 0.5 * torch.einsum("bmd,de,bme->bm", da, self.prec0, da)
        return l1 + l2 + l3

    def grad_blocks(
        self, theta, vartheta, pert: Perturbation, curvature: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Analytic gradient [B,M,D] and the data blocks K_i = Σ_n ω_n σ'(z_n) β_i² Δ_n Δ_nᵀ [B,M,R,d,d].

        The Hessian is ``[[Σ0⁻¹ + G + Σ_i λ_i² I, −λ_i² I], [−λ_i² I, λ_i² I + K_i]]`` (see :meth:`assemble`).
        ``curvature=False``: the gradient only (the blocks are ``None``).
        """
        B, M, d = theta.shape
        R = self.R
        dv = theta.unsqueeze(-2) - vartheta + pert.vartheta_shift  # [B,M,R,d]
        lam_dv = self.lam2[:, None, :, None] * dv
        b = torch.einsum("btd,bmt->bmd", self.x, pert.reward_target) * self.inv_var
        g_theta = (
            torch.einsum("bde,bme->bmd", self.gram, theta)
            - b
            + (theta - pert.theta_anchor) @ self.prec0
            + lam_dv.sum(-2)
        )
        g_vt = -lam_dv
        k_vt = torch.zeros(B, M, R, d, d, dtype=theta.dtype, device=theta.device) if curvature else None
        if self.has_pref:
            rows = self.rows
            # per rater, only that rater's rows (padded): z [B,M,R,U]
            z = rows.logits(vartheta.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
            s = torch.sigmoid(z)
            w = rows.weights(pert.pref_weight).permute(0, 3, 1, 2)  # [B,M,R,U]
            c = rows.targets(pert.pref_weight).permute(0, 3, 1, 2)
            g_vt = g_vt + ((w * s - c).unsqueeze(-2) @ rows.dr.unsqueeze(1)).squeeze(-2)
            if curvature:
                hz = w * s * (1 - s)
                # Σ_n h_n D_n D_nᵀ as Dᵀ diag(h) D: no [N, d²] outer-product tensor in memory
                k_vt = (hz.unsqueeze(-1) * rows.dr.unsqueeze(1)).mT @ rows.dr.unsqueeze(1)
        return torch.cat([g_theta, g_vt.reshape(B, M, R * d)], -1), k_vt

    def assemble(self, k_vt: torch.Tensor) -> torch.Tensor:
        """The dense Hessian [B,M,D,D] from the data blocks of :meth:`grad_blocks`."""
        B, M, R, d, _ = k_vt.shape
        H = k_vt.new_zeros(B, M, R + 1, d, R + 1, d)
        eye = torch.eye(d, dtype=k_vt.dtype, device=k_vt.device)
        lam2 = self.lam2[:, None, :, None, None]  # [B,1,R,1,1]
        H[:, :, 0, :, 0, :] = (self.gram + self.prec0).unsqueeze(1) + lam2.sum(2) * eye
        for i in range(R):  # R (raters) is small; blocks are d×d
            off = -self.lam2[:, i, None, None, None] * eye  # [B,1,d,d]
            H[:, :, 0, :, i + 1, :] = off
            H[:, :, i + 1, :, 0, :] = off
            H[:, :, i + 1, :, i + 1, :] = k_vt[:, :, i] - off
        return H.reshape(B, M, (R + 1) * d, (R + 1) * d)

    def grad_hess(self, theta, vartheta, pert: Perturbation) -> tuple[torch.Tensor, torch.Tensor]:
        """Analytic gradient [B,M,D] and Hessian [B,M,D,D], variables ordered (θ, ϑ_1..ϑ_R)."""
        g, k_vt = self.grad_blocks(theta, vartheta, pert)
        return g, self.assemble(k_vt)

    def block_newton_step(self, g: torch.Tensor, k_vt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Newton step −H⁻¹g [B,M,D] by eliminating the ϑ_i (coupled to θ only through λ_i² I).

        A_i = λ_i² I + K_i, S = Σ0⁻¹ + G + Σ_i λ_i² A_i⁻¹ K_i (the θ Schur complement, written without the
        cancelling λ_i² − λ_i⁴ A_i⁻¹); costs (R + 1) d×d factorisations instead of one of size (R + 1)d.
        Also returns the per-problem failure flags of the factorisations ``[B,M]``.
        """
        B, M, R, d, _ = k_vt.shape
        eye = torch.eye(d, dtype=k_vt.dtype, device=k_vt.device)
        lam2 = self.lam2[:, None, :, None, None]  # [B,1,R,1,1]
        chol_a, info_a = torch.linalg.cholesky_ex(lam2 * eye + k_vt)
        ak = torch.cholesky_solve(k_vt, chol_a)  # A_i⁻¹ K_i
        schur = (self.gram + self.prec0).unsqueeze(1) + (lam2 * ak).sum(2)
        chol_s, info_s = torch.linalg.cholesky_ex(0.5 * (schur + schur.mT))
        g_th, g_vt = _split(g, d, R)
        y = torch.cholesky_solve(g_vt.unsqueeze(-1), chol_a)  # A_i⁻¹ g_i [B,M,R,d,1]
        lam2v = self.lam2[:, None, :, None, None]
        x_th = -torch.cholesky_solve((g_th + (lam2v * y).sum(2).squeeze(-1)).unsqueeze(-1), chol_s)
        x_vt = torch.cholesky_solve(-g_vt.unsqueeze(-1) + lam2v * x_th.unsqueeze(2), chol_a)
        step = torch.cat([x_th.squeeze(-1), x_vt.squeeze(-1).reshape(B, M, R * d)], -1)
        return step, (info_a != 0).any(-1) | (info_s != 0)


class _RaterRows:
    """The comparisons grouped per (data set b, rater i) into distinct directions, padded to the largest.

    Rows of one rater whose differences Δ_n are equal or opposite share the logit up to its sign, and the
    Bradley–Terry term of Eq. `rater_preference_dist` is the same function of it: with z = ⟨β_i Δ, ϑ_i⟩,
    softplus(−z) + Y z = softplus(z) − (1 − Y) z. So every group u of such rows contributes exactly

        Σ_{n∈u} ω_n [softplus(z_n) − Y_n z_n] = W_u softplus(z_u) − C_u z_u,
        W_u = Σ_{n∈u} ω_n,   C_u = Σ_{n∈u} ω_n Ỹ_n   (Ỹ_n = Y_n, or 1 − Y_n for a row opposite to u's Δ_u)

    to the perturbed loss of Eq. `final_surrogate_perturbed_loss` (likewise to its gradient and curvature):
    the same loss, evaluated on distinct directions only. Comparisons between K arms repeat pairs (N = 2000
    comparisons of 50 arms have ≈ 1000 distinct ones), so the O(N d) products of every Newton step shrink.

    ``dr [B,R,U,d]`` holds β_i Δ_u (so that z_u = ⟨dr_u, ϑ_i⟩) and ``valid [B,R,U]``; padding is zero. Each
    row n has its ``slot [B,N]`` (r·U + u, or R·U for padding rows) and its target ``ytil [B,N]``. Per-sample
    quantities put the sample axis M last (``[B,R,U,M]``) so that every product with ``dr`` is one batched
    matrix product over (b, i).
    """

    def __init__(self, pb: BTLinearProblem, delta: torch.Tensor, beta: torch.Tensor):
        B, N = pb.y.shape
        R, d = pb.num_raters, delta.shape[-1]
        dev, dt = delta.device, delta.dtype
        # canonical sign: the first non-zero coordinate of Δ positive (a zero Δ keeps its sign)
        nz = delta != 0
        first = torch.gather(delta, 2, nz.to(torch.int8).argmax(-1, keepdim=True)).squeeze(-1)
        flip = first < 0
        dc = torch.where(flip.unsqueeze(-1), -delta, delta)
        ytil = torch.where(flip, 1 - pb.y.to(dt), pb.y.to(dt))
        key = torch.where(pb.pref_mask, pb.rater, torch.full_like(pb.rater, R))  # padding sorts last
        # sort by (rater, a fixed projection of Δ): equal directions become neighbours
        proj = dc @ torch.linspace(1.0, 2.0, d, dtype=dt, device=dev).sqrt()
        o1 = torch.argsort(proj, dim=1, stable=True)
        order = torch.gather(o1, 1, torch.argsort(torch.gather(key, 1, o1), dim=1, stable=True))
        ks = torch.gather(key, 1, order)
        ds = torch.gather(dc, 1, order.unsqueeze(-1).expand(B, N, d))
        new = torch.ones(B, N, dtype=torch.bool, device=dev)
        if N > 1:
            new[:, 1:] = (ks[:, 1:] != ks[:, :-1]) | (ds[:, 1:] != ds[:, :-1]).any(-1)
        gid = new.long().cumsum(1) - 1  # group of each sorted row, counted over all raters
        onehot = F.one_hot(ks, R + 1)[..., :R]  # [B,N,R] (padding: zero)
        n_groups = (onehot * new.unsqueeze(-1)).sum(1)  # distinct directions per rater [B,R]
        u = int(n_groups.max()) if n_groups.numel() else 0
        g_start = n_groups.cumsum(1) - n_groups  # first group id of each rater [B,R]
        r_safe = ks.clamp(max=max(R - 1, 0))
        local = gid - torch.gather(g_start, 1, r_safe)  # group id within the rater
        slot_sorted = torch.where(ks < R, r_safe * u + local, torch.full_like(ks, R * u))
        self.slot = torch.empty_like(slot_sorted).scatter_(1, order, slot_sorted)  # [B,N], original order
        self.ytil = ytil * pb.pref_mask.to(dt)
        ar = torch.arange(u, device=dev)
        self.valid = ar < n_groups.unsqueeze(-1)  # [B,R,U]
        # one representative Δ per group: the last row written to the slot (all rows of a group are equal)
        rep = torch.zeros(B, R * u + 1, d, dtype=dt, device=dev)
        rep.scatter_(1, slot_sorted.unsqueeze(-1).expand(B, N, d), ds)
        vf = self.valid.to(dt)
        self.dr = rep[:, : R * u].reshape(B, R, u, d) * (beta[:, :, None, None] * vf.unsqueeze(-1))
        self.nr = u
        self.R = R

    def _scatter(self, v: torch.Tensor) -> torch.Tensor:
        """Per-row ``v [B,N,M]`` summed into the groups: ``[B,R,U,M]`` (rows of M added at once)."""
        B, N, M = v.shape
        size = self.R * self.nr + 1
        flat = (self.slot + size * torch.arange(B, device=v.device).unsqueeze(1)).reshape(-1)
        out = v.new_zeros(B * size, M).index_add_(0, flat, v.reshape(B * N, M))
        return out.reshape(B, size, M)[:, :-1].reshape(B, self.R, self.nr, M)

    def weights(self, w: torch.Tensor) -> torch.Tensor:
        """Group weights W_u = Σ_{n∈u} ω_n: ``w [B,M,N]`` → ``[B,R,U,M]`` (zero on padding)."""
        return self._scatter(w.mT.contiguous())

    def targets(self, w: torch.Tensor) -> torch.Tensor:
        """Group targets C_u = Σ_{n∈u} ω_n Ỹ_n: ``w [B,M,N]`` → ``[B,R,U,M]``."""
        return self._scatter(w.mT * self.ytil.unsqueeze(-1))

    def weights_targets(self, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`weights` and :meth:`targets` with one transposition of ``w``."""
        wt = w.mT.contiguous()
        return self._scatter(wt), self._scatter(wt * self.ytil.unsqueeze(-1))

    def logits(self, vartheta: torch.Tensor) -> torch.Tensor:
        """``vartheta [B,R,d,M]`` → z ``[B,R,U,M]``."""
        return self.dr @ vartheta

    def pull(self, c: torch.Tensor) -> torch.Tensor:
        """``Σ_u c_u dr_u`` per (b, i, sample): ``c [B,R,U,M]`` → ``[B,R,d,M]``."""
        return self.dr.mT @ c


def _take(t: torch.Tensor, idx: torch.Tensor | None) -> torch.Tensor:
    """``t[b, ..., idx[b, k]]``: gather along the last (sample) axis with per-data-set indices ``[B,K]``.

    ``idx=None`` stands for all columns in order (``t`` itself)."""
    if idx is None:
        return t
    shape = (idx.shape[0],) + (1,) * (t.dim() - 2) + (idx.shape[1],)
    return torch.gather(t, -1, idx.reshape(shape).expand(*t.shape[:-1], idx.shape[1]))


def _put(t: torch.Tensor, idx: torch.Tensor | None, v: torch.Tensor) -> None:
    """In place ``t[b, ..., idx[b, k]] = v[b, ..., k]`` (the inverse of :func:`_take`)."""
    if idx is None:
        if v is not t:
            t.copy_(v)
        return
    shape = (idx.shape[0],) + (1,) * (t.dim() - 2) + (idx.shape[1],)
    t.scatter_(-1, idx.reshape(shape).expand_as(v), v)


def _compact(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices ``[B,K]`` putting the True entries of ``mask [B,M]`` first (K: most per row), and the mask."""
    k = int(mask.sum(1).max())
    order = torch.argsort((~mask).to(torch.int32), dim=1, stable=True)[:, :k]
    return order, torch.gather(mask, 1, order)


def spd_cholesky(a: torch.Tensor) -> torch.Tensor:
    """Cholesky factors of symmetric positive (semi-)definite matrices ``a [..., n, n]``; where round-off
    makes a factorisation fail, the smallest of the jitters 1e-12, 1e-9, 1e-6 (relative to the mean
    diagonal) that succeeds is added to the whole batch."""
    chol, info = torch.linalg.cholesky_ex(a)  # no copy of `a` where no jitter is needed (the usual case)
    if not bool((info != 0).any()):
        return chol
    scale = a.diagonal(dim1=-2, dim2=-1).abs().mean(-1)[..., None, None].clamp_min(1e-300)
    eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
    for jitter in (1e-12, 1e-9, 1e-6):
        chol, info = torch.linalg.cholesky_ex(a + jitter * scale * eye)
        if not bool((info != 0).any()):
            break
    return chol


def _spd_inverse(a: torch.Tensor) -> torch.Tensor:
    """Inverse of symmetric positive definite matrices (a tiny jitter if a Cholesky fails numerically)."""
    inv = torch.cholesky_inverse(spd_cholesky(a))
    return 0.5 * (inv + inv.mT)


class _NewtonCG:
    """Inexact Newton for the B×M perturbed problems: preconditioned CG on exact Hessian–vector products.

    For large d the Newton system of one problem has dimension D = (R+1)d and forming/factoring its Hessian
    costs O(N d² + D³) per problem and iteration. Here each Newton step is solved by PCG, whose products
    with the exact Hessian cost O(N d + D d) per problem; the preconditioner is the Hessian of the data
    set with the *sample-averaged* curvature ω_n σ'(z_n), factored once per data set (not per sample) by
    block elimination of the ϑ_i (they couple to θ only through λ_i² I):

        A_i = λ_i² I + K̄_i,   S = Σ0⁻¹ + G + Σ_i λ_i² A_i⁻¹ K̄_i   (the Schur complement of the θ block),

    rebuilt after the first step, every 4 steps and whenever half of the remaining problems have
    converged (a few left ones get a preconditioner close to their own Hessian). Steps are taken with
    the same Armijo backtracking as the direct solver, the forcing term follows Eisenstat–Walker
    (choice 2), and problems that have converged are dropped from the batch (outer and inner loop), so
    the answer and its convergence test (gradient 2-norm ≤ tol) are those of the direct solver; only the
    linear algebra differs. The shared preconditioner is what makes this cheap: the perturbed problems of
    one data set differ only in their weights, anchors and right-hand sides, so one factorisation serves
    all M of them (per-sample factorisations would cost as much as direct Newton).
    The products inside CG run mostly in float32 (see :meth:`newton_step`).

    Variables are columns ``[B, D, M]`` (θ first, then ϑ_1..ϑ_R) so that every product with the data or
    the preconditioner is one batched matrix product over the samples.
    """

    max_cg = 100  # PCG iterations per Newton step (a truncated step is still a descent direction)

    def __init__(self, terms: _Terms, pert: Perturbation, direct: bool = False):
        self.t = terms
        B, M, d = pert.theta_anchor.shape
        self.B, self.M, self.d, self.R = B, M, d, terms.R
        eye = torch.eye(d, dtype=terms.prec0.dtype, device=terms.prec0.device)
        self.lam2 = terms.lam2[:, :, None, None]  # [B,R,1,1]
        self.a_tt = terms.gram + terms.prec0 + terms.lam2.sum(-1)[:, None, None] * eye  # [B,d,d]
        self.rows = terms.rows if terms.has_pref else None
        self.has_reward = terms.x.shape[1] > 0
        data = {  # the sample axis last, contiguous (products over the samples are matrix products)
            "b": torch.einsum("btd,bmt->bdm", terms.x, pert.reward_target) * terms.inv_var,
            "target": pert.reward_target.mT,  # [B,T,M]
            "anchor": pert.theta_anchor.mT,  # [B,d,M]
            "shift": pert.vartheta_shift.permute(0, 2, 3, 1),  # [B,R,d,M]
        }
        self.data = {k: v.contiguous() for k, v in data.items()}
        if self.rows is not None:
            self.data["w"], self.data["c"] = self.rows.weights_targets(pert.pref_weight)  # [B,R,U,M]
            self.data["pc"] = self.rows.pull(self.data["c"])  # Σ_u C_u dr_u [B,R,d,M], fixed
        # direct: exact per-sample Newton steps (block elimination, data blocks K_i by one matrix product)
        self.direct = direct
        if direct and self.rows is not None:
            dr = self.rows.dr
            self.dd = (dr.unsqueeze(-1) * dr.unsqueeze(-2)).flatten(-2)  # dr_u dr_uᵀ [B,R,U,d²]
        # loose Newton steps use float32 for the O(N d) products and the preconditioner (see solve)
        self.low = torch.float32 if terms.prec0.dtype == torch.float64 else None
        self.dr_low = self.rows.dr.to(self.low) if self.rows is not None and self.low is not None else None

    # ------------------------------------------------------------------ loss, gradient, Hessian products
    def _split(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        B, K = z.shape[0], z.shape[-1]
        return z[:, : self.d], z[:, self.d :].reshape(B, self.R, self.d, K)

    def loss(
        self, z: torch.Tensor, data: dict, value: bool = True, derivs: bool = True
    ) -> tuple[torch.Tensor, tuple]:
        """Loss ``[B,K]`` at columns z, and the pieces :meth:`grad` reuses at the same point.

        With exact steps (``direct``) the comparison terms can skip the loss value (``value=False``: the
        returned loss is then incomplete and must not be used) or the pieces for :meth:`grad`."""
        t = self.t
        th, vt = self._split(z)
        dv = th.unsqueeze(1) - vt + data["shift"]  # [B,R,d,K]
        da = th - data["anchor"]
        p0da = t.prec0 @ da
        loss = 0.5 * (self.lam2.squeeze(-1) * (dv**2).sum(-2)).sum(1) + 0.5 * (da * p0da).sum(1)
        if self.has_reward:
            res = data["target"] - t.x @ th  # [B,T,K]
            loss = loss + 0.5 * t.inv_var * (res**2 * t.rmask.unsqueeze(-1)).sum(1)
        zz = None
        if self.rows is not None and self.direct:
            l2, zz = self._data_terms(vt, data, value, derivs)  # zz: (Σ_u ω σ dr_u, K_i blocks)
            loss = loss + l2
        elif self.rows is not None:
            zz = self.rows.logits(vt)  # [B,R,U,K]
            sp = _softplus(zz)
            loss = loss + (
                torch.linalg.vecdot(data["w"], sp, dim=2) - torch.linalg.vecdot(data["c"], zz, dim=2)
            ).sum(1)
        return loss, (th, dv, p0da, zz)

    chunk = 128  # samples per pass of :meth:`_data_terms` (its [U, chunk] temporaries stay in cache)

    def _data_terms(
        self, vt: torch.Tensor, data: dict, value: bool, derivs: bool
    ) -> tuple[torch.Tensor, tuple]:
        """The comparison terms for the exact steps, in one pass over chunks of the samples.

        Returns Σ_u W_u softplus(z_u) − C_u z_u ``[B,K]``, and for :meth:`grad` Σ_u W_u σ(z_u) dr_u
        ``[B,R,d,K]`` and the data blocks K_i = Σ_u W_u σ'(z_u) dr_u dr_uᵀ, flattened, ``[B,R,d²,K]``
        (one matrix product with the stored outer products; the per-comparison curvature is not kept).
        """
        rows = self.rows
        B, R, d, K = vt.shape
        l2 = vt.new_zeros(B, K)
        pull = vt.new_empty(B, R, d, K)
        blocks = vt.new_empty(B, R, d * d, K)
        ddt = self.dd.mT  # [B,R,d²,U]
        for a in range(0, K, self.chunk):
            sl = slice(a, a + self.chunk)
            zz = rows.dr @ vt[..., sl]  # [B,R,U,k]
            w = data["w"][..., sl]
            if value:
                l2[:, sl] = (
                    torch.linalg.vecdot(w, _softplus(zz), dim=2)
                    - torch.linalg.vecdot(data["c"][..., sl], zz, dim=2)
                ).sum(1)
            if not derivs:
                continue
            s = torch.sigmoid(zz)
            ws = w * s
            pull[..., sl] = rows.pull(ws)
            blocks[..., sl] = ddt @ (ws - ws * s)
        return l2, (pull, blocks)

    def grad(self, data: dict, cache: tuple) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Gradient ``[B,D,K]`` and curvature ω σ'(z) ``[B,R,U,K]`` at the point of :meth:`loss`.

        With exact steps (``direct``) the curvature comes as the data blocks K_i ``[B,R,d²,K]`` instead."""
        th, dv, p0da, zz = cache
        lam_dv = self.lam2 * dv
        g_th = self.t.gram @ th - data["b"] + p0da + lam_dv.sum(1)
        g_vt = -lam_dv
        h = None
        if zz is not None and self.direct:
            pull, h = zz  # h: the data blocks [B,R,d²,K] (see _data_terms)
            g_vt = g_vt + pull - data["pc"]
        elif zz is not None:
            w = data["w"]
            s = torch.sigmoid(zz)
            ws = w * s
            g_vt = g_vt + self.rows.pull(ws) - data["pc"]
            h = ws - ws * s  # ω σ'(z)
        return torch.cat([g_th, g_vt.flatten(1, 2)], 1), h

    def hvp(self, v: torch.Tensor, h: torch.Tensor | None, low: bool = False) -> torch.Tensor:
        """Exact Hessian–vector products ``[B,D,K]`` (curvature h from :meth:`grad`).

        ``low``: the data products (the O(N d) part) in float32, h given in float32 (see :meth:`solve`).
        """
        vth, vvt = self._split(v)
        out_th = self.a_tt @ vth - (self.lam2 * vvt).sum(1)
        out_vt = self.lam2 * (vvt - vth.unsqueeze(1))
        if self.rows is not None:
            if low:
                dr = self.dr_low
                out_vt = out_vt + (dr.mT @ (h * (dr @ vvt.to(dr.dtype)))).to(v.dtype)
            else:
                out_vt = out_vt + self.rows.pull(h * self.rows.logits(vvt))
        return torch.cat([out_th, out_vt.flatten(1, 2)], 1)

    # ------------------------------------------------------------------ preconditioner
    def preconditioner(self, hbar: torch.Tensor | None):
        """``apply(r)``: the block-eliminated inverse Hessian with shared curvature ``hbar [B,R,U]``."""
        t = self.t
        B, R, d = self.B, self.R, self.d
        eye = torch.eye(d, dtype=t.prec0.dtype, device=t.prec0.device)
        if self.rows is not None and hbar is not None and self.direct:
            kbar = hbar.reshape(B, R, d, d)  # the samples' mean data block
        elif self.rows is not None and hbar is not None:
            dr = self.rows.dr
            kbar = dr.mT @ (dr * hbar.unsqueeze(-1))  # [B,R,d,d]
        else:
            kbar = torch.zeros(B, R, d, d, dtype=eye.dtype, device=eye.device)
        a_inv = _spd_inverse(self.lam2 * eye + kbar)  # [B,R,d,d]
        schur = t.prec0 + t.gram + (self.lam2 * (a_inv @ kbar)).sum(1)
        s_inv = _spd_inverse(0.5 * (schur + schur.mT))
        mats = {False: (a_inv, s_inv, self.lam2)}
        if self.low is not None:
            mats[True] = tuple(m.to(self.low) for m in mats[False])

        def apply(r: torch.Tensor, low: bool = False) -> torch.Tensor:
            a_inv, s_inv, lam2 = mats[low]
            r_th, r_vt = self._split(r.to(a_inv.dtype))
            y = a_inv @ r_vt  # [B,R,d,K]
            x_th = s_inv @ (r_th + (lam2 * y).sum(1))
            x_vt = y + lam2 * (a_inv @ x_th.unsqueeze(1))
            return torch.cat([x_th, x_vt.flatten(1, 2)], 1).to(r.dtype)

        return apply

    # ------------------------------------------------------------------ solvers
    def pcg(self, g, h, live, thr, prec, low: bool = False) -> torch.Tensor:
        """Approximately solve H x = −g per column until ‖H x + g‖ ≤ thr (live columns only)."""
        B, _, K = g.shape
        x = torch.zeros_like(g)
        r = -g * live.unsqueeze(1)
        on = live & (_norm(r) > thr)
        if not bool(on.any()):
            return x
        if low and h is not None:
            h = h.to(self.low)
        # work on the columns still in play only (sub); their solution xs is scattered into x at the end
        sub, on = _compact(on)
        r, thr = _take(r, sub), _take(thr, sub)
        h = None if h is None else _take(h, sub)
        xs = torch.zeros_like(r)
        zz = prec(r, low)
        p = zz * on.unsqueeze(1)
        rz = _dot(r, zz)
        for _ in range(self.max_cg):
            hp = self.hvp(p, h, low)
            php = _dot(p, hp)
            on = on & (php > 0)
            a = torch.where(on, rz / torch.where(on, php, torch.ones_like(php)), torch.zeros_like(php))
            xs = xs + a.unsqueeze(1) * p
            r = r - a.unsqueeze(1) * hp
            on = on & (_norm(r) > thr)
            if not bool(on.any()):
                break
            if int(on.sum(1).max()) <= 0.75 * on.shape[1]:  # drop the columns that are done
                _put(x, sub, xs)
                idx, on = _compact(on)
                sub, xs, r, p, rz, thr = (_take(v, idx) for v in (sub, xs, r, p, rz, thr))
                h = None if h is None else _take(h, idx)
            zz = prec(r, low)
            rz_new = _dot(r, zz)
            beta = torch.where(on, rz_new / torch.where(on, rz, torch.ones_like(rz)), torch.zeros_like(rz))
            p = (zz + beta.unsqueeze(1) * p) * on.unsqueeze(1)
            rz = rz_new
        _put(x, sub, xs)
        return x

    def newton_step(self, g, h, live, thr, gn, prec) -> torch.Tensor:
        """Inexact Newton step: ‖H x + g‖ ≤ thr per live column, the products mostly in float32.

        The O(N d) data products and the preconditioner run in float32 (≈ 2–3× faster); the CG vectors,
        the rest of the Hessian and everything outside CG stay float64. Loose solves (thr ≥ 10⁻³ ‖g‖) are
        taken as they are — float32's error, ~10⁻⁷ relative to the data curvature, is far below what they
        ask for. For tight solves the true residual is then checked in float64, and columns that miss thr
        get a float64 CG correction; so every step meets its forcing condition in float64 arithmetic.
        """
        if self.direct:
            return self.exact_step(g, h, live)
        if self.low is None:
            return self.pcg(g, h, live, thr, prec)
        step = self.pcg(g, h, live, thr, prec, low=True)
        tight = live & (thr < _LOOSE * gn)
        if bool(tight.any()):
            idx, sel = _compact(tight)
            res = self.hvp(_take(step, idx), None if h is None else _take(h, idx)) + _take(g, idx)
            need = sel & (_norm(res) > _take(thr, idx))
            if bool(need.any()):
                fix = self.pcg(res, None if h is None else _take(h, idx), need, _take(thr, idx), prec)
                _put(step, idx, _take(step, idx) + fix)
        return step

    def exact_step(self, g: torch.Tensor, h: torch.Tensor | None, live: torch.Tensor) -> torch.Tensor:
        """The exact Newton step −H⁻¹g per live column (zero elsewhere; NaN where a factorisation failed).

        The data blocks K_i = Σ_u h_u dr_u dr_uᵀ of all samples come from :meth:`_data_terms` (a matrix
        product with the stored outer products); the ϑ_i are eliminated as in
        :meth:`_Terms.block_newton_step`:
        A_i = λ_i² I + K_i, S = Σ0⁻¹ + G + Σ_i λ_i² A_i⁻¹ K_i, x_θ = −S⁻¹(g_θ + Σ_i λ_i² A_i⁻¹ g_i),
        x_i = A_i⁻¹(λ_i² x_θ − g_i). Cheaper than CG for small d (O(U d²) per sample and step, in one GEMM).
        """
        t, d, R = self.t, self.d, self.R
        B, _, K = g.shape
        eye = torch.eye(d, dtype=g.dtype, device=g.device)
        lam2 = self.lam2.unsqueeze(2)  # [B,R,1,1,1]
        if h is not None:
            k_vt = h.mT.reshape(B, R, K, d, d)  # the data blocks of _data_terms
        else:
            k_vt = g.new_zeros(B, R, K, d, d)
        chol_a, info_a = torch.linalg.cholesky_ex(lam2 * eye + k_vt)
        ak = torch.cholesky_solve(k_vt, chol_a)  # A_i⁻¹ K_i
        schur = (t.gram + t.prec0).unsqueeze(1) + (lam2 * ak).sum(1)  # [B,K,d,d]
        chol_s, info_s = torch.linalg.cholesky_ex(0.5 * (schur + schur.mT))
        g_th = g[:, :d].mT.unsqueeze(-1)  # [B,K,d,1]
        g_vt = g[:, d:].reshape(B, R, d, K).permute(0, 1, 3, 2).unsqueeze(-1)  # [B,R,K,d,1]
        y = torch.cholesky_solve(g_vt, chol_a)
        x_th = -torch.cholesky_solve(g_th + (lam2 * y).sum(1), chol_s)  # [B,K,d,1]
        x_vt = torch.cholesky_solve(lam2 * x_th.unsqueeze(1) - g_vt, chol_a)  # [B,R,K,d,1]
        step = torch.cat([x_th.squeeze(-1).mT, x_vt.squeeze(-1).permute(0, 1, 3, 2).reshape(B, R * d, K)], 1)
        failed = (info_a != 0).any(1) | (info_s != 0)
        step = torch.where(failed.unsqueeze(1), torch.full_like(step, float("nan")), step)
        return torch.where(live.unsqueeze(1), step, torch.zeros_like(step))

    def solve(self, z: torch.Tensor, tol: float, max_iter: int):
        """Minimise from columns ``z [B,D,M]``; returns (z, loss, grad_norm, iterations).

        Armijo backtracking on the loss. With exact steps, a column whose full step was accepted and
        halved its gradient norm is in Newton's region of quadratic convergence; from then on its steps
        are judged by the decrease of ½‖g‖², for which −H⁻¹g is a descent direction too
        (gᵀH(−H⁻¹g) = −‖g‖²) and which needs no loss value (computed once more at the end).
        """
        data = self.data
        z = z.clone()
        merit = self.direct and self.rows is not None
        loss, cache = self.loss(z, data)
        g, h = self.grad(data, cache)
        gn = _norm(g)  # [B,M]
        quad = torch.zeros_like(gn, dtype=torch.bool)
        st = _Columns(z, g, h, loss, gn, torch.full_like(gn, 0.5), quad)
        it = 0
        prec = None
        built = (0, 0)
        while it < max_iter and bool((st.gn > tol).any()):
            it += 1
            idx, live = _in_play(st.gn > tol)
            c = st.take(idx)
            dc = {k: _take(v, idx) for k, v in data.items()}
            built, prec = self._refresh_preconditioner(it, built, live, c.h, prec)
            step, slope, c.loss, c.quad = self._descent_step(c, dc, live, tol, prec)
            value = bool((live & ~c.quad).any())  # some column still judged by its loss
            alpha, new = self._line_search(c, dc, step, slope, live, tol, merit, value)
            new.z = c.z + alpha.unsqueeze(1) * step  # columns not live are dropped by put
            if merit:
                new.quad = c.quad | (live & (alpha == 1) & (new.gn <= 0.5 * c.gn))
                _put(st.quad, idx, new.quad)
            new.eta = _forcing_term(new.gn, c.gn, c.eta)
            st.put(idx, live, c, new, value)
        if bool(st.quad.any()):
            st.loss = self.loss(st.z, data, derivs=False)[0]
        return st.z, st.loss, st.gn, it

    def _refresh_preconditioner(
        self,
        it: int,
        built: tuple[int, int],
        live: torch.Tensor,
        hc: torch.Tensor | None,
        prec: Callable | None,
    ) -> tuple[tuple[int, int], Callable]:
        """The shared preconditioner, rebuilt from the live columns' mean curvature when due.

        Due at the start, at the first step's points, then every 4 steps or when half the problems have
        converged (the rest get a preconditioner closer to their own); ``built`` = (iteration, live count)
        of the last build.
        """
        n_live = int(live.sum())
        if it <= 2 or it - built[0] >= 4 or n_live <= built[1] // 2:
            built = (it, n_live)
            hbar = None
            if hc is not None:
                lv = live.to(hc.dtype)[:, None, None, :]
                hbar = (hc * lv).sum(-1) / lv.sum(-1).clamp_min(1.0)
            prec = self.preconditioner(hbar)
        return built, prec

    def _descent_step(
        self, c: _Columns, dc: dict, live: torch.Tensor, tol: float, prec: Callable
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The inexact Newton step ``[B,D,K]`` of the columns ``c``, its slope gᵀstep, and the columns'
        loss and quadratic-region flags (refreshed where a column falls back to a gradient step)."""
        thr = torch.maximum(c.eta * c.gn, torch.full_like(c.gn, 0.25 * tol))
        step = self.newton_step(c.g, c.h, live, thr, c.gn, prec)
        slope = _dot(c.g, step)
        lc, qc = c.loss, c.quad
        bad = live & ~(slope < 0)  # cannot happen for SPD H; fall back to a preconditioned gradient step
        if bool(bad.any()):
            step = torch.where(bad.unsqueeze(1), -prec(c.g), step)
            slope = _dot(c.g, step)
            if bool((bad & qc).any()):  # a gradient step descends on the loss only: fresh loss values
                lc, qc = self.loss(c.z, dc, derivs=False)[0], qc & ~bad
        return step, slope, lc, qc

    def _line_search(
        self,
        c: _Columns,
        dc: dict,
        step: torch.Tensor,
        slope: torch.Tensor,
        live: torch.Tensor,
        tol: float,
        merit: bool,
        value: bool,
    ) -> tuple[torch.Tensor, _Columns]:
        """Step lengths α ``[B,K]`` halved from 1 (at most 30 times) until every live column descends.

        A column descends by the Armijo condition on its loss, or (in the quadratic region, ``merit``) by
        ‖g‖ ≤ (1 − 10⁻⁴α)‖g₀‖ or ‖g‖ ≤ ``tol``. Also returns the loss, gradient, curvature and gradient
        norm at the accepted points (``z``, ``eta`` and ``quad`` left for the caller).
        """
        alpha = torch.ones_like(slope)
        for _ in range(30):
            new_loss, cache = self.loss(c.z + alpha.unsqueeze(1) * step, dc, value=value)
            if merit:
                new_g, new_h = self.grad(dc, cache)
                new_gn = _norm(new_g)
                g_ok = (new_gn <= (1 - 1e-4 * alpha) * c.gn) | (new_gn <= tol)
            else:
                g_ok = torch.zeros_like(live)
            tiny = -slope <= 1e-12 * (1 + c.loss.abs())
            ok = torch.where(c.quad, g_ok, (new_loss <= c.loss + 1e-4 * alpha * slope) | tiny) | ~live
            if bool(ok.all()):
                break
            alpha = torch.where(ok, alpha, 0.5 * alpha)
        else:  # backtracking gave up: take the last step, evaluated afresh
            new_loss, cache = self.loss(c.z + alpha.unsqueeze(1) * step, dc, value=value)
            if merit:
                new_g, new_h = self.grad(dc, cache)
                new_gn = _norm(new_g)
        if not merit:
            new_g, new_h = self.grad(dc, cache)
            new_gn = _norm(new_g)
        return alpha, _Columns(c.z, new_g, new_h, new_loss, new_gn, c.eta, c.quad)


@dataclass
class _Columns:
    """The per-column state of :meth:`_NewtonCG.solve` (sample axis last): iterate ``z [B,D,M]``, gradient
    ``g [B,D,M]``, curvature ``h`` (or ``None``), ``loss``, gradient norm ``gn``, forcing term ``eta`` and
    quadratic-region flag ``quad`` (all ``[B,M]``)."""

    z: torch.Tensor
    g: torch.Tensor
    h: torch.Tensor | None
    loss: torch.Tensor
    gn: torch.Tensor
    eta: torch.Tensor
    quad: torch.Tensor

    def take(self, idx: torch.Tensor | None) -> _Columns:
        """The columns ``idx [B,K]`` (:func:`_take`; ``None``: these very tensors)."""
        h = None if self.h is None else _take(self.h, idx)
        z, g, loss, gn, eta, quad = (
            _take(v, idx) for v in (self.z, self.g, self.loss, self.gn, self.eta, self.quad)
        )
        return _Columns(z, g, h, loss, gn, eta, quad)

    def put(
        self, idx: torch.Tensor | None, live: torch.Tensor, old: _Columns, new: _Columns, value: bool
    ) -> None:
        """Write ``new`` back to the columns ``idx`` where ``live`` (elsewhere ``old``; ``quad`` aside).

        ``value=False``: ``new.loss`` lacks the comparison terms; those columns' loss is redone at the end.
        """
        lv = live.unsqueeze(1)
        _put(self.z, idx, torch.where(lv, new.z, _take(self.z, idx)))
        _put(self.g, idx, torch.where(lv, new.g, old.g))
        if value:
            _put(self.loss, idx, torch.where(live, new.loss, old.loss))
        _put(self.gn, idx, torch.where(live, new.gn, old.gn))
        _put(self.eta, idx, torch.where(live, new.eta, old.eta))
        if self.h is not None and idx is None:
            self.h = new.h  # columns out of play did not move: their curvature is unchanged
        elif self.h is not None:
            _put(self.h, idx, torch.where(live[:, None, None, :], new.h, old.h))


def _in_play(todo: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Column indices ``[B,K]`` of the unconverged problems ``todo [B,M]`` and their mask ``[B,K]``;
    ``None`` (no gathering) while most columns are in play."""
    if int(todo.sum(1).max()) > 0.75 * todo.shape[1]:
        return None, todo
    return _compact(todo)


def _forcing_term(new_gn: torch.Tensor, gn: torch.Tensor, eta: torch.Tensor) -> torch.Tensor:
    """The next CG tolerance: Eisenstat–Walker choice 2 (γ = 0.9, α = 2) with its safeguard, capped at 0.5."""
    ew = 0.9 * (new_gn / gn.clamp_min(1e-300)) ** 2
    prev = 0.9 * eta**2
    return torch.where(prev > 0.1, torch.maximum(ew, prev), ew).clamp(max=0.5)


_LOOSE = 1e-3  # Newton-CG solves at least this loose (relative residual) skip the float64 check


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Column inner products ``[B,K]`` of ``[B,D,K]`` tensors."""
    return torch.linalg.vecdot(a, b, dim=1)


def _norm(a: torch.Tensor) -> torch.Tensor:
    return _dot(a, a).sqrt()


def _split(z: torch.Tensor, d: int, R: int) -> tuple[torch.Tensor, torch.Tensor]:
    return z[..., :d], z[..., d:].reshape(*z.shape[:-1], R, d)


_DIRECT_MAX_DIM = 8  # Newton-CG's batched Newton systems are solved exactly (per sample) up to this d


SOLVERS = ("auto", "newton", "newton-cg")
_BLOCK_MIN_DIM = 32  # direct Newton eliminates the ϑ_i from this d on


def _use_cg(d: int, M: int) -> bool:
    """``solver="auto"``: Newton-CG for many samples per data set (or several and a large d).

    Measured on one CPU thread (d ∈ [3, 256], N ∈ [20, 2000], R ∈ [1, 3], B ∈ [1, 100]): Newton-CG is faster
    from M ≈ 16 samples per data set on (0.6–0.9× the time for d ≤ 6, ~10× for d = 128) and for d ≥ 32
    already with a few samples; with fewer samples the direct solver's per-problem factorisation is as
    cheap as the shared one and has no per-CG-iteration overhead.
    """
    return M >= 16 or (M >= 4 and d >= _BLOCK_MIN_DIM)


def newton_solve(
    problem: BTLinearProblem,
    pert: Perturbation,
    *,
    init: MAPResult | tuple[torch.Tensor, torch.Tensor] | None = None,
    tol: float = 1e-6,
    max_iter: int = 50,
    return_hessian: bool = False,
    solver: str = "auto",
    linear_solve: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> MAPResult:
    """Minimise the perturbed loss for all B×M problems at once (damped Newton, Armijo backtracking).

    ``solver``: ``"newton"`` solves each Newton system directly (dense Cholesky of the (R+1)d Hessian);
    ``"newton-cg"`` solves it by preconditioned CG with exact Hessian products (:class:`_NewtonCG`, much
    cheaper for large d and many samples); ``"auto"`` picks by a flop count: for d ≤ 8 exact per-sample
    steps in :class:`_NewtonCG`'s batched layout (the Hessian's data blocks of all samples from one matrix
    product, :meth:`_NewtonCG.exact_step`; ``"newton"`` where the Hessian is returned), otherwise CG from
    M ≥ 16 samples. Both minimise the same loss
    to the same tolerance (gradient 2-norm ≤ ``tol``). ``iters`` counts Newton steps.
    ``linear_solve`` (``g [B,M,D] → step [B,M,D]``, a descent direction such as −H̃⁻¹g for an SPD H̃ the
    caller has factored, e.g. the Hessian at a nearby problem's optimum): replaces the Newton system's
    solve in the direct loop (same line search and convergence test; the Hessian's blocks are not formed).

    Returns batched results ``[B,M,...]`` (the caller squeezes B for unbatched problems).
    """
    if solver not in SOLVERS:
        raise ConfigError("solver", solver, f"must be one of {list(SOLVERS)}")
    checks = ENGINE_OPTIONS["bootstrap"]  # fit's, for every caller (perturbed_map, map_estimate, laplace)
    tol, max_iter = checks["tol"](tol, "tol"), checks["max_iter"](max_iter, "max_iter")
    pb = problem.batch_view()
    terms = _Terms(pb)
    theta, vartheta = _start_point(pb, pert, init)
    d, M = pb.dim, pert.theta_anchor.shape[1]
    exact = solver == "auto" and d <= _DIRECT_MAX_DIM  # batched exact steps in the columns layout
    use_cg = solver == "newton-cg" or (solver == "auto" and not return_hessian and (exact or _use_cg(d, M)))
    if linear_solve is not None and (solver == "newton-cg" or return_hessian):
        raise ConfigError("linear_solve", "given", "needs the direct solver and return_hessian=False")
    if use_cg and linear_solve is None:
        return _solve_cg(terms, pert, theta, vartheta, tol, max_iter, exact, return_hessian)
    return _solve_direct(terms, pert, theta, vartheta, tol, max_iter, return_hessian, linear_solve)


def _start_point(
    pb: BTLinearProblem, pert: Perturbation, init: MAPResult | tuple[torch.Tensor, torch.Tensor] | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Newton's start ``(θ [B,M,d], ϑ [B,M,R,d])``: the prior anchors μ0 + θ', ϑ = θ + ϑ' unless ``init``."""
    B, M, _ = pert.theta_anchor.shape
    d, R = pb.dim, pb.num_raters
    if init is None:
        theta = pert.theta_anchor.clone()
        return theta, (theta.unsqueeze(-2) + pert.vartheta_shift).clone()
    theta, vartheta = (init.theta, init.vartheta) if isinstance(init, MAPResult) else init
    return theta.to(pb.mu0).reshape(B, M, d).clone(), vartheta.to(pb.mu0).reshape(B, M, R, d).clone()


def _solve_cg(
    terms: _Terms,
    pert: Perturbation,
    theta: torch.Tensor,
    vartheta: torch.Tensor,
    tol: float,
    max_iter: int,
    exact: bool,
    return_hessian: bool,
) -> MAPResult:
    """:func:`newton_solve` in :class:`_NewtonCG`'s columns layout (CG, or exact per-sample steps)."""
    B, M, d = theta.shape
    R = terms.R
    z0 = torch.cat([theta, vartheta.reshape(B, M, R * d)], -1).mT.contiguous()
    cg = _NewtonCG(terms, pert, direct=exact)
    zc, loss, gnorm, it = cg.solve(z0, tol, max_iter)
    theta, vartheta = _split(zc.mT.contiguous(), d, R)
    H = terms.grad_hess(theta, vartheta, pert)[1] if return_hessian else None
    return MAPResult(theta, vartheta, gnorm, gnorm <= tol, it, loss, H)


def _solve_direct(
    terms: _Terms,
    pert: Perturbation,
    theta: torch.Tensor,
    vartheta: torch.Tensor,
    tol: float,
    max_iter: int,
    return_hessian: bool,
    linear_solve: Callable[[torch.Tensor], torch.Tensor] | None,
) -> MAPResult:
    """:func:`newton_solve` with each Newton system solved directly (or by ``linear_solve``).

    Problems whose gradient norm is already ≤ ``tol`` stay where they are while the others move on.
    """
    B, M, d = theta.shape
    R = terms.R
    curv = linear_solve is None
    z = torch.cat([theta, vartheta.reshape(B, M, R * d)], -1)
    loss = terms.loss(theta, vartheta, pert)
    it = 0
    blocks = d >= _BLOCK_MIN_DIM  # eliminate the ϑ_i: (R + 1) d×d factorisations instead of one (R + 1)d
    g, k_vt = terms.grad_blocks(theta, vartheta, pert, curv)
    gnorm = g.norm(dim=-1)
    while it < max_iter and bool((gnorm > tol).any()):
        it += 1
        step = _direct_step(terms, g, k_vt, blocks, linear_solve)
        active = gnorm > tol
        alpha = _armijo(terms, pert, z, step, g, loss, active)
        z = torch.where(active.unsqueeze(-1), z + alpha.unsqueeze(-1) * step, z)
        theta, vartheta = _split(z, d, R)
        loss = torch.where(active, terms.loss(theta, vartheta, pert), loss)
        g, k_vt = terms.grad_blocks(theta, vartheta, pert, curv)
        gnorm = g.norm(dim=-1)
    theta, vartheta = _split(z, d, R)
    return MAPResult(
        theta=theta,
        vartheta=vartheta,
        grad_norm=gnorm,
        converged=gnorm <= tol,
        iters=it,
        loss=loss,
        hessian=terms.assemble(k_vt) if return_hessian else None,
    )


def _direct_step(
    terms: _Terms,
    g: torch.Tensor,
    k_vt: torch.Tensor | None,
    blocks: bool,
    linear_solve: Callable[[torch.Tensor], torch.Tensor] | None,
) -> torch.Tensor:
    """The Newton step −H⁻¹g ``[B,M,D]``: by ``linear_solve``, by eliminating the ϑ_i (``blocks``), or by a
    dense Cholesky factorisation; a gradient step −g/diag(H) where H is numerically indefinite."""
    if linear_solve is not None:
        step, bad, diag = linear_solve(g), torch.zeros(g.shape[:-1], dtype=torch.bool, device=g.device), None
    elif blocks:
        step, bad = terms.block_newton_step(g, k_vt)
        diag = terms.assemble(k_vt).diagonal(dim1=-2, dim2=-1) if bool(bad.any()) else None
    else:
        H = terms.assemble(k_vt)
        chol, info = torch.linalg.cholesky_ex(H)
        step = -torch.cholesky_solve(g.unsqueeze(-1), chol).squeeze(-1)
        bad, diag = info != 0, H.diagonal(dim1=-2, dim2=-1)
    if bool(bad.any()):  # numerically indefinite: fall back to a gradient step
        step = torch.where(bad.unsqueeze(-1), -g / diag.clamp_min(1.0), step)
    return step


def _armijo(
    terms: _Terms,
    pert: Perturbation,
    z: torch.Tensor,
    step: torch.Tensor,
    g: torch.Tensor,
    loss: torch.Tensor,
    active: torch.Tensor,
) -> torch.Tensor:
    """Step lengths α ``[B,M]``: halved from 1 (at most 30 times) until the Armijo condition
    L(z + α step) ≤ L(z) + 10⁻⁴ α gᵀstep holds for every ``active`` problem (or the slope is round-off)."""
    d, R = terms.d, terms.R
    slope = (g * step).sum(-1)  # < 0
    alpha = torch.ones(z.shape[:-1], dtype=z.dtype, device=z.device)
    for _ in range(30):
        zt = z + alpha.unsqueeze(-1) * step
        new_loss = terms.loss(*_split(zt, d, R), pert)
        tiny = -slope <= 1e-12 * (1 + loss.abs())
        ok = (new_loss <= loss + 1e-4 * alpha * slope) | tiny | ~active
        if bool(ok.all()):
            break
        alpha = torch.where(ok, alpha, 0.5 * alpha)
    return alpha


def _squeeze(res: MAPResult, batched: bool) -> MAPResult:
    if batched:
        return res
    return MAPResult(
        theta=res.theta[0],
        vartheta=res.vartheta[0],
        grad_norm=res.grad_norm[0],
        converged=res.converged[0],
        iters=res.iters,
        loss=None if res.loss is None else res.loss[0],
        hessian=None if res.hessian is None else res.hessian[0],
    )


def _as_init(init, batched: bool, M: int):
    """A warm start (``MAPResult`` or ``(theta, vartheta)``) with a leading batch axis, or ``None``."""
    if init is None:
        return None
    th, vt = (init.theta, init.vartheta) if isinstance(init, MAPResult) else init
    th, vt = torch.as_tensor(th), torch.as_tensor(vt)
    if not batched:
        th, vt = th.unsqueeze(0), vt.unsqueeze(0)
    if M == 1 and th.dim() == 2:  # a single point per data set: theta [B,d], vartheta [B,R,d]
        th, vt = th.unsqueeze(1), vt.unsqueeze(1)
    return th, vt


def perturbed_map(
    problem: BTLinearProblem,
    num_samples: int = 1,
    *,
    p_offline: float = 0.5,
    p_online: float = 1.0,
    online_reward_noise: bool = True,
    anchor_prior: bool = True,
    init: MAPResult | tuple[torch.Tensor, torch.Tensor] | None = None,
    generator: torch.Generator | None = None,
    tol: float = 1e-6,
    max_iter: int = 50,
    solver: str = "auto",
) -> MAPResult:
    """M perturbed MAP estimates per data set: approximate posterior samples of (θ, ϑ).

    Solves Eq. `final_surrogate_perturbed_loss` (warmPref-PS, ``p_offline=0.5``) or
    Eq. `surrogate_perturbed_loss` (PSPL, ``p_online=0.75, p_offline=0.6``) for ``num_samples`` = M
    independent perturbations of each of the B data sets of ``problem``. ``p_offline = p_online = 1``,
    ``online_reward_noise=False``, ``anchor_prior=False`` gives the plain MAP of lemma
    `mapestimatelemma` (M identical copies). ``init`` (a previous :class:`MAPResult` or ``(theta,
    vartheta)`` of matching shape) warm-starts Newton. ``solver`` picks the linear algebra of the Newton
    steps (see :func:`newton_solve`; the optimum does not depend on it). Output shapes: ``theta [B?,M,d]``,
    ``vartheta [B?,M,R,d]``; check ``result.converged``.
    """
    num_samples = positive_int(num_samples, "num_samples")
    pert = sample_perturbation(
        problem,
        num_samples,
        p_offline=p_offline,
        p_online=p_online,
        online_reward_noise=online_reward_noise,
        anchor_prior=anchor_prior,
        generator=generator,
    )
    init = _as_init(init, problem.batched, num_samples)
    if init is None and num_samples >= 8:
        # cold start: begin every perturbed problem at the plain MAP of its data set (one extra solve of
        # size B, cheap next to B×M) — the perturbed optima are close to it, so Newton needs fewer
        # damped steps than from the prior anchors.
        plain = map_estimate(problem, tol=tol, max_iter=max_iter, return_hessian=False)
        th, vt = plain.theta, plain.vartheta
        if not problem.batched:
            th, vt = th.unsqueeze(0), vt.unsqueeze(0)
        B = th.shape[0]
        init = (th.expand(B, num_samples, -1), vt.expand(B, num_samples, *vt.shape[-2:]))
    res = newton_solve(problem, pert, init=init, tol=tol, max_iter=max_iter, solver=solver)
    return _squeeze(res, problem.batched)


def map_estimate(
    problem: BTLinearProblem,
    *,
    tol: float = 1e-8,
    max_iter: int = 100,
    return_hessian: bool = True,
    init: MAPResult | tuple[torch.Tensor, torch.Tensor] | None = None,
    linear_solve: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> MAPResult:
    """The (unperturbed) MAP of lemma `mapestimatelemma` with its Hessian (M = 1).

    ``init`` warm-starts Newton, e.g. from the MAP before a few observations were appended: a previous
    :class:`MAPResult` (``theta [B?,1,d]``) or a ``(theta, vartheta)`` pair of shapes ``[B?,(1,)d]`` and
    ``[B?,(1,)R,d]``, the same convention as :func:`perturbed_map`'s ``init``. ``linear_solve``: the
    Newton system's solve supplied by the caller (see :func:`newton_solve`; ``g [B,1,D] → step``).
    """
    pert = sample_perturbation(
        problem, 1, p_offline=1.0, p_online=1.0, online_reward_noise=False, anchor_prior=False
    )
    init = _as_init(init, problem.batched, 1)
    res = newton_solve(
        problem,
        pert,
        init=init,
        tol=tol,
        max_iter=max_iter,
        return_hessian=return_hessian,
        linear_solve=linear_solve,
    )
    return _squeeze(res, problem.batched)


def surrogate_loss(problem: BTLinearProblem, theta: torch.Tensor, vartheta: torch.Tensor) -> torch.Tensor:
    """The unperturbed loss L1 + L2 + L3 of lemma `mapestimatelemma` at (θ [B?,M,d], ϑ [B?,M,R,d])."""
    pert = sample_perturbation(
        problem, theta.shape[-2], p_offline=1.0, p_online=1.0, online_reward_noise=False, anchor_prior=False
    )
    pb = problem.batch_view()
    th = theta if problem.batched else theta.unsqueeze(0)
    vt = vartheta if problem.batched else vartheta.unsqueeze(0)
    out = _Terms(pb).loss(th.to(pb.mu0), vt.to(pb.mu0), pert)
    return out if problem.batched else out[0]

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

* L1 is written in the seed as ½ Σ (R_s + ζ_s − ⟨A_s, θ⟩)² (i.e. σ = 1); we keep the Gaussian likelihood
  with a general σ (weight 1/σ², noise σζ). Both coincide for σ = 1, and with this scaling the bootstrap
  is *exact* posterior sampling on Gaussian–linear data (randomised least squares) — tested.
* The seed samples θ' ~ N(μ0, Σ0) and ϑ' ~ N(μ0, I/λ²) but then centres the anchor at μ0 + θ'; that
  would centre the randomised prior at 2μ0. We draw θ' ~ N(0, Σ0), ϑ' ~ N(0, I/λ²) so that the anchor
  μ0 + θ' is a draw from the prior (identical when μ0 = 0, as in the seed's experiments).
* The perturbed L2' printed in the seed has ``+ ln(...)`` inside the bracket (a sign typo); we use the
  negative log-likelihood of the lemma.

All B×M problems (B independent data sets, M perturbations each) are solved together by damped Newton
with an Armijo backtracking line search; the loss is strictly convex so Newton converges quadratically.
Convergence (gradient 2-norm ≤ ``tol``) is reported per problem, not assumed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from bayescrl.models.linear import BTLinearProblem
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


def _check_p(name: str, p: float) -> None:
    if not (0.0 < p <= 1.0):
        raise ConfigError(name, p, "Bernoulli weight probability must be in (0, 1]")


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
    """Draw the perturbation set 𝒫_t of Algorithm `alg:practical_Prefwarm-PS` (batched)."""
    _check_p("p_offline", p_offline)
    _check_p("p_online", p_online)
    if num_samples < 1:
        raise ConfigError("num_samples", num_samples, "must be >= 1")
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


class _Terms:
    """Per-problem constants of the loss, shared by the M perturbations of one data set."""

    def __init__(self, pb: BTLinearProblem):
        B, R, d = pb.y.shape[0], pb.num_raters, pb.dim
        dt = pb.mu0.dtype
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
            l2 = (pert.pref_weight * (F.softplus(z) - self.y.unsqueeze(1) * z)).sum(-1)
        dv = theta.unsqueeze(-2) - vartheta + pert.vartheta_shift  # [B,M,R,d]
        l3 = 0.5 * (self.lam2.unsqueeze(1) * (dv**2).sum(-1)).sum(-1)
        da = theta - pert.theta_anchor
        l3 = l3 + 0.5 * torch.einsum("bmd,de,bme->bm", da, self.prec0, da)
        return l1 + l2 + l3

    def grad_hess(self, theta, vartheta, pert: Perturbation) -> tuple[torch.Tensor, torch.Tensor]:
        """Analytic gradient [B,M,D] and Hessian [B,M,D,D], variables ordered (θ, ϑ_1..ϑ_R)."""
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
        h_vt = torch.zeros(B, M, R, d * d, dtype=theta.dtype, device=theta.device)
        if self.has_pref:
            z = self.pref_logits(vartheta)
            s = torch.sigmoid(z)
            gz = pert.pref_weight * (s - self.y.unsqueeze(1)) * self.beta_n.unsqueeze(1)  # [B,M,N]
            hz = pert.pref_weight * s * (1 - s) * self.beta_n.unsqueeze(1) ** 2
            g_vt = g_vt + torch.einsum("bmn,bnr,bnd->bmrd", gz, self.onehot, self.delta)
            hr = hz.unsqueeze(-1) * self.onehot.unsqueeze(1)  # [B,M,N,R]
            # Σ_n w_n Δ_n Δ_nᵀ per rater as Δᵀ diag(w) Δ: no [N, d²] outer-product tensor in memory
            wd = hr.permute(0, 1, 3, 2).unsqueeze(-1) * self.delta[:, None, None]  # [B,M,R,N,d]
            h_vt = (wd.mT @ self.delta[:, None, None]).reshape(B, M, R, d * d)
        D = (R + 1) * d
        H = theta.new_zeros(B, M, R + 1, d, R + 1, d)
        eye = torch.eye(d, dtype=theta.dtype, device=theta.device)
        lam2 = self.lam2[:, None, :, None, None]  # [B,1,R,1,1]
        H[:, :, 0, :, 0, :] = (self.gram + self.prec0).unsqueeze(1) + lam2.sum(2) * eye
        h_vt = h_vt.reshape(B, M, R, d, d)
        for i in range(R):  # R (raters) is small; blocks are d×d
            off = -self.lam2[:, i, None, None, None] * eye  # [B,1,d,d]
            H[:, :, 0, :, i + 1, :] = off
            H[:, :, i + 1, :, 0, :] = off
            H[:, :, i + 1, :, i + 1, :] = h_vt[:, :, i] - off
        g = torch.cat([g_theta, g_vt.reshape(B, M, R * d)], -1)
        return g, H.reshape(B, M, D, D)


def _split(z: torch.Tensor, d: int, R: int) -> tuple[torch.Tensor, torch.Tensor]:
    return z[..., :d], z[..., d:].reshape(*z.shape[:-1], R, d)


def newton_solve(
    problem: BTLinearProblem,
    pert: Perturbation,
    *,
    init: MAPResult | tuple[torch.Tensor, torch.Tensor] | None = None,
    tol: float = 1e-6,
    max_iter: int = 50,
    return_hessian: bool = False,
) -> MAPResult:
    """Minimise the perturbed loss for all B×M problems at once (damped Newton, Armijo backtracking).

    Returns batched results ``[B,M,...]`` (the caller squeezes B for unbatched problems).
    """
    pb = problem.batch_view()
    terms = _Terms(pb)
    B, M, _ = pert.theta_anchor.shape
    d, R = pb.dim, pb.num_raters
    if init is None:
        theta = pert.theta_anchor.clone()
        vartheta = (theta.unsqueeze(-2) + pert.vartheta_shift).clone()
    else:
        theta, vartheta = (init.theta, init.vartheta) if isinstance(init, MAPResult) else init
        theta = theta.to(pb.mu0).reshape(B, M, d).clone()
        vartheta = vartheta.to(pb.mu0).reshape(B, M, R, d).clone()
    z = torch.cat([theta, vartheta.reshape(B, M, R * d)], -1)
    loss = terms.loss(theta, vartheta, pert)
    it = 0
    g, H = terms.grad_hess(theta, vartheta, pert)
    gnorm = g.norm(dim=-1)
    while it < max_iter and bool((gnorm > tol).any()):
        it += 1
        chol, info = torch.linalg.cholesky_ex(H)
        step = -torch.cholesky_solve(g.unsqueeze(-1), chol).squeeze(-1)
        bad = info != 0
        if bad.any():  # numerically indefinite: fall back to a gradient step
            step = torch.where(bad.unsqueeze(-1), -g / H.diagonal(dim1=-2, dim2=-1).clamp_min(1.0), step)
        slope = (g * step).sum(-1)  # < 0
        alpha = torch.ones(B, M, dtype=z.dtype, device=z.device)
        active = gnorm > tol
        for _ in range(30):
            zt = z + alpha.unsqueeze(-1) * step
            new_loss = terms.loss(*_split(zt, d, R), pert)
            tiny = -slope <= 1e-12 * (1 + loss.abs())
            ok = (new_loss <= loss + 1e-4 * alpha * slope) | tiny | ~active
            if bool(ok.all()):
                break
            alpha = torch.where(ok, alpha, 0.5 * alpha)
        upd = active.unsqueeze(-1)
        z = torch.where(upd, z + alpha.unsqueeze(-1) * step, z)
        theta, vartheta = _split(z, d, R)
        loss = torch.where(active, terms.loss(theta, vartheta, pert), loss)
        g, H = terms.grad_hess(theta, vartheta, pert)
        gnorm = g.norm(dim=-1)
    theta, vartheta = _split(z, d, R)
    return MAPResult(
        theta=theta,
        vartheta=vartheta,
        grad_norm=gnorm,
        converged=gnorm <= tol,
        iters=it,
        loss=loss,
        hessian=H if return_hessian else None,
    )


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
) -> MAPResult:
    """M perturbed MAP estimates per data set: approximate posterior samples of (θ, ϑ).

    Solves Eq. `final_surrogate_perturbed_loss` (warmPref-PS, ``p_offline=0.5``) or
    Eq. `surrogate_perturbed_loss` (PSPL, ``p_online=0.75, p_offline=0.6``) for ``num_samples`` = M
    independent perturbations of each of the B data sets of ``problem``. ``p_offline = p_online = 1``,
    ``online_reward_noise=False``, ``anchor_prior=False`` gives the plain MAP of lemma
    `mapestimatelemma` (M identical copies). ``init`` (a previous :class:`MAPResult` or ``(theta,
    vartheta)`` of matching shape) warm-starts Newton. Output shapes: ``theta [B?,M,d]``,
    ``vartheta [B?,M,R,d]``; check ``result.converged``.
    """
    pert = sample_perturbation(
        problem,
        num_samples,
        p_offline=p_offline,
        p_online=p_online,
        online_reward_noise=online_reward_noise,
        anchor_prior=anchor_prior,
        generator=generator,
    )
    if init is not None and not problem.batched:
        th, vt = (init.theta, init.vartheta) if isinstance(init, MAPResult) else init
        init = (th.unsqueeze(0), vt.unsqueeze(0))
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
    res = newton_solve(problem, pert, init=init, tol=tol, max_iter=max_iter)
    return _squeeze(res, problem.batched)


def map_estimate(
    problem: BTLinearProblem, *, tol: float = 1e-8, max_iter: int = 100, return_hessian: bool = True
) -> MAPResult:
    """The (unperturbed) MAP of lemma `mapestimatelemma` with its Hessian (M = 1)."""
    pert = sample_perturbation(
        problem, 1, p_offline=1.0, p_online=1.0, online_reward_noise=False, anchor_prior=False
    )
    res = newton_solve(problem, pert, tol=tol, max_iter=max_iter, return_hessian=return_hessian)
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

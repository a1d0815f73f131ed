"""Adapters from trajectory-preference data to the Bayesian core (``bayescrl.models`` / ``.inference``).

* θ (reward) and ϑ (rater belief): a batched :class:`~bayescrl.models.linear.BTLinearProblem` whose
  comparisons are the trajectory embeddings (x0, x1) = (φ(τ0), φ(τ1)); the first N rows are D0 (offline),
  the next rows the online episodes. Solved by the core's batched Newton
  (:func:`bayescrl.inference.bootstrap.newton_solve`) — perturbed for `pspl-bootstrap`, plain (+ Hessian,
  Laplace) for `pspl`.
* η (dynamics): Dirichlet–categorical posterior over next states of every (s, a) (Eq. `eta_informed_prior`),
  counts from the H−1 in-trajectory transitions of every offline and online trajectory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from bayescrl.inference.bootstrap import MAPResult, newton_solve, sample_perturbation
from bayescrl.inference.engines import fit
from bayescrl.models.linear import BTLinearProblem
from bayescrl.models.pyro_models import bt_linear_model
from bayescrl.pbrl.data import TrajectoryPairs
from bayescrl.utils.errors import ConfigError

if TYPE_CHECKING:
    from bayescrl.utils.seeding import Streams


class TrajectoryPreferenceModel:
    """Preference rows (offline D0 then online episodes) for B seeds, with their transition indices.

    ``problem`` is the batched core problem (capacity N + K); ``tidx [B, N+K, 2(H−1)]`` holds the flat
    transition index ``(s·A + a)·S + s'`` of each row's two trajectories (for weighted Dirichlet counts).
    """

    def __init__(
        self,
        data: TrajectoryPairs,
        S: int,
        A: int,
        K: int,
        *,
        mu0: float | Tensor = 0.0,
        sigma0: float = 1.0,
        beta: float | Tensor = 1.0,
        lam: float = 1.0,
        use_offline: bool = True,
        device=None,
    ):
        B, N = data.y.shape
        d = data.phi.shape[-1]
        H = data.actions.shape[-1]
        if not sigma0 > 0:
            raise ConfigError("prior.sigma0", sigma0, "prior standard deviation must be > 0")
        self.S, self.A, self.H, self.B, self.d = S, A, H, B, d
        mu = torch.as_tensor(mu0, dtype=torch.float64, device=device).expand(d).clone()
        beta_t = torch.as_tensor(beta, dtype=torch.float64, device=device).reshape(-1, 1)
        if beta_t.shape[0] not in (1, B):
            raise ConfigError("agents.beta", beta_t.tolist(), f"one value or one per seed ({B})")
        n_off = N if use_offline else 0
        cap = n_off + K
        self.problem = BTLinearProblem.empty(
            mu,
            sigma0**2 * torch.eye(d, dtype=torch.float64, device=device),
            1.0,
            float(lam),
            batch_size=B,
            pref_capacity=max(cap, 1),
            device=device or "cpu",
        )
        self.problem.beta = beta_t.expand(B, 1).clone()  # per-seed β (e.g. estimated from each D0)
        self.tidx = torch.zeros(B, max(cap, 1), 2 * (H - 1), dtype=torch.long, device=device)
        self.n = 0
        if n_off:
            p = self.problem
            p.x0[:, :N], p.x1[:, :N] = data.phi[:, :, 0], data.phi[:, :, 1]
            p.y[:, :N] = data.y.to(torch.float64)
            p.pref_mask[:, :N] = True
            self.tidx[:, :N] = self._tidx(data)
            self.n = N

    def _tidx(self, pairs: TrajectoryPairs) -> Tensor:
        H, S, A = self.H, self.S, self.A
        s, a, s2 = pairs.states[..., : H - 1], pairs.actions[..., : H - 1], pairs.states[..., 1:H]
        return ((s * A + a) * S + s2).flatten(-2)  # [B, n, 2(H-1)]

    def append(self, pairs: TrajectoryPairs) -> None:
        """Append one online episode per seed (``pairs`` with n = 1), flagged online."""
        B = self.B
        self.problem.append_preferences(
            pairs.phi[:, 0, 0],
            pairs.phi[:, 0, 1],
            pairs.y[:, 0],
            online=torch.ones(B, dtype=torch.bool, device=pairs.y.device),
        )
        self.tidx[:, self.n] = self._tidx(pairs)[:, 0]
        self.n += 1

    def counts(self, weights: Tensor | None = None) -> Tensor:
        """Transition counts ``[B, (M,) S, A, S]`` of the used rows, optionally weighted ``[B, M, rows]``."""
        S, A, B, n = self.S, self.A, self.B, self.n
        idx = self.tidx[:, :n]  # [B, n, L]
        if weights is None:
            out = torch.zeros(B, S * A * S, dtype=torch.float64, device=idx.device)
            out.scatter_add_(
                1, idx.reshape(B, -1), torch.ones(B, idx[0].numel(), dtype=torch.float64, device=idx.device)
            )
            return out.reshape(B, S, A, S)
        M = weights.shape[1]
        w = weights[:, :, :n, None].expand(B, M, n, idx.shape[-1]).reshape(B, M, -1)
        out = torch.zeros(B, M, S * A * S, dtype=torch.float64, device=idx.device)
        out.scatter_add_(2, idx.reshape(B, 1, -1).expand(B, M, -1), w.to(torch.float64))
        return out.reshape(B, M, S, A, S)

    def solve(
        self,
        num_samples: int,
        *,
        perturbed: bool,
        p_offline: float = 0.6,
        p_online: float = 0.75,
        init: MAPResult | None = None,
        generator: Streams = None,
        tol: float = 1e-6,
        max_iter: int = 50,
        return_hessian: bool = False,
    ) -> tuple[MAPResult, Tensor]:
        """Perturbed (Eq. `surrogate_perturbed_loss`) or plain (lemma `chapter4mapestimatelemma`) MAP.

        Returns the core's :class:`MAPResult` (``theta [B, M, d]``) and the Bernoulli row weights
        ``[B, M, rows]`` that were used (all ones for the plain MAP), so the same ζ_t / ω_n can weight the
        transition terms of L1' as in the lemma.
        """
        if perturbed:
            pert = sample_perturbation(
                self.problem,
                num_samples,
                p_offline=p_offline,
                p_online=p_online,
                online_reward_noise=False,
                anchor_prior=True,
                generator=generator,
            )
        else:
            pert = sample_perturbation(
                self.problem,
                num_samples,
                p_offline=1.0,
                p_online=1.0,
                online_reward_noise=False,
                anchor_prior=False,
            )
        if init is not None and init.theta.shape[1] != num_samples:
            init = None
        res = newton_solve(
            self.problem, pert, init=init, tol=tol, max_iter=max_iter, return_hessian=return_hessian
        )
        return res, pert.pref_weight


def dirichlet_mode(alpha: Tensor) -> Tensor:
    """MAP of Dir(α) per row (last axis): ``(α − 1)/Σ(α − 1)`` for α ≥ 1.

    Rows with ``Σ(α − 1) = 0`` (α0 = 1 and no data) have a flat density, so every point is a mode; we return
    the uniform distribution there. Requires α ≥ 1 (otherwise the mode is on the boundary / undefined).
    """
    if bool((alpha < 1).any()):
        raise ConfigError("prior.alpha0", float(alpha.min()), "the Dirichlet MAP needs alpha0 >= 1")
    ex = alpha - 1.0
    tot = ex.sum(-1, keepdim=True)
    uni = torch.full_like(ex, 1.0 / ex.shape[-1])
    return torch.where(tot > 0, ex / tot.clamp_min(1e-300), uni)


def laplace_theta(res: MAPResult, d: int) -> tuple[Tensor, Tensor]:
    """Gaussian (Laplace) approximation of θ's posterior from a plain MAP with Hessian.

    Returns ``(mean [B, d], cov [B, d, d])``: the MAP and the θ-block of the inverse Hessian of the joint
    (θ, ϑ) loss, i.e. the marginal covariance of θ under the joint Gaussian approximation.
    """
    if res.hessian is None:
        raise ValueError("laplace_theta needs a MAPResult with its Hessian")
    Hm = res.hessian[:, 0]
    cov = torch.cholesky_inverse(torch.linalg.cholesky(Hm))[..., :d, :d]
    return res.theta[:, 0], 0.5 * (cov + cov.mT)


def engine_theta(
    model: TrajectoryPreferenceModel,
    engine: str,
    *,
    num_samples: int = 1000,
    seed: int | Sequence[int] = 0,
    options: dict | None = None,
) -> tuple[Tensor, Tensor]:
    """Gaussian moment-match of θ's posterior (Eq. `theta_informed_prior`, D0 + online rows) by the
    core's ``svi`` or ``nuts`` engine on the Pyro model :func:`~bayescrl.models.pyro_models.bt_linear_model`.

    Same pattern as warmPref-PS's ``bayescrl.bandits.prior.sampled_prior`` (which is bound to the bandit
    environment, so it is not reused directly): one core ``fit`` per seed (the Pyro model holds one data
    set — a documented exception to batching: these are the slow reference engines), then mean and
    covariance of ``num_samples`` θ draws from ``Posterior.mean_cov``. Seed ``s`` fits with ``seed[s]``
    (one engine seed per seed's stream), or ``seed + s`` for one integer.
    Returns ``(mean [B, d], cov [B, d, d])``.
    """
    if engine not in ("svi", "nuts"):
        raise ConfigError("agents.pspl.engine", engine, "engine_theta needs 'svi' or 'nuts'")
    p, n = model.problem, model.n
    seeds = [seed + s for s in range(model.B)] if isinstance(seed, int) else [int(x) for x in seed]
    means, covs = [], []
    for s in range(model.B):
        mask = p.pref_mask[s, :n]
        x0, x1 = p.x0[s, :n][mask], p.x1[s, :n][mask]
        kw = dict(
            mu0=p.mu0 if p.mu0.dim() == 1 else p.mu0[s],
            cov0=p.cov0 if p.cov0.dim() == 2 else p.cov0[s],
            beta=p.beta[s].reshape(1),
            lam=(p.lam if p.lam.dim() == 1 else p.lam[s]).reshape(1),
            noise_sd=1.0,
            x0=x0,
            x1=x1,
            y=p.y[s, :n][mask].to(torch.float64),
            rater=torch.zeros(x0.shape[0], dtype=torch.long, device=x0.device),
            x=x0.new_zeros(0, model.d),
            r=x0.new_zeros(0),
        )
        post = fit(bt_linear_model, kw, engine=engine, seed=seeds[s], **(options or {}))
        m, c = post.mean_cov("theta", n=num_samples, seed=seeds[s])
        means.append(m)
        covs.append(0.5 * (c + c.mT))
    return torch.stack(means), torch.stack(covs)


def reference_theta(
    data: TrajectoryPairs, S: int, A: int, *, mu0: float = 0.0, sigma0: float = 1.0
) -> Tensor:
    """Estimate-only ``θ_ref [B, d]`` for the β MLE (appendix `Estimating Rater Competence in Practice`):
    the likelihood depends on ``βθ`` only, so β is identified only relative to the scale of θ. The direction
    of the MAP of ``w = βθ`` (Bradley–Terry with β = 1, the prior ``N(μ0, σ0² I)`` as regulariser) and the
    prior's RMS length ``√(‖μ0‖² + d σ0²)``; :func:`bayescrl.raters.competence.beta_mle_given_theta` on
    ``data.margins(reference_theta(...))`` is then the estimate-only MLE (``model.beta_estimate: mle``;
    ``mle-oracle`` uses the true θ)."""
    d = data.phi.shape[-1]
    model = TrajectoryPreferenceModel(data, S, A, 0, mu0=mu0, sigma0=sigma0, beta=1.0, lam=1e4)
    w = model.solve(1, perturbed=False)[0].theta[:, 0]  # [B, d]
    scale = (d * (float(mu0) ** 2 + sigma0**2)) ** 0.5
    return scale * w / w.norm(dim=-1, keepdim=True).clamp_min(1e-300)

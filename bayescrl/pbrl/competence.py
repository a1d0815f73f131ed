"""Estimating the rater's deliberateness β from D0.

Appendix section `Estimating Rater Competence in Practice` of chapter `PSPL`:

* :func:`beta_mle` — maximum likelihood under the Bradley–Terry model of Eq. `pref_logistic_trajectories`
  with a reference reward vector ``θ_ref`` (the true θ only in the labelled oracle ablation):
  ``β̂ = argmax_β Σ_n log σ(β s_n ⟨φ(τ0_n) − φ(τ1_n), θ_ref⟩)``, s_n = +1 if τ0 preferred else −1. The
  log-likelihood is concave in β, so the root of its derivative is found by bisection on ``[0, beta_max]``
  (batched over seeds). When every comparison agrees with θ_ref the MLE is +∞: we return ``beta_max`` and
  flag it in ``at_bound`` (nothing is clipped silently).
* :func:`reference_theta` — the ``θ_ref`` a user can compute from D0 and the prior alone: the likelihood
  depends on ``βθ`` only, so β is identified only relative to the scale of θ. We take the direction of
  the MAP of ``w = βθ`` (Bradley–Terry with β = 1, the prior ``N(μ0, σ0² I)`` as regulariser; the core's
  batched Newton) and the prior's RMS length ``√(‖μ0‖² + d σ0²)``; ``beta_mle(data, reference_theta(...))``
  is then the estimate-only MLE (``model.beta_estimate: mle``; ``mle-oracle`` uses the true θ).
* :func:`beta_entropy` — the unsupervised estimate ``c / 𝓗(ζ)`` with ζ the empirical distribution of
  state–action visits of the *preferred* trajectories of D0 (the thesis' "empirical distribution of the
  action in the offline dataset"; with a fixed behaviour policy only the winners depend on β). ``c`` is a
  free hyperparameter in the text; ``model.entropy_c`` (default 1) is what a user sets without knowing β,
  ``entropy-oracle`` calibrates ``c = β_true · mean_seeds 𝓗(ζ)`` (a labelled ablation). λ is not
  estimated: the thesis argues it is not identifiable from one data set and shows robustness instead.
"""

from __future__ import annotations

import torch
from torch import Tensor

from bayescrl.pbrl.data import TrajectoryPairs
from bayescrl.utils.errors import ConfigError


def beta_mle(
    data: TrajectoryPairs, theta_ref: Tensor, *, beta_max: float = 1e3, iters: int = 100
) -> tuple[Tensor, Tensor]:
    """MLE of β per seed: returns ``(beta [B], at_bound [B] bool)``."""
    if data.N == 0:
        raise ConfigError("offline.N", 0, "cannot estimate beta from an empty offline data set")
    ref = theta_ref.unsqueeze(-2) if theta_ref.dim() == 2 else theta_ref  # [d] or per seed [B, d]
    z = ((data.phi[:, :, 0] - data.phi[:, :, 1]) * ref).sum(-1)  # [B, N]
    s = 1.0 - 2.0 * data.y.to(z.dtype)  # +1 if τ0 preferred
    m = s * z  # margins

    def grad(beta: Tensor) -> Tensor:  # d/dβ Σ log σ(β m) = Σ m σ(−β m), decreasing in β
        return (m * torch.sigmoid(-beta.unsqueeze(-1) * m)).sum(-1)

    B = z.shape[0]
    lo = torch.zeros(B, dtype=z.dtype)
    hi = torch.full((B,), float(beta_max), dtype=z.dtype)
    at_bound = grad(hi) > 0
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        up = grad(mid) > 0
        lo, hi = torch.where(up, mid, lo), torch.where(up, hi, mid)
    beta = torch.where(at_bound, torch.full_like(lo, float(beta_max)), 0.5 * (lo + hi))
    return beta, at_bound


def reference_theta(
    data: TrajectoryPairs, S: int, A: int, *, mu0: float = 0.0, sigma0: float = 1.0
) -> Tensor:
    """Estimate-only ``θ_ref [B, d]`` for :func:`beta_mle`: MAP direction of ``βθ``, prior RMS norm."""
    from bayescrl.pbrl.posterior import TrajectoryPreferenceModel

    d = data.phi.shape[-1]
    model = TrajectoryPreferenceModel(data, S, A, 0, mu0=mu0, sigma0=sigma0, beta=1.0, lam=1e4)
    w = model.solve(1, perturbed=False)[0].theta[:, 0]  # [B, d]
    scale = (d * (float(mu0) ** 2 + sigma0**2)) ** 0.5
    return scale * w / w.norm(dim=-1, keepdim=True).clamp_min(1e-300)


def beta_entropy(data: TrajectoryPairs, S: int, A: int, *, c: float = 1.0) -> Tensor:
    """Entropy estimate ``β̂ = c / 𝓗(ζ)`` per seed, ``ζ`` the winners' state–action visit distribution."""
    if not c > 0:
        raise ConfigError("model.entropy_c", c, "must be > 0")
    if data.N == 0:
        raise ConfigError("offline.N", 0, "cannot estimate beta from an empty offline data set")
    s, a = data.winners()
    H = a.shape[-1]
    idx = (s[..., :H] * A + a).reshape(s.shape[0], -1)
    counts = torch.zeros(s.shape[0], S * A, dtype=torch.float64)
    counts.scatter_add_(1, idx, torch.ones_like(idx, dtype=torch.float64))
    p = counts / counts.sum(-1, keepdim=True)
    ent = -(p * torch.log(p.clamp_min(1e-300))).sum(-1)
    return c / ent.clamp_min(1e-12)

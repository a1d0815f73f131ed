"""Estimating the rater's deliberateness β from D0.

Appendix section `Estimating Rater Competence in Practice` of chapter `PSPL`:

* :func:`beta_mle` — maximum likelihood under the Bradley–Terry model of Eq. `pref_logistic_trajectories`
  with a reference reward vector (the true θ in simulation, or any trusted estimate):
  ``β̂ = argmax_β Σ_n log σ(β s_n ⟨φ(τ0_n) − φ(τ1_n), θ_ref⟩)``, s_n = +1 if τ0 preferred else −1. The
  log-likelihood is concave in β, so the root of its derivative is found by bisection on ``[0, beta_max]``
  (batched over seeds). When every comparison agrees with θ_ref the MLE is +∞: we return ``beta_max`` and
  flag it in ``at_bound`` (nothing is clipped silently).
* :func:`beta_entropy` — the unsupervised estimate ``c / 𝓗(ζ)`` with ζ the empirical distribution of
  state–action visits of the *preferred* trajectories of D0 (the seed's "empirical distribution of the
  action in the offline dataset"; with a fixed behaviour policy only the winners depend on β). λ is not
  estimated: the seed argues it is not identifiable from one data set and shows robustness instead.
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
    z = ((data.phi[:, :, 0] - data.phi[:, :, 1]) * theta_ref).sum(-1)  # [B, N]
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

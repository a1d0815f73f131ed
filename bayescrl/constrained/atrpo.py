"""ATRPO (Zhang & Ross 2021) with the thesis' balanced Lagrangian, Eq. `lagrangian_balanced` (chapter `acpo`).

ATRPO is TRPO on the average-reward criterion: average-reward GAE Eq. `avg_GAE` (λ = 0.95), a KL trust
region ``δ``, conjugate gradient and a backtracking line search.  The thesis adds the constraint through a
fixed Lagrangian parameter ``ℓ ∈ [0, 1]`` (appendix `Experimental Details`)::

    max_x (1 − ℓ) gᵀx − ℓ [ (c + aᵀx) + (½ xᵀHx − δ) ]                      Eq. `lagrangian_balanced`

whose maximiser is ``x* = (1/ℓ) H⁻¹((1 − ℓ) g − ℓ a)``.  ``ℓ`` comes from table
`tab:lagrangian_parameters` (:data:`LAGRANGIAN_ELL`, selected from the env id; ``ell`` overrides it).

Departures (``docs/acpo.md``):

* the step is ``x*`` shortened, if needed, to the ATRPO trust region ``½xᵀHx ≤ δ``: with normalised reward
  advantages the penalty alone would take steps with KL ≫ δ, and ATRPO is a trust-region method (ℓ = 0
  gives plain ATRPO with its TRPO step ``√(2δ/q) H⁻¹g``);
* line search (0.75, ≤ 10 backtracks): KL ≤ δ and the Lagrangian surrogate ``(1−ℓ)Δr − ℓΣΔc_i`` does not
  decrease;
* reward *and* cost advantages are normalised by their batch mean and sd (appendix `Experimental Details`),
  so ``ℓ`` balances unit-scale gradients as in the thesis' table (until 2026-11-25 costs were only centred);
* several constraints: ``a`` is the sum of the cost gradients (one ``ℓ`` as in the text);
* Point-Circle is not in the table: ``ℓ = 0.5`` (the table's value for Point-Gather).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from bayescrl.constrained.acpo import surrogate_changes, trust_region_terms
from bayescrl.constrained.acpo_eval import AverageProtocolMixin
from bayescrl.constrained.core.base import OnPolicyAlgorithm
from bayescrl.constrained.core.config import CG_RANGES, TrainConfig
from bayescrl.constrained.core.optim import backtracking_line_search
from bayescrl.constrained.core.rollout import Batch
from bayescrl.utils.errors import ConfigError

__all__ = ["ATRPO", "ATRPOConfig", "LAGRANGIAN_ELL", "lagrangian_ell", "lagrangian_step"]

#: table `tab:lagrangian_parameters` (``ℓ`` for the Lagrangian ATRPO and PPO baselines)
LAGRANGIAN_ELL: dict[str, dict[str, float]] = {
    "atrpo": {"PointGather": 0.50, "AntCircle": 0.60, "AntGather": 0.45, "Bottleneck": 0.50, "Grid": 0.45},
    "ppo": {"PointGather": 0.55, "AntCircle": 0.50, "AntGather": 0.50, "Bottleneck": 0.50, "Grid": 0.60},
}
DEFAULT_ELL = 0.5


def lagrangian_ell(algo: str, env_id: str) -> float:
    """``ℓ`` of table `tab:lagrangian_parameters` for ``algo`` ("atrpo" | "ppo") on ``env_id`` (else 0.5)."""
    if algo not in LAGRANGIAN_ELL:
        raise ConfigError("algo", algo, f"the table lists {sorted(LAGRANGIAN_ELL)}")
    key = str(env_id).replace("-", "").replace("_", "").lower()
    for task, ell in LAGRANGIAN_ELL[algo].items():
        if task.lower() in key:
            return ell
    return DEFAULT_ELL


def lagrangian_step(
    v: torch.Tensor, w: torch.Tensor, q: float, r: float, s: float, ell: float, delta: float
) -> torch.Tensor:
    """Maximiser of Eq. `lagrangian_balanced` restricted to ``½xᵀHx ≤ δ``.

    ``v = H⁻¹g``, ``w = H⁻¹a``, ``q = gᵀH⁻¹g``, ``r = aᵀH⁻¹g``, ``s = aᵀH⁻¹a``.  Direction
    ``d = (1 − ℓ)v − ℓw`` with ``dᵀHd = (1−ℓ)²q − 2ℓ(1−ℓ)r + ℓ²s``; step ``min(1/ℓ, √(2δ/dᵀHd)) · d``.
    """
    if not 0.0 <= ell <= 1.0:
        raise ConfigError("ell", ell, "Lagrangian parameter must lie in [0, 1]")
    d = (1.0 - ell) * v - ell * w
    dHd = (1.0 - ell) ** 2 * q - 2.0 * ell * (1.0 - ell) * r + ell**2 * s
    if dHd <= 1e-16:
        return torch.zeros_like(v)
    scale = math.sqrt(2.0 * delta / dHd)
    if ell > 0:
        scale = min(scale, 1.0 / ell)
    return scale * d


@dataclass
class ATRPOConfig(TrainConfig):
    """Table `tab:hyperparameters`, PPO/ATRPO column (initial log std −0.5)."""

    RANGES: ClassVar[dict[str, dict]] = {**TrainConfig.RANGES, **CG_RANGES}
    advantage: str = "average"
    gae_lambda: float = 0.95
    n_envs: int = 5
    rollout_steps: int = 500
    actor_hidden: tuple[int, ...] = (64, 32)
    critic_hidden: tuple[int, ...] = (64, 32)
    log_std_init: float = -0.5
    pi_lr: float = 2e-4
    vf_lr: float = 2e-4
    minibatch_size: int = 128
    delta: float = 1e-4
    cg_iters: int = 10
    cg_damping: float = 0.1
    backtrack_coef: float = 0.75
    backtrack_iters: int = 10
    ell: float | None = None  # None: table `tab:lagrangian_parameters` by env id

    def validate(self) -> None:
        super().validate()
        if self.advantage != "average":
            raise ConfigError("advantage", self.advantage, "ATRPO is defined for the 'average' criterion")
        if not (math.isfinite(self.delta) and self.delta > 0):
            raise ConfigError("delta", self.delta, "must be a finite number > 0")
        if self.ell is not None and not 0.0 <= self.ell <= 1.0:
            raise ConfigError("ell", self.ell, "must lie in [0, 1]")
        if not 0.0 < self.backtrack_coef < 1.0:
            raise ConfigError("backtrack_coef", self.backtrack_coef, "must lie in (0, 1)")


class ATRPO(AverageProtocolMixin, OnPolicyAlgorithm):
    """Average-reward TRPO with the fixed balanced Lagrangian of Eq. `lagrangian_balanced`."""

    name = "atrpo"
    config_class = ATRPOConfig

    def setup(self) -> None:
        cfg: ATRPOConfig = self.config  # type: ignore[assignment]
        self.ell = cfg.ell if cfg.ell is not None else lagrangian_ell("atrpo", str(self.env_id))
        if self.m == 0:
            self.ell = 0.0

    def multipliers(self) -> list[float]:
        return [self.ell] * self.m

    def update_policy(self, batch: Batch) -> dict[str, float]:
        cfg: ATRPOConfig = self.config  # type: ignore[assignment]
        tr = trust_region_terms(self, batch, cfg.cg_iters, cfg.cg_damping, normalize_costs=True)
        if self.m:
            w, a = tr.W.sum(1), tr.A.sum(1)
            r, s = float(a @ tr.v), float(a @ w)
        else:
            w, r, s = torch.zeros_like(tr.v), 0.0, 0.0
        step = lagrangian_step(tr.v, w, tr.q, r, s, self.ell, cfg.delta)
        ell = self.ell

        def accept() -> bool:
            kl, d_c, d_r = surrogate_changes(self, batch, tr)
            return math.isfinite(kl) and kl <= cfg.delta and (1 - ell) * d_r - ell * float(d_c.sum()) >= 0.0

        ok, j = backtracking_line_search(
            self.policy, step.float(), accept, cfg.backtrack_iters + 1, cfg.backtrack_coef
        )
        kl, _, _ = surrogate_changes(self, batch, tr)
        return {
            "ell": ell,
            "kl": kl,
            "backtracks": j if ok else -1,
            "branch": "step" if ok else "none",
            "avg_reward": float(batch.rewards[:, 0].mean()),
            "avg_costs": batch.rewards[:, 1:].double().mean(0).tolist(),
        }

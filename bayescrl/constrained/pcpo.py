"""PCPO: Projection-based Constrained Policy Optimization (Yang et al., 2020), KL projection.

Step 1 (reward improvement, TRPO): ``theta_half = theta + sqrt(2 delta / q) H^-1 g``.
Step 2 (projection onto the linearised constraint in the KL metric):
``theta_new = theta_half - max(0, (sqrt(2 delta / q) r + c) / s) H^-1 b``
with ``q = g^T H^-1 g``, ``r = g^T H^-1 b``, ``s = b^T H^-1 b``, ``c = (J_C - d) / H_eff``.
The combined step is backtracked (25 steps, decay 0.8, table ``table:hyperparams``) until the mean KL
is at most ``2 delta`` (the projection can add up to ``delta``; PCPO's Theorem bounds the KL of the
two steps together). One constraint, as in the paper (the thesis' table reports PCPO n/a on Navigation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from bayescrl.constrained.core.base import OnPolicyAlgorithm
from bayescrl.constrained.core.config import CG_RANGES, LINE_SEARCH_RANGES, TrainConfig
from bayescrl.constrained.core.optim import backtracking_line_search
from bayescrl.constrained.core.rollout import Batch
from bayescrl.constrained.core.trust_region import single_constraint_step_inputs, surrogates

EPS = 1e-8


@dataclass
class PCPOConfig(TrainConfig):
    RANGES: ClassVar[dict[str, dict]] = {**TrainConfig.RANGES, **LINE_SEARCH_RANGES, **CG_RANGES}
    target_kl: float | None = 0.01
    line_search_steps: int = 25
    line_search_decay: float = 0.8
    cg_iters: int = 10
    cg_damping: float = 0.1
    vf_epochs: int | None = 10


def pcpo_step(tq, c: float, delta: float):
    alpha = math.sqrt(2 * delta / (tq.q + EPS))
    proj = max(0.0, (alpha * tq.r + c) / (tq.s + EPS))
    return alpha * tq.v - proj * tq.w, proj


class PCPO(OnPolicyAlgorithm):
    name = "pcpo"
    config_class = PCPOConfig
    max_constraints = 1

    def update_policy(self, batch: Batch) -> dict[str, float]:
        cfg = self.config
        delta = cfg.target_kl or 0.01
        adv_r, adv_c, c, tq, x, old = single_constraint_step_inputs(
            self, batch, cfg.cg_iters, cfg.cg_damping, c_unconstrained=-1e9
        )
        step, proj = pcpo_step(tq, c, delta) if self.m else (math.sqrt(2 * delta / (tq.q + EPS)) * tq.v, 0.0)
        info: dict = {"kl": 0.0}

        def accept() -> bool:
            _, _, kl = surrogates(self, x, batch, adv_r, adv_c, old)
            info["kl"] = kl
            return kl <= 2 * delta

        ok, j = backtracking_line_search(
            self.policy, step, accept, cfg.line_search_steps, cfg.line_search_decay
        )
        return {"kl": info["kl"] if ok else 0.0, "line_search": j, "accepted": float(ok), "projection": proj}

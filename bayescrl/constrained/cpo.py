"""CPO: Constrained Policy Optimization (Achiam et al., 2017), one constraint as in the paper.

Solves ``max_x g^T x  s.t.  b^T x + c <= 0,  x^T H x / 2 <= delta`` through its dual (Achiam et al.,
Theorem 1, with the case analysis and the infeasible-recovery step of safety-starter-agents), then
backtracks (25 steps, decay 0.8; table ``table:hyperparams``) until the mean KL <= delta, the reward
surrogate improves (feasible cases) and the cost surrogate rises by at most ``max(-c, 0)``.
``c = (J_C - d) / H_eff`` puts the episodic violation on the per-step scale of ``E[rho A_C]``.
With m > 1 constraints the dual is no longer closed-form: use ecop, ppo-lag, p3o, focops or ipo
(the thesis' table also reports CPO as n/a on the two-constraint Navigation task).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from bayescrl.constrained.core.base import OnPolicyAlgorithm
from bayescrl.constrained.core.config import CG_RANGES, LINE_SEARCH_RANGES, TrainConfig
from bayescrl.constrained.core.optim import backtracking_line_search, flat_params, set_flat_params
from bayescrl.constrained.core.rollout import Batch
from bayescrl.constrained.core.trust_region import single_constraint_step_inputs, surrogates

EPS = 1e-8


@dataclass
class CPOConfig(TrainConfig):
    RANGES: ClassVar[dict[str, dict]] = {**TrainConfig.RANGES, **LINE_SEARCH_RANGES, **CG_RANGES}
    target_kl: float | None = 0.01  # the trust-region radius delta
    line_search_steps: int = 25
    line_search_decay: float = 0.8
    cg_iters: int = 10
    cg_damping: float = 0.1
    vf_epochs: int | None = 10


def cpo_direction(q: float, r: float, s: float, c: float, delta: float) -> tuple[float, float, int]:
    """Dual solution ``(lambda, nu, case)``; the step is ``(H^-1 g - nu H^-1 b) / lambda``
    (case 0, infeasible: ``-sqrt(2 delta / s) H^-1 b``). ``g`` is the reward-ascent gradient."""
    if s <= EPS and c < 0:
        return math.sqrt(q / (2 * delta)), 0.0, 4
    # safety-starter-agents' formulas use the loss gradient -g, i.e. r_t = -r
    rt = -r
    A = q - rt**2 / (s + EPS)
    B = 2 * delta - c**2 / (s + EPS)
    if c < 0 and B < 0:
        return math.sqrt(q / (2 * delta)), 0.0, 3
    if c >= 0 and B < 0:
        return 0.0, math.sqrt(2 * delta / (s + EPS)), 0
    case = 2 if c < 0 else 1
    mid = rt / c if c != 0 else math.inf
    la, lb = ((0.0, mid), (mid, math.inf)) if c < 0 else ((mid, math.inf), (0.0, mid))
    la = (max(la[0], 0.0), max(la[1], 0.0))
    lb = (max(lb[0], 0.0), max(lb[1], 0.0))

    def proj(x, lo_hi):
        return max(lo_hi[0], min(lo_hi[1], x))

    lam_a = proj(math.sqrt(max(A, 0.0) / B), la) if B > 0 else la[0]
    lam_b = proj(math.sqrt(q / (2 * delta)), lb)

    def f_a(lam):
        return -0.5 * (A / (lam + EPS) + B * lam) - rt * c / (s + EPS)

    def f_b(lam):
        return -0.5 * (q / (lam + EPS) + 2 * delta * lam)

    lam = lam_a if f_a(lam_a) >= f_b(lam_b) else lam_b
    nu = max(0.0, lam * c - rt) / (s + EPS)
    return lam, nu, case


class CPO(OnPolicyAlgorithm):
    name = "cpo"
    config_class = CPOConfig
    max_constraints = 1

    def update_policy(self, batch: Batch) -> dict[str, float]:
        cfg = self.config
        delta = cfg.target_kl or 0.01
        adv_r, adv_c, c, tq, x, old = single_constraint_step_inputs(
            self, batch, cfg.cg_iters, cfg.cg_damping, c_unconstrained=-1.0
        )
        r0, c0, _ = surrogates(self, x, batch, adv_r, adv_c, old)
        if self.m == 0:
            lam, nu, case = math.sqrt(tq.q / (2 * delta)), 0.0, 4
        else:
            lam, nu, case = cpo_direction(tq.q, tq.r, tq.s, c, delta)
        step = -math.sqrt(2 * delta / (tq.s + EPS)) * tq.w if case == 0 else (tq.v - nu * tq.w) / (lam + EPS)
        info: dict = {}

        def accept() -> bool:
            r1, c1, kl = surrogates(self, x, batch, adv_r, adv_c, old)
            info["kl"] = kl
            return kl <= delta and (r1 >= r0 if case > 1 else True) and (c1 - c0 <= max(-c, 0.0))

        theta0 = flat_params(self.policy)
        ok, j = backtracking_line_search(
            self.policy, step, accept, cfg.line_search_steps, cfg.line_search_decay
        )
        if not ok:
            set_flat_params(self.policy, theta0)
            info["kl"] = 0.0
        return {"kl": info["kl"], "cpo_case": case, "line_search": j, "accepted": float(ok), "nu": nu}

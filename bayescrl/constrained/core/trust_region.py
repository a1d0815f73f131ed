"""Shared machinery of the trust-region baselines (CPO, PCPO): gradients, CG directions, KL checks."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bayescrl.constrained.core.optim import _detach_dist, conjugate_gradient, fisher_vector_product, flat_grad
from bayescrl.constrained.core.rollout import Batch


@dataclass
class TRQuantities:
    g: torch.Tensor  # gradient of the reward surrogate E[rho A] (ascent direction)
    b: torch.Tensor  # gradient of the cost surrogate E[rho A_C]
    v: torch.Tensor  # H^-1 g
    w: torch.Tensor  # H^-1 b
    q: float  # g^T H^-1 g
    r: float  # g^T H^-1 b
    s: float  # b^T H^-1 b


def trust_region_quantities(
    algo, batch: Batch, adv_r: torch.Tensor, adv_c: torch.Tensor, cg_iters: int = 10, damping: float = 0.1
):
    """Compute ``g, b, H^-1 g, H^-1 b`` at the behaviour policy (``adv_c`` is ``(B,)``, one constraint)."""
    x = algo.policy_input(batch.obs, batch.h)
    params = [p for p in algo.policy.parameters()]
    dist = algo.policy.distribution(x)
    ratio = torch.exp(algo.policy.log_prob_from(dist, batch.actions) - batch.logp)
    g = flat_grad((ratio * adv_r).mean(), params, retain_graph=True)
    b = flat_grad((ratio * adv_c).mean(), params)
    fvp = fisher_vector_product(algo.policy, x, damping)
    v = conjugate_gradient(fvp, g, cg_iters)
    w = conjugate_gradient(fvp, b, cg_iters)
    return TRQuantities(g, b, v, w, float(g @ v), float(g @ w), float(b @ w)), x


def surrogates(algo, x: torch.Tensor, batch: Batch, adv_r: torch.Tensor, adv_c: torch.Tensor, old_dist):
    """``(E[rho A], E[rho A_C], mean KL(pi_old || pi))`` at the policy's current parameters."""
    with torch.no_grad():
        dist = algo.policy.distribution(x)
        ratio = torch.exp(algo.policy.log_prob_from(dist, batch.actions) - batch.logp)
        kl = algo.policy.kl(old_dist, dist).mean()
        return float((ratio * adv_r).mean()), float((ratio * adv_c).mean()), float(kl)


def old_distribution(algo, x: torch.Tensor):
    with torch.no_grad():
        return _detach_dist(algo.policy.distribution(x))


def single_constraint_step_inputs(
    algo, batch: Batch, cg_iters: int, cg_damping: float, c_unconstrained: float
):
    """What CPO and PCPO linearise around (one constraint): normalised reward advantages, centred cost
    advantages, the per-step constraint value ``c = (Ĵ_C - d) / H``, the trust-region quantities, the step
    direction ``x`` and the old policy distribution. ``c_unconstrained`` is used when the task has no cost.
    """
    adv_r = algo.normalize(batch.advantages[:, 0])
    adv_c = algo.normalize(batch.advantages[:, 1], center_only=True) if algo.m else adv_r * 0
    h_eff = float(batch.ep_lengths.mean()) if len(batch.ep_lengths) else float(algo.horizon)
    c = float(batch.ep_cost_est[0] - algo.cost_limits[0]) / h_eff if algo.m else c_unconstrained
    tq, x = trust_region_quantities(algo, batch, adv_r, adv_c, cg_iters, cg_damping)
    return adv_r, adv_c, c, tq, x, old_distribution(algo, x)

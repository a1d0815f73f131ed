"""Shared first-order policy update: minibatch epochs over a clipped surrogate with KL early stopping."""

from __future__ import annotations

from collections.abc import Callable

import torch

from bayescrl.constrained.core.rollout import Batch


def clipped_surrogate(ratio: torch.Tensor, adv: torch.Tensor, clip: float, pessimistic: str = "min"):
    """PPO's clipped surrogate ``min(r A, clip(r, 1-eps, 1+eps) A)`` (``pessimistic="min"``, rewards)
    or its cost counterpart ``max(r A_C, clip(r) A_C)`` (``"max"``, an upper bound on cost increase).
    ``adv`` may be ``(B,)`` or ``(B, m)``."""
    if adv.dim() == 2:
        ratio = ratio.unsqueeze(-1)
    clipped = torch.clamp(ratio, 1.0 - clip, 1.0 + clip)
    if pessimistic == "min":
        return torch.min(ratio * adv, clipped * adv)
    return torch.max(ratio * adv, clipped * adv)


def first_order_policy_update(algo, batch: Batch,
                              loss_fn: Callable[[torch.Tensor, torch.Tensor, object], torch.Tensor]) -> dict:
    """Run ``update_epochs`` epochs of minibatch Adam steps on ``loss_fn(idx, ratio, dist)``.

    Stops early (after an epoch) when the mean KL(pi_old || pi) over the batch exceeds
    ``1.5 * target_kl`` (safety-starter-agents' rule; ``target_kl=None`` disables it).
    """
    cfg = algo.config
    x = algo.policy_input(batch.obs, batch.h)
    acts = batch.actions
    kl = torch.zeros(())
    epochs_done = 0
    loss = torch.zeros(())
    for _ in range(cfg.update_epochs):
        for idx in algo.minibatches(batch.size):
            dist = algo.policy.distribution(x[idx])
            logp = algo.policy.log_prob_from(dist, acts[idx])
            ratio = torch.exp(logp - batch.logp[idx])
            loss = loss_fn(idx, ratio, dist)
            algo.pi_optim.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.max_grad_norm:
                torch.nn.utils.clip_grad_norm_(algo.policy.parameters(), cfg.max_grad_norm)
            algo.pi_optim.step()
        epochs_done += 1
        with torch.no_grad():
            kl = algo.approx_kl(algo.policy.log_prob(x, acts), batch.logp)
        if cfg.target_kl is not None and kl > 1.5 * cfg.target_kl:
            break
    return {"kl": float(kl), "policy_epochs": epochs_done, "policy_loss": float(loss.detach())}

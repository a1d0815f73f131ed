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


def first_order_policy_update(
    algo, batch: Batch, loss_fn: Callable[[torch.Tensor, torch.Tensor, object], torch.Tensor]
) -> dict:
    """Run ``update_epochs`` epochs of minibatch Adam steps on ``loss_fn(idx, ratio, dist)``.

    The critics (reward and every cost) are regressed on their targets in the same minibatch passes
    (one backward for both losses; separate parameters and optimisers, so this equals two separate
    loops but halves the Python overhead). The advantages were computed with the pre-update critics.
    The policy stops early (after an epoch) when the mean KL(pi_old || pi) over the batch exceeds
    ``1.5 * target_kl`` (safety-starter-agents' rule; ``target_kl=None`` disables it); the critics then
    finish their ``vf_epochs`` alone.
    """
    cfg = algo.config
    x = algo.policy_input(batch.obs, batch.h)
    xc = algo.critic_input(batch.obs, batch.h)
    acts, target = batch.actions, batch.returns
    vf_epochs = cfg.vf_epochs or cfg.update_epochs
    vf_clip = cfg.max_grad_norm * (1 + algo.m) if cfg.max_grad_norm else None
    kl = torch.zeros(())
    epochs_done = 0
    loss = vloss = torch.zeros(())
    policy_active = True
    for epoch in range(max(cfg.update_epochs, vf_epochs)):
        policy_active = policy_active and epoch < cfg.update_epochs
        critic_active = epoch < vf_epochs
        if not (policy_active or critic_active):
            break
        for idx in algo.minibatches(batch.size):
            total = torch.zeros(())
            if policy_active:
                dist = algo.policy.distribution(x[idx])
                logp = algo.policy.log_prob_from(dist, acts[idx])
                ratio = torch.exp(logp - batch.logp[idx])
                loss = loss_fn(idx, ratio, dist)
                total = total + loss
                algo.pi_optim.zero_grad(set_to_none=True)
            if critic_active:
                vloss = ((algo.critic(xc[idx]) - target[idx]) ** 2).mean(0).sum()
                total = total + vloss
                algo.vf_optim.zero_grad(set_to_none=True)
            total.backward()
            if policy_active:
                if cfg.max_grad_norm:
                    torch.nn.utils.clip_grad_norm_(algo.policy.parameters(), cfg.max_grad_norm)
                algo.pi_optim.step()
            if critic_active:
                if vf_clip:
                    torch.nn.utils.clip_grad_norm_(algo.critic.parameters(), vf_clip)
                algo.vf_optim.step()
        if policy_active:
            epochs_done += 1
            with torch.no_grad():
                kl = algo.approx_kl(algo.policy.log_prob(x, acts), batch.logp)
            if cfg.target_kl is not None and kl > 1.5 * cfg.target_kl:
                policy_active = False
    algo._critics_updated = True
    return {
        "kl": float(kl),
        "policy_epochs": epochs_done,
        "policy_loss": float(loss.detach()),
        "value_loss": float(vloss.detach()),
    }

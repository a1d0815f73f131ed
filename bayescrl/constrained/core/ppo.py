"""Shared first-order policy update: minibatch epochs over a clipped surrogate with KL early stopping."""

from __future__ import annotations

from collections.abc import Callable

import torch

from bayescrl.constrained.core.optim import AdamSteps
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


def _clip_grads(groups: list[tuple[list[torch.Tensor], float]]) -> None:
    """``torch.nn.utils.clip_grad_norm_(params, max_norm)`` for several parameter groups at once.

    Same arithmetic as torch's (per-tensor 2-norms, the norm of their stack, coefficient
    ``min(1, max_norm / (norm + 1e-6))``), but one ``_foreach_norm`` over every group's gradients and one
    ``_foreach_mul_`` per group instead of a Python loop over tensors per group.
    """
    grads = [p.grad for params, _ in groups for p in params if p.grad is not None]
    if not grads:
        return
    norms = torch._foreach_norm(grads, 2.0)
    start = 0
    for params, max_norm in groups:
        group = [p.grad for p in params if p.grad is not None]
        if not group:
            continue
        total = torch.linalg.vector_norm(torch.stack(norms[start : start + len(group)]), 2.0)
        torch._foreach_mul_(group, torch.clamp(max_norm / (total + 1e-6), max=1.0))
        start += len(group)


def first_order_policy_update(
    algo,
    batch: Batch,
    loss_fn: Callable[[torch.Tensor, torch.Tensor, object], torch.Tensor],
    uses_dist: bool = True,
) -> dict:
    """Run ``update_epochs`` epochs of minibatch Adam steps on ``loss_fn(idx, ratio, dist)``.

    ``uses_dist=False`` (a loss that reads only ``idx`` and ``ratio``): ``dist`` is ``None`` and the
    log-probabilities come from ``policy.log_prob`` without building a distribution object.

    The critics (reward and every cost) are regressed on their targets in the same minibatch passes
    (one backward for both losses; separate parameters and optimisers, so this equals two separate
    loops but halves the Python overhead). The advantages were computed with the pre-update critics.
    The policy stops early (after an epoch) when the mean KL(pi_old || pi) over the batch exceeds
    ``1.5 * target_kl`` (safety-starter-agents' rule; ``target_kl=None`` disables it); the critics then
    finish their ``vf_epochs`` alone.

    Speed (the update's work is hundreds of tiny minibatch steps, so per-call overhead is the cost):
    the batch is permuted once per epoch and minibatches are slices of it (the same samples as indexing
    with each minibatch's indices), gradients are reset by ``grad = None`` and both networks' gradient
    norms are clipped in one pass (:func:`_clip_grads`, torch's arithmetic), and the Adam steps skip
    ``Optimizer.step``'s per-call bookkeeping (:class:`~bayescrl.constrained.core.optim.AdamSteps`, the
    same kernel call and result).
    """
    cfg = algo.config
    x = algo.policy_input(batch.obs, batch.h)
    xc = algo.critic_input(batch.obs, batch.h)
    acts, target, logp_old = batch.actions, batch.returns, batch.logp
    vf_epochs = cfg.vf_epochs or cfg.update_epochs
    vf_clip = cfg.max_grad_norm * (1 + algo.m) if cfg.max_grad_norm else None
    pi_params = [p for p in algo.policy.parameters() if p.requires_grad]
    pi_step, vf_step = AdamSteps(algo.pi_optim).step, AdamSteps(algo.vf_optim).step
    vf_params = [p for p in algo.critic.parameters() if p.requires_grad]
    kl = torch.zeros(())
    epochs_done = 0
    loss = vloss = torch.zeros(())
    policy_active = True
    same_input = xc is x or (xc.shape == x.shape and torch.equal(xc, x))
    for epoch in range(max(cfg.update_epochs, vf_epochs)):
        policy_active = policy_active and epoch < cfg.update_epochs
        critic_active = epoch < vf_epochs
        if not (policy_active or critic_active):
            break
        perm, mb = algo.minibatch_permutation(batch.size)
        x_p = x[perm]
        xc_p = x_p if same_input else xc[perm]
        acts_p, logp_p, target_p = acts[perm], logp_old[perm], target[perm]
        params = (pi_params if policy_active else []) + (vf_params if critic_active else [])
        clip_groups = []
        if policy_active and cfg.max_grad_norm:
            clip_groups.append((pi_params, cfg.max_grad_norm))
        if critic_active and vf_clip:
            clip_groups.append((vf_params, vf_clip))
        for start in range(0, batch.size, mb):
            end = start + mb
            total = None
            if policy_active:
                if uses_dist:
                    dist = algo.policy.distribution(x_p[start:end])
                    logp = algo.policy.log_prob_from(dist, acts_p[start:end])
                else:
                    dist, logp = None, algo.policy.log_prob(x_p[start:end], acts_p[start:end])
                ratio = torch.exp(logp - logp_p[start:end])
                loss = loss_fn(perm[start:end], ratio, dist)
                total = loss
            if critic_active:
                vloss = ((algo.critic(xc_p[start:end]) - target_p[start:end]) ** 2).mean(0).sum()
                total = vloss if total is None else total + vloss
            for p in params:
                p.grad = None
            total.backward()
            if clip_groups:
                _clip_grads(clip_groups)
            if policy_active:
                pi_step()
            if critic_active:
                vf_step()
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

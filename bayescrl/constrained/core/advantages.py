"""Advantage estimators over ``(T, N, k)`` tensors (time, env, channel: reward then m costs).

All three share one backward recursion; they differ in the TD error and the bootstrap rule:

* :func:`discounted_gae` -- GAE of Schulman et al. (2016):
  ``delta_t = r_t + gamma (1 - term_t) V(s'_t) - V(s_t)``,
  ``A_t = delta_t + gamma lambda (1 - end_t) A_{t+1}``.
* :func:`average_gae` -- the average-reward GAE of Eq. `avg_GAE` (chapter `acpo`):
  ``delta_t = r_t - J_hat + V(s'_t) - V(s_t)`` with ``J_hat = (1/N) sum_t r_t`` (per channel) and
  ``A_t = sum_{t'} lambda^{t'-t} delta_{t'}``; target ``V^target_t = A_t + V(s_t)``.
* :func:`finite_horizon_advantages` -- time-indexed episodic advantages ``A_h`` (chapter `ecop`):
  undiscounted, critics take the time index ``h`` as input so ``V_h`` is non-stationary, and the value
  after the last step ``h = H`` is 0 (the episode ends there, it is not a truncation).

``next_values[t]`` is ``V(s_{t+1})`` for non-final steps and ``V(final_obs)`` for truncated steps
(the final observation, normalised with the same statistics) -- a truncated episode is *not*
treated as terminal; ``terminated`` zeroes the bootstrap, ``ended`` (terminated or truncated) cuts
the recursion.
"""

from __future__ import annotations

import torch


def _backward(delta: torch.Tensor, decay: torch.Tensor) -> torch.Tensor:
    adv = torch.zeros_like(delta)
    last = torch.zeros_like(delta[0])
    for t in range(delta.shape[0] - 1, -1, -1):
        last = delta[t] + decay[t] * last
        adv[t] = last
    return adv


def _expand(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    x = x.to(device=like.device, dtype=like.dtype)
    return x.unsqueeze(-1).expand_as(like) if x.dim() == like.dim() - 1 else x


def discounted_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    ended: torch.Tensor,
    gamma: float | torch.Tensor,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(advantages, value_targets)``; ``gamma`` may be a per-channel tensor of shape ``(k,)``."""
    term, end = _expand(terminated, rewards), _expand(ended, rewards)
    gamma = torch.as_tensor(gamma, dtype=rewards.dtype, device=rewards.device)
    delta = rewards + gamma * (1.0 - term) * next_values - values
    adv = _backward(delta, gamma * lam * (1.0 - end))
    return adv, adv + values


def average_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    ended: torch.Tensor,
    lam: float,
    avg_reward: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Average-reward GAE, Eq. `avg_GAE`. Returns ``(advantages, value_targets, J_hat)``.

    ``J_hat`` defaults to the batch mean of each channel, as in the text. Departure: a *terminated*
    (not truncated) step does not bootstrap, for envs that have true terminal states.
    """
    term, end = _expand(terminated, rewards), _expand(ended, rewards)
    j_hat = rewards.reshape(-1, rewards.shape[-1]).mean(0) if avg_reward is None else avg_reward.to(rewards)
    delta = rewards - j_hat + (1.0 - term) * next_values - values
    adv = _backward(delta, lam * (1.0 - end))
    return adv, adv + values, j_hat


def finite_horizon_advantages(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    at_horizon: torch.Tensor,
    terminated: torch.Tensor,
    ended: torch.Tensor,
    lam: float = 1.0,
    gamma: float | torch.Tensor = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Time-indexed episodic advantages ``A_h(s_h, a_h)`` (``V_{H+1} = 0``).

    ``values``/``next_values`` must come from time-conditioned critics ``V_h(s)``. ``at_horizon`` marks
    steps with ``h = H`` (the last step of the episode): their bootstrap is 0. With ``lam = 1`` and
    ``gamma = 1`` this is the Monte-Carlo ``R_{h:H} - V_h(s_h)`` of the text; ``lam < 1`` trades variance
    for bias as in GAE, and ``gamma < 1`` (per channel, shape ``(k,)``) discounts inside the horizon as
    the safety-starter-agents code base does (see ``ECOPConfig.gamma``).
    """
    term = torch.logical_or(terminated.bool(), at_horizon.bool())
    return discounted_gae(rewards, values, next_values, term, ended, gamma, lam)

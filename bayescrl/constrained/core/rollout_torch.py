"""Rollout collection on a batched torch env (the ``mjx`` backend): every buffer is a torch tensor on the
env's device, from the env's outputs (DLPack) through the policy, the critics and the advantages, with no
round trip through numpy. Only the per-episode totals (a few numbers per finished episode) and the
observation statistics (``D`` numbers) come back to the host.

The env protocol (:class:`bayescrl.envs.mjx.MJXVectorEnv`): ``num_envs``, ``num_costs``,
``single_observation_space`` / ``single_action_space`` (Box), ``reset(seed) -> obs (n, D)``, and
``step(actions (n, A)) -> (obs, reward (n,), cost (n, m), terminated, truncated, final_obs)`` with an
auto-reset in the same step. Same rollout as :class:`~bayescrl.constrained.core.rollout.RolloutCollector`
(frozen observation statistics, ``V(final_obs)`` for truncations), with actions drawn by the torch policy
on its device (torch's generator) instead of the numpy copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bayescrl.constrained.core.normalize import RunningMeanStd
from bayescrl.constrained.core.rollout import RolloutBatch
from bayescrl.utils.errors import ConfigError, DataError


class TorchRolloutCollector:
    """Steps a batched torch env with a policy; the tensor twin of ``RolloutCollector``."""

    def __init__(self, envs, rms: RunningMeanStd | None, num_costs: int, horizon: int, device="cpu"):
        self.envs, self.rms = envs, rms
        self.m, self.horizon, self.device = num_costs, horizon, torch.device(device)
        self.n = envs.num_envs
        space = envs.single_action_space
        self.low = torch.as_tensor(space.low, dtype=torch.float32, device=self.device)
        self.high = torch.as_tensor(space.high, dtype=torch.float32, device=self.device)
        self.obs: torch.Tensor | None = None
        self.policy_time = False
        self.record_info: str | None = None
        self.global_step = 0
        self._zero_counters()

    def _zero_counters(self) -> None:
        dev = self.device
        self.h = torch.zeros(self.n, dtype=torch.int64, device=dev)
        self.ep_ret = torch.zeros(self.n, dtype=torch.float64, device=dev)
        self.ep_cost = torch.zeros(self.n, self.m, dtype=torch.float64, device=dev)
        self.ep_len = torch.zeros(self.n, dtype=torch.int64, device=dev)

    def reset(self, seed: int) -> None:
        self.obs = self.envs.reset(seed=seed).to(self.device, torch.float64)
        self._zero_counters()

    def normalize(self, raw: torch.Tensor) -> torch.Tensor:
        """``RunningMeanStd.normalize`` in torch (float64, then float32, then the clip); numpy input (the
        evaluation on a CPU env) goes through ``RunningMeanStd.normalize`` itself."""
        if not isinstance(raw, torch.Tensor):
            return np.asarray(raw, np.float32) if self.rms is None else self.rms.normalize(raw)
        if self.rms is None or self.rms.count == 0:
            out = raw.float()
        else:
            key = (self.rms.count, raw.device)  # the statistics change only between rollouts
            if getattr(self, "_stats_key", None) != key:
                mean = torch.as_tensor(self.rms.mean, device=raw.device)
                std = torch.sqrt(torch.as_tensor(self.rms.var, device=raw.device) + self.rms.eps)
                self._stats, self._stats_key = (mean, std), key
            mean, std = self._stats
            out = ((raw - mean) / std).float()
        if self.rms is not None and self.rms.clip is not None:
            out = out.clamp(-self.rms.clip, self.rms.clip)
        return out

    def time_feature(self, h: torch.Tensor) -> torch.Tensor:
        return (h.float() / float(self.horizon)).reshape(-1, 1)

    @torch.no_grad()
    def collect(
        self, policy, critic_value, steps: int, rng: np.random.Generator | None = None
    ) -> RolloutBatch:
        """``steps`` batched steps; the :class:`RolloutBatch` holds tensors on the device (episode totals
        as numpy). ``rng`` is unused (actions come from torch's generator)."""
        if self.record_info is not None:
            raise ConfigError("env_backend", "mjx", "reward adapters that record info need the gym backend")
        buf = _StepBuffers.zeros(steps, self.n, self.obs.shape[1], self.low.shape[0], self.m, self.device)
        for t in range(steps):
            self._step(t, policy, buf)
        _check_finite(buf)
        values, next_values = self._values(critic_value, buf)
        return self._batch(buf, values, next_values)

    def _step(self, t: int, policy, buf: _StepBuffers) -> None:
        """One batched env step with the policy's actions (clipped to the action box), recorded at ``t``;
        the episode counters of finished episodes restart at zero (the env resets them itself)."""
        n, dev = self.n, self.device
        obs_n = self.normalize(self.obs)
        buf.obs[t], buf.raw[t], buf.h[t] = obs_n, self.obs, self.h
        x = torch.cat([obs_n, self.time_feature(self.h)], 1) if self.policy_time else obs_n
        a, logp = policy.act(x)
        buf.act[t], buf.logp[t] = a, logp
        out = self.envs.step(torch.maximum(torch.minimum(a, self.high), self.low))
        self.global_step += n
        rew = out.reward.to(dev, torch.float64)
        costs = out.cost.to(dev, torch.float64).reshape(n, self.m)
        term, trunc = out.terminated.to(dev), out.truncated.to(dev)
        ended = term | trunc
        buf.rew[t, :, 0], buf.rew[t, :, 1:] = rew, costs
        buf.term[t], buf.end[t] = term, ended
        self.ep_ret += rew
        self.ep_cost += costs
        self.ep_len += 1
        self.h += 1
        buf.ep_ret[t], buf.ep_cost[t], buf.ep_len[t] = self.ep_ret, self.ep_cost, self.ep_len
        buf.final[t] = out.final_obs.to(dev, torch.float64)
        buf.trunc_h[t] = self.h  # time index of final_obs
        keep = ~ended
        self.ep_ret *= keep
        self.ep_cost *= keep.unsqueeze(1)
        self.ep_len *= keep
        self.h *= keep
        self.obs = out.obs.to(dev, torch.float64)

    def _values(self, critic_value, buf: _StepBuffers) -> tuple[torch.Tensor, torch.Tensor]:
        """Critic values ``[T, n, 1+m]`` of every step and of its successor: the next step's, V(last obs)
        after the last step, and V(final_obs) where an episode was truncated (not terminated)."""
        T, n, D = buf.obs.shape
        values = critic_value(buf.obs.reshape(T * n, D), buf.h.reshape(-1)).reshape(T, n, 1 + self.m).double()
        last_v = critic_value(self.normalize(self.obs), self.h.clone()).double()
        next_values = torch.zeros_like(values)
        next_values[:-1] = values[1:]
        next_values[-1] = last_v
        cut = buf.end & ~buf.term  # truncated, not terminated: bootstrap from V(final_obs)
        if bool(cut.any()):
            tv = critic_value(self.normalize(buf.final[cut]), buf.trunc_h[cut]).double()
            next_values[cut] = tv
        return values, next_values

    def _batch(self, buf: _StepBuffers, values: torch.Tensor, next_values: torch.Tensor) -> RolloutBatch:
        """The :class:`RolloutBatch`, finished episodes in (step, env) order (as the numpy collector)."""
        ended = buf.end
        return RolloutBatch(
            obs=buf.obs,
            raw=buf.raw,
            h=buf.h,
            actions=buf.act,
            logp=buf.logp,
            rewards=buf.rew,
            terminated=buf.term,
            ended=buf.end,
            at_horizon=buf.h + 1 >= self.horizon,
            values=values,
            next_values=next_values,
            ep_returns=buf.ep_ret[ended].cpu().numpy(),
            ep_costs=buf.ep_cost[ended].cpu().numpy().reshape(-1, self.m),
            ep_lengths=buf.ep_len[ended].cpu().numpy(),
            info=None,
        )

    # ------------------------------------------------------------------ checkpointing
    def state_dict(self) -> dict:
        """Counters only: the MJX state is not checkpointed, so a resume restarts the episodes."""
        return {"global_step": self.global_step, "env_snapshots": None}

    def load_state_dict(self, d: dict, reseed: int) -> bool:
        self.global_step = d["global_step"]
        self.reset(reseed)
        return False


@dataclass
class _StepBuffers:
    """Per-step records of one rollout of T steps on n envs, ``[T, n, ...]`` on the env's device: the
    normalised and raw observations, time index, actions, log-probabilities, reward and costs ``[T, n, 1+m]``,
    termination and episode-end flags, final observations, running episode totals at each step, and the
    time index of ``final``."""

    obs: torch.Tensor
    raw: torch.Tensor
    h: torch.Tensor
    act: torch.Tensor
    logp: torch.Tensor
    rew: torch.Tensor
    term: torch.Tensor
    end: torch.Tensor
    final: torch.Tensor
    ep_ret: torch.Tensor
    ep_cost: torch.Tensor
    ep_len: torch.Tensor
    trunc_h: torch.Tensor

    @classmethod
    def zeros(cls, T: int, n: int, D: int, A: int, m: int, dev: torch.device) -> _StepBuffers:
        """Zeroed buffers for T steps of n envs (observations of size D, actions A, m costs)."""
        f32, f64, i64, b = torch.float32, torch.float64, torch.int64, torch.bool
        return cls(
            obs=torch.zeros((T, n, D), dtype=f32, device=dev),
            raw=torch.zeros((T, n, D), dtype=f64, device=dev),
            h=torch.zeros((T, n), dtype=i64, device=dev),
            act=torch.zeros((T, n, A), dtype=f32, device=dev),
            logp=torch.zeros((T, n), dtype=f32, device=dev),
            rew=torch.zeros((T, n, 1 + m), dtype=f64, device=dev),
            term=torch.zeros((T, n), dtype=b, device=dev),
            end=torch.zeros((T, n), dtype=b, device=dev),
            final=torch.zeros((T, n, D), dtype=f64, device=dev),
            ep_ret=torch.zeros((T, n), dtype=f64, device=dev),
            ep_cost=torch.zeros((T, n, m), dtype=f64, device=dev),
            ep_len=torch.zeros((T, n), dtype=i64, device=dev),
            trunc_h=torch.zeros((T, n), dtype=i64, device=dev),
        )


def _check_finite(buf: _StepBuffers) -> None:
    """:class:`DataError` naming the first (step, env) with a non-finite reward, cost or observation."""
    if not bool(torch.isfinite(buf.rew).all() & torch.isfinite(buf.raw).all()):
        bad = torch.nonzero(~torch.isfinite(buf.rew).all(-1) | ~torch.isfinite(buf.raw).all(-1))[0].tolist()
        raise DataError("env", bad, "non-finite reward, cost or observation at (step, env)")

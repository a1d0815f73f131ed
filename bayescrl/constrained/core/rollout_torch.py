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
        n, m, T, dev = self.n, self.m, steps, self.device
        D = self.obs.shape[1]
        obs_buf = torch.zeros((T, n, D), dtype=torch.float32, device=dev)
        raw_buf = torch.zeros((T, n, D), dtype=torch.float64, device=dev)
        h_buf = torch.zeros((T, n), dtype=torch.int64, device=dev)
        act_buf = torch.zeros((T, n, self.low.shape[0]), dtype=torch.float32, device=dev)
        logp_buf = torch.zeros((T, n), dtype=torch.float32, device=dev)
        rew_buf = torch.zeros((T, n, 1 + m), dtype=torch.float64, device=dev)
        term_buf = torch.zeros((T, n), dtype=torch.bool, device=dev)
        end_buf = torch.zeros((T, n), dtype=torch.bool, device=dev)
        final_buf = torch.zeros((T, n, D), dtype=torch.float64, device=dev)
        ep_ret_buf = torch.zeros((T, n), dtype=torch.float64, device=dev)
        ep_cost_buf = torch.zeros((T, n, m), dtype=torch.float64, device=dev)
        ep_len_buf = torch.zeros((T, n), dtype=torch.int64, device=dev)
        trunc_h_buf = torch.zeros((T, n), dtype=torch.int64, device=dev)
        for t in range(T):
            obs_n = self.normalize(self.obs)
            obs_buf[t], raw_buf[t], h_buf[t] = obs_n, self.obs, self.h
            x = torch.cat([obs_n, self.time_feature(self.h)], 1) if self.policy_time else obs_n
            a, logp = policy.act(x)
            act_buf[t], logp_buf[t] = a, logp
            out = self.envs.step(torch.maximum(torch.minimum(a, self.high), self.low))
            self.global_step += n
            rew = out.reward.to(dev, torch.float64)
            costs = out.cost.to(dev, torch.float64).reshape(n, m)
            term, trunc = out.terminated.to(dev), out.truncated.to(dev)
            ended = term | trunc
            rew_buf[t, :, 0], rew_buf[t, :, 1:] = rew, costs
            term_buf[t], end_buf[t] = term, ended
            self.ep_ret += rew
            self.ep_cost += costs
            self.ep_len += 1
            self.h += 1
            ep_ret_buf[t], ep_cost_buf[t], ep_len_buf[t] = self.ep_ret, self.ep_cost, self.ep_len
            final_buf[t] = out.final_obs.to(dev, torch.float64)
            trunc_h_buf[t] = self.h  # time index of final_obs
            keep = ~ended
            self.ep_ret *= keep
            self.ep_cost *= keep.unsqueeze(1)
            self.ep_len *= keep
            self.h *= keep
            self.obs = out.obs.to(dev, torch.float64)
        if not bool(torch.isfinite(rew_buf).all() & torch.isfinite(raw_buf).all()):
            bad = torch.nonzero(~torch.isfinite(rew_buf).all(-1) | ~torch.isfinite(raw_buf).all(-1))[
                0
            ].tolist()
            raise DataError("env", bad, "non-finite reward, cost or observation at (step, env)")
        horizon_buf = h_buf + 1 >= self.horizon
        values = critic_value(obs_buf.reshape(T * n, D), h_buf.reshape(-1)).reshape(T, n, 1 + m).double()
        last_v = critic_value(self.normalize(self.obs), self.h.clone()).double()
        next_values = torch.zeros_like(values)
        next_values[:-1] = values[1:]
        next_values[-1] = last_v
        cut = end_buf & ~term_buf  # truncated, not terminated: bootstrap from V(final_obs)
        if bool(cut.any()):
            tv = critic_value(self.normalize(final_buf[cut]), trunc_h_buf[cut]).double()
            next_values[cut] = tv
        ended = end_buf  # finished episodes in (step, env) order, as the numpy collector lists them
        return RolloutBatch(
            obs=obs_buf,
            raw=raw_buf,
            h=h_buf,
            actions=act_buf,
            logp=logp_buf,
            rewards=rew_buf,
            terminated=term_buf,
            ended=end_buf,
            at_horizon=horizon_buf,
            values=values,
            next_values=next_values,
            ep_returns=ep_ret_buf[ended].cpu().numpy(),
            ep_costs=ep_cost_buf[ended].cpu().numpy().reshape(-1, m),
            ep_lengths=ep_len_buf[ended].cpu().numpy(),
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

"""Rollout collection over a gymnasium vector env: a typed :class:`RolloutBatch` per rollout (per step,
``(T, n, ...)``), flattened with its advantages into the :class:`Batch` an algorithm's update reads.

Observations are normalised with statistics *frozen during the rollout* (updated between
iterations), so the log-probabilities stored here are exactly those the update recomputes at the
start. Values are computed in one batched pass after the rollout, including ``V(final_obs)`` of
truncated episodes (normalised with the same statistics).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np
import torch

from bayescrl.constrained.core.envs import restore_env, snapshot_env
from bayescrl.constrained.core.normalize import RunningMeanStd
from bayescrl.utils.errors import DataError


class ObsEncoder:
    """Box observations -> flat float32; Discrete observations -> one-hot vectors."""

    def __init__(self, space: gym.Space):
        self.discrete = isinstance(space, gym.spaces.Discrete)
        if self.discrete:
            self.n, self.dim = int(space.n), int(space.n)
        elif isinstance(space, gym.spaces.Box):
            self.dim = int(np.prod(space.shape))
        else:
            raise DataError("env.observation_space", str(space), "only Box and Discrete are supported")

    def __call__(self, obs) -> np.ndarray:
        if self.discrete:
            idx = np.asarray(obs, dtype=np.int64).reshape(-1)
            out = np.zeros((idx.shape[0], self.n), np.float32)
            out[np.arange(idx.shape[0]), idx] = 1.0
            return out
        arr = np.asarray(obs, dtype=np.float64)
        return arr.reshape(arr.shape[0], -1)  # batched input: (N, *shape) -> (N, D)


@dataclass
class RolloutBatch:
    """One rollout as collected: ``T`` vector steps of ``n`` envs (arrays ``(T, n, ...)``).

    A :class:`~bayescrl.constrained.core.adapter.RewardAdapter` may return a copy with other ``rewards``
    (and, for learned costs, other ``ep_costs``) before advantages are computed. On the ``mjx`` backend
    (:mod:`~bayescrl.constrained.core.rollout_torch`) the per-step arrays are torch tensors on the device,
    with the same shapes and dtypes; the episode totals stay numpy."""

    obs: np.ndarray  # (T, n, D) float32, normalised with the statistics frozen during the rollout
    raw: np.ndarray  # (T, n, D) float64, un-normalised (encoded) observations
    h: np.ndarray  # (T, n) int64 time index within the episode, 0-based
    actions: np.ndarray  # (T, n, *action_shape)
    logp: np.ndarray  # (T, n) float32 behaviour log-probabilities
    rewards: np.ndarray  # (T, n, 1 + m) float64: reward, then the m costs
    terminated: np.ndarray  # (T, n) bool
    ended: np.ndarray  # (T, n) bool, terminated or truncated
    at_horizon: np.ndarray  # (T, n) bool, h + 1 >= H
    values: torch.Tensor  # (T, n, 1 + m) float64 critic values V(s_t)
    next_values: torch.Tensor  # (T, n, 1 + m) float64 V(s_{t+1}) (V(final_obs) after truncation)
    ep_returns: np.ndarray  # (n_ep,) returns of the episodes that ended in this rollout
    ep_costs: np.ndarray  # (n_ep, m) their costs
    ep_lengths: np.ndarray  # (n_ep,) int64
    info: np.ndarray | None = None  # (T, n, k) the recorded ``info[collector.record_info]``, else None

    @property
    def shape(self) -> tuple[int, int]:
        """``(T, n)``: vector steps and envs."""
        return self.h.shape


@dataclass
class Batch:
    """Flattened rollout (B = T * N samples) handed to an algorithm's update."""

    obs: torch.Tensor  # (B, D) normalised observations
    h: torch.Tensor  # (B,) time index within the episode, 0-based
    actions: torch.Tensor
    logp: torch.Tensor  # (B,) behaviour log-probabilities
    rewards: torch.Tensor  # (B, 1 + m): reward then costs
    values: torch.Tensor  # (B, 1 + m)
    advantages: torch.Tensor  # (B, 1 + m), raw (not normalised)
    returns: torch.Tensor  # (B, 1 + m), critic targets
    ep_returns: np.ndarray  # completed episodes in this rollout
    ep_costs: np.ndarray  # (n_ep, m)
    ep_lengths: np.ndarray
    ep_return_est: float  # J_r estimate (completed episodes, else rate x horizon)
    ep_cost_est: torch.Tensor  # (m,) J_C estimate
    raw_obs: np.ndarray  # un-normalised observations, for the statistics update
    horizon: int
    avg_rates: torch.Tensor | None = None  # J_hat per channel (average-reward mode)

    @property
    def size(self) -> int:
        return self.obs.shape[0]


@dataclass
class _RolloutBuffers:
    """The arrays of one rollout while :meth:`RolloutCollector.collect` fills them (``(T, n, ...)``, as in
    :class:`RolloutBatch`), the truncations still waiting for ``V(final_obs)`` and the ended episodes."""

    obs: np.ndarray
    raw: np.ndarray
    h: np.ndarray
    logp: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    ended: np.ndarray
    at_horizon: np.ndarray
    actions: list[np.ndarray] = field(default_factory=list)  # one (n, *action_shape) array per step
    info: list[np.ndarray] = field(default_factory=list)  # the recorded info values per step
    trunc_idx: list[tuple[int, int]] = field(default_factory=list)  # (t, env) of each truncation
    trunc_obs: list[np.ndarray] = field(default_factory=list)  # its encoded final observation
    trunc_h: list[int] = field(default_factory=list)  # its time index
    ep_returns: list[float] = field(default_factory=list)
    ep_costs: list[np.ndarray] = field(default_factory=list)
    ep_lengths: list[int] = field(default_factory=list)

    @classmethod
    def allocate(cls, T: int, n: int, D: int, m: int) -> _RolloutBuffers:
        """Zeroed arrays for ``T`` steps of ``n`` envs, ``D``-dim observations and ``m`` costs."""
        return cls(
            obs=np.zeros((T, n, D), np.float32),
            raw=np.zeros((T, n, D), np.float64),
            h=np.zeros((T, n), np.int64),
            logp=np.zeros((T, n), np.float32),
            rewards=np.zeros((T, n, 1 + m), np.float64),
            terminated=np.zeros((T, n), bool),
            ended=np.zeros((T, n), bool),
            at_horizon=np.zeros((T, n), bool),
        )

    def batch(self, values: torch.Tensor, next_values: torch.Tensor, m: int, with_info: bool) -> RolloutBatch:
        """The finished rollout as a :class:`RolloutBatch`."""
        return RolloutBatch(
            obs=self.obs,
            raw=self.raw,
            h=self.h,
            actions=np.stack(self.actions),
            logp=self.logp,
            rewards=self.rewards,
            terminated=self.terminated,
            ended=self.ended,
            at_horizon=self.at_horizon,
            values=values,
            next_values=next_values,
            ep_returns=np.asarray(self.ep_returns, np.float64),
            ep_costs=np.asarray(self.ep_costs, np.float64).reshape(len(self.ep_costs), m),
            ep_lengths=np.asarray(self.ep_lengths, np.int64),
            info=np.stack(self.info) if with_info else None,
        )


class RolloutCollector:
    """Steps a vector env with a policy; tracks per-env time index and running episode statistics."""

    def __init__(
        self,
        envs: gym.vector.VectorEnv,
        encoder: ObsEncoder,
        rms: RunningMeanStd | None,
        num_costs: int,
        horizon: int,
        device: torch.device | str = "cpu",
    ):
        self.envs, self.encoder, self.rms = envs, encoder, rms
        self.m, self.horizon, self.device = num_costs, horizon, torch.device(device)
        self.n = envs.num_envs
        self.box_actions = isinstance(envs.single_action_space, gym.spaces.Box)
        if self.box_actions:
            self.low = envs.single_action_space.low
            self.high = envs.single_action_space.high
        self.obs: np.ndarray | None = None
        self.policy_time = False  # set by the algorithm: append h/H to the policy input
        self.record_info: str | None = None  # an info key recorded per step (e.g. "features")
        self.h = np.zeros(self.n, np.int64)
        self.ep_ret = np.zeros(self.n)
        self.ep_cost = np.zeros((self.n, num_costs))
        self.ep_len = np.zeros(self.n, np.int64)
        self.global_step = 0

    def reset(self, seed: int) -> None:
        obs, _ = self.envs.reset(seed=seed)
        self.envs.action_space.seed(seed)
        self.obs = self._encode(obs, "reset")
        self.h[:] = 0
        self.ep_ret[:] = 0
        self.ep_cost[:] = 0
        self.ep_len[:] = 0

    def _encode(self, obs, where: str) -> np.ndarray:
        enc = self.encoder(obs)
        if not np.all(np.isfinite(enc)):
            bad = int(np.argwhere(~np.isfinite(enc))[0][0])
            raise DataError(
                "env.observation",
                enc[bad].tolist(),
                f"non-finite observation from env {bad} at env step {self.global_step} ({where})",
                index=self.global_step,
            )
        return enc

    def normalize(self, enc: np.ndarray) -> np.ndarray:
        return enc.astype(np.float32) if self.rms is None else self.rms.normalize(enc)

    def time_feature(self, h: np.ndarray) -> np.ndarray:
        return (np.asarray(h, np.float32) / float(self.horizon)).reshape(-1, 1)

    def collect(self, policy, critic_value, steps: int, rng: np.random.Generator) -> RolloutBatch:
        """Run ``steps`` vector steps (the policy sees ``[obs_norm, h/H]`` when ``self.policy_time``);
        ``critic_value(obs_norm, h)`` returns ``(B, 1 + m)`` values. Actions are sampled by a numpy copy
        of the policy (:class:`~bayescrl.constrained.core.networks.NumpyActor`) with ``rng``."""
        actor = policy.numpy_actor()
        buf = _RolloutBuffers.allocate(steps, self.n, self.encoder.dim, self.m)
        for t in range(steps):
            self._step(t, buf, actor, rng)
        values, next_values = self._values(buf, critic_value)
        return buf.batch(values, next_values, self.m, self.record_info is not None)

    def _step(self, t: int, buf: _RolloutBuffers, actor, rng: np.random.Generator) -> None:
        """Vector step ``t``: act on the normalised observations, step the envs, record the step in
        ``buf`` and end the episodes that terminated or were truncated."""
        obs_n = self.normalize(self.obs)
        buf.obs[t], buf.raw[t], buf.h[t] = obs_n, self.obs, self.h
        x = np.concatenate([obs_n, self.time_feature(self.h)], 1) if self.policy_time else obs_n
        a_np, logp = actor.act(x, rng)
        buf.actions.append(a_np)
        buf.logp[t] = logp
        env_a = np.clip(a_np, self.low, self.high) if self.box_actions else a_np
        next_obs, rew, term, trunc, infos = self.envs.step(env_a)
        self.global_step += self.n
        ended = np.logical_or(term, trunc)
        costs = self._costs(infos, ended)
        if self.record_info is not None:
            buf.info.append(self._info_values(infos, ended, self.record_info))
        rew = self._rewards(rew)
        buf.rewards[t, :, 0] = rew
        buf.rewards[t, :, 1:] = costs
        buf.terminated[t], buf.ended[t] = term, ended
        buf.at_horizon[t] = self.h + 1 >= self.horizon
        self.ep_ret += rew
        self.ep_cost += costs
        self.ep_len += 1
        self.h += 1
        if ended.any():
            self._end_episodes(t, buf, term, trunc, ended, infos.get("final_obs"))
        self.obs = self._encode(next_obs, "step")

    def _rewards(self, rew) -> np.ndarray:
        """The step's rewards as float64; a non-finite one is a :class:`DataError` naming the env."""
        rew = np.asarray(rew, np.float64)
        if not np.all(np.isfinite(rew)):
            bad = int(np.argwhere(~np.isfinite(rew))[0][0])
            raise DataError(
                "env.reward",
                float(rew[bad]),
                f"non-finite reward from env {bad} at env step {self.global_step}",
                index=self.global_step,
            )
        return rew

    def _end_episodes(self, t: int, buf: _RolloutBuffers, term, trunc, ended: np.ndarray, final) -> None:
        """Record the episodes that ended at step ``t`` and reset their running statistics; a truncated
        (not terminated) one keeps its encoded ``final_obs`` for the bootstrap value ``V(final_obs)``."""
        for i in np.flatnonzero(ended):
            if trunc[i] and not term[i]:
                buf.trunc_idx.append((t, i))
                buf.trunc_obs.append(self._encode(np.asarray([final[i]]), "final_obs")[0])
                buf.trunc_h.append(int(self.h[i]))
            buf.ep_returns.append(self.ep_ret[i])
            buf.ep_costs.append(self.ep_cost[i].copy())
            buf.ep_lengths.append(self.ep_len[i])
            self.ep_ret[i] = 0.0
            self.ep_cost[i] = 0.0
            self.ep_len[i] = 0
            self.h[i] = 0

    def _values(self, buf: _RolloutBuffers, critic_value) -> tuple[torch.Tensor, torch.Tensor]:
        """Batched critic values ``V(s_t)`` and ``V(s_{t+1})`` (``(T, n, 1 + m)`` float64): the next
        step's value, ``V(s_T)`` after the last step, ``V(final_obs)`` after a truncation."""
        T, n, D = buf.obs.shape
        with torch.no_grad():
            flat_obs = torch.as_tensor(buf.obs.reshape(T * n, D), device=self.device)
            values = critic_value(flat_obs, buf.h.reshape(-1)).reshape(T, n, 1 + self.m).double()
            last_obs = self.normalize(self.obs)
            last_v = critic_value(torch.as_tensor(last_obs, device=self.device), self.h.copy()).double()
            next_values = torch.zeros_like(values)
            next_values[:-1] = values[1:]
            next_values[-1] = last_v
            if buf.trunc_idx:
                tv = critic_value(
                    torch.as_tensor(self.normalize(np.stack(buf.trunc_obs)), device=self.device),
                    np.asarray(buf.trunc_h),
                ).double()
                for k, (t, i) in enumerate(buf.trunc_idx):
                    next_values[t, i] = tv[k]
        return values, next_values

    def _info_values(self, infos: dict, ended: np.ndarray, key: str) -> np.ndarray:
        """``info[key]`` of this step for every env (``final_info`` for the envs whose episode ended)."""
        vals = None
        if key in infos:
            vals = np.asarray(infos[key], dtype=np.float64).reshape(self.n, -1).copy()
        if ended.any():
            fin = infos.get("final_info", {})
            if key not in fin:
                raise DataError(f"info.{key}", None, f"the env does not report info[{key!r}]")
            f = np.asarray(fin[key], dtype=np.float64).reshape(self.n, -1)
            vals = f.copy() if vals is None else vals
            vals[ended] = f[ended]
        if vals is None:
            raise DataError(f"info.{key}", None, f"the env does not report info[{key!r}]")
        return vals

    def _costs(self, infos: dict, ended: np.ndarray) -> np.ndarray:
        if self.m == 0:
            return np.zeros((self.n, 0))
        costs = np.zeros((self.n, self.m))
        if "cost" in infos:  # absent when every env ended (their costs are in final_info)
            costs[:] = np.asarray(infos["cost"], dtype=np.float64).reshape(self.n, self.m)
        if ended.any():
            fin = infos["final_info"]["cost"]
            costs[ended] = np.asarray(fin, dtype=np.float64).reshape(self.n, self.m)[ended]
        if not np.all(np.isfinite(costs)):
            bad = int(np.argwhere(~np.isfinite(costs))[0][0])
            raise DataError(
                "env.cost",
                costs[bad].tolist(),
                f"non-finite cost from env {bad} at env step {self.global_step + self.n}",
                index=self.global_step,
            )
        return costs

    # ------------------------------------------------------------------ checkpointing
    def state_dict(self) -> dict:
        snaps = None
        if isinstance(self.envs, gym.vector.SyncVectorEnv):
            try:
                snaps = [snapshot_env(e) for e in self.envs.envs]
            except Exception:  # pragma: no cover - env without snapshot support
                snaps = None
        return {
            "obs": None if self.obs is None else self.obs.copy(),
            "h": self.h.copy(),
            "ep_ret": self.ep_ret.copy(),
            "ep_cost": self.ep_cost.copy(),
            "ep_len": self.ep_len.copy(),
            "global_step": self.global_step,
            "env_snapshots": snaps,
            "action_space_rng": self.envs.action_space.np_random.bit_generator.state,
        }

    def load_state_dict(self, d: dict, reseed: int) -> bool:
        """Restore; returns True when the env states were restored exactly (else envs are reseeded)."""
        self.global_step = d["global_step"]
        snaps = d.get("env_snapshots")
        if snaps is not None and isinstance(self.envs, gym.vector.SyncVectorEnv):
            self.envs.reset(seed=reseed)
            for e, s in zip(self.envs.envs, snaps, strict=True):
                restore_env(e, s)
            self.obs, self.h = d["obs"], d["h"]
            self.ep_ret, self.ep_cost, self.ep_len = d["ep_ret"], d["ep_cost"], d["ep_len"]
            self.envs.action_space.np_random.bit_generator.state = d["action_space_rng"]
            return True
        self.reset(reseed)
        return False

"""``MJXVectorEnv``: ``num_envs`` copies of a point task stepped at once with MuJoCo MJX (JAX).

The physics is the CPU env's own compiled ``MjModel`` (the same MJCF, task markers included) moved to the
accelerator with ``mjx.put_model``; one env step is ``frame_skip`` calls of ``mjx.step``, like the CPU
env's ``mj_step(..., nstep=frame_skip)``. Observations, rewards and costs are the JAX mirrors of the CPU
task (:mod:`bayescrl.envs.mjx.jax_tasks`). All copies run under one ``jax.jit`` of a ``jax.vmap``; the
results reach torch through DLPack (``torch.from_dlpack``), without a copy through host memory.

Precision: float32 unless JAX runs with ``jax_enable_x64`` (then float64, the CPU envs' precision).
"""

from __future__ import annotations

import contextlib
import copy
import io
from typing import NamedTuple

import gymnasium as gym
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import torch

from bayescrl.envs.mjx import MJX_ENV_IDS
from bayescrl.envs.mjx.jax_tasks import jax_task
from bayescrl.envs.registration import register_envs
from bayescrl.utils.errors import ConfigError

# MuJoCo's optional Warp backend prints "Failed to import warp" when it is not installed
with contextlib.redirect_stdout(io.StringIO()):
    from mujoco import mjx

_COMPILED: dict[tuple, tuple] = {}


class MJXStep(NamedTuple):
    """One batched step, torch tensors on the env's device, first axis ``num_envs``.

    ``obs`` is the next observation (the first one of a new episode where ``truncated``), ``final_obs``
    the observation reached by this step before any reset (equal to ``obs`` elsewhere)."""

    obs: torch.Tensor  # (n, D)
    reward: torch.Tensor  # (n,)
    cost: torch.Tensor  # (n, m)
    terminated: torch.Tensor  # (n,) bool
    truncated: torch.Tensor  # (n,) bool
    final_obs: torch.Tensor  # (n, D)


def _jax_device(device) -> jax.Device | None:
    if device is None:
        return None
    dev = torch.device(device)
    if dev.type == "cuda":
        gpus = [d for d in jax.devices() if d.platform == "gpu"]
        if not gpus:
            raise ConfigError(
                "device", str(device), "JAX sees no GPU (install jax with CUDA for the mjx backend)"
            )
        return gpus[dev.index or 0]
    if dev.type == "cpu":
        return jax.devices("cpu")[0]
    raise ConfigError("device", str(device), "the mjx backend runs on cpu or cuda")


def to_torch(x: jax.Array) -> torch.Tensor:
    """A JAX array as a torch tensor sharing its memory (DLPack)."""
    return torch.from_dlpack(x)


def to_jax(t: torch.Tensor, device: jax.Device | None) -> jax.Array:
    """A torch tensor as a JAX array: through DLPack when both sit on the same device, else a copy."""
    t = t.detach().contiguous()
    on_gpu = device is not None and device.platform == "gpu"
    if (t.device.type == "cuda") == on_gpu:
        return jnp.from_dlpack(t)
    return jax.device_put(t.cpu().numpy(), device)


def _can_collide(m: mujoco.MjModel) -> bool:
    """Whether any two geoms of different bodies could touch (contype/conaffinity filter), or the model
    has explicit contact pairs or equality constraints."""
    ct, ca, body = m.geom_contype, m.geom_conaffinity, m.geom_bodyid
    for i in range(m.ngeom):
        for j in range(i + 1, m.ngeom):
            if body[i] != body[j] and ((ct[i] & ca[j]) or (ct[j] & ca[i])):
                return True
    return m.npair > 0 or m.neq > 0 or bool(m.jnt_limited.any())


def _without_contacts(m: mujoco.MjModel) -> mujoco.MjModel:
    """A copy with the contact and constraint stages switched off when nothing can collide or bind
    (Circle and Reach: every task object is a marker): the same dynamics, a smaller graph to compile."""
    if _can_collide(m):
        return m
    m = copy.copy(m)
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT) | int(
        mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
    )
    return m


class MJXVectorEnv:
    """A batch of ``num_envs`` copies of ``env`` (a gymnasium id of :data:`MJX_ENV_IDS`), on ``device``.

    ``reset(seed) -> obs`` and ``step(actions) -> MJXStep`` take and return torch tensors; episodes are
    truncated at ``horizon`` (default: the id's ``max_episode_steps``, 200) and reset in the same step
    (``MJXStep.final_obs`` keeps the last observation). Circle and Reach never terminate. ``env_kwargs``
    are the CPU env's (radius, hazards, ...). Spaces, ``num_costs`` and ``cost_limits`` are the CPU env's.
    """

    def __init__(
        self,
        env: str = "bayescrl/PointCircle-v0",
        num_envs: int = 1024,
        seed: int = 0,
        device: str | torch.device | None = None,
        env_kwargs: dict | None = None,
        horizon: int | None = None,
    ):
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ConfigError("num_envs", num_envs, "must be an integer >= 1")
        if env not in MJX_ENV_IDS:
            raise ConfigError("env", env, f"the mjx backend has {list(MJX_ENV_IDS)}")
        register_envs()
        cpu = gym.make(env, **dict(env_kwargs or {}))
        u = cpu.unwrapped
        self.num_envs, self.seed = num_envs, int(seed)
        self.horizon = int(horizon or cpu.spec.max_episode_steps)
        self.single_observation_space = u.observation_space
        self.single_action_space = u.action_space
        self.observation_space, self.action_space = self.single_observation_space, self.single_action_space
        self.num_costs, self.cost_limits = u.num_costs, np.asarray(u.cost_limits, float)
        self.task = jax_task(u.task)
        self.jax_device = _jax_device(device)
        self.mj_model: mujoco.MjModel = u.model
        self.frame_skip, self.dt, self.start_noise = int(u.frame_skip), float(u.dt), float(u.start_noise)
        self._qpos0 = np.asarray(u.init_qpos, float)
        cpu.close()
        self.model = mjx.put_model(_without_contacts(self.mj_model), device=self.jax_device)
        self.data0 = mjx.make_data(self.model, device=self.jax_device)
        self.dtype = self.data0.qpos.dtype
        # one set of jitted functions per task, horizon, device and precision, shared by every instance
        # (they read only the settings in the key): a second env of the same kind does not compile again
        key = (
            env,
            repr(sorted((env_kwargs or {}).items())),
            self.horizon,
            str(self.jax_device),
            str(self.dtype),
        )
        if key not in _COMPILED:
            _COMPILED[key] = (jax.jit(self._reset_batch), jax.jit(self._set_batch), jax.jit(self._step_batch))
        self._reset_jit, self._set_jit, self._step_jit = _COMPILED[key]
        self._state = None

    # ------------------------------------------------------------------ one env (vmapped below)
    def _obs(self, d, ts):
        x, y, yaw = d.qpos[0], d.qpos[1], d.qpos[2]
        c, s = jnp.cos(yaw), jnp.sin(yaw)
        vx, vy, w = d.qvel[0], d.qvel[1], d.qvel[2]
        base = jnp.stack([x, y, c, s, vx, vy, w, c * vx + s * vy, -s * vx + c * vy])
        return jnp.concatenate([base, self.task.observe(ts, d.qpos[:2], yaw)])

    def _start(self, qpos, qvel, ts):
        # no mj_forward here (the CPU env runs one after a reset): an observation needs only qpos and qvel,
        # and mjx.step recomputes every derived quantity from them first, so the trajectory is the same
        d = self.data0.replace(qpos=qpos, qvel=qvel)
        return d, ts, self._obs(d, ts)

    def _reset_one(self, key):
        k_yaw, k_xy, k_task = jax.random.split(key, 3)
        qpos = jnp.asarray(self._qpos0, self.dtype)
        qpos = qpos.at[2].set(jax.random.uniform(k_yaw, (), self.dtype, -jnp.pi, jnp.pi))  # random heading
        if self.start_noise > 0:
            qpos = qpos.at[:2].add(
                jax.random.uniform(k_xy, (2,), self.dtype, -self.start_noise, self.start_noise)
            )
        ts = self.task.reset(k_task, qpos[:2])
        return self._start(qpos, jnp.zeros_like(self.data0.qvel), ts)

    def _step_one(self, d, ts, a):
        xy_prev = d.qpos[:2]
        lo, hi = self.mj_model.actuator_ctrlrange[:, 0], self.mj_model.actuator_ctrlrange[:, 1]
        d = d.replace(ctrl=jnp.clip(a.astype(self.dtype), lo, hi))
        d = jax.lax.fori_loop(0, self.frame_skip, lambda _, dd: mjx.step(self.model, dd), d)
        xy = d.qpos[:2]
        v = (xy - xy_prev) / self.dt
        r, c = self.task.step(ts, xy_prev, xy, v)
        return d, self._obs(d, ts), r, c

    # ------------------------------------------------------------------ batched, jitted
    def _reset_batch(self, keys):
        d, ts, obs = jax.vmap(self._reset_one)(keys)
        return (d, ts, jnp.zeros(keys.shape[0], jnp.int32), keys), obs

    def _set_batch(self, qpos, qvel, ts, keys):
        d, ts, obs = jax.vmap(self._start)(qpos.astype(self.dtype), qvel.astype(self.dtype), ts)
        return (d, ts, jnp.zeros(keys.shape[0], jnp.int32), keys), obs

    def _step_batch(self, state, actions):
        d, ts, t, keys = state
        d, obs, r, c = jax.vmap(self._step_one)(d, ts, actions)
        t = t + 1
        trunc = t >= self.horizon

        def reset(args):
            d, ts, t, keys, obs = args
            both = jax.vmap(lambda k: jax.random.split(k))(keys)
            (d0, ts0, _, _), obs0 = self._reset_batch(both[:, 1])

            def sel(a, b):
                return jnp.where(trunc.reshape((-1,) + (1,) * (a.ndim - 1)), a, b)

            d = jax.tree_util.tree_map(sel, d0, d)
            ts = jax.tree_util.tree_map(sel, ts0, ts)
            return d, ts, jnp.where(trunc, 0, t), sel(both[:, 0], keys), sel(obs0, obs)

        d, ts, t, keys, next_obs = jax.lax.cond(trunc.any(), reset, lambda a: a, (d, ts, t, keys, obs))
        term = jnp.zeros_like(trunc)
        return (d, ts, t, keys), (next_obs, r, c, term, trunc, obs)

    # ------------------------------------------------------------------ torch API
    def _keys(self, seed: int):
        return jax.device_put(jax.random.split(jax.random.PRNGKey(seed), self.num_envs), self.jax_device)

    def reset(self, seed: int | None = None) -> torch.Tensor:
        """Reset every copy (seed: ``seed``, else the constructor's); returns ``obs (n, D)``."""
        self._state, obs = self._reset_jit(self._keys(self.seed if seed is None else int(seed)))
        return to_torch(obs)

    def set_state(self, qpos, qvel, task_state: dict | None = None, seed: int = 0) -> torch.Tensor:
        """Start every copy from given joint positions/velocities ``(n, nq)``, ``(n, nv)`` and task layouts
        (arrays with a leading ``n`` axis; ``task.state_of(cpu_task)`` gives one), e.g. to replay a CPU
        episode. Returns ``obs (n, D)``."""
        put = lambda a: jax.device_put(np.asarray(a), self.jax_device)  # noqa: E731
        ts = {k: put(v).astype(self.dtype) for k, v in (task_state or {}).items()}
        self._state, obs = self._set_jit(put(qpos), put(qvel), ts, self._keys(seed))
        return to_torch(obs)

    def step(self, actions: torch.Tensor) -> MJXStep:
        """Step every copy with ``actions (n, 2)`` (clipped to the control range, as MuJoCo does)."""
        if self._state is None:
            raise ConfigError("step", None, "call reset() first")
        a = to_jax(actions, self.jax_device)
        if a.shape != (self.num_envs, self.mj_model.nu):
            raise ConfigError("actions", tuple(a.shape), f"expected ({self.num_envs}, {self.mj_model.nu})")
        self._state, out = self._step_jit(self._state, a)
        return MJXStep(*(to_torch(x) for x in out))

    @property
    def qpos(self) -> torch.Tensor:
        """Joint positions ``(n, nq)`` of the current state."""
        return to_torch(self._state[0].qpos)

    @property
    def qvel(self) -> torch.Tensor:
        return to_torch(self._state[0].qvel)

    def close(self) -> None:
        self._state = None

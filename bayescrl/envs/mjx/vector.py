"""``MJXVectorEnv``: ``num_envs`` copies of a task stepped at once with MuJoCo MJX (JAX).

The physics is the CPU env's own compiled ``MjModel`` (the same MJCF, task markers included) moved to the
accelerator with ``mjx.put_model``; one env step is ``frame_skip`` calls of ``mjx.step``, like the CPU
env's ``mj_step(..., nstep=frame_skip)``. The robot's observation, reset and termination
(:mod:`bayescrl.envs.mjx.robots`) and the task's observation, reward and cost
(:mod:`bayescrl.envs.mjx.jax_tasks`) are JAX mirrors of the CPU env. All copies run under one
``jax.jit`` of a ``jax.vmap``; the results reach torch through DLPack (``torch.from_dlpack``), without a
copy through host memory.

Precision: float32 unless JAX runs with ``jax_enable_x64`` (then float64, the CPU envs' precision).

Contacts: MJX orients the pyramidal friction cone's frame differently from CPU MuJoCo, so a model whose
bodies touch (the Ant's feet on the floor) runs here only with ``cone="elliptic"``: the Ant tasks as their
declared elliptic variants (``bayescrl/AntCircleElliptic-v0``, ...); a model with contacts and a pyramidal
cone is refused. Even so, MJX's Runge-Kutta step of a free joint (the Ant's torso) differs from CPU
MuJoCo's in the last digits, so Ant episodes agree step by step and drift apart over many steps
(``docs/envs.md``, ``tests/test_mjx_parity.py``).
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
from bayescrl.envs.mjx.robots import jax_robot
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
    truncated at ``horizon`` (default: the id's ``max_episode_steps``, 200), terminated where the robot
    is unhealthy (the Ant's torso height; the point robot never terminates), and reset in the same step
    (``MJXStep.final_obs`` keeps the last observation). ``env_kwargs`` are the CPU env's (radius,
    hazards, ...). Spaces, ``num_costs`` and ``cost_limits`` are the CPU env's.
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
        self.robot = jax_robot(u)
        self.jax_device = _jax_device(device)
        self.mj_model: mujoco.MjModel = u.model
        self.frame_skip, self.dt = int(u.frame_skip), float(u.dt)
        cpu.close()
        model = _without_contacts(self.mj_model)
        if _can_collide(model) and model.opt.cone != mujoco.mjtCone.mjCONE_ELLIPTIC:
            raise ConfigError(
                "env", env, "a model with contacts needs cone='elliptic' on MJX (use the elliptic variant)"
            )
        self.model = mjx.put_model(model, device=self.jax_device)
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
        rb = self.robot
        return jnp.concatenate([rb.obs(d), self.task.observe(ts, rb.xy(d), rb.yaw(d))])

    def _start(self, qpos, qvel, ts):
        # no mj_forward here (the CPU env runs one after a reset): an observation needs only qpos and qvel,
        # and mjx.step recomputes every derived quantity from them first, so the trajectory is the same
        d = self.data0.replace(qpos=qpos, qvel=qvel)
        return d, ts, self._obs(d, ts)

    def _reset_one(self, key):
        k_a, k_b, k_task = jax.random.split(key, 3)  # the robot's two draws, then the task's layout
        qpos, qvel = self.robot.reset(k_a, k_b, self.dtype)
        d = self.data0.replace(qpos=qpos)
        ts = self.task.reset(k_task, self.robot.xy(d))
        return self._start(qpos, qvel, ts)

    def _step_one(self, d, ts, a):
        xy_prev = self.robot.xy(d)
        lo, hi = self.mj_model.actuator_ctrlrange[:, 0], self.mj_model.actuator_ctrlrange[:, 1]
        d = d.replace(ctrl=jnp.clip(a.astype(self.dtype), lo, hi))
        d = jax.lax.fori_loop(0, self.frame_skip, lambda _, dd: mjx.step(self.model, dd), d)
        xy = self.robot.xy(d)
        v = (xy - xy_prev) / self.dt
        r, c = self.task.step(ts, xy_prev, xy, v)
        obs = self._obs(d, ts)
        if not self.robot.terminates:
            return d, obs, r, c, jnp.asarray(False)
        # a diverged simulation (not finite; CPU MuJoCo resets its data with a warning there) ends the
        # episode as unhealthy, with zeros in place of what it cannot compute, so a batch stays finite
        ok = jnp.isfinite(d.qpos).all() & jnp.isfinite(d.qvel).all()
        r, c, obs = (jnp.where(ok, x, jnp.zeros_like(x)) for x in (r, c, obs))
        return d, obs, r, c, ~self.robot.healthy(d)

    # ------------------------------------------------------------------ batched, jitted
    def _reset_batch(self, keys):
        d, ts, obs = jax.vmap(self._reset_one)(keys)
        return (d, ts, jnp.zeros(keys.shape[0], jnp.int32), keys), obs

    def _set_batch(self, qpos, qvel, ts, keys, warmstart):
        d, ts, obs = jax.vmap(self._start)(qpos.astype(self.dtype), qvel.astype(self.dtype), ts)
        d = d.replace(qacc_warmstart=warmstart.astype(self.dtype))
        return (d, ts, jnp.zeros(keys.shape[0], jnp.int32), keys), obs

    def _step_batch(self, state, actions):
        d, ts, t, keys = state
        d, obs, r, c, term = jax.vmap(self._step_one)(d, ts, actions)
        t = t + 1
        trunc = t >= self.horizon
        done = term | trunc

        def reset(args):
            d, ts, t, keys, obs = args
            both = jax.vmap(lambda k: jax.random.split(k))(keys)
            (d0, ts0, _, _), obs0 = self._reset_batch(both[:, 1])

            def sel(a, b):
                return jnp.where(done.reshape((-1,) + (1,) * (a.ndim - 1)), a, b)

            d = jax.tree_util.tree_map(sel, d0, d)
            ts = jax.tree_util.tree_map(sel, ts0, ts)
            return d, ts, jnp.where(done, 0, t), sel(both[:, 0], keys), sel(obs0, obs)

        d, ts, t, keys, next_obs = jax.lax.cond(done.any(), reset, lambda a: a, (d, ts, t, keys, obs))
        return (d, ts, t, keys), (next_obs, r, c, term, trunc, obs)

    # ------------------------------------------------------------------ torch API
    def _keys(self, seed: int):
        return jax.device_put(jax.random.split(jax.random.PRNGKey(seed), self.num_envs), self.jax_device)

    def reset(self, seed: int | None = None) -> torch.Tensor:
        """Reset every copy (seed: ``seed``, else the constructor's); returns ``obs (n, D)``."""
        self._state, obs = self._reset_jit(self._keys(self.seed if seed is None else int(seed)))
        return to_torch(obs)

    def set_state(
        self, qpos, qvel, task_state: dict | None = None, seed: int = 0, qacc_warmstart=None
    ) -> torch.Tensor:
        """Start every copy from given joint positions/velocities ``(n, nq)``, ``(n, nv)`` and task layouts
        (arrays with a leading ``n`` axis; ``task.state_of(cpu_task)`` gives one), e.g. to replay a CPU
        episode; ``qacc_warmstart (n, nv)``: the constraint solver's warm start (default zeros, as after a
        reset), to continue a CPU episode from any of its steps. The episode clocks restart at 0.
        Returns ``obs (n, D)``."""
        put = lambda a: jax.device_put(np.asarray(a), self.jax_device)  # noqa: E731
        ts = {k: put(v).astype(self.dtype) for k, v in (task_state or {}).items()}
        warm = np.zeros((self.num_envs, self.mj_model.nv)) if qacc_warmstart is None else qacc_warmstart
        self._state, obs = self._set_jit(put(qpos), put(qvel), ts, self._keys(seed), put(warm))
        return to_torch(obs)

    def step(self, actions: torch.Tensor) -> MJXStep:
        """Step every copy with ``actions (n, A)`` (clipped to the control range, as MuJoCo does)."""
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

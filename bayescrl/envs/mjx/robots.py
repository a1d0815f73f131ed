"""The robots of the MJX backend in JAX, one env at a time (vmapped by
:class:`~bayescrl.envs.mjx.MJXVectorEnv`).

Each class mirrors what its CPU env does around ``mj_step`` (same model, same formulas, parameters read
from the CPU env object):

* ``reset(key_a, key_b, dtype) -> (qpos, qvel)``: the env's random initial state (drawn with
  ``jax.random``, so a seed gives other states than on the CPU env);
* ``xy(d)``, ``yaw(d)``: the planar position and heading the tasks see; ``obs(d)``: the robot's part of
  the observation; ``healthy(d)``: False ends the episode (``terminated``) when ``terminates``.

:class:`PointRobot` is :class:`bayescrl.envs.point.PointTaskEnv` (slide x, y and a heading hinge);
:class:`AntRobot` is gymnasium's ``Ant-v5`` as :class:`bayescrl.envs.ant.AntTaskEnv` uses it (qpos and
qvel observed, torso height in ``healthy_z_range``, reset noise of ``reset_noise_scale``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bayescrl.envs.ant import AntTaskEnv
from bayescrl.envs.point import PointTaskEnv
from bayescrl.utils.errors import ConfigError


def quat_to_yaw(q: jnp.ndarray) -> jnp.ndarray:
    """:func:`bayescrl.envs.ant.quat_to_yaw`: heading (rotation about z) of a quaternion ``(w, x, y, z)``."""
    w, x, y, z = q[0], q[1], q[2], q[3]
    return jnp.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


class PointRobot:
    """:class:`~bayescrl.envs.point.PointTaskEnv`: observation ``x, y, cos yaw, sin yaw, v_x, v_y, yaw
    rate, v_forward, v_left``; random heading (and ``start_noise`` on x, y) at reset; never terminates."""

    terminates = False
    obs_dim = 9

    def __init__(self, env):
        self.qpos0 = np.asarray(env.init_qpos, float)
        self.nv = int(env.model.nv)
        self.start_noise = float(env.start_noise)

    def reset(self, k_yaw, k_xy, dtype):
        qpos = jnp.asarray(self.qpos0, dtype)
        qpos = qpos.at[2].set(jax.random.uniform(k_yaw, (), dtype, -jnp.pi, jnp.pi))  # random heading
        if self.start_noise > 0:
            qpos = qpos.at[:2].add(jax.random.uniform(k_xy, (2,), dtype, -self.start_noise, self.start_noise))
        return qpos, jnp.zeros(self.nv, dtype)

    def xy(self, d):
        return d.qpos[:2]

    def yaw(self, d):
        return d.qpos[2]

    def obs(self, d):
        x, y, yaw = d.qpos[0], d.qpos[1], d.qpos[2]
        c, s = jnp.cos(yaw), jnp.sin(yaw)
        vx, vy, w = d.qvel[0], d.qvel[1], d.qvel[2]
        return jnp.stack([x, y, c, s, vx, vy, w, c * vx + s * vy, -s * vx + c * vy])

    def healthy(self, d):
        return jnp.asarray(True)


class AntRobot:
    """gymnasium's ``Ant-v5`` under :class:`~bayescrl.envs.ant.AntTaskEnv`: observation ``qpos`` (15, torso
    x, y included) and ``qvel`` (14); reset ``qpos = init_qpos + U(-s, s)``, ``qvel = init_qvel + s N(0, 1)``
    (``s = reset_noise_scale``); healthy while the state is finite and the torso height is in
    ``healthy_z_range`` (bounds included); terminates when not (``terminate_when_unhealthy``)."""

    def __init__(self, env):
        self.qpos0 = np.asarray(env.init_qpos, float)
        self.qvel0 = np.asarray(env.init_qvel, float)
        self.noise = float(env._reset_noise_scale)
        self.z_lo, self.z_hi = (float(z) for z in env._healthy_z_range)
        self.terminates = bool(env._terminate_when_unhealthy)
        self.obs_dim = self.qpos0.size + self.qvel0.size

    def reset(self, kq, kv, dtype):
        s = self.noise
        qpos = jnp.asarray(self.qpos0, dtype) + jax.random.uniform(kq, self.qpos0.shape, dtype, -s, s)
        qvel = jnp.asarray(self.qvel0, dtype) + s * jax.random.normal(kv, self.qvel0.shape, dtype)
        return qpos, qvel

    def xy(self, d):
        return d.qpos[:2]

    def yaw(self, d):
        return quat_to_yaw(d.qpos[3:7])

    def obs(self, d):
        return jnp.concatenate([d.qpos, d.qvel])

    def healthy(self, d):
        finite = jnp.isfinite(d.qpos).all() & jnp.isfinite(d.qvel).all()
        z = d.qpos[2]
        return finite & (z >= self.z_lo) & (z <= self.z_hi)


def jax_robot(env):
    """The JAX mirror of a CPU env's robot (the unwrapped env); ``ConfigError`` for the others."""
    if isinstance(env, PointTaskEnv):
        return PointRobot(env)
    if isinstance(env, AntTaskEnv):
        return AntRobot(env)
    raise ConfigError("env", type(env).__name__, "the MJX backend has the point robot and the Ant only")


__all__ = ["AntRobot", "PointRobot", "jax_robot", "quat_to_yaw"]

"""The point tasks' observations, rewards and costs in JAX, one env at a time (vmapped by the caller).

Each class mirrors a CPU task of :mod:`bayescrl.envs.tasks` (same formulas, same parameters, read from
the CPU task object) as pure functions of a small per-env state (a dict of arrays):

* ``reset(key, xy) -> state``: the task's random layout (Reach: goal direction, hazards);
* ``observe(state, xy, yaw) -> (obs_dim,)``; ``step(state, xy_prev, xy, v) -> (reward, costs (m,))``;
* ``state_of(task)``: the state of a CPU task after its ``reset`` (to replay a CPU episode exactly).

Departure (sampling only): Reach's hazards are rejection-sampled like :func:`bayescrl.envs.tasks._place`
(first valid of i.i.d. candidates, the same distribution) but from at most ``tries`` candidates per
hazard (jit needs a fixed count); should all of them fail, the last one is kept. With the default band
(8 hazards of 0.5 m in 11 x 6 m) a hazard is accepted within a few candidates. The draws use
``jax.random``, so a seed gives other layouts than on the CPU envs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bayescrl.envs.tasks import CircleTask, ReachTask, Task
from bayescrl.utils.errors import ConfigError


def lidar(rel_xy: jnp.ndarray, yaw, num_bins: int) -> jnp.ndarray:
    """:func:`bayescrl.envs.tasks.lidar` (``exp(-dist)`` of the closest object per egocentric sector)."""
    dist = jnp.hypot(rel_xy[:, 0], rel_xy[:, 1])
    ang = jnp.mod(jnp.arctan2(rel_xy[:, 1], rel_xy[:, 0]) - yaw, 2 * jnp.pi)
    bins = jnp.minimum((ang * (num_bins / (2 * jnp.pi))).astype(jnp.int32), num_bins - 1)
    return jnp.zeros(num_bins, dist.dtype).at[bins].max(jnp.exp(-dist))


class JaxCircle:
    """:class:`~bayescrl.envs.tasks.CircleTask`: ``R = (-v_x y + v_y x) / (1 + |r - d|)``,
    ``C = 1[|x| > x_lim]``."""

    obs_dim, num_costs = 0, 1

    def __init__(self, task: CircleTask):
        self.radius, self.x_lim = float(task.radius), float(task.x_lim)

    def reset(self, key, xy):
        return {}

    def state_of(self, task: CircleTask) -> dict:
        return {}

    def observe(self, state, xy, yaw):
        return jnp.zeros(0, xy.dtype)

    def step(self, state, xy_prev, xy, v):
        x, y = xy[0], xy[1]
        r = (-v[0] * y + v[1] * x) / (1.0 + jnp.abs(jnp.hypot(x, y) - self.radius))
        c = (jnp.abs(x) > self.x_lim).astype(xy.dtype)
        return r, c[None]


class JaxReach:
    """:class:`~bayescrl.envs.tasks.ReachTask`: ``R = ||g - xy_{t-1}|| - ||g - xy_t||``, cost 1 inside a
    hazard; observation: egocentric unit vector to the goal, distance / ``goal_distance``, hazard lidar."""

    num_costs = 1

    def __init__(self, task: ReachTask, tries: int = 64):
        self.goal_distance, self.hazard_size = float(task.goal_distance), float(task.hazard_size)
        self.num_hazards, self.lidar_bins = int(task.num_hazards), int(task.lidar_bins)
        self.band_length, self.band_width = float(task.band_length), float(task.band_width)
        self.obs_dim = 3 + self.lidar_bins
        self.tries = int(tries)

    def state_of(self, task: ReachTask) -> dict:
        return {
            "goal": np.asarray(task.goal, float),
            "hazards": np.asarray(task.hazards, float).reshape(-1, 2),
        }

    def reset(self, key, xy):
        k_ang, k_haz = jax.random.split(key)
        ang = jax.random.uniform(k_ang, (), xy.dtype, 0.0, 2 * jnp.pi)
        u = jnp.stack([jnp.cos(ang), jnp.sin(ang)])
        n = jnp.stack([-u[1], u[0]])
        goal = xy + self.goal_distance * u
        lo, size = 1.0 + self.hazard_size, self.hazard_size
        far = jnp.full((self.num_hazards, 2), 1e6, xy.dtype)

        def place(placed, inp):
            i, k = inp
            ka, kb = jax.random.split(k)
            a = jax.random.uniform(ka, (self.tries,), xy.dtype, lo, self.band_length)
            b = jax.random.uniform(kb, (self.tries,), xy.dtype, -self.band_width, self.band_width)
            cand = xy + a[:, None] * u + b[:, None] * n  # (tries, 2)
            ok = jnp.hypot(*(cand - xy).T) > 0.5 + size
            gap = jnp.hypot(cand[:, None, 0] - placed[None, :, 0], cand[:, None, 1] - placed[None, :, 1])
            ok &= (gap > 2 * size).all(1)
            pick = jnp.where(ok.any(), jnp.argmax(ok), self.tries - 1)
            placed = placed.at[i].set(cand[pick])
            return placed, None

        keys = jax.random.split(k_haz, max(self.num_hazards, 1))[: self.num_hazards]
        hazards, _ = jax.lax.scan(place, far, (jnp.arange(self.num_hazards), keys))
        return {"goal": goal, "hazards": hazards}

    def observe(self, state, xy, yaw):
        rel = state["goal"] - xy
        d = jnp.hypot(rel[0], rel[1])
        c, s = jnp.cos(yaw), jnp.sin(yaw)
        dd = jnp.maximum(d, 1e-8)
        unit = jnp.stack([(c * rel[0] + s * rel[1]) / dd, (-s * rel[0] + c * rel[1]) / dd])
        return jnp.concatenate(
            [unit, (d / self.goal_distance)[None], lidar(state["hazards"] - xy, yaw, self.lidar_bins)]
        )

    def step(self, state, xy_prev, xy, v):
        g = state["goal"]
        r = jnp.hypot(*(g - xy_prev)) - jnp.hypot(*(g - xy))
        inside = jnp.hypot(*(state["hazards"] - xy).T) <= self.hazard_size
        return r, inside.any().astype(xy.dtype)[None]


def jax_task(task: Task):
    """The JAX mirror of a CPU task object (Circle, Reach); ``ConfigError`` for the others."""
    if isinstance(task, CircleTask):
        return JaxCircle(task)
    if isinstance(task, ReachTask):
        return JaxReach(task)
    raise ConfigError("env", type(task).__name__, "the MJX backend has Circle and Reach (point robot) only")


__all__ = ["JaxCircle", "JaxReach", "jax_task", "lidar"]

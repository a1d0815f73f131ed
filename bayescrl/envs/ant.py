"""Ant tasks: gymnasium's ``Ant-v5`` (its MuJoCo model, unchanged) solving the planar tasks of ``tasks.py``.

The task geometry (circle, goal, hazards, apples, bombs) is *virtual*: it enters through the observation,
reward and cost only, so gymnasium's ``ant.xml`` is used as is (departure: task objects are not drawn when
rendering). The Ant's own reward terms (forward velocity, healthy bonus, control and contact costs) are
replaced by the task reward, as in CPO's Ant-Circle/Ant-Gather; the Ant still terminates when its torso
leaves ``healthy_z_range`` (gymnasium's default), which is reported as ``terminated``.

Observation: ``qpos`` (15, including the torso's x, y, which the tasks need) + ``qvel`` (14) + the task's
sensors; contact forces are left out (``include_cfrc_ext_in_observation=False``). The thesis' Ant-Circle has
``S in R^32`` (rllab's ant: qpos, qvel and the centre of mass); ours has 29 dimensions for Circle.

Option ``cone="elliptic"`` (the ids ``bayescrl/AntCircleElliptic-v0``, ``bayescrl/AntReachElliptic-v0``)
sets MuJoCo's elliptic friction cone instead of ``ant.xml``'s default pyramidal one: a declared variant
with other contact dynamics, the one the MJX backend can run (MJX orients the pyramidal cone's frame
differently from CPU MuJoCo, so only the elliptic cone gives the same trajectories on both).
"""

from __future__ import annotations

import mujoco
import numpy as np
from gymnasium import spaces
from gymnasium.envs.mujoco.ant_v5 import AntEnv

from bayescrl.envs.pickling import CopyByArgs
from bayescrl.envs.tasks import CircleTask, GatherTask, ReachTask, Task
from bayescrl.utils.errors import ConfigError


def quat_to_yaw(q: np.ndarray) -> float:
    """Heading (rotation about z) of a MuJoCo quaternion ``(w, x, y, z)``."""
    w, x, y, z = q
    return float(np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z)))


#: MuJoCo's friction cones by name (``option cone``)
CONES = {"pyramidal": mujoco.mjtCone.mjCONE_PYRAMIDAL, "elliptic": mujoco.mjtCone.mjCONE_ELLIPTIC}


def set_cone(model: mujoco.MjModel, cone: str) -> None:
    """Set ``model.opt.cone`` by name (``"pyramidal"``, the MJCF default, or ``"elliptic"``)."""
    if cone not in CONES:
        raise ConfigError("cone", cone, f"must be one of {list(CONES)}")
    model.opt.cone = CONES[cone]


class AntTaskEnv(CopyByArgs, AntEnv):
    """A :class:`~bayescrl.envs.tasks.Task` solved by gymnasium's Ant (``Ant-v5`` model, ``dt = 0.05`` s).
    ``cone``: MuJoCo's friction cone, ``"pyramidal"`` (``ant.xml``) or ``"elliptic"`` (the MJX variant)."""

    def __init__(self, task: Task, cone: str = "pyramidal", **kwargs):
        if not isinstance(task, Task):
            raise ConfigError("task", type(task).__name__, "must be a bayescrl.envs.tasks.Task")
        if cone not in CONES:
            raise ConfigError("cone", cone, f"must be one of {list(CONES)}")
        for key in ("exclude_current_positions_from_observation", "include_cfrc_ext_in_observation"):
            if key in kwargs:
                raise ConfigError(
                    key, kwargs[key], "fixed by the task env (positions in, contact forces out)"
                )
        self.task = task
        super().__init__(
            exclude_current_positions_from_observation=False, include_cfrc_ext_in_observation=False, **kwargs
        )
        self.cone = cone
        set_cone(self.model, cone)
        base = self.observation_space.shape[0]
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(base + task.obs_dim,), dtype=np.float64)
        self.num_costs = task.num_costs
        self.cost_limits = np.asarray(task.cost_limits, dtype=float)
        self.feature_names = tuple(task.feature_names)

    @property
    def xy(self) -> np.ndarray:
        return self.data.qpos[:2].copy()

    def _get_obs(self):
        base = super()._get_obs()
        return np.concatenate([base, self.task.observe(self.data.qpos[:2], quat_to_yaw(self.data.qpos[3:7]))])

    def reset_model(self):
        super().reset_model()  # gymnasium's noisy initial pose, torso near the origin
        self.task.reset(self.np_random, self.xy)
        return self._get_obs()

    def _get_reset_info(self):
        info = super()._get_reset_info()
        if self.feature_names:
            info["features"] = self.task.reset_features()
        return info

    def step(self, action):
        action = np.asarray(action, dtype=np.float64)
        if action.shape != self.action_space.shape or not np.isfinite(action).all():
            raise ConfigError("action", action, f"must be a finite array of shape {self.action_space.shape}")
        xy_prev = self.xy
        self.do_simulation(action, self.frame_skip)
        xy = self.xy
        v = (xy - xy_prev) / self.dt
        reward, costs, terms = self.task.step(xy_prev, xy, v)
        terms.pop("changed", None)
        terminated = bool(self.task.done) or ((not self.is_healthy) and self._terminate_when_unhealthy)
        info = self.task.step_info(costs, xy, v, terms)
        if self.render_mode == "human":
            self.render()
        return self._get_obs(), float(reward), terminated, False, info


class AntCircleEnv(AntTaskEnv):
    """Ant-Circle: CPO's geometry (radius ``d = 10``, ``x_lim = 3``); limit 10 per episode (thesis table)."""

    def __init__(self, radius: float = 10.0, x_lim: float = 3.0, cost_limit: float = 10.0, **kwargs):
        super().__init__(CircleTask(radius, x_lim, cost_limit), **kwargs)


class AntReachEnv(AntTaskEnv):
    """Ant-Reach: goal 60 m away (unreachable in a 200-step episode of 10 s), 8 hazards of radius 1 m in a
    24 m x 10 m band towards it; limit 25 (the thesis' table)."""

    def __init__(
        self,
        goal_distance: float = 60.0,
        num_hazards: int = 8,
        hazard_size: float = 1.0,
        cost_limit: float = 25.0,
        **kwargs,
    ):
        task = ReachTask(
            goal_distance, num_hazards, hazard_size, band_length=24.0, band_width=5.0, cost_limit=cost_limit
        )
        super().__init__(task, **kwargs)


class AntGatherEnv(AntTaskEnv):
    """Ant-Gather: rllab's Gather layout; limit 0.2 bombs per episode (CPO's Ant-Gather value)."""

    def __init__(self, cost_limit: float = 0.2, num_apples: int = 8, num_bombs: int = 8, **kwargs):
        super().__init__(GatherTask(num_apples, num_bombs, cost_limit=cost_limit), **kwargs)

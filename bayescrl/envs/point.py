"""Point-robot tasks on the project's point-mass MuJoCo model (``assets/point.xml``).

The robot follows safety-gym's point robot (slide x, slide y, hinge heading; actions = forward force and
turning torque, both in ``[-1, 1]``). One env step is 5 physics steps of 0.01 s (``dt = 0.05`` s), so an
episode of 200 steps (the thesis' "Max horizon" of Table `table:hyperparams`) lasts 10 s, during which the
robot covers at most ~20 m.

Observation (``9 + task.obs_dim``): ``x, y, cos(yaw), sin(yaw), v_x, v_y, yaw_rate, v_forward, v_left``
followed by the task's sensors (see ``bayescrl.envs.tasks``). The chapters' point robot has ``S in R^9``
(CPO's rllab point); ours matches that for Circle and has extra sensors for the other tasks.
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
from gymnasium import spaces, utils
from gymnasium.envs.mujoco.mujoco_env import MujocoEnv

from bayescrl.envs.pickling import CopyByArgs
from bayescrl.envs.tasks import CircleTask, GatherTask, Marker, NavigationTask, ReachTask, Task
from bayescrl.utils.errors import ConfigError

POINT_XML = Path(__file__).parent / "assets" / "point.xml"
_HIDDEN = np.array([0.0, 0.0, -10.0])


class PointTaskEnv(CopyByArgs, MujocoEnv, utils.EzPickle):
    """A :class:`~bayescrl.envs.tasks.Task` solved by the point robot.

    ``info["cost"]`` is a float (one cost) or an array of length ``num_costs``; ``info["costs"]`` names each
    term. ``cost_limits`` are the thesis' thresholds. ``frame_skip`` sets the physics steps per env step.
    """

    metadata = {"render_modes": ["human", "rgb_array", "depth_array"], "render_fps": 20}
    BASE_OBS = 9

    def __init__(
        self,
        task: Task,
        frame_skip: int = 5,
        render_mode: str | None = None,
        width: int = 480,
        height: int = 480,
        start_noise: float = 0.0,
    ):
        if not isinstance(task, Task):
            raise ConfigError("task", type(task).__name__, "must be a bayescrl.envs.tasks.Task")
        if isinstance(frame_skip, bool) or int(frame_skip) != frame_skip or frame_skip < 1:
            raise ConfigError("frame_skip", frame_skip, "must be an integer >= 1")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ConfigError(
                "render_mode", render_mode, f"must be None or one of {self.metadata['render_modes']}"
            )
        utils.EzPickle.__init__(self, task, frame_skip, render_mode, width, height, start_noise)
        self.task = task
        self.start_noise = float(start_noise)
        task.reset(np.random.default_rng(0), np.zeros(2))
        self._slots = task.markers()
        self.metadata = dict(self.metadata, render_fps=int(round(1.0 / (0.01 * frame_skip))))
        obs_space = spaces.Box(-np.inf, np.inf, shape=(self.BASE_OBS + task.obs_dim,), dtype=np.float64)
        MujocoEnv.__init__(
            self,
            str(POINT_XML),
            int(frame_skip),
            observation_space=obs_space,
            render_mode=render_mode,
            width=width,
            height=height,
            camera_name="track",
        )
        self.num_costs = task.num_costs
        self.cost_limits = np.asarray(task.cost_limits, dtype=float)
        self.feature_names = tuple(task.feature_names)
        self._mocap_ids = [
            int(self.model.body_mocapid[mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, f"task{i}")])
            for i in range(len(self._slots))
        ]

    # -- model construction: task objects are mocap bodies "task<i>" (solid ones collide). Mocap bodies, not
    # world geoms, because MuJoCo's mid-phase caches the world body's bounding volumes at compile time.
    def _initialize_simulation(self):
        xml = POINT_XML.read_text()
        geoms = []
        for i, m in enumerate(self._slots):
            col = 'contype="1" conaffinity="1"' if m.solid else 'contype="0" conaffinity="0"'
            if m.kind == "boundary":
                shape = 'type="box" size="0.03 40 0.005"'
            else:
                shape = f'type="cylinder" size="{m.size} {0.3 if m.solid else 0.005}"'
            rgba = " ".join(map(str, m.rgba))
            geoms.append(
                f'<body name="task{i}" mocap="true" pos="0 0 -10">'
                f'<geom name="task{i}" {shape} {col} rgba="{rgba}"/></body>'
            )
        model = mujoco.MjModel.from_xml_string(xml.replace("<!-- TASK_GEOMS -->", "\n".join(geoms)))
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, self.width)
        model.vis.global_.offheight = max(model.vis.global_.offheight, self.height)
        return model, mujoco.MjData(model)

    def _sync_markers(self) -> None:
        markers: list[Marker] = self.task.markers()
        by_kind: dict[str, list[Marker]] = {}
        for m in markers:
            by_kind.setdefault(m.kind, []).append(m)
        for mid, slot in zip(self._mocap_ids, self._slots, strict=True):
            queue = by_kind.get(slot.kind, [])
            if queue:
                m = queue.pop(0)
                self.data.mocap_pos[mid] = [m.xy[0], m.xy[1], 0.3 if m.solid else 0.005]
            else:
                self.data.mocap_pos[mid] = _HIDDEN

    def _step_mujoco_simulation(self, ctrl, n_frames):
        # gymnasium's version also runs mj_rnePostConstraint (contact forces for cfrc_ext), unused here
        self.data.ctrl[:] = ctrl
        mujoco.mj_step(self.model, self.data, nstep=n_frames)

    # -- state helpers
    @property
    def xy(self) -> np.ndarray:
        return self.data.qpos[:2].copy()

    @property
    def yaw(self) -> float:
        return float(self.data.qpos[2])

    def _get_obs(self) -> np.ndarray:
        yaw = self.yaw
        c, s = np.cos(yaw), np.sin(yaw)
        vx, vy, w = self.data.qvel[:3]
        base = np.array(
            [self.data.qpos[0], self.data.qpos[1], c, s, vx, vy, w, c * vx + s * vy, -s * vx + c * vy]
        )
        return np.concatenate([base, self.task.observe(self.data.qpos[:2], yaw)])

    # -- gymnasium API
    def reset_model(self):
        qpos = self.init_qpos.copy()
        qpos[2] = self.np_random.uniform(-np.pi, np.pi)  # random heading
        if self.start_noise > 0:
            qpos[:2] += self.np_random.uniform(-self.start_noise, self.start_noise, size=2)
        self.set_state(qpos, self.init_qvel.copy())
        self.task.reset(self.np_random, self.xy)
        self._sync_markers()
        mujoco.mj_forward(self.model, self.data)
        return self._get_obs()

    def _get_reset_info(self):
        return {"features": self.task.reset_features()} if self.feature_names else {}

    def step(self, action):
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (2,) or not np.isfinite(action).all():
            raise ConfigError("action", action, "must be a finite array of shape (2,)")
        # Out-of-range actions are clipped by MuJoCo's ctrlrange (as in every MuJoCo env; documented).
        xy_prev = self.xy
        self.do_simulation(action, self.frame_skip)
        xy = self.xy
        v = (xy - xy_prev) / self.dt
        reward, costs, terms = self.task.step(xy_prev, xy, v)
        if terms.pop("changed", False):
            self._sync_markers()
        info = self.task.step_info(costs, xy, v, terms)
        if self.render_mode == "human":
            self.render()
        return self._get_obs(), float(reward), bool(self.task.done), False, info


class PointCircleEnv(PointTaskEnv):
    """Point-Circle: circle of radius ``d = 3`` m, safe strip ``|x| <= 0.9`` m (CPO's ratio
    ``x_lim / d = 3 / 10``, scaled to the point's reach), limit 10 per 200-step episode (thesis table)."""

    def __init__(self, radius: float = 3.0, x_lim: float = 0.9, cost_limit: float = 10.0, **kwargs):
        super().__init__(CircleTask(radius, x_lim, cost_limit), **kwargs)


class PointReachEnv(PointTaskEnv):
    """Point-Reach: goal 25 m away (unreachable within 10 s at <= 2 m/s), 8 hazards of radius 0.5 m on the
    way, limit 25 per 200-step episode (the thesis' table)."""

    def __init__(
        self,
        goal_distance: float = 25.0,
        num_hazards: int = 8,
        hazard_size: float = 0.5,
        cost_limit: float = 25.0,
        **kwargs,
    ):
        super().__init__(ReachTask(goal_distance, num_hazards, hazard_size, cost_limit=cost_limit), **kwargs)


class PointNavigationEnv(PointTaskEnv):
    """Point-Navigation: two costs (hazards, pillars), limits ``(10, 25)`` (the thesis' table)."""

    def __init__(self, cost_limits: tuple[float, float] = (10.0, 25.0), goal_bonus: float = 1.0, **kwargs):
        super().__init__(NavigationTask(cost_limits=cost_limits, goal_bonus=goal_bonus), **kwargs)


class PointGatherEnv(PointTaskEnv):
    """Point-Gather: rllab's Gather layout; limit 0.1 bombs per episode (CPO's Point-Gather value)."""

    def __init__(self, cost_limit: float = 0.1, num_apples: int = 8, num_bombs: int = 8, **kwargs):
        super().__init__(GatherTask(num_apples, num_bombs, cost_limit=cost_limit), **kwargs)

"""Run (velocity-constrained locomotion) tasks on gymnasium's ``Ant-v5`` and ``Humanoid-v5``.

Chapter `ecop`, appendix "Environment Details": the robot runs as fast as possible (gymnasium's own reward:
forward velocity + healthy bonus - control/contact costs) while its speed is constrained. The thesis defines
the per-step cost as the planar speed ``C(s, a) = sqrt(v_x^2 + v_y^2)`` for robots on the plane and
``|v_x|`` for robots on a line (``cost_type="speed"``, ``axis="planar"`` or ``"x"``), with ``v``
gymnasium's finite-difference velocity (torso for Ant, centre of mass for Humanoid).

Reward features (``info["features"]``, names in ``env.unwrapped.feature_names``): the ingredients of
gymnasium's reward without their weights -- ``x_velocity``, ``y_velocity`` (ignored by the reward),
``ctrl_sq = sum(ctrl^2)``, ``contact_sq`` (sum of squared external contact forces, clipped per component to
Ant's ``contact_force_range``; Humanoid's are unclipped and its weighted contact cost is capped at 10, so
there the reward is linear in them only below the cap) and ``healthy`` (1 while the torso height is in the
healthy range). Zeros at reset.

Option ``cost_type="indicator"`` gives safety-gymnasium's velocity cost ``1[speed > velocity_threshold]``
instead. Departure worth knowing: the thesis' Humanoid limit (20 per 200-step episode, Table
`rewards_costs_comparison`) together with its returns is consistent with the indicator form rather than with
the summed speed; the default follows the thesis' formula. Default thresholds for the indicator are
safety-gymnasium's (Ant 2.6222 m/s, Humanoid 1.4149 m/s).
"""

from __future__ import annotations

import numpy as np
from gymnasium.envs.mujoco.ant_v5 import AntEnv
from gymnasium.envs.mujoco.humanoid_v5 import HumanoidEnv

from bayescrl.envs.pickling import CopyByArgs
from bayescrl.utils.errors import ConfigError

COST_TYPES = ("speed", "indicator")
AXES = ("planar", "x")


def velocity_cost(
    vx: float, vy: float, cost_type: str = "speed", axis: str = "planar", threshold: float = 0.0
) -> float:
    """``sqrt(v_x^2 + v_y^2)`` (planar) or ``|v_x|`` (x); with ``indicator``, ``1[speed > threshold]``."""
    speed = float(np.hypot(vx, vy)) if axis == "planar" else abs(float(vx))
    return speed if cost_type == "speed" else float(speed > threshold)


class _RunMixin:
    """Adds the velocity cost to a gymnasium locomotion env (``info["cost"]``, ``num_costs``)."""

    num_costs = 1
    feature_names = ("x_velocity", "y_velocity", "ctrl_sq", "contact_sq", "healthy")

    def _get_reset_info(self):
        return {**super()._get_reset_info(), "features": np.zeros(len(self.feature_names))}

    def _contact_sq(self) -> float:
        return float(np.sum(np.square(self.data.cfrc_ext)))

    def _setup_cost(self, cost_type: str, axis: str, velocity_threshold: float, cost_limit: float) -> None:
        if cost_type not in COST_TYPES:
            raise ConfigError("cost_type", cost_type, f"must be one of {list(COST_TYPES)}")
        if axis not in AXES:
            raise ConfigError("axis", axis, f"must be one of {list(AXES)}")
        if not np.isfinite(velocity_threshold) or velocity_threshold < 0:
            raise ConfigError("velocity_threshold", velocity_threshold, "must be a finite number >= 0")
        self.cost_type, self.axis, self.velocity_threshold = cost_type, axis, float(velocity_threshold)
        self.cost_limits = np.array([float(cost_limit)])

    def _add_cost(self, out):
        obs, reward, terminated, truncated, info = out
        c = velocity_cost(
            info["x_velocity"], info["y_velocity"], self.cost_type, self.axis, self.velocity_threshold
        )
        info["cost"] = c
        info["costs"] = {"cost_velocity": c}
        info["features"] = np.array(
            [
                info["x_velocity"],
                info["y_velocity"],
                float(np.sum(np.square(self.data.ctrl))),
                self._contact_sq(),
                float(self.is_healthy),
            ]
        )
        return obs, reward, terminated, truncated, info


class AntRunEnv(CopyByArgs, _RunMixin, AntEnv):
    """Ant-Run: ``Ant-v5`` with the velocity cost; limit 20 per 200-step episode (the thesis gives a limit
    only for Humanoid; the same value is used here)."""

    def __init__(
        self,
        cost_type: str = "speed",
        axis: str = "planar",
        velocity_threshold: float = 2.6222,
        cost_limit: float = 20.0,
        **kwargs,
    ):
        self._setup_cost(cost_type, axis, velocity_threshold, cost_limit)
        super().__init__(**kwargs)

    def _contact_sq(self) -> float:
        return float(np.sum(np.square(self.contact_forces)))  # clipped, as in Ant-v5's contact cost

    def step(self, action):
        return self._add_cost(super().step(action))


class HumanoidRunEnv(CopyByArgs, _RunMixin, HumanoidEnv):
    """Humanoid-Run: ``Humanoid-v5`` with the velocity cost; limit 20 per 200-step episode (thesis table)."""

    def __init__(
        self,
        cost_type: str = "speed",
        axis: str = "planar",
        velocity_threshold: float = 1.4149,
        cost_limit: float = 20.0,
        **kwargs,
    ):
        self._setup_cost(cost_type, axis, velocity_threshold, cost_limit)
        super().__init__(**kwargs)

    def step(self, action):
        return self._add_cost(super().step(action))

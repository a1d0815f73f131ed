"""Common gymnasium shell of the SUMO tasks: validation, seeded reset with warm-up, stepping, close, render.

One env step advances the simulation by ``step_seconds`` (several SUMO sub-steps of ``sim_step``
seconds). An episode is ``warm_up`` simulated seconds under a fixed behaviour (not observed, no reward,
no cost), then ``horizon`` env steps; it is truncated after them (no terminal state). The SUMO random
seed is drawn from the env's ``np_random``, so ``reset(seed=s)`` fixes the whole episode.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from bayescrl.envs.pickling import CopyByArgs
from bayescrl.envs.traffic.sim import SumoSim
from bayescrl.utils.checks import number
from bayescrl.utils.errors import ConfigError


@lru_cache(maxsize=8)
def read_net(path: str):
    """sumolib's parsed network (with traffic-light programs), cached per file."""
    import sumolib

    return sumolib.net.readNet(path, withPrograms=True)


class SumoTaskEnv(CopyByArgs, gym.Env):
    """Base class; subclasses define the scenario files and the per-sub-step reward and cost."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}
    env_id = "traffic"
    sim_step = 1.0
    time_to_teleport = -1.0

    def __init__(
        self,
        horizon: int,
        warm_up: float,
        step_seconds: float,
        backend: str = "auto",
        render_mode: str | None = None,
    ):
        if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
            raise ConfigError("horizon", horizon, "must be an integer >= 1 (env steps per episode)")
        self.warm_up = number(warm_up, "warm_up", 0.0)
        self.step_seconds = number(step_seconds, "step_seconds", 0.0, strict=True)
        n_sub = self.step_seconds / self.sim_step
        if abs(n_sub - round(n_sub)) > 1e-9 or round(n_sub) < 1:
            raise ConfigError(
                "step_seconds", step_seconds, f"must be a multiple of the {self.sim_step} s sub-step"
            )
        if horizon * self.step_seconds < self.warm_up:
            raise ConfigError(
                "horizon",
                horizon,
                f"{horizon} steps x {self.step_seconds:g} s = {horizon * self.step_seconds:g} s of control "
                f"is shorter than warm_up = {self.warm_up:g} s",
            )
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ConfigError(
                "render_mode", render_mode, f"must be None or one of {self.metadata['render_modes']}"
            )
        self.horizon = self.max_episode_steps = int(horizon)
        self.substeps = int(round(n_sub))
        self.render_mode = render_mode
        self.sim = SumoSim(backend, self.env_id)
        self._t = 0
        self._lanes: list[np.ndarray] | None = None

    # -- subclass hooks
    def _scenario_args(self) -> list[str]:
        raise NotImplementedError

    def _start_episode(self) -> None:
        """Called after the simulation is (re)loaded, before the warm-up."""

    def _warm_up_control(self) -> None:
        """Behaviour applied before each warm-up sub-step."""

    def _apply_action(self, action: np.ndarray) -> None:
        raise NotImplementedError

    def _substep(self, control: bool) -> tuple[float, float]:
        """Advance one SUMO sub-step; return (reward, cost) earned during it."""
        raise NotImplementedError

    def _observe(self) -> np.ndarray:
        raise NotImplementedError

    def _vehicle_colour(self, vid: str) -> str:
        return "tab:blue"

    def _draw_extra(self, ax) -> None:
        """Extra artists of the top view (traffic-light states)."""

    @property
    def net_file(self) -> str:
        raise NotImplementedError

    # -- gymnasium API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        sumo_seed = int(self.np_random.integers(0, 2**31 - 1))
        args = [
            *self._scenario_args(),
            "--step-length", str(self.sim_step),
            "--seed", str(sumo_seed),
            "--time-to-teleport", str(self.time_to_teleport),
            "--no-step-log", "true",
            "--no-warnings", "true",
            "--duration-log.disable", "true",
        ]  # fmt: skip
        try:
            self.sim.load(args)
            self._start_episode()
            for _ in range(int(round(self.warm_up / self.sim_step))):
                self._warm_up_control()
                self._substep(control=False)
        except Exception:
            self.sim.close()
            raise
        self._t = 0
        return self._observe(), {"backend": self.sim.backend, "sumo_seed": sumo_seed}

    def step(self, action):
        if not self.sim.running:
            raise ConfigError("step", None, "call reset() before step() (the simulation is not running)")
        a = np.asarray(action, dtype=np.float64)
        if a.shape != self.action_space.shape or not np.isfinite(a).all():
            raise ConfigError("action", action, f"must be a finite array of shape {self.action_space.shape}")
        a = np.clip(a, self.action_space.low, self.action_space.high)  # documented: out-of-range is clipped
        reward = cost = 0.0
        try:
            self._apply_action(a)
            for _ in range(self.substeps):
                r, c = self._substep(control=True)
                reward += r
                cost += c
            obs = self._observe()
        except Exception:
            self.sim.close()  # a failed simulation never outlives the exception
            raise
        self._t += 1
        info = {"cost": float(cost), "costs": {self.cost_name: float(cost)}}
        return obs, float(reward), False, self._t >= self.horizon, info

    def close(self) -> None:
        self.sim.close()
        super().close()

    # -- rendering (matplotlib top view)
    def render(self):
        if self.render_mode != "rgb_array":
            return None
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.collections import LineCollection
        from matplotlib.figure import Figure

        net = read_net(self.net_file)
        if self._lanes is None:
            self._lanes = [np.asarray(lane.getShape()) for e in net.getEdges() for lane in e.getLanes()]
        (x0, y0), (x1, y1) = net.getBBoxXY()
        w, h = self.render_size
        fig = Figure(figsize=(w / 100, h / 100), dpi=100)
        canvas = FigureCanvasAgg(fig)
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_facecolor("#2f6b2f")
        ax.add_collection(LineCollection(self._lanes, colors="#555555", linewidths=self.lane_width))
        if self.sim.running:
            ids = list(self.sim.api.vehicle.getIDList())
            if ids:
                xy = np.asarray([self.sim.api.vehicle.getPosition(v) for v in ids])
                cols = [self._vehicle_colour(v) for v in ids]
                ax.scatter(
                    xy[:, 0], xy[:, 1], s=self.vehicle_size, c=cols, edgecolors="k", linewidths=0.3, zorder=3
                )
            self._draw_extra(ax)
        pad = 10.0
        ax.set_xlim(x0 - pad, x1 + pad)
        ax.set_ylim(y0 - pad, y1 + pad)
        ax.set_axis_off()
        canvas.draw()
        return np.asarray(canvas.buffer_rgba())[..., :3].copy()

    render_size = (400, 400)
    lane_width = 2.0
    vehicle_size = 8.0
    cost_name = "cost"


def resolve_file(name: str, value: Any, shipped: dict[str, Path]) -> Path:
    """A shipped scenario name or an existing file; anything else is one ConfigError line."""
    if isinstance(value, str) and value in shipped:
        return shipped[value]
    p = Path(str(value)).expanduser()
    if not p.is_file():
        raise ConfigError(
            name, value, f"no such file; use one of {sorted(shipped)} or a path to a SUMO .net.xml"
        )
    return p.resolve()

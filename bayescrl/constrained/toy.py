"""Small envs for tests, examples and the CLI (importable as ``module:Class``).

* :class:`CostCartPole` -- CartPole-v1 with a synthetic cost ``1[x > x_lim]`` (cart right of ``x_lim``) or,
  with ``two_costs=True``, a second cost ``1[|theta| > 0.1]``.
* :class:`CostPendulum` -- Pendulum-v1 (Box actions, truncated at 200 steps) with cost ``|a| > a_lim``.
* :class:`NaNEnv` -- returns a NaN observation/reward after ``bad_step`` steps (bad-input tests).
* :class:`PaintedWalk` -- a 1-D walk of fixed length that renders ``rgb_array`` frames without OpenGL
  (video tests and examples on machines with no GL backend).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class CostCartPole(gym.Wrapper):
    def __init__(self, x_lim: float = 0.2, two_costs: bool = False, max_episode_steps: int = 200):
        super().__init__(gym.make("CartPole-v1", max_episode_steps=max_episode_steps))
        self.x_lim, self.two_costs = x_lim, two_costs

    def step(self, action):
        obs, r, term, trunc, info = self.env.step(action)
        c = [float(obs[0] > self.x_lim)]
        if self.two_costs:
            c.append(float(abs(obs[2]) > 0.1))
        info["cost"] = np.asarray(c) if self.two_costs else c[0]
        return obs, r, term, trunc, info


class CostPendulum(gym.Wrapper):
    def __init__(self, a_lim: float = 1.0, max_episode_steps: int = 200):
        super().__init__(gym.make("Pendulum-v1", max_episode_steps=max_episode_steps))
        self.a_lim = a_lim

    def step(self, action):
        obs, r, term, trunc, info = self.env.step(action)
        info["cost"] = float(abs(float(np.asarray(action).reshape(-1)[0])) > self.a_lim)
        return obs, r, term, trunc, info


class NaNEnv(gym.Env):
    """A 1-D random walk that emits a NaN observation (or reward) at step ``bad_step``."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, bad_step: int = 5, what: str = "obs"):
        self.bad_step, self.what, self.t = bad_step, what, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2), {}

    def step(self, action):
        self.t += 1
        obs, r = np.full(2, float(self.t)), 1.0
        if self.t >= self.bad_step:
            if self.what == "obs":
                obs[0] = np.nan
            else:
                r = float("nan")
        return obs, r, False, self.t >= 50, {"cost": 0.0}


class PaintedWalk(gym.Env):
    """A walk on ``[-1, 1]`` for ``length`` steps (action 0: left, 1: right; reward: position; cost:
    ``1[x < 0]``) whose ``rgb_array`` frames are 64 x 64: grey level ``8 * t`` (the step index), and a
    white column at the agent's position. Rendering needs only numpy."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 8}
    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int = 6, render_mode: str | None = None):
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.length, self.render_mode = int(length), render_mode
        self.x, self.t = 0.0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.t = 0.0, 0
        return np.array([self.x], np.float32), {}

    def step(self, action):
        self.t += 1
        self.x = float(np.clip(self.x + (0.25 if int(action) == 1 else -0.25), -1.0, 1.0))
        info = {"cost": float(self.x < 0)}
        return np.array([self.x], np.float32), self.x, False, self.t >= self.length, info

    def render(self):
        frame = np.full((64, 64, 3), min(8 * self.t, 255), np.uint8)
        col = int(round((self.x + 1) / 2 * 63))
        frame[:, col] = 255
        return frame

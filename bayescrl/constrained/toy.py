"""Small envs for tests, examples and the CLI (importable as ``module:Class``).

* :class:`CostCartPole` -- CartPole-v1 with a synthetic cost ``1[x > x_lim]`` (cart right of ``x_lim``) or,
  with ``two_costs=True``, a second cost ``1[|theta| > 0.1]``.
* :class:`CostPendulum` -- Pendulum-v1 (Box actions, truncated at 200 steps) with cost ``|a| > a_lim``.
* :class:`NaNEnv` -- returns a NaN observation/reward after ``bad_step`` steps (bad-input tests).
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

"""Wrappers between our convention (cost in ``info["cost"]``) and safety-gymnasium's 6-tuple ``step``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from bayescrl.utils.errors import ConfigError


def cost_vector(info: dict[str, Any], num_costs: int) -> np.ndarray:
    """``info["cost"]`` as an array of length ``num_costs`` (a float cost counts as length 1)."""
    if "cost" not in info:
        raise ConfigError("info['cost']", None, "the env did not report a cost")
    c = np.atleast_1d(np.asarray(info["cost"], dtype=float))
    if c.shape != (num_costs,):
        raise ConfigError("info['cost']", c.tolist(), f"expected {num_costs} cost value(s)")
    return c


class SafetyGymnasiumStepWrapper(gym.Wrapper):
    """``step`` returns safety-gymnasium's ``(obs, reward, cost, terminated, truncated, info)``.

    ``cost`` is ``info["cost"]`` (a float when the env has one cost, an array of length ``num_costs``
    otherwise); ``reset`` is unchanged. Lets code written for safety-gymnasium run on our tasks.
    """

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, info["cost"], terminated, truncated, info

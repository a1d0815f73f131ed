"""Optional adapter: safety-gymnasium's own tasks under our conventions.

When ``import safety_gymnasium`` succeeds, :func:`make_safety_gymnasium` builds one of its tasks (e.g.
``SafetyPointGoal1-v0``, ``SafetyPointCircle1-v0``, ``SafetyAntVelocity-v1``) and wraps it so that ``step``
returns gymnasium's 5-tuple with the cost in ``info["cost"]`` (and ``info["costs"]``), and the env has
``num_costs`` and ``cost_limits``. safety-gymnasium 1.0.0 does not install on Python 3.11 (pins pygame 2.1.0
and its dataclasses use ndarray defaults), so in this project's environment the function raises a clear
:class:`~bayescrl.utils.ConfigError`; the native tasks of ``bayescrl.envs`` are the supported path.
"""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium as gym
import numpy as np

from bayescrl.utils.errors import ConfigError


def safety_gymnasium_available() -> bool:
    """Whether ``safety_gymnasium`` imports."""
    try:
        importlib.import_module("safety_gymnasium")
    except Exception:
        return False
    return True


class SafetyGymnasiumAdapter(gym.Env):
    """Turn a safety-gymnasium env (6-tuple ``step``) into ours (cost in ``info``; one cost channel)."""

    def __init__(self, env: Any, cost_limit: float = 25.0):
        self.env = env
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self.metadata = getattr(env, "metadata", {})
        self.render_mode = getattr(env, "render_mode", None)
        self.spec = getattr(env, "spec", None)
        self.num_costs = 1
        self.cost_limits = np.array([float(cost_limit)])

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        out = self.env.step(action)
        if len(out) != 6:
            raise ConfigError("env.step", len(out), "a safety-gymnasium env returns 6 values")
        obs, reward, cost, terminated, truncated, info = out
        info = dict(info)
        info["cost"] = float(cost)
        info.setdefault("costs", {"cost": float(cost)})
        return obs, float(reward), bool(terminated), bool(truncated), info

    def render(self):
        return self.env.render()

    def close(self):
        self.env.close()


def make_safety_gymnasium(env_id: str, cost_limit: float = 25.0, **kwargs: Any) -> SafetyGymnasiumAdapter:
    """Build safety-gymnasium's ``env_id`` with our conventions; ``ConfigError`` if the package is missing.

    ``cost_limit`` defaults to 25, safety-gymnasium's customary limit for its navigation tasks.
    """
    try:
        sg = importlib.import_module("safety_gymnasium")
    except Exception as exc:
        raise ConfigError(
            "env",
            env_id,
            f"safety-gymnasium is not importable ({type(exc).__name__}: {exc}); it does not install on "
            "Python 3.11 (pins pygame 2.1.0). Use the native ids 'bayescrl/...' (see docs/envs.md)",
        ) from exc
    try:
        env = sg.make(env_id, **kwargs)
    except Exception as exc:
        raise ConfigError("env", env_id, f"safety-gymnasium could not build it: {exc}") from exc
    return SafetyGymnasiumAdapter(env, cost_limit=cost_limit)

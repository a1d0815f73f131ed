"""What the loop's helpers may read of the optimiser that runs them: a structural type.

Callbacks (:mod:`~bayescrl.constrained.core.callbacks`) and reward adapters
(:mod:`~bayescrl.constrained.core.adapter`) are called by
:class:`~bayescrl.constrained.core.base.OnPolicyAlgorithm`, which satisfies :class:`TrainingAlgorithm`;
typing them against this protocol instead of the class keeps the helpers below the loop that imports them
(no import circle, not even one seen only by type checkers).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import torch

from bayescrl.constrained.core.config import TrainConfig


class StepCounter(Protocol):
    """The rollout collector, as far as the helpers read it."""

    global_step: int


@runtime_checkable
class TrainingAlgorithm(Protocol):
    """An on-policy constrained optimiser during :meth:`~OnPolicyAlgorithm.learn`."""

    name: str
    env_id: Any
    seed: int
    device: torch.device
    config: TrainConfig
    factory: Callable[[], gym.Env]
    envs: gym.vector.VectorEnv
    m: int
    horizon: int
    cost_limits: list[float]
    iteration: int
    total_steps: int | None
    history: list[dict]
    collector: StepCounter

    def episode_cost_limits(self) -> list[float]: ...

    def episode_limit_labels(self) -> list[str]: ...

    def save(self, path: str | Path) -> Path: ...

    def write_results(self, out_dir: str | Path, eval_episodes: int | None = None) -> dict: ...

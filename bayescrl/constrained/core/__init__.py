"""Shared constrained on-policy machinery (rollouts, buffers, advantages, networks, optimisers, loop,
callbacks, reward adapters)."""

from bayescrl.constrained.core.adapter import AlgorithmView, BaseRewardAdapter, RewardAdapter
from bayescrl.constrained.core.base import OnPolicyAlgorithm
from bayescrl.constrained.core.callbacks import BaseCallback, CallbackList
from bayescrl.constrained.core.config import TrainConfig
from bayescrl.constrained.core.rollout import Batch, RolloutBatch

__all__ = [
    "AlgorithmView",
    "BaseCallback",
    "BaseRewardAdapter",
    "Batch",
    "CallbackList",
    "OnPolicyAlgorithm",
    "RewardAdapter",
    "RolloutBatch",
    "TrainConfig",
]

"""Shared constrained on-policy machinery (rollouts, buffers, advantages, networks, optimisers, loop)."""

from bayescrl.constrained.core.base import OnPolicyAlgorithm
from bayescrl.constrained.core.config import TrainConfig
from bayescrl.constrained.core.rollout import Batch

__all__ = ["Batch", "OnPolicyAlgorithm", "TrainConfig"]

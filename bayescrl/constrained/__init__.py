"""Constrained RL: shared on-policy core (``core/``), e-COP, its baselines and the train/evaluate CLI."""

from bayescrl.constrained.registry import REGISTRY, get_algorithm

__all__ = ["REGISTRY", "get_algorithm"]

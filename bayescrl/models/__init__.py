"""Pyro generative models of the preference / reward / transition beliefs (see ``docs/core.md``)."""

from bayescrl.models.linear import BTLinearProblem

__all__ = ["BTLinearProblem"]

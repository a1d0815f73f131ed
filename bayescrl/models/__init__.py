"""Pyro generative models of the preference / reward / transition beliefs (see ``docs/core.md``)."""

from bayescrl.models.linear import BTLinearProblem
from bayescrl.models.pyro_models import bt_linear_model
from bayescrl.models.simulate import simulate
from bayescrl.models.spec import SpecModel, from_spec

__all__ = ["BTLinearProblem", "SpecModel", "bt_linear_model", "from_spec", "simulate"]

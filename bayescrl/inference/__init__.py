"""Inference engines: exact, laplace, bootstrap (perturbed MAP), svi, nuts (see ``docs/core.md``)."""

from bayescrl.inference.bootstrap import MAPResult, map_estimate, perturbed_map
from bayescrl.inference.exact import DirichletPosterior, GaussianLinearPosterior

__all__ = ["DirichletPosterior", "GaussianLinearPosterior", "MAPResult", "map_estimate", "perturbed_map"]

"""Inference engines: exact, laplace, bootstrap (perturbed MAP), svi, nuts (see ``docs/core.md``).

``perturbed_map``, ``GaussianLinearPosterior`` and ``DirichletPosterior`` are light (torch only);
``fit`` / ``Posterior`` import Pyro and are loaded lazily.
"""

from bayescrl.inference.bootstrap import MAPResult, map_estimate, perturbed_map
from bayescrl.inference.exact import DirichletPosterior, GaussianLinearPosterior
from bayescrl.inference.laplace import LaplaceResult, laplace

__all__ = [
    "DirichletPosterior",
    "GaussianLinearPosterior",
    "LaplaceResult",
    "MAPResult",
    "Posterior",
    "fit",
    "laplace",
    "map_estimate",
    "perturbed_map",
]


def __getattr__(name: str):
    if name == "fit":
        from bayescrl.inference.engines import fit

        return fit
    if name == "Posterior":
        from bayescrl.inference.posterior import Posterior

        return Posterior
    raise AttributeError(name)

"""Inference engines: exact, laplace, bootstrap (perturbed MAP), svi, nuts (see ``docs/core.md``).

``perturbed_map``, ``GaussianLinearPosterior`` and ``DirichletPosterior`` are light (torch only);
``fit`` / ``Posterior`` import Pyro and are loaded lazily.
"""

from importlib import import_module

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


#: lazily exported name -> module (Pyro loads on first use)
_LAZY = {"fit": "bayescrl.inference.engines", "Posterior": "bayescrl.inference.posterior"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(name)

"""ArviZ conversion shared by every posterior class of the package (``to_arviz()``).

Independent draws (the exact, Laplace, bootstrap and SVI engines, the prefrl and MOPO reward posteriors)
carry no chain structure, but ArviZ's diagnostics expect one: with a single chain ``az.rhat`` is NaN and
``az.summary`` logs a shape warning. :func:`draws_to_arviz` therefore splits ``n`` independent draws into
:data:`CHAINS` (4) chains of ``n / 4`` draws, as if four samplers had run; for independent draws R-hat is
then close to 1 (a check of the sampler, not of convergence). :func:`num_draws` rounds a requested number
of draws up to a whole number of chains.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

#: chains that independent draws are split into
CHAINS = 4


def import_arviz():
    """Import arviz without its 0.x-line "major refactor" FutureWarning banner."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz

    return arviz


def num_draws(n: int, chains: int = CHAINS) -> int:
    """The number of draws to make for ``n`` requested: ``n`` rounded up to a multiple of ``chains``
    (``n`` itself below ``chains²``, where :func:`split_chains` uses fewer chains)."""
    if n < chains * chains:
        return int(n)
    return chains * math.ceil(int(n) / chains)


def split_chains(x: torch.Tensor | np.ndarray, chains: int = CHAINS) -> np.ndarray:
    """``[n, *shape]`` independent draws as ``[C, n / C, *shape]``: ``C`` the largest number of chains up
    to ``chains`` that divides ``n`` with no more chains than draws per chain (ArviZ warns otherwise); 1
    when none does (e.g. 5 ensemble members)."""
    a = _np(x)
    n = a.shape[0]
    c = next(c for c in range(min(chains, n), 0, -1) if n % c == 0 and c * c <= n)
    return a.reshape(c, n // c, *a.shape[1:])


def to_inference_data(
    posterior: Mapping[str, torch.Tensor | np.ndarray],
    *,
    dims: Mapping[str, list[str]] | None = None,
    coords: Mapping[str, Any] | None = None,
    attrs: Mapping[str, Any] | None = None,
    **groups: Mapping[str, torch.Tensor | np.ndarray] | None,
):
    """``arviz.InferenceData`` of ``posterior {name: [C, D, *shape]}`` (chains first) and further
    ``az.from_dict`` groups (``log_likelihood``, ``sample_stats`` shaped ``[C, D, ...]``,
    ``observed_data``); ``attrs`` go on the posterior group."""
    az = import_arviz()
    kw = {k: {n: _np(v) for n, v in g.items()} for k, g in groups.items() if g}
    post = {k: _np(v) for k, v in posterior.items()}
    idata = az.from_dict(posterior=post, dims=dict(dims or {}), coords=dict(coords or {}) or None, **kw)
    for k, v in (attrs or {}).items():
        idata.posterior.attrs[k] = v
    return idata


def draws_to_arviz(
    draws: Mapping[str, torch.Tensor | np.ndarray],
    *,
    chains: int = CHAINS,
    dims: Mapping[str, list[str]] | None = None,
    coords: Mapping[str, Any] | None = None,
    attrs: Mapping[str, Any] | None = None,
):
    """``arviz.InferenceData`` of independent draws ``{name: [n, *shape]}`` split into chains
    (:func:`split_chains`); ``dims`` name the dimensions after ``(chain, draw)``."""
    post = {k: split_chains(v, chains) for k, v in draws.items()}
    return to_inference_data(post, dims=dims, coords=coords, attrs=attrs)


def _np(x: torch.Tensor | np.ndarray) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)

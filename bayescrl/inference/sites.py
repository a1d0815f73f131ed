"""Site bookkeeping for generic Pyro models: shapes, vectorisation over a particle plate, log-likelihoods.

Canonical sample layout: ``samples[name]`` has shape ``[n, *site_shape]`` where ``site_shape`` is the
value's shape in one un-vectorised run of the model. Under a particle plate at dim
``-(max_plate_nesting + 1)`` a site's value has shape ``[n, 1.., *batch_shape, *event_shape]``;
:func:`to_particles` / :func:`from_particles` convert between the two.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyro
import pyro.poutine as poutine
import torch
from pyro.poutine.util import site_is_subsample


@dataclass
class SiteInfo:
    name: str
    shape: tuple[int, ...]
    batch_shape: tuple[int, ...]
    event_shape: tuple[int, ...]
    observed: bool
    dist_name: str
    support: object


def site_infos(model: Callable, *args, **kwargs) -> dict[str, SiteInfo]:
    """Trace the model once (prior draw) and describe its sample sites, in execution order."""
    with torch.no_grad():
        tr = poutine.trace(model).get_trace(*args, **kwargs)
    out = {}
    for name, node in tr.nodes.items():
        if node["type"] != "sample" or site_is_subsample(node) or node["infer"].get("_deterministic"):
            continue
        fn = node["fn"]
        out[name] = SiteInfo(
            name,
            tuple(node["value"].shape),
            tuple(fn.batch_shape),
            tuple(fn.event_shape),
            bool(node["is_observed"]),
            type(_base(fn)).__name__,
            fn.support,
        )
    return out


def _base(fn):
    while hasattr(fn, "base_dist"):
        fn = fn.base_dist
    return fn


def to_particles(value: torch.Tensor, info: SiteInfo, nesting: int) -> torch.Tensor:
    """``[n, *shape]`` → ``[n, 1.., *batch, *event]`` for a particle plate at dim ``-(nesting + 1)``."""
    n = value.shape[0]
    pad = nesting - len(info.batch_shape)
    return value.reshape(n, *([1] * pad), *info.batch_shape, *info.event_shape)


def from_particles(value: torch.Tensor, info: SiteInfo, n: int) -> torch.Tensor:
    return value.reshape(n, *info.shape)


def pointwise_log_lik(
    model: Callable,
    samples: dict[str, torch.Tensor],
    infos: dict[str, SiteInfo],
    nesting: int,
    *,
    vectorize: bool = True,
) -> dict[str, torch.Tensor]:
    """Per-observation log-likelihood ``{obs_site: [n, *obs_shape]}`` at each posterior sample."""
    latent = {k: v for k, v in samples.items() if k in infos and not infos[k].observed}
    n = next(iter(latent.values())).shape[0]
    obs = [k for k, i in infos.items() if i.observed]
    if vectorize:
        try:
            cond = {k: to_particles(v, infos[k], nesting) for k, v in latent.items()}
            with torch.no_grad(), pyro.plate("_particles", n, dim=-(nesting + 1)):
                tr = poutine.trace(poutine.condition(model, cond)).get_trace()
            return {
                k: tr.nodes[k]["fn"].log_prob(tr.nodes[k]["value"]).reshape(n, *infos[k].shape) for k in obs
            }
        except (RuntimeError, ValueError):
            pass  # model not vectorisable: fall back to a loop over samples
    rows: dict[str, list[torch.Tensor]] = {k: [] for k in obs}
    with torch.no_grad():
        for i in range(n):
            tr = poutine.trace(poutine.condition(model, {k: v[i] for k, v in latent.items()})).get_trace()
            for k in obs:
                rows[k].append(tr.nodes[k]["fn"].log_prob(tr.nodes[k]["value"]))
    return {k: torch.stack(v) for k, v in rows.items()}

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
from pyro.distributions import constraints
from pyro.poutine.util import site_is_subsample

from bayescrl.utils.errors import ConfigError


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
    """Per-observation log-likelihood ``{obs_site: [n, *obs_shape]}`` at each posterior sample (on the
    CPU; the draws meet the model's data on the data's device, e.g. draws made on CPU generators)."""
    obs = [k for k, i in infos.items() if i.observed]
    dev = _data_device(model, obs)
    latent = {k: v.to(dev) for k, v in samples.items() if k in infos and not infos[k].observed}
    n = next(iter(latent.values())).shape[0]
    return {k: v.cpu() for k, v in _log_lik(model, latent, infos, nesting, obs, n, vectorize).items()}


def _data_device(model: Callable, obs: list[str]) -> torch.device:
    """The device of the model's observed data (one trace from the prior)."""
    if obs:
        with torch.no_grad():
            tr = poutine.trace(model).get_trace()
        return getattr(tr.nodes[obs[0]]["value"], "device", torch.device("cpu"))
    return torch.device("cpu")


def _log_lik(model, latent, infos, nesting, obs, n, vectorize) -> dict[str, torch.Tensor]:
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


def _real(support) -> bool:
    """Whether a site's support is the real line (per element)."""
    return getattr(support, "base_constraint", support) is constraints.real


def noncentred(model: Callable, infos: dict[str, SiteInfo]) -> tuple[Callable, dict[str, SiteInfo]]:
    """``model`` with every latent Normal site (support the real line) in non-centred form
    (``LocScaleReparam(0)``); LogNormal and other transformed sites keep their centred form.

    ϑ ~ N(θ, I/λ²) becomes ϑ = θ + ε/λ, ε ~ N(0, I) (site ``vartheta_decentered``); ``vartheta`` stays in
    the trace as a deterministic site, so :func:`recover_sites` gives the original variables back.
    Returns ``(model, infos of the new model)``; the model unchanged when it has no latent Normal site.
    """
    from pyro.infer.reparam import LocScaleReparam

    # only Normals on the real line: LocScaleReparam on a LogNormal (whose base is a Normal) would draw
    # loc + scale·LogNormal(0, 1), another prior (and a negative value when loc < 0)
    sites = {
        k: LocScaleReparam(0.0)
        for k, i in infos.items()
        if not i.observed and i.dist_name == "Normal" and _real(i.support)
    }
    if not sites:
        return model, infos
    run_model = poutine.reparam(model, sites)
    return run_model, site_infos(run_model)


def recover_sites(
    run_model: Callable,
    samples: dict[str, torch.Tensor],
    rinfos: dict[str, SiteInfo],
    infos: dict[str, SiteInfo],
    nesting: int,
) -> dict[str, torch.Tensor]:
    """Original latent sites ``{site: [n, *shape]}`` from draws ``[n, ...]`` of a reparameterised model
    (re-run it conditioned on the draws under a particle plate)."""
    n = next(iter(samples.values())).shape[0]
    cond = {
        k: to_particles(v.reshape(n, *rinfos[k].shape), rinfos[k], nesting)
        for k, v in samples.items()
        if k in rinfos
    }
    with torch.no_grad(), pyro.plate("_particles", n, dim=-(nesting + 1)):
        tr = poutine.trace(poutine.condition(run_model, cond)).get_trace()
    out = {}
    for k, i in infos.items():
        if not i.observed:
            v = tr.nodes[k]["value"]
            out[k] = from_particles(v.expand(n, *v.shape[1:]) if v.shape[0] == 1 else v, i, n)
    return out


def check_vectorised(
    model: Callable, infos: dict[str, SiteInfo], nesting: int, engine: str, n: int = 3
) -> None:
    """Refuse a model that does not broadcast over a particle plate at dim ``-(nesting + 1)``.

    The bootstrap, SVI (vectorised particles) and generic Laplace engines run M copies of the model at
    once under ``pyro.plate("_particles", M, dim=-(nesting + 1))``. The contract: every batch dimension of
    the model is a ``pyro.plate`` at a dim ≥ ``-nesting`` and its tensor code broadcasts over extra
    *leading* dims (``(x * theta).sum(-1)``, not ``x @ theta`` or ``theta.reshape(-1)``). A model that
    breaks it may not fail: it may silently mix particles (a 10–30× too narrow bootstrap posterior).
    Check: ``n`` prior draws, each site's log-density of the vectorised run must equal, particle by
    particle, that of ``n`` separate runs. Raises :class:`ConfigError` with the explanation.
    """
    latents = [k for k, i in infos.items() if not i.observed]
    if not latents:
        return
    with torch.no_grad():
        traces = [poutine.trace(model).get_trace() for _ in range(n)]
        cond = {
            k: to_particles(torch.stack([t.nodes[k]["value"] for t in traces]), infos[k], nesting)
            for k in latents
        }
        hint = _vectorised_hint(engine, nesting)
        try:
            with pyro.plate("_particles", n, dim=-(nesting + 1)):
                vt = poutine.trace(poutine.condition(model, cond)).get_trace()
        except (RuntimeError, ValueError, IndexError) as e:
            raise ConfigError("model", getattr(model, "__name__", "model"), f"{hint} ({e})") from None
        for k in infos:
            node = vt.nodes.get(k)
            if node is None:
                raise ConfigError("model", k, f"site '{k}' missing in the vectorised run; {hint}")
            per = _per_particle_log_prob(node, nesting, n)
            ref = torch.stack([t.nodes[k]["fn"].log_prob(t.nodes[k]["value"]).sum() for t in traces])
            if (
                per is None
                or per.shape != ref.shape
                or not torch.allclose(per.double(), ref.double(), rtol=1e-4, atol=1e-6)
            ):
                raise ConfigError(
                    "model",
                    k,
                    f"site '{k}': the vectorised log-density differs from {n} separate runs of the model "
                    f"(particles are mixed); {hint}",
                )


def _vectorised_hint(engine: str, nesting: int) -> str:
    """What :func:`check_vectorised` asks of a model, for its error messages."""
    return (
        f"engine '{engine}' runs the model vectorised under pyro.plate('_particles', M, "
        f"dim={-(nesting + 1)}): every data dimension must be a pyro.plate at dim >= {-nesting} "
        f"(max_plate_nesting = {nesting}) and "
        "the code must broadcast over extra leading dims, e.g. (x * theta).sum(-1) instead of x @ theta "
        "(see docs/core.md, 'Your own Pyro model'); engine 'nuts' does not need it"
    )


def _per_particle_log_prob(node: dict, nesting: int, n: int) -> torch.Tensor | None:
    """The log-density of a site traced under the ``n``-particle plate, summed per particle ``[n]``; None
    when it has no particle dim or its log-density cannot be evaluated."""
    try:
        lp = node["fn"].log_prob(node["value"])
        ax = lp.dim() - (nesting + 1)
        if ax < 0 or lp.shape[ax] not in (1, n):
            return None
        per = lp.movedim(ax, 0)
        return per.expand(n, *per.shape[1:]).reshape(n, -1).sum(-1)
    except (RuntimeError, ValueError):
        return None

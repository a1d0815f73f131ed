"""Perturbed MAP for *any* vectorisable Pyro model, through effect handlers.

The perturbations of Eq. `final_surrogate_perturbed_loss` generalised site by site:

* observed sites with a discrete likelihood (Bernoulli, Categorical, ...): the log-likelihood term of
  every observation is multiplied by ω ~ Bern(p) (``p_obs``: a float, or ``{site: p}``, or
  ``{site: tensor of per-observation p}``);
* observed Normal sites (not transformed ones such as LogNormal): additive noise, the observation
  becomes y + σζ, ζ ~ N(0, 1) (σ the site's scale);
* latent Normal / MultivariateNormal sites (prior anchoring): log p(z − ε | parents) with ε drawn from
  the zero-mean prior noise (σζ, or Lζ), so that the anchor is a prior draw; other latent families
  (LogNormal, Gamma, ...) are not perturbed (documented departure: the thesis only anchors the Gaussian
  θ and ϑ).

The M perturbed problems are solved together: the model runs under a particle plate of size M at dim
``-(max_plate_nesting + 1)`` (``poutine.condition`` sets the latents, ``poutine.trace`` collects the
``fn`` of every site, log-densities are re-weighted explicitly), all latents are optimised in
unconstrained space (MAP in the constrained space, no Jacobian) with L-BFGS on the sum of the M
independent losses; the per-problem gradient norm is reported. For the standard model
:func:`bayescrl.inference.bootstrap.perturbed_map` (batched Newton) is much faster.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyro
import pyro.distributions as dist
import pyro.poutine as poutine
import torch
from torch.distributions import biject_to

from bayescrl.inference.sites import SiteInfo, from_particles, to_particles
from bayescrl.utils.seeding import bernoulli


def _gaussian(fn):
    """The Normal / MultivariateNormal under ``fn``'s ``Independent`` / expand / mask wrappers, or None.

    Transformed distributions (LogNormal = exp of a Normal, ...) are *not* Gaussian: their value lives in the
    transformed space, so a Gaussian perturbation of it would leave the support (a LogNormal β anchored as
    a Normal went negative)."""
    while isinstance(fn, (dist.Independent, dist.ExpandedDistribution, dist.MaskedDistribution)):
        fn = fn.base_dist
    return fn if isinstance(fn, (dist.Normal, dist.MultivariateNormal)) else None


def _particle_trace(model: Callable, values: dict[str, torch.Tensor], M: int, nesting: int):
    with pyro.plate("_particles", M, dim=-(nesting + 1)):
        return poutine.trace(poutine.condition(model, values)).get_trace()


@dataclass
class _Perturbations:
    """The fixed draws of one perturbed-MAP batch (Eq. `final_surrogate_perturbed_loss`, site by site)."""

    weights: dict[str, torch.Tensor] = field(default_factory=dict)
    """per observed site: the Bern(p) weights ω of its log-likelihood terms (ones for Normal sites)"""
    obs_z: dict[str, torch.Tensor] = field(default_factory=dict)
    """per observed Normal site: the standard-normal noise ζ added to its observations"""
    lat_z: dict[str, torch.Tensor] = field(default_factory=dict)
    """per latent Gaussian site: the standard-normal draw ζ of its prior anchor"""


def _start(
    prior_tr, infos: dict[str, SiteInfo], latents: list[str], init: dict[str, torch.Tensor] | None, nest: int
) -> dict[str, torch.Tensor]:
    """Starting point of every latent: ``init`` broadcast to the particles, else the prior draw."""
    if init is not None:
        return {k: to_particles(init[k].to(prior_tr.nodes[k]["value"]), infos[k], nest) for k in latents}
    return {k: prior_tr.nodes[k]["value"] for k in latents}


def _draw_perturbations(
    prior_tr,
    infos: dict[str, SiteInfo],
    p_obs: float | Mapping[str, Any],
    obs_noise: bool,
    anchor_prior: bool,
    M: int,
    nest: int,
    gen: torch.Generator,
    dev: torch.device,
) -> _Perturbations:
    """Draw ω (discrete observed sites), ζ (observed Normal sites) and the anchors' ζ (latent Gaussians)."""

    def rand(shape):
        return torch.randn(shape, generator=gen, dtype=torch.float64).to(dev)  # the CPU stream, moved

    pert = _Perturbations()
    for k in (k for k, i in infos.items() if i.observed):
        node = prior_tr.nodes[k]
        bshape = (M, *([1] * (nest - len(infos[k].batch_shape))), *infos[k].batch_shape)
        p = p_obs.get(k, 1.0) if isinstance(p_obs, Mapping) else p_obs
        p = torch.as_tensor(p, dtype=torch.float64, device=dev)
        is_normal = isinstance(_gaussian(node["fn"]), dist.Normal)
        if is_normal:
            pert.weights[k] = torch.ones(bshape, dtype=torch.float64, device=dev)
            if obs_noise:
                pert.obs_z[k] = rand(node["fn"].shape())  # one noise draw per particle and observation
        else:
            pp = p.reshape(*([1] * (len(bshape) - p.dim())), *p.shape).expand(bshape)
            pert.weights[k] = (
                bernoulli(pp, gen) if bool((pp < 1).any()) else torch.ones(bshape, device=dev).double()
            )
    if anchor_prior:
        for k in (k for k, i in infos.items() if not i.observed):
            if _gaussian(prior_tr.nodes[k]["fn"]) is not None:
                pert.lat_z[k] = rand(prior_tr.nodes[k]["fn"].shape())
    return pert


def _perturbed_losses(tr, infos: dict[str, SiteInfo], pert: _Perturbations, M: int, dev) -> torch.Tensor:
    """The M perturbed negative log-joints ``[M]`` of the trace ``tr``: latents anchored at prior draws
    (log p(z − ε | parents)), observed Normal values shifted by σζ, other log-likelihoods weighted by ω."""
    total = torch.zeros(M, dtype=torch.float64, device=dev)
    for k in (k for k, i in infos.items() if not i.observed):
        fn, v = tr.nodes[k]["fn"], tr.nodes[k]["value"]
        if k in pert.lat_z:
            base = _gaussian(fn)
            eps = (
                (base.scale_tril @ pert.lat_z[k].unsqueeze(-1)).squeeze(-1)
                if isinstance(base, dist.MultivariateNormal)
                else base.scale * pert.lat_z[k]
            )
            v = v - eps
        total = total - fn.log_prob(v).reshape(M, -1).sum(-1)
    for k in (k for k, i in infos.items() if i.observed):
        fn, v = tr.nodes[k]["fn"], tr.nodes[k]["value"]
        if k in pert.obs_z:
            v = v + _gaussian(fn).scale * pert.obs_z[k]
        lp = fn.log_prob(v) * pert.weights[k]
        total = total - lp.reshape(M, -1).sum(-1)
    return total


def _minimise_lbfgs(
    params: dict[str, torch.Tensor], losses: Callable[[], torch.Tensor], M: int, tol: float, max_iter: int
) -> None:
    """Minimise the sum of the M independent ``losses()`` over ``params`` in place (L-BFGS, strong Wolfe;
    gradient tolerance ``tol / √M`` on the summed loss)."""
    opt = torch.optim.LBFGS(
        list(params.values()),
        lr=1.0,
        max_iter=max_iter,
        tolerance_grad=tol / M**0.5,
        tolerance_change=1e-14,
        history_size=50,
        line_search_fn="strong_wolfe",
    )

    def closure():
        opt.zero_grad()
        loss = losses().sum()
        loss.backward()
        return loss

    opt.step(closure)
    opt.zero_grad()


def generic_perturbed_map(
    model: Callable,
    infos: dict[str, SiteInfo],
    num_samples: int,
    *,
    p_obs: float | Mapping[str, Any] = 0.5,
    obs_noise: bool = True,
    anchor_prior: bool = True,
    max_plate_nesting: int = 1,
    generator: torch.Generator | None = None,
    init: dict[str, torch.Tensor] | None = None,
    tol: float = 1e-6,
    max_iter: int = 500,
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """M perturbed MAP points ``{site: [M, *shape]}`` and diagnostics (grad_norm [M], converged [M])."""
    M, nest = num_samples, max_plate_nesting
    gen = generator or torch.Generator().manual_seed(0)
    latents = [k for k, i in infos.items() if not i.observed]
    pyro.set_rng_seed(int(torch.randint(2**31 - 1, (1,), generator=gen)))
    with torch.no_grad():
        prior_tr = _particle_trace(model, {}, M, nest)
    start = _start(prior_tr, infos, latents, init, nest)
    transforms = {k: biject_to(infos[k].support) for k in latents}
    dev = start[latents[0]].device if latents else torch.device("cpu")  # where the model's tensors live
    params = {k: transforms[k].inv(start[k].double()).detach().clone().requires_grad_(True) for k in latents}
    pert = _draw_perturbations(prior_tr, infos, p_obs, obs_noise, anchor_prior, M, nest, gen, dev)

    def losses() -> torch.Tensor:
        values = {k: transforms[k](params[k]) for k in latents}
        return _perturbed_losses(_particle_trace(model, values, M, nest), infos, pert, M, dev)

    _minimise_lbfgs(params, losses, M, tol, max_iter)
    final = losses()
    final.sum().backward()
    gsq = sum(params[k].grad.reshape(M, -1).pow(2).sum(-1) for k in latents)
    gnorm = gsq.sqrt().detach()
    with torch.no_grad():
        out = {k: from_particles(transforms[k](params[k]), infos[k], M).detach().clone() for k in latents}
    diag = {"grad_norm": gnorm, "converged": gnorm <= tol, "loss": final.detach()}
    return out, diag

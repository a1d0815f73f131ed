"""``fit(model, data) -> Posterior``: one interface over the exact, laplace, bootstrap, svi and nuts engines.

``model`` is a :class:`~bayescrl.models.spec.SpecModel` (from :func:`bayescrl.models.from_spec`), a spec
mapping / file path, or any Pyro model callable (``data`` are then its keyword arguments). For spec
models with fixed rater competence the exact / laplace / bootstrap engines use the fast batched torch
paths of :mod:`bayescrl.inference.exact`, :mod:`~bayescrl.inference.laplace` and
:mod:`~bayescrl.inference.bootstrap`; otherwise they work on the Pyro program through effect handlers
(:mod:`~bayescrl.inference.bootstrap_generic`, ``AutoLaplaceApproximation``). The Dirichlet transition
posterior η is conjugate and independent of (θ, ϑ) given the data, so every fast path samples it exactly.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import pyro
import pyro.poutine as poutine
import torch

from bayescrl.inference.bootstrap import perturbed_map
from bayescrl.inference.bootstrap_generic import generic_perturbed_map
from bayescrl.inference.exact import DirichletPosterior, GaussianLinearPosterior
from bayescrl.inference.laplace import laplace
from bayescrl.inference.nuts import fit_nuts
from bayescrl.inference.options import check_engine_options
from bayescrl.inference.posterior import Posterior
from bayescrl.inference.sites import check_vectorised, from_particles, site_infos
from bayescrl.inference.svi import fit_svi
from bayescrl.models.spec import SpecModel, from_spec
from bayescrl.utils.checks import positive_int
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import check_keys

ENGINES = ("exact", "laplace", "bootstrap", "svi", "nuts")


def fit(
    model: SpecModel | Mapping | str | Path | Callable,
    data: Mapping[str, Any] | None = None,
    *,
    engine: str = "bootstrap",
    seed: int = 0,
    max_plate_nesting: int = 1,
    progress: bool = False,
    **options: Any,
) -> Posterior:
    """Fit ``model`` to its data with ``engine``; engine options are keyword arguments:

    * bootstrap: ``p_offline`` (0.5), ``p_online`` (1.0), ``online_reward_noise`` (True),
      ``anchor_prior`` (True), ``tol`` (1e-6), ``max_iter``, ``solver`` (fast path: auto | newton |
      newton-cg);
    * svi: ``guide`` (normal | mvn | lowrank), ``lr``, ``max_steps``, ``num_particles``, ``rtol``;
    * nuts: ``num_samples`` (500), ``warmup`` (300), ``num_chains`` (2).

    Every option is checked before any work (:data:`~bayescrl.inference.options.ENGINE_OPTIONS`): an
    unknown name, or a count < 1 / a tolerance <= 0, raises :class:`~bayescrl.utils.ConfigError` naming
    ``engine_options.<name>`` and, for a misspelt name, the closest valid one.
    """
    if engine not in ENGINES:
        raise ConfigError("engine", engine, f"must be one of {list(ENGINES)}")
    options = check_engine_options(engine, options)
    seed = positive_int(seed, "seed", minimum=0)
    max_plate_nesting = positive_int(max_plate_nesting, "max_plate_nesting", minimum=0)
    if isinstance(model, (Mapping, str, Path)):
        model = from_spec(model)
    pyro.set_rng_seed(seed)
    fn, nest, coords = _model_fn(model, data, max_plate_nesting)
    infos = site_infos(fn)
    observed = _observed(fn, infos)
    t0 = time.perf_counter()
    kw = {
        "engine": engine,
        "model": fn,
        "infos": infos,
        "observed": observed,
        "max_plate_nesting": nest,
        "coords": coords,
    }
    if not isinstance(model, SpecModel) and engine in ("laplace", "bootstrap", "svi"):
        check_vectorised(fn, infos, nest, engine)  # these run the model under a particle plate
    post = _run_engine(engine, model, kw, seed, progress, options)
    post.diagnostics["fit_seconds"] = time.perf_counter() - t0
    for msg in post.diagnostics.get("warnings", []):
        warnings.warn(f"{engine} did not converge: {msg}", RuntimeWarning, stacklevel=2)
    return post


def _observed(fn: Callable, infos: dict) -> dict[str, torch.Tensor]:
    """The observed value of every observed site of ``fn`` (one trace, no gradients)."""
    with torch.no_grad():
        tr = poutine.trace(fn).get_trace()
    return {k: tr.nodes[k]["value"] for k, i in infos.items() if i.observed}


def _model_fn(
    model: SpecModel | Callable, data: Mapping[str, Any] | None, max_plate_nesting: int
) -> tuple[Callable, int, dict[str, list]]:
    """The Pyro model to fit (a callable bound to ``data``), its plate nesting and the ArviZ coordinates."""
    if isinstance(model, SpecModel):
        return model.model, model.max_plate_nesting, {"rater": list(model.rater_ids)}
    if not callable(model):
        raise ConfigError("model", model, "must be a spec, a SpecModel or a Pyro model callable")
    return partial(model, **(data or {})), max_plate_nesting, {}


def _run_engine(
    engine: str, model: SpecModel | Callable, kw: dict[str, Any], seed: int, progress: bool,
    options: dict[str, Any],
) -> Posterior:  # fmt: skip
    """Run ``engine`` (``kw``: the traced model's sites, observations, plate nesting, coordinates); a spec
    model with fixed rater competence takes the closed-form fast paths of Laplace and the bootstrap."""
    fn, infos, nest = kw["model"], kw["infos"], kw["max_plate_nesting"]
    fast = isinstance(model, SpecModel) and model.fixed_competence
    if engine == "exact":
        return Posterior(sampler=_exact_sampler(model, infos), approximate=False, **kw)
    if engine == "laplace":
        return _laplace_fast(model, kw) if fast else _laplace_generic(fn, infos, nest, seed, kw, options)
    if engine == "bootstrap":
        return (
            _bootstrap_fast(model, kw, options) if fast else _bootstrap_generic(fn, infos, nest, kw, options)
        )
    if engine == "svi":
        sampler, diag = fit_svi(fn, infos, max_plate_nesting=nest, seed=seed, progress=progress, **options)
        post = Posterior(sampler=sampler, diagnostics=diag, **kw)
        if fast and options.get("check", True):
            _check_against_laplace(post, model)
        return post
    chains, stats, diag = fit_nuts(fn, infos, max_plate_nesting=nest, seed=seed, progress=progress, **options)
    return Posterior(sampler=None, chains=chains, sample_stats=stats, diagnostics=diag, **kw)


def _check_against_laplace(post: Posterior, model: SpecModel, n: int = 2000) -> None:
    """SVI vs the (cheap, batched-Newton) Laplace fit of the same spec model: a θ sd more than 3× off on any
    coordinate, or a mean more than 3 Laplace sd away, marks the fit unconverged (collapse detection)."""
    lap = laplace(model.problem)
    lm, lc = lap.theta_mean.double(), lap.theta_cov.double()
    m, c = post.mean_cov("theta", n, seed=0)
    lsd, sd = lc.diagonal().sqrt(), c.diagonal().sqrt()
    ratio = sd / lsd
    z = ((m - lm) / lsd).abs()
    post.diagnostics.update(laplace_sd_ratio=ratio.tolist(), laplace_mean_z=z.tolist())
    if bool((ratio < 1 / 3).any() or (ratio > 3).any() or (z > 3).any()):
        post.diagnostics["converged"] = False
        post.diagnostics.setdefault("warnings", []).append(
            f"theta disagrees with Laplace: sd ratio {[round(float(v), 2) for v in ratio]}, "
            f"|mean difference| / Laplace sd {[round(float(v), 2) for v in z]}"
        )


# ---------------------------------------------------------------------------- exact
EXACT_RECOGNISES = (
    "exact recognises the conjugate structures of spec models (bayescrl.models.from_spec) with fixed "
    "rater competence: Gaussian prior of 'theta' + Normal 'reward' observations linear in theta "
    "(Gaussian-linear), 'vartheta' ~ N(theta, I/lam^2) without preferences, Dirichlet 'eta' + Categorical "
    "'transition' (Dirichlet-categorical); write the model as a spec, or use laplace / bootstrap / svi / nuts"
)


def _exact_sampler(model, infos):
    if not isinstance(model, SpecModel):
        bad = next((k for k, i in infos.items() if i.observed and i.dist_name != "Normal"), None)
        why = (
            f"site '{bad}' ({infos[bad].dist_name}) is not conjugate"
            if bad
            else "the conjugacy of a user Pyro model is not verified (its code is opaque to the engine)"
        )
        raise ConfigError("engine", "exact", f"{why}; {EXACT_RECOGNISES}")
    if model.beta_priors or model.lam_priors:
        site = next(k for k in infos if k.startswith(("beta_", "lam_")))
        raise ConfigError(
            "engine", "exact", f"site '{site}' (unknown rater competence) has no conjugate form"
        )
    p = model.problem
    if bool(p.pref_mask.any()):
        raise ConfigError(
            "engine",
            "exact",
            "site 'pref' (Bradley–Terry preference likelihood) is not conjugate to the Gaussian prior of "
            "'theta'; use laplace, bootstrap, svi or nuts",
        )
    post = GaussianLinearPosterior(p.mu0, p.cov0, p.noise_sd).update_many(
        p.x[p.reward_mask], p.r[p.reward_mask]
    )
    eta = _dirichlet(model)

    def sampler(n: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
        theta = post.sample(n, gen)
        vt = (
            theta.unsqueeze(-2)
            + torch.randn(n, p.num_raters, p.dim, generator=gen, dtype=theta.dtype) / p.lam[:, None]
        )
        out = {"theta": theta, "vartheta": vt}
        return _add_eta(out, eta, n, gen)

    sampler.gaussian = post  # closed form, used by `compare`
    return sampler


def _dirichlet(model: SpecModel) -> DirichletPosterior | None:
    td = model.transitions
    if td is None:
        return None
    post = DirichletPosterior(td.alpha0)
    if td.s.shape[0]:
        post.update(td.s * td.num_actions + td.a, td.next)
    return post


def _add_eta(out, eta: DirichletPosterior | None, n: int, gen) -> dict[str, torch.Tensor]:
    if eta is not None:
        out["eta"] = eta.sample(n, gen)
    return out


# ---------------------------------------------------------------------------- laplace
def _laplace_fast(model: SpecModel, kw) -> Posterior:
    lap = laplace(model.problem)
    eta = _dirichlet(model)

    def sampler(n, gen):
        theta, vt = lap.sample(n, gen)
        return _add_eta({"theta": theta, "vartheta": vt}, eta, n, gen)

    diag = {"converged": bool(lap.converged.all()), "grad_norm": float(lap.grad_norm.max())}
    return Posterior(sampler=sampler, diagnostics=diag, **kw)


def _laplace_generic(fn, infos, nest, seed, kw, options) -> Posterior:
    from pyro.infer.autoguide import AutoLaplaceApproximation

    pyro.clear_param_store()
    guide = AutoLaplaceApproximation(fn)
    svi = pyro.infer.SVI(fn, guide, pyro.optim.Adam({"lr": options.get("lr", 0.02)}), pyro.infer.Trace_ELBO())
    for _ in range(int(options.get("max_steps", 2000))):
        svi.step()
    lap = guide.laplace_approximation()
    latents = [k for k, i in infos.items() if not i.observed]

    def sampler(n, gen):
        pyro.set_rng_seed(int(torch.randint(2**31 - 1, (1,), generator=gen)))
        with torch.no_grad(), pyro.plate("_particles", n, dim=-(nest + 1)):
            s = lap()
        return {k: from_particles(s[k], infos[k], n).double() for k in latents}

    return Posterior(sampler=sampler, diagnostics={"map_steps": int(options.get("max_steps", 2000))}, **kw)


# ---------------------------------------------------------------------------- bootstrap
_BOOT_KEYS = ("p_offline", "p_online", "online_reward_noise", "anchor_prior", "tol", "max_iter", "solver")


def _bootstrap_fast(model: SpecModel, kw, options) -> Posterior:
    check_keys(options, _BOOT_KEYS, "engine_options")  # p_obs is an option of user Pyro models only
    opts = dict(options)
    eta = _dirichlet(model)
    diag: dict[str, Any] = {"options": opts}

    def sampler(n, gen):
        res = perturbed_map(model.problem, n, generator=gen, **opts)
        diag.update(
            converged_fraction=float(res.converged.double().mean()),
            grad_norm_max=float(res.grad_norm.max()),
            newton_iters=res.iters,
        )
        return _add_eta({"theta": res.theta, "vartheta": res.vartheta}, eta, n, gen)

    return Posterior(sampler=sampler, diagnostics=diag, **kw)


def _bootstrap_generic(fn, infos, nest, kw, options) -> Posterior:
    diag: dict[str, Any] = {}
    p = options.get("p_obs", options.get("p_offline", 0.5))
    opts = {
        "p_obs": p,
        "obs_noise": options.get("online_reward_noise", True),
        "anchor_prior": options.get("anchor_prior", True),
        "tol": options.get("tol", 1e-6),
        "max_iter": options.get("max_iter", 500),
    }

    def sampler(n, gen):
        out, d = generic_perturbed_map(fn, infos, n, max_plate_nesting=nest, generator=gen, **opts)
        diag.update(
            converged_fraction=float(d["converged"].double().mean()),
            grad_norm_max=float(d["grad_norm"].max()),
        )
        return out

    return Posterior(sampler=sampler, diagnostics=diag, **kw)

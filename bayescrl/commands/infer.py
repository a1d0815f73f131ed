"""``bayescrl infer`` / ``simulate`` / ``compare``: posterior inference on a model spec or data file."""

from __future__ import annotations

from pathlib import Path

import click

from bayescrl.commands.options import device_option, force_option, progress_option, set_option
from bayescrl.inference.compare import compare_engines, markdown_table
from bayescrl.inference.engines import fit
from bayescrl.inference.options import ENGINES, check_engine_options, check_spec_keys
from bayescrl.models.simulate import simulate as run
from bayescrl.models.spec import from_spec, load_spec
from bayescrl.utils import ConfigError, apply_overrides, set_torch_threads, write_json
from bayescrl.utils.checks import check_device, check_memory, check_memory_of, check_no_nan
from bayescrl.utils.io import check_keys
from bayescrl.utils.outdir import prepare_out_dir, prepare_out_file_checked, written

ENGINE_CHOICE = click.Choice(["exact", "laplace", "bootstrap", "svi", "nuts"])
_RECORD_KEYS = ("preferences", "rewards", "heldout")


def _checked(spec: dict) -> tuple[dict, dict]:
    """(spec without ``engine_options``, the engine options) with every key of the spec checked."""
    spec = dict(spec)
    opts = spec.pop("engine_options", None)
    check_spec_keys(spec)
    if opts is not None and not isinstance(opts, dict):
        raise ConfigError("engine_options", opts, "must be a mapping KEY: VALUE")
    return spec, opts or {}


def _memory(n_numbers: float, field: str, value, what: str) -> None:
    """Refuse a job that would hold more than half the machine's memory (~64 bytes per Python number)."""
    check_memory(64 * n_numbers, field, value, what)


def _load(path: str, overrides: tuple[str, ...]) -> dict:
    """The spec / data file with ``--set`` overrides (record lists that no override names are not copied)."""
    spec = load_spec(path)
    if not overrides:
        return spec
    named = {o.split("=", 1)[0].strip().split(".", 1)[0] for o in overrides}
    big = {k: spec[k] for k in _RECORD_KEYS if k in spec and k not in named}
    out = apply_overrides({k: v for k, v in spec.items() if k not in big}, overrides)
    return {**out, **big}


@click.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option(
    "--engine", type=ENGINE_CHOICE, default="bootstrap", show_default=True, help="Inference engine."
)
@click.option(
    "--samples",
    "num_samples",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Posterior samples written (draws per chain for nuts).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    required=True,
    help="ArviZ NetCDF output, e.g. post.nc (h5netcdf); a JSON summary is written next to it.",
)
@set_option(
    "Override a spec field or set an engine option (repeatable), e.g. --set noise_sd=0.5 "
    "--set engine_options.p_offline=0.6 --set engine_options.num_chains=4."
)
@progress_option("Show progress bars.")
@device_option(default="cpu")
@force_option
def infer(spec, engine, num_samples, seed, out, overrides, progress, device, force) -> None:
    """Fit a posterior to SPEC (YAML model spec or JSON data file) and write ArviZ NetCDF.

    The reward parameter is the variable `theta` with dims (chain, draw, theta_dim); rater beliefs
    `vartheta` (chain, draw, rater, vartheta_dim); transitions `eta` when the spec has them. The
    log_likelihood group holds the pointwise log-likelihood of every observation (one variable: the
    observed site, or `joint` over all sites, so `az.loo` works). Non-convergence (SVI stall or
    disagreement with Laplace, NUTS R-hat / ESS / divergences) is printed as `warning:` lines and recorded
    in the summary's diagnostics. Engine options (keyword
    options of ``bayescrl.inference.engines.fit``) are ``--set engine_options.KEY=VALUE`` or an
    ``engine_options:`` mapping in SPEC; unknown keys and bad values are refused before the fit.
    """
    set_torch_threads()
    device = check_device(device, "--device")

    raw, opts = _checked(_load(spec, overrides))
    opts = check_engine_options(engine, opts)
    model = from_spec(raw, device=device)
    prepare_out_file_checked(Path(out).with_suffix(".json"), force=force)
    out = prepare_out_file_checked(out, force=force)
    chains = int(opts.get("num_chains", 2)) if engine == "nuts" else 1
    n_rater = len(model.rater_ids)
    _memory(num_samples * chains * model.dim * (1 + n_rater), "--samples", num_samples, "the posterior draws")
    if engine == "nuts":
        opts.setdefault("num_samples", num_samples)
    post = fit(model, engine=engine, seed=seed, progress=progress, **opts)
    idata = post.to_arviz(num_samples, seed)
    idata.to_netcdf(str(out), engine="h5netcdf")
    if post.chains is None:  # the draws just written are post.sample(num_samples, seed): do not redraw them
        import torch

        th = torch.as_tensor(idata.posterior["theta"].values, device="cpu").double()
        th = th.reshape(-1, th.shape[-1])  # (chain, draw) -> draws
        mean, cov = th.mean(0), torch.cov(th.T).reshape(th.shape[1], th.shape[1])
    else:
        mean, cov = post.mean_cov("theta", num_samples, seed)
    check_no_nan({"theta_mean": mean, "theta_sd": cov.diagonal()}, str(out))
    diag = {k: v for k, v in post.diagnostics.items() if k != "elbo"}
    summary = {"engine": engine, "theta_mean": mean, "theta_sd": cov.diagonal().sqrt(), "diagnostics": diag}
    write_json(out.with_suffix(".json"), summary)
    click.echo(f"{engine}: theta mean = {[round(float(v), 4) for v in mean]}")
    for msg in diag.get("warnings", []):  # also in the JSON summary (diagnostics.converged / warnings)
        click.echo(f"warning: {engine} did not converge: {msg}", err=True)
    click.echo(written(out.parent, [out.name, out.with_suffix(".json").name]))


@click.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option(
    "--num-prefs",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Offline comparisons (split evenly over the raters).",
)
@click.option(
    "--num-rewards", type=click.IntRange(min=0), default=0, show_default=True, help="Online numeric rewards."
)
@click.option(
    "--num-arms",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="Items are drawn uniformly from this many Gaussian arms (0: fresh Gaussian items).",
)
@click.option(
    "--heldout",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Extra held-out comparisons (for `compare`).",
)
@click.option(
    "--greedy", is_flag=True, help="Deterministic greedy raters (the thesis' flawed-expert ablation)."
)
@click.option("--seed", type=int, default=0, show_default=True)
@set_option("Override a spec field (repeatable).")
@click.option("--out", type=click.Path(dir_okay=False), required=True, help="The data file to write (JSON).")
@force_option
def simulate(spec, num_prefs, num_rewards, num_arms, heldout, greedy, seed, overrides, out, force) -> None:
    """Generate synthetic preference data from the rater spec SPEC (dim, prior, raters, noise_sd).

    Writes a JSON data file (a complete spec) with the true theta and rater beliefs under `truth`.
    """
    raw, _ = _checked(_load(spec, overrides))
    dim = raw.get("dim") if isinstance(raw.get("dim"), int) else 1
    _memory((2 * (num_prefs + heldout) + num_rewards) * (dim + 1), "--num-prefs", num_prefs, "the data set")
    data = run(
        raw,
        num_prefs=num_prefs,
        num_rewards=num_rewards,
        num_arms=num_arms or None,
        heldout=heldout,
        seed=seed,
        greedy=greedy,
    )
    out = prepare_out_file_checked(out, force=force)  # after the spec's values are checked by the run
    write_json(out, data)
    click.echo(f"{num_prefs} preferences, {num_rewards} rewards, {heldout} held out")
    click.echo(written(out.parent, [out.name]))


@click.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--engines", default=None, help="Comma-separated engines (default: every applicable one).")
@click.option("--samples", "num_samples", type=click.IntRange(min=10), default=1000, show_default=True)
@click.option(
    "--coverage-reps",
    type=click.IntRange(min=0),
    default=100,
    show_default=True,
    help="Synthetic data sets for the coverage of exact / laplace / bootstrap (batched).",
)
@click.option(
    "--coverage-reps-slow",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Synthetic data sets for the coverage of svi / nuts (one fit each).",
)
@set_option(
    "Override a spec field or set an engine option (repeatable), e.g. "
    "--set engine_options.nuts.num_chains=4 --set engine_options.bootstrap.p_offline=0.6."
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    required=True,
    help="Output folder (empty unless --force).",
)
@device_option(default="cpu")
@force_option
def compare(
    spec, engines, num_samples, coverage_reps, coverage_reps_slow, overrides, seed, out_dir, device, force
) -> None:
    """Run every applicable engine on SPEC; write compare.md, compare.json and marginals.png.

    Engine options are ``--set engine_options.ENGINE.KEY=VALUE`` (or an ``engine_options: {ENGINE: {..}}``
    mapping in SPEC); unknown engines, options and bad values are refused before any fit.
    """
    set_torch_threads()
    device = check_device(device, "--device")

    eng = None if engines is None else [e.strip() for e in engines.split(",") if e.strip()]
    if eng == []:  # "", "," or " ": an explicit list that names none (leave --engines out for all)
        raise ConfigError("--engines", engines, f"names no engine; give some of {', '.join(ENGINES)}")
    for i, e in enumerate(eng or []):
        if e not in ENGINES:
            raise ConfigError("--engines", e, f"must be one of {list(ENGINES)}", index=i)
    raw, opts = _checked(_load(spec, overrides))
    check_keys(opts, ENGINES, "engine_options")
    for e, v in opts.items():
        if not isinstance(v, dict):
            raise ConfigError(f"engine_options.{e}", v, "engine options are engine_options.ENGINE.KEY=VALUE")
        opts[e] = check_engine_options(e, v, f"engine_options.{e}")
    model = from_spec(raw, device=device)
    n_eng = len(eng or ENGINES)
    records = sum(len(raw.get(k) or []) for k in _RECORD_KEYS)
    per_draw = model.dim * (1 + len(model.rater_ids))

    def estimate(n) -> float:  # float64 tensors, ~4 live copies: the draws, the batched coverage fits
        draws = n_eng * n["--samples"] * per_draw
        coverage = n["--coverage-reps"] * (400 * (model.dim + records) + 2 * records * model.dim)
        return 8 * 4 * (draws + coverage)

    sizes = {"--samples": num_samples, "--coverage-reps": coverage_reps}
    what = f"{n_eng} engine(s) with {num_samples} draws and {coverage_reps} coverage reps"
    check_memory_of(estimate, sizes, what)
    prepare_out_dir(out_dir, force=force)
    report = compare_engines(
        model,
        eng,
        num_samples=num_samples,
        seed=seed,
        coverage_reps=coverage_reps,
        coverage_reps_slow=coverage_reps_slow,
        engine_options=opts,
        out_dir=out_dir,
    )
    click.echo(markdown_table(report))
    click.echo(written(out_dir, ["compare.md", "compare.json", "marginals.png"]))

"""``bayescrl pspl CONFIG.yaml --seeds S --out DIR``: run a PSPL experiment, write results.json + plots."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from bayescrl.commands.options import device_option, force_option, log_options, set_option
from bayescrl.commands.pspl_diffusion import run_diffusion
from bayescrl.commands.sweepable import SweepAdapter, seed_by_set
from bayescrl.pbrl import experiment
from bayescrl.pbrl.diffusion.experiment import validate_config as validate_diffusion
from bayescrl.pbrl.experiment import validate_config
from bayescrl.utils import apply_overrides, set_torch_threads
from bayescrl.utils.checks import check_device, check_no_nan, positive_int
from bayescrl.utils.configpaths import load_config
from bayescrl.utils.outdir import prepare_out_dir, written
from bayescrl.utils.runlog import RunLogger
from bayescrl.utils.spread import fmt_spread

#: file paths of a pspl config (resolved against the config file)
PATH_KEYS = ("base.cache",)


@click.command(name="pspl")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--seeds", type=int, default=5, show_default=True, help="Number of seeds (batched together).")
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    required=True,
    help="Output folder for results.json and the plots (must be empty unless --force).",
)
@set_option("Override a config value (repeatable), e.g. --set K=50 --set offline.N=100.")
@device_option(default="cpu")
@click.option("--no-progress", is_flag=True, help="Hide the progress bars.")
@click.option("--no-plots", is_flag=True, help="Write results.json only.")
@click.option(
    "--no-train",
    is_flag=True,
    help="task: diffusion only: use the cached base model, never train one (error if the cache is missing).",
)
@force_option
@log_options
def pspl(**options) -> None:
    """PSPL (top-two posterior sampling for preference-based RL) and baselines on RiverSwim/MountainCar,
    or (``task: diffusion``) PSPL vs DPS fine-tuning a small diffusion model from trajectory preferences.

    Writes OUT/results.json (per agent: final_simple_regret_mean/std, simple_regret_curve_mean,
    cumulative_regret_mean, wall_time_s) and PNG plots of simple and cumulative regret. ``--log-dir DIR``
    also writes the regret curves (per agent, per episode) as TensorBoard scalars.
    """
    run(options)


def run(p: Mapping[str, Any]) -> dict | None:
    """``bayescrl pspl`` without click: ``p`` holds the command's parameters by name (``config``,
    ``seeds``, ``out``, ``overrides``, ``device``, ``no_progress``, ``no_plots``, ``no_train``, ``force``,
    ``log_dir``, ``wandb``). Checks them, runs the experiment through the library
    (:func:`~bayescrl.pbrl.experiment.run_experiment`; ``task: diffusion`` configs:
    :func:`~bayescrl.commands.pspl_diffusion.run_diffusion`), prints one line per agent and returns the
    results (None for ``task: diffusion``). A sweep's run calls it in its own process."""
    config, out, overrides = p["config"], str(p["out"]), p["overrides"]
    log_dir, wandb, force = p["log_dir"], p["wandb"], p["force"]
    progress, plots = not p["no_progress"], not p["no_plots"]
    set_torch_threads()
    seeds = positive_int(p["seeds"], "--seeds")
    device = check_device(p["device"], "--device")
    cfg = apply_overrides(load_config(config, PATH_KEYS), overrides)
    if isinstance(cfg, dict) and cfg.get("task") == "diffusion":
        return run_diffusion(
            cfg, seeds, out, device, progress, plots, p["no_train"], log_dir, wandb, force=force
        )
    validate_config(cfg, seeds)  # every field (and sweep cell), and memory, before any work or output
    prepare_out_dir(out, force=force)
    logger = RunLogger(log_dir, wandb, config=cfg, name=f"pspl:{out}")
    res = experiment.run_experiment(cfg, seeds, out, device=device, progress=progress, plots=plots)
    check_no_nan(res, out)
    with logger:
        logger.log_results({k: v for k, v in res.items() if k != "config"})
    runs = (
        [("", res)]
        if "sweep" not in res
        else [(f"{res['sweep']['key']}={r['value']} ", r) for r in res["sweep"]["runs"]]
    )
    for prefix, r in runs:
        for name, a in r["agents"].items():
            reg = fmt_spread(a["final_simple_regret_mean"], a["final_simple_regret_std"], seeds)
            click.echo(f"{prefix}{name:15s} final simple regret {reg}  ({a['wall_time_s']:.1f} s)")
    click.echo(written(out, ["results.json", *sorted(f.name for f in Path(out).glob("*.png"))]))
    return res


def sweep_check(p: dict) -> None:
    """Check one ``pspl`` run of a sweep before any run starts (``p``: the command's parsed options)."""
    check_device(p.get("device", "cpu"), "--device")
    cfg = apply_overrides(load_config(p["config"], PATH_KEYS), p.get("overrides") or ())
    if cfg.get("task") == "diffusion":  # the pspl command sends these to the diffusion experiment
        validate_diffusion(cfg)
    else:
        validate_config(cfg)


#: how ``bayescrl sweep`` runs ``pspl``: one agent (``algo``), env (``env``) and seed (``--seeds 1 --set
#: seed=S``) a run
sweep_adapter = SweepAdapter(
    command=pspl,
    call=run,
    check=sweep_check,
    result="results.json",
    seed=seed_by_set,
    metrics=("agents.*.final_simple_regret_mean",),
    curve_file="results.json",
    curves=("agents.*.simple_regret_curve_mean",),
    aliases={"algo": lambda v: f"agents=[{v}]", "env": lambda v: f"env.name={v}"},
    refused={"seeds": "each seed is its own run: list the seeds in grid.seed"},
)

"""``bayescrl bandit [CONFIG.yaml] --seeds S --out DIR [--set KEY=VALUE ...]``: a warmPref-PS experiment."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from bayescrl.bandits.config import resolve_config
from bayescrl.bandits.experiment import final_table, run_experiment, run_sweep
from bayescrl.commands.options import device_option, force_option, log_options, progress_option, set_option
from bayescrl.commands.sweepable import SweepAdapter, seed_by_set
from bayescrl.utils.checks import check_device, check_no_nan, positive_int
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import apply_overrides, load_yaml
from bayescrl.utils.outdir import prepare_out_dir, written
from bayescrl.utils.runlog import RunLogger


@click.command(name="bandit")
@click.argument("config", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.option("--seeds", type=int, default=5, show_default=True, help="Number of seeds (batched).")
@click.option(
    "--out",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Output folder for results.json and regret.png (must be empty unless --force).",
)
@set_option("Override a config value (repeatable), e.g. --set offline.N=5 --set 'agents=[ps, lints]'.")
@progress_option()
@device_option(help="torch device (default: the config's `device`, else cpu): cpu, cuda, cuda:N or mps.")
@force_option
@log_options
def bandit(**options) -> None:
    """Run the agents of CONFIG (YAML; default: the thesis' default protocol) on SEEDS seeds.

    ``--set key.sub=value`` (repeatable) overrides the config, e.g. ``--set offline.N=5 --set bandit.T=100
    --set 'agents=[ps, lints]'``. Writes OUT/results.json (per agent: final_regret_mean/std,
    regret_curve_mean/std, wall_time_s) and OUT/regret.png (mean ± 1 sd cumulative regret). A config
    with a ``sweep:`` mapping runs every cell and adds OUT/summary.json and OUT/summary.png. ``--log-dir
    DIR`` also writes the curves (per agent, per round) and final numbers as TensorBoard scalars.
    """
    run(options)


def run(p: Mapping[str, Any]) -> dict:
    """``bayescrl bandit`` without click: ``p`` holds the command's parameters by name (``config``,
    ``seeds``, ``out``, ``overrides``, ``progress``, ``device``, ``force``, ``log_dir``, ``wandb``; paths
    as text or ``Path``). Checks them, runs the experiment through the library
    (:func:`~bayescrl.bandits.experiment.run_experiment`, or :func:`~bayescrl.bandits.experiment.run_sweep`
    for a config's ``sweep:``), prints the table and returns the results. A sweep's run calls it in its
    own process."""
    config = None if p["config"] is None else Path(p["config"])
    out, overrides, device, progress = Path(p["out"]), p["overrides"], p["device"], p["progress"]
    if config is not None and "=" in config.name and not config.exists():
        raise ConfigError("config", str(config), "overrides are given with --set KEY=VALUE")
    seeds = positive_int(p["seeds"], "--seeds")
    cfg = load_yaml(config) if config is not None else {}
    cfg = apply_overrides(cfg, overrides)
    if device is not None:  # an explicit --device wins over the config's `device:`
        cfg = {**cfg, "device": check_device(device, "--device")}
    if not cfg.get("sweep"):
        resolve_config(cfg, seeds)  # refused (also a size beyond memory) before the output folder is made
    prepare_out_dir(out, force=p["force"])
    logger = RunLogger(p["log_dir"], p["wandb"], config=cfg, name=f"bandit:{out.name}")
    if cfg.get("sweep"):
        result = run_sweep(cfg, seeds=seeds, out=out, progress=progress)
        cells = sum(d.is_dir() for d in out.iterdir())
        files = written(out, ["summary.json", "summary.png"], f"and {cells} cell folders" if cells else "")
    else:
        result = run_experiment(cfg, seeds=seeds, out=out, progress=progress)
        files = written(out, ["results.json", "regret.png", "rater_competence.png"])
    check_no_nan(result, str(out))
    with logger:
        logger.log_results({k: v for k, v in result.items() if k not in ("config", "sweep")})
    click.echo(final_table(result))
    click.echo(f"total {result['wall_time_s']:.1f} s")
    click.echo(files)
    return result


def sweep_check(p: dict) -> None:
    """Check one ``bandit`` run of a sweep before any run starts (``p``: the command's parsed options)."""
    cfg = load_yaml(p["config"]) if p.get("config") else {}
    cfg = apply_overrides(cfg, p.get("overrides") or ())
    if cfg.get("sweep"):
        raise ConfigError(
            "sweep", cfg["sweep"], "use the sweep file's grid/set instead of the config's sweep"
        )
    resolve_config(cfg)


#: how ``bayescrl sweep`` runs ``bandit``: one agent (``algo``), one seed (``--seeds 1 --set seed=S``) a run
sweep_adapter = SweepAdapter(
    command=bandit,
    call=run,
    check=sweep_check,
    result="results.json",
    seed=seed_by_set,
    metrics=("agents.*.final_regret_mean",),
    curve_file="results.json",
    curves=("agents.*.regret_curve_mean",),
    aliases={"algo": lambda v: f"agents=[{v}]"},
    refused={"seeds": "each seed is its own run: list the seeds in grid.seed"},
)

"""``bayescrl pspl CONFIG.yaml`` for configs with ``task: diffusion`` (dispatched from ``pbrl.cli``)."""

from __future__ import annotations

from pathlib import Path

import click

from bayescrl.pbrl.diffusion import require
from bayescrl.pbrl.diffusion.experiment import run_experiment, validate_config
from bayescrl.utils.checks import check_device, check_no_nan, positive_int
from bayescrl.utils.outdir import prepare_out_dir, written
from bayescrl.utils.runlog import RunLogger
from bayescrl.utils.spread import fmt_spread


def run_diffusion(
    cfg: dict,
    seeds: int,
    out: str,
    device: str,
    progress: bool,
    plots: bool,
    no_train: bool,
    log_dir: str | None,
    wandb: bool | None,
    force: bool = False,
) -> None:
    """Validate (every field before any work), run, print one line per agent and the output folder."""
    seeds = positive_int(seeds, "--seeds")
    device = check_device(device, "--device")
    validate_config(cfg)
    require()
    prepare_out_dir(out, force=force)
    logger = RunLogger(log_dir, wandb, config=cfg, name=f"pspl:{out}")
    res = run_experiment(cfg, seeds, out, device=device, progress=progress, plots=plots, no_train=no_train)
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
            sr = a["simple_regret_mean"]
            click.echo(
                f"{prefix}{name:8s} final reward "
                f"{fmt_spread(a['final_reward_mean'], a['final_reward_std'], seeds)}  "
                f"simple regret {'-' if sr is None else format(sr, '.3f')}"
                f"  ({a['wall_time_s']:.1f} s, "
                f"{a['images_per_s']:.1f} images/s)"
            )
    click.echo(written(out, ["results.json", *sorted(p.name for p in Path(out).iterdir())]))

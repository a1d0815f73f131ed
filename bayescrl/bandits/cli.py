"""``bayescrl bandit CONFIG.yaml --seeds S --out DIR [key=value ...]``: run a warmPref-PS experiment."""

from __future__ import annotations

from pathlib import Path

import click


@click.command(name="bandit")
@click.argument("config", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.argument("overrides", nargs=-1)
@click.option("--seeds", "-s", type=int, default=5, show_default=True, help="Number of seeds (batched).")
@click.option(
    "--out",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs/bandit"),
    show_default=True,
    help="Output folder for results.json and regret.png.",
)
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar.")
def bandit(config: Path | None, overrides: tuple[str, ...], seeds: int, out: Path, progress: bool) -> None:
    """Run the agents of CONFIG (YAML; default: the seed's default protocol) on SEEDS seeds.

    OVERRIDES are ``key.sub=value`` pairs applied to the config, e.g. ``offline.N=5 bandit.T=100
    'agents=[ps, lints]'``. Writes OUT/results.json (per agent: final_regret_mean/std,
    regret_curve_mean/std, wall_time_s) and OUT/regret.png (mean ± 1 sd cumulative regret). A config
    with a ``sweep:`` mapping runs every cell and adds OUT/summary.json and OUT/summary.png.
    """
    from bayescrl.bandits.experiment import final_table, run_experiment, run_sweep
    from bayescrl.utils.io import apply_overrides, load_yaml

    if config is not None and "=" in config.name and not config.exists():
        overrides, config = (str(config), *overrides), None  # no config file, only overrides
    cfg = load_yaml(config) if config is not None else {}
    cfg = apply_overrides(cfg, overrides)
    if cfg.get("sweep"):
        result = run_sweep(cfg, seeds=seeds, out=out, progress=progress)
        files = f"{out / 'summary.json'}, {out / 'summary.png'} and one folder per cell"
    else:
        result = run_experiment(cfg, seeds=seeds, out=out, progress=progress)
        files = f"{out / 'results.json'} and {out / 'regret.png'}"
    click.echo(final_table(result))
    click.echo(f"total {result['wall_time_s']:.1f} s; wrote {files}")

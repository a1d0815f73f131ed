"""``bayescrl demo``: the headline job on a small default.

Runs the warmPref-PS headline experiment (chapter ``warmPref-PS``: K = 50 arms, d = 6, λ = 100, β = 10,
N = 20 offline preferences, T = 300 rounds, 5 seeds) comparing the bootstrapped warm-started posterior
sampler with PS and LinTS, prints the final regrets and writes ``results.json`` and ``regret.png``.
"""

from __future__ import annotations

from pathlib import Path

import click

from bayescrl.utils import load_yaml, set_torch_threads

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "examples" / "warmpref" / "default.yaml"


@click.command(name="demo")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs/demo"),
    show_default=True,
    help="Output folder for results.json and regret.png.",
)
@click.option("--seeds", type=click.IntRange(min=1), default=5, show_default=True, help="Number of seeds.")
@click.option(
    "--config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Bandit config (default: examples/warmpref/default.yaml, else built-in defaults).",
)
def demo(out: Path, seeds: int, config: Path | None) -> None:
    """Run the warmPref-PS headline (small default) and print/plot its result."""
    from bayescrl.bandits import run_experiment

    set_torch_threads()
    path = config or (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None)
    cfg = load_yaml(path) if path is not None else {}
    results = run_experiment(cfg, seeds=seeds, out=out, progress=True)
    agents = results.get("agents", results)
    click.echo(f"\nwarmPref-PS headline ({seeds} seeds) -> {out}/results.json, {out}/regret.png")
    click.echo(f"{'agent':<24}{'final regret':>16}{'wall time (s)':>16}")
    for name, res in agents.items():
        if isinstance(res, dict) and "final_regret_mean" in res:
            mean, sd = res["final_regret_mean"], res["final_regret_std"]
            click.echo(f"{name:<24}{mean:>9.2f} ± {sd:<5.2f}{res.get('wall_time_s', float('nan')):>14.1f}")

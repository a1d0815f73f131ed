"""The ``bayescrl mopo CONFIG.yaml --out DIR`` command (``mode: tabular | synthetic | lm``).

Outputs ``DIR/results.json`` and PNG plots. Tabular: ``policy`` (action -> probability), ``lambda``,
constraint values ``G`` and thresholds ``b`` (plus KKT residuals for ``solver: exact``). Synthetic: Pareto
points and hypervolume per method. LM: delegated to :func:`bayescrl.mopo.lm.run_lm`.
"""

from __future__ import annotations

from pathlib import Path

import click

from bayescrl.utils import ConfigError, apply_overrides, load_yaml, set_torch_threads, write_json

MODES = ("tabular", "synthetic", "lm")


def run_config(config: dict, out: Path, device: str | None = None) -> dict:
    """Dispatch one config on its ``mode``; returns the results (also written to ``out/results.json``)."""
    mode = config.get("mode")
    if mode not in MODES:
        raise ConfigError("mode", mode, f"must be one of {', '.join(MODES)}")
    out.mkdir(parents=True, exist_ok=True)
    if mode != "lm":
        device = device or "cpu"
    if mode == "tabular":
        from bayescrl.mopo.tabular import plot_history, solve_config

        results, run = solve_config(config, device)
        if run is not None:
            plot_history(
                run,
                results["actions"],
                out / "action_probs.png",
                title=f"{results['solver']}, tau = {results['tau']}",
            )
        else:
            _bar(results["policy"], out / "policy.png", f"exact, tau = {results['tau']}")
    elif mode == "synthetic":
        from bayescrl.mopo.synthetic import run_synthetic

        results = run_synthetic(config, out, device=device)
    else:
        from bayescrl.mopo.lm import run_lm

        if device is not None:  # an explicit --device wins over the config's `device:`
            config = {**config, "device": device}
        results = run_lm(config, out)
    write_json(out / "results.json", results)
    return results


def _bar(policy: dict[str, float], path: Path, title: str) -> None:
    from bayescrl.utils.plotting import plt

    p = plt()
    fig, ax = p.subplots(figsize=(4.5, 3.2))
    ax.bar(list(policy), list(policy.values()))
    ax.set_ylabel("probability")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    p.close(fig)


@click.command("mopo")
@click.argument("config_path", metavar="CONFIG.yaml", type=click.Path(dir_okay=False))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Output folder.")
@click.option("--set", "-s", "overrides", multiple=True, help="Override a config value, e.g. -s tau=0.1.")
@click.option(
    "--device",
    default=None,
    help="torch device (default: cpu; lm mode: the config's `device`, else cuda if available).",
)
def mopo(config_path: str, out: str, overrides: tuple[str, ...], device: str | None) -> None:
    """MOPO multi-objective preference optimisation (tabular exact/stochastic, synthetic, language models)."""
    set_torch_threads()
    config = apply_overrides(load_yaml(config_path), overrides)
    results = run_config(config, Path(out), device=device)
    summary = {k: results[k] for k in ("policy", "lambda", "G", "b") if k in results}
    if "hypervolume" in results:
        summary["hypervolume"] = results["hypervolume"]
    click.echo(f"wrote {Path(out) / 'results.json'}  {summary if summary else ''}")

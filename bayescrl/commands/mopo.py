"""The ``bayescrl mopo CONFIG.yaml --out DIR`` command (``mode: tabular | synthetic | lm``).

Outputs ``DIR/results.json`` and PNG plots. Tabular: ``policy`` (action -> probability), ``lambda``,
constraint values ``G`` and thresholds ``b`` (plus KKT residuals for ``solver: exact``). Synthetic: Pareto
points and hypervolume per method. LM: delegated to :func:`bayescrl.mopo.lm.run_lm`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from bayescrl.commands.options import device_option, force_option, log_options, set_option
from bayescrl.commands.sweepable import SweepAdapter
from bayescrl.inference.rater_report import format_table
from bayescrl.mopo import tabular_run
from bayescrl.mopo.config import check_config, check_tabular
from bayescrl.mopo.lm import run_lm
from bayescrl.mopo.lm.experiment import KEYS as LM_KEYS
from bayescrl.mopo.synthetic import run_synthetic
from bayescrl.mopo.tabular import TabularProblem
from bayescrl.mopo.tabular_run import plot_history
from bayescrl.mopo.textgen.run import run_textgen
from bayescrl.utils import ConfigError, apply_overrides, set_torch_threads, write_json
from bayescrl.utils.checks import check_device, check_no_nan, prepare_out
from bayescrl.utils.configpaths import load_config
from bayescrl.utils.io import check_keys
from bayescrl.utils.outdir import prepare_out_dir, written
from bayescrl.utils.plotting import plt
from bayescrl.utils.runlog import RunLogger
from bayescrl.utils.spread import fmt_num, fmt_spread

#: file paths of a mopo config (resolved against the config file; ``--model``/``--set`` against the cwd)
PATH_KEYS = ("data.path", "model.path")


def run_config(config: dict, out: Path, device: str | None = None, logger=None) -> dict:
    """Dispatch one config on its ``mode``; returns the results (also written to ``out/results.json``).

    ``logger`` (a :class:`~bayescrl.utils.runlog.RunLogger`) receives the stochastic tabular solvers'
    logged action probabilities and multipliers (mean over runs) per step."""
    return _run_checked(*checked_config(config, device), out, logger)


def checked_config(config: dict, device: str | None) -> tuple[dict, str | None, TabularProblem | None]:
    """``(config, device, problem)``: ``device`` checked, the config with it (:func:`with_device`) checked by
    :func:`~bayescrl.mopo.config.check_config`, and in mode tabular its parsed records (read once)."""
    if device is not None:
        device = check_device(device, "--device")
    config = with_device(config, device)
    if config.get("mode") == "tabular":
        return config, device, check_tabular(config, device or "cpu")
    check_config(config)
    return config, device, None


def _run_checked(
    config: dict, device: str | None, problem: TabularProblem | None, out: Path, logger=None
) -> dict:
    """:func:`run_config` after :func:`checked_config`."""
    mode = config["mode"]
    prepare_out(out, "--out")
    if mode not in ("lm", "textgen"):
        device = device or "cpu"
    if mode == "tabular":
        results, run = tabular_run.solve_problem(config, problem, device, out=out)
        if run is not None:
            plot_history(
                run,
                results["actions"],
                out / "action_probs.png",
                title=f"{results['solver']}, tau = {results['tau']}",
                exact=results.get("exact_policy"),
            )
            if logger is not None:
                for name, hist in run.history.items():
                    flat = hist.double().mean(1).reshape(len(hist), -1)  # [T, k], mean over runs
                    cols = results["actions"] if name == "policy" else range(flat.shape[1])
                    for j, col in zip(range(flat.shape[1]), cols, strict=False):
                        logger.curve(f"history/{name}/{col}", flat[:, j].tolist(), run.steps)
        else:
            _bar(results["policy"], out / "policy.png", f"exact, tau = {results['tau']}")
    elif mode == "synthetic":
        results = run_synthetic(config, out, device=device)
    elif mode == "textgen":
        results = run_textgen(config, out)
    else:
        results = run_lm(config, out)
    write_json(out / "results.json", results)
    check_no_nan(results, str(out / "results.json"))
    return results


def with_device(config: dict, device: str | None) -> dict:
    """``config`` with ``--device`` as its ``device`` key in modes lm and textgen (an explicit ``--device``
    wins over the config's ``device:``; the other modes take it as an argument)."""
    if device is None or config.get("mode") not in ("lm", "textgen"):
        return config
    return {**config, "device": device}


def _bar(policy: dict[str, float], path: Path, title: str) -> None:
    p = plt()
    fig, ax = p.subplots(figsize=(4.5, 3.2))
    ax.bar(list(policy), list(policy.values()), label="exact solution")
    ax.set_xlabel("action y")
    ax.set_ylabel("probability π*(y)")
    ax.legend(fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    p.close(fig)


@click.command("mopo")
@click.argument("config_path", metavar="CONFIG.yaml", type=click.Path(dir_okay=False))
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(file_okay=False),
    help="Output folder (must be empty unless --force, or --resume in lm mode).",
)
@set_option("Override a config value (repeatable), e.g. --set tau=0.1 --set mopo.steps=2000.")
@device_option(help="torch device (default: cpu; lm mode: the config's `device`, else cuda if available).")
@click.option(
    "--model",
    "model_path",
    default=None,
    metavar="PATH",
    help="lm / textgen mode: a local Hugging Face model directory to align with LoRA (never downloaded).",
)
@click.option("--resume", is_flag=True, help="lm mode: continue from OUT/checkpoint (same settings).")
@force_option
@log_options
def mopo(**options: Any) -> None:
    """MOPO multi-objective preference optimisation (tabular exact/stochastic, synthetic, language models).

    ``--log-dir DIR`` also writes the results' numbers and curves as TensorBoard scalars."""
    run(options)


def run(p: Mapping[str, Any]) -> dict:
    """``bayescrl mopo`` without click: ``p`` holds the command's parameters by name (``config_path``,
    ``out``, ``overrides``, ``device``, ``model_path``, ``resume``, ``force``, ``log_dir``, ``wandb``).
    Checks them, runs the config through :func:`run_config` (which a Python user calls with a config
    dict), prints the summary and returns the results. A sweep's run calls it in its own process."""
    set_torch_threads()
    out, device = p["out"], p["device"]
    config = command_config(p["config_path"], p["overrides"], p["model_path"], p["resume"])
    config, device, problem = checked_config(config, device)  # before the log folder is made
    resumable = config.get("mode") == "lm"
    prepare_out_dir(out, force=p["force"], resume=p["resume"], resumable=resumable, create=False)
    logger = RunLogger(p["log_dir"], p["wandb"], config=config, name=f"mopo:{out}")
    with logger:
        results = _run_checked(config, device, problem, Path(out), logger)
        logger.log_results({k: v for k, v in results.items() if k != "config"})
    table = summary_table(results)
    if table:
        click.echo(table)
    if results.get("raters"):
        click.echo(format_table(results["raters"]))
    files = sorted(q.name for q in Path(out).iterdir() if q.name != "results.json")
    click.echo(written(out, ["results.json", *files]))
    return results


def _rows(head: list[str], rows: list[list]) -> str:
    """A plain text table: numbers to 4 significant digits, columns padded."""
    cells = [head] + [[c if isinstance(c, str) else fmt_num(c) for c in r] for r in rows]
    widths = [max(len(str(r[i])) for r in cells) for i in range(len(head))]
    lines = ("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells)
    return "\n".join(line.rstrip() for line in lines)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _tabular_parts(results: dict) -> list[str]:
    """The policy per action; per constraint G, b and λ."""
    parts = []
    pol = results.get("policy")
    if isinstance(pol, dict):
        parts.append(_rows(["action", "probability"], [[a, p] for a, p in pol.items()]))
    if isinstance(results.get("G"), list) and isinstance(results.get("b"), list):
        lam = results.get("lambda") or [None] * len(results["G"])
        gbl = zip(results["G"], results["b"], lam, strict=False)
        rows = [[str(i + 1), g, b, lm] for i, (g, b, lm) in enumerate(gbl)]
        parts.append(_rows(["constraint", "G", "b", "lambda"], rows))
    return parts


def _runs_of(results: dict) -> dict | None:
    """``results["runs"]`` when it is a mapping of run records (synthetic sanity, lm), else None."""
    runs = results.get("runs")
    return runs if isinstance(runs, dict) and all(isinstance(r, dict) for r in runs.values()) else None


def _sanity_part(runs: dict) -> str:
    """Synthetic sanity: the mean policy and its total-variation distance to the exact solution per run."""
    actions = list(next(iter(runs.values()))["policy_mean"])
    rows = []
    for key, r in runs.items():
        tv = r.get("tv_to_exact")
        tv = sum(tv) / len(tv) if isinstance(tv, list) and tv else tv
        rows.append([key, *[r["policy_mean"][a] for a in actions], tv])
    return _rows(["run", *[f"pi({a})" for a in actions], "TV to exact"], rows)


def _sets_parts(sets: dict) -> list[str]:
    """Motivating example: hypervolume and distance to the true front per method, per reward set."""
    parts = []
    for name, res in sets.items():
        methods = res.get("methods") or {}
        rows = [[m, v.get("hypervolume"), v.get("mean_distance_to_front")] for m, v in methods.items()]
        if rows:
            title = f"set {name} (true front hypervolume {fmt_num(res.get('true_front_hypervolume'))})"
            parts.append(title + "\n" + _rows(["method", "hypervolume", "distance to front"], rows))
    return parts


def _lm_runs_part(runs: dict) -> str:
    """lm: one row per run, its first six numeric headline fields."""
    first = next(iter(runs.values()))
    cols = [k for k in first if _is_num(first[k])][:6]
    rows = [[name, *[r.get(c) if _is_num(r.get(c)) else "–" for c in cols]] for name, r in runs.items()]
    return _rows(["run", *cols], rows)


def _textgen_part(table: dict) -> str | None:
    """textgen: mean ± sd over seeds of each objective and the hypervolume, per algorithm."""
    objs = table.get("objectives") or ["r1", "r2"]
    rows = []
    for a, r in table["rows"].items():
        n = len(r.get("seeds") or []) or None
        cells = [fmt_spread(m, s, n, show_n=False) for m, s in zip(r["mean"], r["sd"], strict=False)]
        hv = fmt_spread(r.get("hypervolume_mean"), r.get("hypervolume_sd"), n, show_n=False)
        rows.append([a, *cells, hv])
    if not rows:
        return None
    n_seeds = max((len(r.get("seeds") or []) for r in table["rows"].values()), default=0)
    head = ["algorithm", *objs[: len(rows[0]) - 2], "hypervolume"]
    return f"{table.get('task', '')} (mean ± sd over {n_seeds} seeds)\n" + _rows(head, rows)


def _headline_parts(results: dict) -> list[str]:
    """lm: implicit accuracy per objective; hypervolume per method (or one)."""
    parts = []
    acc = results.get("implicit_accuracy")
    if isinstance(acc, dict):
        parts.append(_rows(["objective", "implicit accuracy"], [[k, v] for k, v in acc.items()]))
    hv = results.get("hypervolume")
    if isinstance(hv, dict):
        parts.append(_rows(["method", "hypervolume"], [[k, v] for k, v in hv.items()]))
    elif isinstance(hv, (int, float)):
        parts.append(_rows(["", "hypervolume"], [["", hv]]))
    return parts


def summary_table(results: dict) -> str:
    """The headline numbers of a mopo run as a rounded text table (the full results are in results.json):
    tabular: the policy per action and per constraint G, b and λ; synthetic sanity: the mean policy and its
    total-variation distance to the exact solution per data set and τ; motivating: hypervolume per method;
    lm: implicit accuracy per objective."""
    parts = _tabular_parts(results)
    runs = _runs_of(results)
    if runs and all("policy_mean" in r for r in runs.values()):
        parts.append(_sanity_part(runs))
    sets = results.get("sets")
    if isinstance(sets, dict) and sets:
        parts += _sets_parts(sets)
    elif runs:
        parts.append(_lm_runs_part(runs))
    table = results.get("table")
    if isinstance(table, dict) and isinstance(table.get("rows"), dict):
        part = _textgen_part(table)
        if part is not None:
            parts.append(part)
    parts += _headline_parts(results)
    return "\n\n".join(parts)


def command_config(
    config_path: str, overrides: tuple[str, ...], model_path: str | None = None, resume: bool = False
) -> dict:
    """The config file with the ``--set`` overrides, ``--model`` as ``model.path`` (modes lm, textgen) and
    ``--resume`` as ``resume`` (mode lm)."""
    config = apply_overrides(load_config(config_path, PATH_KEYS), overrides)
    if model_path is None and not resume:
        return config
    mode = config.get("mode")
    if resume and mode != "lm":
        raise ConfigError("--resume", True, "only for mode: lm")
    if mode not in ("lm", "textgen"):
        raise ConfigError("--model", model_path, "only for mode: lm or textgen")
    if model_path is not None:
        config = {**config, "model": {**(config.get("model") or {}), "path": model_path}}
    if mode == "lm":
        config = {**config, "resume": resume or bool(config.get("resume", False))}
    return config


def sweep_check(p: dict) -> None:
    """Check one ``mopo`` run of a sweep before any run starts (``p``: the command's parsed options)."""
    overrides = p.get("overrides") or ()
    cfg = command_config(p["config_path"], overrides, p.get("model_path"), bool(p.get("resume")))
    if p.get("device") is not None:
        check_device(p["device"], "--device")
    if cfg.get("mode") == "lm":  # an unknown top-level key: most likely the sweep's seed key
        try:
            check_keys(cfg, LM_KEYS)
        except ConfigError as exc:
            hint = " (mode lm seeds by the top-level key: give 'seed_key: seed' in the sweep file)"
            raise ConfigError(exc.field, exc.value, exc.reason + hint) from None
    check_config(with_device(cfg, p.get("device")))


#: how ``bayescrl sweep`` runs ``mopo`` (``--set mopo.seed=S``, or the sweep's ``seed_key``): the command's
#: :func:`run` without click parsing; lm runs with a checkpoint resume with ``--resume``
sweep_adapter = SweepAdapter(
    command=mopo,
    call=run,
    check=sweep_check,
    result="results.json",
    seed=lambda s, key: ["--set", f"{key or 'mopo.seed'}={s}"],
    metrics=("hypervolume.*", "lambda.*", "G.*"),
    checkpoint="checkpoint/state.pt",  # lm mode with --model (checkpoints every N steps)
    resume="flag",
)

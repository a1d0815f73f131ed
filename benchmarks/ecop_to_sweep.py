"""Turn benchmarks/ecop_compare.py results into a sweep folder that ``bayescrl report`` tabulates.

``ecop_compare.py --name NAME`` wrote ``benchmarks/results/ecop/NAME.json`` (settings) and
``NAME.runs.jsonl`` (one record per run). Each record is a ``bayescrl train`` run of a sweep file's grid
point (same algorithm, env, cost limits, steps, seed and settings), so it can be written in the layout a
sweep writes (``DIR/<run-id>/metrics.json`` with ``train_final_return`` = the record's ``return``,
``train_final_costs`` = ``costs``, ``final_return`` / ``final_costs`` = the deterministic evaluation;
``curves.json``; ``status/<run-id>.json`` done) without running anything again. Each source is checked
against its case first: env, steps, cost limit and every ``config.*`` setting of the sweep must equal the
results file's, else nothing is written (exit 2).

    .venv/bin/python benchmarks/ecop_to_sweep.py examples/sweeps/ecop_table.yaml \\
        --out benchmarks/results/sweeps/ecop_table \\
        --source HumanoidRun=table_humanoidrun_100k --source PointCircle=table_pointcircle_100k \\
        --source PointCircle=pointcircle_limit10_100k_v2:ecop,ppo-lag ...

``--source CASE=NAME[:ALGO,...]``: the runs of NAME (all its plain algorithm labels, or those listed) fill
the grid points of case CASE; a later source replaces an earlier one's runs. Then ``bayescrl report DIR``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from bayescrl.sweep.report import build_report
from bayescrl.sweep.runner import prepare_dir
from bayescrl.sweep.spec import build_runs, load_sweep
from bayescrl.utils.io import write_json

RESULTS = Path(__file__).parent / "results" / "ecop"
BASE_CFG = {  # benchmarks/ecop_compare.py's BASE_CFG (checkpoint_every: not a setting of the numbers)
    "n_envs": 8,
    "rollout_steps": 200,
    "minibatch_size": 200,
    "update_epochs": 10,
    "pi_lr": 1e-3,
    "vf_lr": 1e-3,
    "eval_episodes": 3,
}


def case_settings(spec, case: dict) -> dict:
    """The run's ``config`` settings: the sweep's and the case's ``set: config.*`` entries."""
    cfg = {k.removeprefix("config."): v for k, v in spec.set_fixed.items() if k.startswith("config.")}
    cfg.update({k.removeprefix("config."): v for k, v in (case.get("set") or {}).items()})
    return cfg


def check_source(name: str, info: dict, case: dict, spec) -> list[str]:
    """Differences between a results file's settings and the case's (empty: the same runs)."""
    bad = []
    limits = case["cost-limit"] if isinstance(case["cost-limit"], list) else [case["cost-limit"]]
    if info["env"] != case["env"]:
        bad.append(f"env {info['env']} != {case['env']}")
    if int(info["steps"]) != int(case["total-steps"]):
        bad.append(f"steps {info['steps']} != {case['total-steps']}")
    if float(info["cost_limit"]) != float(limits[0]):
        bad.append(f"cost limit {info['cost_limit']} != {limits[0]}")
    want = case_settings(spec, case)
    got = {k: v for k, v in info["config"].items() if k != "checkpoint_every"}
    for key in sorted(set(want) | set(got)):
        a, b = got.get(key, BASE_CFG.get(key)), want.get(key, BASE_CFG.get(key))
        if json.dumps(a) != json.dumps(b):
            bad.append(f"config.{key} {a} != {b}")
    return [f"{name}: {b}" for b in bad]


def convert(record: dict, run_dir: Path, source: str) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    metrics = {
        "train_final_return": record["return"],
        "train_final_costs": record["costs"],
        "final_return": record["eval_return"],
        "final_costs": record["eval_costs"],
        "cost_limits": record["cost_limits"],
        "env_steps": record["steps"],
        "wall_s": record["wall_s"],
        "converted_from": source,
    }
    write_json(run_dir / "metrics.json", metrics)
    curves = {
        "env_steps": record["curve_steps"],
        "ep_return": record["curve_return"],
        "ep_costs": [[c] for c in record["curve_cost"]],
    }
    write_json(run_dir / "curves.json", curves)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweep_file")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--source", action="append", default=[], metavar="CASE=NAME[:ALGO,...]")
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args(argv)
    spec = load_sweep(args.sweep_file)
    [axis] = list(spec.cases)  # one axis of cases (the tasks)
    runs = {(r.point[axis], r.point["algo"], r.point["seed"]): r for r in build_runs(spec, args.out)}
    chosen: dict[tuple, tuple[dict, str]] = {}
    errors = []
    for item in args.source:
        case_name, _, rest = item.partition("=")
        name, _, algos = rest.partition(":")
        if case_name not in spec.cases[axis]:
            sys.exit(f"error: --source {item}: no case {case_name!r} (cases: {list(spec.cases[axis])})")
        info = json.loads((args.results / f"{name}.json").read_text())
        errors += check_source(name, info, spec.cases[axis][case_name], spec)
        keep = set(algos.split(",")) if algos else None
        for line in (args.results / f"{name}.runs.jsonl").read_text().splitlines():
            rec = json.loads(line)
            if rec["label"] != rec["algo"] or (keep is not None and rec["algo"] not in keep):
                continue  # e-COP variants (beta studies) are not grid points of the table
            key = (case_name, rec["algo"], rec["seed"])
            if key in runs:
                chosen[key] = (rec, f"benchmarks/results/ecop/{name}.runs.jsonl")
    if errors:
        print("error: results differ from the sweep file's settings: " + "; ".join(errors), file=sys.stderr)
        sys.exit(2)
    if args.out.exists() and any(args.out.iterdir()):
        try:  # only a folder this script wrote is replaced, never a sweep's real runs or other files
            converted = "converted_from" in json.loads((args.out / "sweep.json").read_text())
        except (OSError, ValueError):
            converted = False
        if not converted:
            print(
                f"error: --out {args.out}: holds files this script did not write; give another folder",
                file=sys.stderr,
            )
            sys.exit(2)
        shutil.rmtree(args.out)
    prepare_dir(args.out, spec, list(runs.values()), args.sweep_file)
    manifest = json.loads((args.out / "sweep.json").read_text())
    manifest["sweep_file"] = str(Path(args.sweep_file))  # relative: the folder is committed
    manifest["converted_from"] = sorted({src for _, src in chosen.values()})
    write_json(args.out / "sweep.json", manifest)
    for key, (rec, src) in chosen.items():
        run = runs[key]
        convert(rec, args.out / run.id, src)
        write_json(args.out / "status" / f"{run.id}.json", {"status": "done", "converted_from": src})
    rep = build_report(args.out, plots=not args.no_plots)
    print(rep["markdown"])
    print(f"{len(chosen)} of {len(runs)} grid points converted -> {args.out}")


if __name__ == "__main__":
    main()

"""Turn a benchmark script's committed results into the sweep folder ``bayescrl report`` tabulates.

The runs a README table was made from were run by a benchmark script; each is the run of a grid point of a
sweep file (same algorithm, task, budget, settings and seed), so it can be written in the layout
``bayescrl sweep`` writes (``sweep.json``, ``DIR/<run-id>/<result file>``, ``status/<run-id>.json`` done)
without running anything again. Each source is checked against its grid points first: if any setting
differs from the sweep file's, nothing is written (exit 2). One reader per family of scripts:

* ``ecop`` (sweep ``command: train``): ``benchmarks/ecop_compare.py --name NAME`` wrote
  ``benchmarks/results/ecop/NAME.json`` (settings: env, steps, cost limit, config) and ``NAME.runs.jsonl``
  (one record per run). Written per run: ``metrics.json`` as ``bayescrl train`` writes it
  (``train_final_return`` = the record's ``return``, ``train_final_costs`` = ``costs``, ``final_return`` /
  ``final_costs`` = the deterministic evaluation) and ``curves.json`` (only from records that still hold
  their curves: the committed ``NAME.runs.jsonl`` do not).
* ``acpo`` (sweep ``command: call``, target ``benchmarks/acpo_common.py:sweep_job``):
  ``benchmarks/acpo_compare.py --out benchmarks/results/acpo/NAME`` wrote ``NAME/compare.json`` (its
  options, and per task and algorithm each seed's final protocol reward and cost). Each grid point's job
  (task, algorithm, steps, δ, evaluation budgets and the algorithm's full settings, built as the script
  builds them) must equal the study's; written per run: ``result.json`` with the keys ``sweep_job``
  returns (``final_avg_reward``, ``final_avg_costs``, ``final_cost_over_limit``, ``within_limit``, the job).
  The per-iteration curves of these studies are kept only as means over seeds, so none are written.

::

    .venv/bin/python benchmarks/to_sweep.py examples/sweeps/ecop_table.yaml \\
        --out benchmarks/results/sweeps/ecop_table --source HumanoidRun=table_humanoidrun_100k \\
        --source PointCircle=pointcircle_limit10_100k_v2:ecop,ppo-lag
    .venv/bin/python benchmarks/to_sweep.py examples/sweeps/acpo_point.yaml \\
        --out benchmarks/results/sweeps/acpo_point --source acpo-text=circle_phase_8e5_n20 ...

``--source VALUE[+VALUE...]=NAME[:ALGO,...]``: the runs of NAME (only the algorithms listed, when given) fill
the grid points whose axes take the values VALUE (a case name, or a value of a plain axis such as ``algo``;
not a seed); a later source replaces an earlier one's runs. The family is ``--reader``, by default the
sweep's: ``train`` -> ``ecop``, ``call`` of ``acpo_common.py`` -> ``acpo``. Then ``bayescrl report DIR``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from bayescrl.sweep.report import build_report
from bayescrl.sweep.runner import prepare_dir
from bayescrl.sweep.spec import Run, SweepSpec, build_runs, load_sweep
from bayescrl.utils.io import write_json

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


# ------------------------------------------------------------------------------------------ ecop
ECOP_BASE_CFG = {  # benchmarks/ecop_compare.py's BASE_CFG (checkpoint_every: not a setting of the numbers)
    "n_envs": 8,
    "rollout_steps": 200,
    "minibatch_size": 200,
    "update_epochs": 10,
    "pi_lr": 1e-3,
    "vf_lr": 1e-3,
    "eval_episodes": 3,
}
BASE_CFG = ECOP_BASE_CFG  # the name benchmarks/ecop_to_sweep.py exported


def case_settings(spec: SweepSpec, case: dict) -> dict:
    """The run's ``config`` settings: the sweep's and the case's ``set: config.*`` entries."""
    cfg = {k.removeprefix("config."): v for k, v in spec.set_fixed.items() if k.startswith("config.")}
    cfg.update({k.removeprefix("config."): v for k, v in (case.get("set") or {}).items()})
    return cfg


def check_source(name: str, info: dict, case: dict, spec: SweepSpec) -> list[str]:
    """Differences between an ``ecop_compare.py`` results file's settings and the case's (empty: the same
    runs)."""
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
        a, b = got.get(key, ECOP_BASE_CFG.get(key)), want.get(key, ECOP_BASE_CFG.get(key))
        if json.dumps(a) != json.dumps(b):
            bad.append(f"config.{key} {a} != {b}")
    return [f"{name}: {b}" for b in bad]


def convert(record: dict, run_dir: Path, source: str) -> None:
    """An ``ecop_compare.py`` record as the run folder ``bayescrl train`` writes."""
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
    if "curve_return" not in record:  # the committed runs.jsonl keep no per-iteration curves
        return
    curves = {
        "env_steps": record["curve_steps"],
        "ep_return": record["curve_return"],
        "ep_costs": [[c] for c in record["curve_cost"]],
    }
    write_json(run_dir / "curves.json", curves)


class EcopReader:
    """``benchmarks/ecop_compare.py`` results: ``NAME.json`` + ``NAME.runs.jsonl``."""

    results = RESULTS / "ecop"

    def load(self, results: Path, name: str) -> tuple[dict, list[dict], str]:
        info = json.loads((results / f"{name}.json").read_text())
        recs = []
        for line in (results / f"{name}.runs.jsonl").read_text().splitlines():
            rec = json.loads(line)
            if rec["label"] == rec["algo"]:  # e-COP variants (beta studies) are not grid points of a table
                recs.append(rec)
        return info, recs, f"benchmarks/results/ecop/{name}.runs.jsonl"

    def problems(self, name: str, info: dict, rec: dict | None, run: Run, spec: SweepSpec) -> list[str]:
        [axis] = list(spec.cases)  # one axis of cases (the tasks)
        return check_source(name, info, spec.cases[axis][run.point[axis]], spec)

    def matches(self, rec: dict, run: Run, spec: SweepSpec) -> bool:
        return rec["algo"] == run.point["algo"] and rec["seed"] == run.point["seed"]

    def write(self, rec: dict, run: Run, run_dir: Path, source: str) -> None:
        convert(rec, run_dir, source)


# ------------------------------------------------------------------------------------------ acpo
def _acpo_modules():
    """``benchmarks/acpo_common.py`` and ``acpo_compare.py`` (scripts, not a package)."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import acpo_common
    import acpo_compare

    return acpo_common, acpo_compare


#: the job keys a converted run must share with its grid point (``acpo_common.SWEEP_JOB`` less the point)
ACPO_JOB_KEYS = ("steps", "delta", "eval_every", "eval_traj", "eval_steps", "final_traj", "final_steps")


class AcpoReader:
    """``benchmarks/acpo_compare.py`` studies: ``NAME/compare.json`` (options and per-seed final numbers)."""

    results = RESULTS / "acpo"

    def load(self, results: Path, name: str) -> tuple[dict, list[dict], str]:
        common, compare = _acpo_modules()
        path = results / name / "compare.json"
        data = json.loads(path.read_text())
        args = data["args"]
        extra = compare.parse_acpo_set(args.get("acpo_set") or [])
        recs = []
        for task, res in data["tasks"].items():
            for algo, agg in res["algos"].items():
                cfg = compare.run_config(
                    algo,
                    args["delta"],
                    args.get("error_correction"),
                    extra,
                    args.get("n_envs"),
                    args.get("cost_estimate"),
                )
                job = {
                    "task": task,
                    "algo": algo,
                    "steps": args["steps"],
                    "delta": args["delta"],
                    "config": cfg,
                    "eval_every": args["eval_every"],
                    "eval_traj": args["eval_traj"],
                    "eval_steps": args["eval_steps"],
                    # studies run before these options existed used 10 x 1000 steps, today's defaults
                    "final_traj": args.get("final_traj", 10),
                    "final_steps": args.get("final_steps", 1000),
                }
                for seed, r, c in zip(agg["seeds"], agg["final_rewards"], agg["final_costs"], strict=True):
                    limit = res["limit_per_step"]
                    recs.append(
                        {
                            **job,
                            "seed": seed,
                            "limit_per_step": limit,
                            "final_avg_reward": r,
                            "final_avg_costs": [c],
                            "final_cost_over_limit": c / limit,
                            "within_limit": float(c <= 1.1 * limit),
                        }
                    )
        rel = path.relative_to(HERE.parent) if path.is_relative_to(HERE.parent) else path
        return args, recs, str(rel)

    @staticmethod
    def full_job(run: Run) -> dict:
        """The grid point's job as ``acpo_common.sweep_job`` runs it (defaults and the full settings)."""
        common, _ = _acpo_modules()
        job = {**common.SWEEP_JOB, **json.loads(run.argv[2])}
        job["config"] = {**common.algo_config(job["algo"], job["delta"]), **(job.get("config") or {})}
        return job

    def problems(self, name: str, info: dict, rec: dict | None, run: Run, spec: SweepSpec) -> list[str]:
        if rec is None:
            return []
        want = self.full_job(run)
        bad = []
        for key in ACPO_JOB_KEYS:
            if json.dumps(rec[key]) != json.dumps(want[key]):
                bad.append(f"{key} {rec[key]} != {want[key]}")
        got_cfg, want_cfg = rec["config"], want["config"]
        for key in sorted(set(got_cfg) | set(want_cfg)):
            a, b = got_cfg.get(key), want_cfg.get(key)
            if json.dumps(a) != json.dumps(b):
                bad.append(f"config.{key} {a} != {b}")
        return [f"{name} ({rec['task']}, {rec['algo']}): {b}" for b in bad]

    def matches(self, rec: dict, run: Run, spec: SweepSpec) -> bool:
        job = json.loads(run.argv[2])
        return (rec["task"], rec["algo"], rec["seed"]) == (job["task"], job["algo"], job.get("seed"))

    def write(self, rec: dict, run: Run, run_dir: Path, source: str) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json(run_dir / "result.json", {**rec, "converted_from": source})


READERS: dict[str, Any] = {"ecop": EcopReader, "acpo": AcpoReader}


def default_reader(spec: SweepSpec) -> str:
    if spec.command == "train":
        return "ecop"
    if spec.command == "call" and "acpo_common" in str(spec.target):
        return "acpo"
    raise SystemExit(f"error: no reader for a sweep of command {spec.command!r}; give --reader")


def _case_filter(spec: SweepSpec, names: str, item: str) -> dict[str, Any]:
    """``A+B`` -> {axis: value}: each name a case of an axis of cases, or a value of another grid axis
    (``algo``, ``task``; not ``seed``), of exactly one axis."""
    out: dict[str, Any] = {}
    axes = {k: [str(v) for v in vals] for k, vals in spec.axes.items() if k != "seed"}
    for name in names.split("+"):
        hits = [axis for axis, values in axes.items() if name in values]
        if len(hits) != 1:
            why = "no grid value" if not hits else "a value of several axes"
            sys.exit(f"error: --source {item}: {why} {name!r} (axes: {axes})")
        out[hits[0]] = name
    return out


def main(argv: list[str] | None = None, reader: str | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweep_file")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--source", action="append", default=[], metavar="VALUE[+VALUE]=NAME[:ALGO,...]")
    ap.add_argument("--reader", choices=sorted(READERS), default=reader)
    ap.add_argument("--results", type=Path, default=None, help="the reader's results folder")
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args(argv)
    spec = load_sweep(args.sweep_file)
    family = READERS[args.reader or default_reader(spec)]()
    results = args.results or family.results
    runs = build_runs(spec, args.out)
    chosen: dict[str, tuple[dict, str]] = {}  # run id -> (record, source file)
    errors: list[str] = []
    for item in args.source:
        cases, _, rest = item.partition("=")
        name, _, algos = rest.partition(":")
        where = _case_filter(spec, cases, item)
        info, recs, src = family.load(results, name)
        keep = set(algos.split(",")) if algos else None
        for run in runs:
            if any(str(run.point[axis]) != value for axis, value in where.items()):
                continue
            rec = next(
                (r for r in recs if (keep is None or r["algo"] in keep) and family.matches(r, run, spec)),
                None,
            )
            errors += [e for e in family.problems(name, info, rec, run, spec) if e not in errors]
            if rec is not None:
                chosen[run.id] = (rec, src)
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
    prepare_dir(args.out, spec, runs, args.sweep_file)
    manifest = json.loads((args.out / "sweep.json").read_text())
    manifest["sweep_file"] = str(Path(args.sweep_file))  # relative: the folder is committed
    manifest["converted_from"] = sorted({src for _, src in chosen.values()})
    write_json(args.out / "sweep.json", manifest)
    by_id = {run.id: run for run in runs}
    for rid, (rec, src) in chosen.items():
        family.write(rec, by_id[rid], args.out / rid, src)
        write_json(args.out / "status" / f"{rid}.json", {"status": "done", "converted_from": src})
    rep = build_report(args.out, plots=not args.no_plots)
    print(rep["markdown"])
    print(f"{len(chosen)} of {len(runs)} grid points converted -> {args.out}")


if __name__ == "__main__":
    main()

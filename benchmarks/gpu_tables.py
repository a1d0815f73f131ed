"""The e-COP table rows on the MJX backend, on one GPU, inside a time budget.

    PYTHONPATH=. python benchmarks/gpu_tables.py --plan ant1e6 --algos ecop focops p3o appo \\
        --workers 14 --budget 500 --work runs/gpu_tables --out $OUT/gpu_tables

(the GPU session's commands, and the estimate behind them: docs/gpu.md, "Next GPU runs").

Runs ``python -m bayescrl -q train ... --set config.env_backend=mjx --device DEV`` for every (task,
algorithm, seed) of a plan (:data:`PLANS`), ``--workers`` processes at a time (each its own JAX and torch
on the one GPU, one CPU thread each), in the plan's priority order: seed-major (seed 0 of every task and
algorithm, then seed 1, ...), algorithms in the order listed (e-COP first), so that a budget that runs out
leaves every table cell with about the same number of seeds rather than some cells full and others empty.

Budget: a run starts only while its expected wall time fits before the deadline: before any run of its
task has finished ``--first-run-s``, then the slowest finished run of the task with its first iteration
(which held the XLA compile) counted as a later one, since later processes load the compiled step from
the persistent cache (:func:`expected_wall`); at the deadline the runs still going are stopped (their
last iteration record is kept, marked ``partial``, and their checkpoint); the runs never started are
listed as ``skipped``. The script ends as soon as no further run fits. A second call with the
same ``--work`` (on the same machine, or with the first call's ``--out``/work copied back there) goes on
where the first stopped: a run with a ``metrics.json`` is not run again, a stopped one is resumed from its
checkpoint (``train --resume``; on the MJX backend its episodes restart, docs/envs.md).

Writes ``--out``/summary.json (rewritten after every finished run, so a killed script still leaves what it
has): the machine, the plan and its settings, every run (return code, wall time, first-iteration time,
env steps/s, final training return and costs, evaluation), and per cell (task, algorithm) the mean, sd and
count of the final training return and costs and the seeds within the limits; plus ``--out``/runs/ with
each finished run's ``metrics.json`` (the per-iteration ``metrics.jsonl`` with ``--keep-jsonl``).

``--device cpu --steps 2000 --seeds 1`` runs the same script end to end on CPU JAX (a dry run without a
GPU; ``tests/test_mjx_gpu_tables.py`` does this at a tiny budget).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: the table's settings (examples/sweeps/ecop_table.yaml: 8 episodes of H = 200 per iteration, lr 1e-3)
TABLE_SET = {
    "config.n_envs": 8,
    "config.rollout_steps": 200,
    "config.minibatch_size": 200,
    "config.update_epochs": 10,
    "config.pi_lr": 1.0e-3,
    "config.vf_lr": 1.0e-3,
    "config.eval_episodes": 3,
}
#: GPU batches for 10^6 steps: 1024 copies x 50 steps = 51,200 steps per iteration (20 iterations; episodes
#: of 200 steps run across iterations), minibatches of 4096: the batch of the 10^6-step Point-Circle runs of
#: docs/envs.md (256 x 200) in a quarter of the sequential steps, which bound an MJX run's time
GPU_SET = {**TABLE_SET, "config.n_envs": 1024, "config.rollout_steps": 50, "config.minibatch_size": 4096}

#: e-COP, then the best limit-respecting baselines of the 10-seed CPU table (APPO on PointCircle, P3O on
#: PointReach and PointNavigation, FOCOPS on HumanoidRun), then the rest
ALGOS = ["ecop", "focops", "p3o", "appo", "ppo-lag", "ipo", "cpo", "pcpo"]

#: plan -> tasks (name, env id, cost limit, total steps), algorithms, seeds, --set overrides
PLANS: dict[str, dict] = {
    # the Ant rows of the e-COP table at 10^6 steps (elliptic-cone variants, the MJX contact model)
    "ant1e6": {
        "tasks": [
            ("AntCircle", "bayescrl/AntCircleElliptic-v0", 10.0, 1_000_000),
            ("AntReach", "bayescrl/AntReachElliptic-v0", 25.0, 1_000_000),
        ],
        "algos": ALGOS,
        "seeds": list(range(10)),
        "set": GPU_SET,
    },
    # the table's rows with MJX ports at the thesis' budget (10^5 steps) and the table's settings
    "thesis": {
        "tasks": [
            ("AntCircle", "bayescrl/AntCircleElliptic-v0", 10.0, 100_000),
            ("AntReach", "bayescrl/AntReachElliptic-v0", 25.0, 100_000),
            ("PointCircle", "bayescrl/PointCircle-v0", 10.0, 100_000),
            ("PointReach", "bayescrl/PointReach-v0", 25.0, 100_000),
        ],
        "algos": ALGOS,
        "seeds": list(range(10)),
        "set": TABLE_SET,
    },
}


def plan_runs(plan: dict, algos: list[str] | None, tasks: list[str] | None, seeds: list[int]) -> list[dict]:
    """The plan's runs in priority order: seed-major, then task, then algorithm (as listed)."""
    runs = []
    for seed in seeds:
        for name, env, limit, steps in plan["tasks"]:
            if tasks and name not in tasks:
                continue
            for algo in algos or plan["algos"]:
                runs.append(
                    {"key": f"{name}/{algo}/seed{seed}", "task": name, "env": env, "algo": algo,
                     "seed": seed, "cost_limit": limit, "total_steps": steps}
                )  # fmt: skip
    return runs


def run_argv(run: dict, sets: dict, device: str, out_dir: Path) -> list[str]:
    if (out_dir / "checkpoint.pt").is_file() and not (out_dir / "metrics.json").is_file():
        return [sys.executable, "-m", "bayescrl", "-q", "train", "--resume", str(out_dir), "--device", device]
    argv = [
        sys.executable, "-m", "bayescrl", "-q", "train", "--algo", run["algo"], "--env", run["env"],
        "--seed", str(run["seed"]), "--cost-limit", str(run["cost_limit"]),
        "--total-steps", str(run["total_steps"]), "--set", "config.env_backend=mjx",
        "--device", device, "--out", str(out_dir), "--force",
    ]  # fmt: skip
    for k, v in sets.items():
        argv += ["--set", f"{k}={v}"]
    return argv


def read_records(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut by a kill
            break
    return out


def run_record(run: dict, run_dir: Path) -> dict:
    """What a run left: its final metrics, or (stopped early) its last iteration record."""
    rec: dict = {}
    recs = read_records(run_dir / "metrics.jsonl")
    if recs:
        rec["iterations_done"] = len(recs)
        rec["first_iter_s"] = recs[0].get("iter_s")
        later = [r.get("iter_s") for r in recs[1:] if r.get("iter_s")]
        if later:
            steps = recs[-1]["env_steps"] - recs[0]["env_steps"]
            rec["env_steps_per_s_after_first"] = steps / sum(later)
    m = run_dir / "metrics.json"
    if m.is_file():
        d = json.loads(m.read_text())
        keys = ("train_final_return", "train_final_costs", "final_return", "final_costs", "env_steps",
                "iterations", "env_steps_per_s")  # fmt: skip
        rec.update({k: d.get(k) for k in keys})
    elif recs:
        tail = recs[-max(1, len(recs) // 10) :]
        rec["partial"] = True
        rec["env_steps"] = recs[-1]["env_steps"]
        rec["train_final_return"] = statistics.fmean(r["ep_return"] for r in tail)
        costs = zip(*(r["ep_costs"] for r in tail), strict=True)
        rec["train_final_costs"] = [statistics.fmean(c) for c in costs]
    return rec


def expected_wall(wall_s: float, rec: dict) -> float:
    """A finished run's wall time with its first iteration (compile included) replaced by a later one (the
    next processes of the task load the compiled step from the cache), plus 15 s for the process start."""
    first, rate, steps = rec.get("first_iter_s"), rec.get("env_steps_per_s_after_first"), rec.get("env_steps")
    iters = rec.get("iterations_done") or 0
    if not first or not rate or not steps or iters < 2:
        return wall_s
    later = steps / iters / rate  # seconds per iteration after the first
    return max(0.0, wall_s - first + later) + 15.0


def _stats(xs: list[float]) -> dict:
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "mean": statistics.fmean(xs), "sd": statistics.stdev(xs) if len(xs) > 1 else None}


def cells(runs: list[dict], results: dict[str, dict]) -> list[dict]:
    """Per (task, algorithm): final training return and costs over the finished seeds."""
    out = []
    seen: dict[tuple, list[dict]] = {}
    for r in runs:
        seen.setdefault((r["task"], r["algo"], r["cost_limit"]), []).append(r)
    for (task, algo, limit), rs in seen.items():
        done = [results[r["key"]] for r in rs if results.get(r["key"], {}).get("rc") == 0]
        done = [d for d in done if d.get("train_final_return") is not None]
        costs = [d["train_final_costs"][0] for d in done]
        out.append({
            "task": task, "algo": algo, "cost_limit": limit, "seeds": len(done),
            "train_final_return": _stats([d["train_final_return"] for d in done]),
            "train_final_cost": _stats(costs),
            "seeds_within_limit": sum(c <= limit for c in costs),
            "final_return": _stats([d.get("final_return") for d in done]),
        })  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", choices=sorted(PLANS), default="ant1e6")
    ap.add_argument("--budget", type=float, default=420.0, help="seconds for all runs together")
    ap.add_argument("--workers", type=int, default=None, help="runs at a time (default: cores - 2)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--algos", nargs="*", default=None, help="only these algorithms (in this order)")
    ap.add_argument("--tasks", nargs="*", default=None, help="only these tasks (plan names)")
    ap.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1 (default: the plan's)")
    ap.add_argument("--steps", type=float, default=None, help="total steps per run (default: the plan's)")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="extra KEY=VALUE for every run")
    ap.add_argument("--first-run-s", type=float, default=240.0, help="expected wall of a run before any ends")
    ap.add_argument("--work", default="runs/gpu_tables", help="folder of the run folders (kept, resumable)")
    ap.add_argument("--out", default=None, help="result folder (default $OUT/gpu_tables)")
    ap.add_argument("--keep-jsonl", action="store_true", help="copy each run's metrics.jsonl to --out too")
    ap.add_argument("--dry-run", action="store_true", help="print the commands and exit")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    deadline = t_start + args.budget
    plan = PLANS[args.plan]
    seeds = list(range(args.seeds)) if args.seeds is not None else plan["seeds"]
    runs = plan_runs(plan, args.algos, args.tasks, seeds)
    if args.steps is not None:
        for r in runs:
            r["total_steps"] = int(args.steps)
    sets = dict(plan["set"])
    for kv in args.sets:
        k, _, v = kv.partition("=")
        try:
            sets[k] = json.loads(v)  # numbers and booleans as such (the summary records them)
        except json.JSONDecodeError:
            sets[k] = v
    work = Path(args.work)
    out = Path(args.out) if args.out else Path(os.environ.get("OUT", ".")) / "gpu_tables"
    if args.dry_run:
        for r in runs:
            print(" ".join(run_argv(r, sets, args.device, work / r["key"])))
        return 0
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    workers = args.workers or max(1, (os.cpu_count() or 2) - 2)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
        "OMP_NUM_THREADS": "1",
        "BAYESCRL_THREADS": "1",
        "MPLBACKEND": "Agg",
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",  # many JAX processes on one GPU, each allocating on use
        # one XLA compile per env kind: later processes load it (the step compiles for 10-60 s otherwise)
        "JAX_COMPILATION_CACHE_DIR": str((work / "jax_cache").resolve()),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "1",
    }
    meta = _meta(args, workers, sets, len(runs))
    results: dict[str, dict] = {}
    walls: dict[str, list[float]] = {}
    procs: dict[str, subprocess.Popen] = {}
    lock = threading.Lock()

    def write_summary() -> None:
        with lock:
            meta["elapsed_s"] = time.perf_counter() - t_start
            done = sum(r.get("rc") == 0 for r in results.values())
            meta["runs_done"] = done
            summary = {"meta": meta, "cells": cells(runs, results), "runs": results}
            (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))

    def job(run: dict) -> None:
        run_dir = work / run["key"]
        if (run_dir / "metrics.json").is_file():  # finished in an earlier call
            rec = {"rc": 0, "resumed": True, **run_record(run, run_dir)}
            _keep(run, run_dir, out, args.keep_jsonl)
            with lock:
                results[run["key"]] = rec
            return
        left = deadline - time.perf_counter()
        with lock:
            w = walls.get(run["task"])
        expect = max(w) if w else args.first_run_s
        if left < expect:
            with lock:
                why = f"{left:.0f} s left, a run takes ~{expect:.0f} s"
                results[run["key"]] = {"rc": None, "skipped": why}
            return
        run_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        argv = run_argv(run, sets, args.device, run_dir)
        log = (run_dir / "stderr.log").open("a")
        p = subprocess.Popen(argv, cwd=ROOT, env=env,
                             stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)  # fmt: skip
        with lock:
            procs[run["key"]] = p
        try:
            rc = p.wait(timeout=max(1.0, deadline - time.perf_counter()))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGTERM)  # the run's own process group (start_new_session)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            rc = 124
        log.close()
        wall = time.perf_counter() - t0
        rec = {"rc": rc, "wall_s": wall, **run_record(run, run_dir)}
        if "--resume" in argv:
            rec["resumed_from_checkpoint"] = True
        if rc not in (0, 124):
            rec["stderr_tail"] = (run_dir / "stderr.log").read_text()[-1500:]
        if rc == 0:
            _keep(run, run_dir, out, args.keep_jsonl)
        elif rc == 124:  # stopped at the deadline: its checkpoint, to resume in the next call
            _keep(run, run_dir, out, True, files=("checkpoint.pt", "run.json"))
        with lock:
            procs.pop(run["key"], None)
            results[run["key"]] = rec
            if rc == 0 and "--resume" not in argv:  # a resumed run's wall is only its last part
                walls.setdefault(run["task"], []).append(expected_wall(wall, rec))
        write_summary()
        print(f"{run['key']}: rc {rc}, {wall:.0f} s, return {rec.get('train_final_return')}", flush=True)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(job, runs))
    write_summary()
    done, el = meta["runs_done"], meta["elapsed_s"]
    print(f"{done} of {len(runs)} runs done in {el:.0f} s; wrote {out / 'summary.json'}")
    return 0


def _keep(run: dict, run_dir: Path, out: Path, jsonl: bool, files=("metrics.json",)) -> None:
    """Copy a run's result files (and, with ``jsonl``, its per-iteration records) to ``out/runs``."""
    dest = out / "runs" / run["key"]
    dest.mkdir(parents=True, exist_ok=True)
    for name in (*files, "metrics.jsonl") if jsonl else files:
        if (run_dir / name).is_file():
            shutil.copy2(run_dir / name, dest / name)


def _meta(args, workers: int, sets: dict, n_runs: int) -> dict:
    meta = {
        "plan": args.plan, "budget_s": args.budget, "workers": workers, "device": args.device,
        "set": sets, "runs_planned": n_runs, "cpu_count": os.cpu_count(),
        "python": platform.python_version(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }  # fmt: skip
    try:
        import torch

        meta["torch"] = torch.__version__
        if torch.cuda.is_available():
            meta["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:  # pragma: no cover
        pass
    try:
        import jax

        meta["jax"] = jax.__version__
    except ImportError:  # pragma: no cover
        pass
    return meta


if __name__ == "__main__":
    raise SystemExit(main())

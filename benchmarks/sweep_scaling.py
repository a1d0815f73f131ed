"""Scaling of ``bayescrl sweep``: runs per hour of an e-COP sweep at 1, 2, 4, ... workers (local Ray).

Each configuration runs the same sweep (``--runs`` seeds of e-COP on PointCircle, ``--steps`` env steps
each) into a fresh folder with ``bayescrl sweep --workers W`` and times it end to end (Ray start, validation,
runs, report). Efficiency at W workers = rate(W) / (W x rate(1)). Writes
``benchmarks/results/sweep/scaling.json`` after every configuration and ``scaling.png``.

    nice -n 10 .venv/bin/python benchmarks/sweep_scaling.py --runs 8 --workers 1 2          # 2 cores
    .venv/bin/python benchmarks/sweep_scaling.py --runs 40 --workers 1 2 4 8 16              # 16 cores
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).parent / "results" / "sweep"

SWEEP = """
name: "scaling: e-COP on PointCircle, {runs} seeds x {steps} steps"
command: train
grid: {{algo: [ecop], env: [bayescrl/PointCircle-v0], seed: {seeds}}}
args: {{total-steps: {steps}, cost-limit: 10}}
set: {{config.n_envs: 2, config.rollout_steps: 200, config.minibatch_size: 200, config.update_epochs: 5,
      config.eval_episodes: 1}}
"""


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=8)
    p.add_argument("--steps", type=int, default=4000)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--backend", default="ray", choices=["ray", "local"])
    p.add_argument("--name", default="scaling")
    p.add_argument("--machine", default=f"shared {os.cpu_count()}-core machine, other jobs running")
    p.add_argument("--replot", action="store_true", help="Only redraw the PNG from the JSON.")
    args = p.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.replot:
        res = json.loads((OUT / f"{args.name}.json").read_text())
        _plot(res["rows"], OUT / f"{args.name}.png", f"{res['runs']}-run e-COP sweep ({res['machine']})")
        return
    tmp = Path(tempfile.mkdtemp(prefix="sweep_scaling_"))
    sweep = tmp / "sweep.yaml"
    sweep.write_text(SWEEP.format(runs=args.runs, steps=args.steps, seeds=list(range(args.runs))))
    rows = []
    result = {
        "what": "runs per hour of one sweep, end to end (Ray start, validation, runs, report)",
        "runs": args.runs,
        "steps_per_run": args.steps,
        "backend": args.backend,
        "cpus": os.cpu_count(),
        "machine": args.machine,
        "sweep": sweep.read_text(),
        "rows": rows,
    }
    for w in args.workers:
        out = tmp / f"w{w}"
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "bayescrl", "sweep", str(sweep), "--out", str(out)]
        proc = subprocess.run(
            [*cmd, "--workers", str(w), "--backend", args.backend], capture_output=True, text=True
        )
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"sweep failed at {w} workers: {proc.stderr[-2000:]}")
        status = [json.loads(s.read_text()) for s in (out / "status").glob("*.json")]
        rate = args.runs / wall * 3600
        rows.append(
            {
                "workers": w,
                "wall_s": wall,
                "runs_per_hour": rate,
                "mean_run_s": sum(s["wall_s"] for s in status) / len(status),
                "loadavg_before": load0,
                "loadavg_after": os.getloadavg()[0],
            }
        )
        base = rows[0]["runs_per_hour"] / rows[0]["workers"]
        for r in rows:
            r["efficiency"] = r["runs_per_hour"] / (r["workers"] * base)
        print(
            f"{w} workers: {wall:.1f} s, {rate:.0f} runs/h, efficiency {rows[-1]['efficiency']:.2f}",
            flush=True,
        )
        (OUT / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")  # partial results
        shutil.rmtree(out, ignore_errors=True)
    _plot(rows, OUT / f"{args.name}.png", f"{args.runs}-run e-COP sweep ({args.machine})")
    shutil.rmtree(tmp, ignore_errors=True)


def _plot(rows: list[dict], path: Path, title: str) -> None:
    from bayescrl.utils.plotting import plt

    pl = plt()
    fig, ax = pl.subplots(figsize=(5.5, 3.8))
    ws = [r["workers"] for r in rows]
    ax.plot(ws, [r["runs_per_hour"] for r in rows], "o-", label="measured")
    ax.plot(ws, [rows[0]["runs_per_hour"] * w / rows[0]["workers"] for w in ws], "k--", lw=1, label="linear")
    for r in rows:
        ax.annotate(f"{r['efficiency']:.0%}", (r["workers"], r["runs_per_hour"]), fontsize=8)
    ax.set_xlabel("workers (runs at a time)")
    ax.set_ylabel("runs per hour")
    ax.set_title(title, fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    pl.close(fig)


if __name__ == "__main__":
    main()

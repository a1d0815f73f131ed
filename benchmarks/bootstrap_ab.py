"""The perturbed-MAP solver against an earlier version of itself: process CPU time and agreement.

Loads ``bayescrl/inference/bootstrap.py`` as it was at ``--ref`` (a git commit) next to the current one and
times ``perturbed_map`` (1,000 samples, p_offline = 0.5, the warmPref-PS posterior of
``posterior_speed.py``: d = 6, β = 10, λ = 100, K = 50 arms) for both, alternating, in one process and on
one torch thread. Process CPU time (minimum over ``--repeats``) is reported beside wall time because on a
shared machine the wall time of a short call mostly measures the other jobs. Also reported: Newton
iterations, the largest gradient norm (both must reach the tolerance 1e-6) and the largest difference
between the two solutions (the optimum is unique: differences are of the order of the tolerance).

    .venv/bin/python benchmarks/bootstrap_ab.py --ref 6c074b6 --cells 2000:0,2000:300,200:300,200:0,20:0
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from posterior_speed import make_model  # noqa: E402

from bayescrl.inference import bootstrap as current  # noqa: E402
from bayescrl.utils import set_torch_threads, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "results" / "core" / "bootstrap_ab.json"


def load_ref(ref: str):
    src = subprocess.run(
        ["git", "show", f"{ref}:bayescrl/inference/bootstrap.py"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "bootstrap_ref.py"
    path.write_bytes(src)
    spec = importlib.util.spec_from_file_location("bootstrap_ref", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bootstrap_ref"] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ref", required=True, help="git commit of the earlier solver")
    ap.add_argument("--cells", default="2000:0,2000:300,200:300", help="N:t list")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    set_torch_threads(1)
    ref = load_ref(args.ref)
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    report = {
        "machine": "shared 2-core CPU machine (other jobs running), 1 torch thread",
        "load_average_1min_at_start": os.getloadavg()[0],
        "ref": args.ref,
        "current": rev.stdout.strip(),
        "samples": args.samples,
        "cells": [],
    }
    for cell in args.cells.split(","):
        n_pref, t = (int(v) for v in cell.split(":"))
        problem = make_model(n_pref, t, argparse.Namespace(seed=args.seed)).problem
        runs: dict[str, dict] = {}
        for _ in range(args.repeats):
            for name, mod in (("ref", ref), ("current", current)):
                gen = torch.Generator().manual_seed(args.seed)
                c0, w0 = time.process_time(), time.perf_counter()
                res = mod.perturbed_map(problem, args.samples, p_offline=0.5, generator=gen)
                cpu, wall = time.process_time() - c0, time.perf_counter() - w0
                r = runs.setdefault(name, {"cpu": [], "wall": []})
                r["cpu"].append(cpu)
                r["wall"].append(wall)
                r.update(res=res, iters=res.iters, grad_norm_max=float(res.grad_norm.max()))
        a, b = runs["ref"], runs["current"]
        row = {
            "N": n_pref,
            "t": t,
            **{
                f"{name}_{k}": v
                for name, r in runs.items()
                for k, v in (
                    ("cpu_seconds_per_1000", min(r["cpu"]) / args.samples * 1000),
                    ("wall_seconds_per_1000", min(r["wall"]) / args.samples * 1000),
                    ("newton_iters", r["iters"]),
                    ("grad_norm_max", r["grad_norm_max"]),
                )
            },
            "cpu_speedup": min(a["cpu"]) / min(b["cpu"]),
            "max_abs_theta_difference": float((a["res"].theta - b["res"].theta).abs().max()),
        }
        report["cells"].append(row)
        print(
            f"N={n_pref} t={t}: CPU s/1k {row['ref_cpu_seconds_per_1000']:.3f} -> "
            f"{row['current_cpu_seconds_per_1000']:.3f} ({row['cpu_speedup']:.2f}x), "
            f"iters {a['iters']} -> {b['iters']}, max |dtheta| {row['max_abs_theta_difference']:.1e}",
            flush=True,
        )
    report["load_average_1min_at_end"] = os.getloadavg()[0]
    write_json(args.out, report)


if __name__ == "__main__":
    main()

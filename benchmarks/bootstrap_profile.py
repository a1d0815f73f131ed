"""Where the perturbed-MAP bootstrap's time goes (process CPU time, one torch thread).

For each cell of ``posterior_speed.py`` (d = 6, β = 10, λ = 100, K = 50 arms) it draws 1,000 samples with
``perturbed_map`` and splits the process CPU time into: the perturbation draw (of which the Bernoulli
weights ω), the plain-MAP warm start, the set-up of the batched solver (grouping of equal comparisons,
the per-sample group weights), the passes over the comparison terms (the likelihood work proper: logits,
softplus, sigmoid, the gradient and the Hessian's data blocks of all samples) and the rest of the Newton
iterations (the per-sample 6×6 / 12×12 solves, line search bookkeeping). Minimum of ``--repeats`` runs.

    .venv/bin/python benchmarks/bootstrap_profile.py --cells 2000:0,2000:300,200:300
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from posterior_speed import make_model  # noqa: E402

from bayescrl.inference import bootstrap as bs  # noqa: E402
from bayescrl.utils import set_torch_threads, write_json  # noqa: E402

OUT = Path(__file__).parent / "results" / "core" / "bootstrap_profile.json"


class Clock:
    """CPU time of wrapped calls, each net of the wrapped calls inside it (``absorb``: those are its own)."""

    def __init__(self):
        self.t: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.stack: list[float] = []  # time of wrapped calls nested in each open call
        self.absorbing = 0
        self.saved: list[tuple] = []

    def wrap(self, owner, name: str, key: str, absorb: bool = False):
        fn = getattr(owner, name)
        self.saved.append((owner, name, fn))

        def timed(*a, **k):
            if self.absorbing:
                return fn(*a, **k)
            self.stack.append(0.0)
            self.absorbing += absorb
            t0 = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                dt = time.process_time() - t0
                self.absorbing -= absorb
                nested = self.stack.pop()
                if self.stack:
                    self.stack[-1] += dt
                self.t[key] = self.t.get(key, 0.0) + dt - nested
                self.calls[key] = self.calls.get(key, 0) + 1

        setattr(owner, name, timed)

    def restore(self):
        for owner, name, fn in reversed(self.saved):
            setattr(owner, name, fn)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", default="2000:0,2000:300,200:300", help="N:t list")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    set_torch_threads(1)
    report = {
        "machine": "shared 2-core CPU machine (other jobs running), 1 torch thread",
        "load_average_1min_at_start": os.getloadavg()[0],
        "samples": args.samples,
        "cells": [],
    }
    for cell in args.cells.split(","):
        n_pref, t = (int(v) for v in cell.split(":"))
        problem = make_model(n_pref, t, argparse.Namespace(seed=args.seed)).problem
        best = None
        for _ in range(args.repeats):
            clock = Clock()
            clock.wrap(bs, "bernoulli", "bernoulli_weights")
            clock.wrap(bs, "sample_perturbation", "perturbation_draw_other")
            clock.wrap(bs, "map_estimate", "plain_map_warm_start", absorb=True)
            clock.wrap(bs._NewtonCG, "__init__", "solver_setup")
            clock.wrap(bs._NewtonCG, "_data_terms", "comparison_term_passes")
            clock.wrap(bs._NewtonCG, "solve", "newton_rest")
            gen = torch.Generator().manual_seed(args.seed)
            t0 = time.process_time()
            res = bs.perturbed_map(problem, args.samples, p_offline=0.5, generator=gen)
            total = time.process_time() - t0
            clock.restore()
            parts = {"total": total, **clock.t}
            parts["other"] = total - sum(clock.t.values())
            if best is None or total < best["parts"]["total"]:
                best = {
                    "parts": parts,
                    "passes": clock.calls.get("comparison_term_passes", 0),
                    "newton_iters": res.iters,
                }
        per_k = {k: v / args.samples * 1000 for k, v in best["parts"].items()}
        row = {
            "N": n_pref,
            "t": t,
            "cpu_seconds_per_1000": per_k,
            "share": {k: v / best["parts"]["total"] for k, v in best["parts"].items() if k != "total"},
            "comparison_term_passes": best["passes"],
            "newton_iters": best["newton_iters"],
        }
        report["cells"].append(row)
        print(
            f"N={n_pref} t={t}: {per_k['total']:.3f} CPU s/1k; "
            + ", ".join(f"{k} {v:.0%}" for k, v in row["share"].items()),
            flush=True,
        )
    report["load_average_1min_at_end"] = os.getloadavg()[0]
    write_json(args.out, report)


if __name__ == "__main__":
    main()

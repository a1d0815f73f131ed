"""Bandit best-arm identification version of PSPL (appendix `Results for Bandits`): simple regret vs K for
offline data sizes N, batched over seeds. Writes ``benchmarks/results/pspl/bandit/{results.json,
simple_regret.png}``.

    .venv/bin/python benchmarks/pspl_bandit.py --seeds 10 --K 30
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from bayescrl.pbrl.bandit import run_bandit_bai
from bayescrl.utils import set_torch_threads, write_json
from bayescrl.utils.plotting import plot_mean_sd

OUT = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "pspl" / "bandit"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--K", type=int, default=30)
    ap.add_argument("--arms", type=int, default=20)
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--beta", type=float, default=10.0)
    ap.add_argument("--lam", type=float, default=100.0)
    args = ap.parse_args()
    set_torch_threads()
    arms = torch.randn(args.arms, args.d, generator=torch.Generator().manual_seed(0))
    res, curves = {"args": vars(args), "runs": {}}, {}
    for N in (0, 20, 100, 500):
        t0 = time.perf_counter()
        sr = run_bandit_bai(arms, seeds=args.seeds, N=N, K=args.K, beta=args.beta, lam=args.lam)[
            "simple_regret"
        ]
        mean, sd = sr.mean(0), sr.std(0, unbiased=False)
        res["runs"][str(N)] = {
            "simple_regret_curve_mean": mean.tolist(),
            "simple_regret_curve_std": sd.tolist(),
            "simple_regret_k0": float(mean[0]),
            "final_simple_regret_mean": float(mean[-1]),
            "wall_time_s": time.perf_counter() - t0,
        }
        curves[f"N={N}"] = (mean.tolist(), sd.tolist())
    write_json(OUT / "results.json", res)
    plot_mean_sd(
        curves,
        OUT / "simple_regret.png",
        "online rounds k",
        "simple regret",
        title="bandit PSPL (best-arm identification)",
        x=list(range(args.K + 1)),
    )
    for N, r in res["runs"].items():
        print(f"N={N}: k=0 {r['simple_regret_k0']:.4f}  k=K {r['final_simple_regret_mean']:.4f}")


if __name__ == "__main__":
    main()

"""Tabular ACPO vs the LP optimum over stationary occupancy measures (average-reward ergodic CMDPs).

    .venv/bin/python benchmarks/acpo_tabular.py --cmdps 10

For ``--cmdps`` random ergodic CMDPs (5 states, 3 actions, one binding constraint;
``bayescrl.envs.make_ergodic_cmdp``) runs softmax ACPO with exact estimates (oracle) and with sampled
estimates (2500 steps/iteration, average-reward GAE), and reports ``J(π_K)/J*`` and ``J_C(π_K)/l``.
Writes ``benchmarks/results/acpo/tabular.json`` and ``tabular_{rewards,costs}.png`` (mean ± 1 sd over CMDPs).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from bayescrl.constrained.acpo_tabular import TabularACPOConfig, run_tabular_acpo
from bayescrl.envs import make_ergodic_cmdp
from bayescrl.utils.io import write_json
from bayescrl.utils.plotting import plot_mean_sd
from bayescrl.utils.seeding import set_torch_threads


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cmdps", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--delta", type=float, default=0.01)
    ap.add_argument("--out", default="benchmarks/results/acpo")
    args = ap.parse_args(argv)
    set_torch_threads(1)
    out = Path(args.out)
    summary: dict = {"args": vars(args), "modes": {}}
    curves_r, curves_c = {}, {}
    for mode in ("exact", "sampled"):
        ratios, viol, rr, cc = [], [], [], []
        t0 = time.perf_counter()
        for seed in range(args.cmdps):
            cmdp = make_ergodic_cmdp(num_states=5, num_actions=3, seed=seed)
            lp = cmdp.solve()
            res = run_tabular_acpo(
                cmdp, TabularACPOConfig(iterations=args.iterations, mode=mode, delta=args.delta, seed=seed)
            )
            r = np.asarray(res.rewards) / lp.value
            c = np.asarray(res.costs)[:, 0] / cmdp.limits[0]
            rr.append(r)
            cc.append(c)
            ratios.append(float(r[-20:].mean()))
            viol.append(float(c[-20:].mean()))
        rr_a, cc_a = np.array(rr), np.array(cc)
        curves_r[mode] = (rr_a.mean(0), rr_a.std(0))
        curves_c[mode] = (cc_a.mean(0), cc_a.std(0))
        summary["modes"][mode] = {
            "reward_over_lp_last20": ratios,
            "cost_over_limit_last20": viol,
            "reward_over_lp_mean": float(np.mean(ratios)),
            "reward_over_lp_min": float(np.min(ratios)),
            "cost_over_limit_mean": float(np.mean(viol)),
            "cost_over_limit_max": float(np.max(viol)),
            "wall_s": time.perf_counter() - t0,
        }
        m = summary["modes"][mode]
        print(
            f"{mode:8s} J/J* mean {m['reward_over_lp_mean']:.4f} min {m['reward_over_lp_min']:.4f} | "
            f"J_C/l mean {m['cost_over_limit_mean']:.4f} max {m['cost_over_limit_max']:.4f} "
            f"({m['wall_s']:.0f} s)"
        )
    plot_mean_sd(
        curves_r,
        out / "tabular_rewards.png",
        "iteration",
        "J(π_k) / J* (LP)",
        "Tabular ACPO: reward / LP optimum",
        hline=1.0,
        hline_label="LP optimum",
    )
    plot_mean_sd(
        curves_c,
        out / "tabular_costs.png",
        "iteration",
        "J_C(π_k) / l",
        "Tabular ACPO: cost / limit",
        hline=1.0,
        hline_label="limit",
    )
    write_json(out / "tabular.json", summary)
    return summary


if __name__ == "__main__":
    main()

"""Recovery parameter t on tabular CMDPs that start infeasible (exact estimates; complements
``acpo_recovery.py``, whose deep runs rarely enter the recovery branch at our budget).

    .venv/bin/python benchmarks/acpo_recovery_tabular.py --cmdps 10

For each t ∈ {0, 0.25, 0.5, 0.75, 1} and ``--cmdps`` ergodic CMDPs with a tight limit (tightness 0.05: the
uniform start violates it), runs softmax ACPO with exact g, a, H, c and records the iterations until
``J_C ≤ l`` (feasibility), the number of recovery steps and ``J/J*`` after ``--iterations``.  Writes
``benchmarks/results/acpo/recovery_tabular.json`` and ``recovery_tabular_{rewards,costs}.png``.
"""

from __future__ import annotations

import argparse
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
    ap.add_argument("--iterations", type=int, default=80)
    ap.add_argument("--delta", type=float, default=0.01)
    ap.add_argument("--out", default="benchmarks/results/acpo")
    args = ap.parse_args(argv)
    set_torch_threads(1)
    out = Path(args.out)
    cmdps = [
        make_ergodic_cmdp(num_states=5, num_actions=3, seed=s, tightness=0.05) for s in range(args.cmdps)
    ]
    opts = [c.solve().value for c in cmdps]
    summary: dict = {"args": vars(args), "t": {}}
    cr, cc = {}, {}
    for t in (0.0, 0.25, 0.5, 0.75, 1.0):
        rr, cs, to_feas, n_rec, stuck = [], [], [], [], 0
        for cmdp, opt in zip(cmdps, opts, strict=True):
            res = run_tabular_acpo(
                cmdp, TabularACPOConfig(iterations=args.iterations, delta=args.delta, recovery_t=t)
            )
            r = np.asarray(res.rewards) / opt
            c = np.asarray(res.costs)[:, 0] / cmdp.limits[0]
            rr.append(r)
            cs.append(c)
            feas = np.flatnonzero(c <= 1 + 1e-3)
            to_feas.append(int(feas[0]) if len(feas) else args.iterations + 1)
            n_rec.append(res.branch.count("recovery"))
            stuck += int(not len(feas))
        rr_a, cs_a = np.array(rr), np.array(cs)
        key = f"t={t:g}"
        cr[key], cc[key] = (rr_a.mean(0), rr_a.std(0)), (cs_a.mean(0), cs_a.std(0))
        summary["t"][key] = {
            "iters_to_feasible_mean": float(np.mean(to_feas)),
            "iters_to_feasible": to_feas,
            "recovery_steps_mean": float(np.mean(n_rec)),
            "never_feasible": stuck,
            "final_reward_over_lp_mean": float(rr_a[:, -1].mean()),
            "final_cost_over_limit_max": float(cs_a[:, -1].max()),
        }
        s = summary["t"][key]
        print(
            f"{key:7s} iters to feasible {s['iters_to_feasible_mean']:.1f}  recoveries "
            f"{s['recovery_steps_mean']:.1f}  never feasible {stuck}/{args.cmdps}  final J/J* "
            f"{s['final_reward_over_lp_mean']:.4f}  max J_C/l {s['final_cost_over_limit_max']:.4f}"
        )
    plot_mean_sd(
        cr,
        out / "recovery_tabular_rewards.png",
        "iteration",
        "J(π_k) / J*",
        "Tabular ACPO from an infeasible start: reward",
        hline=1.0,
        hline_label="LP optimum",
    )
    plot_mean_sd(
        cc,
        out / "recovery_tabular_costs.png",
        "iteration",
        "J_C(π_k) / l",
        "Tabular ACPO from an infeasible start: cost",
        hline=1.0,
        hline_label="limit",
    )
    write_json(out / "recovery_tabular.json", summary)
    return summary


if __name__ == "__main__":
    main()

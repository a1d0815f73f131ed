"""Recovery-regime study: ACPO with t ∈ {0, 0.25, 0.5, 0.75, 1} (Eq. `acpo_recovery`, figures
`hyperparam_t_main` / `hyperparam_t_appendix`, chapter `acpo`).

    .venv/bin/python benchmarks/acpo_recovery.py --task PointCircle --steps 25000 --seeds 5 --workers 2

Writes ``benchmarks/results/acpo/recovery_<task>.json`` and ``recovery_<task>_{rewards,costs}.png``. The seed
reports that t = 0.75 and t = 1 perform best.  The study is only informative where recovery steps happen:
the JSON records the fraction of iterations that took the recovery branch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from acpo_common import TASKS, aggregate, algo_config, plot_group, run_all  # noqa: E402

from bayescrl.utils.io import write_json  # noqa: E402

T_VALUES = (0.0, 0.25, 0.5, 0.75, 1.0)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="PointCircle", choices=list(TASKS))
    ap.add_argument("--t", nargs="+", type=float, default=list(T_VALUES))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=25_000)
    ap.add_argument("--delta", type=float, default=1e-2)
    ap.add_argument("--eval-every", type=int, default=1000)
    ap.add_argument("--eval-traj", type=int, default=10)
    ap.add_argument("--eval-steps", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default="benchmarks/results/acpo")
    args = ap.parse_args(argv)
    out = Path(args.out)
    jobs = []
    for t in args.t:
        for seed in range(args.seeds):
            tag = f"recovery_{args.task}_t{t:g}_s{seed}_n{args.steps}_d{args.delta:g}"
            jobs.append(
                {
                    "task": args.task,
                    "algo": "acpo",
                    "seed": seed,
                    "steps": args.steps,
                    "t": t,
                    "config": algo_config("acpo", args.delta, recovery_t=t),
                    "eval_every": args.eval_every,
                    "eval_traj": args.eval_traj,
                    "eval_steps": args.eval_steps,
                    "delta": args.delta,
                    "path": str(out / "runs" / f"{tag}.json"),
                }
            )
    records = run_all(jobs, args.workers)
    for r in records:
        r["t_label"] = f"t={r['t']:g}"
    agg = aggregate(records, "t_label")
    for name, a in agg.items():
        rs = [r for r in records if r["t_label"] == name]
        branches = [b for r in rs for b in r["branches"]]
        a["recovery_fraction"] = branches.count("recovery") / max(len(branches), 1)
    limit = TASKS[args.task]["limit"]
    plots = plot_group(agg, limit, out / f"recovery_{args.task}", f"{args.task}: recovery parameter t")
    summary = {"args": vars(args), "limit_per_step": limit, "t": agg, "plots": [str(p) for p in plots]}
    write_json(out / f"recovery_{args.task}.json", summary)
    for name, a in agg.items():
        print(
            f"{name:7s} reward {a['final_reward_mean']:.4f} ± {a['final_reward_sd']:.4f}  cost "
            f"{a['final_cost_mean']:.5f} ± {a['final_cost_sd']:.5f}  recovery {a['recovery_fraction']:.2f}"
        )
    return summary


if __name__ == "__main__":
    main()

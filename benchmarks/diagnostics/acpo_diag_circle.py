"""Per-iteration diagnostics of ACPO on Point-Circle: Ĵ_C, branch, λ*, μ*, KL, linearised cost change.

    .venv/bin/python benchmarks/diagnostics/acpo_diag_circle.py --steps 50000 --delta 0.01 --seed 0

Prints one line per iteration and, at the end, the protocol evaluation of the deterministic and the
stochastic policy (10 × 10³ steps), to separate "constraint enforced on the stochastic policy" from
"constraint not enforced".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/acpo_common.py

from acpo_common import TASKS, algo_config  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    from bayescrl.constrained.acpo_eval import average_reward_evaluation
    from bayescrl.constrained.registry import get_algorithm
    from bayescrl.utils.seeding import set_torch_threads

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=50_000)
    ap.add_argument("--delta", type=float, default=1e-2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", nargs="*", default=[], help="extra ACPOConfig key=value (json values)")
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--eval-every-iters",
        type=int,
        default=0,
        help="also evaluate the deterministic and the stochastic policy (5 × 10³ steps) every N iterations",
    )
    args = ap.parse_args(argv)
    set_torch_threads(1)
    task = TASKS["PointCircle"]
    cfg = algo_config("acpo", args.delta)
    for kv in args.set:
        k, v = kv.split("=", 1)
        try:
            cfg[k] = json.loads(v)
        except json.JSONDecodeError:
            cfg[k] = v
    algo = get_algorithm("acpo")(task["env"], [task["limit"]], args.seed, cfg)
    rows = []

    def cb(a, rec):
        row = {
            k: rec.get(k)
            for k in (
                "iteration",
                "episodes",
                "avg_costs",
                "ep_costs",
                "branch",
                "lam",
                "mu",
                "backtracks",
                "kl",
                "lin_dc",
                "surr_dc",
                "c",
                "avg_reward",
                "batch_mean_costs",
                "ep_cost_sd",
            )
        }
        row["log_std"] = a.policy.log_std.detach().cpu().tolist()
        if args.eval_every_iters and int(row["iteration"]) % args.eval_every_iters == 0:
            d = average_reward_evaluation(a, 5, 1000)
            s_ = average_reward_evaluation(a, 5, 1000, deterministic=False)
            row["eval"] = {
                "det_reward": d["avg_reward"],
                "det_cost": float(d["avg_costs"][0]),
                "sto_reward": s_["avg_reward"],
                "sto_cost": float(s_["avg_costs"][0]),
            }
            print(
                f"  eval det R {d['avg_reward']:.4f} C {row['eval']['det_cost']:.4f}  "
                f"sto R {s_['avg_reward']:.4f} C {row['eval']['sto_cost']:.4f}  log_std {row['log_std']}"
            )
        rows.append(row)
        print(
            f"it {int(row['iteration']):3d} ep {int(row['episodes']):3d} JC {row['avg_costs'][0]:.4f} "
            f"(batch mean {row['batch_mean_costs'][0]:.4f}, ep sd {row['ep_cost_sd'][0]:.1f}) "
            f"R {row['avg_reward']:.4f} br {row['branch']:8s} lam {row.get('lam') or 0:9.3g} "
            f"mu {(row['mu'] or [0])[0]:9.3g} j {int(row['backtracks']):3d} kl {row['kl']:.2e} "
            f"lin_dc {row['lin_dc'][0]:+.4f} surr_dc {row['surr_dc'][0]:+.4f}",
            flush=True,
        )

    try:
        algo.learn(args.steps, progress=False, callback=cb)
        det = average_reward_evaluation(algo, 10, 1000)
        sto = average_reward_evaluation(algo, 10, 1000, deterministic=False)
    finally:
        algo.close()
    res = {
        "args": vars(args),
        "rows": rows,
        "det": {"reward": det["avg_reward"], "cost": float(det["avg_costs"][0])},
        "sto": {"reward": sto["avg_reward"], "cost": float(sto["avg_costs"][0])},
    }
    print("deterministic", res["det"], "stochastic", res["sto"])
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()

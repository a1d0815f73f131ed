"""ACPO vs CPO (γ = 0.999) vs Lagrangian ATRPO (and PCPO, PPO-Lagrangian with ``--algos``) on
Point-Circle, Point-Gather, Ant-Circle and Ant-Gather (figure `rewards_costs_comparison` /
`appendix_rewards_costs_comparison`, chapter `acpo`).

    .venv/bin/python benchmarks/acpo_compare.py --steps 25000 --seeds 5 --workers 2

Writes ``benchmarks/results/acpo/compare.json`` (per algorithm and task: learning curves mean ± sd over
seeds, final protocol average reward/cost) and ``compare_<task>_{rewards,costs}.png`` (dashed cost limit).
Per-run files under ``runs/`` make the script resumable.  The headline number is the relative gain of ACPO
over CPO in final average reward (the seed reports +52.5 % on Point-Gather after 10⁵ steps).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from acpo_common import ALGOS, DEFAULT_TASKS, TASKS, aggregate, algo_config, plot_group, run_all  # noqa: E402

from bayescrl.utils.io import write_json  # noqa: E402


def parse_acpo_set(items: list[str]) -> dict:
    """``--acpo-set KEY=VALUE ...`` as a mapping (JSON values, else text)."""
    extra = {}
    for kv in items:
        key, _, val = kv.partition("=")
        try:
            extra[key] = json.loads(val)
        except json.JSONDecodeError:
            extra[key] = val
    return extra


def run_config(
    algo: str,
    delta: float,
    error_correction: float | None = None,
    acpo_extra: dict | None = None,
    n_envs: int | None = None,
    cost_estimate: str | None = None,
) -> dict:
    """A run's algorithm settings from the script's options (``benchmarks/to_sweep.py`` checks converted
    studies against sweep files with it)."""
    return {
        **algo_config(algo, delta),
        **({"error_correction": error_correction} if algo == "acpo" and error_correction else {}),
        **((acpo_extra or {}) if algo == "acpo" else {}),
        **({"n_envs": n_envs} if n_envs else {}),
        **({"cost_estimate": cost_estimate} if algo == "acpo" and cost_estimate else {}),
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS), choices=list(TASKS))
    ap.add_argument("--algos", nargs="+", default=["acpo", "cpo", "atrpo"], choices=list(ALGOS))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument(
        "--seed-start", type=int, default=0, help="first seed (runs seed_start .. seed_start + seeds - 1)"
    )
    ap.add_argument("--steps", type=int, default=25_000, help="env steps per run (seed: 1e5)")
    ap.add_argument("--delta", type=float, default=1e-2, help="trust region (table: 1e-4; see docs/acpo.md)")
    ap.add_argument("--eval-every", type=int, default=1000)
    ap.add_argument("--eval-traj", type=int, default=10)
    ap.add_argument("--eval-steps", type=int, default=1000)
    ap.add_argument("--final-traj", type=int, default=10, help="final protocol: trajectories")
    ap.add_argument("--final-steps", type=int, default=1000, help="final protocol: steps per trajectory")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--existing-only",
        action="store_true",
        help="summarise the run files already written (an interrupted study) without training",
    )
    ap.add_argument("--out", default="benchmarks/results/acpo")
    ap.add_argument(
        "--n-envs", type=int, default=None, help="envs per batch (default 5; batch = n_envs × 500)"
    )
    ap.add_argument(
        "--cost-estimate",
        choices=["phase", "batch"],
        default=None,
        help="ACPO's J_C estimate (default: ACPOConfig's 'phase'; 'batch' = plain batch mean, the old one)",
    )
    ap.add_argument(
        "--error-correction",
        type=float,
        default=None,
        help="ACPO's model-error correction rate (ACPOConfig.error_correction; default 0 = off, the text)",
    )
    ap.add_argument(
        "--acpo-set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="extra ACPOConfig entries for ACPO runs (JSON values), e.g. log_std_init=-0.5",
    )
    args = ap.parse_args(argv)
    acpo_extra = parse_acpo_set(args.acpo_set)
    out = Path(args.out)
    jobs = []
    # seed-major order: an interrupted study has every algorithm on its first seeds (runs resume per file)
    for seed in range(args.seed_start, args.seed_start + args.seeds):
        for task in args.tasks:
            for algo in args.algos:
                tag = f"compare_{task}_{algo}_s{seed}_n{args.steps}_d{args.delta:g}"
                if algo == "acpo" and args.error_correction:
                    tag += f"_ec{args.error_correction:g}"
                if algo == "acpo" and acpo_extra:
                    tag += "_" + "_".join(f"{k}{v}" for k, v in sorted(acpo_extra.items()))
                jobs.append(
                    {
                        "task": task,
                        "algo": algo,
                        "seed": seed,
                        "steps": args.steps,
                        "config": run_config(
                            algo,
                            args.delta,
                            args.error_correction,
                            acpo_extra,
                            args.n_envs,
                            args.cost_estimate,
                        ),
                        "eval_every": args.eval_every,
                        "eval_traj": args.eval_traj,
                        "eval_steps": args.eval_steps,
                        "final_traj": args.final_traj,
                        "final_steps": args.final_steps,
                        "delta": args.delta,
                        "path": str(out / "runs" / f"{tag}.json"),
                    }
                )
    if args.existing_only:
        jobs = [j for j in jobs if Path(j["path"]).exists()]
        args.tasks = [t for t in args.tasks if any(j["task"] == t for j in jobs)]
    records = run_all(jobs, args.workers)
    summary: dict = {"args": vars(args), "tasks": {}}
    for task in args.tasks:
        recs = [r for r in records if r["task"] == task]
        agg = aggregate(recs, "algo")
        limit = TASKS[task]["limit"]
        res = {"limit_per_step": limit, "algos": agg}
        if "acpo" in agg and "cpo" in agg and agg["cpo"]["final_reward_mean"] != 0:
            res["acpo_gain_over_cpo_pct"] = 100 * (
                agg["acpo"]["final_reward_mean"] / agg["cpo"]["final_reward_mean"] - 1
            )
        for base in ("pcpo", "ppo-lag"):
            if "acpo" in agg and base in agg and agg[base]["final_reward_mean"] != 0:
                res[f"acpo_gain_over_{base}_pct"] = 100 * (
                    agg["acpo"]["final_reward_mean"] / agg[base]["final_reward_mean"] - 1
                )
        if "acpo" in agg and "atrpo" in agg and agg["atrpo"]["final_reward_mean"] != 0:
            res["acpo_gain_over_atrpo_pct"] = 100 * (
                agg["acpo"]["final_reward_mean"] / agg["atrpo"]["final_reward_mean"] - 1
            )
        res["plots"] = [str(p) for p in plot_group(agg, limit, out / f"compare_{task}", task)]
        summary["tasks"][task] = res
        print(f"{task} (limit {limit:g}/step, {args.steps} steps, {args.seeds} seeds):")
        for name, a in agg.items():
            print(
                f"  {name:6s} reward {a['final_reward_mean']:.4f} ± {a['final_reward_sd']:.4f}  "
                f"cost {a['final_cost_mean']:.5f} ± {a['final_cost_sd']:.5f}"
            )
    write_json(out / "compare.json", summary)
    return summary


if __name__ == "__main__":
    main()

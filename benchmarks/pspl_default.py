"""PSPL default benchmark (figure `simple-cum-regrets`): all agents on RiverSwim and MountainCar.

Writes ``benchmarks/results/pspl/<config name>/{results.json, simple_regret.png, cumulative_regret.png}``
and ``benchmarks/results/pspl/default_summary.json`` with the must-hold checks (PSPL agents end with lower
mean simple regret than dps, lpbrl, dpo, ipo), the paired per-seed comparisons behind them and wall times.

    .venv/bin/python benchmarks/pspl_default.py --env riverswim --seeds 5
    .venv/bin/python benchmarks/pspl_default.py --env mountaincar --seeds 5

Every agent of seed ``b`` sees the same rater and offline data set D0, so the comparisons are paired: per
PSPL agent and baseline, the per-seed difference of final simple regrets (PSPL − baseline; negative: PSPL
ends lower) with its mean and 95 % t-interval, the seeds on which PSPL ends lower, and the two-sided
Wilcoxon signed-rank p-value. ``--results DIR`` reads the ``results.json`` of a finished run instead of
running (for example ``bayescrl pspl examples/pspl/riverswim_default.yaml --seeds 20 --out DIR``) and stores
its summary under ``--key`` (default ``<env>_<seeds>seeds``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bayescrl.pbrl.experiment import run_experiment
from bayescrl.utils import apply_overrides, load_yaml, set_torch_threads, write_json
from bayescrl.utils.spread import paired

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "pspl"
PSPL_AGENTS = ("pspl", "pspl-bootstrap")
BASELINES = ("dps", "lpbrl", "dpo", "ipo")


def paired_vs_baselines(agents: dict) -> dict:
    """Per PSPL agent and baseline: the per-seed differences of final simple regret (PSPL − baseline) as
    mean, 95 % t-interval and n, the seeds on which the PSPL agent ends lower, and the two-sided Wilcoxon
    signed-rank p-value (None with fewer than two seeds or no nonzero difference)."""
    out = {}
    for p in (a for a in PSPL_AGENTS if a in agents):
        for b in (a for a in BASELINES if a in agents):
            pr = paired(agents[p]["final_simple_regret_per_seed"], agents[b]["final_simple_regret_per_seed"])
            out[f"{p} - {b}"] = {
                "mean": pr.spread.mean,
                "ci95": list(pr.spread.ci95) if pr.spread.ci95 else None,
                "n": pr.spread.n,
                "pspl_lower": pr.below,
                "wilcoxon_p": pr.wilcoxon_p,
            }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--env", choices=["riverswim", "mountaincar"], required=True)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--results", type=Path, help="summarise a finished run's results.json, no run")
    ap.add_argument("--key", help="the summary's key (default: ENV, or ENV_<seeds>seeds with --results)")
    args = ap.parse_args()
    set_torch_threads()
    if args.results is not None:
        res = json.loads((args.results / "results.json").read_text())
        args.seeds = len(res["seeds"]) if isinstance(res["seeds"], list) else int(res["seeds"])
    else:
        cfg = load_yaml(ROOT / "examples" / "pspl" / f"{args.env}_default.yaml")
        cfg = apply_overrides(cfg, args.overrides)
        res = run_experiment(cfg, args.seeds, OUT / f"{args.env}_default", progress=args.progress)
    key = args.key or (f"{args.env}_{args.seeds}seeds" if args.results is not None else args.env)
    ag = res["agents"]
    final = {a: round(r["final_simple_regret_mean"], 4) for a, r in ag.items()}
    checks = {
        f"{p} < {b}": ag[p]["final_simple_regret_mean"] < ag[b]["final_simple_regret_mean"]
        for p in PSPL_AGENTS
        if p in ag
        for b in BASELINES
        if b in ag
    }
    summary_path = OUT / "default_summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    summary[key] = {
        "results": str((args.results or OUT / f"{args.env}_default").resolve().relative_to(ROOT)),
        "seeds": args.seeds,
        "K": res["config"]["K"],
        "overrides": None if args.results is not None else args.overrides,
        "optimal_value": res["optimal_value"],
        "final_simple_regret_mean": final,
        "final_simple_regret_std": {a: round(r["final_simple_regret_std"], 4) for a, r in ag.items()},
        "final_cumulative_regret_mean": {
            a: (round(r["cumulative_regret_mean"][-1], 2) if r["cumulative_regret_mean"] else None)
            for a, r in ag.items()
        },
        "wall_time_s": {a: round(r["wall_time_s"], 1) for a, r in ag.items()},
        "total_wall_time_s": round(res["total_wall_time_s"], 1),
        "checks": checks,
        "all_checks_pass": all(checks.values()),
        "paired": paired_vs_baselines(ag),
        "note": "wall times on a shared 2-core machine (8 concurrent engineers), 1 torch thread",
    }
    write_json(summary_path, summary)
    print(json.dumps(summary[key], indent=1))


if __name__ == "__main__":
    main()

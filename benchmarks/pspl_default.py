"""PSPL default benchmark (figure `simple-cum-regrets`): all agents on RiverSwim and MountainCar.

Writes ``benchmarks/results/pspl/<config name>/{results.json, simple_regret.png, cumulative_regret.png}``
and ``benchmarks/results/pspl/default_summary.json`` with the must-hold checks (PSPL agents end with lower
simple regret than dps, lpbrl, dpo, ipo) and wall times.

    .venv/bin/python benchmarks/pspl_default.py --env riverswim --seeds 5
    .venv/bin/python benchmarks/pspl_default.py --env mountaincar --seeds 5
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bayescrl.pbrl.experiment import run_experiment
from bayescrl.utils import apply_overrides, load_yaml, set_torch_threads, write_json

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "pspl"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--env", choices=["riverswim", "mountaincar"], required=True)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args()
    set_torch_threads()
    cfg = apply_overrides(load_yaml(ROOT / "examples" / "pspl" / f"{args.env}_default.yaml"), args.overrides)
    res = run_experiment(cfg, args.seeds, OUT / f"{args.env}_default", progress=args.progress)
    ag = res["agents"]
    final = {a: round(r["final_simple_regret_mean"], 4) for a, r in ag.items()}
    baselines = [a for a in ("dps", "lpbrl", "dpo", "ipo") if a in ag]
    checks = {
        f"{p} < {b}": ag[p]["final_simple_regret_mean"] < ag[b]["final_simple_regret_mean"]
        for p in ("pspl", "pspl-bootstrap")
        if p in ag
        for b in baselines
    }
    summary_path = OUT / "default_summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    summary[args.env] = {
        "seeds": args.seeds,
        "K": res["config"]["K"],
        "overrides": args.overrides,
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
        "note": "wall times on a shared 2-core machine (8 concurrent engineers), 1 torch thread",
    }
    write_json(summary_path, summary)
    print(json.dumps(summary[args.env], indent=1))


if __name__ == "__main__":
    main()

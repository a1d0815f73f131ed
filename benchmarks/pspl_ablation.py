"""PSPL sweeps (figures `main_ablation`, `more_ablation`, β estimation): one run per sweep value.

For every config name given (files ``examples/pspl/<name>.yaml``) writes
``benchmarks/results/pspl/<name>/{results.json, sweep_<agent>.png}`` and adds to
``benchmarks/results/pspl/ablation_summary.json``: per sweep value the simple regret at k = 0 (offline
only), the final simple regret and the mean simple regret over episodes (area under the curve / (K+1)),
mean over seeds, and between consecutive sweep values the paired per-seed difference of final simple
regrets (next value − this one; seed b of every value draws from the same stream): its mean, the seeds on
which the next value ends lower, and the two-sided Wilcoxon signed-rank p-value (``paired_next``); with
several agents, the same for the first agent against each other one at every value (``paired_agents``).

    .venv/bin/python benchmarks/pspl_ablation.py riverswim_ablation_lambda riverswim_ablation_beta \
        riverswim_ablation_N --seeds 5
    .venv/bin/python benchmarks/pspl_ablation.py mountaincar_ablation_lambda --seeds 3 --set K=20

``--suffix _20seeds`` writes (and keys the summary) as ``<name>_20seeds``; ``--no-run`` summarises the
``results.json`` already there (a run of ``bayescrl pspl examples/pspl/<name>.yaml --out DIR``).
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np

from bayescrl.pbrl.experiment import run_experiment
from bayescrl.utils import apply_overrides, load_yaml, set_torch_threads, write_json
from bayescrl.utils.spread import paired

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "pspl"


def summarise(res: dict) -> dict:
    sw = res["sweep"]
    rows = {}
    for run in sw["runs"]:
        for agent, r in run["agents"].items():
            curve = r["simple_regret_curve_mean"]
            rows.setdefault(agent, []).append(
                {
                    "value": run["value"],
                    "simple_regret_k0": round(curve[0], 4),
                    "final_simple_regret_mean": round(r["final_simple_regret_mean"], 4),
                    "final_simple_regret_std": round(r["final_simple_regret_std"], 4),
                    "mean_simple_regret_over_k": round(float(np.mean(curve)), 4),
                    **(
                        {"beta_hat_mean": round(float(np.mean(run["model"]["beta_hat"])), 3)}
                        if "beta_hat" in run["model"]
                        else {}
                    ),
                }
            )
    return {
        "key": sw["key"],
        "agents": rows,
        "paired_next": paired_next(sw),
        "paired_agents": paired_agents(sw),
    }


def paired_agents(sweep: dict) -> dict:
    """Per sweep value, the first agent against each other one on the same seeds: the per-seed differences
    of final simple regret (first − other): ``mean``, ``first_lower`` (seeds on which the first agent ends
    lower), ``n`` and the two-sided Wilcoxon ``wilcoxon_p``; empty for a one-agent sweep."""
    out: dict = {}
    for run in sweep["runs"]:
        (first, r0), *others = run["agents"].items()
        for other, r in others:
            key = "final_simple_regret_per_seed"
            pr = paired(r0[key], r[key])
            out.setdefault(str(run["value"]), {})[f"{first} - {other}"] = {
                "mean": pr.spread.mean,
                "first_lower": pr.below,
                "n": pr.spread.n,
                "wilcoxon_p": pr.wilcoxon_p,
            }
    return out


def paired_next(sweep: dict) -> dict:
    """Per agent and pair of consecutive sweep values ``a -> b``: the per-seed differences of final simple
    regret (b − a): ``mean``, ``b_lower`` (seeds on which b ends lower), ``n`` and the two-sided Wilcoxon
    signed-rank ``wilcoxon_p`` (None without a nonzero difference)."""
    out: dict = {}
    for a, b in itertools.pairwise(sweep["runs"]):
        for agent, ra in a["agents"].items():
            pr = paired(
                b["agents"][agent]["final_simple_regret_per_seed"], ra["final_simple_regret_per_seed"]
            )
            out.setdefault(agent, {})[f"{a['value']} -> {b['value']}"] = {
                "mean": pr.spread.mean,
                "b_lower": pr.below,
                "n": pr.spread.n,
                "wilcoxon_p": pr.wilcoxon_p,
            }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="+")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--suffix", default="", help="output folder and summary key: <config name><suffix>")
    ap.add_argument("--no-run", action="store_true", help="summarise the results.json already there")
    args = ap.parse_args()
    set_torch_threads()
    path = OUT / "ablation_summary.json"
    for config in args.configs:
        name = config + args.suffix
        if args.no_run:
            res = json.loads((OUT / name / "results.json").read_text())
            args.seeds = res["seeds"]
        else:
            cfg = apply_overrides(load_yaml(ROOT / "examples" / "pspl" / f"{config}.yaml"), args.overrides)
            res = run_experiment(cfg, args.seeds, OUT / name, progress=args.progress)
        summary = json.loads(path.read_text()) if path.exists() else {}
        summary[name] = {
            "seeds": args.seeds,
            "K": res["config"]["K"],
            "N": res["config"]["offline"]["N"],
            "overrides": args.overrides,
            "wall_time_s": round(res["total_wall_time_s"], 1),
            **summarise(res),
            "note": "shared 2-core machine, 1 torch thread",
        }
        write_json(path, summary)
        print(name, json.dumps(summary[name]["agents"], indent=None))


if __name__ == "__main__":
    main()

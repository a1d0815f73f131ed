"""Benchmarks of the warmPref-PS family: every example config, results under benchmarks/results/warmpref/.

    .venv/bin/python benchmarks/warmpref_bench.py headline            # default.yaml, 5 seeds (+ checks)
    .venv/bin/python benchmarks/warmpref_bench.py actionspace --seeds 5
    .venv/bin/python benchmarks/warmpref_bench.py all

Each run writes ``<name>/results.json`` + ``regret.png`` (or ``summary.json`` + ``summary.png`` for
sweeps); ``checks.json`` collects the pass/fail of the claims of issue 3 that a run can decide.
Timings are wall-clock on whatever machine runs this (ours: a shared 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from bayescrl.bandits.experiment import final_table, run_experiment, run_sweep
from bayescrl.utils.io import apply_overrides, load_yaml, write_json

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "warmpref"
OUT = ROOT / "benchmarks" / "results" / "warmpref"
CONFIGS = {
    "headline": "default.yaml",
    "actionspace": "actionspace.yaml",
    "ablation": "ablation.yaml",
    "flawed_expert": "flawed_expert.yaml",
    "misspecified_lambda": "misspecified_lambda.yaml",
    "misspecified_beta": "misspecified_beta.yaml",
    "unknown_beta": "unknown_beta.yaml",
    "dpo_ipo": "dpo_ipo.yaml",
    "warmtsof": "warmtsof.yaml",
    "scaling_K": "scaling_K.yaml",
    "scaling_T": "scaling_T.yaml",
    "multi_rater": "multi_rater.yaml",
    "headline_extended": "default.yaml",
    "actionspace_extended": "actionspace.yaml",
    "trend_lambda": "ablation.yaml",
    "trend_beta": "ablation.yaml",
    "trend_N": "ablation.yaml",
}
TREND_AGENTS = "agents=[warmpref-ps-bootstrap, warmpref-ps, ps]"
# extra agents for the extended headline (run with --seeds 20): Algorithm 1 and a greedier LinTS
OVERRIDES = {
    "headline_extended": [
        "agents=[warmpref-ps-bootstrap, warmpref-ps, naive-ps, ps, lints,"
        " {id: lints, label: lints-v0.5, lints_v: 0.5}]"
    ],
    "actionspace_extended": [
        "agents=[ps, lints, {id: lints, label: lints-v0.5, lints_v: 0.5}, warmpref-ps-bootstrap, warmpref-ps]"
    ],
    # one-factor trends of figure `warmTS-ablation` (run with --seeds 20)
    "trend_lambda": [TREND_AGENTS, "offline.N=50", "offline.beta=5.0", "sweep={offline.lam: [1, 10, 1000]}"],
    "trend_beta": [TREND_AGENTS, "offline.N=50", "offline.lam=100.0", "sweep={offline.beta: [1, 5, 20]}"],
    "trend_N": [TREND_AGENTS, "offline.beta=10.0", "offline.lam=100.0", "sweep={offline.N: [0, 5, 50]}"],
}


def _final(res: dict, agent: str) -> float:
    return res["agents"][agent]["final_regret_mean"]


def checks(name: str, res: dict) -> dict[str, bool | float]:
    """The claims of issue 3 decidable from one run."""
    out: dict[str, bool | float] = {}
    if name in ("headline", "headline_extended"):
        w, ps, lt = (_final(res, a) for a in ("warmpref-ps-bootstrap", "ps", "lints"))
        out["reduction_vs_ps"] = 1 - w / ps
        out["warm_25pct_below_ps"] = w <= 0.75 * ps
        out["warm_below_lints"] = w < lt
        main4 = ("warmpref-ps-bootstrap", "naive-ps", "ps", "lints")
        main = sum(res["agents"][a]["wall_time_s"] for a in main4)
        out["agents_wall_time_s"] = main
        out["within_60s"] = main <= 60.0
        out["load_average_1min"] = os.getloadavg()[0]
    if name.startswith("trend_"):
        for agent in ("warmpref-ps-bootstrap", "warmpref-ps"):
            f = [c["agents"][agent]["final_regret_mean"] for c in res["cells"].values()]
            out[f"{agent}: regret non-increasing along the sweep"] = all(
                b <= a for a, b in zip(f, f[1:], strict=False)
            )
    if name == "actionspace_extended":
        for cell, c in res["cells"].items():
            f = {k: v["final_regret_mean"] for k, v in c["agents"].items()}
            out[f"{cell}: warm<lints<ps"] = f["warmpref-ps-bootstrap"] < f["lints"] < f["ps"]
            out[f"{cell}: warm<lints-v0.5<ps"] = f["warmpref-ps-bootstrap"] < f["lints-v0.5"] < f["ps"]
            out[f"{cell}: warm<min(lints,ps)"] = f["warmpref-ps-bootstrap"] < min(f["lints"], f["ps"])
    if name == "actionspace":
        for cell, c in res["cells"].items():
            a = c["agents"]
            f = {k: v["final_regret_mean"] for k, v in a.items()}
            out[f"{cell}: warm<lints<ps"] = f["warmpref-ps-bootstrap"] < f["lints"] < f["ps"]
            out[f"{cell}: warm<min(lints,ps)"] = f["warmpref-ps-bootstrap"] < min(f["lints"], f["ps"])
    return out


def run(name: str, seeds: int) -> dict:
    cfg = apply_overrides(load_yaml(EXAMPLES / CONFIGS[name]), OVERRIDES.get(name, []))
    out = OUT / name
    if cfg.get("sweep"):
        res = run_sweep(cfg, seeds=seeds, out=out, progress=True, cell_outputs=False)  # commit-sized
    else:
        res = run_experiment(cfg, seeds=seeds, out=out, progress=True)
    print(f"== {name} ({seeds} seeds)\n{final_table(res)}")
    c = checks(name, res)
    if c:
        print(json.dumps(c, indent=1))
        path = OUT / "checks.json"
        allc = json.loads(path.read_text()) if path.exists() else {}
        allc[name] = {"seeds": seeds, **c}
        write_json(path, allc)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="+", choices=[*CONFIGS, "all"])
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    names = list(CONFIGS) if "all" in args.names else args.names
    for n in names:
        run(n, args.seeds)


if __name__ == "__main__":
    from bayescrl.utils.seeding import set_torch_threads

    set_torch_threads()
    main()

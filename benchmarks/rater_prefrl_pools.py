"""Evidence: safe RL from preferences (Point-Circle) with a misinformed rater: hierarchical, β-only, pooled.

Per seed, e-COP trains on bayescrl/PointCircle-v0 (the env's own cost limit, the e-COP table's settings
``BASE_CFG`` of ``ecop_compare.py``) with the reward learned from a pool of three simulated raters of
unknown competence, each asked a third of the queries (features ``env``, segments of 25 steps, ``QUERIES``
bald queries, reward = posterior mean):

- ``expert``: β = 10, λ = 100;
- ``near_random``: β = 0.1, λ = 100;
- ``misinformed``: β = 10, λ = 0.3 — deliberate but misinformed: its perceived reward is the true one plus
  ⟨ξ, φ⟩ with a belief error ξ ~ N(0, I/λ²) drawn once per seed (``bayescrl.raters.RaterPool``), i.e. a
  belief ϑ = θ + ξ whose error (sd 3.3 per feature) dwarfs the true weight (1 on one feature).

Methods (the preference spec's ``competence``): ``hierarchical`` (``infer``: β_i and λ_i per rater, the
hierarchical rater model), ``beta_only`` (``infer-beta``: β_i per rater, λ = ``learner_lam`` = 1000) and
``pooled`` (``ignore``: every label from one rater with β = 1, λ = 1000 — plain pooled Bradley–Terry).
Per run: ``reward_correlation`` (posterior-mean vs true reward on fresh states, last 10 % of iterations),
the deterministic evaluation's true return and cost (``final_true_*``), the stochastic policy's over the
last 10 % of iterations (``train_final_*``), each rater's β the learner holds, and, for ``hierarchical``,
the rater table and the rank of the misinformed rater's posterior-mean λ (1 = lowest of the three).
Reported: means, and paired differences hierarchical − other with 95 % t-intervals over seeds; the seeds
whose true return exceeds 20 ("circling": a Point-Circle run either circles or stands still) per method,
with an exact McNemar test of hierarchical against each other method on the paired seeds (the same for
the seeds whose reward correlation exceeds 0.9).

    .venv/bin/python benchmarks/rater_prefrl_pools.py                     # 20 seeds x 3 methods, 30k steps
    .venv/bin/python benchmarks/rater_prefrl_pools.py --seeds 1 --steps 3200 --out /tmp/x   # smoke run
    .venv/bin/python benchmarks/rater_prefrl_pools.py --first 12 --seeds 11 --out /tmp/b  # seeds 12..22
    .venv/bin/python benchmarks/rater_prefrl_pools.py --merge /tmp/a/rater_prefrl_pools.json \
        /tmp/b/rater_prefrl_pools.json --out DIR   # one table from seed ranges run side by side

Writes ``rater_prefrl_pools.json`` and ``.png`` under benchmarks/results/raters/ (``--out``); the JSON is
rewritten after every run, so an interrupted sweep keeps what it finished.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.stats
from ecop_compare import BASE_CFG  # benchmarks/ is the script's folder

from bayescrl.prefrl.loop import train_with_preferences
from bayescrl.utils import set_torch_threads, write_json
from bayescrl.utils.plotting import plt
from bayescrl.utils.spread import fmt_num, spread

OUT = Path(__file__).parent / "results" / "raters"
ENV, ALGO = "bayescrl/PointCircle-v0", "ecop"
RATERS = [
    {"id": "expert", "beta": 10.0, "lam": 100.0},
    {"id": "near_random", "beta": 0.1, "lam": 100.0},
    {"id": "misinformed", "beta": 10.0, "lam": 0.3},
]
QUERIES = {"total": 150, "per_round": 25, "every": 1, "select": "bald"}
SPEC = dict(features="env", segment_length=25, raters=RATERS, queries=QUERIES, reward="mean")
METHODS = {"hierarchical": "infer", "beta_only": "infer-beta", "pooled": "ignore"}
METRICS = ("reward_correlation", "eval_return", "eval_cost", "train_return", "train_cost")
CIRCLE = 20.0  # a run "circles" when its true return exceeds this (as in docs/prefrl.md)


def one_run(method: str, seed: int, steps: int) -> dict:
    """One training run; the metrics of the module docstring."""
    t0 = time.perf_counter()
    spec = {**SPEC, "competence": METHODS[method]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no rater known: only the priors fix the scale" (by design here)
        m = train_with_preferences(ALGO, ENV, spec, total_steps=steps, seed=seed, config=BASE_CFG)
    m.pop("_learner", None)
    corr = m["reward_correlation"]
    out = {
        "method": method,
        "seed": seed,
        "reward_correlation": None if corr is None or not math.isfinite(corr) else float(corr),
        "eval_return": float(m["final_true_return"]),
        "eval_cost": float(m["final_true_costs"][0]),
        "train_return": float(m["train_final_return"]),
        "train_cost": float(m["train_final_costs"][0]),
        "num_queries": int(m["num_queries"]),
        "beta_held": {k: float(v) for k, v in m["competence"].items()},
        "wall_s": time.perf_counter() - t0,
    }
    rows = m.get("raters") or []
    if method == "hierarchical" and rows:
        lam = {r["id"]: r["lam_mean"] for r in rows}
        out["raters"] = rows
        out["misinformed_lam_rank"] = 1 + sum(v < lam["misinformed"] for v in lam.values())
        out["misinformed_verdict"] = next(r["verdict"] for r in rows if r["id"] == "misinformed")
    return out


def _hit(run: dict, k: str) -> bool:
    """A run's binary outcome: it circles (``eval`` / ``train`` return above CIRCLE) or, for ``corr``, its
    learned reward correlates above 0.9 with the true one (the correlation is bimodal as well)."""
    if k == "corr":
        return run["reward_correlation"] is not None and run["reward_correlation"] > 0.9
    return run[f"{k}_return"] > CIRCLE


def summarise(runs: list[dict]) -> dict:
    """Means per method, paired differences hierarchical − other (95 % t-intervals), λ-rank counts."""
    by = {m: {r["seed"]: r for r in runs if r["method"] == m} for m in METHODS}
    table: dict = {"mean": {}, "paired": {}}
    for m, rs in by.items():
        table["mean"][m] = {}
        for k in METRICS:
            vals = [r[k] for r in rs.values() if r[k] is not None]
            table["mean"][m][k] = float(np.mean(vals)) if vals else None
        table["mean"][m]["n"] = len(rs)
        corr = [r["reward_correlation"] for r in rs.values() if r["reward_correlation"] is not None]
        table["mean"][m]["reward_correlation_median"] = float(np.median(corr)) if corr else None
        table["mean"][m]["reward_correlation_above_0.9"] = sum(c > 0.9 for c in corr)
        held: dict[str, list[float]] = {}  # pooled holds one β for the single pooled rater
        for r in rs.values():
            for rid, b in r["beta_held"].items():
                held.setdefault(rid, []).append(b)
        table["mean"][m]["beta_held"] = {rid: float(np.mean(v)) for rid, v in held.items()}
    for other in ("beta_only", "pooled"):
        seeds = sorted(set(by["hierarchical"]) & set(by[other]))
        entry = {}
        for k in METRICS:
            d = [
                by["hierarchical"][s][k] - by[other][s][k]
                for s in seeds
                if by["hierarchical"][s][k] is not None and by[other][s][k] is not None
            ]
            if not d:
                continue
            sp = spread(d)
            entry[k] = {"mean": sp.mean, "ci95": list(sp.ci95) if sp.ci95 else None, "n": sp.n}
        table["paired"][f"hierarchical - {other}"] = entry
    for m, rs in by.items():  # a Point-Circle run either circles or stands still: count the circling ones
        table["mean"][m]["circling"] = {
            k: sum(r[f"{k}_return"] > CIRCLE for r in rs.values()) for k in ("eval", "train")
        }
    for other in ("beta_only", "pooled"):
        seeds = sorted(set(by["hierarchical"]) & set(by[other]))
        for k in ("eval", "train", "corr"):  # exact McNemar tests on the paired seeds
            h = [_hit(by["hierarchical"][s], k) for s in seeds]
            o = [_hit(by[other][s], k) for s in seeds]
            b = sum(x and not y for x, y in zip(h, o, strict=True))
            c = sum(y and not x for x, y in zip(h, o, strict=True))
            p = float(scipy.stats.binomtest(b, b + c, 0.5).pvalue) if b + c else 1.0
            name = "reward_correlation_above_0.9" if k == "corr" else f"circling_{k}"
            table["paired"][f"hierarchical - {other}"][name] = {
                "hierarchical_only": b,
                "other_only": c,
                "p_exact": p,
            }
    ranks = [r["misinformed_lam_rank"] for r in by["hierarchical"].values() if "misinformed_lam_rank" in r]
    verdicts = [r["misinformed_verdict"] for r in by["hierarchical"].values() if "misinformed_verdict" in r]
    table["misinformed_lam_rank"] = {str(k): ranks.count(k) for k in (1, 2, 3)}
    table["misinformed_verdict"] = {v: verdicts.count(v) for v in sorted(set(verdicts))}
    return table


def _fmt_ci(e: dict | None) -> str:
    if not e:
        return "n/a"
    ci = e["ci95"]
    return f"{e['mean']:+.3f}" + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "")


def plot(runs: list[dict], path: Path) -> None:
    """Per-seed reward correlation and evaluation return/cost per method (mean ± se bars)."""
    p = plt()
    fig, axes = p.subplots(1, 3, figsize=(11, 3.4))
    for ax, key, label in zip(
        axes,
        ("reward_correlation", "eval_return", "eval_cost"),
        ("corr(learned, true reward)", "true return (evaluation)", "true cost (evaluation)"),
        strict=True,
    ):
        for j, m in enumerate(METHODS):
            v = np.array([r[key] for r in runs if r["method"] == m and r[key] is not None])
            if not len(v):
                continue
            se = v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else 0.0
            ax.bar(j, v.mean(), 0.6, yerr=se, capsize=3, alpha=0.6, label=m)
            ax.plot(np.full(len(v), j) + np.linspace(-0.2, 0.2, len(v)), v, "k.", ms=3)
        ax.set_xticks(range(len(METHODS)), list(METHODS), fontsize=8)
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    n = len({r["seed"] for r in runs})
    fig.suptitle(
        f"Point-Circle from preferences, expert + near-random + misinformed rater ({n} seeds)", fontsize=9
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    p.close(fig)


def merge(files: list[Path], out: Path) -> None:
    """One result file (table and plot) from the runs of several (e.g. seed ranges run side by side)."""
    parts = [json.loads(f.read_text()) for f in files]
    if len({(p["env"], p["algo"], p["steps"], json.dumps(p["spec"], sort_keys=True)) for p in parts}) != 1:
        raise SystemExit("--merge: the files differ in env, algo, steps or spec")
    runs = sorted(
        (r for p in parts for r in p["runs"]), key=lambda r: (r["seed"], list(METHODS).index(r["method"]))
    )
    if len({(r["seed"], r["method"]) for r in runs}) != len(runs):
        raise SystemExit("--merge: a (seed, method) run appears twice")
    res = {k: v for k, v in parts[0].items() if k not in ("runs", "table", "wall_time_s", "command")}
    res["command"] = " + ".join(p["command"] for p in parts) + " (merged with --merge)"
    res["wall_time_s_parts"] = [p.get("wall_time_s") for p in parts]  # each part's own run (side by side)
    write_json(out / "rater_prefrl_pools.json", {**res, "table": summarise(runs), "runs": runs})
    plot(runs, out / "rater_prefrl_pools.png")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1 (default 20)")
    ap.add_argument("--steps", type=int, default=30_000, help="env steps per run (default 30000)")
    ap.add_argument("--first", type=int, default=0, help="first seed (seeds FIRST..FIRST+N-1; default 0)")
    ap.add_argument("--out", default=str(OUT), help="output folder (default benchmarks/results/raters)")
    ap.add_argument(
        "--merge",
        nargs="+",
        metavar="JSON",
        help="combine the runs of these result files into --out (no runs)",
    )
    args = ap.parse_args()
    set_torch_threads()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.merge:
        merge([Path(f) for f in args.merge], out)
        return
    t0 = time.perf_counter()
    runs: list[dict] = []
    res: dict = {
        "command": "benchmarks/rater_prefrl_pools.py " + " ".join(sys.argv[1:]),
        "env": ENV,
        "algo": ALGO,
        "steps": args.steps,
        "spec": SPEC,
        "methods": METHODS,
    }
    for seed in range(
        args.first, args.first + args.seeds
    ):  # seeds outermost: an interrupted sweep stays paired
        for method in METHODS:
            r = one_run(method, seed, args.steps)
            runs.append(r)
            extra = f"  misinformed λ rank {r['misinformed_lam_rank']}" if "misinformed_lam_rank" in r else ""
            print(
                f"seed {seed} {method:12s} corr {r['reward_correlation']}  return {r['eval_return']:.1f} "
                f"cost {r['eval_cost']:.1f}{extra} ({r['wall_s']:.0f} s)",
                flush=True,
            )
            write_json(out / "rater_prefrl_pools.json", {**res, "table": summarise(runs), "runs": runs})
    res["wall_time_s"] = time.perf_counter() - t0
    table = summarise(runs)
    write_json(out / "rater_prefrl_pools.json", {**res, "table": table, "runs": runs})
    for m, row in table["mean"].items():
        print(
            f"{m:12s} "
            + "  ".join(f"{k} {row[k]:.3f}" for k in METRICS if row[k] is not None)
            + f"  corr median {fmt_num(row['reward_correlation_median'], 3)}"
            + f", > 0.9 in {row['reward_correlation_above_0.9']}"
        )
    for name, entry in table["paired"].items():
        print(f"{name}: " + "  ".join(f"{k} {_fmt_ci(entry.get(k))}" for k in METRICS))
    print(f"misinformed λ rank (hierarchical): {table['misinformed_lam_rank']}")
    plot(runs, out / "rater_prefrl_pools.png")
    print(f"wrote {out}/rater_prefrl_pools.json, rater_prefrl_pools.png ({res['wall_time_s']:.0f} s)")


if __name__ == "__main__":
    main()

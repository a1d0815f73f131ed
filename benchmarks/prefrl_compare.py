"""Safe RL from rater preferences on the safe-control suite: reward rules, rater models, query rules.

Each variant trains a constrained optimiser whose reward is learned from simulated raters' preferences
(:mod:`bayescrl.prefrl`), against the oracle that sees the env reward. Reported per variant (mean ± sd
over seeds): the true return and true cost over the last 10 % of iterations (stochastic policy, as the
e-COP tables), the deterministic evaluation, the number of queries and corr(learned, true reward).
Writes ``benchmarks/results/prefrl/<name>.json`` and ``<name>.png`` (true return and cost vs queries).

    .venv/bin/python benchmarks/prefrl_compare.py --name pointcircle_ecop --seeds 0 1 2
    .venv/bin/python benchmarks/prefrl_compare.py --name quick --variants oracle mean --steps 20000
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from ecop_compare import BASE_CFG  # benchmarks/ is the script's folder

from bayescrl.utils.io import apply_overrides, write_json
from bayescrl.utils.plotting import plt

OUT = Path(__file__).parent / "results" / "prefrl"
CFG = BASE_CFG  # the e-COP table's settings (8 envs x 200 steps per iteration), shared with ecop_compare
# one expert, two novices (the mixed pool); the learner is not told who is who unless "known"
RATERS = [
    {"id": "expert", "beta": 10.0, "lam": 100.0},
    {"id": "novice1", "beta": 0.5, "lam": 2.0},
    {"id": "novice2", "beta": 0.5, "lam": 2.0},
]
BASE_SPEC = dict(
    features="env",
    segment_length=25,
    raters=RATERS,
    competence="infer",
    queries={"total": 400, "per_round": 20, "every": 1, "select": "bald"},
    reward="mean",
)
# name -> spec overrides (None: the oracle, trained on the env reward)
VARIANTS: dict[str, dict | None] = {
    "oracle": None,
    "mean": {},
    "thompson": {"reward": "thompson"},
    "thompson-hold10": {"reward": "thompson", "thompson_hold": 10},
    "lcb": {"reward": "lcb"},
    "no-rater-model": {"competence": "ignore"},
    "known-competence": {"competence": "known"},
    "uniform": {"queries": {**BASE_SPEC["queries"], "select": "uniform"}},
    "disagreement": {"queries": {**BASE_SPEC["queries"], "select": "disagreement"}},
    "top-two": {"queries": {**BASE_SPEC["queries"], "select": "top-two"}},
    "ensemble": {"reward_model": "ensemble"},
    # the `imitation` library's recipe: an ensemble, no rater model, disagreement queries
    "ensemble-no-rater-model": {
        "reward_model": "ensemble",
        "competence": "ignore",
        "queries": {**BASE_SPEC["queries"], "select": "disagreement"},
    },
}


def call_one(job: dict) -> dict:
    """:func:`one_run` from a JSON job (the sweep engine's call; the job carries ``--set``'s BASE_SPEC, as
    the run's process imports this module afresh)."""
    BASE_SPEC.clear()
    BASE_SPEC.update(job["base_spec"])
    return one_run(*job["args"])


def one_run(algo: str, env: str, limit: float | None, steps: int, seed: int, variant: str) -> dict:
    import torch

    from bayescrl.constrained.registry import get_algorithm
    from bayescrl.prefrl.loop import train_with_preferences

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    over = VARIANTS[variant]
    if over is None:
        agent = get_algorithm(algo)(env, None if limit is None else [limit], seed=seed, config=CFG)
        agent.learn(steps, progress=False)
        hist, curve, extra = agent.history, [], {"num_queries": 0, "reward_correlation": 1.0}
        e = agent.evaluate(CFG["eval_episodes"])
        ev = {"return": e["mean_return"], "costs": e["mean_costs"]}
        agent.close()
    else:
        spec = {**BASE_SPEC, **over}
        m = train_with_preferences(
            algo,
            env,
            spec,
            total_steps=steps,
            cost_limits=None if limit is None else [limit],
            seed=seed,
            config=CFG,
        )
        learner = m.pop("_learner")
        hist, curve = learner.algo.history, learner.curve
        ev = {"return": m["final_true_return"], "costs": m["final_true_costs"]}
        extra = {k: m[k] for k in ("num_queries", "reward_correlation", "competence", "answers")}
    tail = hist[-max(1, len(hist) // 10) :]
    return {
        "algo": algo,
        "variant": variant,
        "seed": seed,
        "tail_return": float(np.mean([r["ep_return"] for r in tail])),
        "tail_costs": np.mean([r["ep_costs"] for r in tail], 0).tolist(),
        "eval_return": float(ev["return"]),
        "eval_costs": list(map(float, ev["costs"])),
        "curve": [{k: c[k] for k in ("env_steps", "num_queries", "true_return", "true_costs")} for c in curve]
        or [
            {"env_steps": r["env_steps"], "true_return": r["ep_return"], "true_costs": r["ep_costs"]}
            for r in hist
        ],
        "wall_s": time.perf_counter() - t0,
        **extra,
    }


def summarise(runs: list[dict]) -> dict:
    out: dict = {}
    for r in runs:
        out.setdefault(f"{r['algo']}/{r['variant']}", []).append(r)
    table = {}
    for key, rs in out.items():
        ret = np.array([r["tail_return"] for r in rs])
        cost = np.array([r["tail_costs"] for r in rs])  # (seeds, m)
        table[key] = {
            "seeds": len(rs),
            "return_mean": float(ret.mean()),
            "return_sd": float(ret.std(ddof=1)) if len(rs) > 1 else 0.0,
            "return_median": float(np.median(ret)),
            "cost_mean": cost.mean(0).tolist(),
            "cost_sd": (cost.std(0, ddof=1) if len(rs) > 1 else 0 * cost[0]).tolist(),
            "eval_return_mean": float(np.mean([r["eval_return"] for r in rs])),
            "num_queries": float(np.mean([r["num_queries"] for r in rs])),
            # None when the true reward never varied on the visited states (nothing collected, say)
            "reward_correlation": _nanmean([r["reward_correlation"] for r in rs]),
        }
    return table


def _nanmean(values) -> float | None:
    vals = [v for v in values if v is not None and np.isfinite(v)]
    return float(np.mean(vals)) if vals else None


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _print(table: dict) -> None:
    for key, row in sorted(table.items()):
        print(
            f"{key:36s} {row['return_mean']:7.1f} ± {row['return_sd']:5.1f} "
            f"(median {row['return_median']:6.1f})  costs "
            + ", ".join(f"{c:5.1f} ± {s:4.1f}" for c, s in zip(row["cost_mean"], row["cost_sd"], strict=True))
            + f"   corr {_fmt(row['reward_correlation'])}"
            + f"   n={row['seeds']}"
        )


PLOTTED = ("oracle", "mean", "disagreement", "lcb", "thompson", "no-rater-model", "ensemble-no-rater-model")


def plot(runs: list[dict], limit: float | None, path: Path, variants=PLOTTED) -> None:
    """True return and cost (moving average over 5 iterations, mean ± standard error over seeds) against
    env steps for ``variants``; the queries' share of training is shaded (the budget is spent first)."""
    p = plt()
    fig, axes = p.subplots(1, 2, figsize=(11, 3.8))
    groups: dict[str, list[dict]] = {}
    for r in runs:
        if r["variant"] in variants:
            groups.setdefault(f"{r['algo']}/{r['variant']}", []).append(r)
    smooth = lambda y: np.convolve(np.pad(y, (2, 2), mode="edge"), np.ones(5) / 5, mode="valid")
    last_query = 0
    for key, rs in sorted(groups.items(), key=lambda kv: PLOTTED.index(kv[0].split("/")[1])):
        n = min(len(r["curve"]) for r in rs)
        x = np.array([c["env_steps"] for c in rs[0]["curve"][:n]])
        q = [c.get("num_queries", 0) for c in rs[0]["curve"][:n]]
        if q and q[-1]:
            last_query = max(last_query, x[int(np.argmax(np.asarray(q) >= q[-1]))])
        style = {"color": "k", "lw": 1.8} if key.endswith("/oracle") else {"lw": 1.3}
        for ax, get in ((axes[0], lambda c: c["true_return"]), (axes[1], lambda c: c["true_costs"][0])):
            y = np.array([smooth(np.array([get(c) for c in r["curve"][:n]])) for r in rs])
            m, se = y.mean(0), y.std(0) / np.sqrt(len(rs))
            (line,) = ax.plot(x, m, label=f"{key} (n={len(rs)})", **style)
            ax.fill_between(x, m - se, m + se, alpha=0.15, color=line.get_color())
    for ax in axes:
        if last_query:
            ax.axvspan(0, last_query, color="0.9", zorder=0, label="queries asked")
        ax.set_xlabel("environment steps")
        ax.grid(alpha=0.3)
    if limit is not None:
        axes[1].axhline(limit, color="k", ls="--", lw=1, label="cost limit")
    axes[0].set_ylabel("true episodic return")
    axes[1].set_ylabel("true episodic cost")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    p.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", required=True)
    ap.add_argument("--env", default="bayescrl/PointCircle-v0")
    ap.add_argument("--algos", nargs="+", default=["ecop"])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--limit", type=float, default=None, help="one cost limit (default: the env's own)")
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2)))
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="BASE_SPEC override k=v")
    ap.add_argument(
        "--combine", nargs="+", help="only tabulate and plot these results: NAME or NAME:variant,variant"
    )
    args = ap.parse_args()
    if args.combine:
        import json

        parts, runs = [], []
        for item in args.combine:  # NAME or NAME:variant,variant (only those variants of that result)
            name, _, keep = item.partition(":")
            part = json.loads((OUT / f"{name}.json").read_text())
            parts.append(part)
            runs += [r for r in part["runs"] if not keep or r["variant"] in keep.split(",")]
        table = summarise(runs)
        _print(table)
        write_json(
            OUT / f"{args.name}.json",
            {
                "combined": args.combine,
                "commands": [p.get("command") for p in parts],
                "env": parts[0]["env"],
                "limit": parts[0]["limit"],
                "steps": parts[0]["steps"],
                "table": table,
                "runs": runs,
            },
        )
        if all("curve" in r for r in runs):  # committed results keep no curves (benchmarks/slim_results.py)
            plot(runs, parts[0]["limit"], OUT / f"{args.name}.png")
        else:
            print(f"no per-iteration curves in these results: {args.name}.png not redrawn")
        return
    BASE_SPEC.update(apply_overrides(BASE_SPEC, args.overrides))
    jobs = [
        (a, args.env, args.limit, args.steps, s, v)
        for s in args.seeds
        for a in args.algos
        for v in args.variants
    ]
    runs = []
    OUT.mkdir(parents=True, exist_ok=True)

    def record(_job: dict, r: dict) -> None:
        runs.append(r)
        write_json(OUT / f"{args.name}.partial.json", {"runs": runs})  # a crash later loses nothing
        print(
            f"{r['algo']}/{r['variant']} seed {r['seed']}: return {r['tail_return']:.1f} "
            f"cost {r['tail_costs'][0]:.1f} ({r['wall_s']:.0f} s)",
            flush=True,
        )

    # the sweep engine: each run its own process (warm fork server), --workers at a time
    from bayescrl.sweep.calls import map_calls

    map_calls(
        f"{Path(__file__).resolve()}:call_one",
        [{"args": list(j), "base_spec": BASE_SPEC} for j in jobs],
        workers=args.workers,
        on_done=record,
    )
    table = summarise(runs)
    _print(table)
    cmd = "benchmarks/prefrl_compare.py " + " ".join(os.sys.argv[1:])
    write_json(
        OUT / f"{args.name}.json",
        {
            "command": cmd,
            "env": args.env,
            "limit": args.limit,
            "steps": args.steps,
            "spec": BASE_SPEC,
            "table": table,
            "runs": runs,
        },
    )
    plot(runs, args.limit, OUT / f"{args.name}.png")
    (OUT / f"{args.name}.partial.json").unlink(missing_ok=True)


if __name__ == "__main__":
    main()

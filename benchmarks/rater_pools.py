"""Evidence for hierarchical rater competence on simulated linear pools (many seeds).

Scenarios (d = 6, 80 comparisons per rater, θ ~ N(0, I), items x ~ N(0, I/d)):

(a) ``misinformed``: four raters (β = 5, λ ∈ {3, 2, 3, 1.5}) and one deliberate-but-misinformed rater
    (β = 10, λ = 0.2);
(b) ``near_random``: two deliberate raters (β = 5), three near-random raters (β = 0.2), λ ∈ {3, 2, 3, 1, 2};
(c) ``trusted_few``: two trusted raters of known competence (β = 5, λ = 10, declared to every method that
    can use them) and six untrusted raters (β = 5, λ ∈ {0.3, 0.5, 0.3, 1, 0.5, 0.3});
(d) ``all_alike``: five raters with β = 5, λ = 2.

Methods, all with the same priors (θ ~ N(0, I); log β ~ N(log 5, 1.5²), log λ ~ N(0, 1.5²)):

* ``hierarchical``: :func:`~bayescrl.inference.hierarchical.fit_rater_pool` (laplace-eb): β_i and λ_i
  inferred per rater;
* ``beta_only``: the same engine with every unknown λ_i fixed at the learner's value 1 (the prior median),
  β_i inferred — today's ``competence: infer``;
* ``pooled``: every comparison treated as coming from one rater (β inferred, λ at its prior).

Metrics per (scenario, method), mean ± sd over seeds: cosine of the posterior-mean θ with the truth, 90 %
posterior-interval coverage of θ's coordinates, and (hierarchical only; the others have no per-rater λ)
the Spearman correlation of the posterior-mean λ_i of the raters with unknown λ with the true λ_i (not
defined for ``all_alike``). ``flagged``: the fraction of seeds in which the misinformed rater of (a) gets
the verdict ``deliberate-but-misinformed``; ``false_flags``: the fraction of the four other raters given it.

    .venv/bin/python benchmarks/rater_pools.py             # 20 seeds (a few minutes on one core)
    .venv/bin/python benchmarks/rater_pools.py --seeds 3   # quick look
    .venv/bin/python benchmarks/rater_pools.py --engines laplace-eb nuts --scenario near_random \
        --seed-list 0 4   # the hierarchical model's engines against each other on chosen seeds

Writes benchmarks/results/raters/rater_pools.json and .png.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from bayescrl.inference.hierarchical import PoolRater, fit_rater_pool, simulate_pool
from bayescrl.utils import set_torch_threads, write_json
from bayescrl.utils.plotting import plt

OUT = Path(__file__).parent / "results" / "raters"
D, N_PER = 6, 80
LEARNER_LAM = 1.0
SCENARIOS = {
    "misinformed": {"betas": [5, 5, 5, 5, 10], "lams": [3, 2, 3, 1.5, 0.2], "known": []},
    "near_random": {"betas": [5, 5, 0.2, 0.2, 0.2], "lams": [3, 2, 3, 1, 2], "known": []},
    "trusted_few": {
        "betas": [5, 5, 5, 5, 5, 5, 5, 5],
        "lams": [10, 10, 0.3, 0.5, 0.3, 1, 0.5, 0.3],
        "known": [0, 1],
    },
    "all_alike": {"betas": [5] * 5, "lams": [2] * 5, "known": []},
}
METHODS = ("hierarchical", "beta_only", "pooled")


def spearman(a, b) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def run_one(name: str, sc: dict, method: str, seed: int) -> dict:
    s = simulate_pool(D, sc["betas"], sc["lams"], N_PER, seed=seed)
    R = len(sc["betas"])
    ids = [f"r{i}" for i in range(R)]
    if method == "pooled":
        raters, rater = ["all"], torch.zeros_like(s["rater"])
    else:
        raters = []
        for i in range(R):
            if i in sc["known"]:
                raters.append(PoolRater(ids[i], beta=sc["betas"][i], lam=sc["lams"][i]))
            elif method == "beta_only":
                raters.append(PoolRater(ids[i], lam=LEARNER_LAM))
            else:
                raters.append(ids[i])
        rater = s["rater"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "only the prior fixes the scale": expected here
        post = fit_rater_pool(s["X0"], s["X1"], s["y"], rater, raters, seed=seed)
    th = post.theta_mean
    lo, hi = post.interval("theta")
    out = {
        "cosine": float(torch.nn.functional.cosine_similarity(th, s["theta"], 0)),
        "coverage90": float(((s["theta"] >= lo) & (s["theta"] <= hi)).double().mean()),
        "converged": bool(post.diagnostics["converged"]),
    }
    unknown = [i for i in range(R) if i not in sc["known"]]
    if method == "hierarchical" and len(set(sc["lams"][i] for i in unknown)) > 1:
        lam = post.flat("lam").mean(0)
        out["lam_spearman"] = spearman([float(lam[i]) for i in unknown], [sc["lams"][i] for i in unknown])
    if name == "misinformed" and method != "pooled":
        v = post.verdicts()
        out["flagged"] = float(v[-1] == "deliberate-but-misinformed")
        out["false_flags"] = float(np.mean([x == "deliberate-but-misinformed" for x in v[:-1]]))
    return out


def summarise(rows: list[dict]) -> dict:
    out = {}
    for key in rows[0]:
        v = np.array([r[key] for r in rows if key in r], dtype=float)
        out[key] = {"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if len(v) > 1 else 0.0, "n": len(v)}
    return out


def plot(summary: dict, path: Path) -> None:
    fig, axes = plt().subplots(1, 3, figsize=(12, 3.6))
    names = list(summary)
    x = np.arange(len(names))
    for ax, metric, label in zip(
        axes,
        ("cosine", "coverage90", "lam_spearman"),
        ("θ cosine to truth", "90 % coverage of θ", "Spearman(λ̂_i, λ_i)"),
        strict=True,
    ):
        for k, m in enumerate(METHODS):
            vals = [summary[n][m].get(metric) for n in names]
            mean = [v["mean"] if v else np.nan for v in vals]
            sd = [v["sd"] if v else 0 for v in vals]
            ax.bar(x + 0.27 * (k - 1), mean, 0.27, yerr=sd, label=m, capsize=2)
        ax.set_xticks(x, names, rotation=15)
        ax.set_title(label)
    axes[1].axhline(0.9, color="k", lw=0.8, ls="--")
    axes[0].set_ylim(0.5, 1.0)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def engine_row(name: str, seed: int, engine: str, options: dict) -> dict:
    """The hierarchical model of scenario ``name`` on one seed with one engine: θ's 90 % coverage, the mean
    posterior sd of θ's coordinates, ‖θ̂‖ against ‖θ‖ (the β–θ scale) and the posterior sd of the mean
    log β of the raters (the scale direction of the competences)."""
    sc = SCENARIOS[name]
    s = simulate_pool(D, sc["betas"], sc["lams"], N_PER, seed=seed)
    raters = [
        PoolRater(f"r{i}", beta=sc["betas"][i], lam=sc["lams"][i]) if i in sc["known"] else f"r{i}"
        for i in range(len(sc["betas"]))
    ]
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = fit_rater_pool(
            s["X0"], s["X1"], s["y"], s["rater"], raters, engine=engine, seed=seed, **options
        )
    lo, hi = post.interval("theta")
    return {
        "seed": seed,
        "engine": engine,
        "coverage90": float(((s["theta"] >= lo) & (s["theta"] <= hi)).double().mean()),
        "theta_sd_mean": float(post.flat("theta").std(0).mean()),
        "theta_norm": float(post.theta_mean.norm()),
        "theta_norm_true": float(s["theta"].norm()),
        "mean_log_beta_sd": float(post.flat("beta").log().mean(-1).std()),
        "seconds": time.perf_counter() - t0,
        "converged": bool(post.diagnostics["converged"]),
    }


def compare_engines(args) -> None:
    """``--engines``: laplace-eb against NUTS (and svi) on chosen seeds of one scenario."""
    nuts = {"num_samples": args.nuts_samples, "warmup": args.nuts_samples, "num_chains": 1}
    rows = []
    for seed in args.seed_list:
        for engine in args.engines:
            rows.append(engine_row(args.scenario, seed, engine, nuts if engine == "nuts" else {}))
            print({k: round(v, 3) if isinstance(v, float) else v for k, v in rows[-1].items()}, flush=True)
    name = f"rater_pools_engines_{args.scenario}_{'_'.join(map(str, args.seed_list))}.json"
    cmd = f"python benchmarks/rater_pools.py --engines {' '.join(args.engines)} --scenario {args.scenario} "
    cmd += f"--seed-list {' '.join(map(str, args.seed_list))} --nuts-samples {args.nuts_samples}"
    write_json(Path(args.out) / name, {"scenario": args.scenario, "nuts": nuts, "rows": rows, "command": cmd})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument(
        "--engines", nargs="+", help="compare these engines on --scenario and --seed-list instead"
    )
    ap.add_argument("--scenario", default="near_random", choices=list(SCENARIOS))
    ap.add_argument("--seed-list", nargs="+", type=int, default=[0])
    ap.add_argument("--nuts-samples", type=int, default=200, help="NUTS warm-up and draws (one chain)")
    args = ap.parse_args()
    set_torch_threads(1)
    if args.engines:
        compare_engines(args)
        return
    t0 = time.perf_counter()
    load0 = os.getloadavg()
    summary: dict = {}
    for name, sc in SCENARIOS.items():
        summary[name] = {}
        for m in METHODS:
            rows = [run_one(name, sc, m, seed) for seed in range(args.seeds)]
            summary[name][m] = summarise(rows)
            print(name, m, {k: round(v["mean"], 3) for k, v in summary[name][m].items()}, flush=True)
    res = {
        "seeds": args.seeds,
        "d": D,
        "comparisons_per_rater": N_PER,
        "learner_lam": LEARNER_LAM,
        "scenarios": SCENARIOS,
        "summary": summary,
        "seconds": time.perf_counter() - t0,
        "load_average_start": load0,
        "load_average_end": os.getloadavg(),
        "command": f"python benchmarks/rater_pools.py --seeds {args.seeds}",
    }
    out = Path(args.out)
    write_json(out / "rater_pools.json", res)
    plot(summary, out / "rater_pools.png")
    print(f"{res['seconds']:.0f} s")


if __name__ == "__main__":
    main()

"""Evidence: tabular MOPO on preferences from simulated rater pools, hierarchical vs β-only vs pooled.

Per seed: 6 actions, two objectives with true utilities ``u_k ~ N(0, 1)`` (true preference probabilities
``P_k(y > y') = sigmoid(u_k(y) - u_k(y'))``), uniform reference, objective 1 primary, constraint on objective
0 with ``b`` the midpoint between the reference's and the best action's true value, tau 0.5. Rater ``i``
has a belief ``vartheta_i,k = u_k + eps / lam_i`` (eps ~ N(0, I)) and labels ``N_PER`` random pairs of
distinct actions with ``sigmoid(beta_i (vartheta_i,k(y) - vartheta_i,k(y')))``. An anchor (β = 1, λ = 1000,
declared known) labels 20 pairs in every pool. Pools (``N_PER`` = 60 labels per other rater):

(a) ``misinformed``: three informed raters (β = 2, λ = 5) and one deliberate-but-misinformed rater
    (β = 4, λ = 0.3) with twice as many labels;
(b) ``near_random``: two informed raters (β = 2, λ = 5) and three near-random raters (β = 0.1, λ = 5);
(c) ``trusted_few``: two trusted raters declared known (β = 1, λ = 1000) and six untrusted raters
    (β = 2, λ ∈ {0.3, 0.5}) of unknown competence;
(d) ``all_alike``: five raters with β = 2, λ = 5.

Methods: ``hierarchical`` (``competence: infer``: β_i and λ_i of every unknown rater, laplace-eb),
``beta_only`` (``competence: infer-beta``: β_i by marginal likelihood, λ = 1000) and ``pooled`` (the
empirical model: pooled win rates), and as a bound ``oracle``: the hierarchical model told every
rater's true (β, λ) (nothing left to infer about the raters). Metric: total variation between the exact
MOPO policy of each estimate (posterior mean for the Bradley–Terry fits) and the exact MOPO policy of the
true probabilities ("the clean-data policy"); when ``b`` is not strictly feasible under an estimate it is
lowered to 99 % of the way from the reference's to the best action's estimated value. Reported: mean TV
per pool and method, and the paired differences hierarchical − other (and oracle − β only) with 95 %
t-intervals over seeds.

    .venv/bin/python benchmarks/rater_mopo_pools.py              # 20 seeds (a few minutes on one core)
    .venv/bin/python benchmarks/rater_mopo_pools.py --seeds 3    # quick look

Writes benchmarks/results/raters/rater_mopo_pools.json and .png.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from bayescrl.mopo.preferences import DEFAULT_LAM, fit_bradley_terry, pairwise_to_action
from bayescrl.mopo.tabular import TabularProblem, solve_exact, total_variation
from bayescrl.raters import Rater
from bayescrl.utils import ConfigError, set_torch_threads, write_json
from bayescrl.utils.plotting import plt
from bayescrl.utils.spread import spread

OUT = Path(__file__).parent / "results" / "raters"
A, N_PER, N_ANCHOR, TAU, PRIMARY = 6, 60, 20, 0.5, 1
DT = torch.float64
#: per pool: (beta, lam, known, labels) per rater; the anchor (β = 1, λ = 1000, known) comes first
SCENARIOS = {
    "misinformed": [(2, 5, False, N_PER)] * 3 + [(4, 0.3, False, 2 * N_PER)],
    "near_random": [(2, 5, False, N_PER)] * 2 + [(0.1, 5, False, N_PER)] * 3,
    "trusted_few": [(1, 1000, True, N_PER)] * 2
    + [(2, lam, False, N_PER) for lam in (0.3, 0.5, 0.3, 0.5, 0.3, 0.5)],
    "all_alike": [(2, 5, False, N_PER)] * 5,
}
METHODS = ("hierarchical", "beta_only", "pooled", "oracle")


def simulate(pool, seed: int):
    """Utilities ``u [2, A]`` and the pool's records ``y, y', ind [N, 2], rater [N]``."""
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(2, A, generator=g, dtype=DT)
    raters = [(1.0, 1000.0, True, N_ANCHOR), *pool]
    ys, yps, inds, rts = [], [], [], []
    for i, (beta, lam, _known, n) in enumerate(raters):
        belief = u + torch.randn(2, A, generator=g, dtype=DT) / lam
        y = torch.randint(A, (n,), generator=g)
        yp = (y + torch.randint(1, A, (n,), generator=g)) % A  # a different action
        p = torch.sigmoid(beta * (belief[:, y] - belief[:, yp])).T  # [n, 2]
        inds.append((torch.rand(n, 2, generator=g, dtype=DT) < p).double())
        ys.append(y)
        yps.append(yp)
        rts.append(torch.full((n,), i))
    decl = [
        Rater(f"r{i}", 1.0 if known else None, lam if known else DEFAULT_LAM)
        for i, (_, lam, known, _) in enumerate(raters)
    ]
    oracle = [Rater(f"r{i}", float(beta), float(lam)) for i, (beta, lam, _, _) in enumerate(raters)]
    return u, torch.cat(ys), torch.cat(yps), torch.cat(inds), torch.cat(rts), decl, oracle


def policy(problem: TabularProblem, b: float) -> torch.Tensor:
    """Exact MOPO policy; ``b`` lowered to stay strictly feasible under the estimate (module docstring)."""
    p, q = problem.action_scores()
    ref_val, best = float(problem.ref @ q[:, 0]), float(q[:, 0].max())
    b_use = b if b < best else ref_val + 0.99 * (best - ref_val)
    try:
        return solve_exact(problem, TAU, torch.tensor([b_use], dtype=DT)).policy
    except ConfigError:  # degenerate estimate (every action equal): the reference's tilt on p
        w = problem.ref * torch.exp(p / TAU)
        return w / w.sum()


def one_seed(name: str, seed: int) -> dict[str, float]:
    u, y, yp, ind, rt, decl, oracle = simulate(SCENARIOS[name], seed)
    ref = torch.full((A,), 1.0 / A, dtype=DT)
    truth = pairwise_to_action(u, ref)  # [2, A]
    ref_val, best = float(ref @ truth[0]), float(truth[0].max())
    b = 0.5 * (ref_val + best)
    actions = [f"a{j}" for j in range(A)]

    def prob(scores=None):
        return TabularProblem(actions, y, yp, ind, PRIMARY, ref, rt, decl, scores=scores)

    clean = policy(prob((truth[PRIMARY], truth[0][:, None])), b)
    out = {}
    for method in METHODS:
        if method == "pooled":
            pol = policy(prob(), b)
        else:
            comp = "infer-beta" if method == "beta_only" else "infer"
            raters = oracle if method == "oracle" else decl
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = fit_bradley_terry(
                    y, yp, ind, rt, raters, ref, num_samples=400, competence=comp, seed=seed
                )
            pol = policy(prob((est.mean[PRIMARY], est.mean[0][:, None])), b)
        out[method] = float(total_variation(pol, clean))
    return out


def ci95(x: np.ndarray) -> list[float]:
    """The 95 % t-interval of the mean of ``x`` (:func:`bayescrl.utils.spread.spread`)."""
    return list(spread(x.tolist()).ci95)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    set_torch_threads()
    t0 = time.perf_counter()
    res: dict = {"seeds": args.seeds, "tau": TAU, "actions": A, "pools": {}}
    for name in SCENARIOS:
        rows = [one_seed(name, s) for s in range(args.seeds)]
        tv = {m: np.array([r[m] for r in rows]) for m in METHODS}
        entry = {
            "tv_mean": {m: float(v.mean()) for m, v in tv.items()},
            "tv_per_seed": {m: v.round(5).tolist() for m, v in tv.items()},
            "paired": {},
        }
        for first, other in (
            ("hierarchical", "beta_only"),
            ("hierarchical", "pooled"),
            ("oracle", "beta_only"),
        ):
            d = tv[first] - tv[other]
            entry["paired"][f"{first} - {other}"] = {"mean": float(d.mean()), "ci95": ci95(d)}
        res["pools"][name] = entry
        print(
            f"{name:12s} "
            + "  ".join(f"{m} {entry['tv_mean'][m]:.3f}" for m in METHODS)
            + "  |  "
            + "  ".join(
                f"{k}: {v['mean']:+.3f} [{v['ci95'][0]:+.3f}, {v['ci95'][1]:+.3f}]"
                for k, v in entry["paired"].items()
            ),
            flush=True,
        )
    res["wall_time_s"] = time.perf_counter() - t0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "rater_mopo_pools.json", res)
    p = plt()
    fig, ax = p.subplots(figsize=(7.5, 3.6))
    names = list(SCENARIOS)
    for j, m in enumerate(METHODS):
        xs = np.arange(len(names)) + (j - 1.5) * 0.2
        means = [res["pools"][n]["tv_mean"][m] for n in names]
        se = [np.std(res["pools"][n]["tv_per_seed"][m], ddof=1) / np.sqrt(args.seeds) for n in names]
        ax.bar(xs, means, 0.2, yerr=se, capsize=2, label=m)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("TV to the clean-data MOPO policy (mean ± se)")
    ax.set_title(f"tabular MOPO on rater pools ({args.seeds} seeds)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(out / "rater_mopo_pools.png", dpi=100)
    p.close(fig)
    print(f"wrote {out}/rater_mopo_pools.json, rater_mopo_pools.png ({res['wall_time_s']:.0f} s)")


if __name__ == "__main__":
    main()

"""Which competence prior for the hierarchical rater model: candidates measured on every simulated pool.

For each candidate prior of the unknown competences (the fields of
:class:`~bayescrl.inference.hierarchical.RaterPrior` that differ from the families' defaults), the
hierarchical fit (``competence: infer``, laplace-eb) is re-run on

* the tabular MOPO pools of ``benchmarks/rater_mopo_pools.py`` (same pools, seeds and MOPO problem):
  TV to the clean-data policy, paired against the β-only and pooled fits stored by that benchmark (they
  do not use the λ prior), the slope of the preference estimate on the truth (``rater_mopo_scale.py``:
  1 is calibrated), and the medians of the unknown raters' posterior-mean β_i and λ_i;
* the linear pools of ``benchmarks/rater_pools.py``: cosine to θ, 90 % coverage of θ's coordinates,
  Spearman correlation of the posterior-mean λ_i with the true λ_i, and the share of seeds in which the
  misinformed rater of (a) is flagged ``deliberate-but-misinformed``.

The priors are given in the units of each benchmark: MOPO keeps its β prior (log β ~ N(0, 1.5²), β = 1
labels with the true probabilities) and θ ~ N(0, 1.5² I); the linear pools keep log β ~ N(log 5, 1.5²).
A candidate sets the λ prior (and, for ``*_beta``, a pool level of β); ``independent_*`` are the
non-hierarchical priors log λ_i ~ N(loc, 1.5²).

    .venv/bin/python benchmarks/rater_prior_candidates.py                 # every candidate, 20 seeds
    .venv/bin/python benchmarks/rater_prior_candidates.py --only pool_eb  # one candidate

Writes benchmarks/results/raters/rater_prior_candidates.json (one entry per candidate; a run with
``--only`` updates its entries and keeps the others).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from rater_mopo_pools import (  # benchmarks/ is the script's folder
    PRIMARY,
    SCENARIOS,
    A,
    ci95,
    policy,
    simulate,
)
from rater_pools import N_PER, D, spearman
from rater_pools import SCENARIOS as LINEAR

from bayescrl.inference.hierarchical import PoolRater, RaterPrior, fit_rater_pool, simulate_pool
from bayescrl.mopo.preferences import pairwise_to_action
from bayescrl.mopo.tabular import TabularProblem, total_variation
from bayescrl.utils import set_torch_threads, write_json

OUT = Path(__file__).parent / "results" / "raters"
DT = torch.float64
#: candidate -> RaterPrior fields set on top of each benchmark's β prior
CANDIDATES: dict[str, dict[str, float]] = {
    "independent_median_1": {"lam_loc": 0.0, "lam_scale": 1.5, "lam_pool_scale": 0.0},
    "independent_median_30": {"lam_loc": math.log(30.0), "lam_scale": 1.5, "lam_pool_scale": 0.0},
    "pool_eb": {"lam_loc": 0.0, "lam_scale": 1.5, "lam_pool_scale": 10.0},
    "pool_eb_tight": {"lam_loc": 0.0, "lam_scale": 1.0, "lam_pool_scale": 10.0},
    "pool_eb_beta": {"lam_loc": 0.0, "lam_scale": 1.5, "lam_pool_scale": 10.0, "beta_pool_scale": 10.0},
}


def mopo_seed(name: str, seed: int, prior: RaterPrior) -> dict:
    u, y, yp, ind, rt, decl, _oracle = simulate(SCENARIOS[name], seed)
    ref = torch.full((A,), 1.0 / A, dtype=DT)
    truth = pairwise_to_action(u, ref)
    ref_val, best = float(ref @ truth[0]), float(truth[0].max())
    b = 0.5 * (ref_val + best)
    actions = [f"a{j}" for j in range(A)]

    def prob(scores):
        return TabularProblem(actions, y, yp, ind, PRIMARY, ref, rt, decl, scores=scores)

    clean = policy(prob((truth[PRIMARY], truth[0][:, None])), b)
    eye = torch.eye(A, dtype=DT)
    pool_raters = [
        {"id": r.id} if r.beta is None else {"id": r.id, "beta": float(r.beta), "lam": float(r.lam)}
        for r in decl
    ]
    draws, lam, beta = [], [], []
    for k in range(ind.shape[1]):  # as bayescrl.mopo.preferences._fit_pool_rewards, num_samples 400
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                post = fit_rater_pool(
                    eye[yp], eye[y], ind[:, k].double(), rt, pool_raters, prior,
                    mu0=torch.zeros(A, dtype=DT), cov0=1.5**2 * torch.eye(A, dtype=DT), num_draws=400,
                    seed=seed + k,
                )  # fmt: skip
            except RuntimeError:  # counted in `failed`; the seed is left out of the paired differences
                return {"failed": True}
        draws.append(post.flat("theta")[:400].double())
        unknown = [i for i, r in enumerate(decl) if r.beta is None]
        lam += [float(post.flat("lam").mean(0)[i]) for i in unknown]
        beta += [float(post.flat("beta").mean(0)[i]) for i in unknown]
    theta = torch.stack(draws, 1)
    est = pairwise_to_action(theta.transpose(0, 1), ref).transpose(0, 1).mean(0)
    e, t = est - est.mean(-1, keepdim=True), truth - truth.mean(-1, keepdim=True)
    tv = float(total_variation(policy(prob((est[PRIMARY], est[0][:, None])), b), clean))
    return {
        "failed": False,
        "tv": tv,
        "slope": float((e * t).sum() / (t * t).sum()),
        "lam": lam,
        "beta": beta,
    }


def linear_seed(name: str, seed: int, prior: RaterPrior) -> dict:
    sc = LINEAR[name]
    s = simulate_pool(D, sc["betas"], sc["lams"], N_PER, seed=seed)
    R = len(sc["betas"])
    raters = [
        PoolRater(f"r{i}", beta=sc["betas"][i], lam=sc["lams"][i]) if i in sc["known"] else f"r{i}"
        for i in range(R)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            post = fit_rater_pool(s["X0"], s["X1"], s["y"], s["rater"], raters, prior, seed=seed)
        except RuntimeError:  # counted in `failed` (torch's LinAlgError is a RuntimeError)
            return {"failed": 1.0}
    lo, hi = post.interval("theta")
    out = {
        "failed": 0.0,
        "cosine": float(torch.nn.functional.cosine_similarity(post.theta_mean, s["theta"], 0)),
        "coverage90": float(((s["theta"] >= lo) & (s["theta"] <= hi)).double().mean()),
    }
    unknown = [i for i in range(R) if i not in sc["known"]]
    if len(set(sc["lams"][i] for i in unknown)) > 1:
        lam = post.flat("lam").mean(0)
        out["lam_spearman"] = spearman([float(lam[i]) for i in unknown], [sc["lams"][i] for i in unknown])
    if name == "misinformed":
        v = post.verdicts()
        out["flagged"] = float(v[-1] == "deliberate-but-misinformed")
        out["false_flags"] = float(np.mean([x == "deliberate-but-misinformed" for x in v[:-1]]))
    return out


def run(fields: dict[str, float], seeds: int, stored: dict, parts: list[str], res: dict) -> dict:
    res.update(prior_fields=fields)
    mopo_prior = replace(RaterPrior(beta_loc=0.0, beta_scale=1.5), **fields)
    for name in SCENARIOS if "mopo" in parts else ():
        all_rows = [mopo_seed(name, s, mopo_prior) for s in range(seeds)]
        ok = [s for s in range(seeds) if not all_rows[s]["failed"]]
        rows = [all_rows[s] for s in ok]
        tv = np.array([r["tv"] for r in rows])
        entry = {
            "failed_seeds": [s for s in range(seeds) if all_rows[s]["failed"]],
            "tv_mean": float(tv.mean()),
            "slope_mean": float(np.mean([r["slope"] for r in rows])),
            "lam_median": float(np.median([v for r in rows for v in r["lam"]])),
            "beta_median": float(np.median([v for r in rows for v in r["beta"]])),
            "tv_per_seed": tv.round(5).tolist(),
        }
        for other in ("beta_only", "pooled"):
            base = np.array([stored["pools"][name]["tv_per_seed"][other][s] for s in ok])
            d = tv - base
            entry[f"minus_{other}"] = {"mean": float(d.mean()), "ci95": ci95(d)}
        res.setdefault("mopo", {})[name] = entry
        print(
            f"  mopo {name:12s} failed {len(entry['failed_seeds'])} tv {entry['tv_mean']:.3f} "
            f"slope {entry['slope_mean']:.3f} "
            f"λ̂ {entry['lam_median']:.2f} β̂ {entry['beta_median']:.2f} | "
            + "  ".join(
                f"−{o}: {entry[f'minus_{o}']['mean']:+.3f} [{entry[f'minus_{o}']['ci95'][0]:+.3f}, "
                f"{entry[f'minus_{o}']['ci95'][1]:+.3f}]"
                for o in ("beta_only", "pooled")
            ),
            flush=True,
        )
    lin_prior = replace(RaterPrior(), **fields)
    for name in LINEAR if "linear" in parts else ():
        rows = [linear_seed(name, s, lin_prior) for s in range(seeds)]
        entry = {}
        for key in dict.fromkeys(k for r in rows for k in r):
            v = np.array([r[key] for r in rows if key in r], dtype=float)
            entry[key] = {"mean": float(v.mean()), "sd": float(v.std(ddof=1))}
        res.setdefault("linear", {})[name] = entry
        print(f"  linear {name:12s}", {k: round(v["mean"], 3) for k, v in entry.items()}, flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--only", nargs="*", default=None, help="candidates to run (default: all)")
    ap.add_argument("--parts", nargs="*", default=["mopo", "linear"], help="mopo, linear (default: both)")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    set_torch_threads(1)
    out = Path(args.out)
    stored = json.loads((OUT / "rater_mopo_pools.json").read_text())
    path = out / "rater_prior_candidates.json"
    res = json.loads(path.read_text()) if path.exists() else {}
    res.setdefault("candidates", {})
    for name in args.only or list(CANDIDATES):
        t0, load0 = time.perf_counter(), os.getloadavg()[0]
        print(name, CANDIDATES[name], flush=True)
        entry = run(CANDIDATES[name], args.seeds, stored, args.parts, res["candidates"].get(name, {}))
        entry.update(seeds=args.seeds)
        for key, val in (("seconds", time.perf_counter() - t0), ("load_average_start", load0)):
            entry[key] = {**(entry.get(key) or {}), **{p: val for p in args.parts}}
        res["candidates"][name] = entry
        res["command"] = "python benchmarks/rater_prior_candidates.py"
        write_json(path, res)
        print(f"  {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()

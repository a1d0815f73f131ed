"""Diagnosis: why the hierarchical rater model ties (near-random raters) or loses slightly (all raters alike)
to β-only inference in the tabular MOPO pools of ``benchmarks/rater_mopo_pools.py``.

Same pools, seeds and MOPO problem as that benchmark (pools (b) ``near_random`` and (d) ``all_alike``). Per
seed and method, the action-level preference estimate p̂_k(a) (posterior mean) is compared with the truth
p_k(a) of the true utilities (both centred over actions, both objectives): mean squared error, cosine
(direction) and the regression slope of p̂ on p (scale: 1 is calibrated, > 1 over-confident), next to the
MOPO TV of that benchmark. Methods: ``beta_only`` (``competence: infer-beta``), ``hierarchical``
(``competence: infer``, the default priors of MOPO: log β ~ N(0, 1.5²), log λ_i ~ N(μ_λ, 1.5²) with the
pool's level μ_λ ~ N(0, 10²)) and three hierarchical variants refitted with independent λ priors (no pool
level): ``independent_lam_median_1`` (log λ ~ N(0, 1.5²), the earlier default), ``lam_prior_median_30``
(log λ ~ N(log 30, 1.5²): raters presumed informed) and ``beta_prior_scale_10`` (log β ~ N(0, 10²):
nearly flat, λ as the earlier default). For the
hierarchical fits also the median over seeds and unknown raters of the posterior-mean λ_i and β_i (truth:
λ = 5, β = 2 for the informed raters, β = 0.1 for the near-random ones).

    .venv/bin/python benchmarks/rater_mopo_scale.py             # 20 seeds (a few minutes on one core)

Writes benchmarks/results/raters/rater_mopo_scale.json.
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from rater_mopo_pools import (  # benchmarks/ is the script's folder
    DT,
    PRIMARY,
    SCENARIOS,
    A,
    ci95,
    policy,
    simulate,
)

from bayescrl.inference.hierarchical import RaterPrior, fit_rater_pool
from bayescrl.mopo.preferences import fit_bradley_terry, pairwise_to_action
from bayescrl.mopo.tabular import TabularProblem, total_variation
from bayescrl.utils import set_torch_threads, write_json

OUT = Path(__file__).parent / "results" / "raters"
POOLS = ("near_random", "all_alike")
VARIANTS = {  # independent (non-hierarchical) λ priors: lam_pool_scale = 0
    "independent_lam_median_1": RaterPrior(beta_loc=0.0, beta_scale=1.5, lam_pool_scale=0.0),
    "lam_prior_median_30": RaterPrior(
        beta_loc=0.0, beta_scale=1.5, lam_loc=math.log(30.0), lam_pool_scale=0.0
    ),
    "beta_prior_scale_10": RaterPrior(beta_loc=0.0, beta_scale=10.0, lam_pool_scale=0.0),
}


def _variant_fit(y, yp, ind, rt, decl, ref, prior: RaterPrior, seed: int):
    """``competence: infer`` of tabular MOPO (one-hot features, θ ~ N(0, 1.5² I) per objective) with
    ``prior`` on the unknown competences: the posterior mean of p_k(a) and the fitted pools."""
    eye = torch.eye(A, dtype=DT)
    pool_raters = [
        {"id": r.id} if r.beta is None else {"id": r.id, "beta": float(r.beta), "lam": float(r.lam)}
        for r in decl
    ]
    draws, posts = [], []
    for k in range(ind.shape[1]):
        post = fit_rater_pool(
            eye[yp],
            eye[y],
            ind[:, k],
            rt,
            pool_raters,
            prior,
            mu0=torch.zeros(A, dtype=DT),
            cov0=1.5**2 * torch.eye(A, dtype=DT),
            num_draws=400,
            seed=seed + k,
        )
        draws.append(post.flat("theta")[:400])
        posts.append(post)
    theta = torch.stack(draws, 1)  # [S, K, A]
    p = pairwise_to_action(theta.transpose(0, 1), ref).transpose(0, 1)
    return p.mean(0), posts


def _scores(est: torch.Tensor, truth: torch.Tensor) -> dict[str, float]:
    e = est - est.mean(-1, keepdim=True)
    t = truth - truth.mean(-1, keepdim=True)
    return {
        "mse": float(((e - t) ** 2).mean()),
        "cosine": float(torch.nn.functional.cosine_similarity(e.flatten(), t.flatten(), 0)),
        "slope": float((e * t).sum() / (t * t).sum()),
    }


def one_seed(name: str, seed: int) -> dict:
    u, y, yp, ind, rt, decl, _oracle = simulate(SCENARIOS[name], seed)
    ref = torch.full((A,), 1.0 / A, dtype=DT)
    truth = pairwise_to_action(u, ref)
    ref_val, best = float(ref @ truth[0]), float(truth[0].max())
    b = 0.5 * (ref_val + best)
    actions = [f"a{j}" for j in range(A)]

    def prob(scores):
        return TabularProblem(actions, y, yp, ind, PRIMARY, ref, rt, decl, scores=scores)

    clean = policy(prob((truth[PRIMARY], truth[0][:, None])), b)

    def tv(est):
        return float(total_variation(policy(prob((est[PRIMARY], est[0][:, None])), b), clean))

    out: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for method, comp in (("beta_only", "infer-beta"), ("hierarchical", "infer")):
            est = fit_bradley_terry(y, yp, ind, rt, decl, ref, num_samples=400, competence=comp, seed=seed)
            out[method] = {**_scores(est.mean, truth), "tv": tv(est.mean)}
            if est.pools:
                out[method]["lam"] = [float(v) for p in est.pools for v in p.flat("lam").mean(0)[1:]]
                out[method]["beta"] = [float(v) for p in est.pools for v in p.flat("beta").mean(0)[1:]]
        for method, prior in VARIANTS.items():
            est, posts = _variant_fit(y, yp, ind, rt, decl, ref, prior, seed)
            out[method] = {**_scores(est, truth), "tv": tv(est)}
            out[method]["lam"] = [float(v) for p in posts for v in p.flat("lam").mean(0)[1:]]
            out[method]["beta"] = [float(v) for p in posts for v in p.flat("beta").mean(0)[1:]]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    set_torch_threads()
    t0 = time.perf_counter()
    res: dict = {"seeds": args.seeds, "pools": {}}
    for name in POOLS:
        rows = [one_seed(name, s) for s in range(args.seeds)]
        entry: dict = {}
        for method in rows[0]:
            m = {k: np.array([r[method][k] for r in rows]) for k in ("mse", "cosine", "slope", "tv")}
            entry[method] = {k: float(v.mean()) for k, v in m.items()}
            if "lam" in rows[0][method]:
                entry[method]["lam_median"] = float(np.median([v for r in rows for v in r[method]["lam"]]))
                entry[method]["beta_median"] = float(np.median([v for r in rows for v in r[method]["beta"]]))
            if method != "beta_only":
                for k in ("mse", "slope", "tv"):
                    d = m[k] - np.array([r["beta_only"][k] for r in rows])
                    entry[method][f"{k}_minus_beta_only"] = {"mean": float(d.mean()), "ci95": ci95(d)}
        res["pools"][name] = entry
        for method, e in entry.items():
            extra = f"  λ̂ {e['lam_median']:.2f} β̂ {e['beta_median']:.2f}" if "lam_median" in e else ""
            print(
                f"{name:12s} {method:20s} mse {e['mse']:.4f} cos {e['cosine']:.4f} slope {e['slope']:.3f} "
                f"tv {e['tv']:.3f}{extra}",
                flush=True,
            )
    res["wall_time_s"] = time.perf_counter() - t0
    res["command"] = f"python benchmarks/rater_mopo_scale.py --seeds {args.seeds}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "rater_mopo_scale.json", res)


if __name__ == "__main__":
    main()

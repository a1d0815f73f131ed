"""MOPO on Bayesian preference estimates from raters of unknown competence (tabular benchmark).

Three raters label the pairs of each data set with ``P(y > y') = sigmoid(beta_i (u_k(y) - u_k(y')))``: an
expert (``beta = 1``, the scale of the true preference probabilities) with few labels and two noisy raters
(``beta = 0.3`` and ``0.15``) with many. Data sets: the sanity check's D1 (total order), D2 (partial order),
D3 (unobserved action y3; objective 2 a tie), with true utilities that realise their orders, and a random
one (8 actions, all 28 pairs, utilities ~ N(0, 1)). Reference policy uniform (y3 never appears in D3),
objective 2 primary, constraint on objective 1 with ``b`` the midpoint between the reference's and the best
action's true constraint value. Estimators: ``empirical`` (pooled win rates), ``bradley-terry`` with known
competence (every beta given) and with inferred competence (the expert's beta given, the others by marginal
maximum likelihood), laplace engine.

Metrics per data set over seeds (``--seeds``, default 10): the total variation between the exact MOPO policy
of each estimate and the exact MOPO policy of the true probabilities (tau 0.1 and 1); the ratio
TV(bradley-terry inferred) / TV(empirical) per data set and tau. When ``b`` is not strictly feasible under an
estimate (counted in ``b_infeasible_runs``) the exact solver refuses it and the dual ``D(lam)`` decreases
without bound, so dual descent (the stochastic solvers) drives ``lam -> inf``: the reported policy is that
limit, ``pi ∝ pi_ref exp(p / tau)`` on the actions that maximise the estimated constraint objective
(``tv_mean``). ``tv_mean_b_lowered`` is the earlier rule, ``b`` lowered to 99 % of the way from the
reference's to the best action's estimated constraint value; the two differ only on infeasible runs. The
true constraint value of the policies (with the lower posterior quantile 0.1 for the constraint as well:
``bt_infer_lq``); Pareto fronts by sweeping the multiplier (``pi ∝ pi_ref exp((p + lam q)/tau)``, lam in 0
and 10^[-2, 2]), evaluated under the true probabilities, with hypervolumes against the exact front's.

Each (data set, seed) is one call of :func:`seed_job` on the sweep engine
(:func:`bayescrl.sweep.calls.map_calls`, ``--workers`` at a time), seeded by its own data set and seed.
The same runs, one per temperature, are the sweep ``examples/sweeps/mopo_bayes.yaml`` (:func:`sweep_job`),
whose ``bayescrl report`` gives the README's table of TV ratios.

Usage::

    .venv/bin/python benchmarks/mopo_bayes.py                 # 10 seeds (270 s on a loaded 2-core box)
    .venv/bin/python benchmarks/mopo_bayes.py --seeds 2       # quick look

Writes ``benchmarks/results/mopo/bayes_prefs.json`` and ``bayes_prefs.png`` (per data set: learned vs exact
policy, and the Pareto fronts of seed 0 with the exact front).
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import numpy as np
import torch

from bayescrl.mopo import objective as O
from bayescrl.mopo import pareto
from bayescrl.mopo.preferences import DEFAULT_LAM, empirical_scores, fit_bradley_terry, pairwise_to_action
from bayescrl.mopo.tabular import TabularProblem, solve_exact, total_variation
from bayescrl.raters import Rater
from bayescrl.utils import ConfigError, set_torch_threads, write_json

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "mopo"
log = logging.getLogger("mopo_bayes")
DT = torch.float64
PRIMARY = 1
#: (beta, labels per pair) of the expert and the two noisy raters, per data set size
RATERS = {"small": [(1.0, 10), (0.3, 60), (0.15, 60)], "large": [(1.0, 4), (0.3, 20), (0.15, 20)]}
METHODS = ("empirical", "bt_known", "bt_infer")
TAUS = (0.1, 1.0)
SETS = ("D1", "D2", "D3", "random8")


def datasets(gen: torch.Generator) -> dict[str, tuple[torch.Tensor, list[tuple[int, int]], str]]:
    """True utilities ``u[K=2, A]``, the compared pairs, and the rater-budget key of each data set."""
    s = 1.5
    out = {
        "D1": (torch.tensor([[1.0, 0.0, -1.0], [1.0, 0.0, -1.0]]) * s, [(0, 1), (1, 2), (0, 2)], "small"),
        "D2": (torch.tensor([[1.0, -1.0, 0.0], [0.0, -1.0, 1.0]]) * s, [(0, 1), (0, 2), (1, 2)], "small"),
        "D3": (torch.tensor([[0.5, -0.5, 0.0], [0.0, 0.0, 0.0]]) * s, [(0, 1)], "small"),
    }
    a_n = 8
    u = torch.randn(2, a_n, generator=gen, dtype=DT)
    out["random8"] = (u, [(i, j) for i in range(a_n) for j in range(i + 1, a_n)], "large")
    return {k: (v[0].to(DT), v[1], v[2]) for k, v in out.items()}


def simulate(u, pairs, budget, gen):
    """Records ``y, y' [N]``, ``ind [N, K]``, ``rater [N]``: each rater labels every pair ``n`` times
    (random order of the two actions)."""
    ys, yps, labs, rts = [], [], [], []
    for r, (beta, n) in enumerate(RATERS[budget]):
        for i, j in pairs:
            flip = torch.rand(n, generator=gen) < 0.5
            y = torch.where(flip, j, i)
            yp = torch.where(flip, i, j)
            prob = torch.sigmoid(beta * (u[:, y] - u[:, yp])).T
            labs.append((torch.rand(prob.shape, generator=gen, dtype=DT) < prob).to(DT))
            ys.append(y)
            yps.append(yp)
            rts.append(torch.full((n,), r))
    return torch.cat(ys), torch.cat(yps), torch.cat(labs), torch.cat(rts)


def split(pk: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``p_k [K, A]`` -> primary ``p [A]``, constraint ``q [A, 1]``."""
    return pk[PRIMARY], pk[1 - PRIMARY][:, None]


FALLBACKS = ("limit", "lower_b")


def exact_policy(pk, ref, tau, b, fallback: str = "limit") -> tuple[torch.Tensor, bool]:
    """Exact MOPO policy (``solve_exact``) of the scores ``pk`` and whether ``b`` is infeasible under them.

    Infeasible ``b`` (``b >= max_a q(a)``): ``fallback="limit"`` returns the limit of ``pi_lam`` as ``lam ->
    inf`` (where dual descent goes: ``D`` decreases without bound), ``pi ∝ pi_ref exp(p / tau)`` on
    ``argmax q``; ``"lower_b"`` solves with ``b`` lowered 99 % of the way from ``E_ref[q]`` to ``max q``."""
    p, q = split(pk)
    q_ref, q_max = float(ref @ q[:, 0]), float(q.max())
    infeasible = b >= q_max - 1e-9
    if infeasible and fallback == "limit":
        top = q[:, 0] >= q_max - 1e-12
        w = ref * torch.exp((p - p[top].max()) / tau) * top
        return w / w.sum(), True
    b_eff = q_ref + 0.99 * (q_max - q_ref) if infeasible else b
    a = torch.arange(ref.shape[0])
    prob = TabularProblem([str(i) for i in range(ref.shape[0])], a, a, pk.T, PRIMARY, ref, scores=(p, q))
    try:
        return solve_exact(prob, tau, torch.tensor([b_eff], dtype=DT)).policy, bool(infeasible)
    except ConfigError:  # q constant: any policy; the reference is the solution of the primary alone at lam 0
        return ref * O.rho_star(p, q, torch.zeros(1, dtype=DT), tau, ref), True


def front(pk, ref, tau, truth) -> np.ndarray:
    """Policies ``pi_lam`` over a multiplier sweep, evaluated under the true ``(q, p)``: points ``[L, 2]``."""
    p, q = split(pk)
    lams = torch.cat([torch.zeros(1, dtype=DT), torch.logspace(-2, 2, 40, dtype=DT)])[:, None]
    pol = ref * O.rho_star(p, q, lams, tau, ref)  # [L, A]
    tp, tq = split(truth)
    return torch.stack([pol @ tq[:, 0], pol @ tp], -1).numpy()


def pareto_front(truth) -> np.ndarray:
    """The true achievable front: non-dominated mixtures of the actions' true ``(q, p)`` points (the upper
    hull found by scalarisation, densified linearly)."""
    tp, tq = split(truth)
    pts = torch.stack([tq[:, 0], tp], -1).numpy()
    w = np.linspace(0.0, 1.0, 401)[:, None]
    best = np.unique(np.argmax(w * pts[None, :, 0] + (1 - w) * pts[None, :, 1], axis=1))
    vert = pts[best]
    vert = vert[pareto.non_dominated(vert)]
    return pareto.densify_front(vert) if len(vert) > 1 else vert


def _ratio(summary: dict, key: str) -> dict[str, float]:
    """Mean TV of ``bt_infer`` over that of ``empirical``, per tau."""
    bt, emp = summary["bt_infer"][key], summary["empirical"][key]
    return {t: bt[t] / max(emp[t], 1e-12) for t in emp}


def _wins(per: dict, key: str) -> dict[str, int]:
    """Seeds on which ``bt_infer`` is closer than ``empirical``, per tau."""
    bt, emp = per["bt_infer"][key], per["empirical"][key]
    return {t: int(sum(a < e for a, e in zip(bt[t], emp[t], strict=True))) for t in emp}


def one_seed(name: str, seed: int, taus: tuple[float, ...] = TAUS) -> dict:
    """Data set ``name`` (D1, D2, D3, random8), seed ``seed``: the three estimates of the preference
    probabilities, the exact MOPO policy of each at every ``tau`` and its TV to the exact policy of the true
    probabilities; fronts and hypervolumes at ``taus[0]``. Everything is seeded by ``(name, seed)`` alone
    (the data set's utilities by ``7 + seed``, the labels by ``1000 + seed``, the posterior by ``seed``),
    so a seed's numbers do not depend on which other seeds or data sets run, or where."""
    t0 = time.perf_counter()
    gen = torch.Generator().manual_seed(1000 + seed)
    u, pairs, budget = datasets(torch.Generator().manual_seed(7 + seed))[name]
    a_n = u.shape[1]
    ref = torch.full((a_n,), 1.0 / a_n, dtype=DT)
    truth = pairwise_to_action(u, ref)  # [K, A]
    tq = truth[1 - PRIMARY]
    b = float(0.5 * (ref @ tq + tq.max()))
    y, yp, ind, rt = simulate(u, pairs, budget, gen)
    ya = torch.cat([y, yp])
    inda = torch.cat([ind, 1 - ind])
    emp = torch.stack([empirical_scores(ya, inda[:, k], inda[:, :0], ref)[0] for k in range(2)])
    known = [Rater(f"r{i}", beta, DEFAULT_LAM) for i, (beta, _) in enumerate(RATERS[budget])]
    infer = [known[0]] + [Rater(r.id, None, DEFAULT_LAM) for r in known[1:]]
    est_k = fit_bradley_terry(y, yp, ind, rt, known, ref, num_samples=1000, seed=seed)
    est_i = fit_bradley_terry(
        y, yp, ind, rt, infer, ref, num_samples=1000, seed=seed, competence="infer-beta"
    )
    scores = {"empirical": emp, "bt_known": est_k.mean, "bt_infer": est_i.mean}
    lq = est_i.mean.clone()
    lq[1 - PRIMARY] = est_i.quantile(0.1)[1 - PRIMARY]
    scores["bt_infer_lq"] = lq
    rec: dict = {"b": b, "inferred_beta": est_i.beta, "tv": {}, "tv_lb": {}, "G_true": {}, "infeasible": {}}
    for m in scores:
        for k in ("tv", "tv_lb", "G_true"):
            rec[k][m] = {}
    for tau in taus:
        target, _ = exact_policy(truth, ref, tau, b)
        for m, pk in scores.items():
            pol, infeasible = exact_policy(pk, ref, tau, b)
            rec["tv"][m][str(tau)] = float(total_variation(pol, target))
            pol_lb, _ = exact_policy(pk, ref, tau, b, "lower_b")
            rec["tv_lb"][m][str(tau)] = float(total_variation(pol_lb, target))
            rec["G_true"][m][str(tau)] = float(pol @ tq)
            rec["infeasible"][m] = bool(infeasible)  # b >= max q: the same at every tau
            if tau == taus[0]:
                rec.setdefault("policies", {})[m] = pol.tolist()
        if tau == taus[0]:
            rec["policies"]["exact"] = target.tolist()
    tf = front(truth, ref, taus[0], truth)  # exact MOPO (true probabilities), multiplier sweep
    pf = pareto_front(truth)
    pts = {m: front(scores[m], ref, taus[0], truth) for m in METHODS}
    allp = np.concatenate([tf, pf, *pts.values()])
    ref_pt = allp.min(0) - 0.01 * (allp.max(0) - allp.min(0) + 1e-12)
    hv_true, hv_pf = pareto.hypervolume(tf, ref_pt), pareto.hypervolume(pf, ref_pt)
    nan = float("nan")
    rec["hv_exact_over_pareto"] = hv_true / hv_pf if hv_pf > 0 else nan
    rec["hv"] = {m: pareto.hypervolume(pts[m], ref_pt) / hv_true if hv_true > 0 else nan for m in METHODS}
    rec["hv_pareto"] = {m: pareto.hypervolume(pts[m], ref_pt) / hv_pf if hv_pf > 0 else nan for m in METHODS}
    rec["max_abs_error"] = {m: float((scores[m] - truth).abs().max()) for m in METHODS}
    rec["fronts"] = {"pareto": pf.tolist(), "exact": tf.tolist(), **{m: v.tolist() for m, v in pts.items()}}
    rec["wall_s"] = time.perf_counter() - t0
    return rec


def seed_job(job: dict) -> dict:
    """One ``(data set, seed)`` of :func:`run` (a call of the sweep engine, :func:`map_calls`)."""
    return one_seed(job["data"], int(job["seed"]))


def validate_job(job: dict) -> None:
    """The sweep engine's check of every job before any runs (``command: call``)."""
    if job.get("data") not in SETS:
        raise ValueError(f"data = {job.get('data')!r}: unknown data set; choose one of {list(SETS)}")
    if not isinstance(job.get("seed"), int) or job["seed"] < 0:
        raise ValueError(f"seed = {job.get('seed')!r}: must be an integer >= 0")
    tau = job.get("tau")
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not tau > 0 or tau == float("inf"):
        raise ValueError(f"tau = {tau!r}: must be a number > 0")


def sweep_job(job: dict) -> dict:
    """One run of ``examples/sweeps/mopo_bayes.yaml``: data set ``job["data"]``, seed ``job["seed"]`` at one
    temperature ``job["tau"]`` (fronts and hypervolumes at that tau too), the numbers :func:`run` reports per
    seed, flat per method: ``tv.<method>`` (TV to the exact MOPO policy of the true probabilities),
    ``tv_b_lowered``, ``G_true`` (true constraint value), ``constraint_met``, ``b_infeasible`` (1 when ``b``
    is infeasible under the estimate), ``max_abs_error``, hypervolume ratios, and ``bt_infer_closer`` (1
    when Bradley-Terry with inferred competence is closer than the empirical estimate)."""
    validate_job(job)
    tau = float(job["tau"])
    rec = one_seed(job["data"], int(job["seed"]), (tau,))
    t = str(tau)
    tv = {m: v[t] for m, v in rec["tv"].items()}
    g = {m: v[t] for m, v in rec["G_true"].items()}
    return {
        "data": job["data"],
        "seed": job["seed"],
        "tau": tau,
        "b": rec["b"],
        "tv": tv,
        "tv_b_lowered": {m: v[t] for m, v in rec["tv_lb"].items()},
        "bt_infer_closer": float(tv["bt_infer"] < tv["empirical"]),
        "G_true": g,
        "constraint_met": {m: float(x >= rec["b"] - 1e-6) for m, x in g.items()},
        "b_infeasible": {m: float(x) for m, x in rec["infeasible"].items()},
        "max_abs_error": rec["max_abs_error"],
        "hypervolume_over_exact_mopo": rec["hv"],
        "hypervolume_over_true_front": rec["hv_pareto"],
        "exact_mopo_hypervolume_over_true_front": rec["hv_exact_over_pareto"],
        "inferred_beta": rec["inferred_beta"],
        "policies": rec["policies"],
        "wall_s": rec["wall_s"],
    }


def run(seeds: int, out: Path, workers: int = 1) -> dict:
    """Every ``(data set, seed)`` on the sweep engine (:func:`bayescrl.sweep.calls.map_calls`: each a call in
    its own process, ``workers`` at a time), then the summaries per data set over the seeds."""
    from bayescrl.sweep.calls import map_calls

    res: dict = {"raters": RATERS, "taus": TAUS, "primary": PRIMARY, "seeds": seeds, "sets": {}}
    plot_data = {}
    t_all = time.perf_counter()
    jobs = [{"data": name, "seed": seed} for name in SETS for seed in range(seeds)]
    ids = [f"{j['data']}_s{j['seed']}" for j in jobs]
    recs = map_calls(f"{Path(__file__).resolve()}:seed_job", jobs, workers=workers, ids=ids)
    for name in SETS:
        per_seed = [r for j, r in zip(jobs, recs, strict=True) if j["data"] == name]
        b = per_seed[-1]["b"]
        summary = {}
        for m in (*METHODS, "bt_infer_lq"):
            tv = {str(t): [r["tv"][m][str(t)] for r in per_seed] for t in TAUS}
            tv_lb = {str(t): [r["tv_lb"][m][str(t)] for r in per_seed] for t in TAUS}
            g_true = [r["G_true"][m][str(TAUS[0])] for r in per_seed]
            summary[m] = {
                "tv_mean": {t: float(np.mean(x)) for t, x in tv.items()},
                "tv_per_seed": tv,
                "tv_mean_b_lowered": {t: float(np.mean(x)) for t, x in tv_lb.items()},
                "tv_per_seed_b_lowered": tv_lb,
                "G_true_mean": float(np.mean(g_true)),
                # each seed against its own b (random8 draws its utilities, so b, per seed)
                "constraint_met_fraction": float(
                    np.mean([g >= r["b"] - 1e-6 for g, r in zip(g_true, per_seed, strict=True)])
                ),
                "b_infeasible_runs": sum(int(r["infeasible"][m]) for r in per_seed),
            }
            if m in METHODS:
                summary[m]["max_abs_error_mean"] = float(np.mean([r["max_abs_error"][m] for r in per_seed]))
                summary[m]["hypervolume_over_exact_mopo_mean"] = float(
                    np.nanmean([r["hv"][m] for r in per_seed])
                )
                summary[m]["hypervolume_over_true_front_mean"] = float(
                    np.nanmean([r["hv_pareto"][m] for r in per_seed])
                )
        per = {
            m: {"tv": summary[m]["tv_per_seed"], "tv_lb": summary[m]["tv_per_seed_b_lowered"]}
            for m in summary
        }
        ratio, wins = _ratio(summary, "tv_mean"), _wins(per, "tv")
        pol0, fronts0 = per_seed[0]["policies"], per_seed[0]["fronts"]
        res["sets"][name] = {
            "b": b,  # the last seed's (random8: each seed has its own, b_per_seed)
            "b_per_seed": [r["b"] for r in per_seed],
            "methods": summary,
            "tv_ratio_bt_infer_over_empirical": ratio,
            "tv_ratio_bt_infer_over_empirical_b_lowered": _ratio(summary, "tv_mean_b_lowered"),
            "bt_infer_closer_seeds_b_lowered": _wins(per, "tv_lb"),
            "exact_mopo_hypervolume_over_true_front_mean": float(
                np.nanmean([r["hv_exact_over_pareto"] for r in per_seed])
            ),
            "bt_infer_closer_seeds": wins,
            "inferred_beta_per_seed": [r["inferred_beta"] for r in per_seed],
            "policies_seed0_tau0.1": pol0,
            "fronts_seed0": fronts0,
            "wall_s": float(sum(r["wall_s"] for r in per_seed)),  # compute time of its seeds' calls
        }
        plot_data[name] = (pol0, fronts0)
        log.warning(
            "%s: TV empirical %s, bt_known %s, bt_infer %s; ratio %s",
            name,
            {t: round(v, 4) for t, v in summary["empirical"]["tv_mean"].items()},
            {t: round(v, 4) for t, v in summary["bt_known"]["tv_mean"].items()},
            {t: round(v, 4) for t, v in summary["bt_infer"]["tv_mean"].items()},
            {t: round(v, 3) for t, v in ratio.items()},
        )
    res["tv_ratio_bt_infer_over_empirical"] = {
        n: r["tv_ratio_bt_infer_over_empirical"] for n, r in res["sets"].items()
    }  # data set -> tau -> ratio (mean TV over seeds)
    res["bt_infer_closer_on_every_set"] = {
        str(t): all(r[str(t)] < 1 for r in res["tv_ratio_bt_infer_over_empirical"].values()) for t in TAUS
    }
    res["wall_s"] = time.perf_counter() - t_all
    write_json(out / "bayes_prefs.json", res)
    plot(plot_data, out / "bayes_prefs.png")
    return res


def plot(data: dict, path: Path) -> None:
    """Row 1: learned vs exact policy (seed 0, tau 0.1); row 2: Pareto fronts with the exact front."""
    from bayescrl.utils.plotting import plt

    p = plt()
    names = list(data)
    fig, axes = p.subplots(2, len(names), figsize=(3.6 * len(names), 6.4), squeeze=False)
    labels = {
        "exact": "exact MOPO (true probabilities)",
        "empirical": "empirical",
        "bt_known": "BT, known β",
        "bt_infer": "BT, inferred β",
        "bt_infer_lq": "BT, inferred β, q 10% quantile",
    }
    for j, name in enumerate(names):
        pols, fr = data[name]
        ax = axes[0, j]
        keys = ["exact", "empirical", "bt_known", "bt_infer", "bt_infer_lq"]
        a_n = len(pols["exact"])
        width = 0.8 / len(keys)
        for i, k in enumerate(keys):
            ax.bar(np.arange(a_n) + (i - 2) * width, pols[k], width, label=labels[k])
        ax.set_xticks(range(a_n), [f"y{i + 1}" for i in range(a_n)])
        ax.set_ylabel("probability π(y)")
        ax.set_title(f"{name}: policy (seed 0, τ = 0.1)", fontsize=9)
        ax = axes[1, j]
        pf = np.asarray(fr["pareto"])
        ax.plot(pf[:, 0], pf[:, 1], color="0.6", lw=4, alpha=0.6, label="true Pareto front (mixtures)")
        for k in ("exact", "empirical", "bt_known", "bt_infer"):
            pts = np.asarray(fr[k])
            pts = pts[np.argsort(pts[:, 0])]
            ax.plot(
                pts[:, 0],
                pts[:, 1],
                "k-" if k == "exact" else ".-",
                lw=2 if k == "exact" else 1,
                label=labels[k],
            )
        ax.set_xlabel("true constraint preference E_π[p_1]")
        ax.set_ylabel("true primary preference E_π[p_2]")
        ax.set_title(f"{name}: fronts (λ sweep, τ = 0.1)", fontsize=9)
        ax.ticklabel_format(useOffset=False)
        lo, hi = ax.get_ylim()
        if hi - lo < 1e-6:  # a tied primary objective (D3): every policy at the same value
            ax.set_ylim(lo - 0.05, hi + 0.05)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7, loc="upper right")
    axes[1, 0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    p.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--workers", type=int, default=1, help="seeds run at a time (each its own process)")
    args = ap.parse_args()
    if args.seeds < 1:
        raise SystemExit("error: --seeds must be >= 1")
    if args.workers < 1:
        raise SystemExit("error: --workers must be >= 1")
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    set_torch_threads()
    res = run(args.seeds, Path(args.out), args.workers)
    for name, r in res["sets"].items():
        print(
            name,
            "TV ratio (bt_infer / empirical) per tau:",
            {t: round(v, 3) for t, v in r["tv_ratio_bt_infer_over_empirical"].items()},
            "closer seeds:",
            r["bt_infer_closer_seeds"],
            "| with b lowered:",
            {t: round(v, 3) for t, v in r["tv_ratio_bt_infer_over_empirical_b_lowered"].items()},
            "infeasible runs (empirical):",
            r["methods"]["empirical"]["b_infeasible_runs"],
        )


if __name__ == "__main__":
    main()

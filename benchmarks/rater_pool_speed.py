"""Speed of the hierarchical rater-pool engines, and the fast engine's agreement with NUTS.

1. ``laplace-eb`` on a pool of R = 10 raters, N = 2,000 comparisons (200 each), d = 256, one CPU thread
   (target ≤ 3 s): wall time split into the competence optimisation, the competence Hessian and the
   draws; θ cosine to the truth; λ rank correlation with the truth.
2. Agreement at small d (d = 4, N = 400, R = 4: an anchor of known competence, a deliberate rater, a
   deliberate-but-misinformed rater, a near-random rater): laplace-eb, svi and NUTS (2 chains) on the same
   pool — θ cosine of each engine's posterior mean to NUTS', the largest |mean − mean_NUTS| / sd_NUTS over
   θ's coordinates, Spearman correlation of the posterior-mean λ_i (unknown raters) with NUTS', and times.

    .venv/bin/python benchmarks/rater_pool_speed.py            # both parts (NUTS takes minutes)
    .venv/bin/python benchmarks/rater_pool_speed.py --no-nuts  # part 1 and laplace-eb/svi only
    .venv/bin/python benchmarks/rater_pool_speed.py --large-only  # re-measure part 1 into the JSON
    .venv/bin/python benchmarks/rater_pool_speed.py --stored-nuts  # both parts, NUTS from the JSON
    .venv/bin/python benchmarks/rater_pool_speed.py --large-only --vs-ref 3b02521 --repeat 3 --seeds 3
        # part 1 of this checkout and of the package at a git ref, alternately, in fresh processes, on
        # the pools of seeds 0, 1, 2: medians and the per-pair CPU-time ratio (this / ref) into large_vs_ref
    .venv/bin/python benchmarks/rater_pool_speed.py --hessian-check 3
        # float32 against float64 competence Hessian on part 1's design at d = 64, 128, 256 (3 pools
        # each): the fits' competence sd, log competences and θ̂ -> rater_pool_hessian_float32.json
    .venv/bin/python benchmarks/rater_pool_speed.py --gradient-check 3
        # the search mode's float32 evidence gradient against the exact one on part 1's pools (seeds
        # 0, 1, 2; at the fitted competences and at random trial points around them)
        # -> rater_pool_gradient_float32.json

Writes benchmarks/results/raters/rater_pool_speed.json (+ .png: the small pool's intervals per engine).
The machine's load average is recorded: on a shared machine wall time also measures the other jobs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

import bayescrl.inference.hierarchical as H
from bayescrl.inference.bootstrap import map_estimate
from bayescrl.inference.hierarchical import PoolRater, RaterPrior, fit_rater_pool, simulate_pool
from bayescrl.models.linear import BTLinearProblem
from bayescrl.utils import set_torch_threads, write_json
from bayescrl.utils.plotting import plt

OUT = Path(__file__).parent / "results" / "raters"

SMALL = {"d": 4, "n_per_rater": 100, "betas": [5.0, 5.0, 10.0, 0.3], "lams": [10.0, 3.0, 0.3, 1.0]}
SMALL_IDS = ["anchor", "deliberate", "misinformed", "random"]


def spearman(a, b) -> float:
    ra = np.argsort(np.argsort(np.asarray(a)))
    rb = np.argsort(np.argsort(np.asarray(b)))
    return float(np.corrcoef(ra, rb)[0, 1])


def small_pool(seed: int = 0):
    """The agreement case (also the known answer of tests/test_hierarchical_raters.py)."""
    s = simulate_pool(SMALL["d"], SMALL["betas"], SMALL["lams"], SMALL["n_per_rater"], seed=seed)
    raters = [PoolRater("anchor", beta=5.0, lam=10.0)] + SMALL_IDS[1:]
    return s, raters


LARGE_LAMS = [3.0, 3.0, 0.3, 3.0, 1.0, 1.0, 3.0, 0.5, 3.0, 2.0]
LARGE_BETAS = [5.0, 5.0, 5.0, 5.0, 5.0, 0.5, 5.0, 5.0, 2.0, 5.0]


def large_pool(seed: int = 0, d: int = 256):
    """Part 1's pool: R = 10 raters, 200 comparisons each, rater r0 the anchor of known competence."""
    s = simulate_pool(d, LARGE_BETAS, LARGE_LAMS, 200, seed=seed)
    raters = [PoolRater("r0", beta=LARGE_BETAS[0], lam=LARGE_LAMS[0])] + [f"r{i}" for i in range(1, 10)]
    return s, raters


def large(seed: int = 0) -> dict:
    R, d = 10, 256
    lams, betas = LARGE_LAMS, LARGE_BETAS
    s, raters = large_pool(seed, d)
    fit_rater_pool(s["X0"][:50], s["X1"][:50], s["y"][:50], s["rater"][:50], raters[:1])  # warm-up
    t, c = time.perf_counter(), time.process_time()
    post = fit_rater_pool(s["X0"], s["X1"], s["y"], s["rater"], raters)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    lam_mean = post.flat("lam").mean(0)
    beta_med = post.flat("beta").median(0).values
    dg = post.diagnostics
    return {
        "R": R,
        "N": int(s["y"].shape[0]),
        "d": d,
        "seconds": wall,
        "cpu_seconds": cpu,  # this process' CPU time: less sensitive than wall time to other jobs
        "optimise_seconds": dg["optimise_seconds"],
        "hessian_seconds": dg["hessian_seconds"],
        "sample_seconds": dg["sample_seconds"],
        "objective_evals": dg["objective_evals"],
        "converged": dg["converged"],
        "theta_cosine_to_truth": float(torch.nn.functional.cosine_similarity(post.theta_mean, s["theta"], 0)),
        "lam_spearman_to_truth": spearman(lam_mean[1:].tolist(), lams[1:]),
        "beta_median": beta_med.tolist(),
        "beta_true": betas,
        # |log(median β_i / β_i)| over the unknown raters (β–λ trade-off: see docs/core.md)
        "beta_abs_log_error_median": float((beta_med[1:] / torch.tensor(betas[1:])).log().abs().median()),
        "lam_mean": lam_mean.tolist(),
        "lam_true": lams,
        "log_evidence_map": dg.get("log_evidence_map"),
        "log_competence_map": dg.get("log_competence_map"),
        "log_competence_sd": [
            float(v) ** 0.5 for v in torch.tensor(dg.get("log_competence_cov", [])).diagonal()
        ]
        if dg.get("log_competence_cov")
        else None,
        "theta_map": dg.get("theta_map"),
        "target_seconds": 3.0,
    }


def hessian_check(seeds: int, dims=(64, 128, 256)) -> dict:
    """The competence Hessian with float32 trace products (the default from d = ``_HESS_SEARCH_MIN_D`` on,
    CPU) against the float64 one: each pool of part 1's design (d = 64, 128, 256; seeds 0..N-1) is fitted
    twice, the second time with the float64 Hessian forced. The Hessian gives the competences' covariance
    and the Newton step after the optimiser, so the fits differ in both; reported per pool: the largest
    relative difference of the log competences' posterior sd, of the log competences and of θ̂."""
    rows = []
    default_min_d = H._HESS_SEARCH_MIN_D
    for d in dims:
        for seed in range(seeds):
            s, raters = large_pool(seed, d)
            fits = {}
            for label, min_d in (("float32", default_min_d), ("float64", 10**9)):
                H._HESS_SEARCH_MIN_D = min_d
                try:
                    dg = fit_rater_pool(s["X0"], s["X1"], s["y"], s["rater"], raters).diagnostics
                finally:
                    H._HESS_SEARCH_MIN_D = default_min_d
                fits[label] = {
                    "sd": torch.tensor(dg["log_competence_cov"]).diagonal().sqrt(),
                    "h": torch.tensor(dg["log_competence_map"]),
                    "theta": torch.tensor(dg["theta_map"]),
                    "converged": dg["converged"],
                }
            a, b = fits["float32"], fits["float64"]
            rows.append(
                {
                    "d": d,
                    "seed": seed,
                    "sd_rel_diff_max": float(((a["sd"] - b["sd"]) / b["sd"]).abs().max()),
                    "log_competence_abs_diff_max": float((a["h"] - b["h"]).abs().max()),
                    "theta_abs_diff_max": float((a["theta"] - b["theta"]).abs().max()),
                    "converged": [a["converged"], b["converged"]],
                }
            )
            print(rows[-1], flush=True)
    worst = max(rows, key=lambda r: r["sd_rel_diff_max"])
    return {
        "pools": rows,
        "sd_rel_diff_max": worst["sd_rel_diff_max"],
        "sd_rel_diff_median": statistics.median(r["sd_rel_diff_max"] for r in rows),
        "float32_from_d": default_min_d,
        "command": f"python benchmarks/rater_pool_speed.py --hessian-check {seeds}",
    }


def gradient_check(seeds: int, trials: int = 4, spread: float = 0.3) -> dict:
    """The competence optimiser's trial-point gradient in search mode (float32 blocks and trace products,
    :func:`bayescrl.inference.hierarchical._evidence_grad` with ``fast=True``) against the exact float64
    one, on part 1's pools (d = 256, seeds 0..N-1): at the fitted log competences ĥ and at ``trials``
    points ĥ + N(0, ``spread``²) on the free coordinates (the line search's trial points lie around ĥ),
    each with the inner MAP solved tightly (so only the evidence and its gradient differ). Reported per
    point: the largest |Δ dF/dh| over the free coordinates, the largest exact |dF/dh| (the scale) and
    |ΔF|; a λ_i² below 10⁻² keeps float64 in search mode and is marked."""
    rows = []
    gen = torch.Generator().manual_seed(0)
    for seed in range(seeds):
        s, raters = large_pool(seed)
        R, d, dt = len(raters), s["X0"].shape[1], torch.float64
        dg = fit_rater_pool(s["X0"], s["X1"], s["y"], s["rater"], raters).diagnostics
        h_hat = torch.tensor(dg["log_competence_map"], dtype=dt)
        free = torch.ones(2 * R, dtype=torch.bool)
        free[[0, R]] = False  # r0 is the anchor: its β and λ are known
        mu0, cov0 = torch.zeros(d, dtype=dt), torch.eye(d, dtype=dt)
        pool = H._pool(s["X0"], s["X1"], s["y"], s["rater"], R, mu0, cov0, "cpu", dt)
        prob = BTLinearProblem.from_data(
            mu0, cov0, [1.0] * R, [1.0] * R, x0=s["X0"], x1=s["X1"], y=s["y"], rater=s["rater"]
        )
        fb, fl = free[:R].to(dt), free[R:].to(dt)
        points = [h_hat] + [
            h_hat + spread * torch.randn(2 * R, generator=gen, dtype=dt) * free for _ in range(trials)
        ]
        for k, h in enumerate(points):
            res = map_estimate(replace(prob, beta=h[:R].exp(), lam=h[R:].exp()), tol=1e-12)
            th, V = res.theta[0][None], res.vartheta[0][None]
            out = []
            for fast in (False, True):
                lp = H._laplace(pool, RaterPrior(), h[None, :R], h[None, R:], th, V, fb, fl, fast=fast)
                g = H._evidence_grad(pool, RaterPrior(), lp, h[None, :R], h[None, R:], fb, fl, fast)[0]
                out.append((float(lp.F[0]), g[free]))
            (F, g), (F32, g32) = out
            rows.append(
                {
                    "seed": seed,
                    "point": "fit" if k == 0 else f"trial {k}",
                    "grad_abs_diff_max": float((g32 - g).abs().max()),
                    "grad_abs_max": float(g.abs().max()),
                    "F_abs_diff": abs(F32 - F),
                    "lam2_min": float((2 * h[R:]).exp().min()),
                    "lam2_max": float((2 * h[R:]).exp().max()),
                    "float64_kept": bool(float((2 * h[R:]).exp().min()) < 1e-2),
                    "inner_map_converged": bool(res.converged.all()),
                }
            )
            print(rows[-1], flush=True)
    searched = [r for r in rows if not r["float64_kept"]]
    return {
        "pools": rows,
        "grad_abs_diff_max": max(r["grad_abs_diff_max"] for r in searched),
        "grad_abs_diff_median": statistics.median(r["grad_abs_diff_max"] for r in searched),
        "grad_rel_diff_max": max(
            r["grad_abs_diff_max"] / r["grad_abs_max"] for r in searched if r["point"] != "fit"
        ),
        "F_abs_diff_max": max(r["F_abs_diff"] for r in searched),
        "d": 256,
        "trials_per_pool": trials,
        "spread": spread,
        "command": f"python benchmarks/rater_pool_speed.py --gradient-check {seeds}",
    }


def _large_in_process(root: Path, seed: int = 0) -> dict:
    """This file's ``large(seed)`` on the package under ``root`` in a fresh Python process (one thread)."""
    code = (
        "import importlib.util, json, sys; sys.path.insert(0, sys.argv[1]); "
        "from bayescrl.utils import set_torch_threads; set_torch_threads(1); "
        "spec = importlib.util.spec_from_file_location('rps', sys.argv[3]); "
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
        "print(json.dumps(m.large(int(sys.argv[2]))))"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(root)}
    cmd = [sys.executable, "-c", code, str(root), str(seed), str(Path(__file__).resolve())]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True)
    return json.loads(out.stdout.decode().strip().splitlines()[-1])


def _agreement(a: dict, b: dict) -> dict:
    """How far two fits of the same pool are apart: log evidence, log competences (max |Δ|), their
    posterior sd (ratio range a / b over the unknown raters' competences) and θ̂ (max |Δ|)."""
    if b.get("log_competence_map") is None:  # a reference without these diagnostics
        return {"log_evidence_abs_diff": abs(a["log_evidence_map"] - b["log_evidence_map"])}
    sd = [x / y for x, y in zip(a["log_competence_sd"], b["log_competence_sd"], strict=True) if y > 0]
    return {
        "log_evidence_abs_diff": abs(a["log_evidence_map"] - b["log_evidence_map"]),
        "log_competence_max_abs_diff": max(
            abs(x - y) for x, y in zip(a["log_competence_map"], b["log_competence_map"], strict=True)
        ),
        "log_competence_sd_ratio": [min(sd), max(sd)],
        "theta_map_max_abs_diff": max(
            abs(x - y) for x, y in zip(a["theta_map"], b["theta_map"], strict=True)
        ),
    }


def vs_ref(ref: str, repeat: int, seeds: int = 1) -> dict:
    """Part 1 of this checkout and of the package at git ``ref`` (``git archive`` of bayescrl/ into a
    temporary directory; this file's case and measurements for both), run alternately (this, ref, this,
    ref, ...) in fresh processes so that both see the same machine load, on the pools of seeds
    0..``seeds``−1; per-pair ratios of CPU and wall time, medians over all runs and per seed, and how far
    the two fits of each pool are apart."""
    here = Path(__file__).resolve().parents[1]
    keys = ("cpu_seconds", "seconds", "objective_evals", "theta_cosine_to_truth", "log_evidence_map")
    fit: dict[tuple[str, int], dict] = {}  # each version's estimates per seed (the same in every repeat)
    runs: dict[str, list[dict]] = {"this": [], "ref": []}
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["git", "-C", str(here), "archive", ref, "bayescrl"]
        arc = subprocess.run(cmd, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=arc, check=True)
        for _ in range(repeat):
            for seed in range(seeds):
                for name, root in (("this", here), ("ref", Path(tmp))):
                    r = _large_in_process(root, seed)
                    runs[name].append({"seed": seed, **{k: r[k] for k in keys}})
                    fit[name, seed] = r
                    print(name, runs[name][-1], flush=True)
    pairs = list(zip(runs["this"], runs["ref"], strict=True))
    ratio = {k: [a[k] / b[k] for a, b in pairs] for k in ("cpu_seconds", "seconds")}
    return {
        "ref": ref,
        "repeat": repeat,
        "runs": runs,
        "median_cpu_seconds": {n: statistics.median(r["cpu_seconds"] for r in v) for n, v in runs.items()},
        "median_wall_seconds": {n: statistics.median(r["seconds"] for r in v) for n, v in runs.items()},
        "median_cpu_seconds_per_seed": {
            n: [statistics.median(r["cpu_seconds"] for r in v if r["seed"] == s) for s in range(seeds)]
            for n, v in runs.items()
        },
        "agreement_per_seed": [_agreement(fit["this", s], fit["ref", s]) for s in range(seeds)],
        "ratio_cpu_per_pair": ratio["cpu_seconds"],
        "ratio_cpu_median": statistics.median(ratio["cpu_seconds"]),
        "ratio_wall_median": statistics.median(ratio["seconds"]),
    }


def agreement(nuts: bool, seed: int = 0, stored_nuts: dict | None = None) -> tuple[dict, dict]:
    """``stored_nuts``: a previous NUTS run of this case (its JSON entry), compared against instead of
    re-running NUTS."""
    s, raters = small_pool(seed)
    runs, posts = {}, {}
    engines = [("laplace-eb", {}), ("svi", {})] + (
        [("nuts", {"num_samples": 150, "warmup": 100, "num_chains": 2})] if nuts else []
    )
    for eng, kw in engines:
        t = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            post = fit_rater_pool(s["X0"], s["X1"], s["y"], s["rater"], raters, engine=eng, seed=seed, **kw)
        runs[eng] = {
            "seconds": time.perf_counter() - t,
            "theta_mean": post.theta_mean.tolist(),
            "theta_sd": post.theta_cov.diagonal().sqrt().tolist(),
            "lam_mean": post.flat("lam").mean(0).tolist(),
            "beta_mean": post.flat("beta").mean(0).tolist(),
            "verdicts": post.verdicts(),
            "warnings": [str(w.message) for w in caught],
            "options": kw,
        }
        posts[eng] = post
    if stored_nuts is not None:
        runs["nuts"] = stored_nuts
        m, sd = torch.tensor(stored_nuts["theta_mean"]), torch.tensor(stored_nuts["theta_sd"])
    elif nuts:
        ref = posts["nuts"]
        m, sd = ref.theta_mean, ref.theta_cov.diagonal().sqrt()
    if nuts or stored_nuts is not None:
        for eng, post in posts.items():
            runs[eng]["theta_cosine_to_nuts"] = float(
                torch.nn.functional.cosine_similarity(post.theta_mean, m, 0)
            )
            runs[eng]["theta_max_z_to_nuts"] = float(((post.theta_mean - m) / sd).abs().max())
            runs[eng]["theta_sd_ratio_to_nuts"] = (post.theta_cov.diagonal().sqrt() / sd).tolist()
            runs[eng]["lam_spearman_to_nuts"] = spearman(
                runs[eng]["lam_mean"][1:], runs["nuts"]["lam_mean"][1:]
            )
    for eng in runs:
        runs[eng]["lam_spearman_to_truth"] = spearman(runs[eng]["lam_mean"][1:], SMALL["lams"][1:])
        runs[eng]["theta_cosine_to_truth"] = float(
            torch.nn.functional.cosine_similarity(torch.tensor(runs[eng]["theta_mean"]), s["theta"], 0)
        )
    return {"case": {**SMALL, "raters": SMALL_IDS, "seed": seed}, "engines": runs}, posts


def plot(posts: dict, path: Path) -> None:
    fig, axes = plt().subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for k, (eng, post) in enumerate(posts.items()):
        for ax, site in zip(axes, ("beta", "lam"), strict=True):
            lo, hi = post.interval(site)
            mid = post.flat(site).median(0).values
            y = np.arange(len(post.rater_ids)) + 0.2 * (k - 1)
            ax.errorbar(mid, y, xerr=[mid - lo, hi - mid], fmt="o", label=eng, capsize=2)
    for ax, site, truth in zip(axes, ("β", "λ"), (SMALL["betas"], SMALL["lams"]), strict=True):
        ax.plot(truth, np.arange(len(truth)), "kx", label="truth")
        ax.set_xscale("log")
        ax.set_xlabel(f"{site}: posterior median and 90 % interval")
    axes[0].set_yticks(np.arange(len(SMALL_IDS)), SMALL_IDS)
    axes[1].legend(fontsize=8)
    fig.suptitle("rater pool d = 4, N = 400: engines vs truth")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-nuts", action="store_true")
    ap.add_argument("--large-only", action="store_true", help="re-measure part 1 only (keep part 2)")
    ap.add_argument(
        "--stored-nuts", action="store_true", help="compare with the NUTS run stored in the JSON (no re-run)"
    )
    ap.add_argument("--vs-ref", help="with --large-only: also time part 1 at this git ref, alternately")
    ap.add_argument("--repeat", type=int, default=3, help="pairs of runs for --vs-ref")
    ap.add_argument("--seeds", type=int, default=1, help="pools (seeds 0..N-1) timed by --vs-ref")
    ap.add_argument(
        "--hessian-check",
        type=int,
        metavar="N",
        help="only compare the float32 competence Hessian with the float64 one on N pools per d",
    )
    ap.add_argument(
        "--gradient-check",
        type=int,
        metavar="N",
        help="only compare the search mode's float32 evidence gradient with the exact one on N pools",
    )
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    set_torch_threads(1)
    out = Path(args.out)
    if args.hessian_check:
        write_json(out / "rater_pool_hessian_float32.json", hessian_check(args.hessian_check))
        return
    if args.gradient_check:
        write_json(out / "rater_pool_gradient_float32.json", gradient_check(args.gradient_check))
        return
    load0 = os.getloadavg()
    res = {"threads": torch.get_num_threads(), "load_average_start": load0}
    res["large"] = large()
    print("large:", {k: v for k, v in res["large"].items()}, flush=True)
    res["load_average_end_large"] = os.getloadavg()
    if args.large_only:
        old = json.loads((out / "rater_pool_speed.json").read_text())
        old.update({k: v for k, v in res.items() if k != "load_average_start"})
        old["load_average_start_large"] = load0
        old["command_large"] = "python benchmarks/rater_pool_speed.py --large-only" + (
            f" --vs-ref {args.vs_ref} --repeat {args.repeat} --seeds {args.seeds}" if args.vs_ref else ""
        )
        if args.vs_ref:
            old["large_vs_ref"] = vs_ref(args.vs_ref, args.repeat, args.seeds)
            old["large_vs_ref"]["load_average_end"] = os.getloadavg()
        write_json(out / "rater_pool_speed.json", old)
        return
    stored = None
    if args.stored_nuts:
        old = json.loads((out / "rater_pool_speed.json").read_text())
        stored = old["small"]["engines"]["nuts"]
        res["nuts_from"] = old.get("command", "python benchmarks/rater_pool_speed.py")
    res["small"], posts = agreement(not args.no_nuts and stored is None, stored_nuts=stored)
    res["load_average_end"] = os.getloadavg()
    flags = " --stored-nuts" if args.stored_nuts else (" --no-nuts" if args.no_nuts else "")
    res["command"] = "python benchmarks/rater_pool_speed.py" + flags
    write_json(out / "rater_pool_speed.json", res)
    plot(posts, out / "rater_pool_speed.png")
    for eng, r in res["small"]["engines"].items():
        print(eng, {k: v for k, v in r.items() if k not in ("warnings", "options")})


if __name__ == "__main__":
    main()

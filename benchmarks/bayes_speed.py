"""Speed of the standard model at d = 256: data-file load, Laplace + samples, perturbed-MAP bootstrap.

Builds a random data file (2,000 comparisons split over 3 raters, d = 256, no online rewards; θ ~ N(0, I),
ϑ_i ~ N(θ, I/λ_i²), items x ~ N(0, I/d) so that ‖x‖ ≈ 1 as for the bandit arms, labels from the
Bradley–Terry model) and times, on one torch thread, the minimum over ``repeats`` runs of

* ``load``: ``from_spec(path)`` — what ``bayescrl infer data.json`` does (JSON read + validation);
* ``laplace``: ``laplace(problem)`` (MAP by Newton + Hessian) and ``.sample(samples)``;
* ``bootstrap``: ``perturbed_map(problem, samples, p_offline=0.5)`` (warmPref-PS perturbations).

It also records the bootstrap's Newton steps and convergence, and how far its θ mean / sd are from the
Laplace approximation (a sanity check, not a test). Goals (seconds): load ≤ 3, laplace ≤ 1, bootstrap ≤ 3,
judged on wall-clock minima; the process CPU time of each run is recorded too (with other jobs on the
machine the wall clock of a one-thread run includes time waiting for a core).

    .venv/bin/python benchmarks/bayes_speed.py
    .venv/bin/python benchmarks/bayes_speed.py --set samples=1000 --set item_sd=1.0   # overrides

Writes benchmarks/results/core/bayes_speed.json. The machine is shared: the 1-minute load average at the
start is recorded; compare numbers from the same run.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import torch

from bayescrl.inference.bootstrap import perturbed_map
from bayescrl.inference.laplace import laplace
from bayescrl.models.spec import from_spec
from bayescrl.utils import apply_overrides, set_torch_threads, write_json

OUT = Path(__file__).parent / "results" / "core" / "bayes_speed.json"
CONFIG = {
    "dim": 256,
    "num_prefs": 2000,
    "raters": [
        {"id": "expert", "beta": 10.0, "lam": 100.0},
        {"id": "casual", "beta": 5.0, "lam": 10.0},
        {"id": "novice", "beta": 2.0, "lam": 3.0},
    ],
    "item_sd": None,  # None: 1/sqrt(dim)
    "samples": 200,
    "p_offline": 0.5,
    "repeats": 3,
    "seed": 0,
    "goals_s": {"load": 3.0, "laplace": 1.0, "bootstrap": 3.0},
}


def make_data(cfg: dict) -> dict:
    """A complete data-file mapping (a spec with preferences and the true θ)."""
    d, n, raters = cfg["dim"], cfg["num_prefs"], cfg["raters"]
    g = torch.Generator().manual_seed(cfg["seed"])
    dt = torch.float64
    sd = cfg["item_sd"] if cfg["item_sd"] is not None else d**-0.5
    theta = torch.randn(d, generator=g, dtype=dt)
    lam = torch.tensor([r["lam"] for r in raters], dtype=dt)
    beta = torch.tensor([r["beta"] for r in raters], dtype=dt)
    vartheta = theta + torch.randn(len(raters), d, generator=g, dtype=dt) / lam[:, None]
    x0 = sd * torch.randn(n, d, generator=g, dtype=dt)
    x1 = sd * torch.randn(n, d, generator=g, dtype=dt)
    who = torch.arange(n) % len(raters)
    z = beta[who] * ((x1 - x0) * vartheta[who]).sum(-1)
    y = torch.bernoulli(torch.sigmoid(z), generator=g)
    ids = [r["id"] for r in raters]
    prefs = [
        {"x0": a, "x1": b, "y": int(c), "rater": ids[int(i)]}
        for a, b, c, i in zip(x0.tolist(), x1.tolist(), y.tolist(), who.tolist(), strict=True)
    ]
    return {
        "dim": d,
        "noise_sd": 1.0,
        "raters": raters,
        "preferences": prefs,
        "truth": {"theta": theta.tolist(), "vartheta": vartheta.tolist()},
    }


def best_of(fn, repeats: int) -> tuple[float, list[float], list[float], object]:
    """Minimum wall-clock seconds, all wall-clock and CPU (process) seconds, and the last result."""
    wall, cpu, out = [], [], None
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return min(wall), wall, cpu, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    cfg = apply_overrides(CONFIG, args.overrides)
    set_torch_threads(1)
    load_avg = os.getloadavg()[0]
    reps, m = cfg["repeats"], cfg["samples"]

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.json"
        write_json(path, make_data(cfg))
        size_mb = path.stat().st_size / 2**20
        t_load, load_runs, load_cpu, model = best_of(lambda: from_spec(path), reps)
    prob = model.problem

    def lap_job():
        lap = laplace(prob)
        return lap, lap.sample(m, torch.Generator().manual_seed(cfg["seed"]))[0]

    t_lap, lap_runs, lap_cpu, (lap, lap_theta) = best_of(lap_job, reps)

    def boot_job():
        gen = torch.Generator().manual_seed(cfg["seed"])
        return perturbed_map(prob, m, p_offline=cfg["p_offline"], generator=gen)

    t_boot, boot_runs, boot_cpu, boot = best_of(boot_job, reps)

    lap_sd = lap.theta_cov.diagonal().sqrt()
    theta = boot.theta
    goals = cfg["goals_s"]
    seconds = {"load": t_load, "laplace": t_lap, "bootstrap": t_boot}
    report = {
        "seconds": seconds,
        "goals_s": goals,
        "meets_goal": {k: seconds[k] <= goals[k] for k in goals},
        "runs_s": {"load": load_runs, "laplace": lap_runs, "bootstrap": boot_runs},
        "cpu_s": {"load": load_cpu, "laplace": lap_cpu, "bootstrap": boot_cpu},  # process time (one thread)
        "data_file_mb": size_mb,
        "laplace": {"map_newton_steps": lap.iters, "converged": bool(lap.converged)},
        "bootstrap": {
            "newton_steps": boot.iters,
            "converged_fraction": float(boot.converged.double().mean()),
            "grad_norm_max": float(boot.grad_norm.max()),
            "theta_mean_vs_laplace_max_in_sd": float(((theta.mean(0) - lap.theta_mean).abs() / lap_sd).max()),
            "theta_sd_ratio_to_laplace_median": float((theta.std(0) / lap_sd).median()),
        },
        "laplace_samples_theta_sd_ratio_median": float((lap_theta.std(0) / lap_sd).median()),
        "config": cfg,
        "threads": torch.get_num_threads(),
        "load_average_1min_at_start": load_avg,
        "cpu_count": os.cpu_count(),
        "machine": platform.platform(),
        "torch": torch.__version__,
    }
    write_json(args.out, report)
    for k, v in seconds.items():
        runs = [round(t, 3) for t in report["runs_s"][k]]
        cpu = min(report["cpu_s"][k])
        print(f"{k:10s} {v:7.3f} s (goal <= {goals[k]:g} s; runs {runs}, cpu min {cpu:.3f} s)")
    b = report["bootstrap"]
    print(
        f"bootstrap: {b['newton_steps']} Newton steps, converged {b['converged_fraction']:.3f}, "
        f"theta mean within {b['theta_mean_vs_laplace_max_in_sd']:.3f} Laplace sd, "
        f"sd ratio {b['theta_sd_ratio_to_laplace_median']:.3f}"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

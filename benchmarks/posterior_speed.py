"""Speed and accuracy of the posterior engines on the warmPref-PS posterior (d = 6, one rater).

For N ∈ {20, 200, 2000} offline preferences and t ∈ {0, 300} online rewards (β = 10, λ = 100, σ = 1,
K = 50 Gaussian arms, θ ~ N(0, I)) it measures seconds per 1,000 posterior samples (fit + sampling) of
bootstrap (perturbed MAP, Bern(0.5) offline weights), laplace, svi (AutoMultivariateNormal) and nuts,
and each engine's error against NUTS: max_j |mean_j − mean_nuts_j| / sd_nuts_j, max_j |sd_j / sd_nuts_j − 1|
and the 2-Wasserstein distance of the Gaussian fits of θ.

    .venv/bin/python benchmarks/posterior_speed.py                # full grid
    .venv/bin/python benchmarks/posterior_speed.py --quick        # N ∈ {20, 200}, t = 300, small NUTS
    .venv/bin/python benchmarks/posterior_speed.py --ratio        # bootstrap / NUTS speed at N=200, t=300
    .venv/bin/python benchmarks/posterior_speed.py --append --redo --cells 2000:0 --nuts-cells 2000:0
                                                                  # re-measure one cell in place

Writes benchmarks/results/core/posterior_speed.json and .png (incrementally, cell by cell). Every cell with
a NUTS reference also gets ``ratio``: bootstrap samples/s (``fit`` + ``sample``, the engine's own path)
over NUTS draws/s, both measured in the same run -- against NUTS' post-warmup sampling speed (its
steady state, the definition most favourable to NUTS) and against its whole run (warmup and JIT
compilation included) -- with the bootstrap's W2 to NUTS beside it, so the speed-up is read at the
accuracy it comes with. ``--ratio`` measures only that cell and writes posterior_ratio.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch

from bayescrl.inference.bootstrap import perturbed_map
from bayescrl.inference.compare import gaussian_w2
from bayescrl.inference.engines import fit
from bayescrl.models.simulate import simulate
from bayescrl.models.spec import from_spec
from bayescrl.utils import set_torch_threads, write_json
from bayescrl.utils.plotting import plt

OUT = Path(__file__).parent / "results" / "core"


CPU = {}  # process CPU seconds of the last timed() call (median over its repeats)


def timed(fn, repeats: int) -> tuple[float, object]:
    """Median wall-clock seconds of ``fn`` over ``repeats`` calls, and its last result; the median process
    CPU time goes to ``CPU["last"]`` (on a shared machine wall time also measures the other jobs)."""
    times, cpus, out = [], [], None
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    CPU["last"] = statistics.median(cpus)
    return statistics.median(times), out


def errors(th: torch.Tensor, ref: torch.Tensor) -> dict[str, float]:
    m, r = th.mean(0), ref.mean(0)
    s, sr = th.std(0), ref.std(0)
    return {
        "mean_err_sd": float(((m - r).abs() / sr).max()),
        "sd_ratio_err": float((s / sr - 1).abs().max()),
        "w2": gaussian_w2(m, torch.cov(th.T), r, torch.cov(ref.T)),
    }


def make_model(n_pref: int, t: int, args):
    spec = simulate(
        {"dim": 6, "noise_sd": 1.0, "raters": [{"id": "expert", "beta": 10.0, "lam": 100.0}]},
        num_prefs=n_pref,
        num_rewards=t,
        num_arms=50,
        seed=args.seed,
    )
    return from_spec(spec)


def solver_only(model, args, n: int = 1000) -> dict:
    """The bare batched Newton solver (no Pyro tracing): what the bandit / PSPL agents call."""
    gen = torch.Generator().manual_seed(args.seed)
    sec, pm = timed(lambda: perturbed_map(model.problem, n, p_offline=0.5, generator=gen), 3)
    return {
        "seconds_per_1000": sec / n * 1000,
        "cpu_seconds_per_1000": CPU["last"] / n * 1000,
        "samples_per_second": n / sec,
        "converged_fraction": float(pm.converged.double().mean()),
        "newton_iters": pm.iters,
    }


def run_cell(n_pref: int, t: int, args) -> dict:
    model = make_model(n_pref, t, args)
    n = 1000
    res: dict = {"N": n_pref, "t": t, "engines": {}, "solver_only": solver_only(model, args)}
    if (n_pref, t) not in args.nuts_cells:
        ref = None
    else:
        ref = _nuts(model, res, args)
    for name, kw, reps in (
        ("bootstrap", {"p_offline": 0.5}, 3),
        ("laplace", {}, 3),
        ("svi", {"guide": "mvn", "max_steps": 3000}, 1),
    ):

        def job(name=name, kw=kw):
            post = fit(model, engine=name, seed=args.seed, **kw)
            return post, post.sample(n, args.seed)["theta"]

        sec, (post, th) = timed(job, reps)
        row = {
            "seconds_per_1000": sec / n * 1000,
            "cpu_seconds_per_1000": CPU["last"] / n * 1000,
            **(errors(th, ref) if ref is not None else {}),
        }
        if name == "bootstrap":
            row["converged_fraction"] = post.diagnostics["converged_fraction"]
            row["newton_iters"] = post.diagnostics["newton_iters"]
        if name == "svi":
            row["svi_steps"] = post.diagnostics["steps"]
        res["engines"][name] = row
    if ref is not None:
        res["ratio"] = speed_ratio(res["engines"], n)
    return res


def speed_ratio(engines: dict, n: int) -> dict:
    """Bootstrap samples/s over NUTS draws/s (post-warmup and whole run), W2 of both to NUTS."""
    boot, nuts = engines["bootstrap"], engines["nuts"]
    boot_rate = 1000.0 / boot["seconds_per_1000"]
    sampling = nuts["draws"] / nuts["sampling_seconds"]
    whole = 1000.0 / nuts["seconds_per_1000"]
    cpu = {}
    if "cpu_seconds_per_1000" in boot and "cpu_seconds_per_1000" in nuts:
        cpu = {
            "ratio_to_nuts_whole_run_cpu_time": nuts["cpu_seconds_per_1000"] / boot["cpu_seconds_per_1000"]
        }
    return {
        "bootstrap_samples_per_s": boot_rate,
        "bootstrap_samples": n,
        "nuts_draws_per_s_sampling": sampling,
        "nuts_draws_per_s_whole_run": whole,
        "ratio_to_nuts_sampling": boot_rate / sampling,
        "ratio_to_nuts_whole_run": boot_rate / whole,
        **cpu,
        "bootstrap_w2_to_nuts": boot.get("w2"),
        "laplace_w2_to_nuts": engines.get("laplace", {}).get("w2"),
        "goal": "ratio_to_nuts_sampling >= 500 with W2 to NUTS no worse than before (0.041 at N=200, t=300)",
    }


def _nuts(model, res, args):
    nuts_t, nuts = timed(
        lambda: fit(
            model,
            engine="nuts",
            num_samples=args.nuts_samples,
            warmup=args.nuts_warmup,
            num_chains=args.nuts_chains,
            jit=True,
            seed=args.seed,
        ),
        1,
    )
    ref = nuts.chains["theta"].reshape(-1, 6)
    res["engines"]["nuts"] = {
        "seconds_per_1000": nuts_t / ref.shape[0] * 1000,
        "cpu_seconds_per_1000": CPU["last"] / ref.shape[0] * 1000,
        "warmup_seconds": nuts.diagnostics["warmup_seconds"],  # with the JIT compilation
        "sampling_seconds": nuts.diagnostics["sampling_seconds"],
        "rhat_max": nuts.diagnostics["rhat_max"],
        "ess_bulk_min": nuts.diagnostics["ess_bulk_min"],
        "draws": int(ref.shape[0]),
    }
    return ref


def plot(cells: list[dict], path: Path) -> None:
    p = plt()
    fig, axes = p.subplots(1, 2, figsize=(10, 3.8))
    labels = [f"N={c['N']}\nt={c['t']}" for c in cells]
    x = range(len(cells))
    nan = float("nan")
    for e, mk in (("bootstrap", "o"), ("laplace", "s"), ("svi", "^"), ("nuts", "x")):
        ys = [c["engines"].get(e, {}).get("seconds_per_1000", nan) for c in cells]
        axes[0].semilogy(x, ys, marker=mk, label=e)
        if e != "nuts":
            axes[1].plot(x, [c["engines"][e].get("w2", nan) for c in cells], marker=mk, ls="", label=e)
    solver = [c.get("solver_only", {}).get("seconds_per_1000", nan) for c in cells]
    axes[0].semilogy(x, solver, marker="*", ls="--", label="bootstrap solver only")
    axes[0].set_ylabel("seconds per 1,000 samples")
    axes[1].set_ylabel("W2 to NUTS (Gaussian fits of θ)")
    for ax in axes:
        ax.set_xticks(list(x), labels, fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("warmPref-PS posterior, d = 6 (shared 2-core CPU machine)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    p.close(fig)


def ratio_run(args) -> None:
    """The speed ratio at N = 200, t = 300: NUTS and the bootstrap in this one run."""
    load = os.getloadavg()[0]
    args.nuts_cells = [(200, 300)]
    cell = run_cell(200, 300, args)
    r = cell["ratio"]
    report = {
        "machine": "shared 2-core CPU machine (other jobs running), 1 torch thread",
        "load_average_1min_at_start": load,
        "settings": {"d": 6, "beta": 10.0, "lam": 100.0, "N": 200, "t": 300, "p_offline": 0.5},
        "nuts": {"samples": args.nuts_samples, "warmup": args.nuts_warmup, "chains": args.nuts_chains},
        "cell": cell,
        "ratio": r,
    }
    write_json(args.out / "posterior_ratio.json", report)
    print(
        f"bootstrap {r['bootstrap_samples_per_s']:.0f} samples/s "
        f"(W2 to NUTS {r['bootstrap_w2_to_nuts']:.3g}); NUTS {r['nuts_draws_per_s_sampling']:.3g} draws/s "
        f"after warmup, {r['nuts_draws_per_s_whole_run']:.3g} over its whole run -> ratio "
        f"{r['ratio_to_nuts_sampling']:.0f}x (post-warmup), "
        f"{r['ratio_to_nuts_whole_run']:.0f}x (whole run)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--nuts-samples", type=int, default=150)
    ap.add_argument("--nuts-warmup", type=int, default=100)
    ap.add_argument("--nuts-chains", type=int, default=2)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--cells", default="20:300,200:300,2000:300,20:0,200:0,2000:0", help="N:t list")
    ap.add_argument("--nuts-cells", default="20:300,200:300", help="cells with a NUTS reference")
    ap.add_argument("--append", action="store_true", help="keep the cells already in the JSON")
    ap.add_argument(
        "--redo",
        action="store_true",
        help="with --append: measure the --cells again, replacing them in the JSON (the others are kept)",
    )
    ap.add_argument(
        "--ratio",
        action="store_true",
        help="only the N=200, t=300 cell with its NUTS reference: bootstrap / NUTS speed ratio and W2 "
        "(writes posterior_ratio.json)",
    )
    args = ap.parse_args()

    def parse(text):
        return [tuple(int(v) for v in c.split(":")) for c in text.split(",") if c]

    args.nuts_cells = parse(args.nuts_cells)
    set_torch_threads(1)
    import pyro

    pyro.enable_validation(False)
    grid = [(20, 300), (200, 300)] if args.quick else parse(args.cells)
    cells = []
    path = args.out / "posterior_speed.json"
    if args.ratio:
        ratio_run(args)
        return
    if args.append and path.exists():
        import json

        cells = json.loads(path.read_text())["cells"]
        for c in cells:
            if "solver_only" not in c:
                c["solver_only"] = solver_only(make_model(c["N"], c["t"], args), args)
    for n_pref, t in grid:
        at = [i for i, c in enumerate(cells) if c["N"] == n_pref and c["t"] == t]
        if at and not args.redo:
            continue
        cell = run_cell(n_pref, t, args)
        cell["load_average_1min_at_end"] = os.getloadavg()[0]
        if at:
            cells[at[0]] = cell
        else:
            cells.append(cell)
        print(
            f"N={n_pref} t={t}: "
            + ", ".join(
                f"{e} {r['seconds_per_1000']:.3g}s/1k" + (f" W2={r['w2']:.3g}" if "w2" in r else "")
                for e, r in cell["engines"].items()
            ),
            flush=True,
        )
        report = {
            "machine": "shared 2-core CPU machine (other jobs running), 1 torch thread",
            "settings": {
                "d": 6,
                "beta": 10.0,
                "lam": 100.0,
                "noise_sd": 1.0,
                "arms": 50,
                "p_offline": 0.5,
                "nuts": {
                    "samples": args.nuts_samples,
                    "warmup": args.nuts_warmup,
                    "chains": args.nuts_chains,
                },
            },
            "cells": cells,
        }
        write_json(path, report)
        plot(cells, args.out / "posterior_speed.png")


if __name__ == "__main__":
    main()

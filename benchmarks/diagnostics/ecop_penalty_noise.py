"""How often e-COP's penalty switches on from minibatch noise alone, with and without the control variate.

e-COP's penalty (Eq. `main_e-COP_problem`) acts on ``psi_i = L_Ci + J_Ci - d_i`` with
``L_Ci = H_eff mean_B max(rho A_C, clip(rho) A_C)``. On a minibatch ``B`` that mean carries the minibatch's
mean cost advantage, which is zero only over the whole batch: times ``H_eff`` (about 120 steps on
AntCircle) it moves ``psi`` by tens of cost units, so the penalty switches on while the batch's ``psi`` is
far below zero. ``penalty_control_variate`` subtracts ``H_eff mean_B A_C`` (the same gradient).

The script trains e-COP (the 10-seed table's settings, ``benchmarks/ecop_compare.py``'s ``BASE_CFG``)
for ``--steps`` on one task and seed, once per setting, records ``psi`` at every minibatch step (a wrapper
around ``ecop_penalty``) and writes quantiles, the share of minibatch steps with the penalty on
(``psi > -lambda / beta``), the whole batch's ``psi`` after each update (``metrics`` ``psi``) and a
histogram (``--out``.json / .png).

    .venv/bin/python benchmarks/diagnostics/ecop_penalty_noise.py --env bayescrl/AntCircle-v0 --limit 10 \\
        --seed 7 --steps 32000

``--curves RUNS.jsonl SWEEP_DIR TASK`` instead compares learning curves over 10^6 steps: the variant's runs
(``ecop_compare.py``'s ``runs.jsonl`` with its curves, before ``slim_results.py`` strips them) against e-COP
and PPO-Lagrangian in the sweep folder (``TASK_{ecop,ppo-lag}_s*/curves.json``): the mean over seeds, and
the first env step at which it (averaged over 20 iterations) reaches 2, 5 and 10
(``--out``_learning.json / .png).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import bayescrl.constrained.ecop as ecop_mod  # noqa: E402
from bayescrl.constrained.registry import get_algorithm  # noqa: E402
from bayescrl.utils.io import write_json  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ecop_compare.py
from ecop_compare import BASE_CFG  # noqa: E402 - the table's settings

OUT = Path(__file__).resolve().parents[1] / "results" / "ecop" / "penalty_noise"


def _quantiles(x: np.ndarray, qs: tuple[float, ...]) -> dict[str, float]:
    return {f"{100 * q:g}": float(v) for q, v in zip(qs, np.quantile(x, qs), strict=True)}


def one(env: str, limit: float, seed: int, steps: int, control_variate: bool) -> dict:
    """Train e-COP with ``ecop_penalty`` wrapped; per-minibatch ``psi`` of the first constraint."""
    calls: list[tuple[float, float, float]] = []
    original = ecop_mod.ecop_penalty

    def recording(psi: torch.Tensor, lam: torch.Tensor, beta: float) -> torch.Tensor:
        calls.append((float(psi.detach()[0]), float(lam[0]), beta))
        return original(psi, lam, beta)

    ecop_mod.ecop_penalty = recording
    try:
        cfg = {**BASE_CFG, "penalty_control_variate": control_variate}
        agent = get_algorithm("ecop")(env, [limit], seed=seed, config=cfg)
        agent.learn(steps, progress=False)
        hist = agent.history
        agent.close()
    finally:
        ecop_mod.ecop_penalty = original
    psi = np.array([c[0] for c in calls])
    on = psi > -np.array([c[1] / c[2] for c in calls])
    batch_psi = np.array([r["psi"][0] for r in hist])
    return {
        "control_variate": control_variate,
        "minibatch_steps": len(psi),
        "penalty_on_share": float(on.mean()),
        "minibatch_psi_quantiles": _quantiles(psi, (0.05, 0.25, 0.5, 0.75, 0.95)),
        "batch_psi_quantiles": _quantiles(batch_psi, (0.05, 0.5, 0.95)),
        "mean_policy_epochs": float(np.mean([r["policy_epochs"] for r in hist])),
        "mean_ep_cost": float(np.mean([r["ep_costs"][0] for r in hist])),
        "psi": psi.tolist(),
    }


def _first_step(mean: np.ndarray, steps: list[int], level: float, window: int = 20) -> int | None:
    """The first env step at which the ``window``-iteration moving average of ``mean`` reaches ``level``."""
    smooth = np.convolve(mean, np.ones(window) / window, mode="valid")
    hits = np.flatnonzero(smooth >= level)
    return int(steps[hits[0] + window - 1]) if hits.size else None


def curves(runs: Path, sweep: Path, task: str, out: Path, label: str = "ecop, control variate") -> dict:
    """Mean learning curves of the variant in ``runs`` and of e-COP and PPO-Lagrangian in ``sweep``."""
    recs = [json.loads(line) for line in runs.read_text().splitlines() if line.strip()]
    if not recs or "curve_return" not in recs[0]:
        raise SystemExit(f"{runs}: no curves (slimmed already?)")
    groups = {label: ([r["curve_return"] for r in recs], recs[0]["curve_steps"])}
    for algo in ("ecop", "ppo-lag"):
        found = [json.loads(p.read_text()) for p in sorted(sweep.glob(f"{task}_{algo}_s*/curves.json"))]
        groups[algo] = ([c["ep_return"] for c in found], found[0]["env_steps"])
    summary: dict = {"task": task, "runs": str(runs), "sweep": str(sweep), "window": 20, "groups": {}}
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, (ys, steps) in groups.items():
        n = min(len(y) for y in ys)
        mean = np.mean([y[:n] for y in ys], axis=0)
        steps = steps[:n]
        summary["groups"][name] = {
            "seeds": len(ys),
            "first_step_at": {str(lv): _first_step(mean, steps, lv) for lv in (2, 5, 10)},
            "final_mean_20": float(mean[-20:].mean()),
        }
        smooth = np.convolve(mean, np.ones(20) / 20, mode="valid")  # the moving average ending at each step
        ax.plot(steps[19:], smooth, label=f"{name} ({len(ys)} seeds)")
    ax.set_xlabel("env steps")
    ax.set_ylabel("episodic return, mean over seeds")
    ax.set_title(f"{task}: e-COP with and without the penalty's control variate", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=110)
    write_json(out.with_suffix(".json"), summary)
    return summary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="bayescrl/AntCircle-v0")
    p.add_argument("--limit", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--steps", type=int, default=32_000)
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--curves", nargs=3, metavar=("RUNS", "SWEEP", "TASK"), help="compare learning curves")
    a = p.parse_args()
    if a.curves:
        res = curves(
            Path(a.curves[0]), Path(a.curves[1]), a.curves[2], a.out.with_name(a.out.name + "_learning")
        )
        print(json.dumps(res["groups"], indent=1))
        return
    torch.set_num_threads(1)
    runs = [one(a.env, a.limit, a.seed, a.steps, cv) for cv in (False, True)]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    lo, hi = np.quantile(runs[0]["psi"], [0.01, 0.99])
    for r in runs:
        cv = "on" if r["control_variate"] else "off"
        label = f"control variate {cv}: penalty on {r['penalty_on_share']:.0%}"
        ax.hist(np.clip(r["psi"], lo, hi), bins=60, range=(lo, hi), alpha=0.55, label=label)
    ax.axvline(0.0, color="k", lw=0.8)
    ax.set_xlabel("minibatch psi = L_C + J_C - d (episode cost units)")
    ax.set_ylabel("minibatch steps")
    ax.set_title(f"e-COP on {a.env.split('/')[-1]}, seed {a.seed}, first {a.steps:,} steps", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out.with_suffix(".png"), dpi=110)
    for r in runs:
        r.pop("psi")
    summary = {
        "env": a.env,
        "limit": a.limit,
        "seed": a.seed,
        "steps": a.steps,
        "settings": BASE_CFG,
        "runs": runs,
    }
    write_json(a.out.with_suffix(".json"), summary)
    for r in runs:
        print(
            f"control variate {r['control_variate']!s:5}: penalty on in {r['penalty_on_share']:.1%} of "
            f"{r['minibatch_steps']} minibatch steps; minibatch psi 5-95 % "
            f"[{r['minibatch_psi_quantiles']['5']:.1f}, {r['minibatch_psi_quantiles']['95']:.1f}], "
            f"batch psi median {r['batch_psi_quantiles']['50']:.1f}"
        )
    print(f"wrote {a.out.with_suffix('.json')} and .png")


if __name__ == "__main__":
    main()

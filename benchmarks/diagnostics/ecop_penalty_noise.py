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
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="bayescrl/AntCircle-v0")
    p.add_argument("--limit", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--steps", type=int, default=32_000)
    p.add_argument("--out", type=Path, default=OUT)
    a = p.parse_args()
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

"""The README's ACPO figure and table: learning curves of several studies side by side (figure
`rewards_costs_comparison` of chapter `acpo`: mean ± 1 sd over seeds, dashed cost limit).

    .venv/bin/python benchmarks/acpo_figure.py

Reads the ``compare.json`` files written by ``benchmarks/acpo_compare.py`` (the studies listed in
:data:`SERIES`; a missing study is skipped with a note) and writes
``benchmarks/results/acpo/figure_rewards_costs.png`` (one row per task: protocol reward, protocol cost) and
``figure_rewards_costs.md`` (final protocol numbers beside the seed's claims; mean ± sample sd over
seeds). The README's ACPO tables are ``bayescrl report`` over the same runs, converted into sweep folders
(``examples/sweeps/acpo_point.yaml``, ``benchmarks/to_sweep.py``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

ROOT = Path("benchmarks/results/acpo")

#: task -> (budget label, seed's claim, [(label, study directory, algorithm key)])
SERIES: dict[str, tuple[str, str, list[tuple[str, str, str]]]] = {
    "PointCircle": (
        "8·10⁵ steps, batch 10⁴, δ = 0.01",
        "figure only (ACPO highest reward within the limit)",
        [
            ("ACPO, correction 0.2, log-std -0.5", "circle_8e5_n20_ec0.2_std05", "acpo"),
            ("ACPO (text)", "circle_phase_8e5_n20", "acpo"),
            ("CPO (γ 0.999)", "circle_phase_8e5_n20", "cpo"),
            ("ATRPO, Lagrangian ℓ 0.5", "circle_phase_8e5_n20", "atrpo"),
            ("PCPO (γ 0.999)", "circle_8e5_n20_baselines", "pcpo"),
            ("PPO, Lagrangian ℓ 0.5 (γ 0.999)", "circle_8e5_n20_baselines", "ppo-lag"),
        ],
    ),
    "PointGather": (
        "10⁶ steps, batch 10⁴, δ = 0.01",
        "ACPO +52.5 % over CPO, +36.1 % over PCPO, no more violation",
        [
            ("ACPO, correction 0.2", "gather_1e6_n20_ec0.2", "acpo"),
            ("ACPO (text)", "gather_1e6_n20", "acpo"),
            ("CPO (γ 0.999)", "gather_1e6_n20", "cpo"),
            ("ATRPO, Lagrangian ℓ 0.5", "gather_1e6_n20", "atrpo"),
            ("PCPO (γ 0.999)", "gather_1e6_n20_baselines", "pcpo"),
            ("PPO, Lagrangian ℓ 0.55 (γ 0.999)", "gather_1e6_n20_baselines", "ppo-lag"),
        ],
    ),
    "AntCircle": (
        "10⁵ steps (the seed's budget), batch 2500, δ = 0.01",
        "figure only",
        [
            ("ACPO (text)", "ant_1e5", "acpo"),
            ("CPO (γ 0.999)", "ant_1e5", "cpo"),
            ("ATRPO, Lagrangian ℓ 0.6", "ant_1e5", "atrpo"),
        ],
    ),
    "AntGather": (
        "10⁵ steps (the seed's budget), batch 2500, δ = 0.01",
        "figure only",
        [
            ("ACPO (text)", "ant_1e5", "acpo"),
            ("CPO (γ 0.999)", "ant_1e5", "cpo"),
            ("ATRPO, Lagrangian ℓ 0.45", "ant_1e5", "atrpo"),
        ],
    ),
}


def load(root: Path) -> dict[str, dict]:
    """task -> {"limit", "budget", "claim", "series": [(label, aggregate)]}; notes what is missing."""
    out: dict[str, dict] = {}
    for task, (budget, claim, series) in SERIES.items():
        rows = []
        limit = None
        for label, study, algo in series:
            path = root / study / "compare.json"
            if not path.exists():
                print(f"note: {path} missing, '{label}' left out")
                continue
            res = json.loads(path.read_text())["tasks"].get(task)
            if res is None or algo not in res["algos"]:
                print(f"note: {path} has no {task}/{algo}, '{label}' left out")
                continue
            limit = res["limit_per_step"]
            rows.append((label, res["algos"][algo]))
        if rows:
            out[task] = {"limit": limit, "budget": budget, "claim": claim, "series": rows}
    return out


def table(data: dict[str, dict]) -> str:
    lines = []
    for task, d in data.items():
        lim = d["limit"]
        lines += [
            f"**{task}** ({d['budget']}; limit l = {lim:g} per step; seed's claim: {d['claim']})",
            "",
            "| algorithm | seeds | final avg reward (mean ± sd) | final avg cost / l | seeds ≤ 1.1 l |",
            "|---|---|---|---|---|",
        ]
        for label, a in d["series"]:
            ok = int(np.sum(np.asarray(a["final_costs"]) <= 1.1 * lim))
            n = len(a["seeds"])
            sd = (
                float(np.std(a["final_rewards"], ddof=1)) if n > 1 else 0.0
            )  # sample sd, as `bayescrl report`
            reward = f"{a['final_reward_mean']:.4f} ± {sd:.4f}"
            lines.append(f"| {label} | {n} | {reward} | {a['final_cost_mean'] / lim:.2f} | {ok}/{n} |")
        lines.append("")
    return "\n".join(lines)


def figure(data: dict[str, dict], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(data), 2, figsize=(11, 3.2 * len(data)), squeeze=False)
    for row, (task, d) in enumerate(data.items()):
        for col, key in enumerate(("reward", "cost")):
            ax = axes[row, col]
            for label, a in d["series"]:
                x = np.asarray(a["env_steps"])
                m, s = np.asarray(a[f"{key}_mean"]), np.asarray(a[f"{key}_sd"])
                ax.plot(x, m, label=label, lw=1.3)
                ax.fill_between(x, m - s, m + s, alpha=0.15)
            if key == "cost":  # the protocol's costs are averages per step, as is the limit l
                ax.axhline(d["limit"], color="k", ls="--", lw=1, label=f"limit l = {d['limit']:g} per step")
            ax.set_title(f"{task}: average {key} (protocol)", fontsize=10)
            ax.set_ylabel(f"average {key} per step")
            ax.set_xlabel("env steps")
            ax.grid(alpha=0.3)
        axes[row, 1].legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=str(ROOT))
    args = ap.parse_args(argv)
    root = Path(args.root)
    data = load(root)
    md = table(data)
    (root / "figure_rewards_costs.md").write_text(md + "\n")
    print(md)
    print(figure(data, root / "figure_rewards_costs.png"))


if __name__ == "__main__":
    main()

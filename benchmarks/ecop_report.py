"""Print the e-COP benchmark results (JSON under benchmarks/results/ecop/) as markdown next to the seed's.

.venv/bin/python benchmarks/ecop_report.py
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).parent / "results" / "ecop"
# Table `rewards_costs_comparison`, row PointCircle (limit 10): (R, R ci, C, C ci)
SEED_TABLE = {
    "ecop": (110.5, 9.3, 9.8, 0.9),
    "focops": (81.6, 8.4, 10.0, 0.4),
    "ppo-lag": (57.2, 9.2, 9.8, 0.5),
    "pcpo": (68.2, 9.1, 9.9, 0.4),
    "p3o": (89.1, 7.1, 9.9, 0.3),
    "cpo": (65.3, 5.3, 9.5, 0.9),
    "ipo": (68.7, 15.2, 9.3, 0.5),
}
# Table `ecop-sensitivity`, row PointCircle (limit 20)
SEED_SENS = {
    "ecop[beta5-fixed]": (150.5, 11.1, 17.3, 1.3),
    "ecop[beta5-adaptive]": (168.6, 14.3, 19.7, 0.6),
    "ecop[beta10-fixed]": (145.2, 12.2, 18.8, 1.5),
    "ecop[beta10-adaptive]": (165.3, 11.4, 18.3, 1.4),
    "p3o": (162.4, 14.7, 19.1, 3.3),
}


def table(name: str, seed: dict) -> str:
    path = OUT / f"{name}.json"
    if not path.exists():
        return f"({name}.json missing)\n"
    d = json.loads(path.read_text())
    rows = [
        f"{d['env']}, limit {d['cost_limit']:g}, {d['steps']} env steps x {len(d['seeds'])} seeds",
        "",
        "| algorithm | return (ours) | cost (ours) | det. eval return / cost | steps/s | "
        "return (seed) | cost (seed) |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, t in d["table"].items():
        s = seed.get(label)
        sr = f"{s[0]} ± {s[1]}" if s else "-"
        sc = f"{s[2]} ± {s[3]}" if s else "-"
        rows.append(
            f"| {label} | {t['return_mean']:.1f} ± {t['return_ci95']:.1f} | {t['cost_mean']:.1f} ± "
            f"{t['cost_ci95']:.1f} | {t['eval_return_mean']:.1f} / {t['eval_cost_mean']:.1f} | "
            f"{t['steps_per_s']:.0f} | {sr} | {sc} |"
        )
    return "\n".join(rows) + "\n"


def main() -> None:
    print(table("table_pointcircle", SEED_TABLE))
    print(table("table_pointcircle_100k", SEED_TABLE))
    print(table("pointcircle_limit10_60k", SEED_TABLE))
    print(table("pointcircle_limit10_100k", SEED_TABLE))
    print(table("beta_sensitivity_pointcircle", SEED_SENS))
    p = OUT / "throughput.json"
    if p.exists():
        d = json.loads(p.read_text())
        med = d["median_steps_per_s"]
        print("throughput (median steps/s): " + ", ".join(f"{k} {v:.0f}" for k, v in med.items()))
        print(
            f"ratios vs SB3 PPO: ppo-lag {d['ratio_ppo_lag_vs_sb3']:.2f}x, ecop {d['ratio_ecop_vs_sb3']:.2f}x"
        )


if __name__ == "__main__":
    main()

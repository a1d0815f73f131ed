"""Print the e-COP benchmark results (JSON under benchmarks/results/ecop/) as markdown next to the seed's.

.venv/bin/python benchmarks/ecop_report.py
"""

from __future__ import annotations

import json
from pathlib import Path

from bayescrl.utils.spread import spread

OUT = Path(__file__).parent / "results" / "ecop"
ALGOS = ("ecop", "focops", "ppo-lag", "pcpo", "p3o", "cpo", "appo", "ipo")  # the seed's column order


def _row(*cells: tuple[float, float, float, float] | None) -> dict:
    return {a: c for a, c in zip(ALGOS, cells, strict=True) if c is not None}


# Table `rewards_costs_comparison` of chapter `ecop`: per task, algorithm -> (R, R ci, C, C ci)
# (Navigation: the first cost; Grid and Bottleneck are traffic tasks, not in this suite)
SEED_ROWS = {
    "HumanoidRun": _row(
        (1652.5, 13.4, 17.3, 0.3),
        (1734.1, 27.4, 19.7, 0.6),
        (1431.2, 25.2, 18.8, 1.5),
        (1602.3, 10.1, 16.3, 1.4),
        (1669.4, 13.7, 20.1, 3.3),
        (1465.1, 55.3, 18.5, 2.9),
        (1488.2, 29.3, 20.0, 1.3),
        (1578.6, 25.2, 19.1, 2.5),
    ),
    "PointCircle": _row(
        (110.5, 9.3, 9.8, 0.9),
        (81.6, 8.4, 10.0, 0.4),
        (57.2, 9.2, 9.8, 0.5),
        (68.2, 9.1, 9.9, 0.4),
        (89.1, 7.1, 9.9, 0.3),
        (65.3, 5.3, 9.5, 0.9),
        (91.2, 9.6, 10.2, 0.6),
        (68.7, 15.2, 9.3, 0.5),
    ),
    "AntCircle": _row(
        (198.6, 7.4, 9.8, 0.6),
        (161.9, 22.2, 9.9, 0.5),
        (134.4, 10.3, 9.6, 1.6),
        (168.3, 13.3, 9.5, 0.6),
        (182.6, 18.7, 9.8, 0.2),
        (127.1, 12.1, 10.1, 0.7),
        (155.5, 19.4, 10.0, 0.5),
        (149.3, 33.6, 9.5, 1.0),
    ),
    "PointReach": _row(
        (81.5, 10.2, 24.5, 6.1),
        (65.1, 9.6, 24.8, 7.6),
        (46.1, 14.8, 25.1, 6.1),
        (73.2, 7.4, 24.9, 5.6),
        (76.3, 6.4, 26.3, 6.9),
        (89.2, 8.1, 33.3, 10.7),
        (74.3, 6.7, 26.3, 8.1),
        (49.1, 10.6, 24.7, 11.3),
    ),
    "AntReach": _row(
        (70.8, 14.6, 24.2, 8.4),
        (48.3, 5.6, 25.1, 11.9),
        (54.2, 9.5, 21.9, 10.7),
        (39.4, 5.3, 27.9, 12.2),
        (73.6, 5.1, 24.8, 7.3),
        (102.3, 7.1, 35.1, 10.9),
        (61.5, 10.4, 24.5, 6.4),
        (45.2, 13.3, 24.9, 9.2),
    ),
    "PointNavigation": _row(
        (217.6, 11.5, 9.6, 1.5),
        None,
        (175.1, 3.7, 9.9, 1.9),
        None,
        (153.5, 25.2, 9.9, 1.7),
        None,
        (135.7, 19.2, 9.9, 2.1),
        (164.1, 12.8, 10.0, 0.5),
    ),
}
SEED_TABLE = SEED_ROWS["PointCircle"]
# Table `ecop-sensitivity`, row PointCircle (limit 20)
SEED_SENS = {
    "ecop[beta5-fixed]": (150.5, 11.1, 17.3, 1.3),
    "ecop[beta5-adaptive]": (168.6, 14.3, 19.7, 0.6),
    "ecop[beta10-fixed]": (145.2, 12.2, 18.8, 1.5),
    "ecop[beta10-adaptive]": (165.3, 11.4, 18.3, 1.4),
    "p3o": (162.4, 14.7, 19.1, 3.3),
}


def _msd(values: list[float]) -> tuple[float, float | None, int]:
    sp = spread(values)
    return sp.mean, sp.sd, sp.n


def fmt_spread(mean: float, sd: float | None, n: int) -> str:
    """``mean ± sample sd`` to one decimal (the docs' e-COP tables; n is in the table's caption)."""
    return f"{mean:.1f}" if sd is None else f"{mean:.1f} ± {sd:.1f}"


def table(name: str, seed: dict) -> str:
    path = OUT / f"{name}.json"
    if not path.exists():
        return f"({name}.json missing)\n"
    d = json.loads(path.read_text())
    runs = OUT / f"{name}.runs.jsonl"
    per_label: dict[str, list[dict]] = {}
    if runs.exists():  # the spread is the sample sd over seeds, from the per-run records
        for ln in runs.read_text().splitlines():
            if ln.strip():
                r = json.loads(ln)
                per_label.setdefault(r.get("label", r["algo"]), []).append(r)
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
        rs = {r["seed"]: r for r in per_label.get(label, [])}.values()
        ret = fmt_spread(*_msd([r["return"] for r in rs])) if rs else f"{t['return_mean']:.1f} (no sd)"
        cost = fmt_spread(*_msd([r["costs"][0] for r in rs])) if rs else f"{t['cost_mean']:.1f}"
        rows.append(
            f"| {label} | {ret} | {cost} | {t['eval_return_mean']:.1f} / {t['eval_cost_mean']:.1f} | "
            f"{t['steps_per_s']:.0f} | {sr} | {sc} |"
        )
    return "\n".join(rows) + "\n"


def main() -> None:
    print(table("table_pointcircle", SEED_TABLE))
    print(table("table_pointcircle_100k", SEED_TABLE))
    print(table("pointcircle_limit10_60k", SEED_TABLE))
    print(table("pointcircle_limit10_100k", SEED_TABLE))
    print(table("pointcircle_limit10_100k_v2", SEED_TABLE))
    for name, task in [
        ("table_humanoidrun_100k", "HumanoidRun"),
        ("table_antcircle_100k", "AntCircle"),
        ("table_antcircle_100k_v2", "AntCircle"),
        ("table_pointreach_100k", "PointReach"),
        ("table_pointreach_100k_ecop_v2", "PointReach"),
        ("table_antreach_100k", "AntReach"),
        ("table_pointnavigation_100k", "PointNavigation"),
        ("table_pointnavigation_100k_ecop_v2", "PointNavigation"),
    ]:
        print(table(name, SEED_ROWS[task]))
    print(table("beta_sensitivity_pointcircle", SEED_SENS))
    print(table("beta_sensitivity_pointcircle_100k", SEED_SENS))
    print(table("beta_sensitivity_pointcircle_100k_v2", SEED_SENS))
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

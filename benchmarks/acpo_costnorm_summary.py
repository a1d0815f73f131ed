"""Lagrangian ATRPO with cost advantages normalised (the thesis' appendix) against the earlier runs that only
centred them, and against ACPO, on Point-Circle (8·10⁵ steps, batch 10⁴, δ = 0.01), seed by seed.

    .venv/bin/python benchmarks/acpo_costnorm_summary.py

Reads the ``compare.json`` of ``circle_8e5_n20_costnorm`` (``acpo_compare.py --algos atrpo``), of
``circle_8e5_n20_acpo_v2`` (ACPO re-run with its phase-stratified GAE rate and the tiny-q guard, same
settings as before) and of the earlier studies; writes
``circle_8e5_n20_costnorm/summary.json`` and prints a table.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bayescrl.utils.io import write_json

ROOT = Path("benchmarks/results/acpo")
OLD = {  # label -> [(study, algo)], seeds 0-4 and 5-9
    "ATRPO ℓ 0.5, costs centred (before)": [
        ("circle_8e5_n20_ec0.2_std05", "atrpo"),
        ("circle_8e5_n20_ec0.2_std05_s5-9", "atrpo"),
    ],
    "ACPO, correction 0.2, log-std −0.5 (before)": [
        ("circle_8e5_n20_ec0.2_std05", "acpo"),
        ("circle_8e5_n20_ec0.2_std05_s5-9", "acpo"),
    ],
    "ACPO (text)": [("circle_phase_8e5_n20", "acpo")],
}


def per_seed(study: str, algo: str) -> dict[int, tuple[float, float]]:
    a = json.loads((ROOT / study / "compare.json").read_text())["tasks"]["PointCircle"]["algos"][algo]
    return {s: (r, c) for s, r, c in zip(a["seeds"], a["final_rewards"], a["final_costs"], strict=True)}


def main() -> dict:
    new = per_seed("circle_8e5_n20_costnorm", "atrpo")
    rows = {
        "ATRPO ℓ 0.5, costs normalised (now)": new,
        "ACPO, correction 0.2, log-std −0.5 (now)": per_seed("circle_8e5_n20_acpo_v2", "acpo"),
    }
    for label, parts in OLD.items():
        rows[label] = {k: v for study, algo in parts for k, v in per_seed(study, algo).items()}
    seeds = sorted(new)
    out = {"seeds": seeds, "limit_per_step": 0.05, "rows": {}}
    print(f"Point-Circle, seeds {seeds} (limit 0.05 per step)")
    for label, d in rows.items():
        rr = np.array([d[s][0] for s in seeds if s in d])
        cc = np.array([d[s][1] for s in seeds if s in d])
        out["rows"][label] = {
            "seeds": [s for s in seeds if s in d],
            "reward_mean": float(rr.mean()),
            "reward_sd": float(rr.std(ddof=1)) if len(rr) > 1 else 0.0,
            "reward_median": float(np.median(rr)),
            "cost_mean": float(cc.mean()),
            "cost_sd": float(cc.std(ddof=1)) if len(cc) > 1 else 0.0,
            "within_1.1l": int((cc <= 1.1 * 0.05).sum()),
            "rewards": rr.tolist(),
            "costs": cc.tolist(),
        }
        r = out["rows"][label]
        print(
            f"| {label} | {r['reward_mean']:.3f} ± {r['reward_sd']:.3f} | {r['reward_median']:.3f} "
            f"| {r['cost_mean']:.4f} ± {r['cost_sd']:.4f} | {r['within_1.1l']}/{len(r['seeds'])} |"
        )
    write_json(ROOT / "circle_8e5_n20_costnorm" / "summary.json", out)
    return out


if __name__ == "__main__":
    main()

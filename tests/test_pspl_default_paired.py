"""``benchmarks/pspl_default.py`` and ``pspl_ablation.py``: the paired per-seed comparisons (a PSPL agent with
each baseline; consecutive sweep values; agents at one sweep value), against hand-computed values."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("_pspl_default", ROOT / "benchmarks" / "pspl_default.py")
P = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(P)


def test_paired_by_hand():
    """PSPL − DPS per seed: −1, −2, −3, −4, +0.5 (mean −1.9, sample sd √(12.2 / 4) = 1.7464, t_.975(4) =
    2.7764); PSPL lower on 4 of 5 seeds; Wilcoxon signed-rank: W+ = 1 (the +0.5 has rank 1), exact two-sided
    p = 2 · #{W+ <= 1} / 32 = 2 · 2 / 32 = 0.125. DPS − PSPL flips the sign of every difference."""
    agents = {
        "pspl": {"final_simple_regret_per_seed": [0.0, 0.0, 0.0, 0.0, 0.5]},
        "dps": {"final_simple_regret_per_seed": [1.0, 2.0, 3.0, 4.0, 0.0]},
        "uniform": {"final_simple_regret_per_seed": [9.0] * 5},
    }
    out = P.paired_vs_baselines(agents)
    assert list(out) == ["pspl - dps"]  # only PSPL agents against the four baselines present
    row = out["pspl - dps"]
    half = 2.7764451 * (12.2 / 4) ** 0.5 / 5**0.5
    assert row["mean"] == pytest.approx(-1.9)
    assert row["ci95"] == pytest.approx([-1.9 - half, -1.9 + half], rel=1e-6)
    assert (row["n"], row["pspl_lower"]) == (5, 4)
    assert row["wilcoxon_p"] == pytest.approx(0.125, abs=1e-9)


_abl_spec = importlib.util.spec_from_file_location("_pspl_ablation", ROOT / "benchmarks" / "pspl_ablation.py")
A = importlib.util.module_from_spec(_abl_spec)
_abl_spec.loader.exec_module(A)


def test_sweep_pairs_by_hand():
    """Two sweep values, two agents, 3 seeds: ``paired_next`` is next value − this one per agent,
    ``paired_agents`` the first agent − the other at each value (means and seed counts by hand)."""

    def run(value, a, b):
        return {
            "value": value,
            "agents": {
                "pspl-bootstrap": {"final_simple_regret_per_seed": a},
                "dps": {"final_simple_regret_per_seed": b},
            },
        }

    sweep = {
        "runs": [run(1.0, [1.0, 2.0, 3.0], [2.0, 2.0, 5.0]), run(10.0, [0.5, 2.5, 1.0], [1.0, 1.0, 1.0])]
    }
    nxt = A.paired_next(sweep)["pspl-bootstrap"]["1.0 -> 10.0"]  # −0.5, +0.5, −2.0
    assert nxt["mean"] == pytest.approx(-2.0 / 3) and (nxt["b_lower"], nxt["n"]) == (2, 3)
    ag = A.paired_agents(sweep)
    assert ag["1.0"]["pspl-bootstrap - dps"]["mean"] == pytest.approx(-1.0)  # −1, 0, −2
    assert ag["1.0"]["pspl-bootstrap - dps"]["first_lower"] == 2
    assert ag["10.0"]["pspl-bootstrap - dps"]["mean"] == pytest.approx(1.0 / 3)  # −0.5, +1.5, 0
    assert list(ag) == ["1.0", "10.0"]

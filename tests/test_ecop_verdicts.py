"""``benchmarks/ecop_verdicts.py``: the statistics behind the e-COP table's verdicts, against hand-computed
values, and a variant's row (``--variant``) against e-COP and the best other algorithm."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("_ecop_verdicts", ROOT / "benchmarks" / "ecop_verdicts.py")
V = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(V)


def test_welch_by_hand():
    """a = [1, 2, 3], b = [4, 5, 6]: difference −3, se = √(1/3 + 1/3), Welch df = 4, t_.975(4) = 2.7764;
    t = −3.674 with 4 df: two-sided p = 0.02131; Mann–Whitney U = 0: exact p = 2/20 = 0.1."""
    w = V.welch([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    half = 2.7764451 * math.sqrt(2 / 3)
    assert w["diff"] == pytest.approx(-3.0)
    assert w["ci95"] == pytest.approx([-3.0 - half, -3.0 + half], rel=1e-6)
    assert w["p_welch"] == pytest.approx(0.02131, abs=2e-5)
    assert w["p_mannwhitney"] == pytest.approx(0.1, abs=1e-9)


def test_verdict_compares_ecop_with_the_best_feasible_other():
    def row(values, cost):
        return {
            "return": V.cell(values),
            "return_values": values,
            "costs": [V.cell([cost, cost])],
            "limits": [10.0],
            "n": len(values),
        }

    rows = {
        "ecop": row([10.0, 11.0, 12.0], 5.0),
        "a": row([1.0, 2.0, 3.0], 5.0),
        "b": row([50.0, 60, 70], 20.0),
    }
    v = V.verdict(rows)
    assert (
        v["best_other_within_limit"] == "a" and v["verdict"] == "e-COP higher than a"
    )  # b is over the limit


def test_a_variant_is_compared_with_ecop_and_the_best_other(tmp_path):
    runs = tmp_path / "variant.runs.jsonl"
    recs = [
        {"seed": s, "return": r, "costs": [c]} for s, r, c in ((0, 4.0, 5.0), (1, 5.0, 12.0), (2, 6.0, 7.0))
    ]
    runs.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    rows = {
        "ecop": {"return_values": [1.0, 2.0, 3.0], "limits": [10.0]},
        "ppo-lag": {"return_values": [4.0, 5.0, 6.0], "limits": [10.0]},
    }
    out = V.variant_row(rows, {"best_other_within_limit": "ppo-lag"}, runs, "T")
    assert out["row"]["return"]["mean"] == pytest.approx(5.0) and out["row"]["seeds"] == [0, 1, 2]
    assert out["row"]["seeds_within_limit"] == 2  # seed 1 is over the limit
    assert out["minus_ecop"] == V.welch([4.0, 5.0, 6.0], [1.0, 2.0, 3.0])
    assert out["minus_best"]["diff"] == pytest.approx(0.0) and out["best_other"] == "ppo-lag"
    # the same runs as a sweep folder (report.json + metrics.json), beside another task's run
    sweep = tmp_path / "sweep"
    groups = [{"point": {"task": "T"}, "runs": [f"T_s{r['seed']}" for r in recs]}]
    groups.append({"point": {"task": "U"}, "runs": ["U_s0"]})
    for run, ret, costs in [(f"T_s{r['seed']}", r["return"], r["costs"]) for r in recs] + [
        ("U_s0", 99.0, [0.0])
    ]:
        (sweep / run).mkdir(parents=True)
        metrics = {"seed": int(run[-1]), "train_final_return": ret, "train_final_costs": costs}
        (sweep / run / "metrics.json").write_text(json.dumps(metrics))
    (sweep / "report.json").write_text(json.dumps({"groups": groups}))
    assert V.variant_row(rows, {"best_other_within_limit": "ppo-lag"}, sweep, "T") == {
        **out,
        "row": {**out["row"], "source": str(sweep)},
    }

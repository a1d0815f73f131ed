# ruff: noqa: E501  (the registry quotes the pages' text verbatim)
"""Table and sentence pins (tests/claims_cells.py) for the experiment sections of docs/reproduction.md and
the other docs pages: each markdown table row is checked cell by cell against its committed result file."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from claims import REPRO, R, msd
from claims_cells import Quote, Row, Table

from bayescrl.utils.spread import sample_sd

# ---- ACPO: `benchmarks/acpo_compare.py` studies (compare.json: per-seed final reward and cost) ----------

AC = R + "acpo/"


def _algo(d: dict, key: tuple) -> dict:
    task, algo, *n = key
    a = dict(d["tasks"][task]["algos"][algo])
    if n:  # the first n seeds of a study that later grew
        a["final_rewards"], a["final_costs"] = a["final_rewards"][: n[0]], a["final_costs"][: n[0]]
    a["limit"] = d["tasks"][task]["limit_per_step"]
    return a


def a_rew(d: dict, k: tuple) -> list[float]:
    return list(msd(_algo(d, k)["final_rewards"]))


def a_cost(d: dict, k: tuple) -> list[float]:
    return list(msd(_algo(d, k)["final_costs"]))


def a_cost_mean(d: dict, k: tuple) -> list[float]:
    return [msd(_algo(d, k)["final_costs"])[0]]


def a_ratio(d: dict, k: tuple) -> list[float]:
    a = _algo(d, k)
    return [msd(a["final_costs"])[0] / a["limit"]]


def a_ratio_sd(d: dict, k: tuple) -> list[float]:
    a = _algo(d, k)
    return [x / a["limit"] for x in msd(a["final_costs"])]


def a_within(d: dict, k: tuple) -> list[float]:
    a = _algo(d, k)
    return [sum(c <= 1.1 * a["limit"] + 1e-12 for c in a["final_costs"]), len(a["final_costs"])]


def a_per_seed(d: dict, k: tuple) -> list[float]:
    return list(_algo(d, k)["final_rewards"])


def a_median(d: dict, k: tuple) -> list[float]:
    v = sorted(_algo(d, k)["final_rewards"])
    n = len(v)
    return [(v[(n - 1) // 2] + v[n // 2]) / 2]


def a_cost_l(d: dict, k: tuple) -> list[float]:
    return [*a_cost_mean(d, k), *a_ratio(d, k)]


STD = (None, a_rew, a_cost, a_ratio, a_within)  # | algorithm | reward | cost | cost / l | seeds ≤ 1.1 l |


def rows(study: str, *keys: tuple) -> tuple[Row, ...]:
    return tuple(Row(AC + study + "/compare.json", k) for k in keys)


PC, PG = "PointCircle", "PointGather"

ACPO_TABLES = [
    Table(REPRO, "ℓ = 0.5 on both tasks (table value for Point-Gather", STD, rows("", (PC, "acpo"), (PC, "atrpo"), (PC, "cpo"))),
    Table(REPRO, "thesis' claim: ACPO +52.5 % over CPO, +36.1 % over PCPO in average reward, no more constraint violation)", STD, rows("", (PG, "acpo"), (PG, "atrpo"), (PG, "cpo"))),
    Table(REPRO, "--out benchmarks/results/acpo/circle_1e5` (δ = 0.01 as above;", STD, rows("circle_1e5", (PC, "acpo"), (PC, "atrpo"), (PC, "cpo"))),
    Table(
        REPRO,
        "--out benchmarks/results/acpo/circle_batch_1e5`); ≈ 30 s per run",
        (None, *STD),
        (
            *rows("circle_batch_1e5", (PC, "acpo")),
            *rows("circle_phase_1e5", (PC, "acpo"), (PC, "atrpo")),
            *rows("circle_phase_1e5_d1e-3", (PC, "acpo"), (PC, "atrpo")),
            *rows("circle_phase_1e5_d1e-4", (PC, "acpo"), (PC, "atrpo")),
        ),
    ),
    Table(
        REPRO,
        "S/10 --out benchmarks/results/acpo/circle_phase_{1e5,2e5}_n20` (≈ 25 s / 45 s per run):",
        (None, None, *STD),
        (
            *rows("circle_phase_1e5_n20", (PC, "acpo"), (PC, "atrpo")),
            *rows("circle_phase_2e5_n20", (PC, "acpo", 3), (PC, "atrpo", 3)),
            *rows("circle_phase_2e5_n5", (PC, "acpo")),
        ),
    ),
    Table(
        REPRO,
        "per Gather run). Final protocol numbers (10 × 10³ steps, deterministic policy)",
        (None, *STD),
        (
            *rows("circle_phase_2e5_n20", (PC, "acpo"), (PC, "cpo"), (PC, "atrpo")),
            *rows("gather_2e5_n20", (PG, "acpo"), (PG, "cpo"), (PG, "atrpo")),
        ),
    ),
    Table(REPRO, "--workers 2 --out benchmarks/results/acpo/circle_phase_4e5_n20`", STD, rows("circle_phase_4e5_n20", (PC, "acpo"), (PC, "cpo"), (PC, "atrpo"))),
    Table(REPRO, "benchmarks/results/acpo/circle_phase_8e5_n20`, 2.5-6 min per run", STD, rows("circle_phase_8e5_n20", (PC, "acpo"), (PC, "cpo"), (PC, "atrpo"))),
    Table(REPRO, "--out benchmarks/results/acpo/gather_1e6_n20`, δ = 0.01, 5-9 min per run", STD, rows("gather_1e6_n20", (PG, "acpo"), (PG, "cpo"), (PG, "atrpo"))),
    Table(
        REPRO,
        "the runs of the study above, copied; 3.5-5 min per ACPO run):",
        (*STD, None),
        (
            *rows("circle_8e5_n20_ec0.2", (PC, "acpo")),
            *rows("circle_phase_8e5_n20", (PC, "acpo")),
            *rows("circle_8e5_n20_ec0.2", (PC, "cpo"), (PC, "atrpo")),
        ),
    ),
    Table(
        REPRO,
        "and ATRPO copied from the study above; 7-8.5 min per ACPO run):",
        STD,
        (
            *rows("gather_1e6_n20_ec0.2", (PG, "acpo")),
            *rows("gather_1e6_n20", (PG, "acpo")),
            *rows("gather_1e6_n20_ec0.2", (PG, "cpo"), (PG, "atrpo")),
        ),
    ),
    Table(
        REPRO,
        "--n-envs 20 --out benchmarks/results/acpo/circle_8e5_n20_baselines`, ≈ 4.5 min per run):",
        (None, a_rew, a_ratio, a_within, a_per_seed),
        (
            *rows("circle_8e5_n20_baselines", (PC, "pcpo"), (PC, "ppo-lag")),
            *rows("circle_8e5_n20_ec0.2_std05", (PC, "acpo")),
        ),
    ),
    Table(
        REPRO,
        "--eval-every 100000 --out benchmarks/results/acpo/gather_1e6_n20_baselines`",
        (None, a_rew, a_ratio, a_within),
        (
            *rows("gather_1e6_n20_baselines", (PG, "pcpo"), (PG, "ppo-lag")),
            *rows("gather_1e6_n20", (PG, "acpo")),
            *rows("gather_1e6_n20_ec0.2", (PG, "acpo")),
        ),
    ),
]

TABLES: list[Table] = [*ACPO_TABLES]
QUOTES: list[Quote] = []

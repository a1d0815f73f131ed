# ruff: noqa: E501  (the registry quotes the pages' text verbatim, one string per quote)
"""The registry of run numbers quoted by the README and the docs (`tests/test_claims.py` checks it).

Each :class:`Claim` ties a piece of text on a page to a committed result file: ``text`` must stand in the
page (whitespace normalised) and must equal ``fmt.format(*numbers(data))``, where ``data`` is the loaded
``source`` (JSON under ``benchmarks/results/``, summary level: ``report.json`` of a sweep folder,
``results.json``/``table.json``/``summary.json`` of a benchmark). A number that no file backs, or that
differs from its file, fails. :data:`REPORT_TABLES` lists committed ``report.md`` files whose table rows a
page may quote verbatim; :data:`ALLOWED` the numbers in result-quoting contexts that are not runs' numbers
(with the reason). The coverage test scans the sections in :data:`SCANNED`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bayescrl.utils.spread import sample_sd, t_halfwidth

R = "benchmarks/results/"
SW = R + "sweeps/"
README = "README.md"
REPRO = "docs/reproduction.md"
PSPL = "docs/pspl.md"
PREFRL = "docs/prefrl.md"
PSPL_ALGOS = ("pspl", "pspl-bootstrap", "dps", "lpbrl", "dpo", "ipo", "uniform")


@dataclass(frozen=True)
class Claim:
    page: str
    text: str
    source: str
    numbers: Callable[[Any], Sequence[float]]
    fmt: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.text[:50]}"


# ---- accessors -------------------------------------------------------------------------------------------


def path(data: Any, dotted: str) -> Any:
    """``data["a"]["b"][0]`` for ``"a/b/0"`` (``/`` separates keys, which may hold dots)."""
    for key in dotted.split("/"):
        data = data[int(key)] if isinstance(data, list) else data[key]
    return data


def group(report: dict, **point: str) -> dict:
    """The metrics of the one report group whose grid point has ``point``'s values."""
    hits = [g for g in report["groups"] if all(str(g["point"].get(k)) == v for k, v in point.items())]
    assert len(hits) == 1, (point, len(hits))
    return hits[0]["metrics"]


def stat(report: dict, metric: str, **point: str) -> dict:
    return group(report, **point)[metric]


def ci95(mean: float, sd: float, n: int) -> tuple[float, float]:
    h = t_halfwidth(sd, n)
    return mean - h, mean + h


def ci_of(st: dict) -> tuple[float, float]:
    return ci95(st["mean"], st["sd"], st["n"])


def below(a: float, b: float) -> float:
    """How far ``a`` is below ``b``, in per cent."""
    return 100 * (1 - a / b)


def msd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample sd."""
    return math.fsum(values) / len(values), sample_sd(values)


def J(*paths: str) -> Callable[[Any], list[float]]:
    return lambda d: [path(d, p) for p in paths]


# ---- the registry ----------------------------------------------------------------------------------------

HEAD5, HEAD20 = SW + "warmpref_headline/report.json", SW + "warmpref_headline_20seeds/report.json"
REG = "agents.*.final_regret_mean"


def _head(agent: str) -> Callable[[dict], tuple[float, float]]:
    return lambda r: (stat(r, REG, algo=agent)["mean"], stat(r, REG, algo=agent)["sd"])


def _head_below(r: dict) -> list[float]:
    return [below(stat(r, REG, algo="warmpref-ps-bootstrap")["mean"], stat(r, REG, algo="ps")["mean"])]


def _pc(variant: str) -> Callable[[dict], tuple[float, float]]:
    return lambda d: (
        d["table"][f"ecop/{variant}"]["return_mean"],
        d["table"][f"ecop/{variant}"]["return_sd"],
    )


def _tab(key: str) -> Callable[[dict], tuple[float, float]]:
    return lambda d: (d["table"][key]["return_mean"], d["table"][key]["return_sd"])


DIFF = R + "pspl/diffusion_digits/results.json"


def _diff(agent: str) -> Callable[[dict], tuple[float, float]]:
    return lambda d: msd(d["agents"][agent]["final_reward_per_seed"])


def _diff_paired(d: dict) -> list[float]:
    a, b = (d["agents"][x]["final_reward_per_seed"] for x in ("pspl", "dps"))
    m, s = msd([x - y for x, y in zip(a, b, strict=True)])
    lo, hi = ci95(m, s, len(a))
    return [m, s, lo, hi]


ACPO5, ACPO10, ACPO10C = (
    SW + f"{n}/report.json" for n in ("acpo_point", "acpo_point_10seeds", "acpo_point_10seeds_centred")
)
RW, COST, WITHIN = "final_avg_reward", "final_cost_over_limit", "within_limit"


def _acpo(env: str, variant: str, metric: str = RW, ci: bool = False) -> Callable[[dict], list[float]]:
    def f(r: dict) -> list[float]:
        st = stat(r, metric, env=env, variant=variant)
        return [st["mean"], st["sd"], *(ci_of(st) if ci else ())]

    return f


def _acpo_gain(env: str, variant: str, others: Sequence[str]) -> Callable[[dict], list[float]]:
    return lambda r: [
        -below(stat(r, RW, env=env, variant=variant)["mean"], stat(r, RW, env=env, variant=o)["mean"])
        for o in others
    ]


def _within(env: str, variant: str) -> Callable[[dict], list[float]]:
    return lambda r: [
        round(
            stat(r, WITHIN, env=env, variant=variant)["mean"] * stat(r, WITHIN, env=env, variant=variant)["n"]
        )
    ]


ECOP = SW + "ecop_table/report.json"


def _ecop(task: str, algo: str) -> Callable[[dict], list[float]]:
    def f(r: dict) -> list[float]:
        m = group(r, task=task, algo=algo)
        ret, cost = m["train_final_return"], m["train_final_costs.0"]
        return [ret["mean"], ret["sd"], cost["mean"], cost["sd"]]

    return f


TEXTGEN = R + "mopo/textgen/table.json"


def _textgen(task: int, algo: str) -> Callable[[list], list[float]]:
    def f(tables: list) -> list[float]:
        row = tables[task]["rows"][algo]
        return [row["mean"][0], row["sd"][0], row["mean"][1], row["sd"][1]]

    return f


DEMO = R + "warmpref/demo/summary.json"
WP = R + "warmpref/"


def _wp(agent: dict) -> tuple[float, float]:
    return agent["final_regret_mean"], agent["final_regret_std"]


TREND_N = R + "warmpref/trend_N/summary.json"
SCALING_T = R + "warmpref/scaling_T/results.json"
LM = R + "mopo/lm_tiny/results.json"


def _lm_lb(d: dict) -> list[float]:
    return [d["runs"]["mopo_lb"]["mean_length"], d["runs"]["mopo_lb"]["primary_helpful"]]


CLAIMS: list[Claim] = [
    # --- Safe RL from preferences (README) ---
    *(
        Claim(README, text, R + "prefrl/pointcircle_ecop_default.json", _pc(v), "{:.1f} ± {:.1f}")
        for text, v in (
            ("43.8 ± 26.5", "uniform"),
            ("53.9 ± 15.0", "disagreement"),
            ("46.2 ± 31.0", "lcb"),
            ("58.7 ± 73.5", "oracle"),
        )
    ),
    Claim(
        README,
        "posterior mean 0.3 ± 0.4",
        R + "prefrl/pointgather_ecop.json",
        _tab("ecop/mean"),
        "posterior mean {:.1f} ± {:.1f}",
    ),
    Claim(
        README,
        "Thompson 0.4 ± 0.5",
        R + "prefrl/pointgather_ecop.json",
        _tab("ecop/thompson"),
        "Thompson {:.1f} ± {:.1f}",
    ),
    Claim(
        README,
        "true reward 1.6 ± 0.4",
        R + "prefrl/pointgather_ecop.json",
        _tab("ecop/oracle"),
        "true reward {:.1f} ± {:.1f}",
    ),
    Claim(
        README,
        "PPO-Lagrangian: 0.5 ± 0.8",
        R + "prefrl/pointgather_ppolag_all.json",
        _tab("ppo-lag/mean"),
        "PPO-Lagrangian: {:.1f} ± {:.1f}",
    ),
    Claim(
        README,
        "against 1.4 ± 0.9",
        R + "prefrl/pointgather_ppolag_all.json",
        _tab("ppo-lag/oracle"),
        "against {:.1f} ± {:.1f}",
    ),
    Claim(
        REPRO,
        "tabular ACPO reaches the LP optimum within 0.4 % inside the limit",
        R + "acpo/tabular.json",
        lambda d: [100 * (1 - d["modes"]["exact"]["reward_over_lp_min"])],
        "tabular ACPO reaches the LP optimum within {:.1f} % inside the limit",
    ),
    # --- docs/prefrl.md: the Point-Circle tables (return, median, cost; the λ = 10 column) ---
    *(
        Claim(
            PREFRL,
            f"| {label} | {ret} | ",
            R + "prefrl/pointcircle_ecop_default.json",
            (lambda d, k=key: [*_tab("ecop/" + k)(d), d["table"]["ecop/" + k]["return_median"]]),
            f"| {label} | "
            + ("**{:.1f} ± {:.1f}**" if ret.startswith("**") else "{:.1f} ± {:.1f}")
            + " | {:.1f} | ",
        )
        for label, key, ret in (
            ("true reward (oracle)", "oracle", "58.7 ± 73.5 | 23.4"),
            ("posterior mean", "mean", "31.7 ± 31.8 | 16.3"),
            ("lower 10 % quantile (`lcb`)", "lcb", "46.2 ± 31.0 | 59.7"),
            ("Thompson draw per iteration", "thompson", "41.8 ± 33.5 | 61.4"),
            ("Thompson draw held 10 iterations", "thompson-hold10", "22.0 ± 21.1 | 25.2"),
            ("posterior mean, competence known", "known-competence", "26.8 ± 36.4 | 16.9"),
            ("posterior mean, no rater model (`competence: ignore`)", "no-rater-model", "31.8 ± 26.8 | 20.8"),
            ("MLP ensemble, competence inferred", "ensemble", "24.7 ± 27.6 | 24.1"),
            (
                "MLP ensemble, no rater model, disagreement queries (`imitation`'s recipe)",
                "ensemble-no-rater-model",
                "26.9 ± 31.5 | 21.6",
            ),
            ("posterior mean, uniform queries", "uniform", "43.8 ± 26.5 | 42.5"),
            ("posterior mean, disagreement queries", "disagreement", "**53.9 ± 15.0** | 53.7"),
            ("posterior mean, top-two queries", "top-two", "17.0 ± 19.9 | 4.6"),
        )
    ),
    *(
        Claim(
            PREFRL,
            f"| {label} | {circ} | {cost} |",
            R + "prefrl/pointcircle_ecop_default.json",
            (
                lambda d, k=key: [
                    sum(r["tail_return"] > 20 for r in d["runs"] if r["variant"] == k),
                    d["table"]["ecop/" + k]["cost_mean"][0],
                    d["table"]["ecop/" + k]["cost_sd"][0],
                ]
            ),
            f"| {label} | " + ("**{}/5**" if circ.startswith("**") else "{}/5") + " | {:.1f} ± {:.1f} |",
        )
        for label, key, circ, cost in (
            ("58.7 ± 73.5 | 23.4", "oracle", "3/5", "7.5 ± 5.6"),
            ("31.7 ± 31.8 | 16.3", "mean", "2/5", "7.3 ± 7.1"),
            ("46.2 ± 31.0 | 59.7", "lcb", "4/5", "7.5 ± 2.7"),
            ("41.8 ± 33.5 | 61.4", "thompson", "3/5", "4.9 ± 5.5"),
            ("22.0 ± 21.1 | 25.2", "thompson-hold10", "3/5", "1.4 ± 3.0"),
            ("26.8 ± 36.4 | 16.9", "known-competence", "2/5", "4.2 ± 4.2"),
            ("31.8 ± 26.8 | 20.8", "no-rater-model", "3/5", "4.0 ± 6.9"),
            ("24.7 ± 27.6 | 24.1", "ensemble", "3/5", "4.4 ± 5.0"),
            ("26.9 ± 31.5 | 21.6", "ensemble-no-rater-model", "3/5", "4.8 ± 4.8"),
            ("43.8 ± 26.5 | 42.5", "uniform", "4/5", "8.1 ± 5.3"),
            ("53.7", "disagreement", "**5/5**", "6.2 ± 7.1"),
            ("17.0 ± 19.9 | 4.6", "top-two", "2/5", "4.9 ± 6.5"),
        )
    ),
    *(
        Claim(
            PREFRL,
            f"| {cell} |",
            R + "prefrl/pointcircle_ecop_lam10.json",
            (lambda d, k=key: [*_tab("ecop/" + k)(d), d["table"]["ecop/" + k]["reward_correlation"]]),
            "| {:.1f} ± {:.1f}, {:.2f} |",
        )
        for key, cell in (
            ("mean", "42.2 ± 26.4, 0.97"),
            ("lcb", "64.1 ± 18.9, 0.92"),
            ("thompson", "36.8 ± 29.5, 0.87"),
            ("thompson-hold10", "51.3 ± 60.8, 0.95"),
            ("no-rater-model", "20.8 ± 25.4, 0.48"),
            ("ensemble", "26.9 ± 28.2, 0.83"),
            ("uniform", "44.9 ± 31.1, 0.89"),
            ("disagreement", "33.0 ± 32.8, 0.98"),
            ("top-two", "49.7 ± 32.0, 0.79"),
        )
    ),
    *(
        Claim(
            PREFRL,
            f"| {label} | {ret} | {circ} | {cost} |",
            R + "prefrl/pointcircle_ppolag_default.json",
            (
                lambda d, k=key: [
                    *_tab("ppo-lag/" + k)(d),
                    sum(r["tail_return"] > 20 for r in d["runs"] if r["variant"] == k),
                    d["table"]["ppo-lag/" + k]["cost_mean"][0],
                    d["table"]["ppo-lag/" + k]["cost_sd"][0],
                ]
            ),
            f"| {label} | " + "{:.1f} ± {:.1f} | {}/5 | {:.1f} ± {:.1f} |",
        )
        for label, key, ret, circ, cost in (
            ("true reward (oracle)", "oracle", "2.4 ± 4.7", "0/5", "3.4 ± 5.2"),
            ("posterior mean", "mean", "11.8 ± 17.0", "1/5", "2.9 ± 4.5"),
            ("Thompson draw", "thompson", "13.4 ± 16.1", "2/5", "3.2 ± 4.2"),
            ("no rater model", "no-rater-model", "14.1 ± 22.7", "1/5", "1.1 ± 2.3"),
        )
    ),
    *(
        Claim(
            PREFRL,
            cell,
            R + "prefrl/pointcircle_ppolag_lam10.json",
            (
                lambda d, k=key: [
                    *_tab("ppo-lag/" + k)(d),
                    sum(r["tail_return"] > 20 for r in d["runs"] if r["variant"] == k),
                ]
            ),
            ("**{:.1f} ± {:.1f} ({}/5)**" if cell.startswith("**") else "{:.1f} ± {:.1f} ({}/5)"),
        )
        for key, cell in (
            ("mean", "1.4 ± 2.8 (0/5)"),
            ("thompson", "**45.5 ± 29.7 (4/5)**"),
            ("no-rater-model", "8.7 ± 25.4 (1/5)"),
        )
    ),
    # --- Bayesian core: the engine comparison on the default spec ---
    *(
        Claim(
            README,
            text,
            R + "core/compare_default/compare.json",
            (
                lambda d, e=engine: [
                    d["engines"][e]["seconds_per_1000"],
                    d["engines"][e]["w2"],
                    d["engines"][e]["logloss"]["joint_per_item"],
                    *([] if d["engines"][e]["coverage90"] is None else [d["engines"][e]["coverage90"]]),
                ]
            ),
            fmt,
        )
        for engine, text, fmt in (
            ("nuts", "| nuts | 590.6 | 0 | 0.150 | – |", "| nuts | {:.1f} | {:.0f} | {:.3f} | – |"),
            (
                "laplace",
                "| laplace | 0.120 | 0.035 | 0.152 | 0.863 |",
                "| laplace | {:.3f} | {:.3f} | {:.3f} | {:.3f} |",
            ),
            (
                "bootstrap",
                "| bootstrap | 0.539 | 0.057 | 0.155 | 0.880 |",
                "| bootstrap | {:.3f} | {:.3f} | {:.3f} | {:.3f} |",
            ),
            ("svi", "| svi | 13.99 | 0.062 | 0.149 | – |", "| svi | {:.2f} | {:.3f} | {:.3f} | – |"),
        )
    ),
    # --- ACPO tabular (README) ---
    Claim(
        README,
        "ACPO reaches 0.9996 of the optimal feasible average reward with exact estimates (min 0.9959) and 1.0013 with sampled ones",
        R + "acpo/tabular.json",
        J(
            "modes/exact/reward_over_lp_mean",
            "modes/exact/reward_over_lp_min",
            "modes/sampled/reward_over_lp_mean",
        ),
        "ACPO reaches {:.4f} of the optimal feasible average reward with exact estimates (min {:.4f}) and {:.4f} with sampled ones",
    ),
    Claim(
        README,
        "The cost stays at ≤ 1.000× and ≤ 1.0044× the limit",
        R + "acpo/tabular.json",
        J("modes/exact/cost_over_limit_max", "modes/sampled/cost_over_limit_max"),
        "The cost stays at ≤ {:.3f}× and ≤ {:.4f}× the limit",
    ),
    # --- MOPO motivating example (hypervolume over the COP oracle's) ---
    Claim(
        README,
        "0.99 (A) and 1.09 (B) of COP with r1 as primary, 1.04 / 1.10 with both objectives as primaries",
        R + "mopo/motivating.json",
        J(
            "checks/A/MOPO/over_cop",
            "checks/B/MOPO/over_cop",
            "checks/A/MOPO both primaries/over_cop",
            "checks/B/MOPO both primaries/over_cop",
        ),
        "{:.2f} (A) and {:.2f} (B) of COP with r1 as primary, {:.2f} / {:.2f} with both objectives as primaries",
    ),
    *(
        Claim(
            README,
            "seeds 1 and 2: 0.96–0.98 (A), 1.03–1.05 (B)",
            R + f"mopo/motivating_seeds/seed{s}.json",
            J("checks/A/MOPO/over_cop", "checks/B/MOPO/over_cop"),
            fmt,
        )
        for s, fmt in (
            (1, "seeds 1 and 2: {:.2f}–0.98 (A), {:.2f}–1.05 (B)"),
            (2, "seeds 1 and 2: 0.96–{:.2f} (A), 1.03–{:.2f} (B)"),
        )
    ),
    # --- warmPref-PS headline (README and the reproduction page) ---
    *(
        Claim(
            page,
            f"| {n} | {row} |",
            src,
            (
                lambda r: [
                    x
                    for a in ("warmpref-ps-bootstrap", "warmpref-ps", "naive-ps", "ps", "lints")
                    for x in _head(a)(r)
                ]
            ),
            "| "
            + str(n)
            + " | {:.4g} ± {:.4g} | **{:.4g} ± {:.4g}** | {:.4g} ± {:.4g} | {:.4g} ± {:.4g} | {:.4g} ± {:.4g} |",
        )
        for page, n, src, row in (
            (
                README,
                5,
                HEAD5,
                "25.18 ± 15.3 | **19.19 ± 23.25** | 39.24 ± 21.19 | 52.65 ± 22.93 | 36.66 ± 14.73",
            ),
            (
                README,
                20,
                HEAD20,
                "26.93 ± 13.35 | **18.86 ± 14.11** | 37.29 ± 19.98 | 55.04 ± 18.85 | 45.14 ± 20.54",
            ),
        )
    ),
    *(
        Claim(
            REPRO,
            f"| {n} seeds | {row} |",
            src,
            (
                lambda r: [
                    x
                    for a in ("warmpref-ps-bootstrap", "warmpref-ps", "naive-ps", "ps", "lints")
                    for x in _head(a)(r)
                ]
            ),
            "| "
            + str(n)
            + " seeds | {:.4g} ± {:.4g} | **{:.4g} ± {:.4g}** | {:.4g} ± {:.4g} | {:.4g} ± {:.4g} | {:.4g} ± {:.4g} |",
        )
        for n, src, row in (
            (5, HEAD5, "25.18 ± 15.3 | **19.19 ± 23.25** | 39.24 ± 21.19 | 52.65 ± 22.93 | 36.66 ± 14.73"),
            (20, HEAD20, "26.93 ± 13.35 | **18.86 ± 14.11** | 37.29 ± 19.98 | 55.04 ± 18.85 | 45.14 ± 20.54"),
        )
    ),
    *(
        Claim(
            page,
            text,
            DEMO,
            lambda d: [
                x
                for a in ("warmpref-ps", "naive-ps", "ps", "lints")
                for x in (d["agents"][a]["final_regret_mean"], d["agents"][a]["final_regret_std"])
            ],
            fmt,
        )
        for page, text, fmt in (
            (
                README,
                "| 200 (`bayescrl demo`) | – | **19.23 ± 16.38** | 38.39 ± 18.63 | 48.42 ± 19.01 | 48.28 ± 19.40 |",
                "| 200 (`bayescrl demo`) | – | **{:.2f} ± {:.2f}** | {:.2f} ± {:.2f} | {:.2f} ± {:.2f} | {:.2f} ± {:.2f} |",
            ),
            (
                REPRO,
                "| 200 seeds (`bayescrl demo`) | – | **19.23 ± 16.38** | 38.39 ± 18.63 | 48.42 ± 19.01 | 48.28 ± 19.40 |",
                "| 200 seeds (`bayescrl demo`) | – | **{:.2f} ± {:.2f}** | {:.2f} ± {:.2f} | {:.2f} ± {:.2f} | {:.2f} ± {:.2f} |",
            ),
        )
    ),
    *(
        Claim(
            README,
            text,
            DEMO,
            (
                lambda d, a=agent: (
                    lambda v: [
                        v["final_regret_mean"],
                        v["final_regret_std"],
                        *ci95(v["final_regret_mean"], v["final_regret_std"], len(v["final_regret_per_seed"])),
                    ]
                )(d["agents"][a])
            ),
            label + " {:.2f} {:.2f} [{:.2f}, {:.2f}]",
        )
        for agent, label, text in (
            ("warmpref-ps", "warmPref-PS (Alg. 1)", "warmPref-PS (Alg. 1) 19.23 16.38 [16.95, 21.52]"),
            ("naive-ps", "naive-PS", "naive-PS 38.39 18.63 [35.79, 40.99]"),
            ("lints", "LinTS", "LinTS 48.28 19.40 [45.58, 50.99]"),
            ("ps", "PS", "PS 48.42 19.01 [45.77, 51.07]"),
        )
    ),
    Claim(
        README,
        "has 60 % less regret than PS",
        DEMO,
        lambda d: [
            below(d["agents"]["warmpref-ps"]["final_regret_mean"], d["agents"]["ps"]["final_regret_mean"])
        ],
        "has {:.0f} % less regret than PS",
    ),
    Claim(README, "is 52 % (5 seeds)", HEAD5, _head_below, "is {:.0f} % (5 seeds)"),
    Claim(
        README,
        "/ 51 % (20 seeds) below PS's at N = 20",
        HEAD20,
        _head_below,
        "/ {:.0f} % (20 seeds) below PS's at N = 20",
    ),
    Claim(REPRO, "**52 %** (5 seeds)", HEAD5, _head_below, "**{:.0f} %** (5 seeds)"),
    Claim(REPRO, "**51 %** (20 seeds;", HEAD20, _head_below, "**{:.0f} %** (20 seeds;"),
    Claim(
        REPRO,
        "bootstrap −51 % vs PS at N = 20, 20 seeds",
        HEAD20,
        _head_below,
        "bootstrap −{:.0f} % vs PS at N = 20, 20 seeds",
    ),
    Claim(
        REPRO,
        "better still (−66 % vs PS at 20 seeds)",
        HEAD20,
        lambda r: [below(stat(r, REG, algo="warmpref-ps")["mean"], stat(r, REG, algo="ps")["mean"])],
        "better still (−{:.0f} % vs PS at 20 seeds)",
    ),
    *(
        Claim(
            page,
            text,
            HEAD20,
            lambda r: [*ci_of(stat(r, REG, algo="warmpref-ps-bootstrap")), *ci_of(stat(r, REG, algo="ps"))],
            fmt,
        )
        for page, text, fmt in (
            (
                README,
                "[20.68, 33.18] (bootstrap) and [46.22, 63.86] (PS)",
                "[{:.2f}, {:.2f}] (bootstrap) and [{:.2f}, {:.2f}] (PS)",
            ),
            (
                REPRO,
                "intervals of the means [20.68, 33.18] and [46.22, 63.86]",
                "intervals of the means [{:.2f}, {:.2f}] and [{:.2f}, {:.2f}]",
            ),
        )
    ),
    Claim(
        README,
        "at N = 5 ours is 22 %",
        TREND_N,
        lambda d: [
            below(
                d["cells"]["N=5"]["agents"]["warmpref-ps-bootstrap"]["final_regret_mean"],
                d["cells"]["N=5"]["agents"]["ps"]["final_regret_mean"],
            )
        ],
        "at N = 5 ours is {:.0f} %",
    ),
    Claim(
        REPRO,
        "ours at N = 5 is 22 % (20 seeds",
        TREND_N,
        lambda d: [
            below(
                d["cells"]["N=5"]["agents"]["warmpref-ps-bootstrap"]["final_regret_mean"],
                d["cells"]["N=5"]["agents"]["ps"]["final_regret_mean"],
            )
        ],
        "ours at N = 5 is {:.0f} % (20 seeds",
    ),
    Claim(
        REPRO,
        "(ours: 22 % at 20 seeds; at 5 seeds none)",
        TREND_N,
        lambda d: [
            below(
                d["cells"]["N=5"]["agents"]["warmpref-ps-bootstrap"]["final_regret_mean"],
                d["cells"]["N=5"]["agents"]["ps"]["final_regret_mean"],
            )
        ],
        "(ours: {:.0f} % at 20 seeds; at 5 seeds none)",
    ),
    Claim(
        REPRO,
        "LinTS lowest (31.38 vs 38.23 for the bootstrap and 38.21 for PS, 5 seeds",
        SCALING_T,
        J(
            "agents/lints/final_regret_mean",
            "agents/warmpref-ps-bootstrap/final_regret_mean",
            "agents/ps/final_regret_mean",
        ),
        "LinTS lowest ({:.2f} vs {:.2f} for the bootstrap and {:.2f} for PS, 5 seeds",
    ),
    Claim(
        README,
        "bootstrap 5.949 ± 4.122, PS 12.6 ± 4.699, LinTS 15.91 ± 13.36",
        SW + "warmpref_actionspace/report.json",
        lambda r: [
            x
            for a in ("warmpref-ps-bootstrap", "ps", "lints")
            for x in (lambda st: (st["mean"], st["sd"]))(stat(r, REG, cell="d=2 rho=0.1", algo=a))
        ],
        "bootstrap {:.4g} ± {:.4g}, PS {:.4g} ± {:.4g}, LinTS {:.4g} ± {:.4g}",
    ),
    # --- warmPref-PS experiments on the reproduction page (older runs: their summary files) ---
    *(
        Claim(
            REPRO,
            f"| {cell} | {row} |",
            WP + "actionspace/summary.json",
            (
                lambda d, c=key: [
                    x
                    for a in ("ps", "lints", "warmpref-ps-bootstrap")
                    for x in _wp(d["cells"][c]["agents"][a])
                ]
            ),
            f"| {cell} | "
            + "{:.2f} ± {:.2f} / "
            + ps
            + " | {:.2f} ± {:.2f} / "
            + lt
            + " | **{:.2f} ± {:.2f}** / "
            + wp
            + " |",
        )
        for cell, key, row, ps, lt, wp in (
            (
                "d = 2, ρ = 0.1",
                "d=2,rho=0.1",
                "13.95 ± 4.10 / 58.21 | 18.04 ± 13.31 / 53.23 | **9.29 ± 4.80** / 32.65",
                "58.21",
                "53.23",
                "32.65",
            ),
            (
                "d = 2, ρ = 0.8",
                "d=2,rho=0.8",
                "17.35 ± 4.64 / 61.36 | 29.85 ± 29.22 / 56.32 | **5.20 ± 5.54** / 33.98",
                "61.36",
                "56.32",
                "33.98",
            ),
            (
                "d = 5, ρ = 0.1",
                "d=5,rho=0.1",
                "37.85 ± 10.92 / 60.42 | 39.89 ± 18.76 / 55.71 | **24.98 ± 13.28** / 34.12",
                "60.42",
                "55.71",
                "34.12",
            ),
            (
                "d = 5, ρ = 0.8",
                "d=5,rho=0.8",
                "46.92 ± 14.02 / 64.21 | 36.57 ± 9.22 / 59.55 | **24.05 ± 9.46** / 34.77",
                "64.21",
                "59.55",
                "34.77",
            ),
        )
    ),
    Claim(
        REPRO,
        "PS = 47.34 ± 21.37 throughout",
        TREND_N,
        lambda d: _wp(d["cells"]["N=0"]["agents"]["ps"]),
        "PS = {:.2f} ± {:.2f} throughout",
    ),
    Claim(
        REPRO,
        "bootstrap 40.48 ± 15.32, naive-PS 42.21 ± 17.50, PS 47.34 ± 21.37, LinTS 48.98 ± 13.96",
        WP + "flawed_expert/results.json",
        lambda d: [
            x for a in ("warmpref-ps-bootstrap", "naive-ps", "ps", "lints") for x in _wp(d["agents"][a])
        ],
        "bootstrap {:.2f} ± {:.2f}, naive-PS {:.2f} ± {:.2f}, PS {:.2f} ± {:.2f}, LinTS {:.2f} ± {:.2f}",
    ),
    Claim(
        REPRO,
        "MLE 19.73 ± 12.22, entropy rule 31.30 ± 12.38, Pyro LogNormal prior 23.47 ± 14.33, true β 22.52 ± 12.03, PS 41.17",
        WP + "unknown_beta/results.json",
        lambda d: [
            *(x for a in ("MLE β", "entropy β", "Pyro prior β", "true β") for x in _wp(d["agents"][a])),
            d["agents"]["ps"]["final_regret_mean"],
        ],
        "MLE {:.2f} ± {:.2f}, entropy rule {:.2f} ± {:.2f}, Pyro LogNormal prior {:.2f} ± {:.2f}, true β {:.2f} ± {:.2f}, PS {:.2f}",
    ),
    Claim(
        REPRO,
        "bootstrap 29.75, Alg. 1 15.59, Hybrid-DPO 215.87 ± 54.83, Hybrid-IPO 203.49 ± 91.70, PS 41.17",
        WP + "dpo_ipo/results.json",
        lambda d: [
            d["agents"]["warmpref-ps-bootstrap"]["final_regret_mean"],
            d["agents"]["warmpref-ps"]["final_regret_mean"],
            *_wp(d["agents"]["hybrid-dpo"]),
            *_wp(d["agents"]["hybrid-ipo"]),
            d["agents"]["ps"]["final_regret_mean"],
        ],
        "bootstrap {:.2f}, Alg. 1 {:.2f}, Hybrid-DPO {:.2f} ± {:.2f}, Hybrid-IPO {:.2f} ± {:.2f}, PS {:.2f}",
    ),
    Claim(
        REPRO,
        "T = 1000: bootstrap 38.23 ± 36.55, PS 38.21 ± 25.21, LinTS 31.38 ± 24.85",
        SCALING_T,
        lambda d: [
            x
            for a in ("warmpref-ps-bootstrap", "ps", "lints")
            for x in msd(d["agents"][a]["final_regret_per_seed"])
        ],
        "T = 1000: bootstrap {:.2f} ± {:.2f}, PS {:.2f} ± {:.2f}, LinTS {:.2f} ± {:.2f}",
    ),
    # --- PSPL: the image experiment ---
    *(
        Claim(
            page,
            "on only 50 % (PSPL) and 46 % (DPS)",
            DIFF,
            lambda d: [100 * d["agents"][a]["label_agreement_with_true_reward"] for a in ("pspl", "dps")],
            "on only {:.0f} % (PSPL) and {:.0f} % (DPS)",
        )
        for page in (PSPL, REPRO)
    ),
    Claim(
        README,
        "gave labels no better than a coin\n(50 % and 46 %)",
        DIFF,
        lambda d: [100 * d["agents"][a]["label_agreement_with_true_reward"] for a in ("pspl", "dps")],
        "gave labels no better than a coin\n({:.0f} % and {:.0f} %)",
    ),
    *(
        Claim(page, text, DIFF, lambda d: (lambda m, s, lo, hi: [m, s / math.sqrt(5)])(*_diff_paired(d)), fmt)
        for page, text, fmt in (
            (PSPL, "difference is +0.04 ± 0.03 s.e.", "difference is +{:.2f} ± {:.2f} s.e."),
            (
                REPRO,
                "(paired +0.04 ± 0.03 s.e., 3 of 5 seeds)",
                "(paired +{:.2f} ± {:.2f} s.e., 3 of 5 seeds)",
            ),
        )
    ),
    Claim(PSPL, "| PSPL | −15.60 ± 0.30 |", DIFF, _diff("pspl"), "| PSPL | {:.2f} ± {:.2f} |"),
    Claim(PSPL, "| DPS | −15.64 ± 0.34 |", DIFF, _diff("dps"), "| DPS | {:.2f} ± {:.2f} |"),
    Claim(
        PSPL,
        "| oracle (updates on the hidden reward) | −15.30 ± 1.18 |",
        DIFF,
        _diff("oracle"),
        "| oracle (updates on the hidden reward) | {:.2f} ± {:.2f} |",
    ),
    Claim(
        REPRO,
        "PSPL −15.60 ± 0.30 (5/5 seeds above the base), DPS −15.64 ± 0.34 (4/5), oracle on the hidden reward −15.30 ± 1.18",
        DIFF,
        lambda d: [*_diff("pspl")(d), *_diff("dps")(d), *_diff("oracle")(d)],
        "PSPL {:.2f} ± {:.2f} (5/5 seeds above the base), DPS {:.2f} ± {:.2f} (4/5), oracle on the hidden reward {:.2f} ± {:.2f}",
    ),
    # --- PSPL default tables of the reproduction page (mean ± sample sd of the per-seed finals) ---
    *(
        Claim(
            REPRO,
            text,
            R + f"pspl/{run}/results.json",
            (
                lambda d, a=agent: [
                    d["agents"][a]["simple_regret_curve_mean"][0],
                    *msd(d["agents"][a]["final_simple_regret_per_seed"]),
                ]
            ),
            f"| `{agent}` | {{:.3f}} | {{:.{dec}f}} ± {{:.{dec}f}} |",
        )
        for run, dec, agent, text in (
            ("riverswim_default", 4, "pspl-bootstrap", "| `pspl-bootstrap` | 0.004 | 0.0101 ± 0.0128 |"),
            ("riverswim_default", 4, "pspl", "| `pspl` | 0.004 | 0.0032 ± 0.0036 |"),
            ("riverswim_default", 4, "dps", "| `dps` | 1.445 | 0.2057 ± 0.1194 |"),
            ("riverswim_default", 4, "lpbrl", "| `lpbrl` | 3.297 | 0.6977 ± 1.4542 |"),
            ("riverswim_default", 4, "dpo", "| `dpo` | 3.317 | 3.3173 ± 0.0447 |"),
            ("riverswim_default", 4, "ipo", "| `ipo` | 3.317 | 3.3173 ± 0.0447 |"),
            ("riverswim_default", 4, "uniform", "| `uniform` | 0.004 | 0.0052 ± 0.0053 |"),
            (
                "mountaincar_default_5seeds",
                3,
                "pspl-bootstrap",
                "| `pspl-bootstrap` | 0.261 | 0.117 ± 0.063 |",
            ),
            ("mountaincar_default_5seeds", 3, "pspl", "| `pspl` | 0.061 | 0.081 ± 0.037 |"),
            ("mountaincar_default_5seeds", 3, "dps", "| `dps` | 4.276 | 4.172 ± 1.521 |"),
            ("mountaincar_default_5seeds", 3, "lpbrl", "| `lpbrl` | 8.077 | 1.503 ± 0.602 |"),
            ("mountaincar_default_5seeds", 3, "dpo", "| `dpo` | 4.336 | 4.336 ± 2.204 |"),
            ("mountaincar_default_5seeds", 3, "ipo", "| `ipo` | 4.029 | 4.029 ± 1.842 |"),
            ("mountaincar_default_5seeds", 3, "uniform", "| `uniform` | 0.061 | 0.056 ± 0.015 |"),
            ("mountaincar_default", 3, "pspl-bootstrap", "| `pspl-bootstrap` | 0.309 | 0.082 ± 0.031 |"),
            ("mountaincar_default", 3, "pspl", "| `pspl` | 0.063 | 0.070 ± 0.016 |"),
            ("mountaincar_default", 3, "dps", "| `dps` | 4.249 | 3.818 ± 0.754 |"),
            ("mountaincar_default", 3, "lpbrl", "| `lpbrl` | 8.077 | 3.042 ± 1.193 |"),
            ("mountaincar_default", 3, "dpo", "| `dpo` | 4.104 | 4.104 ± 0.885 |"),
            ("mountaincar_default", 3, "ipo", "| `ipo` | 4.182 | 4.182 ± 0.713 |"),
            ("mountaincar_default", 3, "uniform", "| `uniform` | 0.063 | 0.076 ± 0.019 |"),
        )
    ),
    # --- e-COP table ---
    Claim(
        README,
        "| 187.8 ± 0.4 / 303.8 ± 19.2 |",
        ECOP,
        _ecop("Grid", "ecop"),
        "| {:.1f} ± {:.1f} / {:.1f} ± {:.1f} |",
    ),
    Claim(
        README,
        "| 129.4 ± 0.6 / 116.9 ± 23.9 |",
        ECOP,
        _ecop("Bottleneck", "ecop"),
        "| {:.1f} ± {:.1f} / {:.1f} ± {:.1f} |",
    ),
    # --- ACPO verdicts ---
    Claim(
        README,
        "ACPO ends within 1.1 l on 4/5 Point-Circle seeds (5/5 with initial log-std −0.5) but on only 3/5 Point-Gather seeds (mean cost 1 l; 8/10",
        ACPO5,
        lambda r: [
            *_within("PointCircle", "acpo-ec0.2")(r),
            *_within("PointCircle", "acpo-ec0.2-std05")(r),
            *_within("PointGather", "acpo-ec0.2")(r),
            stat(r, COST, env="PointGather", variant="acpo-ec0.2")["mean"],
        ],
        "ACPO ends within 1.1 l on {:.0f}/5 Point-Circle seeds ({:.0f}/5 with initial log-std −0.5) but on only {:.0f}/5 Point-Gather seeds (mean cost {:.2g} l; 8/10",
    ),
    Claim(
        README,
        "8/10 in the 10-seed re-run below",
        ACPO10,
        _within("PointGather", "acpo-ec0.2"),
        "{:.0f}/10 in the 10-seed re-run below",
    ),
    Claim(
        REPRO,
        "ACPO with the correction meets the limit on 8/10 seeds, 3/5 in the first 5-seed run",
        ACPO10,
        lambda r: [*_within("PointGather", "acpo-ec0.2")(r)],
        "ACPO with the correction meets the limit on {:.0f}/10 seeds, 3/5 in the first 5-seed run",
    ),
    Claim(
        REPRO,
        "has a 25 % higher mean reward than ACPO",
        ACPO10,
        _acpo_gain("PointGather", "atrpo", ["acpo-ec0.2"]),
        "has a {:.0f} % higher mean reward than ACPO",
    ),
    Claim(
        README,
        "ACPO's mean reward is 10 % above CPO's, 37 % above PCPO's and 15 % above PPO",
        ACPO5,
        _acpo_gain("PointCircle", "acpo-ec0.2-std05", ["cpo", "pcpo", "ppo-lag"]),
        "ACPO's mean reward is {:.0f} % above CPO's, {:.0f} % above PCPO's and {:.0f} % above PPO",
    ),
    Claim(
        README,
        "ATRPO 0.642 ± 0.267 and ACPO 0.397 ± 0.080 (95 % intervals of the means [0.450, 0.833] and [0.339, 0.454])",
        ACPO10C,
        lambda r: [
            *_acpo("PointCircle", "atrpo")(r),
            *_acpo("PointCircle", "acpo-ec0.2-std05")(r),
            *_acpo("PointCircle", "atrpo", ci=True)(r)[2:],
            *_acpo("PointCircle", "acpo-ec0.2-std05", ci=True)(r)[2:],
        ],
        "ATRPO {:.3f} ± {:.3f} and ACPO {:.3f} ± {:.3f} (95 % intervals of the means [{:.3f}, {:.3f}] and [{:.3f}, {:.3f}])",
    ),
    Claim(
        README,
        "ATRPO 0.530 ± 0.384 with 9/10 seeds within the limit (one at 7.8×), ACPO 0.475 ± 0.253 with 7/10",
        ACPO10,
        lambda r: [
            *_acpo("PointCircle", "atrpo")(r),
            *_within("PointCircle", "atrpo")(r),
            max(stat(r, COST, env="PointCircle", variant="atrpo")["values"]),
            *_acpo("PointCircle", "acpo-ec0.2-std05")(r),
            *_within("PointCircle", "acpo-ec0.2-std05")(r),
        ],
        "ATRPO {:.3f} ± {:.3f} with {:.0f}/10 seeds within the limit (one at {:.1f}×), ACPO {:.3f} ± {:.3f} with {:.0f}/10",
    ),
    Claim(
        README,
        "ATRPO 0.0091 ± 0.0026 with every seed within the limit (0.30×), ACPO 0.0073 ± 0.0030 (8/10 within;",
        ACPO10,
        lambda r: [
            *_acpo("PointGather", "atrpo")(r),
            stat(r, COST, env="PointGather", variant="atrpo")["mean"],
            *_acpo("PointGather", "acpo-ec0.2")(r),
            *_within("PointGather", "acpo-ec0.2")(r),
        ],
        "ATRPO {:.4f} ± {:.4f} with every seed within the limit ({:.2f}×), ACPO {:.4f} ± {:.4f} ({:.0f}/10 within;",
    ),
    Claim(
        README,
        "variation 0.005661 ± 0.002044 (4)",
        SW + "mopo_tabular/report.json",
        lambda r: (lambda st: (st["mean"], st["sd"], st["n"]))(r["groups"][0]["metrics"]["tv_to_exact.0"]),
        "variation {:.4g} ± {:.4g} ({})",
    ),
    # --- MOPO: the tiny LM (stored seeds only) ---
    Claim(
        README,
        "(10.5 tokens, 5.02 helpful words against the reference's 3.39)",
        LM,
        J("runs/mopo/mean_length", "runs/mopo/primary_helpful", "runs/reference/primary_helpful"),
        "({:.1f} tokens, {:.2f} helpful words against the reference's {:.2f})",
    ),
    Claim(
        README,
        "DPO on D_J has 11.5 tokens and 2.66 helpful words on seed 0",
        LM,
        J("runs/dpo_joint/mean_length", "runs/dpo_joint/primary_helpful"),
        "DPO on D_J has {:.1f} tokens and {:.2f} helpful words on seed 0",
    ),
    *(
        Claim(README, text, R + f"mopo/lm_tiny_lb/results_seed{s}.json", _lm_lb, fmt)
        for s, text, fmt in (
            (0, "(9.1 / 8.2", "({:.1f} / 8.2"),
            (1, "9.1 / 8.2 / 9.8 tokens", "9.1 / {:.1f} / 9.8 tokens"),
            (2, "8.2 / 9.8 tokens", "8.2 / {:.1f} tokens"),
        )
    ),
    Claim(
        README,
        "(2.98 / 3.41 / 3.75 against 3.39 / 3.94 / 3.55)",
        R + "mopo/lm_tiny_lb/results_seed0.json",
        J("runs/mopo_lb/primary_helpful", "runs/reference/primary_helpful"),
        "({:.2f} / 3.41 / 3.75 against {:.2f} / 3.94 / 3.55)",
    ),
    Claim(
        README,
        "(2.98 / 3.41 / 3.75 against 3.39 / 3.94 / 3.55)",
        R + "mopo/lm_tiny_lb/results_seed1.json",
        J("runs/mopo_lb/primary_helpful", "runs/reference/primary_helpful"),
        "(2.98 / {:.2f} / 3.75 against 3.39 / {:.2f} / 3.55)",
    ),
    Claim(
        README,
        "(2.98 / 3.41 / 3.75 against 3.39 / 3.94 / 3.55)",
        R + "mopo/lm_tiny_lb/results_seed2.json",
        J("runs/mopo_lb/primary_helpful", "runs/reference/primary_helpful"),
        "(2.98 / 3.41 / {:.2f} against 3.39 / 3.94 / {:.2f})",
    ),
    # --- MOPO: the text-generation table (ours: mean ± sample sd over 3 seeds) ---
    *(
        Claim(
            README,
            f"| {name} | {cells[0]} |",
            TEXTGEN,
            (lambda t, a=algo: [*_textgen(0, a)(t)]),
            f"| {name} | " + "({:.2f} ± {:.2f}, {:.2f} ± {:.2f}) |",
        )
        for name, algo, cells in (
            ("RiC", "ric", ["(0.25 ± 0.05, 0.78 ± 0.06)"]),
            ("MODPO", "modpo", ["(0.23 ± 0.04, 0.85 ± 0.07)"]),
            ("DPO on D_J", "dpo_joint", ["(0.22 ± 0.04, 0.82 ± 0.06)"]),
            ("MOPO-LB", "mopo-lb", ["(0.26 ± 0.04, 0.81 ± 0.09)"]),
            ("MOPO-Lag", "mopo-lag", ["(0.24 ± 0.04, 0.77 ± 0.07)"]),
            ("base model", "reference", ["(0.26 ± 0.06, 0.65 ± 0.06)"]),
        )
    ),
    Claim(
        README,
        "| PARM | **(0.33 ± 0.06, 0.79 ± 0.08)** |",
        TEXTGEN,
        _textgen(0, "parm"),
        "| PARM | **({:.2f} ± {:.2f}, {:.2f} ± {:.2f})** |",
    ),
    *(
        Claim(README, text, TEXTGEN, _textgen(1, algo), fmt)
        for algo, text, fmt in (
            ("ric", "| (0.52 ± 0.10, 0.58 ± 0.08) |", "| ({:.2f} ± {:.2f}, {:.2f} ± {:.2f}) |"),
            ("parm", "| **(0.51 ± 0.09, 0.70 ± 0.06)** |", "| **({:.2f} ± {:.2f}, {:.2f} ± {:.2f})** |"),
            ("modpo", "| (0.53 ± 0.11, 0.38 ± 0.11) |", "| ({:.2f} ± {:.2f}, {:.2f} ± {:.2f}) |"),
            ("dpo_joint", "| (0.47 ± 0.11, 0.33 ± 0.07) |", "| ({:.2f} ± {:.2f}, {:.2f} ± {:.2f}) |"),
            ("mopo-lb", "| (0.45 ± 0.11, 0.40 ± 0.08) |", "| ({:.2f} ± {:.2f}, {:.2f} ± {:.2f}) |"),
            ("mopo-lag", "| (0.58 ± 0.12, 0.59 ± 0.08) |", "| ({:.2f} ± {:.2f}, {:.2f} ± {:.2f}) |"),
            ("reference", "| (0.53 ± 0.08, 0.60 ± 0.07) |", "| ({:.2f} ± {:.2f}, {:.2f} ± {:.2f}) |"),
        )
    ),
    # --- PSPL default table (the report's cells, mean ± sample sd over 5 seeds) ---
    *(
        Claim(
            README,
            row,
            SW + "pspl_default/report.json",
            (
                lambda r, t=task: [
                    x
                    for a in PSPL_ALGOS
                    for x in (lambda st: (st["mean"], st["sd"]))(
                        stat(r, "agents.*.final_simple_regret_mean", task=t, algo=a)
                    )
                ]
            ),
            fmt,
        )
        for task, row, fmt in (
            (
                "RiverSwim",
                "| RiverSwim (K = 100) | **0.003192 ± 0.003614** | 0.01009 ± 0.01277 | 0.2057 ± 0.1194 | 0.6977 ± 1.454 | 3.317 ± 0.04472 | 3.317 ± 0.04472 | 0.005173 ± 0.005312 |",
                "| RiverSwim (K = 100) | **{:.4g} ± {:.4g}** |" + " {:.4g} ± {:.4g} |" * 6,
            ),
            (
                "MountainCar",
                "| MountainCar 6×6 (K = 50) | **0.08065 ± 0.03736** | 0.1172 ± 0.06326 | 4.172 ± 1.521 | 1.503 ± 0.6025 | 4.336 ± 2.204 | 4.029 ± 1.842 | 0.05597 ± 0.01474 |",
                "| MountainCar 6×6 (K = 50) | **{:.4g} ± {:.4g}** |" + " {:.4g} ± {:.4g} |" * 6,
            ),
        )
    ),
]

# committed `bayescrl report` tables whose rows the pages quote verbatim (each row a line of report.md)
REPORT_TABLES: list[tuple[str, str]] = [
    (README, SW + "acpo_point/report.md"),
    (README, SW + "acpo_traffic/report.md"),
    (README, SW + "acpo_traffic_5e4/report.md"),
    (README, SW + "mopo_sanity/report.md"),
    (REPRO, SW + "warmpref_actionspace/report.md"),
    (REPRO, SW + "mopo_tabular/report.md"),
    (REPRO, SW + "mopo_sanity/report.md"),
    (REPRO, SW + "mopo_sanity_thesis_setting/report.md"),
    (REPRO, SW + "mopo_bayes/report.md"),
]

# (page, the quoted text, why it is not a run's number, or where else it is pinned)
ALLOWED: list[tuple[str, str, str]] = [
    (REPRO, "their 95 % intervals overlap", "the interval's level, not a result"),
    (REPRO, "non-overlapping 95 % intervals", "the interval's level; the intervals are pinned on the README"),
    (REPRO, "the thesis' 25–50 % at N = 5", "the thesis' number (chapter 4, the warmTS ablation)"),
    (PREFRL, "keeps the apple weight at its prior (0 ± 1)", "the prior's mean and sd, not a result"),
    (
        PSPL,
        "simple regret 0.0030 ± 0.0011",
        "an exploratory SVI run whose results are not committed (the page says so)",
    ),
]

# (page, first line of the section, the line that ends it): where every "a ± b" must be registered
SCANNED: list[tuple[str, str, str]] = [
    (README, "## Results", "## Documentation"),
    (REPRO, "Summary of the verdicts", "### ACPO experiments (chapter 2)"),
    (REPRO, "**Headline (default config: K = 50", "**Table (actionspaceregret) (d × ρ), 5 seeds**"),
    (REPRO, "#### Default benchmark (figure (simple-cum-regrets)", "#### Ablations"),
    (REPRO, "#### Image generation (appendix `pickapic`), scaled down", "### MOPO experiments (chapter 6)"),
    (PSPL, "**Results** (5 seeds batched, CPU only", "**Why not DDPO's update here.**"),
    (PREFRL, "**Point-Circle, cost limit 10, e-COP** (defaults;", "What this says:"),
    (REPRO, "### warmPref-PS experiments (chapter 4)", "### PSPL experiments (chapter 5)"),
    (REPRO, "### ACPO experiments (chapter 2)", "### e-COP experiments (chapter 3)"),
    (REPRO, "### e-COP experiments (chapter 3)", "### warmPref-PS experiments (chapter 4)"),
    (REPRO, "#### Ablations (figure (main_ablation))", "#### Image generation (appendix `pickapic`)"),
    (REPRO, "### MOPO experiments (chapter 6)", "#### Text-generation table"),
    (REPRO, "#### Text-generation table", "    --out runs/textgen_smollm2_table"),
    ("docs/core.md", "# Bayesian core: models, inference engines, diagnostics", "BibTeX: [references.bib]"),
    (PREFRL, "# Safe RL from rater preferences (`bayescrl.prefrl`)", "BibTeX: [references.bib]"),
    (
        PSPL,
        "# PSPL: preference-based RL with offline and online trajectory preferences",
        "BibTeX: [references.bib]",
    ),
    # the other pages that quote runs, whole
    ("docs/sweep.md", "# Sweeps: grids of runs on Ray", "time), so the efficiency measures the machine"),
    (
        "docs/mopo.md",
        "# MOPO: multi-objective constrained preference optimisation",
        "BibTeX: [references.bib]",
    ),
    (
        "docs/warmpref.md",
        "# warmPref-PS: linear bandits warm-started with offline preferences",
        "BibTeX: [references.bib]",
    ),
    ("docs/raters.md", "# Raters", "API reference: [Raters](api/raters.md)."),
    ("docs/envs.md", "# Task suite (`bayescrl.envs`)", "BibTeX: [references.bib]"),
    ("docs/gpu.md", "# GPU check", "## Device bugs fixed"),
    (
        "docs/ecop.md",
        "# Constrained RL: e-COP, its baselines and the shared core (`bayescrl.constrained`)",
        "BibTeX: [references.bib]",
    ),
    ("docs/acpo.md", "# ACPO: Average-Constrained Policy Optimization", "BibTeX: [references.bib]"),
    (
        "benchmarks/README.md",
        "# Benchmarks and their committed results",
        "After a run, `.venv/bin/python benchmarks/slim_res",
    ),
]

"""Verdicts for the e-COP table from a sweep folder: which algorithm is best within the cost limit, with
intervals, so that a claim like "e-COP is best on PointCircle" is either supported or reported as "not
distinguishable at n seeds".

    python benchmarks/ecop_verdicts.py benchmarks/results/sweeps/ecop_table_10seeds

Reads the folder's ``report.json`` (``bayescrl report`` writes it) and each run's ``metrics.json`` (for the
cost limits), and writes ``verdicts.json`` and ``verdicts.md`` into the folder. Per task and algorithm:
return and cost as mean ± sample sd with n and a 95 % t-interval, and how many seeds ended within every
limit. Per task, e-COP against the best *other* algorithm whose mean cost is within every limit: the
difference of mean returns with a 95 % Welch interval, a Welch t-test and a Mann–Whitney U test (the runs
are often bimodal: a policy either circles or stands still). The verdict says "higher" or "lower" only when
the Welch interval excludes 0, else "not distinguishable at n seeds".

``--variant TASK:LABEL=RUNS`` adds a variant of e-COP to TASK's table, with its difference to e-COP and to
the best other algorithm (same tests), under ``variants`` in ``verdicts.json``; RUNS is the ``runs.jsonl``
of ``benchmarks/ecop_compare.py`` (e.g. ``--set penalty_control_variate=true``) or a sweep folder whose
e-COP runs of TASK are the variant (e.g. ``examples/sweeps/ecop_table_10seeds_cv.yaml``).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from scipy import stats

from bayescrl.utils.io import load_json, write_json
from bayescrl.utils.spread import fmt_num, spread

RETURN = "train_final_return"


def welch(a: list[float], b: list[float]) -> dict:
    """Mean difference a − b, its 95 % Welch interval, the Welch t-test and Mann–Whitney U p-values."""
    sa, sb = spread(a), spread(b)
    va, vb = sa.sd**2 / sa.n, sb.sd**2 / sb.n
    se = math.sqrt(va + vb)
    diff = sa.mean - sb.mean
    if se == 0:
        return {"diff": diff, "ci95": [diff, diff], "p_welch": 0.0 if diff else 1.0, "p_mannwhitney": 1.0}
    df = (va + vb) ** 2 / (va**2 / (sa.n - 1) + vb**2 / (sb.n - 1))
    h = float(stats.t.ppf(0.975, df)) * se
    return {
        "diff": diff,
        "ci95": [diff - h, diff + h],
        "p_welch": float(stats.ttest_ind(a, b, equal_var=False).pvalue),
        "p_mannwhitney": float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue),
    }


def within_limits(costs: list[float], limits: list[float]) -> bool:
    return all(c <= lim for c, lim in zip(costs, limits, strict=True))


def cell(values: list[float]) -> dict:
    s = spread(values)
    return {"mean": s.mean, "sd": s.sd, "n": s.n, "ci95": list(s.ci95) if s.ci95 else None}


def task_rows(folder: Path, report: dict) -> dict[str, dict[str, dict]]:
    """``{task: {algo: {return, costs[k], limits, within}}}`` from the report's groups and run metrics."""
    out: dict[str, dict[str, dict]] = {}
    for g in report["groups"]:
        runs = [folder / r / "metrics.json" for r in g["runs"]]
        metrics = [load_json(p) for p in runs if p.exists()]
        if len(metrics) < 2:
            continue
        limits = metrics[0]["cost_limits"]
        costs = [[m["train_final_costs"][k] for m in metrics] for k in range(len(limits))]
        within = sum(within_limits(m["train_final_costs"], limits) for m in metrics)
        out.setdefault(g["point"]["task"], {})[g["point"]["algo"]] = {
            "return": cell([m[RETURN] for m in metrics]),
            "return_values": [m[RETURN] for m in metrics],
            "costs": [cell(c) for c in costs],
            "limits": limits,
            "seeds_within_limit": within,
            "n": len(metrics),
        }
    return out


def verdict(rows: dict[str, dict]) -> dict:
    """e-COP against the best other algorithm whose mean costs are within every limit."""
    feasible = {a: r for a, r in rows.items() if within_limits([c["mean"] for c in r["costs"]], r["limits"])}
    others = {a: r for a, r in feasible.items() if a != "ecop"}
    res: dict = {"feasible": sorted(feasible), "ecop_within_limit": "ecop" in feasible}
    if "ecop" not in rows or not others:
        return {**res, "verdict": "no comparison (e-COP or every other algorithm missing / over the limit)"}
    best = max(others, key=lambda a: others[a]["return"]["mean"])
    w = welch(rows["ecop"]["return_values"], rows[best]["return_values"])
    n = min(rows["ecop"]["n"], rows[best]["n"])
    if w["ci95"][0] > 0:
        text = f"e-COP higher than {best}"
    elif w["ci95"][1] < 0:
        text = f"e-COP lower than {best}"
    else:
        text = f"e-COP and {best} not distinguishable at {n} seeds"
    if "ecop" not in feasible:
        text += " (e-COP over the limit on average)"
    return {**res, "best_other_within_limit": best, "ecop_minus_best": w, "verdict": text}


def variant_records(runs: Path, task: str) -> list[dict]:
    """A variant's runs as ``{seed, return, costs}``: ``ecop_compare.py``'s ``runs.jsonl``, or the e-COP
    runs of ``task`` in a sweep folder (its ``report.json`` and each run's ``metrics.json``)."""
    if not runs.is_dir():
        return [json.loads(line) for line in runs.read_text().splitlines() if line.strip()]
    recs = []
    for g in load_json(runs / "report.json")["groups"]:
        if g["point"].get("task") != task or g["point"].get("algo", "ecop") != "ecop":
            continue
        for run in g["runs"]:
            if (runs / run / "metrics.json").exists():
                m = load_json(runs / run / "metrics.json")
                recs.append({"seed": m["seed"], "return": m[RETURN], "costs": m["train_final_costs"]})
    if not recs:
        raise SystemExit(f"{runs}: no finished e-COP run of task {task}")
    return recs


def variant_row(rows: dict[str, dict], verdicts: dict, runs: Path, task: str) -> dict:
    """A variant's runs (:func:`variant_records`) as a row of the task's table, and its differences to
    e-COP and to the task's best other algorithm."""
    recs = variant_records(runs, task)
    limits = rows["ecop"]["limits"]
    values = [r["return"] for r in recs]
    row = {
        "return": cell(values),
        "costs": [cell([r["costs"][k] for r in recs]) for k in range(len(limits))],
        "limits": limits,
        "seeds_within_limit": sum(within_limits(r["costs"], limits) for r in recs),
        "n": len(recs),
        "seeds": sorted(r["seed"] for r in recs),
        "source": str(runs),
    }
    out = {"row": row, "minus_ecop": welch(values, rows["ecop"]["return_values"])}
    best = verdicts.get("best_other_within_limit")
    if best:
        out["best_other"] = best
        out["minus_best"] = welch(values, rows[best]["return_values"])
    return out


def _variant_lines(label: str, v: dict) -> list[str]:
    lines = []
    for key, other in (("minus_ecop", "ecop"), ("minus_best", v.get("best_other"))):
        if key in v:
            w = v[key]
            lines.append(
                f"{label} − {other}: {diff_text(w)}, 95 % Welch interval {interval(w['ci95'])}, "
                f"Welch p = {fmt_num(w['p_welch'], 2)}, Mann–Whitney p = {fmt_num(w['p_mannwhitney'], 2)}."
            )
    return lines


def diff_text(w: dict) -> str:
    """The difference to the precision of its interval (3 digits of the half-width), in fixed notation."""
    half = (w["ci95"][1] - w["ci95"][0]) / 2
    dec = max(0, 2 - math.floor(math.log10(half))) if half > 0 else 3
    return f"{w['diff']:.{dec}f}"


def interval(ci: list[float]) -> str:
    return f"[{fmt_num(ci[0], 3)}, {fmt_num(ci[1], 3)}]"


def markdown(
    rows: dict[str, dict[str, dict]], verdicts: dict[str, dict], variants: dict | None = None
) -> str:
    lines = []
    variants = variants or {}
    for task, algos in rows.items():
        algos = {**algos, **{label: v["row"] for label, v in variants.get(task, {}).items()}}
        head = "| algo | return (mean ± sd, n) | 95 % CI | costs (mean ± sd; limits) | seeds within limits |"
        lines += [f"### {task}", "", head]
        lines.append("|---|---|---|---|---|")
        for algo, r in algos.items():
            ret = r["return"]
            ci = "–" if ret["ci95"] is None else interval(ret["ci95"])
            costs = " / ".join(f"{fmt_num(c['mean'], 3)} ± {fmt_num(c['sd'], 3)}" for c in r["costs"])
            limits = ", ".join(fmt_num(x, 3) for x in r["limits"])
            lines.append(
                f"| {algo} | {fmt_num(ret['mean'], 3)} ± {fmt_num(ret['sd'], 3)} ({ret['n']}) | {ci} "
                f"| {costs} ({limits}) | {r['seeds_within_limit']}/{r['n']} |"
            )
        v = verdicts[task]
        lines += ["", f"**Verdict:** {v['verdict']}."]
        if "ecop_minus_best" in v:
            w = v["ecop_minus_best"]
            lines.append(
                f"e-COP − {v['best_other_within_limit']}: {diff_text(w)}, 95 % Welch interval "
                f"{interval(w['ci95'])}, Welch p = {fmt_num(w['p_welch'], 2)}, "
                f"Mann–Whitney p = {fmt_num(w['p_mannwhitney'], 2)}."
            )
        for label, v in variants.get(task, {}).items():
            lines += _variant_lines(label, v)
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="sweep folder holding report.json")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="TASK:LABEL=RUNS",
        help="an e-COP variant's runs: ecop_compare.py's runs.jsonl or a sweep folder",
    )
    args = ap.parse_args()
    rows = task_rows(args.folder, load_json(args.folder / "report.json"))
    verdicts = {task: verdict(algos) for task, algos in rows.items()}
    variants: dict[str, dict] = {}
    for spec in args.variant:
        head, _, path = spec.partition("=")
        task, _, label = head.partition(":")
        if not (path and label) or task not in rows:
            ap.error(f"--variant {spec!r}: expected TASK:LABEL=RUNS with TASK one of {sorted(rows)}")
        variants.setdefault(task, {})[label] = variant_row(rows[task], verdicts[task], Path(path), task)
    for algos in rows.values():
        for r in algos.values():
            r.pop("return_values")
    out = {"tasks": rows, "verdicts": verdicts}
    if variants:
        out["variants"] = variants
    write_json(args.folder / "verdicts.json", out)
    (args.folder / "verdicts.md").write_text(markdown(rows, verdicts, variants))
    print(markdown(rows, verdicts, variants))


if __name__ == "__main__":
    main()

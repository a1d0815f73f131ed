"""The text-generation table (thesis table `empirical_tasks_comparison` layout), Pareto fronts, runtimes.

Input: one record per seed and task (written by :mod:`bayescrl.mopo.textgen.run` as ``seed_S/results.json``)::

    {"task": "assistant", "seed": 0, "objectives": ["helpful", "harmless"],
     "algorithms": {"ric": {"points": [{"label": "w=(0.5, 0.5)", "r": [0.41, 0.55]}, ...],
                            "train_seconds": 12.3, "generate_seconds": 4.0}, ...}}

``r`` are normalised rewards (0 = the worst, 1 = the best base-model sample of the offline data). Per seed
and algorithm the *table point* is the algorithm's single point, or, for algorithms with a sweep (RiC and
PARM over weightings, MODPO over scalarisations, MOPO-Lag over thresholds), the point with the highest
``r1 + r2`` -- the thesis: "for RiC, PARM, and MODPO, values with highest rewards across inference
preference vector inputs are shown"; MOPO's table point is its adaptive-threshold run (label ``adaptive``)
when present. Cells are mean +- sd over seeds. The hypervolume of each algorithm's points (reference
``hv_reference``, both objectives maximised) is computed per seed and averaged. Whether the leader (the
highest mean ``r1 + r2``) is ahead of each other algorithm beyond the spread over seeds is read from the
paired per-seed differences of ``r1 + r2`` (every algorithm of a seed trains on the same base model and
data): their mean, 95 % t-interval, the seeds on which the leader is ahead, and the two-sided Wilcoxon
signed-rank p-value (:func:`leader_gaps`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bayescrl.mopo import pareto
from bayescrl.utils.io import load_json
from bayescrl.utils.plotting import plt
from bayescrl.utils.spread import paired

ORDER = ("ric", "parm", "modpo", "dpo_joint", "mopo-lb", "mopo-lag")
NAMES = {
    "ric": "RiC",
    "parm": "PARM",
    "modpo": "MODPO",
    "dpo_joint": "DPO on D_J",
    "mopo-lb": "MOPO-LB",
    "mopo-lag": "MOPO-Lag",
    "reference": "base model",
}
#: the thesis' phi-1.5 rows of table `empirical_tasks_comparison` (normalised (r1, r2) means)
THESIS_PHI15 = {
    "helpful-harmless": {
        "ric": (0.23, 0.21),
        "parm": (0.28, 0.24),
        "modpo": (0.21, 0.20),
        "dpo_joint": (0.22, 0.19),
        "mopo-lb": (0.27, 0.24),
        "mopo-lag": (0.29, 0.26),
    },
    "pref1-faithful": {
        "ric": (0.39, 0.36),
        "parm": (0.47, 0.49),
        "modpo": (0.31, 0.30),
        "dpo_joint": (0.31, 0.34),
        "mopo-lb": (0.44, 0.47),
        "mopo-lag": (0.47, 0.45),
    },
}
THESIS_COLUMN = {"assistant": "helpful-harmless", "summary": "pref1-faithful"}


def table_point(points: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The ``adaptive`` point if there is one, else the point with the largest ``r1 + r2``."""
    for p in points:
        if p.get("label") == "adaptive":
            return p
    return max(points, key=lambda p: float(sum(p["r"])))


def _hv(points: np.ndarray, ref: Sequence[float]) -> float:
    return float(pareto.hypervolume(points, ref=list(ref), maximise=True))


def build_table(seed_runs: Sequence[Mapping[str, Any]], hv_reference=(0.0, 0.0)) -> dict[str, Any]:
    """Aggregate per-seed runs of *one* task into table rows, hypervolumes, runtimes and front points."""
    if not seed_runs:
        raise ValueError("no runs to tabulate")
    tasks = {r["task"] for r in seed_runs}
    if len(tasks) != 1:
        raise ValueError(f"runs of several tasks: {sorted(tasks)}")
    algos = [a for a in (*ORDER, "reference") if any(a in r["algorithms"] for r in seed_runs)]
    algos += sorted({a for r in seed_runs for a in r["algorithms"]} - set(algos))
    rows, fronts = {}, {}
    for a in algos:
        runs = [r for r in seed_runs if a in r["algorithms"]]
        rows[a] = _table_row(a, runs, hv_reference)
        fronts[a] = _front(a, runs)
    task = seed_runs[0]["task"]
    ranked = [a for a in ORDER if a in rows]
    out = {
        "task": task,
        "objectives": list(seed_runs[0]["objectives"]),
        "hv_reference": list(hv_reference),
        "rows": rows,
        "fronts": fronts,
        "ordering": sorted(ranked, key=lambda a: -sum(rows[a]["mean"])),
    }
    out["leader_gaps"] = leader_gaps(rows, out["ordering"][0]) if out["ordering"] else {}
    col = THESIS_COLUMN.get(task)
    if col:
        th = THESIS_PHI15[col]
        out["thesis_column"] = col
        out["thesis_ordering"] = sorted([a for a in ranked if a in th], key=lambda a: -sum(th[a]))
        out["kendall_tau"] = kendall_tau(out["ordering"], out["thesis_ordering"])
    return out


def _table_row(a: str, runs: Sequence[Mapping[str, Any]], hv_reference: Sequence[float]) -> dict[str, Any]:
    """Algorithm ``a``'s row over the seeds ``runs``: mean and sample sd of its table point
    (:func:`table_point`), its hypervolume, its mean training and generation seconds."""
    pts = np.array([table_point(r["algorithms"][a]["points"])["r"] for r in runs], dtype=float)
    hvs = [_hv(np.array([p["r"] for p in r["algorithms"][a]["points"]], float), hv_reference) for r in runs]
    tr = [float(r["algorithms"][a].get("train_seconds", 0.0)) for r in runs]
    ge = [float(r["algorithms"][a].get("generate_seconds", 0.0)) for r in runs]
    sd = pts.std(0, ddof=1) if len(pts) > 1 else np.zeros(pts.shape[1])
    return {
        "name": NAMES.get(a, a),
        "mean": pts.mean(0).tolist(),
        "sd": sd.tolist(),
        "seeds": [int(r["seed"]) for r in runs],
        "per_seed": pts.tolist(),
        "hypervolume_mean": float(np.mean(hvs)),
        "hypervolume_sd": float(np.std(hvs, ddof=1)) if len(hvs) > 1 else 0.0,
        "train_seconds_mean": float(np.mean(tr)),
        "generate_seconds_mean": float(np.mean(ge)),
    }


def leader_gaps(rows: Mapping[str, Mapping[str, Any]], leader: str) -> dict[str, dict[str, Any]]:
    """Per algorithm ``a`` other than ``leader`` (the base model included): the per-seed differences of the
    table point's ``r1 + r2``, leader − ``a``, over the seeds both ran: ``mean``, ``ci95`` (95 %
    t-interval; None for one seed), ``n``, ``leader_ahead`` (seeds with a positive difference) and
    ``wilcoxon_p`` (two-sided signed-rank test; None for one seed or no nonzero difference)."""
    lead = dict(zip(rows[leader]["seeds"], rows[leader]["per_seed"], strict=True))
    gaps = {}
    for a, row in rows.items():
        both = [
            (sum(lead[s]), sum(p)) for s, p in zip(row["seeds"], row["per_seed"], strict=True) if s in lead
        ]
        if a == leader or not both:
            continue
        pr = paired([x for x, _ in both], [y for _, y in both])
        gaps[a] = {
            "mean": pr.spread.mean,
            "ci95": list(pr.spread.ci95) if pr.spread.ci95 else None,
            "n": pr.spread.n,
            "leader_ahead": pr.above,
            "wilcoxon_p": pr.wilcoxon_p,
        }
    return gaps


def _front(a: str, runs: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
    """Algorithm ``a``'s points by label, each the mean over the seeds ``runs``."""
    labels: dict[str, list[list[float]]] = {}
    for r in runs:
        for p in r["algorithms"][a]["points"]:
            labels.setdefault(str(p.get("label", "")), []).append(list(p["r"]))
    return {lab: np.mean(v, 0).tolist() for lab, v in labels.items()}


def kendall_tau(order_a: Sequence[str], order_b: Sequence[str]) -> float | None:
    """Kendall's tau between two rankings of the same items (None for fewer than 2 common items)."""
    common = [x for x in order_a if x in order_b]
    if len(common) < 2:
        return None
    ra = {x: i for i, x in enumerate([x for x in order_a if x in common])}
    rb = {x: i for i, x in enumerate([x for x in order_b if x in common])}
    conc = disc = 0
    for i, x in enumerate(common):
        for y in common[i + 1 :]:
            s = (ra[x] - ra[y]) * (rb[x] - rb[y])
            conc += s > 0
            disc += s < 0
    return (conc - disc) / (conc + disc)


def _cell(mean: Sequence[float], sd: Sequence[float], n: int) -> str:
    """``(r1 ± sd, r2 ± sd)`` with the sample sd over ``n`` seeds; one seed shows no ``±``."""
    if n < 2:
        return f"({mean[0]:.2f}, {mean[1]:.2f})"
    return f"({mean[0]:.2f} ± {sd[0]:.2f}, {mean[1]:.2f} ± {sd[1]:.2f})"


def markdown(tables: Sequence[Mapping[str, Any]]) -> str:
    """The thesis' layout: one row per algorithm, one ``(r1, r2)`` column per task; then the orderings,
    hypervolumes and runtimes."""
    algos = [a for a in (*ORDER, "reference") if any(a in t["rows"] for t in tables)]
    lines = [
        *_points_table(tables, algos),
        "",
        *_orderings_table(tables),
        "",
        *_gaps_table(tables),
        "",
        *_costs_table(tables, algos),
    ]
    return "\n".join(lines) + "\n"


def _points_table(tables: Sequence[Mapping[str, Any]], algos: list[str]) -> list[str]:
    """One row per algorithm, one ``(r1, r2)`` column per task (mean ± sd over seeds)."""
    heads = [f"{t['task']} `{t['objectives'][0]}-{t['objectives'][1]}` (r1, r2)" for t in tables]
    lines = ["| algorithm | " + " | ".join(heads) + " |", "|---" * (len(tables) + 1) + "|"]
    for a in algos:
        cells = [
            _cell(t["rows"][a]["mean"], t["rows"][a]["sd"], len(t["rows"][a]["seeds"]))
            if a in t["rows"]
            else ""
            for t in tables
        ]
        lines.append(f"| {NAMES.get(a, a)} | " + " | ".join(cells) + " |")
    return lines


def _orderings_table(tables: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per task: the ordering by ``r1 + r2`` here and in the thesis, and their Kendall tau."""
    lines = ["| task | ordering by r1 + r2 (here) | thesis (phi-1.5) | Kendall tau |", "|---|---|---|---|"]
    for t in tables:
        here = " > ".join(NAMES[a] for a in t["ordering"])
        th = " > ".join(NAMES[a] for a in t.get("thesis_ordering", []))
        tau = t.get("kendall_tau")
        col = t.get("thesis_column", "")
        lines.append(f"| {t['task']} | {here} | {th} (`{col}`) | {'' if tau is None else f'{tau:.2f}'} |")
    return lines


def _gaps_table(tables: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per task and algorithm: the leader's paired lead in ``r1 + r2`` (:func:`leader_gaps`)."""
    lines = [
        "| task | leader − algorithm | r1 + r2, paired mean [95 % t-interval] | leader ahead | Wilcoxon p |",
        "|---|---|---|---|---|",
    ]
    for t in tables:
        leader = NAMES.get(t["ordering"][0], t["ordering"][0]) if t["ordering"] else ""
        for a, g in t.get("leader_gaps", {}).items():
            ci = "" if g["ci95"] is None else f" [{g['ci95'][0]:.3f}, {g['ci95'][1]:.3f}]"
            p = "" if g["wilcoxon_p"] is None else f"{g['wilcoxon_p']:.2g}"
            ahead = f"{g['leader_ahead']}/{g['n']}"
            lines.append(
                f"| {t['task']} | {leader} − {NAMES.get(a, a)} | {g['mean']:.3f}{ci} | {ahead} | {p} |"
            )
    return lines


def _costs_table(tables: Sequence[Mapping[str, Any]], algos: list[str]) -> list[str]:
    """One row per algorithm: its hypervolume and its training / generation seconds per task."""
    lines = [
        "| algorithm | "
        + " | ".join(f"{t['task']} HV" for t in tables)
        + " | "
        + " | ".join(f"{t['task']} train s / generate s" for t in tables)
        + " |",
        "|---" * (2 * len(tables) + 1) + "|",
    ]
    for a in algos:
        hv = [
            (
                f"{t['rows'][a]['hypervolume_mean']:.3f} ± {t['rows'][a]['hypervolume_sd']:.3f}"
                if len(t["rows"][a]["seeds"]) > 1
                else f"{t['rows'][a]['hypervolume_mean']:.3f}"
            )
            if a in t["rows"]
            else ""
            for t in tables
        ]
        rt = [
            f"{t['rows'][a]['train_seconds_mean']:.1f} / {t['rows'][a]['generate_seconds_mean']:.1f}"
            if a in t["rows"]
            else ""
            for t in tables
        ]
        lines.append(f"| {NAMES.get(a, a)} | " + " | ".join(hv + rt) + " |")
    return lines


def plot_fronts(tables: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """One panel per task: every algorithm's seed-mean points, its non-dominated front and its HV."""
    p = plt()
    fig, axes = p.subplots(1, len(tables), figsize=(5.2 * len(tables), 4.4), squeeze=False)
    for ax, t in zip(axes[0], tables, strict=True):
        for a, labels in t["fronts"].items():
            pts = np.array(list(labels.values()), dtype=float)
            hv = t["rows"][a]["hypervolume_mean"]
            marker = "x" if a == "reference" else "o"
            sc = ax.scatter(pts[:, 0], pts[:, 1], marker=marker, label=f"{NAMES.get(a, a)} (HV {hv:.3f})")
            nd = np.asarray(pareto.non_dominated(pts, maximise=True), dtype=bool)
            front = pts[nd][np.argsort(pts[nd][:, 0])]
            if len(front) > 1:
                ax.plot(front[:, 0], front[:, 1], color=sc.get_facecolor()[0], lw=1)
        ax.set_xlabel(f"r1 = {t['objectives'][0]} (normalised)")
        ax.set_ylabel(f"r2 = {t['objectives'][1]} (normalised)")
        ax.set_title(f"{t['task']}: mean over seeds {t['rows'][next(iter(t['rows']))]['seeds']}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    p.close(fig)
    return path


def load_runs(out: str | Path) -> list[dict[str, Any]]:
    """Every ``seed_*/results.json`` under ``out``, by seed."""
    files = sorted(Path(out).glob("seed_*/results.json"))
    fix = "delete its seed folder and rerun that seed"
    return [load_json(f, f"{f.parent.name}/results.json", kind=dict, recover=fix) for f in files]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bayescrl.mopo.textgen.table DIR [DIR ...] --out PREFIX``: one table over several runs'
    directories (e.g. the Assistant and the Summary run), written as ``PREFIX.md``, ``.json`` and ``.png``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m bayescrl.mopo.textgen.table")
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    tables = []
    for d in args.dirs:
        runs = load_runs(d)
        if not runs:
            print(f"{d}: no seed_*/results.json in it", file=sys.stderr)
            return 2
        cfg = (
            json.loads((Path(d) / "results.json").read_text()) if (Path(d) / "results.json").exists() else {}
        )
        tables.append(build_table(runs, cfg.get("hv_reference", (0.0, 0.0))))
    prefix = Path(args.out)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    prefix.with_suffix(".md").write_text(markdown(tables))
    prefix.with_suffix(".json").write_text(json.dumps(tables, indent=2))
    plot_fronts(tables, prefix.with_suffix(".png"))
    print(markdown(tables))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

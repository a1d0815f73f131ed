"""``bayescrl report DIR``: a sweep's table (mean ± sd over seeds per grid point, the thesis' numbers beside
them) and learning-curve figures.

The thesis reports "the mean and standard deviation ... over 5 runs" (Table `rewards_costs_comparison`,
the learning-curve figures of chapters `ecop` and `acpo`): here ``mean`` is the average over a group's
finished seeds and ``sd`` the sample standard deviation (``ddof = 1``; none for one seed). Writes
``DIR/report.md``, ``DIR/report.json`` and ``DIR/curves_<metric>.png``.
"""

from __future__ import annotations

import fnmatch
import logging
import math
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bayescrl.sweep.spec import SweepSpec, parse_sweep
from bayescrl.utils.errors import ConfigError, DataError
from bayescrl.utils.io import load_json, write_json
from bayescrl.utils.plotting import plot_mean_sd
from bayescrl.utils.spread import fmt_spread, sample_sd

MANIFEST = "sweep.json"
#: the states ``sweep`` writes into ``status/<run>.json``
STATUSES = ("running", "done", "failed")
#: how to repair a damaged file of one run: the sweep re-runs a run whose status or result is damaged
RERUN = "delete it and rerun the sweep (bayescrl sweep SWEEP.yaml --out DIR) to recompute that run"
_log = logging.getLogger(__name__)
_WARNED: set[tuple[str, str]] = set()


def flatten(obj: Any, prefix: str = "", max_list: int = 16) -> dict[str, float]:
    """Numeric leaves of a results tree as ``{"a.b.0": x}`` (lists longer than ``max_list`` -- curves --
    are skipped; ``None`` is skipped)."""
    out: dict[str, float] = {}
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k), max_list))
    elif isinstance(obj, list) and len(obj) <= max_list:
        for i, v in enumerate(obj):
            out.update(flatten(v, f"{prefix}.{i}" if prefix else str(i), max_list))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        out[prefix] = float(obj)
    return out


def select(flat: Mapping[str, float], patterns: list[str] | tuple[str, ...]) -> dict[str, float]:
    """The entries of ``flat`` matching ``patterns`` (``*`` wildcards), in pattern order."""
    out: dict[str, float] = {}
    for pat in patterns:
        for key in flat:
            if key not in out and fnmatch.fnmatchcase(key, pat):
                out[key] = flat[key]
    return out


def by_pattern(found: list[dict[str, dict[str, Any]]], patterns: list[str] | tuple[str, ...]) -> list[dict]:
    """Name each run's matches ``{pattern: {key: value}}``: by key, except that a wildcard pattern which
    matches exactly one key per run, a different one across runs (``agents.ps.final_regret_mean`` in one
    run, ``agents.lints.final_regret_mean`` in another: one agent per run), is named by the pattern, so
    those runs share a column / a figure."""
    named: list[dict[str, Any]] = [{} for _ in found]
    for pat in patterns:
        keysets = [set(f.get(pat, {})) for f in found if f.get(pat)]
        collapse = bool(keysets) and all(len(k) == 1 for k in keysets) and len(set().union(*keysets)) > 1
        for i, f in enumerate(found):
            for key, value in f.get(pat, {}).items():
                named[i][pat if collapse else key] = value
    return named


def _matches(flat: Mapping[str, float], patterns) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    taken: set[str] = set()
    for pat in patterns:
        for key in flat:
            if key not in taken and fnmatch.fnmatchcase(key, pat):
                out.setdefault(pat, {})[key] = flat[key]
                taken.add(key)
    return out


def series(data: Any, pattern: str) -> dict[str, list[float]]:
    """Curves named by a dotted ``pattern`` (``*`` matches any key or column): ``ep_return``,
    ``ep_costs.0`` (column 0 of a list of rows), ``agents.*.regret_curve_mean``."""
    out: dict[str, list[float]] = {}

    def walk(node: Any, parts: list[str], name: str) -> None:
        if not parts:
            if isinstance(node, list) and node and all(_num(v) for v in node):
                out[name] = [float(v) for v in node]
            return
        head, rest = parts[0], parts[1:]
        if isinstance(node, Mapping):
            for key in node if head == "*" else [head]:
                if key in node:
                    walk(node[key], rest, f"{name}.{key}" if name else str(key))
        elif isinstance(node, list) and node and isinstance(node[0], list):  # rows -> a column
            width = len(node[0])
            cols = range(width) if head == "*" else [int(head)] if head.isdigit() else []
            for c in cols:
                if c < width:
                    walk([row[c] if c < len(row) else None for row in node], rest, f"{name}.{c}")

    walk(data, pattern.split("."), "")
    return out


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def read_manifest(out: Path) -> dict:
    """The sweep folder's manifest, checked: a damaged or hand-edited one is named with how to recover."""
    path = Path(out) / MANIFEST
    if not path.exists():
        raise ConfigError(
            "DIR", str(out), f"holds no {MANIFEST}: not a sweep folder (bayescrl sweep ... --out)"
        )
    fix = "restore it from a copy, or rerun the sweep file into a new --out"
    data = load_json(path, MANIFEST, kind=dict, recover=fix)
    runs = data.get("runs")
    bad = None
    if not isinstance(data.get("spec"), dict):
        bad = "'spec' is not a mapping"
    elif not isinstance(runs, list):
        bad = "'runs' is not a list"
    else:
        for i, r in enumerate(runs):
            ok = isinstance(r, dict) and isinstance(r.get("id"), str) and isinstance(r.get("point"), dict)
            if not ok:
                bad = f"runs[{i}] is not a mapping with a string 'id' and a 'point' mapping"
                break
    if bad:
        raise DataError(MANIFEST, str(path), f"{bad}; {fix}")
    return data


def run_done(out: Path, run_id: str, result: str, strict: bool = False) -> bool:
    """Whether run ``run_id`` of the sweep in ``out`` finished: its status file says ``done`` and its
    result file parses. A damaged status or result file (a run killed mid-write, a hand edit) raises
    :class:`DataError` naming it when ``strict`` (``report``), else is logged and the run counts as
    unfinished, so a resumed sweep runs it again."""
    status = Path(out) / "status" / f"{run_id}.json"
    if not status.exists():
        return False
    try:
        rec = load_json(status, f"status/{run_id}.json", kind=dict, recover=RERUN)
        if rec.get("status") not in STATUSES:
            why = f"'status' must be one of {list(STATUSES)}; {RERUN}"
            raise DataError(f"status/{run_id}.json", str(status), f"{why} (got {rec.get('status')!r})")
        if rec["status"] != "done" or not (Path(out) / run_id / result).exists():
            return False
        load_json(Path(out) / run_id / result, f"{run_id}/{result}", kind=dict, recover=RERUN)
    except DataError as exc:
        if strict:
            raise
        if (str(out), run_id) not in _WARNED:  # once per run, though the sweep asks twice
            _WARNED.add((str(out), run_id))
            _log.warning("run %s will run again: %s", run_id, exc)
        return False
    return True


def run_summary(spec: SweepSpec, run_dir: Path, n: int = 3) -> str:
    """A few of a finished run's headline numbers, for its progress line."""
    try:
        data = load_json(run_dir / spec.adapter.result, "result", kind=dict)
    except DataError:
        return ""
    vals = select(flatten(data), spec.report.get("metrics") or spec.adapter.metrics)
    return ", ".join(f"{k} {v:.4g}" for k, v in list(vals.items())[:n])


def _same(a: Any, b: Any) -> bool:
    if _num(a) and _num(b):
        return math.isclose(float(a), float(b), rel_tol=1e-9)
    return str(a) == str(b)


def _ref(x: float | None) -> str:
    """A thesis number as the thesis prints it (no rounding)."""
    return "–" if x is None else f"{x:g}"


def _report_patterns(spec: SweepSpec) -> tuple[list[str], dict[str, Any], dict | None]:
    """The metric patterns to read (``report.metrics``, else the command's, plus the ratios' and pivot's
    cells), the ratios and the pivot of ``spec.report``."""
    patterns = list(spec.report.get("metrics") or spec.adapter.metrics)
    pivot = spec.report.get("pivot")
    ratios = dict(spec.report.get("ratios") or {})
    patterns += [k for pair in ratios.values() for k in pair if k not in patterns]
    patterns += [c for c in (pivot or {}).get("cells", []) if c not in patterns and c not in ratios]
    return patterns, ratios, pivot


def _collect(
    out: Path, manifest: dict, spec: SweepSpec, varying: list[str], patterns: list[str]
) -> tuple[dict[str, dict[str, Any]], list[str], list[str]]:
    """Group the runs by their varying grid values and read the finished runs' metrics into the groups'
    ``values``; returns the groups, the unfinished run ids and the metric keys found (in order)."""
    adapter = spec.adapter
    groups: dict[str, dict[str, Any]] = {}
    missing, finished, found = [], [], []
    for run in manifest["runs"]:
        point = run["point"]
        label = ", ".join(f"{k}={point[k]}" for k in varying) or "all"
        g = groups.setdefault(label, {"point": {k: point[k] for k in varying}, "runs": [], "values": {}})
        if not run_done(out, run["id"], adapter.result, strict=True):
            missing.append(run["id"])
            continue
        data = load_json(out / run["id"] / adapter.result, f"{run['id']}/{adapter.result}", recover=RERUN)
        g["runs"].append(run)
        finished.append(g)
        found.append(_matches(flatten(data), patterns))
    keys: list[str] = []
    for g, values in zip(finished, by_pattern(found, patterns), strict=True):
        for key, value in values.items():
            g["values"].setdefault(key, []).append(value)
            keys += [key] if key not in keys else []
    return groups, missing, keys


def _group_row(
    label: str, g: dict[str, Any], measured: list[str], ratios: dict[str, Any], ref_rows: list[dict]
) -> dict[str, Any]:
    """One row of the table: mean, sd, n and values per metric, the ratios of means, and the reference
    rows' numbers whose ``match`` fits the group's grid point."""
    stats = {}
    for key in measured:
        vals = g["values"].get(key, [])
        stats[key] = {
            "mean": statistics.fmean(vals) if vals else None,
            "sd": sample_sd(vals),
            "n": len(vals),
            "values": vals,
        }
    for name, (num, den) in ratios.items():
        stats[name] = ratio_of_means(stats.get(num), stats.get(den))
    ref = {}
    for row in ref_rows:
        if all(k in g["point"] and _same(g["point"][k], v) for k, v in (row.get("match") or {}).items()):
            ref.update({k: v for k, v in row.items() if k != "match"})
    return {
        "group": label,
        "point": g["point"],
        "seeds": [r["point"].get("seed") for r in g["runs"]],
        "runs": [r["id"] for r in g["runs"]],
        "metrics": stats,
        "reference": ref,
    }


def _fixed(spec: SweepSpec) -> dict[str, Any]:
    """The settings every run shares: single-valued grid axes (but the seed), ``args`` and ``set``."""
    fixed = {k: v[0] for k, v in spec.axes.items() if len(v) == 1 and k != "seed"}
    fixed.update({f"args.{k}": v for k, v in spec.args.items()})
    fixed.update({f"set.{k}": v for k, v in spec.set_fixed.items()})
    return fixed


def build_report(out: str | Path, plots: bool = True) -> dict:
    """Aggregate the finished runs of the sweep in ``out``; write report.md/.json (+ PNGs); return it."""
    out = Path(out)
    manifest = read_manifest(out)
    spec = parse_sweep(manifest["spec"])
    patterns, ratios, pivot = _report_patterns(spec)
    varying = [k for k, v in spec.axes.items() if len(v) > 1 and k != "seed"]
    groups, missing, keys = _collect(out, manifest, spec, varying, patterns)
    measured = list(keys)
    keys += [name for name in ratios if name not in keys]
    ref_rows = (spec.reference or {}).get("rows") or []
    table = [_group_row(label, g, measured, ratios, ref_rows) for label, g in groups.items()]
    ref_keys = [k for k in keys if any(k in row["reference"] for row in table)]
    fixed = _fixed(spec)
    warnings = unequal_n(table, keys)
    md = _markdown(spec, table, varying, keys, ref_keys, fixed, len(manifest["runs"]), missing, warnings)
    if ratios:
        md += "\n" + "\n".join(
            f"{n} = mean {a} / mean {b} (per row; n: the fewer seeds)." for n, (a, b) in ratios.items()
        )
        md += "\n"
    if pivot:
        md += "\n" + pivot_table(table, pivot, spec)
    figures = _figures(out, spec, manifest, varying) if plots else []
    report = {
        "name": spec.name,
        "command": spec.command,
        "hash": spec.hash,
        "fixed": fixed,
        "groups": table,
        "metrics": keys,
        "reference_source": (spec.reference or {}).get("source"),
        "runs": len(manifest["runs"]),
        "missing": missing,
        "figures": [str(p.name) for p in figures],
        "warnings": warnings,
        "sd": "sample standard deviation over seeds (ddof = 1)",
    }
    write_json(out / "report.json", report)
    (out / "report.md").write_text(md)
    report["markdown"] = md
    return report


def ratio_of_means(num: dict | None, den: dict | None) -> dict:
    """A derived cell ``report.ratios: {NAME: [NUM, DEN]}``: the ratio of a group's two means over its seeds
    (no sd; ``n`` the smaller count; none where a mean is missing or the denominator's is 0)."""
    n = min(num["n"], den["n"]) if num and den else 0
    ok = n and num["mean"] is not None and den["mean"] not in (None, 0.0)
    return {
        "mean": num["mean"] / den["mean"] if ok else None,
        "sd": None,
        "n": n,
        "values": [],
        "ratio": True,
    }


def unequal_n(table: list[dict], keys: list[str]) -> list[str]:
    """One line when the table's cells average over different numbers of seeds (unfinished runs, a metric
    missing from some runs), naming the cells with fewer than the most, so no mean passes for a full one.
    Empty cells (n = 0) are not counted."""
    # cells with no value at all (no finished run: listed as not finished; a metric the group's runs do
    # not have, such as a second cost on a one-cost task) are shown as "–", not averaged
    ns = {(row["group"], k): row["metrics"][k]["n"] for row in table for k in keys if row["metrics"][k]["n"]}
    if len(set(ns.values())) <= 1:
        return []
    top = max(ns.values())
    cells = [f"{g}: {k} n = {n}" for (g, k), n in ns.items() if n < top]
    where = "; ".join(cells[:8]) + (f"; and {len(cells) - 8} more" if len(cells) > 8 else "")
    return [f"cells average over different numbers of seeds (n = {min(ns.values())} to {top}): {where}"]


def pivot_table(table: list[dict], pivot: dict, spec: SweepSpec) -> str:
    """The README's layout: one row per value of ``pivot.rows`` (a task), one column per value of
    ``pivot.columns`` (an algorithm), each cell the ``pivot.cells`` metrics as ``mean ± sd`` joined by
    `` / `` with the number of seeds n; a "thesis" column per algorithm the ``reference:`` block covers."""
    rows_key, cols_key, cells = pivot["rows"], pivot["columns"], pivot["cells"]
    axes = spec.axes

    def value(g: dict, key: str) -> str:  # an axis with one value is not in the group's point
        return str(g["point"].get(key, axes[key][0]))

    at = {(value(g, rows_key), value(g, cols_key)): g for g in table}
    cols = [str(c) for c in axes[cols_key]]
    ref_cols = [
        c
        for c in cols
        if any(any(k in g["reference"] for k in cells) for (_r, cc), g in at.items() if cc == c)
    ]
    head = [rows_key, *cols, *[f"thesis ({c})" for c in ref_cols]]
    ratios = spec.report.get("ratios") or {}
    what = "ratio of the means over seeds" if all(c in ratios for c in cells) else "mean ± sd over seeds"
    what += "".join(f"; {c} = mean {ratios[c][0]} / mean {ratios[c][1]}" for c in cells if c in ratios)
    lines = [f"{' / '.join(cells)}: {what} (n)", "", "| " + " | ".join(head) + " |"]
    lines.append("|" + "---|" * len(head))
    for r in (str(v) for v in axes[rows_key]):
        out = [r]
        for c in cols:
            g = at.get((r, c))
            if g is None or not any(g["metrics"].get(k, {}).get("n") for k in cells):
                out.append("–")
                continue
            parts, ns = [], set()
            for k in cells:
                st = g["metrics"].get(k, {"mean": None, "sd": None, "n": 0})
                parts.append(fmt_spread(st["mean"], st["sd"], st["n"] or None, show_n=False))
                ns.add(st["n"])
            out.append(" / ".join(parts) + f" ({'/'.join(str(n) for n in sorted(ns))})")
        for c in ref_cols:
            ref = at[(r, c)]["reference"] if (r, c) in at else {}
            vals = [ref.get(k) for k in cells]
            out.append(" / ".join(_ref(v) for v in vals) if any(v is not None for v in vals) else "–")
        lines.append("| " + " | ".join(out) + " |")
    src = (spec.reference or {}).get("source")
    if ref_cols and src:
        lines += ["", f"Thesis numbers: {src}."]
    return "\n".join(lines) + "\n"


def _markdown(spec, table, varying, keys, ref_keys, fixed, n_runs, missing, warnings=()) -> str:
    title = spec.name or f"bayescrl {spec.command} sweep"
    lines = [f"## {title}", ""]
    if fixed:
        lines += ["Fixed: " + ", ".join(f"{k} = {v}" for k, v in fixed.items()) + ".", ""]
    head = [*varying, "seeds"]
    for k in keys:
        head.append(f"{k} (mean ± sd, n)")
        if k in ref_keys:
            head.append("thesis")
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in table:
        cells = [str(row["point"][k]) for k in varying] + [str(len(row["runs"]))]
        for k in keys:
            s = row["metrics"][k]
            cell = fmt_spread(s["mean"], s["sd"], s["n"] or None, show_n=False)
            cells.append(f"{cell} ({s['n']})")
            if k in ref_keys:
                cells.append(_ref(row["reference"].get(k)))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    src = (spec.reference or {}).get("source")
    if ref_keys and src:
        lines += [f"Thesis numbers: {src}.", ""]
    lines += [f"**Warning**: {w}." for w in warnings] + ([""] if warnings else [])
    done = n_runs - len(missing)
    lines.append(
        f"{done} of {n_runs} runs finished" + (f"; not finished: {', '.join(missing)}" if missing else ".")
    )
    return "\n".join(lines) + "\n"


def _figures(out: Path, spec: SweepSpec, manifest: dict, varying: list[str]) -> list[Path]:
    """Learning curves per curve key: one line per group (mean ± 1 sd over its seeds)."""
    patterns = spec.report.get("curves") or list(spec.adapter.curves)
    if not spec.adapter.curve_file or not patterns:
        return []
    per, limits = _group_curves(out, spec, manifest, varying, patterns)
    return [_plot_curve(out, spec, name, by_group, limits.get(name, set())) for name, by_group in per.items()]


def _group_curves(
    out: Path, spec: SweepSpec, manifest: dict, varying: list[str], patterns: list[str]
) -> tuple[dict[str, dict[str, list]], dict[str, set]]:
    """The finished runs' curves: curve name -> group label -> ``[(x, y), ...]`` (x: the adapter's
    ``curve_x`` when it fits, else 1, 2, ...), and per ``ep_costs.I`` curve the runs' cost limits."""
    adapter = spec.adapter
    per: dict[str, dict[str, list]] = {}
    limits: dict[str, set] = {}
    found: list[dict] = []
    labels: list[tuple] = []
    for run in manifest["runs"]:
        if not run_done(out, run["id"], adapter.result, strict=True):
            continue
        path = out / run["id"] / adapter.curve_file
        if not path.exists():
            continue
        data = load_json(path, f"{run['id']}/{adapter.curve_file}", kind=dict, recover=RERUN)
        xs = data.get(adapter.curve_x) if adapter.curve_x else None
        label = ", ".join(f"{k}={run['point'][k]}" for k in varying) or "all"
        found.append({pat: series(data, pat) for pat in patterns})
        labels.append((label, xs, run["id"]))
    for (label, xs, rid), named in zip(labels, by_pattern(found, patterns), strict=True):
        for name, ys in named.items():
            x = xs if isinstance(xs, list) and len(xs) == len(ys) else list(range(1, len(ys) + 1))
            per.setdefault(name, {}).setdefault(label, []).append((x, ys))
            if name.startswith("ep_costs.") and name.split(".")[1].isdigit():
                limits.setdefault(name, set()).add(_cost_limit(out / rid, int(name.split(".")[1])))
    return per, limits


def _plot_curve(out: Path, spec: SweepSpec, name: str, by_group: dict[str, list], lim: set) -> Path:
    """``out/curves_<name>.png``: each group's mean ± 1 sd over its runs (cut to the shortest run), with
    the cost limit as a line when every run has the same one."""
    import numpy as np

    curves, xs = {}, {}
    for label, runs in by_group.items():
        n = min(len(y) for _, y in runs)
        ys = np.asarray([y[:n] for _, y in runs], float)
        curves[label] = (ys.mean(0), ys.std(0, ddof=1) if len(runs) > 1 else np.zeros(n))
        xs[label] = runs[0][0][:n]
    hline = next(iter(lim)) if len(lim) == 1 and None not in lim else None
    safe = name.replace("*", "all").replace("/", "-")
    curve_x = spec.adapter.curve_x
    return plot_mean_sd(
        curves,
        out / f"curves_{safe}.png",
        curve_x.replace("_", " ") if curve_x else "round / episode",
        _axis_label(name),
        f"{spec.name or spec.command}: {name}",
        x=xs,
        hline=hline,
        hline_label=f"limit {hline:g}" if hline is not None else "limit",
    )


def _axis_label(name: str) -> str:
    if name == "ep_return":
        return "episodic return (sum of rewards)"
    if name.startswith("ep_costs."):
        return f"episodic cost {name.split('.', 1)[1]} (sum per episode)"
    return name


def _cost_limit(run_dir: Path, i: int) -> float | None:
    try:
        return float(load_json(run_dir / "metrics.json")["cost_limits"][i])
    except (KeyError, IndexError, ValueError, TypeError):
        return None

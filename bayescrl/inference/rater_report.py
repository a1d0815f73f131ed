"""The rater table of a command's results: the ``competence`` choice, rows for ``results.json`` and the
short aligned table a command prints, from a :class:`~bayescrl.inference.hierarchical.RaterPoolPosterior`.

``competence: infer`` in the algorithm families (prefrl, MOPO, the multi-rater bandit) fits the
hierarchical rater model (:func:`~bayescrl.inference.hierarchical.fit_rater_pool`: θ, every ϑ_i, β_i and
λ_i jointly); ``competence: infer-beta`` keeps the β-only plug-in estimate with λ fixed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bayescrl.utils.checks import choice

if TYPE_CHECKING:  # the hierarchical module loads Pyro
    from bayescrl.inference.hierarchical import RaterPoolPosterior

#: the file name of the rater plot next to a command's results
PLOT_NAME = "rater_competence.png"


def check_choice(value: Any, field: str, options: Sequence[str]) -> str:
    """``value`` if it is one of the strings ``options``; else a :class:`ConfigError` naming the closest
    option (:func:`bayescrl.utils.checks.choice`)."""
    return choice(value, field, options, f"must be one of {', '.join(options)}")


def table_rows(post: RaterPoolPosterior, **extra: Any) -> list[dict[str, Any]]:
    """One row per rater for ``results.json``: ``id``, ``beta_mean``, ``beta_90`` ([lo, hi], the 90 %
    interval), ``lam_mean``, ``lam_90``, ``verdict`` (rule: :meth:`RaterPoolPosterior.rater_table`) and
    ``note`` (``known`` values, or λ left at its prior for a single rater); ``extra`` is added to every row
    (e.g. ``objective``)."""
    rows = []
    for r in post.rater_table():
        notes = [f"{k} known" for k in ("beta", "lam") if r[f"{k}_known"]]
        if r["lam_from_prior"]:
            notes.append("lam = its prior: not identified from one rater")
        rows.append(
            {
                "id": r["rater"],
                **extra,
                "beta_mean": r["beta_mean"],
                "beta_90": [r["beta_lo"], r["beta_hi"]],
                "lam_mean": r["lam_mean"],
                "lam_90": [r["lam_lo"], r["lam_hi"]],
                "verdict": r["verdict"],
                "note": "; ".join(notes),
            }
        )
    return rows


def format_table(rows: Iterable[dict[str, Any]]) -> str:
    """The rows of :func:`table_rows` as a short aligned text table (one line per rater)."""
    rows = list(rows)
    if not rows:
        return ""
    fixed = ("id", "beta_mean", "beta_90", "lam_mean", "lam_90", "verdict", "note")
    extra = [k for k in rows[0] if k not in fixed]

    def num(v: float) -> str:
        return f"{v:.3g}"

    head = ["rater", *extra, "beta", "beta 90%", "lam", "lam 90%", "verdict"]
    body = [
        [
            str(r["id"]),
            *[str(r[k]) for k in extra],
            num(r["beta_mean"]),
            f"[{num(r['beta_90'][0])}, {num(r['beta_90'][1])}]",
            num(r["lam_mean"]),
            f"[{num(r['lam_90'][0])}, {num(r['lam_90'][1])}]",
            r["verdict"] + (f" ({r['note']})" if r["note"] else ""),
        ]
        for r in rows
    ]
    width = [max(len(x[j]) for x in [head, *body]) for j in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(x, width, strict=True)).rstrip() for x in [head, *body]]
    return "rater competence (hierarchical model):\n" + "\n".join("  " + s for s in lines)


def seed_summary(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of :func:`table_rows` over several fits (e.g. one per seed, each row with a ``seed`` key),
    summarised per rater (first-seen order): ``id``, ``fits`` (how many rows it has), ``beta_mean`` /
    ``beta_sd`` and ``lam_mean`` / ``lam_sd`` (mean and sample sd over the fits of the posterior means; sd
    0 for one fit), ``verdicts`` (how many fits gave each verdict) and ``note`` (that of its first row)."""
    by_id: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_id.setdefault(str(r["id"]), []).append(r)
    out = []
    for rid, rs in by_id.items():
        entry: dict[str, Any] = {"id": rid, "fits": len(rs)}
        for key in ("beta", "lam"):
            v = [float(r[f"{key}_mean"]) for r in rs]
            m = sum(v) / len(v)
            sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0.0
            entry[f"{key}_mean"], entry[f"{key}_sd"] = m, sd
        verdicts: dict[str, int] = {}
        for r in rs:
            verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
        entry["verdicts"] = verdicts
        entry["note"] = rs[0].get("note", "")
        out.append(entry)
    return out


def format_seed_summary(summary: Iterable[dict[str, Any]]) -> str:
    """The per-rater summary of :func:`seed_summary` as a short aligned text table (one line per rater)."""
    summary = list(summary)
    if not summary:
        return ""
    head = ["rater", "fits", "beta (mean ± sd)", "lam (mean ± sd)", "verdicts"]
    body = [
        [
            e["id"],
            str(e["fits"]),
            f"{e['beta_mean']:.3g} ± {e['beta_sd']:.2g}",
            f"{e['lam_mean']:.3g} ± {e['lam_sd']:.2g}",
            ", ".join(f"{k} {v}" for k, v in sorted(e["verdicts"].items(), key=lambda kv: -kv[1]))
            + (f" ({e['note']})" if e["note"] else ""),
        ]
        for e in summary
    ]
    width = [max(len(x[j]) for x in [head, *body]) for j in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(x, width, strict=True)).rstrip() for x in [head, *body]]
    return "rater competence over seeds (hierarchical model, posterior means):\n" + "\n".join(
        "  " + s for s in lines
    )


def save_plot(post: RaterPoolPosterior, out: str | Path, name: str = PLOT_NAME) -> Path:
    """``post.plot`` into ``out/name``; returns the path."""
    path = Path(out) / name
    post.plot(path)
    return path

"""Human labelling of pending preference queries: a self-contained HTML page out, validated labels in.

When a run whose preference spec says ``labels: external`` needs answers, the trainer stops and writes
``RUN/queries/pending.json``::

    {"env": "bayescrl/PointCircle-v0", "round": 3, "iteration": 12, "segment_length": 8,
     "raters": ["alice", "bob"], "observation_names": null, "action_names": null,
     "queries": [{"id": "r3q0",
                  "left":  {"segment": 345, "obs": [[0.1, 0.2], ...], "actions": [[0.5], ...],
                            "features": [1.0, 0.3]},
                  "right": {...}}]}

:func:`export_queries` turns it into one HTML file (no network access, no external scripts or styles) on
which a person compares the two segments of each query and downloads ``labels.json``::

    {"round": 3, "labels": [{"query": "r3q0", "choice": "left", "rater": "alice"}]}

(``choice`` is left, right, equal or skip; a top-level ``"rater"`` is the default for labels without one).
:func:`import_labels` validates that file against the pending queries and writes (merging with an earlier
import of the same round) ``RUN/queries/answers.json``::

    {"round": 3, "answers": [{"query": "r3q0", "y": 0, "rater": "alice"}]}

with ``y`` 0 = left preferred, 1 = right preferred, 2 = equal, -1 = skip (the codes of
:mod:`bayescrl.raters.simulated`). Label files are data only: nothing in them is executed, imported or
followed as a path.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from bayescrl.utils.errors import DataError
from bayescrl.utils.io import check_keys, load_json, to_jsonable, write_json

PENDING_FILE = "pending.json"
ANSWERS_FILE = "answers.json"
PAGE_FILE = "labels.html"

# choice in labels.json -> y in answers.json (same codes as bayescrl.raters.simulated: SKIP = -1, EQUAL = 2)
CHOICE_CODES: dict[str, int] = {"left": 0, "right": 1, "equal": 2, "skip": -1}
LABELS_KEYS = ("labels", "rater", "round")
LABEL_KEYS = ("choice", "query", "rater")
MAX_PLOT_DIMS = 48  # observation/action dimensions embedded for plotting (the rest are counted, not drawn)
MAX_LABELS_BYTES = 64 * 2**20
MAX_RATER_CHARS = 100


def queries_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "queries"


# ---------------------------------------------------------------------------------------------------- pending
def load_pending(run_dir: str | Path) -> dict:
    """Read and check ``RUN/queries/pending.json``; raises :class:`DataError` naming what is wrong."""
    run_dir = Path(run_dir)
    path = queries_dir(run_dir) / PENDING_FILE
    if not path.is_file():
        why = "no such folder" if not run_dir.is_dir() else f"no pending queries (no queries/{PENDING_FILE})"
        raise DataError("run", str(run_dir), why)
    pending = _read_json(path, "pending", limit=None)
    if not isinstance(pending, dict):
        raise DataError("pending", str(path), f"top level must be a mapping, got {type(pending).__name__}")
    _round(pending.get("round"), "pending.round")
    raters = pending.get("raters")
    if raters is None:
        pending["raters"] = []
    elif not isinstance(raters, list) or not all(isinstance(r, str) and r for r in raters):
        raise DataError("pending.raters", raters, "must be a list of non-empty strings (or null)")
    for key in ("observation_names", "action_names"):
        names = pending.get(key)
        if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise DataError(f"pending.{key}", names, "must be a list of strings or null")
    queries = pending.get("queries")
    if not isinstance(queries, list):
        raise DataError("pending.queries", queries, "must be a list of queries")
    seen: set[str] = set()
    for i, q in enumerate(queries):
        if not isinstance(q, dict):
            raise DataError("pending.queries", q, "each query must be a mapping", index=i)
        qid = q.get("id")
        if not isinstance(qid, str) or not qid:
            raise DataError("pending.queries.id", qid, "must be a non-empty string", index=i)
        if qid in seen:
            raise DataError("pending.queries.id", qid, "duplicate query id", index=i)
        seen.add(qid)
        for side in ("left", "right"):
            if not isinstance(q.get(side), dict):
                raise DataError(f"pending.queries.{side}", q.get(side), "must be a mapping", index=i)
    return pending


def _read_json(path: Path, field: str, limit: int | None = MAX_LABELS_BYTES, recover: str = "") -> Any:
    return load_json(path, field, limit=limit, recover=recover)


def _round(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataError(field, value, "must be an integer round number")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise DataError(field, value, "must be an integer round number")
    return int(value)


def _matrix(value: Any, field: str, index: int) -> tuple[list, int]:
    """An (L, D) list of numbers (None for non-finite) and the full D; 1-D input is one dimension."""
    if value is None:
        return [], 0
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DataError(field, value, "must be a list of steps, each a list of numbers", index=index) from exc
    if arr.ndim == 0:
        raise DataError(field, value, "must be a list of steps, each a list of numbers", index=index)
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    arr = arr.reshape(arr.shape[0], -1)
    return to_jsonable(arr[:, :MAX_PLOT_DIMS]), int(arr.shape[1])


def _vector(value: Any, field: str, index: int) -> list:
    if value is None:
        return []
    try:
        return to_jsonable(np.asarray(value, dtype=float).reshape(-1))
    except (TypeError, ValueError) as exc:
        raise DataError(field, value, "must be a list of numbers", index=index) from exc


def _page_data(pending: dict, run_dir: Path) -> dict:
    queries = []
    for i, q in enumerate(pending["queries"]):
        item: dict[str, Any] = {"id": q["id"]}
        for side in ("left", "right"):
            seg = q[side]
            obs, obs_dims = _matrix(seg.get("obs"), f"pending.queries.{side}.obs", i)
            act, act_dims = _matrix(seg.get("actions"), f"pending.queries.{side}.actions", i)
            segment = seg.get("segment")
            item[side] = {
                "segment": segment
                if isinstance(segment, (int, str)) and not isinstance(segment, bool)
                else None,
                "obs": obs,
                "obs_dims": obs_dims,
                "actions": act,
                "action_dims": act_dims,
                "features": _vector(seg.get("features"), f"pending.queries.{side}.features", i),
            }
        queries.append(item)
    return {
        "env": str(pending.get("env", "")),
        "round": _round(pending["round"], "pending.round"),
        "iteration": pending.get("iteration") if isinstance(pending.get("iteration"), int) else None,
        "segment_length": pending.get("segment_length")
        if isinstance(pending.get("segment_length"), int)
        else None,
        "raters": list(pending["raters"]),
        "observation_names": pending.get("observation_names"),
        "action_names": pending.get("action_names"),
        "run": str(run_dir),
        "queries": queries,
    }


# ---------------------------------------------------------------------------------------------------- export
def embed_json(obj: Any) -> str:
    """JSON safe to place inside ``<script type="application/json">``: no ``<``, ``>`` or ``&`` survives raw,
    so no value can close the tag or open a comment (JSON.parse reads the escapes back)."""
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for raw, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("\u2028", "\\u2028")):
        text = text.replace(raw, esc)
    return text.replace("\u2029", "\\u2029")


def render_page(data: dict) -> str:
    """The labelling page for ``data`` (see :func:`_page_data`) as one HTML string."""
    script_hash = base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()
    csp = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data: blob:; "
        f"script-src 'sha256-{script_hash}'; form-action 'none'; base-uri 'none'"
    )
    parts = {"CSP": csp, "STYLE": _STYLE, "DATA": embed_json(data), "SCRIPT": _SCRIPT}
    # one pass, so that text inside the data is never taken for a placeholder
    return re.sub(r"%(CSP|STYLE|DATA|SCRIPT)%", lambda m: parts[m.group(1)], _HTML)


def export_queries(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the labelling page for the run's pending queries (default ``RUN/queries/labels.html``)."""
    run_dir = Path(run_dir)
    pending = load_pending(run_dir)
    if not pending["queries"]:
        raise DataError("run", str(run_dir), f"no pending queries (queries/{PENDING_FILE} lists none)")
    page = render_page(_page_data(pending, run_dir))
    path = Path(out) if out is not None else queries_dir(run_dir) / PAGE_FILE
    if path.is_dir():
        raise DataError("out", str(path), "is a folder; give a file name such as labels.html")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)
    return path


# ---------------------------------------------------------------------------------------------------- import
def parse_labels(obj: Any, pending: dict) -> dict[str, dict]:
    """Check a labels.json mapping against the pending queries; returns query id -> answer (a query labelled
    twice in one file must have the same label both times; a later import replaces an earlier one)."""
    if not isinstance(obj, dict):
        raise DataError("labels.json", type(obj).__name__, "top level must be a mapping {round, labels}")
    check_keys(obj, LABELS_KEYS, "labels.json", error=DataError)
    want = _round(pending["round"], "pending.round")
    if "round" not in obj:
        raise DataError("round", None, f"missing (the pending queries are round {want})")
    got = _round(obj["round"], "round")
    if got != want:
        raise DataError("round", obj["round"], f"the pending queries are round {want}; labels are stale")
    raters = list(pending["raters"])
    default = obj.get("rater")
    if default is None and len(raters) == 1:  # a one-rater spec: the rater is optional
        default = raters[0]
    if "rater" in obj:
        _check_rater(default, raters, "rater", None)
    labels = obj.get("labels")
    if not isinstance(labels, list):
        raise DataError("labels", labels, "must be a list of {query, choice, rater}")
    ids = {q["id"] for q in pending["queries"]}
    answers: dict[str, dict] = {}
    first: dict[str, int] = {}
    for i, entry in enumerate(labels):
        if not isinstance(entry, dict):
            raise DataError("labels", entry, "each label must be a mapping {query, choice, rater}", index=i)
        check_keys(entry, LABEL_KEYS, "labels", error=DataError, index=i)
        query = entry.get("query")
        if not isinstance(query, str) or query not in ids:
            raise DataError("labels.query", query, f"not a pending query of round {want}", index=i)
        choice = entry.get("choice")
        if not isinstance(choice, str) or choice not in CHOICE_CODES:
            raise DataError("labels.choice", choice, f"must be one of {', '.join(CHOICE_CODES)}", index=i)
        rater = entry.get("rater", default)
        if rater is None:
            raise DataError("labels.rater", None, "missing (and no top-level 'rater')", index=i)
        _check_rater(rater, raters, "labels.rater", i)
        answer = {"query": query, "y": CHOICE_CODES[choice], "rater": rater}
        if query in answers and answers[query] != answer:  # which one is meant? never guess
            j = first[query]
            why = f"a second, different label for this query (labels[{j}]: {labels[j].get('choice')!r}"
            why += f" by {answers[query]['rater']!r}); keep one"
            raise DataError("labels.query", query, why, index=i)
        first.setdefault(query, i)
        answers[query] = answer
    return answers


def _check_rater(rater: Any, raters: list[str], field: str, index: int | None) -> None:
    if raters:
        if not isinstance(rater, str) or rater not in raters:
            raise DataError(field, rater, f"unknown rater (pending raters: {', '.join(raters)})", index=index)
    elif not isinstance(rater, str) or not rater.strip() or len(rater) > MAX_RATER_CHARS:
        raise DataError(
            field, rater, f"must be a non-empty name of at most {MAX_RATER_CHARS} characters", index
        )


def import_labels(run_dir: str | Path, labels_file: str | Path) -> dict:
    """Validate ``labels_file`` against the run's pending queries and write/merge ``answers.json``.

    Returns ``{"round", "imported", "answered", "remaining", "total", "answers"}``: labels taken from this
    file, queries answered in all, queries still unlabelled, pending queries, and the answers file.
    """
    run_dir = Path(run_dir)
    pending = load_pending(run_dir)
    labels_file = Path(labels_file)
    if not labels_file.is_file():
        raise DataError("labels", str(labels_file), "file not found")
    new = parse_labels(_read_json(labels_file, "labels"), pending)
    rnd = _round(pending["round"], "pending.round")
    order = [q["id"] for q in pending["queries"]]
    merged = {a["query"]: a for a in _previous_answers(run_dir, rnd, set(order))}
    merged.update(new)
    path = queries_dir(run_dir) / ANSWERS_FILE
    write_json(path, {"round": rnd, "answers": [merged[q] for q in order if q in merged]})
    answered = sum(q in merged for q in order)
    return {
        "round": rnd,
        "imported": len(new),
        "answered": answered,
        "remaining": len(order) - answered,
        "total": len(order),
        "answers": path,
    }


def _previous_answers(run_dir: Path, rnd: int, ids: set[str]) -> list[dict]:
    """Answers of an earlier import of the same round (for pending queries); another round's are dropped."""
    path = queries_dir(run_dir) / ANSWERS_FILE
    if not path.is_file():
        return []
    fix = "move it away and import the labels again"
    old = _read_json(path, "answers", recover=fix)
    if not isinstance(old, dict) or not isinstance(old.get("answers"), list):
        raise DataError("answers", str(path), f"existing file is not {{round, answers}}; {fix}")
    if old.get("round") != rnd:
        return []
    codes = set(CHOICE_CODES.values())
    return [
        {"query": a["query"], "y": a["y"], "rater": a.get("rater")}
        for a in old["answers"]
        if isinstance(a, dict) and a.get("query") in ids and a.get("y") in codes
    ]


# ---------------------------------------------------------------------------------------------------- page
_HTML = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="%CSP%">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>bayescrl preference labels</title>
<style>%STYLE%</style>
</head>
<body>
<header id="bar">
  <div class="row">
    <h1>Which segment is better?</h1>
    <span id="meta" class="muted"></span>
  </div>
  <div class="row">
    <label>Rater <span id="rater-box"></span></label>
    <span id="progress" class="progress"></span>
    <label class="muted"><input type="checkbox" id="perdim"> scale each dimension separately</label>
    <button type="button" id="download" class="primary">Download labels.json</button>
  </div>
  <div class="row muted small" id="help">Keys: 1 left better, 2 right better, 3 equal, 4 skip;
    j / k move to the next / previous query; clicking a chosen answer again clears it.</div>
  <div class="row small" id="message" role="status"></div>
</header>
<main id="queries"></main>
<noscript>This page needs JavaScript (it runs locally; nothing is sent anywhere).</noscript>
<script type="application/json" id="bcrl-data">%DATA%</script>
<script>%SCRIPT%</script>
</body>
</html>
"""

_STYLE = """
:root { --fg: #1d2430; --muted: #5b6574; --line: #d5dae1; --accent: #2563eb; --bg: #f5f7fa; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: var(--fg); background: var(--bg); }
#bar { position: sticky; top: 0; z-index: 5; background: #fff; border-bottom: 1px solid var(--line);
       padding: 8px 16px; }
.row { display: flex; flex-wrap: wrap; gap: 8px 18px; align-items: center; margin: 3px 0; }
h1 { font-size: 18px; margin: 0; }
.muted { color: var(--muted); }
.small { font-size: 12px; }
.progress { font-weight: 600; }
#message:empty { display: none; }
#message { color: #9a3412; }
button { font: inherit; padding: 5px 12px; border: 1px solid var(--line); border-radius: 6px;
         background: #fff; cursor: pointer; }
button:hover { border-color: var(--accent); }
button.primary { background: var(--accent); color: #fff; border-color: var(--accent); }
select, input[type=text] { font: inherit; padding: 3px 6px; }
main { padding: 12px 16px 40px; }
.query { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px;
         margin: 0 0 14px; }
.query.current { border-color: var(--accent); box-shadow: 0 0 0 2px rgba(37, 99, 235, .25); }
.query.done { background: #fbfdfb; }
.qhead { display: flex; gap: 12px; align-items: baseline; flex-wrap: wrap; }
.qhead .title { font-weight: 600; }
.status { font-size: 12px; padding: 1px 8px; border-radius: 10px; background: #eef0f3; }
.status.done { background: #dcfce7; color: #14532d; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; margin: 8px 0; }
.panel { border: 1px solid var(--line); border-radius: 6px; padding: 6px 8px; min-width: 0; }
.panel.chosen { border-color: #16a34a; box-shadow: 0 0 0 2px rgba(22, 163, 74, .25); }
.panel h2 { font-size: 15px; margin: 0 0 2px; }
.plot-title { font-size: 12px; color: var(--muted); margin: 6px 0 0; }
svg.plot { width: 100%; height: auto; display: block; }
svg.plot text { font-size: 10px; fill: var(--muted); }
.legend { display: flex; flex-wrap: wrap; gap: 2px 10px; font-size: 11px; color: var(--muted); }
.swatch { display: inline-block; width: 14px; height: 3px; margin-right: 4px; vertical-align: middle; }
.choices { display: flex; flex-wrap: wrap; gap: 8px; }
.choices button.selected { background: #16a34a; border-color: #16a34a; color: #fff; }
details { font-size: 12px; color: var(--muted); margin-top: 4px; }
@media (max-width: 800px) { .pair { grid-template-columns: 1fr; } }
"""

_SCRIPT = r"""
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("bcrl-data").textContent);
  const SVGNS = "http://www.w3.org/2000/svg";
  const CHOICES = [["left", "Left better", "1"], ["right", "Right better", "2"],
                   ["equal", "Equal", "3"], ["skip", "Skip", "4"]];
  const CHOICE_TEXT = {left: "left better", right: "right better", equal: "equal", skip: "skipped"};
  const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04",
                   "#db2777", "#4b5563", "#65a30d"];
  const queries = DATA.queries;
  const ids = queries.map(function (q) { return q.id; });
  const labels = Object.create(null);  // query id -> {choice, rater}
  const cards = [];
  let current = 0;
  const storeKey = "bayescrl-labels|" + DATA.run + "|" + DATA.env + "|" + DATA.round + "|" + ids.join(",");

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function sv(tag, attrs) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs) e.setAttribute(k, String(attrs[k]));
    return e;
  }
  function fmt(v) {
    if (v === null || v === undefined) return "–";
    if (v === 0) return "0";
    const a = Math.abs(v);
    return (a >= 1e4 || a < 1e-3) ? v.toExponential(2) : String(Number(v.toPrecision(3)));
  }
  function say(text) { document.getElementById("message").textContent = text || ""; }

  // ------------------------------------------------------------------ rater
  const raterBox = document.getElementById("rater-box");
  let raterInput;
  if (DATA.raters.length) {
    raterInput = el("select");
    raterInput.id = "rater";
    DATA.raters.forEach(function (r) {
      const o = el("option", null, r);
      o.value = r;
      raterInput.appendChild(o);
    });
    raterInput.addEventListener("change", function () { raterInput.blur(); });
  } else {
    raterInput = el("input");
    raterInput.type = "text";
    raterInput.id = "rater";
    raterInput.placeholder = "your name";
    raterInput.maxLength = 100;
  }
  raterBox.appendChild(raterInput);
  function rater() { return raterInput.value.trim(); }

  const meta = [];
  if (DATA.env) meta.push(DATA.env);
  meta.push("round " + DATA.round);
  if (DATA.iteration !== null) meta.push("iteration " + DATA.iteration);
  if (DATA.segment_length !== null) meta.push("segments of " + DATA.segment_length + " steps");
  document.getElementById("meta").textContent = meta.join(" · ");
  document.title = "Label " + queries.length + " queries · round " + DATA.round;

  // ------------------------------------------------------------------ plots
  function columns(rows) {
    const dims = rows.length ? rows[0].length : 0;
    const out = [];
    for (let d = 0; d < dims; d++) out.push(rows.map(function (r) { return r[d]; }));
    return out;
  }
  function range(list) {
    let lo = Infinity, hi = -Infinity;
    list.forEach(function (v) { if (typeof v === "number") { if (v < lo) lo = v; if (v > hi) hi = v; } });
    if (lo === Infinity) return [0, 1];
    if (hi - lo < 1e-12) { const pad = Math.max(Math.abs(hi) * 0.1, 0.5); return [lo - pad, hi + pad]; }
    return [lo, hi];
  }
  function flat(cols) { return [].concat.apply([], cols); }
  function isDiscrete(cols) {
    return cols.length > 0 && flat(cols).every(function (v) { return v === null || Number.isInteger(v); });
  }
  function names(given, dims, prefix) {
    const out = [];
    for (let d = 0; d < dims; d++) {
      const named = Array.isArray(given) && typeof given[d] === "string" && given[d];
      out.push(named ? given[d] : prefix + "[" + d + "]");
    }
    return out;
  }

  // cols: per-dimension value arrays; ranges: per-dimension [lo, hi]; perdim: values shown normalised.
  function plot(cols, dimNames, ranges, perdim, steps) {
    const W = 520, H = 170, L = 46, R = 8, T = 8, B = 22;
    const svg = sv("svg", {viewBox: "0 0 " + W + " " + H, class: "plot", role: "img"});
    const pw = W - L - R, ph = H - T - B;
    const n = Math.max(steps, 1);
    const x = function (t) { return L + (n === 1 ? pw / 2 : pw * t / (n - 1)); };
    svg.appendChild(sv("rect", {x: L, y: T, width: pw, height: ph, fill: "#fcfcfd", stroke: "#d5dae1"}));
    const shared = ranges[0];
    [0, 0.5, 1].forEach(function (f) {
      const y = T + ph * (1 - f);
      svg.appendChild(sv("line", {x1: L, x2: L + pw, y1: y, y2: y, stroke: "#e5e7eb"}));
      const lab = sv("text", {x: L - 4, y: y + 3, "text-anchor": "end"});
      if (perdim) lab.textContent = f === 0 ? "min" : f === 1 ? "max" : "";
      else lab.textContent = fmt(shared[0] + f * (shared[1] - shared[0]));
      svg.appendChild(lab);
    });
    const ticks = n <= 1 ? [0] : n <= 12 ? Array.from({length: n}, function (_, i) { return i; })
                                          : [0, Math.round((n - 1) / 4), Math.round((n - 1) / 2),
                                             Math.round(3 * (n - 1) / 4), n - 1];
    ticks.forEach(function (t) {
      const lab = sv("text", {x: x(t), y: H - 8, "text-anchor": "middle"});
      lab.textContent = String(t);
      svg.appendChild(lab);
    });
    const stepwise = isDiscrete(cols);
    cols.forEach(function (col, d) {
      const rg = perdim ? ranges[d] : shared;
      const y = function (v) { return T + ph * (1 - (v - rg[0]) / (rg[1] - rg[0])); };
      const colour = PALETTE[d % PALETTE.length];
      const dash = d >= PALETTE.length ? "5 3" : "none";
      let pts = [];
      const flush = function () {
        if (pts.length > 1) {
          const line = sv("polyline", {points: pts.join(" "), fill: "none", stroke: colour,
                                       "stroke-width": 1.6, "stroke-dasharray": dash});
          const tip = sv("title", {});
          tip.textContent = dimNames[d];
          line.appendChild(tip);
          svg.appendChild(line);
        }
        pts = [];
      };
      col.forEach(function (v, t) {
        if (typeof v !== "number") { flush(); return; }
        if (stepwise && pts.length) pts.push(x(t).toFixed(1) + "," + pts[pts.length - 1].split(",")[1]);
        pts.push(x(t).toFixed(1) + "," + y(v).toFixed(1));
        if (n <= 40) {
          const dot = sv("circle", {cx: x(t).toFixed(1), cy: y(v).toFixed(1), r: 2, fill: colour});
          const tip = sv("title", {});
          tip.textContent = dimNames[d] + " @ step " + t + ": " + fmt(v);
          dot.appendChild(tip);
          svg.appendChild(dot);
        }
      });
      flush();
    });
    return svg;
  }

  function legend(dimNames, total) {
    const box = el("div", "legend");
    dimNames.forEach(function (name, d) {
      const item = el("span");
      const sw = el("span", "swatch");
      if (d < PALETTE.length) sw.style.background = PALETTE[d];
      else sw.style.borderTop = "2px dashed " + PALETTE[d % PALETTE.length];  // as its dashed line
      item.appendChild(sw);
      item.appendChild(document.createTextNode(name));
      box.appendChild(item);
    });
    if (total > dimNames.length) {
      box.appendChild(el("span", null, "(" + total + " dimensions, first " + dimNames.length + " shown)"));
    }
    return box;
  }

  function plotsFor(q, key, dimsKey, given, prefix, perdim) {
    const left = columns(q.left[key]), right = columns(q.right[key]);
    const dims = Math.max(left.length, right.length);
    const total = Math.max(q.left[dimsKey], q.right[dimsKey]);
    const dimNames = names(given, dims, prefix);
    const ranges = [];
    if (perdim) {
      for (let d = 0; d < dims; d++) ranges.push(range((left[d] || []).concat(right[d] || [])));
    } else {
      ranges.push(range(flat(left).concat(flat(right))));
    }
    return {dims: dims, total: total, names: dimNames, ranges: ranges, left: left, right: right};
  }

  function panel(q, side, title, obsInfo, actInfo, perdim) {
    const seg = q[side];
    const box = el("div", "panel");
    box.dataset.side = side;
    box.appendChild(el("h2", null, title));
    const steps = Math.max(seg.obs.length, seg.actions.length);
    const sub = [steps + " steps"];
    if (seg.segment !== null) sub.unshift("segment " + seg.segment);
    box.appendChild(el("div", "muted small", sub.join(" · ")));
    const scaled = perdim ? " (each dimension scaled to its own range)" : "";
    if (obsInfo.dims) {
      box.appendChild(el("div", "plot-title", "Observations" + scaled));
      box.appendChild(plot(obsInfo[side], obsInfo.names, obsInfo.ranges, perdim, steps));
      box.appendChild(legend(obsInfo.names, obsInfo.total));
    }
    if (actInfo.dims) {
      box.appendChild(el("div", "plot-title", "Actions" + scaled));
      box.appendChild(plot(actInfo[side], actInfo.names, actInfo.ranges, perdim, steps));
      box.appendChild(legend(actInfo.names, actInfo.total));
    }
    if (seg.features.length) {
      const det = el("details");
      det.appendChild(el("summary", null, "reward features Φ (" + seg.features.length + ")"));
      det.appendChild(el("div", null, "[" + seg.features.map(fmt).join(", ") + "]"));
      box.appendChild(det);
    }
    return box;
  }

  // ------------------------------------------------------------------ cards
  function buildCard(i) {
    const q = queries[i];
    const perdim = document.getElementById("perdim").checked;
    const card = el("section", "query");
    card.dataset.query = q.id;
    const head = el("div", "qhead");
    head.appendChild(el("span", "title", "Query " + (i + 1) + " of " + queries.length));
    head.appendChild(el("span", "muted small", "id " + q.id));
    const status = el("span", "status", "unlabelled");
    head.appendChild(status);
    card.appendChild(head);
    const obsInfo = plotsFor(q, "obs", "obs_dims", DATA.observation_names, "obs", perdim);
    const actInfo = plotsFor(q, "actions", "action_dims", DATA.action_names, "act", perdim);
    const pair = el("div", "pair");
    const lp = panel(q, "left", "Left", obsInfo, actInfo, perdim);
    const rp = panel(q, "right", "Right", obsInfo, actInfo, perdim);
    pair.appendChild(lp);
    pair.appendChild(rp);
    card.appendChild(pair);
    const row = el("div", "choices");
    const buttons = {};
    CHOICES.forEach(function (c) {
      const b = el("button", null, c[1] + " (" + c[2] + ")");
      b.type = "button";
      b.dataset.choice = c[0];
      b.addEventListener("click", function (ev) {
        ev.stopPropagation();  // the card's own click handler would undo the move to the next query
        setCurrent(i, false);
        choose(i, c[0], true);
      });
      buttons[c[0]] = b;
      row.appendChild(b);
    });
    card.appendChild(row);
    card.addEventListener("click", function () { setCurrent(i, false); });
    return {card: card, status: status, buttons: buttons, left: lp, right: rp};
  }

  function render() {
    const main = document.getElementById("queries");
    while (main.firstChild) main.removeChild(main.firstChild);
    cards.length = 0;
    queries.forEach(function (_, i) {
      const c = buildCard(i);
      cards.push(c);
      main.appendChild(c.card);
      refresh(i);
    });
    setCurrent(current, false);
    progress();
  }

  function refresh(i) {
    const c = cards[i], lab = labels[queries[i].id];
    CHOICES.forEach(function (ch) {
      c.buttons[ch[0]].classList.toggle("selected", !!lab && lab.choice === ch[0]);
    });
    c.left.classList.toggle("chosen", !!lab && lab.choice === "left");
    c.right.classList.toggle("chosen", !!lab && lab.choice === "right");
    c.card.classList.toggle("done", !!lab);
    c.status.classList.toggle("done", !!lab);
    c.status.textContent = lab ? CHOICE_TEXT[lab.choice] + " · " + lab.rater : "unlabelled";
  }

  function progress() {
    const k = ids.filter(function (id) { return labels[id]; }).length;
    document.getElementById("progress").textContent = k + " of " + queries.length + " labelled";
  }

  function setCurrent(i, scroll) {
    current = Math.max(0, Math.min(queries.length - 1, i));
    cards.forEach(function (c, j) { c.card.classList.toggle("current", j === current); });
    if (scroll && cards[current]) cards[current].card.scrollIntoView({block: "center"});
  }

  function save() {
    try { window.localStorage.setItem(storeKey, JSON.stringify(labels)); } catch (e) { /* storage off */ }
  }
  function restore() {
    let saved = null;
    try { saved = JSON.parse(window.localStorage.getItem(storeKey) || "null"); } catch (e) { saved = null; }
    if (!saved || typeof saved !== "object") return 0;
    let n = 0;
    ids.forEach(function (id) {
      const s = saved[id];
      if (s && CHOICE_TEXT[s.choice] && typeof s.rater === "string" && s.rater &&
          (!DATA.raters.length || DATA.raters.indexOf(s.rater) >= 0)) {
        labels[id] = {choice: s.choice, rater: s.rater};
        n++;
      }
    });
    return n;
  }

  function choose(i, choice, toggle) {
    const id = queries[i].id;
    if (toggle && labels[id] && labels[id].choice === choice) {
      delete labels[id];
    } else {
      const who = rater();
      if (!who) { say("Enter your name as rater first."); raterInput.focus(); return; }
      labels[id] = {choice: choice, rater: who};
      say("");
      let next = -1;
      for (let j = 1; j <= queries.length; j++) {
        const k = (i + j) % queries.length;
        if (!labels[queries[k].id]) { next = k; break; }
      }
      if (next >= 0) setCurrent(next, true);
      else say("All " + queries.length + " queries labelled: download labels.json.");
    }
    refresh(i);
    progress();
    save();
  }

  function download() {
    const out = [];
    ids.forEach(function (id) {
      if (labels[id]) out.push({query: id, choice: labels[id].choice, rater: labels[id].rater});
    });
    const text = JSON.stringify({round: DATA.round, labels: out}, null, 2) + "\n";
    const url = URL.createObjectURL(new Blob([text], {type: "application/json"}));
    const a = el("a");
    a.href = url;
    a.download = "labels.json";
    document.body.appendChild(a);
    a.click();
    document.body.removeChild(a);
    setTimeout(function () { URL.revokeObjectURL(url); }, 10000);
    say("Saved " + out.length + " of " + queries.length + " labels. Next: bayescrl prefs import " + DATA.run +
        " labels.json");
  }

  document.getElementById("download").addEventListener("click", download);
  document.getElementById("perdim").addEventListener("change", function (ev) { ev.target.blur(); render(); });
  document.addEventListener("keydown", function (ev) {
    const tag = (ev.target && ev.target.tagName) || "";
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") return;
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const c = CHOICES.filter(function (ch) { return ch[2] === ev.key; })[0];
    if (c) { ev.preventDefault(); choose(current, c[0], false); return; }
    if (ev.key === "j") { ev.preventDefault(); setCurrent(current + 1, true); }
    if (ev.key === "k") { ev.preventDefault(); setCurrent(current - 1, true); }
  });

  const restored = restore();
  const first = ids.findIndex(function (id) { return !labels[id]; });
  current = first >= 0 ? first : 0;
  render();
  if (restored) say("Restored " + restored + " labels saved by this browser.");
})();
"""

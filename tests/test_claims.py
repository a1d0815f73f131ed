"""Every run number the README and the docs quote is tied to a committed result file (tests/claims.py):
the quoted text stands in its page and equals the file's value as printed; in the scanned sections every
``a ± b`` (and, in the verdict table, every percentage) is registered, a verbatim row of a committed
report, or allowed with a reason."""

from __future__ import annotations

import json
import math
import re
from functools import cache
from pathlib import Path

import pytest
from claims import ALLOWED, CLAIMS, REPORT_TABLES, SCANNED, Claim, ci95, msd
from claims_cells import Quote, Table, find_quote, quote_problems, restate, table_lines, table_problems
from claims_repro import QUOTES, TABLES, VERDICT_LINES, verdict_line_problems

from bayescrl.utils.spread import fmt_spread, sample_sd

ROOT = Path(__file__).resolve().parents[1]


def norm(text: str) -> str:
    return " ".join(text.split())


@cache
def page(name: str) -> str:
    return norm((ROOT / name).read_text(encoding="utf-8"))


@cache
def load(source: str):
    return json.loads((ROOT / source).read_text(encoding="utf-8"))


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.id for c in CLAIMS])
def test_quoted_number_stands_in_its_page_and_equals_its_file(claim: Claim):
    assert norm(claim.text) in page(claim.page), f"{claim.page} no longer quotes {claim.text!r}"
    got = claim.fmt.format(*claim.numbers(load(claim.source)))
    assert got.replace("-", "−") == claim.text.replace("-", "−"), (
        f"{claim.page} quotes {claim.text!r}; {claim.source} gives {got!r}"
    )


def test_claim_sources_are_summary_files():
    """Pins read summary-level files (no per-step logs, no per-run folders that may be pruned)."""
    sources = {c.source for c in CLAIMS} | {q.source for q in QUOTES}
    sources |= {r.source for t in TABLES for r in t.rows}
    assert all((ROOT / s).is_file() for s in sources), sorted(s for s in sources if not (ROOT / s).is_file())
    names = {Path(s).name for s in sources} | {Path(src).name for _, src in REPORT_TABLES}
    allowed = {"report.json", "report.md", "results.json", "summary.json", "table.json", "metrics.json"}
    odd = {n for n in names if n not in allowed and not re.fullmatch(r"[\w.-]+\.json", n)}
    assert not odd, odd
    assert not any("curves" in s or "train_log" in s for s in sources)


@cache
def report_rows(source: str) -> frozenset[str]:
    text = (ROOT / source).read_text(encoding="utf-8")
    return frozenset(norm(ln) for ln in text.splitlines() if ln.startswith("| ") and "±" in ln)


def _section(name: str, start: str, end: str) -> str:
    text = (ROOT / name).read_text(encoding="utf-8")
    i = text.index(start)
    return text[i : text.index(end, i + len(start))]


PM = re.compile(r"[−-]?\d[\d.,]*(?:e-?\d+)? ± \d[\d.]*(?:e-?\d+)?")
PCT = re.compile(r"[−+-]?\d[\d.]*(?:–\d[\d.]*)? ?%")


def _unregistered(name: str, start: str, end: str, percent: bool) -> list[str]:
    """The spreads (and percentages) of a section that no claim, report row or allowance covers."""
    section = _section(name, start, end)
    rows = set().union(*(report_rows(src) for p, src in REPORT_TABLES if p == name))
    rows |= {norm(ln) for t in TABLES if t.page == name for ln in table_lines(name, t.after)[1][2:]}
    text = "\n".join("" if norm(ln) in rows else ln for ln in section.splitlines())  # quoted report rows
    text = norm(text)
    spans = []
    for t in [c.text for c in CLAIMS if c.page == name] + [t for p, t, _ in ALLOWED if p == name]:
        t = norm(t)
        spans += [(m.start(), m.start() + len(t)) for m in re.finditer(re.escape(t), text)]
    spans += [m.span() for q in QUOTES if q.page == name and (m := find_quote(text, q.text))]
    bad = []
    for pat in [PM, PCT] if percent else [PM]:
        for m in pat.finditer(text):
            if not any(lo <= m.start() and m.end() <= hi for lo, hi in spans):
                bad.append(f"{m.group()!r} in: ...{text[max(0, m.start() - 60) : m.end() + 20]}...")
    return bad


@pytest.mark.parametrize("table", TABLES, ids=[t.id for t in TABLES])
def test_pinned_table_equals_its_files_cell_by_cell(table: Table):
    """Every number of the table's body equals its file's value at the precision the page prints
    (``python tests/claims_cells.py --fix`` rewrites stale cells from the files)."""
    bad = table_problems(table)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("quote", QUOTES, ids=[q.id for q in QUOTES])
def test_pinned_sentence_equals_its_file(quote: Quote):
    bad = quote_problems(quote)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    "source, task", VERDICT_LINES, ids=[f"{Path(s).parent.name}-{t}" for s, t in VERDICT_LINES]
)
def test_verdict_line_names_the_files_verdict_and_seeds(source: str, task: str):
    """A table's verdict ("e-COP and X not distinguishable at n seeds") changes with the seeds run: the
    page's line under the task's heading is the one in the verdicts file."""
    bad = verdict_line_problems(source, task)
    assert not bad, "\n".join(bad)


def test_cell_pins_compare_at_the_printed_precision():
    """``restate`` prints a file's value the way the page prints it (decimals, minus sign, thousands)."""
    assert restate("0.3280 ± 0.1063 (1/5)", [0.32804, 0.11894, 1, 5]) == "0.3280 ± 0.1189 (1/5)"
    assert restate("−0.0 ± 0.4 / 1,652.5", [-0.01, 0.44, 1652.46]) == "−0.0 ± 0.4 / 1,652.5"
    assert restate("-0.00", [-0.5]) == "-0.50" and restate("2.3", [-2.31]) == "−2.3"
    assert restate("3 / 5", [None, 4]) == "3 / 4"
    with pytest.raises(AssertionError):
        restate("1 ± 2", [1.0])


@pytest.mark.parametrize(("name", "start", "end"), SCANNED, ids=[s[0] + ":" + s[1] for s in SCANNED])
def test_every_quoted_spread_in_a_results_section_is_registered(name, start, end):
    """A new ``mean ± sd`` (or a verdict table's percentage) in a results section without a pin fails:
    register it in tests/claims.py (or, if it is no run's number, allow it there with the reason)."""
    bad = _unregistered(name, start, end, percent=start.startswith("Summary of the verdicts"))
    assert not bad, "\n".join(bad)


def test_committed_report_rows_quoted_by_a_page_are_rows_of_that_report():
    """Each REPORT_TABLES entry is used: its report has rows and the page quotes at least one."""
    for name, src in REPORT_TABLES:
        rows = report_rows(src)
        assert rows and any(r in page(name) for r in rows), (name, src)


def test_report_json_spread_is_the_sample_sd_of_its_values():
    """The committed reports the registry reads hold sample sd (ddof = 1) of their per-seed values and no
    spread for one seed, so a pin on ``sd`` is a pin on the one way spread is reported."""
    for src in sorted({c.source for c in CLAIMS if c.source.endswith("report.json")}):
        for g in load(src)["groups"]:
            for st in g["metrics"].values():
                vals = [v for v in st.get("values", []) if v is not None]
                if len(vals) >= 2 and st["sd"] is not None:
                    assert st["sd"] == pytest.approx(sample_sd(vals), rel=1e-9), (src, g["group"])
                if st["n"] == 1:
                    assert st["sd"] is None


def test_the_registry_helpers_against_hand_computed_numbers():
    """msd / ci95 (the helpers every pin uses): values 1, 2, 3, 4 have mean 2.5, sample sd 1.291; the
    95 % t-interval of the mean is 2.5 ± 3.182 · 1.291 / 2."""
    m, s = msd([1.0, 2.0, 3.0, 4.0])
    assert m == 2.5 and s == pytest.approx(math.sqrt(5 / 3), rel=1e-12)
    lo, hi = ci95(m, s, 4)
    assert hi - m == pytest.approx(3.182446305 * s / 2, rel=1e-8) and m - lo == pytest.approx(hi - m)
    assert fmt_spread(3.0, None, 1) == "3 (n = 1)" and "±" not in fmt_spread(3.0, 0.0, 1)

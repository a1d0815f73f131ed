"""Pins checked number by number at the precision the page prints (``tests/test_claims.py`` runs them).

A :class:`Table` ties a markdown table of a page (the first table after the text ``after``) to committed
result files row by row: each row names its source file and a key, and each column a function of
``(data, key)`` that returns the numbers the cell prints, in order (``None`` for a number that is a label,
e.g. the ``5`` of ``1/5`` when only the count is a result). A :class:`Quote` does the same for a sentence.
The page's number must equal the file's value rounded to the decimals the page shows (``0.40`` pins
``0.4041`` to two decimals), so a stale or mistyped number fails while a page may print fewer digits.
``python tests/claims_cells.py --fix`` rewrites stale cells and quotes from their files (review the diff).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# a number: not a digit of a name (P3O); a minus sign only where no digit precedes it (0.14-0.18 is a range)
NUM = re.compile(r"(?<![\w.])[−-]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:e[−-]?\d+)?)")

Col = Callable[[Any, Any], Sequence[float | None]] | None


@dataclass(frozen=True)
class Row:
    source: str
    key: Any = None
    cols: tuple[Col, ...] | None = None  # this row's columns where they differ from the table's


@dataclass(frozen=True)
class Table:
    page: str
    after: str
    cols: tuple[Col, ...]
    rows: tuple[Row, ...]

    @property
    def id(self) -> str:
        return f"{self.page}:{self.after[:60]}"


@dataclass(frozen=True)
class Quote:
    page: str
    text: str
    source: str
    numbers: Callable[[Any], Sequence[float | None]]

    @property
    def id(self) -> str:
        return f"{self.page}:{self.text[:60]}"


@cache
def load(source: str) -> Any:
    path = ROOT / source
    if source.endswith(".jsonl"):
        return [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    return json.loads(path.read_text(encoding="utf-8"))


def _printed(value: float, shown: str) -> str:
    """``value`` printed as ``shown`` is (same decimals, same minus sign and thousands separator)."""
    s = shown.replace("−", "-")
    if "e" in s:
        mant = s.split("e")[0]
        dec = len(mant.split(".")[1]) if "." in mant else 0
        out = f"{value:.{dec}e}"
        mant_o, exp_o = out.split("e")
        out = f"{mant_o}e{int(exp_o)}"
    else:
        dec = len(s.split(".")[1]) if "." in s else 0
        out = f"{value:,.{dec}f}" if "," in s else f"{value:.{dec}f}"
    if out.startswith("-") and "-" not in shown:
        out = "−" + out[1:]  # the typographic minus unless the page prints the ASCII one
    return out


def _rounds_to(value: float, shown: str) -> bool:
    """``shown`` is ``value`` rounded to its decimals (a tie such as 0.8945 may go either way)."""
    s = shown.replace("−", "-").replace(",", "")
    if "e" in s:
        return False
    dec = len(s.split(".")[1]) if "." in s else 0
    return abs(float(s) - value) <= 0.5 * 10.0**-dec * (1 + 1e-9) + 1e-12 * abs(value)


def restate(text: str, values: Sequence[float | None]) -> str:
    """``text`` with its numbers replaced by ``values`` printed the way the text prints them."""
    found = list(NUM.finditer(text))
    if len(found) != len(values):
        raise AssertionError(f"{text!r} holds {len(found)} numbers, the pin gives {len(values)}: {values}")
    out, last = [], 0
    for m, v in zip(found, values, strict=True):
        out.append(text[last : m.start()])
        keep = v is None or _rounds_to(float(v), m.group())
        out.append(m.group() if keep else _printed(float(v), m.group()))
        last = m.end()
    return "".join(out) + text[last:]


def _same(a: str, b: str) -> bool:
    def n(s: str) -> str:
        return re.sub(r"(?<![\d.])[−-](0(?:\.0*)?)(?![\d.])", r"\1", s.replace("−", "-"))

    return n(a) == n(b)


def page_text(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def table_lines(name: str, after: str) -> tuple[int, list[str]]:
    """The first markdown table after ``after`` in page ``name``: (index of its first line, its lines)."""
    lines = page_text(name).splitlines()
    text = page_text(name)
    i = text.index(after)
    assert text.count(after) == 1, f"{after!r} is not unique in {name}"
    k = text[: i + len(after)].count("\n") + 1  # the table starts below the line that ends ``after``
    while k < len(lines) and not lines[k].lstrip().startswith("|"):
        k += 1
    first = k
    while k < len(lines) and lines[k].lstrip().startswith("|"):
        k += 1
    return first, lines[first:k]


def cells(line: str) -> list[str]:
    """A table row's cells (an escaped ``\\|`` stays inside its cell)."""
    inner = line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]
    return [c.strip() for c in re.split(r"(?<!\\)\|", inner)]


def table_problems(t: Table, fix: bool = False) -> list[str]:
    first, lines = table_lines(t.page, t.after)
    body = lines[2:]
    bad = []
    if len(body) != len(t.rows):
        return [f"{t.id}: the page's table has {len(body)} rows, the pin {len(t.rows)}"]
    new_lines = list(lines)
    for j, (line, row) in enumerate(zip(body, t.rows, strict=True)):
        cs = cells(line)
        cols = row.cols or t.cols
        if len(cs) != len(cols):
            bad.append(f"{t.id}: row {j} has {len(cs)} cells, the pin {len(cols)}: {line}")
            continue
        data = load(row.source)
        want = [c if f is None else restate(c, list(f(data, row.key))) for c, f in zip(cs, cols, strict=True)]
        if not all(_same(a, b) for a, b in zip(cs, want, strict=True)):
            got = "|" + "|".join(f" {c} " if c else " " for c in want) + "|"
            bad.append(f"{t.id}: row {j}\n  page: {line.strip()}\n  file: {got}  ({row.source})")
            indent = line[: len(line) - len(line.lstrip())]
            new_lines[2 + j] = indent + got
    if fix and bad:
        all_lines = page_text(t.page).splitlines(keepends=True)
        for j, ln in enumerate(new_lines):
            end = "\n" if all_lines[first + j].endswith("\n") else ""
            all_lines[first + j] = ln + end
        (ROOT / t.page).write_text("".join(all_lines), encoding="utf-8")
    return bad


def find_quote(text: str, quote: str) -> re.Match | None:
    """``quote`` in ``text``: any run of whitespace matches any other (a quote may span a line break) and
    any number matches any number (the numbers are what the pin checks, the words find the place)."""

    def word(w: str) -> str:
        parts, last = [], 0
        for m in NUM.finditer(w):
            parts += [re.escape(w[last : m.start()]), NUM.pattern.join("()")]
            last = m.end()
        return "".join(parts) + re.escape(w[last:])

    exact = re.search(r"\s+".join(re.escape(w) for w in quote.split()), text)
    if exact:
        return exact
    hits = list(re.finditer(r"\s+".join(word(w) for w in quote.split()), text))
    return hits[0] if len(hits) == 1 else None


def quote_problems(q: Quote, fix: bool = False) -> list[str]:
    text = page_text(q.page)
    m = find_quote(text, q.text)
    if m is None:
        return [f"{q.page} no longer quotes {q.text!r}"]
    want = restate(m.group(), list(q.numbers(load(q.source))))
    if _same(want, m.group()):
        return []
    if fix:
        (ROOT / q.page).write_text(text[: m.start()] + want + text[m.end() :], encoding="utf-8")
    return [f"{q.page} quotes {q.text!r}; {q.source} gives {' '.join(want.split())!r}"]


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    from claims_repro import QUOTES, TABLES, VERDICT_LINES, verdict_line_problems

    fix = "--fix" in sys.argv
    probs = [p for t in TABLES for p in table_problems(t, fix)]
    probs += [p for q in QUOTES for p in quote_problems(q, fix)]
    probs += [p for src, task in VERDICT_LINES for p in verdict_line_problems(src, task, fix)]
    print("\n".join(probs) or "all pins hold")

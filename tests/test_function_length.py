"""Functions do one job: no function body in the package (docstring excluded) grows past 50 lines unless
it is listed below, and a listed one may only shrink. The list is a ratchet: when a listed function is
split under the limit, its entry must go."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "bayescrl"
LIMIT = 50

#: ``path:qualified name`` -> the most body lines it may keep; shrink or delete entries, never add
ALLOWED: dict[str, int] = {}


def body_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the function's last line (0: docstring only)."""
    body = fn.body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return fn.end_lineno - body[0].lineno + 1 if body else 0


def _visit(node: ast.AST, rel: str, prefix: str, out: dict[str, int]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            name = prefix + child.name
            out[f"{rel}:{name}"] = body_lines(child)
            _visit(child, rel, name + ".", out)
        elif isinstance(child, ast.ClassDef):
            _visit(child, rel, prefix + child.name + ".", out)


def function_lengths(root: Path = PACKAGE) -> dict[str, int]:
    """``{"pkg/mod.py:Class.func": n}``: the body lines of every function and method under ``root``
    (signature, decorators and docstring excluded; nested functions counted in their parent too)."""
    out: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        _visit(ast.parse(path.read_text(encoding="utf-8")), rel, "", out)
    return out


def long_functions(lengths: dict[str, int], allowed: dict[str, int], limit: int = LIMIT) -> list[str]:
    """One line per breach: a new function over ``limit``, a listed one that grew, or a stale entry."""
    bad = [
        f"{key}: {n} lines (limit {limit}; split it into named steps)"
        for key, n in lengths.items()
        if n > limit and key not in allowed
    ]
    for key, most in allowed.items():
        n = lengths.get(key, 0)
        if n > most:
            bad.append(f"{key}: grew to {n} lines (allowed {most})")
        elif n <= limit:
            bad.append(f"{key}: now {n} lines or gone; delete its entry from ALLOWED")
    return bad


def test_no_function_over_the_limit_unless_listed():
    assert long_functions(function_lengths(), ALLOWED) == []


@pytest.mark.parametrize(
    ("lengths", "allowed", "expected"),
    [
        ({"a.py:f": 51}, {}, "a.py:f: 51 lines"),  # a new long function
        ({"a.py:f": 61}, {"a.py:f": 60}, "grew to 61"),  # a listed one grew
        ({"a.py:f": 40}, {"a.py:f": 60}, "delete its entry"),  # split: the entry is stale
        ({}, {"a.py:f": 60}, "delete its entry"),  # removed
    ],
)
def test_the_ratchet_catches_each_breach(lengths, allowed, expected):
    (msg,) = long_functions(lengths, allowed)
    assert expected in msg


def test_methods_and_nested_functions_are_measured_without_docstrings(tmp_path):
    pkg = tmp_path / "bayescrl"
    pkg.mkdir()
    doc = '        """Two lines\n        of docstring."""\n'
    nested = "        def g():\n            pass\n"
    (pkg / "m.py").write_text("class C:\n    def f(self):\n" + doc + "        x = 1\n" * 3 + nested)
    lengths = function_lengths(pkg)
    assert lengths["bayescrl/m.py:C.f"] == 5 and lengths["bayescrl/m.py:C.f.g"] == 1

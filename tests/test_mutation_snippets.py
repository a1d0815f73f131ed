"""Every mutation of ``tools/mutation_check.py`` still finds its target: each original snippet occurs exactly
once in its file, so a refactor that moves or rewrites guarded maths cannot silently disable its mutation."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _mutations():
    spec = importlib.util.spec_from_file_location("mutation_check", ROOT / "tools" / "mutation_check.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mutation_check", mod)  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod.MUTATIONS


MUTATIONS = _mutations()


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_each_mutation_snippet_occurs_once_and_changes_the_code(mutation):
    for path, original, mutated in mutation.edits:
        text = (ROOT / path).read_text(encoding="utf-8")
        n = text.count(original)
        assert n == 1, f"{mutation.name}: {original!r} occurs {n} times in {path}"
        assert mutated != original
    for node in mutation.tests:
        assert (ROOT / node.split("::")[0]).is_file(), node

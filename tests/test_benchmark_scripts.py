"""Every benchmark and diagnostic script still imports against the package and builds its command line.

The studies themselves run for minutes to hours and are not tests; what rots silently between their runs is
the glue: a renamed function or module the script imports, or an option its parser no longer accepts. Each
script is loaded as a module (its ``main`` is not run) and, when it parses arguments, asked for ``--help``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py")) + sorted(
    (ROOT / "benchmarks" / "diagnostics").glob("*.py")
)


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"_bench_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT / "benchmarks")))
def test_script_imports_and_builds_its_command_line(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(path.parent))  # scripts import their neighbours (acpo_common, ...)
    module = _load(path)
    main = getattr(module, "_main", None) or getattr(module, "main", None)  # not an imported ``main``
    if "argparse" not in path.read_text() or main is None:
        return  # a reader of committed results with no options: importing it is the check
    monkeypatch.setattr(sys, "argv", [str(path), "--help"])
    out = io.StringIO()
    with pytest.raises(SystemExit) as stop, contextlib.redirect_stdout(out):
        main()
    assert stop.value.code == 0, f"{path.name} --help exited {stop.value.code}"
    assert "usage:" in out.getvalue()


def test_a_broken_import_fails(tmp_path: Path) -> None:
    """The check above can fail: a script importing a name the package no longer has is caught."""
    script = tmp_path / "stale.py"
    script.write_text("from bayescrl.inference import no_such_engine\n")
    with pytest.raises(ImportError):
        _load(script)

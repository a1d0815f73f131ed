"""The package's layers (docs/architecture.md), enforced on the source with :mod:`ast`.

    root  <-  utils  <-  raters  <-  models, envs  <-  inference  <-  bandits, pbrl, constrained, mopo
          <-  prefrl  <-  commands  <-  cli  <-  sweep

A module may import a module of its own layer entry or of a lower rank; never one of a higher rank
(upward) nor another entry of the same rank (sideways: algorithm families never import each other).
Only the command layer, ``sweep`` and ``cli`` import click. Module-level imports form no cycle.
Function-local ``bayescrl`` imports are refused unless listed in ``LAZY_ALLOWED`` (a lazy load that
defers an optional heavy dependency). Each check runs on synthetic bad trees too (bottom of the file).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "bayescrl"

#: layer entry -> rank (lower ranks are imported by higher ones, never the other way round)
RANKS: dict[str, int] = {
    "root": -1,  # bayescrl/__init__.py: lazy exports by string only, imports nothing of the package
    "utils": 0,
    "raters": 1,
    "models": 2,
    "envs": 2,
    "inference": 3,
    "bandits": 4,
    "pbrl": 4,
    "constrained": 4,
    "mopo": 4,
    "prefrl": 5,
    "commands": 6,
    "cli": 7,  # the entry point: mounts every command by name (strings only)
    "sweep": 8,  # grids of runs: each run calls its command's sweep adapter (sweep/child.py)
}

#: The one mapping table: module-name prefix -> layer entry (the longest matching prefix wins).
#: ``bayescrl.commands`` holds one click module per command; ``bayescrl.sweep.cli`` is the sweep/report
#: command, part of the sweep layer it drives.
LAYER_OF_PREFIX: dict[str, str] = {
    "bayescrl": "root",
    "bayescrl.utils": "utils",
    "bayescrl.raters": "raters",
    "bayescrl.models": "models",
    "bayescrl.envs": "envs",
    "bayescrl.inference": "inference",
    "bayescrl.bandits": "bandits",
    "bayescrl.pbrl": "pbrl",
    "bayescrl.constrained": "constrained",
    "bayescrl.mopo": "mopo",
    "bayescrl.prefrl": "prefrl",
    "bayescrl.commands": "commands",
    "bayescrl.sweep": "sweep",
    "bayescrl.cli": "cli",
    "bayescrl.__main__": "cli",
}

#: layers allowed to import click
CLICK_LAYERS = {"commands", "sweep", "cli"}

#: function-local ``bayescrl`` imports allowed: (importing module, imported module) -> why.
#: Only for a lazy load that defers an optional heavy dependency; prefer a module-level ``__getattr__``.
LAZY_ALLOWED: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    """One import statement of a module, resolved to the package's module it loads."""

    source: str  # importing module, e.g. "bayescrl.sweep.runner"
    target: str  # imported module, e.g. "bayescrl.sweep.spec" (or "click")
    line: int
    local: bool  # inside a function body (imports under ``if TYPE_CHECKING:`` count like any other)


def module_names(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root`` (its folder), by dotted name."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def layer_of(module: str, table: dict[str, str] = LAYER_OF_PREFIX) -> str:
    """The layer entry of a module: its longest prefix in ``table``."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in table:
            return table[prefix]
    raise KeyError(f"{module} has no layer: add its prefix to LAYER_OF_PREFIX")


def imports_of(source: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """The imports of one module of the package (``bayescrl.*`` resolved to modules, and ``click``)."""
    pkg_root = source.split(".")[0]
    is_pkg = path.name == "__init__.py"
    found: list[Import] = []

    def resolve(name: str) -> str | None:
        # the longest existing module that ``name`` starts with
        parts = name.split(".")
        for n in range(len(parts), 0, -1):
            if ".".join(parts[:n]) in modules:
                return ".".join(parts[:n])
        return None

    def visit(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, True)
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    add(alias.name, child.lineno, local)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:  # relative import
                    anchor = source.split(".") if is_pkg else source.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (child.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in child.names:  # ``from pkg import submodule`` loads the submodule
                    full = f"{base}.{alias.name}"
                    add(full if full in modules else base, child.lineno, local)
            else:
                visit(child, local)

    def add(name: str, line: int, local: bool) -> None:
        if name == "click" or name.startswith("click."):
            found.append(Import(source, "click", line, local))
        elif name == pkg_root or name.startswith(pkg_root + "."):
            target = resolve(name)
            if target is not None and target != source:
                found.append(Import(source, target, line, local))

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), False)
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: the strongly connected components of ``graph`` with more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return components


def check_layers(
    root: Path,
    table: dict[str, str] = LAYER_OF_PREFIX,
    ranks: dict[str, int] = RANKS,
    lazy_allowed: dict[tuple[str, str], str] = LAZY_ALLOWED,
) -> list[str]:
    """Every breach of the layering rules in the package at ``root``, one line each (empty: clean)."""
    modules = module_names(root)
    problems: list[str] = []
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for source, path in modules.items():
        own = layer_of(source, table)
        rel = path.relative_to(root.parent)
        for imp in imports_of(source, path, modules):
            where = f"{rel}:{imp.line}"
            if imp.target == "click":
                if own not in CLICK_LAYERS:
                    problems.append(f"{where}: click imported outside the command layer ({source})")
                continue
            other = layer_of(imp.target, table)
            if ranks[other] > ranks[own]:
                problems.append(f"{where}: upward import {source} ({own}) -> {imp.target} ({other})")
            elif ranks[other] == ranks[own] and other != own:
                problems.append(f"{where}: sideways import {source} ({own}) -> {imp.target} ({other})")
            if imp.local and (source, imp.target) not in lazy_allowed:
                problems.append(f"{where}: function-local import of {imp.target} in {source}")
            if not imp.local:  # TYPE_CHECKING imports count: a type checker follows them
                graph[source].add(imp.target)
    for component in strongly_connected(graph):
        problems.append(f"import cycle: {' <-> '.join(component)}")
    return problems


def test_package_respects_its_layers() -> None:
    problems = check_layers(PACKAGE_DIR)
    assert not problems, "\n".join(problems)


def test_every_module_has_a_layer_and_allow_list_is_live() -> None:
    modules = module_names(PACKAGE_DIR)
    assert {layer_of(m) for m in modules} <= set(RANKS)
    for (source, target), why in LAZY_ALLOWED.items():
        assert source in modules and target in modules and why.strip()


# --- the checker itself must be able to fail: synthetic bad package trees ---------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "bayescrl"
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:  # every folder is a package
            (root / parent / "__init__.py").touch()
        path.write_text(text)
    return root


def test_clean_tree_passes(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "utils/io.py": "import json\n",
            "inference/engines.py": "from bayescrl.utils import io\n",
            "pbrl/agents.py": "from bayescrl.inference.engines import fit\nfrom . import mdp\n",
            "pbrl/mdp.py": "from bayescrl.utils.io import x\n",
            "commands/pspl.py": "import click\nfrom bayescrl.pbrl.agents import A\n",
            "cli.py": "import click\n",
        },
    )
    assert check_layers(root) == []


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"utils/io.py": "from bayescrl.models import spec\n", "models/spec.py": ""}, "upward import"),
        ({"utils/io.py": "def f():\n    from bayescrl.pbrl import mdp\n", "pbrl/mdp.py": ""}, "upward"),
        ({"pbrl/mdp.py": "from bayescrl.bandits.env import E\n", "bandits/env.py": ""}, "sideways import"),
        ({"mopo/x.py": "from ..constrained import ecop\n", "constrained/ecop.py": ""}, "sideways import"),
        ({"constrained/acpo.py": "from bayescrl.prefrl import loop\n", "prefrl/loop.py": ""}, "upward"),
        ({"pbrl/agents.py": "import click\n"}, "click imported outside"),
        ({"pbrl/a.py": "def f():\n    from bayescrl.utils import io\n", "utils/io.py": ""}, "function-local"),
        ({"commands/x.py": "def f():\n    import bayescrl.pbrl.mdp\n", "pbrl/mdp.py": ""}, "function-local"),
        (
            {
                "sweep/calls.py": "from bayescrl.sweep.runner import run\n",
                "sweep/runner.py": "from bayescrl.sweep import spec\n",
                "sweep/spec.py": "import bayescrl.sweep.calls\n",
            },
            "import cycle: bayescrl.sweep.calls <-> bayescrl.sweep.runner <-> bayescrl.sweep.spec",
        ),
        (
            {  # a circle seen only by type checkers is still a circle (type against a Protocol instead)
                "pbrl/a.py": "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from bayescrl.pbrl import b\n",
                "pbrl/b.py": "from bayescrl.pbrl import a\n",
            },
            "import cycle: bayescrl.pbrl.a <-> bayescrl.pbrl.b",
        ),
    ],
)
def test_each_rule_fails_on_a_bad_tree(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    problems = check_layers(_tree(tmp_path, files))
    assert any(expected in p for p in problems), problems


def test_allow_list_and_table(tmp_path: Path) -> None:
    files = {
        "mopo/lm/run.py": "def f():\n    from bayescrl.mopo.lm import heavy\n",
        "mopo/lm/heavy.py": "",
    }
    root = _tree(tmp_path, files)
    expected = "bayescrl/mopo/lm/run.py:2: function-local import of bayescrl.mopo.lm.heavy in "
    expected += "bayescrl.mopo.lm.run"
    assert check_layers(root) == [expected]
    allowed = {("bayescrl.mopo.lm.run", "bayescrl.mopo.lm.heavy"): "defers transformers"}
    assert check_layers(root, lazy_allowed=allowed) == []
    # the layer is decided by the table: a command module may import click and prefrl, the same file inside
    # a family may not (click outside the command layer, and an upward import)
    code = "import click\nfrom bayescrl.prefrl import loop\n"
    root = _tree(tmp_path / "t2", {"commands/train.py": code, "prefrl/loop.py": ""})
    assert check_layers(root) == []
    root = _tree(tmp_path / "t3", {"constrained/cli.py": code, "prefrl/loop.py": ""})
    assert len(check_layers(root)) == 2
    table = {**LAYER_OF_PREFIX, "bayescrl.constrained.cli": "commands"}
    assert check_layers(root, table=table) == []

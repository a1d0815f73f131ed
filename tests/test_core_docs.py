"""The documentation site: every nav page exists, no internal wording, and every ``bayescrl`` command the docs
show is a real sub-command with real options. (The strict mkdocs build itself runs in CI, ``make docs``.)"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
import yaml

from bayescrl.cli import COMMANDS, cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
GLOBAL_FLAGS = {"-q", "-qq", "-v", "-vv", "--quiet", "--verbose"}
FORBIDDEN = re.compile(r"\bthe seed\b|\bissue [0-9]", re.IGNORECASE)  # not "the seeds"


def _nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [p for v in node.values() for p in _nav_pages(v)]
    if isinstance(node, list):
        return [p for v in node for p in _nav_pages(v)]
    return []


def _user_pages() -> list[Path]:
    return sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]


def _code(text: str) -> list[str]:
    """Fenced code blocks (continuation lines joined) and inline code spans."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)
    lines = [ln for b in blocks for ln in b.replace("\\\n", " ").splitlines()]
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)
    return lines + re.findall(r"`(bayescrl [^`]+)`", prose)


def _invocations(line: str) -> list[list[str]]:
    """Token lists following each ``bayescrl`` of a shell line (comments and placeholders dropped)."""
    line = re.sub(r"(^|\s)#.*", "", line)
    out = []
    for part in re.split(r";|&&|\|", line):
        m = re.search(r"(?:^|[\s(])(?:\S*/)?bayescrl\s+(.*)", part)
        if not m:
            continue
        try:
            tokens = shlex.split(m.group(1).replace("[", " ").replace("]", " "))
        except ValueError:
            tokens = m.group(1).split()
        out.append([t for t in tokens if t not in ("...", "…")])
    return out


def _doc_invocations() -> list[tuple[str, list[str]]]:
    found = []
    for page in _user_pages():
        for line in _code(page.read_text(encoding="utf-8")):
            found += [(page.name, toks) for toks in _invocations(line)]
    return found


def _options(cmd: click.Command) -> set[str]:
    return {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}


def test_docs_nav_pages_exist_and_every_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = _nav_pages(config["nav"])
    assert len(nav) >= 10
    missing = [p for p in nav if not (DOCS / p).is_file()]
    assert not missing, f"mkdocs.yml nav names missing pages: {missing}"
    orphans = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")} - set(nav)
    assert not orphans, f"pages not in the mkdocs.yml nav: {sorted(orphans)}"


def test_docs_and_readme_have_no_internal_wording():
    hits = [
        f"{page.relative_to(ROOT)}:{i}: {line.strip()}"
        for page in [*DOCS.rglob("*.md"), ROOT / "README.md"]
        for i, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if FORBIDDEN.search(line)
    ]
    assert not hits, "internal wording in the docs:\n" + "\n".join(hits)


def test_docs_reproduction_page_holds_the_differences_and_the_family_pages_link_to_it():
    text = (DOCS / "reproduction.md").read_text(encoding="utf-8")
    assert "## Differences from the thesis" in text
    for family in ("core", "warmpref", "pspl", "ecop", "acpo", "mopo", "prefrl"):
        page = (DOCS / f"{family}.md").read_text(encoding="utf-8")
        assert "reproduction.md" in page, f"docs/{family}.md does not link to the reproduction page"


def test_docs_every_bib_entry_is_on_the_references_page():
    keys = re.findall(r"^@\w+\{([^,]+),", (DOCS / "references.bib").read_text(encoding="utf-8"), re.M)
    page = (DOCS / "references.md").read_text(encoding="utf-8")
    assert len(keys) >= 20 and len(set(keys)) == len(keys)
    assert [k for k in keys if f'id="{k}"' not in page] == []


def test_docs_invocation_parser_reads_subcommands_flags_and_continuations():
    text = (
        "```bash\nbayescrl -q train --algo ecop \\\n    --cost-limit 10  # --nope\n"
        "x; bayescrl prefs export run\n```\n"
    )
    got = [toks for line in _code(text) for toks in _invocations(line)]
    assert got == [["-q", "train", "--algo", "ecop", "--cost-limit", "10"], ["prefs", "export", "run"]]
    assert _invocations("import bayescrl.envs") == [] and _invocations("pip install bayescrl[lm]") == []


@pytest.fixture(scope="module")
def doc_invocations():
    found = _doc_invocations()
    assert len(found) >= 30  # the docs do show commands
    return found


def test_docs_every_bayescrl_command_shown_is_a_real_subcommand_with_real_options(doc_invocations):
    ctx = click.Context(cli)
    bad = []
    for page, tokens in doc_invocations:
        tokens = [t for t in tokens if t not in GLOBAL_FLAGS]
        if not tokens or tokens[0] in ("--help", "-h", "--version"):
            continue
        name = tokens[0]
        if "/" in name:  # prose shorthand such as `bayescrl train/evaluate`
            bad += [f"{page}: bayescrl {n}: no sub-command" for n in name.split("/") if n not in COMMANDS]
            continue
        if name not in COMMANDS:
            bad.append(f"{page}: bayescrl {' '.join(tokens)}: no sub-command {name!r}")
            continue
        cmd = cli.get_command(ctx, name)
        rest = tokens[1:]
        if isinstance(cmd, click.Group) and rest and not rest[0].startswith("-"):
            sub = cmd.get_command(ctx, rest[0])
            if sub is None:
                bad.append(f"{page}: bayescrl {name} {rest[0]}: no such sub-command")
                continue
            cmd, rest = sub, rest[1:]
        opts = _options(cmd)
        for t in rest:
            flag = t.split("=", 1)[0]
            if flag.startswith("--") and flag not in opts:
                bad.append(f"{page}: bayescrl {name}: unknown option {flag}")
    assert not bad, "\n".join(bad)


def test_docs_every_test_named_in_the_docs_exists():
    """A difference from the thesis is pinned by a named test: the name must be a real test."""
    sources = list((ROOT / "tests").glob("test_*.py"))
    defined = {m for f in sources for m in re.findall(r"^\s*def (test_\w+)", f.read_text(), re.M)}
    files = {f.name for f in sources}
    named, missing = set(), []
    for page in DOCS.glob("*.md"):
        text = page.read_text(encoding="utf-8")
        for name in re.findall(r"`(?:tests/)?(test_\w+)(?:\[[^`]*\])?`", text):
            named.add(name)
            if name not in defined:
                missing.append(f"{page.name}: {name}")
        paths = re.findall(r"`tests/(test_\w+\.py)`", text)
        missing += [f"{page.name}: tests/{f}" for f in paths if f not in files]
    assert len(named) >= 10
    assert not missing, "tests named in the docs do not exist:\n" + "\n".join(missing)

"""``bayescrl examples list`` and ``bayescrl examples copy DIR``: the shipped example configs.

Wheels carry the repository's ``examples/`` folder as ``bayescrl/_examples`` (copied by ``setup.py`` at
build time); a source checkout or editable install reads ``examples/`` next to the package.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import click

from bayescrl.utils.checks import prepare_out
from bayescrl.utils.errors import ConfigError, DataError

log = logging.getLogger(__name__)
SUFFIXES = (".yaml", ".yml", ".json", ".jsonl", ".py", ".md")


def examples_root() -> Path:
    """The folder of shipped examples (installed copy first, then the source checkout's ``examples/``)."""
    pkg = Path(__file__).resolve().parents[1]  # the bayescrl package
    for cand in (pkg / "_examples", pkg.parent / "examples"):
        if cand.is_dir() and any(cand.iterdir()):
            return cand
    raise DataError("examples", str(pkg / "_examples"), "no examples shipped with this installation")


def list_examples(family: str | None = None) -> list[str]:
    """Relative paths (``family/file``) of the example files, sorted; ``family`` restricts to one folder."""
    root = examples_root()
    base = root
    if family is not None:
        families = sorted(p.name for p in root.iterdir() if p.is_dir())
        if family not in families:
            raise ConfigError("family", family, f"must be one of {', '.join(families)}")
        base = root / family
    return sorted(
        p.relative_to(root).as_posix()
        for p in base.rglob("*")
        if p.is_file() and p.suffix in SUFFIXES and "__pycache__" not in p.parts
    )


def copy_examples(dest: str | Path, family: str | None = None, force: bool = False) -> list[Path]:
    """Copy the examples (or one family's) to ``dest/<family>/...``; refuses to overwrite unless ``force``."""
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise ConfigError("DIR", str(dest), "exists and is not a folder")
    root = examples_root()
    files = list_examples(family)
    for f in files:  # a file standing where a family folder goes, or a folder where a file goes
        for parent in (dest / f).parents:
            if parent == dest:
                break
            if parent.exists() and not parent.is_dir():
                raise ConfigError("DIR", str(dest), f"cannot write {f}: {str(parent)!r} is a file")
        if (dest / f).is_dir():
            raise ConfigError("DIR", str(dest), f"cannot write {f}: a folder stands there")
    clash = [f for f in files if (dest / f).exists()]
    if clash and not force:
        raise ConfigError(
            "DIR", str(dest), f"already holds {clash[0]} (and {len(clash) - 1} more); use --force"
        )
    prepare_out(dest, "DIR")  # everything checked: made (or probed) now, so a read-only place is one line
    written = []
    for f in files:
        target = dest / f
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / f, target)
        written.append(target)
    return written


@click.group(name="examples")
def examples() -> None:
    """The example configs that reproduce the documentation's figures and tables."""


@examples.command(name="list")
@click.argument("family", required=False)
def list_cmd(family: str | None) -> None:
    """List the example files (optionally of one FAMILY: acpo, core, ecop, mopo, prefrl, pspl, warmpref)."""
    for f in list_examples(family):
        click.echo(f)


@examples.command(name="copy")
@click.argument("dest", type=click.Path(path_type=Path))
@click.option("--family", default=None, help="Copy only this family's folder.")
@click.option("--force", is_flag=True, help="Overwrite files that already exist in DEST.")
def copy_cmd(dest: Path, family: str | None, force: bool) -> None:
    """Copy the examples to DEST (DEST/<family>/<file>); run them from there, e.g. bayescrl pspl DEST/..."""
    written = copy_examples(dest, family, force)
    click.echo(f"copied {len(written)} example files to {dest}")

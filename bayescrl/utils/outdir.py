"""Output folders and files of every command: never written into silently.

A command that writes results takes ``--out`` (required: no silent default folder) and refuses an output
folder that already holds files, unless told: ``--resume`` where the command continues a run, otherwise
``--force`` (write into it; files of the same name are replaced, others are left alone). The refusal is
one line, ``error: --out = 'runs/x': already holds 3 files (results.json, ...); pass --force to write
into it``, before any work. :func:`written` turns the files a command wrote into its closing summary line.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from bayescrl.utils.checks import prepare_out, prepare_out_file
from bayescrl.utils.errors import ConfigError

__all__ = ["prepare_out_dir", "prepare_out_file_checked", "written"]


def _hint(resumable: bool) -> str:
    return (
        "pass --resume to continue it or --force to write into it"
        if resumable
        else ("pass --force to write into it")
    )


def prepare_out_dir(
    path: str | Path,
    *,
    force: bool = False,
    resume: bool = False,
    resumable: bool = False,
    field: str = "--out",
    create: bool = True,
) -> Path:
    """The output folder ``path``, checked before any work: no file at or above it (see
    :func:`~bayescrl.utils.checks.prepare_out`), and empty unless ``force`` or ``resume`` says to write
    into it. ``resumable`` says whether the command has ``--resume`` (named in the refusal). With
    ``create`` the folder is made."""
    path = Path(path)
    prepare_out(path, field, create=False)
    if path.is_dir() and not (force or resume):
        held = sorted(p.name for p in path.iterdir())
        if held:
            shown = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
            what = f"{len(held)} file{'s' if len(held) > 1 else ''}"
            raise ConfigError(field, str(path), f"already holds {what} ({shown}); {_hint(resumable)}")
    if create:
        prepare_out(path, field, create=True)
    return path


def prepare_out_file_checked(path: str | Path, *, force: bool = False, field: str = "--out") -> Path:
    """An output *file*: refused if it exists (unless ``force``), is a folder, or a file stands above it."""
    path = Path(path)
    if path.is_file() and not force:
        raise ConfigError(field, str(path), "already exists; pass --force to replace it")
    return prepare_out_file(path, field)


def written(
    out: str | Path, files: Iterable[str] = (), extra: str = "", others: Iterable[str | Path] = ()
) -> str:
    """The closing summary line of a command: ``wrote runs/x/: results.json, regret.png``.

    ``files`` are names inside ``out``; ``others`` are paths elsewhere (a video file); only the ones
    that exist are listed, each once. ``extra`` is appended (e.g. "and 3 cell folders")."""
    out = Path(out)
    names: list[str] = []
    for f in files:
        p = out / f
        name = f"{Path(f).as_posix()}{'/' if p.is_dir() else ''}"
        if p.exists() and name not in names:
            names.append(name)
    listed = ", ".join(names) if names else "nothing"
    line = f"wrote {out.as_posix().rstrip('/')}/: {listed}"
    more = [str(p) for p in others if Path(p).exists()]
    if more:
        line += f"; {', '.join(more)}"
    return line + (f" {extra}" if extra else "")

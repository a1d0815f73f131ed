"""Run logging: the ``bayescrl`` Python logger (``-q/-v``) and scalar logs (``--log-dir``, ``--wandb``).

``setup_logging(verbosity)`` points the ``bayescrl`` logger at stderr (INFO by default; ``-v`` DEBUG, ``-q``
WARNING, ``-qq`` ERROR). Final one-line results stay on stdout (``click.echo``); status lines go through
``logging.getLogger(__name__)`` in each module; ``-q`` also turns off progress bars and third-party
warnings (:func:`bayescrl.utils.quiet.set_quiet`), and the bars drawn through :func:`progress_enabled` (the
inference engines') hide under ``-q``.

:class:`RunLogger` writes TensorBoard scalars (``torch.utils.tensorboard.SummaryWriter``, needs the
``tensorboard`` package: ``pip install 'bayescrl[log]'``) and, when asked (``--wandb`` or
``$BAYESCRL_WANDB=1``) and ``wandb`` is importable, the same scalars to Weights & Biases. Every run gets
its own subfolder ``<log-dir>/<run name>_<n>`` (``n`` one above the highest of that name there, as
Stable-Baselines3 numbers its runs), so runs sharing ``--log-dir`` stay separate runs in TensorBoard.
Without a log directory it does nothing, so callers need no ``if``.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from bayescrl.utils.errors import ConfigError
from bayescrl.utils.quiet import set_quiet

LOGGER_NAME = "bayescrl"
_LEVELS = {-2: logging.ERROR, -1: logging.WARNING, 0: logging.INFO, 1: logging.DEBUG}


class _Format(logging.Formatter):
    """INFO lines bare (like the old prints); others prefixed ``warning:`` / ``error:`` / ``debug:``."""

    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        return msg if record.levelno == logging.INFO else f"{record.levelname.lower()}: {msg}"


class _StderrHandler(logging.StreamHandler):
    """Writes to the *current* ``sys.stderr`` (click's test runner and pytest swap it per call)."""

    def __init__(self):
        super().__init__()

    @property
    def stream(self):  # type: ignore[override]
        import sys

        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler.__init__ assigns it
        pass


def setup_logging(verbosity: int = 0) -> logging.Logger:
    """Set the ``bayescrl`` logger's level from ``verbosity`` (``-v`` count minus ``-q`` count)."""
    log = logging.getLogger(LOGGER_NAME)
    log.setLevel(_LEVELS[max(-2, min(1, int(verbosity)))])
    if not any(isinstance(h, _StderrHandler) for h in log.handlers):
        handler = _StderrHandler()
        handler.setFormatter(_Format())
        log.addHandler(handler)
    log.propagate = False
    set_quiet(int(verbosity) < 0)
    return log


def progress_enabled(progress: bool = True) -> bool:
    """Whether to draw a progress bar: ``progress`` asked for, and the ``bayescrl`` logger not set above
    INFO (``bayescrl -q``; a library user who never set its level gets what ``progress`` says)."""
    level = logging.getLogger(LOGGER_NAME).level
    return bool(progress) and (level == logging.NOTSET or level <= logging.INFO)


def _wandb_requested(flag: bool | None) -> bool:
    if flag is not None:
        return bool(flag)
    return os.environ.get("BAYESCRL_WANDB", "").strip().lower() in ("1", "true", "yes", "on")


def next_run_dir(root: str | Path, run_name: str) -> Path:
    """Create and return ``root/<run_name>_<n>``, ``n`` one above the highest existing ``<run_name>_<k>``
    (1 for the first; Stable-Baselines3's numbering). The folder is claimed with an exclusive ``mkdir``,
    so two runs starting together never share one."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", str(run_name)).strip("-.") or "run"
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    pat = re.compile(re.escape(name) + r"_(\d+)")
    taken = [int(m.group(1)) for p in root.iterdir() if (m := pat.fullmatch(p.name))]
    n = max(taken, default=0) + 1
    while True:
        try:
            (root / f"{name}_{n}").mkdir()
            return root / f"{name}_{n}"
        except FileExistsError:
            n += 1


class RunLogger:
    """TensorBoard (and optional W&B) scalars in a new run folder under ``log_dir``
    (:func:`next_run_dir`, ``run_dir``); a no-op when ``log_dir`` is None.

    ``run_name`` names the run folder; by default the output folder's name, taken from ``name``
    (``"family:<out folder>"``, the W&B run name the commands pass).

    ``scalar(tag, value, step)``, ``scalars({tag: value}, step, prefix=)`` and ``curve(tag, values,
    steps=)`` write; ``log_results(results)`` writes every number (step 0) and number list (one point per
    entry, x from a sibling ``steps`` list when it has the same length) of a results mapping.
    """

    def __init__(
        self,
        log_dir: str | Path | None,
        wandb: bool | None = None,
        config: Mapping[str, Any] | None = None,
        name: str | None = None,
        run_name: str | None = None,
    ):
        self.log_dir = None if log_dir is None else Path(log_dir)
        self.run_dir: Path | None = None
        self.writer = None
        self.wandb_run = None
        if self.log_dir is None:
            if wandb:
                raise ConfigError("--wandb", True, "needs --log-dir DIR (the run's log folder)")
            return
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ConfigError(
                "--log-dir",
                str(self.log_dir),
                "needs the tensorboard package: pip install 'bayescrl[log]'",
            ) from None
        if self.log_dir.exists() and not self.log_dir.is_dir():
            raise ConfigError("--log-dir", str(self.log_dir), "exists and is not a folder")
        if run_name is None:
            run_name = Path(name.split(":", 1)[-1]).name if name else "run"
        self.run_dir = next_run_dir(self.log_dir, run_name)
        self.writer = SummaryWriter(log_dir=str(self.run_dir))
        if _wandb_requested(wandb):
            try:
                import wandb as _wandb
            except ImportError:
                if wandb:  # asked on the command line: say so; from the env var: a warning
                    raise ConfigError("--wandb", True, "needs the wandb package: pip install wandb") from None
                logging.getLogger(__name__).warning("BAYESCRL_WANDB is set but wandb is not installed")
            else:
                self.wandb_run = _wandb.init(
                    project=os.environ.get("WANDB_PROJECT", "bayescrl"),
                    name=name,
                    dir=str(self.run_dir),
                    config=dict(config or {}),
                    reinit=True,
                )
        logging.getLogger(__name__).info(
            "logging scalars to %s (tensorboard --logdir %s)", self.run_dir, self.log_dir
        )

    @property
    def active(self) -> bool:
        return self.writer is not None

    def scalar(self, tag: str, value: Any, step: int = 0) -> None:
        if self.writer is None or not _is_number(value):
            return
        v = float(value)
        self.writer.add_scalar(tag, v, int(step))
        if self.wandb_run is not None:
            self.wandb_run.log({tag: v}, step=int(step))

    def scalars(self, values: Mapping[str, Any], step: int, prefix: str = "") -> None:
        """Every number of ``values`` (lists of numbers as ``tag/i``) at ``step``."""
        for k, v in values.items():
            tag = f"{prefix}{k}"
            if _is_number(v):
                self.scalar(tag, v, step)
            elif isinstance(v, (list, tuple)) and v and all(_is_number(x) for x in v):
                for i, x in enumerate(v):
                    self.scalar(f"{tag}/{i}", x, step)

    def curve(self, tag: str, values: Iterable[Any], steps: Iterable[int] | None = None) -> None:
        values = list(values)
        xs = list(range(1, len(values) + 1)) if steps is None else [int(s) for s in steps]
        for x, v in zip(xs, values, strict=False):
            self.scalar(tag, v, x)

    def log_results(self, results: Mapping[str, Any], prefix: str = "") -> None:
        """Write the numbers and number lists of a (nested) results mapping."""
        if self.writer is None:
            return
        steps = results.get("steps")
        for k, v in results.items():
            tag = f"{prefix}{k}"
            if isinstance(v, Mapping):
                self.log_results(v, prefix=f"{tag}/")
            elif _is_number(v):
                self.scalar(tag, v, 0)
            elif isinstance(v, (list, tuple)) and v and all(_is_number(x) for x in v) and k != "steps":
                xs = steps if isinstance(steps, (list, tuple)) and len(steps) == len(v) else None
                self.curve(tag, v, xs)
            elif isinstance(v, (list, tuple)) and v and all(isinstance(x, Mapping) for x in v):
                for i, x in enumerate(v):
                    self.log_results(x, prefix=f"{tag}/{i}/")
        self.flush()

    def callback(self, prefix: str = "train/", step_key: str = "env_steps") -> Callable[[Any, dict], None]:
        """A ``learn(callback=)`` hook writing each iteration's record at its env step."""

        def _cb(_agent, record: dict) -> None:
            self.scalars(record, int(record.get(step_key, 0)), prefix=prefix)

        return _cb

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self.wandb_run is not None:
            self.wandb_run.finish()
            self.wandb_run = None

    def __enter__(self) -> RunLogger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _is_number(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    try:
        import numpy as np

        if isinstance(v, np.ndarray) and v.ndim == 0:
            v = v.item()
        if isinstance(v, np.generic):
            v = v.item()
    except ImportError:  # pragma: no cover
        pass
    return isinstance(v, (int, float)) and math.isfinite(float(v))

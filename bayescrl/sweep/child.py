"""One run of a sweep, in its own process: ``python -m bayescrl.sweep.child PID __run__ COMMAND PARAMS``
calls the command's sweep adapter (:attr:`~bayescrl.commands.sweepable.SweepAdapter.call`: its checks and
library call, no click parsing) with the run's parameters (JSON), so the run writes what ``bayescrl
COMMAND ...`` with the run's command line writes; ``... __call__ TARGET JOB RESULT`` is a function call of
a ``command: call`` sweep. The process dies with the worker that started it (Linux ``PR_SET_PDEATHSIG``):
a lost Ray worker never leaves an orphan run writing into the folder its retry resumes from."""

from __future__ import annotations

import json
import os
import signal
import sys

import click

from bayescrl.sweep.spec import ADAPTERS
from bayescrl.sweep.target import CALL, RUN, run_call
from bayescrl.utils.errors import BayesCRLError
from bayescrl.utils.runlog import setup_logging

PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent exits (a no-op off Linux)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(137)


def run_command(command: str, params: str) -> None:
    """``COMMAND``'s adapter called with ``params`` (its parameters, JSON text) as ``bayescrl COMMAND``
    runs it: status lines through logging as the CLI sets it up; a user error (``BayesCRLError``) is one
    line ``error: ...`` on stderr and exit status 2, which the runner does not retry."""
    setup_logging(0)
    try:
        ADAPTERS[command].call(json.loads(params))
    except BayesCRLError as exc:
        text = "; ".join(ln.strip() for ln in str(exc).splitlines() if ln.strip())  # always one line
        click.echo(f"error: {text}", err=True)
        sys.exit(2)


def dispatch(argv: list[str]) -> None:
    """One run: ``__run__ COMMAND PARAMS`` (:func:`run_command`) or ``__call__ TARGET JOB RESULT``
    (:func:`~bayescrl.sweep.target.run_call`)."""
    if argv and argv[0] == RUN:
        run_command(*argv[1:])
    elif argv and argv[0] == CALL:
        run_call(*argv[1:])
    else:
        raise ValueError(f"not a sweep run: {argv[:2]} (expected {RUN} or {CALL})")


if __name__ == "__main__":
    die_with_parent(int(sys.argv[1]))
    dispatch(sys.argv[2:])

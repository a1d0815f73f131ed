"""One run of a sweep: ``python -m bayescrl.sweep.child PARENT_PID COMMAND ARGS...`` is ``bayescrl COMMAND
ARGS...`` (the same entry point, so the run writes what the single command writes) in a process that dies
with the worker that started it (Linux ``PR_SET_PDEATHSIG``): a lost Ray worker never leaves an orphan run
writing into the folder its retry resumes from."""

from __future__ import annotations

import os
import signal
import sys

from bayescrl.cli import main
from bayescrl.sweep.target import CALL, run_call

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


def dispatch(argv: list[str]) -> None:
    """``bayescrl ARGV``, or a function call of :mod:`bayescrl.sweep.calls` (``__call__ TARGET JOB OUT``)."""
    if argv and argv[0] == CALL:
        run_call(*argv[1:])
        return
    main(argv)


if __name__ == "__main__":
    die_with_parent(int(sys.argv[1]))
    dispatch(sys.argv[2:])

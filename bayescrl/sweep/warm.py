"""Warm start of a sweep's run processes: a fork server with the heavy imports done once.

A run is a command's library call (:func:`bayescrl.sweep.child.dispatch`) in its own process. Started
from scratch, each such process spends seconds importing torch, gymnasium and matplotlib, and building its
first optimiser (torch imports its compiler stack, ``torch._dynamo``, on the first ``torch.optim``
construction) -- more than a short run's training. :func:`launch` instead forks the run from a
``multiprocessing`` fork server whose process has imported those modules once (:data:`PRELOAD`); the run
then makes the same call in a fresh child, so its outputs are those of a fresh process.
The fork server dies with the process that started it (the sweep, or a Ray worker), and each run with
the fork server (``PR_SET_PDEATHSIG``), so a killed sweep or lost worker leaves no run behind.
Off Linux (no fork server), or with ``BAYESCRL_SWEEP_WARM=0``, runs are plain subprocesses.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import subprocess
import sys
import threading

from bayescrl.sweep.child import die_with_parent, dispatch

#: modules the fork server imports once (what most runs import first)
PRELOAD = (
    "torch",
    "torch._dynamo",  # imported by the first torch.optim optimiser: seconds per process otherwise
    "numpy",
    "gymnasium",
    "matplotlib.pyplot",
    "bayescrl.sweep.spec",
    "bayescrl.commands.train",
    "bayescrl.envs",
)
_lock = threading.Lock()
_ctx: mp.context.BaseContext | None = None
# multiprocessing reads a forked child's exit status from its pipe in Process.join() *and* in every
# Process.start() (``process._cleanup`` polls all children); two threads reading the same pipe at once
# leave one with EOF (exit status 255 for a run that succeeded). Starts and status reads hold this lock.
_proc_lock = threading.Lock()


def preload() -> None:
    """Import :data:`PRELOAD` (in the fork server; a module that fails to import is skipped)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an optional extra missing: the run imports what it needs
            pass


def enabled() -> bool:
    return os.environ.get("BAYESCRL_SWEEP_WARM", "1") != "0" and "forkserver" in mp.get_all_start_methods()


def _context() -> mp.context.BaseContext:
    global _ctx
    with _lock:
        if _ctx is None:
            ctx = mp.get_context("forkserver")
            ctx.set_forkserver_preload(["bayescrl.sweep.warm_preload"])
            _ctx = ctx
    return _ctx


def _release_fork_server() -> None:
    """Close this run's copy of the fork server's "alive" pipe.

    multiprocessing hands every forked child the pipe's write end; the fork server exits only when all
    copies are closed, so while runs held it, a sweep killed by SIGTERM/SIGKILL left the fork server and
    its runs computing on (until they finished). Without the copies, the fork server exits with the
    sweep and the kernel then kills each run (``PR_SET_PDEATHSIG``). A run never uses the fork server.
    """
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
        server._forkserver_alive_fd = None


def _child(argv: list[str], log: str, cwd: str, env: dict[str, str]) -> None:
    """In the forked run process: die with the fork server, append output to the log, make the run."""
    die_with_parent(os.getppid())
    _release_fork_server()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - the run's stdin for its lifetime
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=True)
    sys.argv = ["bayescrl", *argv]
    # multiprocessing forced this child's default start method to "forkserver"; a fresh process has the
    # platform's default (fork on Linux): AsyncVectorEnv workers started from the fork server's fresh
    # interpreter would not find bayescrl's registered envs
    mp.set_start_method(None, force=True)
    try:
        dispatch(argv)
    finally:  # the fork server ends its child with os._exit: run the exit handlers a normal exit runs
        import atexit  # (weakref.finalize at exit -- SUMO handles --, logging.shutdown, ...)

        atexit._run_exitfuncs()


class _Run:
    """A forked run: ``pid`` and ``wait()`` -> exit status (negative: killed by that signal)."""

    def __init__(self, proc):
        self._proc = proc
        self.pid = proc.pid

    def wait(self) -> int:
        from multiprocessing.connection import wait

        wait([self._proc.sentinel])  # until the run has exited (nothing read yet)
        with _proc_lock:
            self._proc.join()
        return self._proc.exitcode


def launch(argv: list[str], log: str, cwd: str, env: dict[str, str]):
    """Start the run ``ARGV`` (:func:`bayescrl.sweep.child.dispatch`: ``__run__ COMMAND PARAMS`` or
    ``__call__ TARGET JOB RESULT``) appending its output to the file ``log``; returns an object with
    ``pid`` and ``wait()`` (the exit status; negative: killed by that signal)."""
    if not enabled():
        with open(log, "a") as fh:
            return subprocess.Popen(
                [sys.executable, "-m", "bayescrl.sweep.child", str(os.getpid()), *argv],
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cwd,
                env=env,
            )
    proc = _context().Process(target=_child, args=(argv, log, cwd, env), daemon=False)
    with _proc_lock:
        proc.start()
    return _Run(proc)

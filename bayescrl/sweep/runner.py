"""Running a sweep's runs: on Ray (a local instance or a cluster) or, without Ray, on a local process pool.

Every run is its command's library call (the command's sweep adapter, with the parameters of the run's
command line) in its own process (forked from a warm fork server, or ``python -m bayescrl.sweep.child``:
:mod:`bayescrl.sweep.warm`), so its ``DIR/<run-id>/`` holds exactly what that command line writes; the
sweep adds ``DIR/sweep.json`` (the
manifest: the file's hash and the runs), ``DIR/status/<run-id>.json`` (state, attempts, wall time) and
``DIR/logs/<run-id>.log`` (the run's stdout/stderr). A run is finished when its status says ``done`` and
its result file exists; anything else is started again -- ``train`` from its last checkpoint
(``--resume``, exact: same numbers as an uninterrupted run), the other commands from scratch. A run whose
process is killed is retried, and a lost Ray worker's task is retried by Ray and resumes the same way:
``1 + --retries`` attempts per run in all.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from bayescrl.sweep.report import MANIFEST, run_done
from bayescrl.sweep.spec import Run, SweepSpec
from bayescrl.sweep.target import RUN
from bayescrl.sweep.warm import launch
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import load_json, write_json

_log = logging.getLogger(__name__)
_STOP = threading.Event()  # set on Ctrl-C: no retries, no new runs
BACKENDS = ("auto", "ray", "local")


# ------------------------------------------------------------------------------------------ one run
def execute_run(task: dict[str, Any]) -> dict[str, Any]:
    """Run one grid point to completion (worker side; also the body of the Ray task).

    Starts the command, or resumes it from its checkpoint when the run folder holds one and the command
    can resume (``train``; ``mopo`` in lm mode); restarts a run whose process died (killed, crashed) until
    it has had ``task["max_attempts"]`` attempts in this sweep session. The count lives in the run's status
    file, so a Ray retry of this function (its worker was lost) continues it: Ray's retries and these
    restarts together never exceed the ``--retries`` the user gave. Exit status 2 (a user error the command
    reported) is not retried."""
    out, status_path, log_path = Path(task["out"]), Path(task["status"]), Path(task["log"])
    log_path.parent.mkdir(parents=True, exist_ok=True)
    attempts = _attempts(status_path)
    t0, rc, resumed = time.time(), None, False
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(key, "1")
    while attempts < int(task["max_attempts"]):
        if _STOP.is_set():
            break
        attempts += 1
        resumed = bool(task["resume_call"]) and (out / str(task["checkpoint"])).exists()
        if resumed:
            argv, call = task["resume_argv"], task["resume_call"]
        else:
            if out.exists():
                shutil.rmtree(out)  # a partial run that cannot resume: start it again
            argv, call = task["argv"], task["call"]
        with open(log_path, "a") as fh:
            how = "resume from checkpoint" if resumed else "start"
            fh.write(f"# attempt {attempts} on {socket.gethostname()} ({how}): bayescrl {shlex.join(argv)}\n")
        proc = launch(call, str(log_path), task["cwd"], env)
        state = {"status": "running", "pid": proc.pid, "worker_pid": os.getpid(), "attempts": attempts}
        write_json(status_path, {**state, "host": socket.gethostname(), "resumed": resumed})
        rc = proc.wait()
        if rc == 0 and (out / task["result"]).exists():
            rec = {
                "status": "done",
                "attempts": attempts,
                "resumed": resumed,
                "wall_s": time.time() - t0,
                "argv": argv,
            }
            write_json(status_path, rec)
            return {"id": task["id"], **rec}
        if rc == 2:
            break
    error = _last_line(log_path) if rc is not None else f"no attempts left ({attempts} made)"
    rec = {"status": "failed", "returncode": rc, "attempts": attempts, "error": error}
    write_json(status_path, rec)
    return {"id": task["id"], **rec, "wall_s": time.time() - t0}


def _attempts(status_path: Path) -> int:
    """Attempts made so far (the run's status file; 0 when it has none)."""
    try:
        return int(load_json(status_path, kind=dict).get("attempts", 0))
    except (ValueError, TypeError):
        return 0


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


# ------------------------------------------------------------------------------------------ the folder
def prepare_dir(out: Path, spec: SweepSpec, runs: list[Run], sweep_file: str | None) -> dict:
    """Create or re-open the sweep folder; a folder holding another sweep (or other files) is refused."""
    check_dir(out, spec)
    manifest = {
        "format": 1,
        "hash": spec.hash,
        "sweep_file": str(Path(sweep_file).resolve()) if sweep_file else None,
        "command": spec.command,
        "spec": spec.raw,
        "runs": [{"id": r.id, "point": r.point, "argv": r.argv} for r in runs],
    }
    write_json(out / MANIFEST, manifest)  # re-written on resume: `reference`/`report` edits are picked up
    return manifest


def check_dir(out: Path, spec: SweepSpec) -> None:
    """Refuse a folder holding another sweep (or other files); writes nothing."""
    path = out / MANIFEST
    if path.exists():
        fix = "restore it from a copy, or give a new --out"
        old = load_json(path, MANIFEST, kind=dict, recover=fix)
        if old.get("hash") != spec.hash:
            raise ConfigError(
                "--out",
                str(out),
                f"holds a different sweep ({old.get('sweep_file')}, hash {old.get('hash')}; this one is "
                f"{spec.hash}); give another --out, or the same sweep file to resume it",
            )
    elif out.exists() and any(out.iterdir()):
        raise ConfigError("--out", str(out), f"is not empty and holds no {MANIFEST}; give a new folder")


def _task(run: Run, out: Path, spec: SweepSpec, retries: int) -> dict[str, Any]:
    """The runner's task of one run: ``call`` (``resume_call``) is what its process executes, the command's
    adapter with the run's parameters; ``argv`` (``resume_argv``) the equivalent command line, for its log."""
    status = (out / "status" / f"{run.id}.json").resolve()
    if spec.command == "call":  # the run's argv is what its process executes: __call__ TARGET JOB RESULT
        call, resume = run.argv, None
    else:
        call = [RUN, spec.command, json.dumps(run.params)]
        resume = None if run.resume_params is None else [RUN, spec.command, json.dumps(run.resume_params)]
    return {
        "id": run.id,
        "argv": run.argv,
        "resume_argv": run.resume_argv,
        "call": call,
        "resume_call": resume,
        "out": str(run.out),
        "result": spec.adapter.result,
        "checkpoint": spec.adapter.checkpoint,
        "status": str(status),
        "log": str((out / "logs" / f"{run.id}.log").resolve()),
        "cwd": os.getcwd(),
        # this session's budget: 1 + retries attempts on top of those an earlier (killed) session made
        "max_attempts": _attempts(status) + 1 + retries,
    }


# ------------------------------------------------------------------------------------------ backends
def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_backend(backend: str, address: str | None) -> str:
    """``auto``: Ray when installed, else the local pool; ``--address`` needs Ray (refused otherwise)."""
    if backend not in BACKENDS:
        raise ConfigError("--backend", backend, f"must be one of {', '.join(BACKENDS)}")
    if address is not None and backend == "local":
        raise ConfigError("--address", address, "needs the Ray backend (drop --backend local)")
    if backend == "ray" or address is not None:
        if not ray_available():
            field, value = ("--address", address) if address is not None else ("--backend", backend)
            raise ConfigError(field, value, "needs Ray: pip install 'bayescrl[scale]'")
        return "ray"
    if backend == "auto":
        return "ray" if ray_available() else "local"
    return backend


def check_address(address: str, timeout: float = 5.0) -> None:
    """Refuse an unreachable ``ray://host:port`` / ``host:port`` in one line before anything starts."""
    if address == "auto":
        return
    url = urlparse(address if "://" in address else f"ray-gcs://{address}")
    if url.scheme not in ("ray", "ray-gcs") or not url.hostname or url.port is None:
        raise ConfigError("--address", address, "expected ray://HOST:PORT, HOST:PORT or auto")
    try:
        with socket.create_connection((url.hostname, url.port), timeout=timeout):
            pass
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise ConfigError("--address", address, f"cannot reach {url.hostname}:{url.port} ({why})") from None


def local_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def run_local(tasks: list[dict], workers: int, on_done: Callable[[dict], None]) -> None:
    """Without Ray: ``workers`` runs at a time, each its own process (a thread waits on each)."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="sweep")
    try:
        futures = [pool.submit(execute_run, t) for t in tasks]
        for fut in as_completed(futures):
            on_done(fut.result())
    except KeyboardInterrupt:
        _STOP.set()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def run_ray(
    tasks: list[dict], workers: int | None, address: str | None, retries: int, on_done: Callable[[dict], None]
) -> None:
    """Ray Core tasks (one CPU each; at most ``workers`` in flight). Without ``address`` a local Ray
    instance with ``workers`` CPUs is started and stopped here; a worker lost mid-run is retried by Ray
    (``max_retries``) and its run resumes from its checkpoint. Ray's retries draw on the run's attempt
    budget (:func:`execute_run`), so a run gets ``1 + retries`` attempts in all, not ``(1 + retries)²``."""
    import ray

    kw: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
    try:
        if address is None:
            ray.init(address="local", num_cpus=workers, include_dashboard=False, **kw)
        else:
            ray.init(address=address, **kw)
    except Exception as exc:  # ConnectionError, RuntimeError, grpc errors: one line
        text = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise ConfigError("--address", address or "local", f"cannot start/connect to Ray: {text}") from None
    try:
        if workers is None:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        remote = ray.remote(num_cpus=1, max_retries=retries)(execute_run)
        queue, pending = list(tasks), {}
        while queue or pending:
            while queue and len(pending) < workers:
                task = queue.pop(0)
                pending[remote.remote(task)] = task
            ready, _ = ray.wait(list(pending), num_returns=1)
            task = pending.pop(ready[0])
            try:
                rec = ray.get(ready[0])
            except ray.exceptions.RayError as exc:  # retries exhausted (worker lost each time)
                rec = {"id": task["id"], "status": "failed", "error": " ".join(str(exc).split())[:300]}
            on_done(rec)
    finally:
        ray.shutdown()


def run_all(
    spec: SweepSpec,
    runs: list[Run],
    out: Path,
    *,
    backend: str,
    workers: int | None,
    address: str | None,
    retries: int,
    on_done: Callable[[dict], None],
) -> list[Run]:
    """Run every unfinished run; returns the runs that were already finished (skipped)."""
    done = [r for r in runs if run_done(out, r.id, spec.adapter.result)]
    todo = [r for r in runs if r not in done]
    if not todo:
        return done
    tasks = [_task(r, out, spec, retries) for r in todo]
    _STOP.clear()
    if backend == "ray":
        local_workers = workers if workers is not None else (None if address else local_cpus())
        run_ray(tasks, local_workers, address, retries, on_done)
    else:
        run_local(tasks, workers or local_cpus(), on_done)
    return done

"""Grids of Python function calls on the sweep engine: what the benchmark scripts' runs go through.

``map_calls("benchmarks/acpo_common.py:run_one", jobs, workers=4)`` runs ``run_one(job)`` for every
JSON-able ``job`` dict, each in its own process started by the sweep's runner
(:func:`bayescrl.sweep.runner.execute_run`: forked from the warm fork server, with a status file, a log
and retries; on a local process pool or on Ray), and returns the results (JSON-able dicts) in job order.
Each call is seeded by its own job, so its result does not depend on which other jobs share a worker.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from bayescrl.sweep import runner
from bayescrl.sweep.target import CALL, RESULT, resolve, run_call
from bayescrl.utils.io import write_json

__all__ = ["CALL", "RESULT", "map_calls", "resolve", "run_call"]


def _task(target: str, rid: str, job: dict, work: Path, retries: int) -> dict:
    """Write ``job`` to ``work/jobs/<rid>.json``; the runner's task that calls ``target`` on it (result:
    ``work/<rid>/result.json``, status and log under ``work``)."""
    job_path, out = work / "jobs" / f"{rid}.json", work / rid
    write_json(job_path, job)
    status = work / "status" / f"{rid}.json"
    argv = [CALL, target, str(job_path), str(out / RESULT)]
    return {
        "id": rid,
        "argv": argv,
        "resume_argv": None,
        "call": argv,
        "resume_call": None,
        "out": str(out),
        "result": RESULT,
        "checkpoint": None,
        "status": str(status),
        "log": str(work / "logs" / f"{rid}.log"),
        "cwd": os.getcwd(),
        # 1 + retries attempts in this call, on top of those a call in the same workdir made
        "max_attempts": runner._attempts(status) + 1 + retries,
    }


def map_calls(
    target: str,
    jobs: list[dict],
    *,
    workers: int,
    backend: str = "local",
    retries: int = 0,
    ids: list[str] | None = None,
    workdir: str | Path | None = None,
    on_done: Callable[[dict, dict], None] | None = None,
) -> list[dict]:
    """``[FUNCTION(job) for job in jobs]``, ``workers`` at a time, each call in its own process.

    ``on_done(job, result)`` is called as each finishes (completion order). ``workdir`` holds the jobs,
    results, status files and logs (default: a temporary folder, removed when every call succeeded).
    A call that fails (after ``retries`` restarts) raises ``RuntimeError`` naming its log, once the
    others have finished. The calling script needs the ``if __name__ == "__main__":`` guard around its
    top-level code: a run forked from the fork server first imports the caller's main module, as with
    multiprocessing's forkserver and spawn start methods (without the guard every call fails).
    """
    ids = _job_ids(ids, jobs)
    temp = workdir is None
    work = Path(tempfile.mkdtemp(prefix="bayescrl-calls-") if temp else workdir).resolve()
    (work / "jobs").mkdir(parents=True, exist_ok=True)
    tasks = [_task(target, rid, job, work, retries) for rid, job in zip(ids, jobs, strict=True)]
    by_id = dict(zip(ids, jobs, strict=True))
    results, failed = _run_tasks(tasks, work, by_id, workers, backend, retries, on_done)
    if failed:
        first = failed[0]
        raise RuntimeError(
            f"{len(failed)} of {len(jobs)} call(s) of {target} failed; {first['id']}: {first.get('error')} "
            f"(log: {work / 'logs' / (first['id'] + '.log')})"
        )
    if temp:
        shutil.rmtree(work, ignore_errors=True)
    return [results[rid] for rid in ids]


def _job_ids(ids: list[str] | None, jobs: list[dict]) -> list[str]:
    """The jobs' ids (default ``job0000``, ``job0001``, ...), checked: unique, one per job."""
    if ids is None:
        ids = [f"job{i:04d}" for i in range(len(jobs))]
    if len(set(ids)) != len(ids) or len(ids) != len(jobs):
        raise ValueError("ids must be unique, one per job")
    return ids


def _run_tasks(
    tasks: list[dict],
    work: Path,
    by_id: dict[str, dict],
    workers: int,
    backend: str,
    retries: int,
    on_done: Callable[[dict, dict], None] | None,
) -> tuple[dict[str, dict], list[dict]]:
    """Run the tasks on the local pool or Ray; the results of those that succeeded (by id, each passed to
    ``on_done(job, result)`` as it finishes) and the records of those that failed."""
    results: dict[str, dict] = {}
    failed: list[dict] = []

    def done(rec: dict) -> None:
        if rec["status"] != "done":
            failed.append(rec)
            return
        result = json.loads((work / rec["id"] / RESULT).read_text())
        results[rec["id"]] = result
        if on_done is not None:
            on_done(by_id[rec["id"]], result)

    if backend == "ray":
        runner.run_ray(tasks, workers, None, retries, done)
    else:
        runner.run_local(tasks, workers, done)
    return results, failed

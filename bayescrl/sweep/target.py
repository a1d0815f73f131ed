"""What a run of ``command: call`` executes, and nothing else (a leaf of the sweep package).

``python -m bayescrl.sweep.child PARENT_PID __call__ TARGET JOB RESULT`` calls :func:`run_call`; the sweep
file's validation resolves the target with :func:`resolve`; :func:`bayescrl.sweep.calls.map_calls` builds
such runs. Kept apart so that the runner, the spec and the child process share it without an import cycle.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bayescrl.utils.io import write_json
from bayescrl.utils.seeding import set_torch_threads

CALL = "__call__"  #: first argv item of a run that is a function call (``command: call``)
RUN = "__run__"  #: first argv item of a run of a command: ``__run__ COMMAND PARAMS`` (its sweep adapter)
RESULT = "result.json"


def resolve(target: str) -> Callable[[dict], Any]:
    """``path/to/file.py:func`` (the file's folder goes on ``sys.path``, for its sibling imports) or
    ``package.module:func``."""
    where, _, name = target.rpartition(":")
    if not where or not name:
        raise ValueError(f"call target {target!r}: expected FILE.py:FUNCTION or MODULE:FUNCTION")
    if where.endswith(".py"):
        path = Path(where).resolve()
        sys.path.insert(0, str(path.parent))
        modname = f"_sweep_call_{path.stem}"
        if modname in sys.modules and getattr(sys.modules[modname], "__file__", None) == str(path):
            module = sys.modules[modname]
        else:
            spec = importlib.util.spec_from_file_location(modname, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[modname] = module  # registered: validate_job and pickling find it
            spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    return getattr(module, name)


def run_call(target: str, job_path: str, result_path: str) -> None:  # job_path: a file or the JSON
    """In the run's process: ``result = FUNCTION(job)`` written to ``result_path``. Torch runs one thread
    (or ``$BAYESCRL_THREADS``) as in every command: set here when torch is loaded (the warm fork server),
    else by the run's ``OMP_NUM_THREADS=1`` when the function imports it."""
    if "torch" in sys.modules:
        set_torch_threads()
    fn = resolve(target)
    job = (
        json.loads(job_path) if job_path.lstrip().startswith("{") else json.loads(Path(job_path).read_text())
    )
    result = fn(job)
    Path(result_path).parent.mkdir(parents=True, exist_ok=True)
    write_json(result_path, result)

"""Run an MJX check in a child process: JAX starts threads, and a pytest worker that imported it would
later fork (gymnasium's ``AsyncVectorEnv`` in other tests) with those threads held, which may deadlock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def run_isolated(module: str, func: str, timeout: float = 280) -> object:
    """``tests/<module>.py``'s ``func()`` in a fresh interpreter (its JSON result); its assertion errors
    fail the calling test with the child's traceback."""
    code = (
        "import json, sys, torch; torch.set_num_threads(1); "
        f"sys.path.insert(0, {str(TESTS)!r}); import {module} as m; "
        f"print('RESULT' + json.dumps(m.{func}()))"
    )
    path = os.pathsep.join(p for p in (str(TESTS.parent), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    assert r.returncode == 0, f"{module}.{func} failed:\n{r.stderr[-4000:]}"
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")]
    return json.loads(lines[-1][len("RESULT") :])

"""SUMO plumbing shared by the traffic tasks: locating SUMO, one simulation handle, constraint timers.

* SUMO comes from the ``eclipse-sumo`` wheel (``pip install 'bayescrl[traffic]'``); ``SUMO_HOME`` is set
  from it when unset. A missing SUMO raises one :class:`ConfigError` naming the extra.
* :class:`SumoSim` runs one simulation through ``libsumo`` (in-process, no sockets) or ``traci`` (a
  ``sumo`` child process on a free port). libsumo allows one simulation per process, so ``"auto"`` gives it
  to a traffic env only when it is the only open one in its process; when several are open (the copies of
  a ``SyncVectorEnv``, a ``deepcopy``), every one of them runs on traci, so copies of one env share a
  backend. ``AsyncVectorEnv`` gives every env its own process and thus libsumo. Every simulation is closed by
  ``close()``, by garbage collection (``weakref.finalize``) and at interpreter exit: no ``sumo`` process
  outlives its env.
* :class:`OverTimeCounter` is the cost of both tasks: for each key (an approach of a light, a human
  vehicle) the time a condition has held without interruption, and the seconds spent beyond a threshold.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import shutil
import subprocess
import tempfile
import weakref
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any

from bayescrl.utils.errors import ConfigError

EXTRA_HINT = "SUMO is not installed: pip install 'bayescrl[traffic]' (eclipse-sumo, libsumo, traci, sumolib)"
_libsumo_owner: int | None = None  # id() of the SumoSim holding this process's libsumo slot
_open: weakref.WeakSet[SumoSim] = weakref.WeakSet()  # constructed and not closed, in this process
_labels = itertools.count()


def sumo_home(env_id: str = "traffic") -> str:
    """``SUMO_HOME`` (from the ``eclipse-sumo`` wheel when unset); ConfigError naming the extra if absent."""
    home = os.environ.get("SUMO_HOME")
    if not home or not Path(home, "bin").is_dir():
        try:
            import sumo  # the eclipse-sumo wheel
        except ImportError as exc:
            raise ConfigError("env", env_id, EXTRA_HINT) from exc
        home = sumo.SUMO_HOME
        os.environ["SUMO_HOME"] = home
    try:
        import sumolib  # noqa: F401
        import traci  # noqa: F401
    except ImportError as exc:
        raise ConfigError("env", env_id, EXTRA_HINT) from exc
    return home


def binary(name: str, env_id: str = "traffic") -> str:
    """Path of a SUMO executable (``sumo``, ``netconvert``)."""
    path = Path(sumo_home(env_id), "bin", name)
    if not path.exists():
        found = shutil.which(name)
        if found is None:
            raise ConfigError("env", env_id, f"{name} not found; {EXTRA_HINT}")
        return found
    return str(path)


def _import_libsumo():
    """The ``libsumo`` module, or None when absent or built for another SUMO than the installed one."""
    from importlib import metadata

    try:
        if metadata.version("libsumo") != metadata.version("eclipse-sumo"):
            return None
    except metadata.PackageNotFoundError:
        return None
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # libsumo prints a pyarrow version notice
            import libsumo
    except ImportError:
        return None
    return libsumo


def cache_dir() -> Path:
    """Per-user directory for generated SUMO files (networks, routes), written atomically."""
    d = Path(
        os.environ.get(
            "BAYESCRL_TRAFFIC_CACHE", Path(tempfile.gettempdir()) / f"bayescrl-traffic-{os.getuid()}"
        )
    )
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` unless it already holds exactly that (safe across processes)."""
    if path.exists() and path.read_text() == text:
        return path
    tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def run_netconvert(args: Sequence[str], out: Path, env_id: str) -> Path:
    """``netconvert args -o out`` (atomically); a failure becomes one ConfigError line."""
    tmp = out.with_suffix(f".{os.getpid()}.tmp.xml")
    proc = subprocess.run(
        [binary("netconvert", env_id), *args, "-o", str(tmp), "--no-warnings", "true"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        msg = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        raise ConfigError("network", " ".join(args), f"netconvert: {msg}")
    os.replace(tmp, out)
    return out


def _close_api(api: Any, is_libsumo: bool, token: int) -> None:
    global _libsumo_owner
    with contextlib.suppress(Exception):
        api.close()
    if is_libsumo and _libsumo_owner == token:
        _libsumo_owner = None


def _start_traci(cmd: list[str], attempts: int = 3):
    """``sumo --remote-port`` on a free port and a traci connection to it (polled every 20 ms, where
    ``traci.start`` sleeps 1 s before its first retry)."""
    import traci
    from sumolib.miscutils import getFreeSocketPort

    err: Exception | None = None
    for _ in range(attempts):  # the free port may be taken between choosing and binding it
        port = getFreeSocketPort()
        log = tempfile.TemporaryFile()  # SUMO's stderr (a pipe nobody reads could fill up and block it)
        proc = subprocess.Popen([*cmd, "--remote-port", str(port)], stdout=subprocess.DEVNULL, stderr=log)
        label = f"bayescrl-{os.getpid()}-{next(_labels)}"
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # traci prints its retries
                return traci.connect(port, numRetries=500, proc=proc, waitBetweenRetries=0.02, label=label)
        except Exception as exc:  # noqa: BLE001 - retried, then re-raised with SUMO's message
            proc.kill()
            proc.wait()
            log.seek(0)
            msg = (log.read().decode(errors="replace").strip().splitlines() or [str(exc)])[-1]
            err = ConfigError("sumo", " ".join(cmd[1:3]), f"SUMO did not start: {msg}")
        finally:
            log.close()
    assert err is not None
    raise err


class SumoSim:
    """One running SUMO simulation; ``api`` exposes the TraCI domains (``api.vehicle``, ``api.lane``, ...).

    ``backend``: ``"auto"`` (libsumo when this is the only open simulation of the process and libsumo is
    installed, else traci), ``"libsumo"`` or ``"traci"``. ``load(args)`` (re)starts the scenario in the
    same simulation (cheap reset). Both backends give bit-identical episodes.
    """

    def __init__(self, backend: str = "auto", env_id: str = "traffic"):
        if backend not in ("auto", "libsumo", "traci"):
            raise ConfigError("backend", backend, "must be 'auto', 'libsumo' or 'traci'")
        self.backend_request, self.env_id = backend, env_id
        self.api: Any = None
        self.backend: str | None = None
        self._finalizer: weakref.finalize | None = None
        sumo_home(env_id)
        _open.add(self)

    @property
    def running(self) -> bool:
        return self.api is not None

    def load(self, args: Sequence[str]) -> None:
        """Start (first call) or reload the simulation with SUMO command-line ``args`` (no binary)."""
        args = [str(a) for a in args]
        if self.api is not None:
            try:
                self.api.load(args)
                return
            except Exception:
                self.close()
                raise
        self._start(args)

    def _start(self, args: list[str]) -> None:
        global _libsumo_owner
        cmd = [binary("sumo", self.env_id), *args]
        _open.add(self)
        libsumo = None if self.backend_request == "traci" else _import_libsumo()
        if self.backend_request == "libsumo" and (libsumo is None or _libsumo_owner is not None):
            why = "is not installed" if libsumo is None else "already runs a simulation in this process"
            raise ConfigError("backend", "libsumo", f"libsumo {why}; use backend='traci' or 'auto'")
        # "auto": libsumo only for a lone simulation, so that the copies of a vector env share one backend
        alone = all(s is self for s in _open)
        token = id(self)
        if libsumo is not None and _libsumo_owner is None and (self.backend_request == "libsumo" or alone):
            _libsumo_owner = token
            try:
                libsumo.start(cmd)
            except Exception:
                _libsumo_owner = None
                raise
            self.api, self.backend = libsumo, "libsumo"
        else:
            self.api, self.backend = _start_traci(cmd), "traci"
        self._finalizer = weakref.finalize(self, _close_api, self.api, self.backend == "libsumo", token)

    def close(self) -> None:
        """End the simulation (idempotent); the sumo child process of the traci backend exits with it."""
        _open.discard(self)
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self.api, self.backend = None, None

    def step(self) -> None:
        self.api.simulationStep()


class OverTimeCounter:
    """Seconds spent beyond ``limit`` by conditions that must not hold longer than ``limit`` in a row.

    ``update(active, dt)``: every key in ``active`` has its run extended by ``dt`` (others restart at 0);
    returns ``sum_k dt * 1[run_k > limit]`` -- the violation seconds of this sub-step. A condition held
    for ``limit + x`` seconds (``x`` a multiple of ``dt``) therefore costs exactly ``x``.
    """

    def __init__(self, limit: float):
        if not limit > 0:
            raise ConfigError("limit", limit, "must be > 0")
        self.limit = float(limit)
        self.runs: dict[Hashable, float] = {}

    def reset(self) -> None:
        self.runs = {}

    def update(self, active: Iterable[Hashable], dt: float) -> float:
        eps = 1e-9 * max(dt, 1.0)
        runs = {k: self.runs.get(k, 0.0) + dt for k in active}
        self.runs = runs
        return dt * sum(1 for r in runs.values() if r > self.limit + eps)

    def run(self, key: Hashable) -> float:
        return self.runs.get(key, 0.0)

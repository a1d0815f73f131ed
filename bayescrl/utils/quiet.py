"""``bayescrl -q``: the one place that silences what is not a warning of ours.

:func:`set_quiet` (called by :func:`bayescrl.utils.runlog.setup_logging` for ``-q``/``-qq``) turns off
every tqdm progress bar (bayescrl's, Pyro's, transformers') and third-party ``UserWarning``,
``FutureWarning`` and ``DeprecationWarning`` (peft, transformers, pyro, torch, ...), and lowers the
third-party loggers to errors; bayescrl's own warnings and log lines at warning level still show.
``set_quiet(False)`` undoes it (the CLI calls it on every invocation, so one process can run both).
"""

from __future__ import annotations

import logging
import os
import warnings

__all__ = ["is_quiet", "set_quiet"]

#: third-party loggers lowered to errors by -q
LOGGERS = ("transformers", "peft", "accelerate", "pyro", "torch", "matplotlib", "ray", "h5py", "arviz")
#: warning categories ignored from third-party modules by -q
CATEGORIES = (UserWarning, FutureWarning, DeprecationWarning, PendingDeprecationWarning)
#: environment switches read by Hugging Face libraries when they are imported
ENV = {
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
}

_state: dict = {"quiet": False, "init": None, "env": {}, "levels": {}, "filters": None}


def is_quiet() -> bool:
    """True while ``-q`` is in effect."""
    return bool(_state["quiet"])


def _tqdm_off() -> None:
    import tqdm.std

    cls = tqdm.std.tqdm
    if _state["init"] is not None:
        return
    orig = cls.__init__

    def __init__(self, *args, **kwargs):  # noqa: N807 - replaces tqdm's __init__ while quiet
        kwargs["disable"] = True
        orig(self, *args, **kwargs)

    _state["init"] = orig
    cls.__init__ = __init__


def _tqdm_on() -> None:
    if _state["init"] is None:
        return
    import tqdm.std

    tqdm.std.tqdm.__init__ = _state["init"]
    _state["init"] = None


def set_quiet(quiet: bool) -> None:
    """Silence (``True``) or restore (``False``) progress bars and third-party warnings."""
    if quiet == _state["quiet"]:
        return
    if quiet:
        _tqdm_off()
        _state["filters"] = list(warnings.filters)
        for cat in CATEGORIES:
            warnings.filterwarnings("ignore", category=cat)
            warnings.filterwarnings("default", category=cat, module=r"bayescrl")  # ours still show
        for name in LOGGERS:
            lg = logging.getLogger(name)
            _state["levels"][name] = lg.level
            lg.setLevel(logging.ERROR)
        for k, v in ENV.items():
            _state["env"][k] = os.environ.get(k)
            os.environ[k] = v
        try:  # already imported: its own switch (the env var is read only at import)
            import sys

            if "transformers" in sys.modules:
                sys.modules["transformers"].logging.set_verbosity_error()
        except Exception:  # noqa: BLE001 - best effort on an optional dependency
            pass
    else:
        _tqdm_on()
        if _state["filters"] is not None:
            warnings.filters[:] = _state["filters"]
            warnings._filters_mutated()  # type: ignore[attr-defined]
        for name, level in _state["levels"].items():
            logging.getLogger(name).setLevel(level)
        for k, v in _state["env"].items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _state["levels"], _state["env"], _state["filters"] = {}, {}, None
    _state["quiet"] = quiet

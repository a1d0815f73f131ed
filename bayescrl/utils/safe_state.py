"""Checkpoints that load with ``torch.load(..., weights_only=True)``: no code runs when a shared run folder
is opened.

:func:`encode` turns a nested state (tensors, numpy arrays and scalars, RNG states such as
``np.random.get_state()``, ``random.getstate()`` or a ``Generator``'s ``bit_generator.state`` with
128-bit integers, dicts, lists, tuples, plain Python values) into the types torch's ``weights_only``
unpickler allows (tensors, dict, list, tuple, int, float, str, bytes, bool, None); numpy values are
stored as tagged raw bytes (a uint8 tensor) with their dtype and shape, so :func:`decode` gives back
the same dtype and bits. Anything else (arbitrary objects) is refused at save time with a
:class:`TypeError` naming its path, instead of being pickled.

:func:`save_state` / :func:`load_state` write and read such a file; a file that does not pass the
``weights_only`` unpickler (a crafted pickle, or a checkpoint of an older bayescrl that pickled numpy
objects) is refused with a one-line :class:`~bayescrl.utils.errors.DataError`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bayescrl.utils.errors import DataError

TAG = "__bayescrl_np__"
_PLAIN = (bool, int, float, str, bytes, type(None))


def encode(obj: Any, path: str = "state") -> Any:
    """``obj`` in ``weights_only``-loadable types (see the module docstring); raises ``TypeError``."""
    if isinstance(obj, torch.Tensor):
        return obj.detach()
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise TypeError(f"{path}: numpy array of dtype object cannot be checkpointed safely")
        return {TAG: "array", "dtype": obj.dtype.str, "shape": list(obj.shape), "data": _bytes_tensor(obj)}
    if isinstance(obj, np.generic):  # before float/int: np.float64 is a float subclass
        if obj.dtype.hasobject:
            raise TypeError(f"{path}: numpy object scalar cannot be checkpointed safely")
        return {TAG: "scalar", "dtype": obj.dtype.str, "data": _bytes_tensor(obj)}
    if isinstance(obj, _PLAIN):
        return obj
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, (str, int)) or isinstance(k, np.generic):
                raise TypeError(f"{path}: dict key {k!r} of type {type(k).__name__} is not str/int")
            out[k] = encode(v, f"{path}.{k}")
        return out
    if isinstance(obj, tuple):
        return tuple(encode(v, f"{path}[{i}]") for i, v in enumerate(obj))
    if isinstance(obj, list):
        return [encode(v, f"{path}[{i}]") for i, v in enumerate(obj)]
    raise TypeError(f"{path}: {type(obj).__module__}.{type(obj).__qualname__} cannot be checkpointed safely")


def _bytes_tensor(x: np.ndarray | np.generic) -> torch.Tensor:
    """The raw bytes of a numpy value as a uint8 tensor (exact for every non-object dtype)."""
    return torch.from_numpy(np.frombuffer(x.tobytes(), dtype=np.uint8).copy())


def decode(obj: Any) -> Any:
    """Inverse of :func:`encode` (numpy arrays and scalars come back with their dtype and bits)."""
    if isinstance(obj, dict):
        kind = obj.get(TAG)
        if kind == "array":
            raw = obj["data"].numpy().tobytes()
            return np.frombuffer(raw, dtype=np.dtype(obj["dtype"])).reshape(obj["shape"]).copy()
        if kind == "scalar":
            return np.frombuffer(obj["data"].numpy().tobytes(), dtype=np.dtype(obj["dtype"]))[0]
        return {k: decode(v) for k, v in obj.items()}
    if isinstance(obj, tuple):
        return tuple(decode(v) for v in obj)
    if isinstance(obj, list):
        return [decode(v) for v in obj]
    return obj


def encodable(obj: Any) -> bool:
    """Whether :func:`encode` accepts ``obj``."""
    try:
        encode(obj)
    except TypeError:
        return False
    return True


def save_state(state: Any, path: str | Path) -> Path:
    """Encode ``state`` and write it atomically (``path.tmp`` then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(encode(state), tmp)
    tmp.replace(path)
    return path


_BOILERPLATE = ("Weights only load failed", "Check the documentation", "Please file an issue", "(1)", "(2)")


def _reason(exc: Exception) -> str:
    """The informative line of torch's long weights_only error (e.g. the refused global), else the first."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.startswith(_BOILERPLATE)]
    text = (useful or lines or [type(exc).__name__])[0]
    text = text.removeprefix("WeightsUnpickler error:").strip() or type(exc).__name__
    return re.split(r" was not an allowed global|\. Please use", text)[0]


def load_state(path: str | Path, field: str = "checkpoint", map_location: Any = "cpu") -> Any:
    """Read a :func:`save_state` file with ``weights_only=True``; anything else raises ``DataError``."""
    path = Path(path)
    try:
        raw = torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise DataError(field, str(path), "file not found") from None
    except Exception as exc:  # UnpicklingError, RuntimeError (not a zip / torch file), EOFError ...
        first = _reason(exc)
        raise DataError(
            field,
            str(path),
            "refused: it does not load with weights_only=True (a checkpoint of an earlier bayescrl that "
            f"pickled Python objects, or a crafted/corrupt file; nothing in it was run) [{first[:160]}]",
        ) from None
    return decode(raw)

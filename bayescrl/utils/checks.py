"""Checks every command runs before it starts work: numbers, devices, output folders, memory, NaN results.

Each raises :class:`~bayescrl.utils.errors.ConfigError` (the CLI prints one line and exits with status 2).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from bayescrl.utils.errors import ConfigError, DataError
from bayescrl.utils.hints import did_you_mean


def positive_int(value: Any, field: str, minimum: int = 1, *, index: int | None = None) -> int:
    """``value`` as an ``int >= minimum``; floats are accepted only when whole and finite (``1e5``)."""
    if isinstance(value, bool):
        raise ConfigError(field, value, f"must be an integer >= {minimum}", index=index)
    try:
        number = float(value)
        ok = math.isfinite(number) and number == int(number)
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok or int(number) < minimum:
        raise ConfigError(field, value, f"must be an integer >= {minimum}", index=index)
    return int(number)


#: the largest seed :func:`check_seed` takes
MAX_SEED = 2**63 - 1


def check_seed(seed: Any, field: str = "seed") -> int:
    """``seed`` as an int in ``[0, 2**63 - 1]`` (a whole float such as ``1e3`` too): torch generators take
    seeds below 2**64, and some callers add an offset to theirs."""
    exact = isinstance(seed, numbers.Integral) and not isinstance(seed, bool)  # no float round-off
    value = int(seed) if exact else positive_int(seed, field, minimum=0)
    if not 0 <= value <= MAX_SEED:
        raise ConfigError(field, seed, "must be an integer in [0, 2**63 - 1]")
    return value


def finite_float(value: Any, field: str, low: float | None = None, high: float | None = None) -> float:
    """``value`` as a finite float in ``[low, high]`` (either bound optional)."""
    if isinstance(value, bool):
        raise ConfigError(field, value, "must be a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(field, value, "must be a number") from None
    if not math.isfinite(number):
        raise ConfigError(field, value, "must be finite")
    if (low is not None and number < low) or (high is not None and number > high):
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        raise ConfigError(field, value, f"must be in [{lo}, {hi}]")
    return number


def number(
    value: Any,
    field: str,
    low: float | None = None,
    high: float | None = None,
    *,
    strict: bool = False,
    allow_inf: bool = False,
    index: int | None = None,
) -> float:
    """``value`` as a float ``>= low`` (``> low`` with ``strict``) and ``<= high`` (either bound optional);
    finite unless ``allow_inf``. The reason names the first rule broken: ``must be a finite number``,
    ``must be > 0``, ``must be in [0, 1]``."""
    what = "must be a number" if allow_inf else "must be a finite number"
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise ConfigError(field, value, what, index=index)
    if math.isinf(value) and not allow_inf:
        raise ConfigError(field, value, what, index=index)
    v = float(value)
    below = low is not None and (v <= low if strict else v < low)
    if high is None:
        if below:
            raise ConfigError(field, value, f"must be {'>' if strict else '>='} {low:g}", index=index)
    elif below or v > high:
        lo = "-inf" if low is None else f"{low:g}"
        raise ConfigError(field, value, f"must be in {'(' if strict else '['}{lo}, {high:g}]", index=index)
    return v


def boolean(value: Any, field: str) -> bool:
    """``value`` if it is ``true`` or ``false`` (YAML booleans; no 0/1 or strings)."""
    if not isinstance(value, bool):
        raise ConfigError(field, value, "must be true or false")
    return value


def boolean_fields(config: Any, key: Callable[[str], str] = str) -> None:
    """:func:`boolean` on every field of the dataclass instance ``config`` declared ``bool`` (subclasses'
    fields included), so a switch added later is checked without being listed; ``key(name)`` is the
    field's name in the error (a section's dotted name)."""
    for f in dataclasses.fields(config):
        if f.type in ("bool", bool):
            boolean(getattr(config, f.name), key(f.name))


def numeric_fields(config: Any, key: Callable[[str], str] = str) -> None:
    """Every field of the dataclass instance ``config`` declared ``int`` or ``float`` (``| None``: or null)
    holds a number of that kind: a float field any real number but NaN, an int field a whole number
    (``1e5`` becomes ``100000``). Ranges stay with each config's own checks."""
    for f in dataclasses.fields(config):
        kind = f.type.removesuffix(" | None") if isinstance(f.type, str) else None
        value = getattr(config, f.name)
        if kind not in ("int", "float") or (value is None and kind != f.type):
            continue
        if kind == "float":
            number(value, key(f.name), allow_inf=True)
            continue
        whole = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
        if not (whole and value == int(value)):
            raise ConfigError(key(f.name), value, "must be a whole number")
        if not isinstance(value, int):
            object.__setattr__(config, f.name, int(value))


def choice(value: Any, field: str, options: Iterable[Any], reason: str | None = None) -> Any:
    """``value`` if it is one of ``options``; else ``must be one of [...]`` (or ``reason``) with a
    did-you-mean hint for a misspelt string."""
    options = list(options)
    if not any(value == o and isinstance(value, bool) == isinstance(o, bool) for o in options):
        hint = did_you_mean(value, [str(o) for o in options]) if isinstance(value, str) else ""
        raise ConfigError(field, value, f"{reason or f'must be one of {options}'}{hint}")
    return value


def mapping(value: Any, field: str) -> Mapping:
    """``value`` if it is a mapping (``{}`` for None: an empty section)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(field, value, "must be a mapping")
    return value


def check_device(device: Any, field: str = "device") -> str:
    """A torch device string that exists on this machine (``cuda`` without a GPU is refused)."""
    import torch

    try:
        dev = torch.device(str(device))
    except (RuntimeError, ValueError):
        raise ConfigError(field, device, "not a torch device; use cpu, cuda, cuda:N or mps") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            why = "CUDA is not available on this machine (no GPU, or a CPU-only torch)"
            raise ConfigError(field, device, why)
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(field, device, f"this machine has {torch.cuda.device_count()} GPU(s)")
    elif dev.type == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise ConfigError(field, device, "MPS is not available on this machine")
    elif dev.type != "cpu":
        raise ConfigError(field, device, "unsupported device; use cpu, cuda, cuda:N or mps")
    return str(device)


def prepare_out(path: str | Path, field: str = "out", *, create: bool = True) -> Path:
    """The output folder ``path``, refused before any work if a file stands at or above it.

    With ``create`` the folder is made (its parents too).
    """
    path = Path(path)
    for parent in (path, *path.parents):
        if parent.exists() and not parent.is_dir():
            where = "is a file" if parent == path else f"{str(parent)!r} is a file"
            raise ConfigError(field, str(path), f"cannot write here: {where}")
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(field, str(path), f"cannot create the folder: {exc.strerror or exc}") from None
    if path.is_dir():
        _check_writable(path, field, str(path))
    elif not create:  # made later: the nearest existing folder above it must let it be made
        above = next((p for p in path.parents if p.exists()), None)
        if above is not None and above.is_dir():
            _check_writable(above, field, str(path))
    return path


def _check_writable(folder: Path, field: str, value: str) -> None:
    """Refuse a folder no file can be created in (read-only, another user's), before any work."""
    import tempfile

    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise ConfigError(field, value, f"cannot write here: {exc.strerror or exc}") from None


def prepare_out_file(path: str | Path, field: str = "out") -> Path:
    """An output *file* path: refused if it is a folder or a file stands above it; its folder is made."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(field, str(path), "is a folder, expected a file name")
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise ConfigError(field, str(path), f"cannot write here: {str(parent)!r} is a file")
    prepare_out(path.parent, field)
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(field, str(path), "cannot write here: the file is read-only")
    return path


def physical_memory() -> int | None:
    """Bytes of physical memory (None when unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - non-POSIX
        return None


def check_memory(estimate: float, field: str, value: Any, what: str, fraction: float = 0.5) -> None:
    """Refuse a job whose ``estimate`` (bytes) exceeds ``fraction`` of physical memory, quoting it."""
    total = physical_memory()
    if total is not None and estimate > fraction * total:
        raise ConfigError(
            field,
            value,
            f"{what} would need about {estimate / 2**30:.1f} GiB, more than {fraction:.0%} of this "
            f"machine's {total / 2**30:.1f} GiB",
        )


def check_memory_of(
    estimate: Callable[[Mapping[str, int]], float], sizes: Mapping[str, int], what: str, fraction: float = 0.5
) -> None:
    """:func:`check_memory` of a job of ``estimate(sizes)`` bytes, its sizes given as ``{field: n}``; the
    refusal names the field that matters most (whose reduction to 1 would save the most memory)."""
    total = estimate(sizes)
    total_mem = physical_memory()
    if total_mem is None or total <= fraction * total_mem:
        return
    field = max(sizes, key=lambda k: total - estimate({**sizes, k: 1}))
    check_memory(total, field, sizes[field], what, fraction)


def first_nan(obj: Any, path: str = "") -> str | None:
    """The dotted path of the first NaN float in a results tree (numbers, lists, mappings, arrays)."""
    try:
        import numpy as np
        import torch

        if isinstance(obj, torch.Tensor):
            obj = obj.detach().cpu().numpy()
        if isinstance(obj, np.ndarray):
            if obj.dtype.kind in "fc" and np.isnan(obj).any():
                return f"{path}[{int(np.flatnonzero(np.isnan(obj).ravel())[0])}]"
            return None
        if isinstance(obj, np.floating):
            obj = float(obj)
    except ImportError:  # pragma: no cover
        pass
    if isinstance(obj, float):
        return (path or "results") if math.isnan(obj) else None
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            hit = first_nan(v, f"{path}.{k}" if path else str(k))
            if hit is not None:
                return hit
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            hit = first_nan(v, f"{path}[{i}]")
            if hit is not None:
                return hit
    return None


def check_no_nan(results: Any, where: str) -> None:
    """Refuse results holding NaN (a command never exits 0 with NaN in what it reports)."""
    hit = first_nan(results)
    if hit is not None:
        raise DataError(
            "results",
            where,
            f"{hit} is NaN: the run diverged or a setting is degenerate (check the config)",
        )

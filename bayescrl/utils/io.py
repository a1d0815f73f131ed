"""JSON/YAML I/O and ``key.sub=value`` command-line overrides for nested configs."""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bayescrl.utils.errors import ConfigError


class YAMLLoader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 floats: ``1e-4``, ``1e3``, ``.5`` and ``-2.5E+3`` are numbers
    (YAML 1.1, which PyYAML implements, reads a mantissa without a dot as a string)."""


YAMLLoader.yaml_implicit_resolvers = {
    k: [r for r in v if r[0] != "tag:yaml.org,2002:float"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
YAMLLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def yaml_loads(text: str) -> Any:
    """Parse YAML text with :class:`YAMLLoader` (scientific notation is a float)."""
    return yaml.load(text, Loader=YAMLLoader)  # noqa: S506 - a SafeLoader subclass


def to_jsonable(obj: Any) -> Any:
    """Convert numpy/torch containers to plain JSON types (NaN/inf become ``None``)."""
    try:
        import torch

        if isinstance(obj, torch.Tensor):
            obj = obj.detach().cpu().numpy()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_json(path: str | Path, obj: Any, indent: int = 2) -> Path:
    """Write ``obj`` as JSON (creating parent folders); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(to_jsonable(obj), indent=indent) + "\n")
    tmp.replace(path)  # atomic: a killed run never leaves half a file
    return path


def load_yaml(path: str | Path) -> dict:
    """Load a YAML (or JSON) mapping; errors name the file."""
    path = Path(path)
    if not path.exists():
        raise ConfigError("config", str(path), "file not found")
    try:
        data = yaml_loads(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError("config", str(path), f"not valid YAML/JSON: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("config", str(path), f"top level must be a mapping, got {type(data).__name__}")
    return data


def apply_overrides(config: Mapping[str, Any], overrides: Iterable[str]) -> dict:
    """Return a copy of ``config`` with ``a.b.c=value`` overrides applied (values parsed as YAML).

    >>> apply_overrides({"bandit": {"K": 50}}, ["bandit.K=10", "agents=[ps, lints]"])
    {'bandit': {'K': 10}, 'agents': ['ps', 'lints']}
    """
    out = copy.deepcopy(dict(config))
    for item in overrides:
        if "=" not in item:
            raise ConfigError("override", item, "expected KEY=VALUE, e.g. bandit.K=10")
        key, raw = item.split("=", 1)
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise ConfigError("override", item, "empty key")
        node = out
        for p in parts[:-1]:
            nxt = node.get(p)
            if nxt is None:
                nxt = node[p] = {}
            if not isinstance(nxt, dict):
                raise ConfigError("override", item, f"'{p}' is not a mapping in the config")
            node = nxt
        node[parts[-1]] = yaml_loads(raw)
    return out


def check_keys(mapping: Mapping[str, Any], allowed: Iterable[str], where: str = "") -> None:
    """Refuse keys of ``mapping`` not in ``allowed``, naming the key and the closest valid one.

    >>> check_keys({"engin": "laplace"}, ["engine", "seed"], "spec")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bayescrl.utils.errors.ConfigError: spec.engin = 'laplace': unknown key; did you mean 'engine'? ...
    """
    import difflib

    allowed = list(allowed)
    for key in mapping:
        if key in allowed:
            continue
        close = difflib.get_close_matches(str(key), [str(a) for a in allowed], n=1, cutoff=0.5)
        hint = f"did you mean {close[0]!r}? " if close else ""
        name = f"{where}.{key}" if where else str(key)
        raise ConfigError(name, mapping[key], f"unknown key; {hint}(valid: {', '.join(map(str, allowed))})")


def import_object(spec: str, field: str) -> Any:
    """The object named by ``"module:attr"``, importable from the current directory or the Python path.

    This imports (and so runs) user code: only use it on specs a user wrote, never on data files.
    """
    import importlib
    import os
    import sys

    module_name, _, attr = str(spec).partition(":")
    if not module_name or not attr:
        raise ConfigError(field, spec, "expected 'module:name'")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigError(field, spec, f"cannot import module {module_name!r}: {exc}") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(field, spec, f"module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj

"""JSON/YAML I/O and ``key.sub=value`` command-line overrides for nested configs."""

from __future__ import annotations

import copy
import json
import logging
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bayescrl.utils.errors import ConfigError, DataError
from bayescrl.utils.hints import close_keys, did_you_mean, format_hint

_log = logging.getLogger(__name__)


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


def _unique_mapping(loader: YAMLLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    """A YAML mapping whose keys are distinct (PyYAML silently keeps the last of two equal keys)."""
    seen: set = set()
    for key_node, _ in node.value:  # the node's own keys (a ``<<`` merge may be overridden by them)
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, (str, int, float, bool)) or key is None:
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark
                )
            seen.add(key)
    return loader.construct_mapping(node, deep=deep)


YAMLLoader.add_constructor("tag:yaml.org,2002:map", _unique_mapping)


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


def _no_repeated_keys(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(key)
        out[key] = value
    return out


class _RepeatedKey(ValueError):
    pass


def trim_jsonl(path: str | Path, key: str, upto: int) -> None:
    """Keep the records of the JSON-lines log ``path`` whose ``key`` (an int: iteration, step) is at most
    ``upto``, for a resumed run that appends the rest. A half-written last line (the run was killed
    mid-write) is dropped with a warning; a damaged earlier line raises :class:`DataError` saying how to
    recover. A missing file is left alone."""
    path = Path(path)
    if not path.exists():
        return
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    keep = []
    for i, ln in enumerate(lines):
        try:
            at = json_loads(ln, path.name, str(path))[key]
        except (DataError, KeyError, TypeError) as exc:
            if i == len(lines) - 1:  # the line a kill cut short
                _log.warning("%s: dropped its half-written last line (the run was killed mid-write)", path)
                break
            why = exc.reason if isinstance(exc, DataError) else f"a record without {key!r}"
            fix = "delete the damaged line and rerun with --resume"
            raise DataError(path.name, str(path), f"line {i + 1}: {why}; {fix}") from None
        if isinstance(at, int) and at <= upto:
            keep.append(ln)
    path.write_text("".join(ln + "\n" for ln in keep))


def json_loads(text: str, field: str = "json", where: str = "", recover: str = "") -> Any:
    """Parse JSON ``text``; a malformed or truncated document, or an object with a repeated key, raises
    :class:`DataError` naming ``field`` and ``where`` (the file) in one line, with ``recover`` (how to
    repair it) appended. The one JSON reader of data and run files (see :func:`load_json`)."""
    tail = f"; {recover}" if recover else ""
    try:
        return json.loads(text, object_pairs_hook=_no_repeated_keys)
    except _RepeatedKey as exc:
        raise DataError(field, where, f"key {exc.args[0]!r} appears twice in one object{tail}") from None
    except json.JSONDecodeError as exc:
        # the parser ran out of text (an unterminated string runs to the end too): a half-written file
        cut = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        why = "truncated (ends mid-document)" if cut and text.strip() else "empty" if not text.strip() else ""
        why = why or f"not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})"
        raise DataError(field, where, f"{why}{tail}") from None
    except RecursionError:
        raise DataError(field, where, f"nested too deeply{tail}") from None


def load_json(
    path: str | Path,
    field: str = "file",
    *,
    kind: type | tuple[type, ...] | None = None,
    recover: str = "",
    limit: int | None = None,
) -> Any:
    """The JSON document in ``path``, refused in one line naming the file when it is missing, a folder,
    not UTF-8, larger than ``limit`` bytes, malformed, truncated, holds an object with a repeated key
    (``json`` would silently keep the last) or (with ``kind``) its top level is of another type.
    ``recover`` says how to repair the file (e.g. "delete it and rerun with --resume")."""
    path = Path(path)
    tail = f"; {recover}" if recover else ""
    if not path.exists():
        raise DataError(field, str(path), f"file not found{tail}")
    if path.is_dir():
        raise DataError(field, str(path), "is a folder, expected a JSON file")
    if limit is not None and path.stat().st_size > limit:
        raise DataError(field, str(path), f"file larger than {limit / 2**20:g} MiB")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(field, str(path), f"not UTF-8 text (a binary or damaged file){tail}") from None
    except OSError as exc:
        raise DataError(field, str(path), f"cannot read: {exc.strerror or exc}") from None
    data = json_loads(text, field, str(path), recover)
    if kind is not None and not isinstance(data, kind):
        want = {dict: "an object {...}", list: "a list [...]"}.get(kind, getattr(kind, "__name__", str(kind)))
        raise DataError(field, str(path), f"top level must be {want}, got {type(data).__name__}{tail}")
    return data


def yaml_error_line(exc: Exception) -> str:
    """A YAML parse error as one line: the problem and where (PyYAML's message spans up to 8 lines)."""
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def load_yaml(path: str | Path) -> dict:
    """Load a YAML (or JSON) mapping; errors name the file and fit on one line."""
    path = Path(path)
    if not path.exists():
        raise ConfigError("config", str(path), "file not found")
    if path.is_dir():
        raise ConfigError("config", str(path), "is a folder, expected a YAML file")
    try:
        data = yaml_loads(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError("config", str(path), f"not valid YAML/JSON: {yaml_error_line(exc)}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError("config", str(path), f"not a text file ({exc.reason})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("config", str(path), f"top level must be a mapping, got {type(data).__name__}")
    return data


Schema = Mapping[str, "Schema | None"]


def apply_overrides(
    config: Mapping[str, Any], overrides: Iterable[str], schema: Schema | None = None, where: str = ""
) -> dict:
    """Return a copy of ``config`` with ``a.b.c=value`` overrides applied (values parsed as YAML).

    This is the one validator of every command's ``--set KEY=VALUE``. With a ``schema`` (nested mapping of
    the valid keys: a sub-mapping for a section, ``None`` for a value), each key path is checked before it
    is set, so an unknown key is refused by name with the closest valid one (:func:`check_keys`).

    >>> apply_overrides({"bandit": {"K": 50}}, ["bandit.K=10", "agents=[ps, lints]"])
    {'bandit': {'K': 10}, 'agents': ['ps', 'lints']}
    """
    out = copy.deepcopy(dict(config))
    if isinstance(overrides, str):
        overrides = [overrides]
    for item in overrides:
        if "=" not in item:
            raise ConfigError("--set", item, "expected KEY=VALUE, e.g. bandit.K=10")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        if not key.strip() or any(not p for p in parts):
            why = "empty key" if not key.strip() else "empty part in the dotted key"
            raise ConfigError("--set", item, why)
        if schema is not None:
            _check_path(parts, schema, where, raw)
        try:
            value = yaml_loads(raw)
        except yaml.YAMLError as exc:
            raise ConfigError(key.strip(), raw, f"value is not valid YAML: {yaml_error_line(exc)}") from None
        node = out
        for p in parts[:-1]:
            nxt = node.get(p)
            if nxt is None:
                nxt = node[p] = {}
            if not isinstance(nxt, dict):
                raise ConfigError("--set", item, f"'{p}' is not a mapping in the config")
            node = nxt
        node[parts[-1]] = value
    return out


def validate_sweep_block(config: Mapping[str, Any], validate) -> None:
    """Check an experiment config's optional ``sweep: {key, values}`` block: each value, set at ``key`` with
    :func:`apply_overrides`, must give a config that ``validate`` accepts (the error names the value's index).
    """
    sw = config.get("sweep")
    if sw is None:
        return
    if not isinstance(sw, Mapping) or set(sw) != {"key", "values"}:
        raise ConfigError("sweep", sw, "must be a mapping with exactly 'key' and 'values'")
    if not isinstance(sw["values"], list) or not sw["values"]:
        raise ConfigError("sweep.values", sw["values"], "must be a non-empty list")
    base = {k: x for k, x in config.items() if k != "sweep"}
    for i, v in enumerate(sw["values"]):
        try:
            validate(apply_overrides(base, [f"{sw['key']}={json.dumps(v)}"]))
        except ConfigError as exc:
            raise ConfigError(f"sweep.values (key {sw['key']})", v, str(exc), index=i) from exc


def _check_path(parts: list[str], schema: Schema, where: str, value: Any) -> None:
    node: Schema | None = schema
    prefix = where
    for p in parts:
        if node is None or "*" in node:  # a free-form value / mapping: any key below it is the user's
            return
        check_keys({p: value}, node, prefix)
        node = node[p]
        prefix = f"{prefix}.{p}" if prefix else p


def check_schema(mapping: Any, schema: Schema, where: str = "") -> None:
    """Refuse unknown keys anywhere in ``mapping`` (recursively, following ``schema``; see
    :func:`apply_overrides` for the schema's form; ``"*"`` in a schema mapping allows any key)."""
    if not isinstance(mapping, Mapping) or "*" in schema:
        return
    check_keys(mapping, schema, where)
    for key, sub in schema.items():
        if sub is not None and key in mapping:
            check_schema(mapping[key], sub, f"{where}.{key}" if where else key)


def check_keys(
    mapping: Mapping[str, Any],
    allowed: Iterable[str] | Schema,
    where: str = "",
    *,
    error: type[ConfigError] = ConfigError,
    index: int | None = None,
) -> None:
    """Refuse keys of ``mapping`` not in ``allowed``, naming the key and the closest valid one.

    The hint comes from :func:`bayescrl.utils.hints.close_keys` (keys compared by the meaning of their
    parts). When ``allowed`` is a schema (a mapping whose sections are mappings, see
    :func:`apply_overrides`) and an unknown key holds a mapping, its sub-keys are also looked up in the
    sections: ``raters: {lam: 10}`` against a schema with ``offline: {lam, ...}`` suggests ``offline.lam``.
    ``error`` / ``index`` choose the error class and the record index of the message.

    >>> check_keys({"engin": "laplace"}, ["engine", "seed"], "spec")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bayescrl.utils.errors.ConfigError: spec.engin = 'laplace': unknown key; did you mean 'engine'? ...
    """
    sections = (
        {str(k): v for k, v in allowed.items() if isinstance(v, Mapping) and "*" not in v}
        if isinstance(allowed, Mapping)
        else {}
    )
    names = [str(a) for a in allowed]
    for key in mapping:
        if key in names:
            continue
        hint = did_you_mean(str(key), names)
        if not hint and isinstance(mapping[key], Mapping):
            hint = _section_hint(mapping[key], sections)
        name = f"{where}.{key}" if where else str(key)
        raise error(name, mapping[key], f"unknown key{hint} (valid: {', '.join(names)})", index=index)


def _section_hint(value: Mapping[str, Any], sections: Mapping[str, Mapping]) -> str:
    """``"; did you mean 'section.sub'?"`` when the sub-keys of a misplaced mapping belong to a section
    (sections holding a sub-key exactly are preferred to close matches)."""
    exact, close = [], []
    for sub in value:
        for sec, keys in sections.items():
            names = [str(k) for k in keys]
            if str(sub) in names:
                exact.append(f"{sec}.{sub}")
            else:
                close += [f"{sec}.{c}" for c in close_keys(str(sub), names, n=1)]
    found = list(dict.fromkeys(exact or close))
    return format_hint(found) if len(found) <= 3 else ""


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

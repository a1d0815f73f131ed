"""File paths inside a config resolve against the config file that names them.

``data.path: trl_tiny.jsonl`` in ``my-examples/mopo/trl_format.yaml`` means
``my-examples/mopo/trl_tiny.jsonl``, wherever the command is run from; an absolute path (or ``~/...``) is
unchanged. A path given on the command line (``--set data.path=...``, ``--preferences FILE``) is the
user's own and resolves against the current folder as usual: commands resolve the file's paths *before*
applying ``--set`` overrides (:func:`load_config`).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from bayescrl.utils.io import load_yaml

__all__ = ["config_relative", "load_config", "resolve_paths"]


def config_relative(value: Any, config_file: str | Path | None) -> Any:
    """``value`` (a path string) joined to the folder of ``config_file``; others returned unchanged.

    The result stays relative when ``config_file`` is (``examples/mopo/x.jsonl``), so messages and
    results quote the path the way the user wrote the config's."""
    if config_file is None or not isinstance(value, str) or not value.strip():
        return value
    if value.startswith("~") or Path(value).is_absolute():
        return value
    base = os.path.dirname(os.fspath(config_file))
    return os.path.normpath(os.path.join(base, value)) if base else value


def resolve_paths(config: Mapping[str, Any], config_file: str | Path | None, keys: Iterable[str]) -> dict:
    """A copy of ``config`` with the path strings at the dotted ``keys`` (``data.path``; a ``*`` part
    walks every entry of a list or mapping) made relative to ``config_file`` (:func:`config_relative`)."""
    out = copy.deepcopy(dict(config))
    for key in keys:
        _resolve(out, key.split("."), config_file)
    return out


def _resolve(node: Any, parts: list[str], config_file) -> None:
    head, rest = parts[0], parts[1:]
    if head == "*":
        children = (
            node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        )
        for k, child in list(children):
            if rest:
                _resolve(child, rest, config_file)
            else:
                node[k] = config_relative(child, config_file)
        return
    if not isinstance(node, dict) or head not in node:
        return
    if rest:
        _resolve(node[head], rest, config_file)
    else:
        node[head] = config_relative(node[head], config_file)


def load_config(path: str | Path, path_keys: Iterable[str] = ()) -> dict:
    """:func:`~bayescrl.utils.io.load_yaml` with the file paths at ``path_keys`` resolved against ``path``."""
    return resolve_paths(load_yaml(path), path, path_keys)

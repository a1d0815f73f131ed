"""Error types. Every user-facing validation error names the field, the record index and the value."""

from __future__ import annotations

from typing import Any


class BayesCRLError(Exception):
    """Base class of the package's user-facing errors (the CLI prints them and exits with status 2)."""


class ConfigError(BayesCRLError, ValueError):
    """A configuration value is invalid.

    >>> raise ConfigError("offline.N", -1, "must be >= 0")
    Traceback (most recent call last):
    ...
    bayescrl.utils.errors.ConfigError: offline.N = -1: must be >= 0
    """

    def __init__(self, field: str, value: Any, reason: str, index: int | None = None):
        self.field, self.value, self.reason, self.index = field, value, reason, index
        where = field if index is None else f"{field}[{index}]"
        super().__init__(f"{where} = {_short(value)}: {reason}")


class DataError(ConfigError):
    """A data record is invalid (same message format as :class:`ConfigError`)."""


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."

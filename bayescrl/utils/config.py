"""Configs as validated dataclasses: one style for every command's settings.

A config is a ``@dataclass`` subclass of :class:`Config`: each field has a default and a docstring below
it (as CleanRL's ``Args``), :meth:`Config.validate` checks the values with :mod:`bayescrl.utils.checks`
(raising :class:`~bayescrl.utils.errors.ConfigError` naming the field and its value), and a field whose
type is another :class:`Config` is a section (a nested mapping in YAML)::

    @dataclass
    class Env(Config):
        SECTION: ClassVar[str] = "env"
        S: int = 6
        \"\"\"number of states\"\"\"

        def validate(self) -> None:
            self.S = positive_int(self.S, self.key("S"), 2)

    @dataclass
    class Experiment(Config):
        seed: int = 0
        \"\"\"base seed\"\"\"
        env: Env = field(default_factory=Env)
        \"\"\"the environment\"\"\"

    Experiment.from_dict({"env": {"S": 10}}).to_dict()   # {'seed': 0, 'env': {'S': 10}}

:meth:`Config.from_dict` refuses an unknown key by name (with the closest valid key, or the section a
misplaced key belongs to) and a section that is not a mapping; YAML keys and ``--set`` paths are the
field names.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, ClassVar

from bayescrl.utils.checks import boolean_fields, mapping, numeric_fields
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import Schema, check_keys


@dataclasses.dataclass
class Config:
    """Base of every config dataclass: validated on construction, built from / written to plain mappings."""

    #: dotted name of this section in error messages and ``--set`` paths ("" at the top level)
    SECTION: ClassVar[str] = ""

    def __post_init__(self) -> None:
        boolean_fields(self, self.key)  # switches and numbers by their annotation, then the own checks
        numeric_fields(self, self.key)
        self.validate()

    def validate(self) -> None:
        """Check (and normalise) every field; raise :class:`ConfigError` naming the first bad one."""

    def check(self) -> typing.Self:
        """Check this config again, its sections first, and return it: fields set after it was built
        (``cfg.pi_lr = nan``, ``exp.progress.log_every = 0``) are refused as the constructor would have
        refused them. Code that receives a built config (an algorithm, a trainer, ``run_user``) calls it."""
        for name in self.sections():
            section = getattr(self, name)
            if isinstance(section, Config):
                section.check()
        self.__post_init__()
        return self

    @classmethod
    def key(cls, name: str) -> str:
        """The dotted name of field ``name`` (``"bandit.K"``) for error messages."""
        return f"{cls.SECTION}.{name}" if cls.SECTION else name

    @classmethod
    def sections(cls) -> dict[str, type[Config]]:
        """The fields that are sections (nested configs), by name."""
        try:
            hints = typing.get_type_hints(cls)
        except NameError:  # an annotation naming a type imported only for type checkers: no sections
            return {}
        return {
            f.name: hints[f.name]
            for f in dataclasses.fields(cls)
            if isinstance(hints.get(f.name), type) and issubclass(hints[f.name], Config)
        }

    @classmethod
    def schema(cls) -> Schema:
        """``{field: sub-schema or None}``: the keys a YAML file may hold (see :func:`check_keys`)."""
        subs = cls.sections()
        return {f.name: subs[f.name].schema() if f.name in subs else None for f in dataclasses.fields(cls)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, extra: Mapping[str, Any] | None = None) -> Config:
        """Build from a plain mapping (None: all defaults); unknown keys are an error naming the key, and
        a bad value's error names it under the section (``train.lr``) when :meth:`validate` did not.
        ``extra``: more allowed top-level keys (``{name: sub-schema}``) that the caller handles itself
        (left out of the config)."""
        data = mapping(data, cls.SECTION or "config")
        check_keys(data, dict(sorted({**cls.schema(), **(extra or {})}.items())), cls.SECTION)
        subs = cls.sections()
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {}
        for k, v in data.items():
            if k not in names:
                continue
            kwargs[k] = subs[k].from_dict(v) if k in subs else v
        try:
            return cls(**kwargs)
        except ConfigError as e:  # name the field as the user wrote it: train.epsilon, not epsilon
            if not cls.SECTION or e.field.startswith(f"{cls.SECTION}."):
                raise
            raise type(e)(cls.key(e.field), e.value, e.reason, index=e.index) from None

    def to_dict(self) -> dict[str, Any]:
        """The config as plain mappings and lists (the form YAML / JSON hold)."""
        return dataclasses.asdict(self)

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every field at its declared default (not validated: no device probed, no value normalised)."""
        subs = cls.sections()
        out: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in subs:
                out[f.name] = subs[f.name].defaults()
            elif f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            else:
                out[f.name] = f.default_factory()
        return out

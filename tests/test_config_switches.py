"""Every switch of every config refuses a value that is not ``true``/``false``, naming the field.

A config field declared ``bool`` is checked without being listed
(:func:`bayescrl.utils.checks.boolean_fields`), so a switch added to an algorithm later (e-COP's
``penalty_control_variate``, say) cannot silently take ``"maybe"`` as true. The configs are found by
walking the package, not listed here."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil

import pytest

import bayescrl
from bayescrl.constrained.core.config import TrainConfig
from bayescrl.mopo.lm.config import MOPOLMConfig
from bayescrl.utils.config import Config
from bayescrl.utils.errors import ConfigError


def _config_classes() -> list[type]:
    found = []
    for info in pkgutil.walk_packages(bayescrl.__path__, "bayescrl."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed
            continue
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and obj.__module__ == module.__name__
                and dataclasses.is_dataclass(obj)
                and issubclass(obj, (Config, TrainConfig, MOPOLMConfig))
            ):
                found.append(obj)
    return found


CASES = [
    pytest.param(cls, f.name, id=f"{cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}.{f.name}")
    for cls in _config_classes()
    for f in dataclasses.fields(cls)
    if f.type in ("bool", bool)
]


def _build(cls: type, name: str, value) -> None:
    if issubclass(cls, Config):
        cls.from_dict({name: value})
    else:  # TrainConfig and MOPOLMConfig validate on request, as the commands do
        cls.from_dict({name: value}).validate()


def test_the_walk_finds_the_switches_that_were_once_unchecked():
    names = {c.values[0].__name__ + "." + c.values[1] for c in CASES}
    assert {"ECOPConfig.adaptive_beta", "ECOPConfig.penalty_control_variate"} <= names
    assert {"AgentOptions.online_noise", "AgentOptions.anchor_prior", "MOPOLMConfig.multi_head"} <= names
    assert len(CASES) >= 40


@pytest.mark.parametrize(("cls", "name"), CASES)
def test_a_switch_refuses_anything_but_true_or_false(cls, name):
    for good in (True, False):
        try:
            _build(cls, name, good)
        except ConfigError as e:  # a config that needs more than defaults (a model path): not this field
            assert e.field.rsplit(".", 1)[-1] != name, e
    for bad in ("maybe", 1, None):
        with pytest.raises(ConfigError, match="must be true or false") as e:
            _build(cls, name, bad)
        assert e.value.field.rsplit(".", 1)[-1] == name and e.value.value == bad

"""Every config refuses a value of the wrong kind, naming the field: a switch anything but ``true``/``false``,
an algorithm's number a string, NaN or a list, or a number outside its declared range.

A config field declared ``bool`` is checked without being listed
(:func:`bayescrl.utils.checks.boolean_fields`), so a switch added to an algorithm later (e-COP's
``penalty_control_variate``, say) cannot silently take ``"maybe"`` as true. The configs are found by
walking the package, not listed here. Likewise every field of an algorithm's config annotated ``int`` or
``float`` (``TrainConfig._validate_types``, ranges in ``RANGES``): before, CPO's ``cg_damping="abc"``
reached the update as a string and e-COP's ``kappa="abc"`` ended in a ``TypeError``."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil

import pytest

import bayescrl
from bayescrl.constrained.core.config import TrainConfig
from bayescrl.constrained.registry import available, get_algorithm
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


def _fields(cls: type, kinds: tuple[str, ...]) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.type in kinds]


BOOLS = ("bool",)
NUMBERS = ("int", "float", "int | None", "float | None")
CONFIGS = sorted(_config_classes(), key=lambda c: (c.__module__, c.__name__))
ALGO_CONFIGS = sorted({get_algorithm(a).config_class for a in available()}, key=lambda c: c.__name__)


def _build(cls: type, name: str, value) -> None:
    if issubclass(cls, Config):
        cls.from_dict({name: value})
    else:  # MOPOLMConfig validates on request, as the commands do
        cls.from_dict({name: value}).validate()


def _refused(cls: type, name: str, value) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        _build(cls, name, value)
    assert e.value.field.rsplit(".", 1)[-1] == name, (cls.__name__, name, value, e.value)
    return e.value


def test_the_walk_finds_the_fields_that_were_once_unchecked():
    switches = {f"{c.__name__}.{n}" for c in CONFIGS for n in _fields(c, BOOLS)}
    assert {"ECOPConfig.adaptive_beta", "ECOPConfig.penalty_control_variate"} <= switches
    assert {"AgentOptions.online_noise", "AgentOptions.anchor_prior", "MOPOLMConfig.multi_head"} <= switches
    numbers = {f"{c.__name__}.{n}" for c in CONFIGS for n in _fields(c, NUMBERS)}
    assert {"CPOConfig.cg_damping", "FOCOPSConfig.temperature", "IPOConfig.t", "ECOPConfig.kappa"} <= numbers
    assert {"BradleyTerry.num_samples", "AgentOptions.tol", "MOPOSolver.seed"} <= numbers
    assert len(ALGO_CONFIGS) == len(available()) >= 10


@pytest.mark.parametrize("cls", [c for c in CONFIGS if _fields(c, BOOLS)], ids=lambda c: c.__name__)
def test_a_switch_refuses_anything_but_true_or_false(cls):
    for name in _fields(cls, BOOLS):
        for good in (True, False):
            try:
                _build(cls, name, good)
            except ConfigError as e:  # a config that needs more than defaults (a model path): not this field
                assert e.field.rsplit(".", 1)[-1] != name, e
        for bad in ("maybe", 1, None):
            err = _refused(cls, name, bad)
            assert err.reason == "must be true or false" and err.value == bad


@pytest.mark.parametrize("cls", [c for c in CONFIGS if _fields(c, NUMBERS)], ids=lambda c: c.__name__)
def test_a_number_refuses_strings_nan_lists_and_switches(cls):
    for name in _fields(cls, NUMBERS):
        for bad in ("abc", float("nan"), [1], True):
            assert _refused(cls, name, bad).value is bad


@pytest.mark.parametrize("cls", ALGO_CONFIGS, ids=lambda c: c.__name__)
def test_a_number_outside_its_range_is_refused_and_its_edge_is_kept(cls):
    for name, bounds in cls.RANGES.items():
        low, high, strict = bounds.get("low"), bounds.get("high"), bounds.get("strict", False)
        if low is not None:
            _refused(cls, name, low if strict else low - 1)
            if not strict:
                assert getattr(cls.from_dict({name: low}), name) == low
        if high is not None:
            _refused(cls, name, high + 0.5)
            assert getattr(cls.from_dict({name: high}), name) == high


def test_whole_floats_become_ints_as_in_yaml():
    cfg = get_algorithm("cpo").config_class.from_dict({"cg_iters": 20.0, "rollout_steps": 1e3})
    assert cfg.cg_iters == 20 and isinstance(cfg.cg_iters, int) and cfg.rollout_steps == 1000

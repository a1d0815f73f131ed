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


NUMERIC = [
    pytest.param(cls, f.name, id=f"{name}.{f.name}")
    for name in available()
    for cls in [get_algorithm(name).config_class]
    for f in dataclasses.fields(cls)
    if f.type in ("int", "float", "int | None", "float | None")
]


def test_the_numeric_walk_covers_every_algorithm_and_its_own_fields():
    ids = {p.id for p in NUMERIC}
    assert {"cpo.cg_damping", "focops.temperature", "ipo.t", "ecop.kappa", "atrpo.cg_iters"} <= ids
    assert len({i.split(".")[0] for i in ids}) == len(available()) >= 10


@pytest.mark.parametrize(("cls", "name"), NUMERIC)
def test_a_number_refuses_strings_nan_and_lists(cls, name):
    for bad in ("abc", float("nan"), [1], True):
        with pytest.raises(ConfigError) as e:
            cls.from_dict({name: bad})
        assert e.value.field == name and e.value.value is bad


RANGED = [
    pytest.param(cls, name, bounds, id=f"{cls.__name__}.{name}")
    for cls in sorted({get_algorithm(a).config_class for a in available()}, key=lambda c: c.__name__)
    for name, bounds in cls.RANGES.items()
]


@pytest.mark.parametrize(("cls", "name", "bounds"), RANGED)
def test_a_number_outside_its_range_is_refused_and_its_edge_is_kept(cls, name, bounds):
    low, high, strict = bounds.get("low"), bounds.get("high"), bounds.get("strict", False)
    if low is not None:
        with pytest.raises(ConfigError, match=name):
            cls.from_dict({name: low if strict else low - 1})
        if not strict:
            assert getattr(cls.from_dict({name: low}), name) == low
    if high is not None:
        with pytest.raises(ConfigError, match=name):
            cls.from_dict({name: high + 0.5})
        assert getattr(cls.from_dict({name: high}), name) == high


def test_whole_floats_become_ints_as_in_yaml():
    cfg = get_algorithm("cpo").config_class.from_dict({"cg_iters": 20.0, "rollout_steps": 1e3})
    assert cfg.cg_iters == 20 and isinstance(cfg.cg_iters, int) and cfg.rollout_steps == 1000


OTHER_NUMBERS = [
    pytest.param(cls, f.name, id=f"{cls.__name__}.{f.name}")
    for cls in _config_classes()
    if issubclass(cls, Config) and not issubclass(cls, TrainConfig)
    for f in dataclasses.fields(cls)
    if f.type in ("int", "float", "int | None", "float | None")
]


def test_the_other_configs_numbers_are_walked_too():
    ids = {p.id for p in OTHER_NUMBERS}
    assert {"BradleyTerry.num_samples", "AgentOptions.tol", "MOPOSolver.seed"} <= ids  # once unchecked


@pytest.mark.parametrize(("cls", "name"), OTHER_NUMBERS)
def test_every_config_number_refuses_strings_and_nan(cls, name):
    for bad in ("abc", float("nan"), [1]):
        with pytest.raises(ConfigError) as e:
            cls.from_dict({name: bad})
        assert e.value.field.rsplit(".", 1)[-1] == name

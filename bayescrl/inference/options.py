"""Engine options and spec keys, checked by ``infer`` / ``simulate`` / ``compare`` before any work.

Engine options are keyword arguments of :func:`bayescrl.inference.engines.fit`; on the command line they are
``--set engine_options.KEY=VALUE`` (``infer``) or ``--set engine_options.ENGINE.KEY=VALUE`` (``compare``), and
a spec file may hold the same ``engine_options:`` mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bayescrl.models.spec import SPEC_KEYS, check_spec_keys
from bayescrl.utils.checks import finite_float, positive_int
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import check_keys

ENGINES = ("exact", "laplace", "bootstrap", "svi", "nuts")
__all__ = ["ENGINES", "ENGINE_OPTIONS", "SPEC_KEYS", "check_engine_options", "check_spec_keys"]


def _prob(v, f):
    return finite_float(v, f, 0.0, 1.0)


def _open_prob(v, f):
    x = finite_float(v, f)
    if not 0 < x < 1:
        raise ConfigError(f, v, "must be in (0, 1)")
    return x


def _pos(v, f):
    x = finite_float(v, f)
    if x <= 0:
        raise ConfigError(f, v, "must be > 0")
    return x


def _count(v, f):
    return positive_int(v, f)


def _count0(v, f):
    return positive_int(v, f, minimum=0)


def _bool(v, f):
    if not isinstance(v, bool):
        raise ConfigError(f, v, "must be true or false")
    return v


def _choice(*allowed):
    def check(v, f):
        if v not in allowed:
            raise ConfigError(f, v, f"must be one of {list(allowed)}")
        return v

    return check


def _any(v, f):
    return v


def _rank(v, f):
    return None if v is None else positive_int(v, f)


#: per engine: option -> check (``fit``'s keyword options; see its docstring)
ENGINE_OPTIONS: dict[str, dict[str, Any]] = {
    "exact": {},
    "laplace": {"lr": _pos, "max_steps": _count},  # used when competence is unknown (Pyro MAP)
    "bootstrap": {
        "p_offline": _prob,
        "p_online": _prob,
        "p_obs": _prob,
        "online_reward_noise": _bool,
        "anchor_prior": _bool,
        "tol": _pos,
        "max_iter": _count,
        "solver": _any,  # checked by the engine
    },
    "svi": {
        "guide": _choice("normal", "mvn", "lowrank"),
        "lr": _pos,
        "max_steps": _count,
        "min_steps": _count0,
        "window": _count,
        "rtol": _pos,
        "num_particles": _count,
        "rank": _rank,
        "reparam": _choice(True, False, "auto"),
        "check": _bool,
    },
    "nuts": {
        "num_samples": _count,
        "warmup": _count0,
        "num_chains": _count,
        "target_accept": _open_prob,
        "jit": _bool,
        "reparam": _bool,
    },
}


def check_engine_options(engine: str, options: Any, where: str = "engine_options") -> dict:
    """Refuse unknown options of ``engine`` (with the closest valid one) and bad values, by name."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ConfigError(where, options, "must be a mapping of engine options")
    if engine not in ENGINE_OPTIONS:
        raise ConfigError("engine", engine, f"must be one of {list(ENGINES)}")
    allowed = ENGINE_OPTIONS[engine]
    if options and not allowed:
        key = next(iter(options))
        raise ConfigError(f"{where}.{key}", options[key], f"the {engine} engine takes no options")
    check_keys(options, allowed, where)
    return {k: allowed[k](v, f"{where}.{k}") for k, v in options.items()}

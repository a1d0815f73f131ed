"""Engine options and spec keys, checked by ``infer`` / ``simulate`` / ``compare`` before any work.

Engine options are keyword arguments of :func:`bayescrl.inference.engines.fit`; on the command line they are
``--set engine_options.KEY=VALUE`` (``infer``) or ``--set engine_options.ENGINE.KEY=VALUE`` (``compare``), and
a spec file may hold the same ``engine_options:`` mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bayescrl.models.spec import SPEC_KEYS, check_spec_keys
from bayescrl.utils.checks import boolean, choice, number, positive_int
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import check_keys

ENGINES = ("exact", "laplace", "bootstrap", "svi", "nuts")
__all__ = [
    "ENGINES",
    "ENGINE_OPTIONS",
    "SPEC_KEYS",
    "check_engine_options",
    "check_learner_engine_options",
    "check_spec_keys",
]


def _prob(v, f):
    return number(v, f, 0.0, 1.0)


def _open_prob(v, f):
    x = number(v, f)
    if not 0 < x < 1:
        raise ConfigError(f, v, "must be in (0, 1)")
    return x


def _pos(v, f):
    return number(v, f, 0.0, strict=True)


def _count(v, f):
    return positive_int(v, f)


def _count0(v, f):
    return positive_int(v, f, minimum=0)


def _choice(*allowed):
    def check(v, f):
        return choice(v, f, allowed)

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
        "online_reward_noise": boolean,
        "anchor_prior": boolean,
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
        "check": boolean,
    },
    "nuts": {
        "num_samples": _count,
        "warmup": _count0,
        "num_chains": _count,
        "target_accept": _open_prob,
        "jit": boolean,
        "reparam": boolean,
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


def check_learner_engine_options(engine: str, options: Any, section: str) -> dict:
    """``engine``'s options for a learner that runs ``laplace`` without any (the rater-pool engine
    laplace-eb, or the Newton fit of :func:`~bayescrl.inference.laplace.laplace`): there an option is
    refused, not ignored; the other engines' options are checked by :func:`check_engine_options`.
    ``section`` prefixes the field in errors (``preferences`` -> ``preferences.engine_options.KEY``)."""
    where = f"{section}.engine_options"
    if options is not None and not isinstance(options, Mapping):
        raise ConfigError(where, options, "must be a mapping of engine options")
    if engine == "laplace" and options:
        key = next(iter(options))
        raise ConfigError(
            f"{where}.{key}", options[key], "not used: the laplace engine takes no options here"
        )
    return check_engine_options(engine, options, where)

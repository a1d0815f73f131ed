"""Algorithm registry: name -> ``"module:Class"`` (imported lazily; missing modules give a clear error)."""

from __future__ import annotations

import importlib

from bayescrl.utils.errors import ConfigError

REGISTRY: dict[str, str] = {
    "ecop": "bayescrl.constrained.ecop:ECOP",
    "ppo-lag": "bayescrl.constrained.ppo_lag:PPOLag",
    "p3o": "bayescrl.constrained.p3o:P3O",
    "focops": "bayescrl.constrained.focops:FOCOPS",
    "cpo": "bayescrl.constrained.cpo:CPO",
    "pcpo": "bayescrl.constrained.pcpo:PCPO",
    "ipo": "bayescrl.constrained.ipo:IPO",
    "acpo": "bayescrl.constrained.acpo:ACPO",
    "atrpo": "bayescrl.constrained.atrpo:ATRPO",
    "appo": "bayescrl.constrained.appo:APPO",
}


def get_algorithm(name: str):
    """Return the algorithm class registered under ``name``."""
    if name not in REGISTRY:
        raise ConfigError("algo", name, f"unknown algorithm; choose one of {sorted(REGISTRY)}")
    module_name, _, attr = REGISTRY[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise ConfigError(
                "algo",
                name,
                f"registered as {REGISTRY[name]!r} but module {module_name} is not implemented yet",
            ) from exc
        raise
    if not hasattr(module, attr):
        raise ConfigError("algo", name, f"module {module_name} has no class {attr!r}")
    return getattr(module, attr)


def available() -> list[str]:
    """Names whose modules import."""
    out = []
    for name in REGISTRY:
        try:
            get_algorithm(name)
            out.append(name)
        except ConfigError:
            continue
    return out

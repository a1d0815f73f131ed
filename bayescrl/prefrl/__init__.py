"""Preference-based constrained RL: a Bayesian reward posterior learned from raters of unknown competence
drives any registered constrained optimiser (e-COP, ACPO, PPO-Lagrangian, CPO, ...).

See ``docs/prefrl.md``. ``PreferenceLearner``, ``train_with_preferences`` and ``parse_preference_spec`` are
imported on first use.
"""

from __future__ import annotations

_LAZY = {
    "PreferenceLearner": "bayescrl.prefrl.loop",
    "train_with_preferences": "bayescrl.prefrl.loop",
    "parse_preference_spec": "bayescrl.prefrl.spec",
}
__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'bayescrl.prefrl' has no attribute {name!r}")

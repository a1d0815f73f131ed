"""GPU-batched physics for the Circle and Reach tasks: MuJoCo MJX on JAX (the optional ``mjx`` extra).

:class:`MJXVectorEnv` steps ``num_envs`` copies of a task at once (``jax.jit`` of ``jax.vmap`` of
``mjx.step``) and hands back torch tensors through DLPack, on the accelerator JAX runs on. The robots'
and tasks' observations, rewards, costs and terminations are re-written in JAX from their CPU
definitions (:mod:`bayescrl.envs.mjx.robots`, :mod:`bayescrl.envs.mjx.jax_tasks`);
``tests/test_mjx_parity.py`` checks whole episodes against the CPU envs. The Ant tasks run as their
declared elliptic-cone variants (MJX orients the pyramidal friction cone differently from CPU MuJoCo).

Importing this package needs neither jax nor ``mujoco.mjx``: the names below load them on first use.
"""

from __future__ import annotations

import importlib
import importlib.util

#: gymnasium ids with an MJX backend
MJX_ENV_IDS: tuple[str, ...] = (
    "bayescrl/PointCircle-v0",
    "bayescrl/PointReach-v0",
    "bayescrl/AntCircleElliptic-v0",
    "bayescrl/AntReachElliptic-v0",
)

_LAZY = {
    "MJXVectorEnv": "bayescrl.envs.mjx.vector",
    "JaxCircle": "bayescrl.envs.mjx.jax_tasks",
    "JaxReach": "bayescrl.envs.mjx.jax_tasks",
    "jax_task": "bayescrl.envs.mjx.jax_tasks",
    "jax_robot": "bayescrl.envs.mjx.robots",
}


def mjx_available() -> bool:
    """True when jax and ``mujoco.mjx`` can be imported (the ``mjx`` extra is installed)."""
    try:
        return (
            importlib.util.find_spec("jax") is not None and importlib.util.find_spec("mujoco.mjx") is not None
        )
    except (ImportError, ValueError):  # pragma: no cover - broken install
        return False


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["MJX_ENV_IDS", "mjx_available", *_LAZY]

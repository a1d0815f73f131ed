"""Environment construction: registered ids or ``module:Class``, cost channels, pluggable reward/cost.

Every sub-environment is wrapped in :class:`ConstraintWrapper`, which guarantees ``info["cost"]`` is a
float array of shape ``(m,)`` (from the env's own ``info["cost"]``, scalar or vector, or from a
pluggable ``cost_fn``) and optionally replaces the reward by a pluggable ``reward_fn`` -- so a later
issue can train on a reward drawn from a Bayesian posterior. Vector envs use gymnasium's
``SyncVectorEnv``/``AsyncVectorEnv`` with ``AutoresetMode.SAME_STEP`` so that the final observation
of a truncated episode is available (``info["final_obs"]``) for bootstrapping.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import import_object
from bayescrl.utils.safe_state import encodable

RewardFn = Callable[[np.ndarray, np.ndarray, np.ndarray, dict], float]
CostFn = Callable[[np.ndarray, np.ndarray, np.ndarray, dict], Any]


def _ensure_task_suite() -> None:
    try:  # registers bayescrl/... ids when the task suite exists
        importlib.import_module("bayescrl.envs")
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("bayescrl"):
            raise


def resolve_env_factory(env: str | Callable[..., gym.Env], env_kwargs: dict | None = None):
    """Return a zero-argument factory for ``env`` (a gymnasium id, ``module:Class`` or a callable)."""
    kwargs = dict(env_kwargs or {})
    if callable(env) and not isinstance(env, str):
        return lambda: env(**kwargs)
    if not isinstance(env, str) or not env:
        raise ConfigError("env", env, "expected a registered gymnasium id or 'module:Class'")
    if ":" in env and "/" not in env.split(":")[0]:
        cls = import_object(env, "env")
        _check_render_mode(env, cls, kwargs.get("render_mode"))
        return lambda: cls(**kwargs)
    _ensure_task_suite()
    if env not in gym.registry:
        close = [k for k in gym.registry if env.split("/")[-1].lower() in k.lower()][:5]
        hint = f"; did you mean one of {close}?" if close else ""
        raise ConfigError("env", env, f"not a registered gymnasium id nor 'module:Class'{hint}")
    entry = gym.registry[env].entry_point
    try:
        creator = gym.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry
    except Exception:  # an entry point that cannot be imported fails in gym.make with its own message
        creator = None
    _check_render_mode(env, creator, kwargs.get("render_mode"))
    return lambda: gym.make(env, **kwargs)


def _check_render_mode(env: str, creator: object, mode: object) -> None:
    """Refuse a ``render_mode`` the env does not declare before any run starts (gymnasium would wrap the env
    in a pygame window for ``"human"`` and fail at reset)."""
    if mode is None or creator is None:
        return
    meta = getattr(creator, "metadata", None)
    if not isinstance(meta, dict):  # e.g. a wrapper class, whose metadata is its env's (a property)
        return
    modes = list(meta.get("render_modes") or [])
    if modes and mode not in modes:
        raise ConfigError("env_kwargs.render_mode", mode, f"{env} renders only {modes}")


class ConstraintWrapper(gym.Wrapper):
    """Normalise the cost signal to ``info["cost"]`` of shape ``(m,)`` and apply pluggable callables.

    ``reward_fn(obs, action, next_obs, info) -> float`` replaces the env reward when given;
    ``cost_fn(obs, action, next_obs, info) -> float | array`` replaces the env cost when given.
    ``num_costs`` is fixed at construction (probed by :func:`probe_num_costs`).
    """

    def __init__(
        self, env: gym.Env, num_costs: int, reward_fn: RewardFn | None = None, cost_fn: CostFn | None = None
    ):
        super().__init__(env)
        self.num_costs = num_costs
        self.reward_fn, self.cost_fn = reward_fn, cost_fn
        self._last_obs: np.ndarray | None = None

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._last_obs = obs
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.reward_fn is not None:
            reward = float(self.reward_fn(self._last_obs, action, obs, info))
        if self.cost_fn is not None:
            raw = self.cost_fn(self._last_obs, action, obs, info)
        else:
            raw = info.get("cost", None)
        info = dict(info)
        info["cost"] = _as_cost_vector(raw, self.num_costs)
        self._last_obs = obs
        return obs, reward, terminated, truncated, info


def _as_cost_vector(raw: Any, m: int) -> np.ndarray:
    if raw is None:
        if m == 0:
            return np.zeros(0)
        raise ConfigError("info.cost", None, f"the env returned no cost but {m} cost channel(s) are expected")
    vec = np.atleast_1d(np.asarray(raw, dtype=np.float64)).reshape(-1)
    if vec.shape[0] != m:
        raise ConfigError("info.cost", raw, f"expected {m} cost value(s), got {vec.shape[0]}")
    return vec


def probe_num_costs(factory: Callable[[], gym.Env], cost_fn: CostFn | None = None, seed: int = 0) -> int:
    """Count the env's cost channels by taking one random step (0 when it reports no cost)."""
    env = factory()
    try:
        obs, info = env.reset(seed=seed)
        env.action_space.seed(seed)
        action = env.action_space.sample()
        nobs, _, _, _, info = env.step(action)
        raw = cost_fn(obs, action, nobs, info) if cost_fn is not None else info.get("cost", None)
        if raw is None:
            return 0
        return int(np.atleast_1d(np.asarray(raw)).size)
    finally:
        env.close()


def env_default_limits(factory: Callable[[], gym.Env]) -> list[float] | None:
    """The env's own ``cost_limits`` attribute (e.g. the thesis' thresholds on the task suite), if any."""
    env = factory()
    try:
        lim = getattr(env.unwrapped, "cost_limits", None)
        return None if lim is None else [float(x) for x in np.atleast_1d(lim)]
    finally:
        env.close()


def make_vector_env(
    factory: Callable[[], gym.Env],
    n_envs: int,
    num_costs: int,
    async_envs: bool = False,
    reward_fn: RewardFn | None = None,
    cost_fn: CostFn | None = None,
) -> gym.vector.VectorEnv:
    """A gymnasium vector env (sync by default) of wrapped copies, autoreset in the same step."""

    def make_one():
        return ConstraintWrapper(factory(), num_costs, reward_fn, cost_fn)

    fns = [make_one for _ in range(n_envs)]
    mode = gym.vector.AutoresetMode.SAME_STEP
    if async_envs:
        return gym.vector.AsyncVectorEnv(fns, autoreset_mode=mode, copy=False)
    return gym.vector.SyncVectorEnv(fns, autoreset_mode=mode, copy=False)


def make_mjx_vector_env(
    env: object, n_envs: int, seed: int, device: torch.device, env_kwargs: dict | None, horizon: int
):
    """The ``mjx`` backend: :class:`bayescrl.envs.mjx.MJXVectorEnv` of ``n_envs`` copies on ``device``
    (needs the ``mjx`` extra: jax and mujoco-mjx)."""
    mjx_envs = importlib.import_module("bayescrl.envs.mjx")  # light: jax loads with MJXVectorEnv below
    if not isinstance(env, str) or env not in mjx_envs.MJX_ENV_IDS:
        raise ConfigError("env", env, f"the mjx backend has {list(mjx_envs.MJX_ENV_IDS)}")
    if not mjx_envs.mjx_available():
        raise ConfigError("env_backend", "mjx", "needs jax and mujoco-mjx (pip install 'bayescrl[mjx]')")
    return mjx_envs.MJXVectorEnv(env, n_envs, seed, device, env_kwargs, horizon)


def env_horizon(factory: Callable[[], gym.Env]) -> int | None:
    env = factory()
    try:
        spec = getattr(env, "spec", None)
        if spec is not None and spec.max_episode_steps is not None:
            return int(spec.max_episode_steps)
        h = getattr(env.unwrapped, "max_episode_steps", None)
        return None if h is None else int(h)
    finally:
        env.close()


# ---------------------------------------------------------------------------------------------- snapshots
def snapshot_env(env: gym.Env) -> dict[str, Any] | None:
    """Best-effort exact state of one (wrapped) env, for checkpoint/resume with nothing lost.

    Handles MuJoCo envs (full integration state via ``mj_getState``), wrapper counters such as
    ``TimeLimit._elapsed_steps`` and the env's ``np_random``; other envs by deep-copying the plain
    numeric attributes of ``env.unwrapped``. Returns ``None`` when no snapshot is possible.
    """
    import copy

    state: dict[str, Any] = {"wrappers": []}
    e = env
    while isinstance(e, gym.Wrapper):
        w = {
            k: copy.deepcopy(v)
            for k, v in vars(e).items()
            if k in ("_elapsed_steps", "_last_obs", "_has_reset")
        }
        state["wrappers"].append(w)
        e = e.env
    u = env.unwrapped
    state["np_random"] = copy.deepcopy(u.np_random.bit_generator.state) if u._np_random is not None else None
    if hasattr(u, "model") and hasattr(u, "data") and type(u.data).__module__.startswith("mujoco"):
        import mujoco

        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        buf = np.empty(mujoco.mj_stateSize(u.model, spec))
        mujoco.mj_getState(u.model, u.data, buf, spec)
        state["mujoco"] = buf
    plain = {}
    for k, v in vars(u).items():
        if k.startswith("_np_random") or k in ("model", "data", "mujoco_renderer", "spec"):
            continue
        if isinstance(v, (int, float, bool, np.ndarray, np.generic, tuple, list)) or v is None:
            if not encodable(v):  # checkpoints hold plain values only (loaded with weights_only=True)
                continue
            try:
                plain[k] = copy.deepcopy(v)
            except Exception:  # pragma: no cover - exotic attribute
                continue
    state["plain"] = plain
    return state


def restore_env(env: gym.Env, state: dict[str, Any]) -> None:
    e, i = env, 0
    while isinstance(e, gym.Wrapper):
        for k, v in state["wrappers"][i].items():
            setattr(e, k, v)
        e, i = e.env, i + 1
    u = env.unwrapped
    if state.get("np_random") is not None:
        u.np_random.bit_generator.state = state["np_random"]
    for k, v in state["plain"].items():
        setattr(u, k, v)
    if "mujoco" in state:
        import mujoco

        mujoco.mj_setState(u.model, u.data, state["mujoco"], mujoco.mjtState.mjSTATE_INTEGRATION)

"""Feature maps φ(s, a) of the linear reward r_θ(s, a) = ⟨θ, φ(s, a)⟩.

Every map is a batched torch function of the *encoded* observations (one-hot for ``Discrete`` spaces, flat
for ``Box``; what :class:`~bayescrl.constrained.core.rollout.ObsEncoder` gives, before normalisation) and
the actions, returning ``(N, d)`` float64:

``onehot``  φ(s, a) = e_s ⊗ e_a for ``Discrete`` observations and actions (d = S·A): the linear model is
            then the tabular reward, exactly (the thesis' tabular setting, chapter `PSPL`).
``env``     the env's own ``info["features"]`` (the built-in tasks expose the ingredients of their reward;
            see :mod:`bayescrl.envs.tasks`).
``rff``     random Fourier features of z = (obs, action) (Rahimi & Recht, 2007):
            φ(z) = √(2/W) cos(Ω z / ℓ + b), Ω ~ N(0, I), b ~ U[0, 2π), W = ``rff_width``, so
            ⟨φ(z), φ(z')⟩ ≈ exp(−‖z − z'‖² / (2ℓ²)); discrete actions enter one-hot.
``module:function``  a user's own ``f(obs (N, D), actions (N, ...), env_features (N, k) or None) -> (N, d)``
            (imported from the current directory or the Python path: this runs user code by design).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import gymnasium as gym
import torch

from bayescrl.constrained.core.envs import resolve_env_factory
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import import_object


class FeatureMap:
    """A batched φ: ``fmap(obs, actions, env_features) -> (N, dim)`` float64 tensor."""

    def __init__(self, dim: int, fn: Callable, name: str):
        self.dim, self._fn, self.name = int(dim), fn, name

    def __call__(self, obs: torch.Tensor, actions: torch.Tensor, env_features: torch.Tensor | None = None):
        out = self._fn(obs, actions, env_features)
        return torch.as_tensor(out, device=obs.device).to(torch.float64)


def _space_dim(space: gym.Space) -> int:
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.Box):
        return int(math.prod(space.shape))
    raise ConfigError("env.space", str(space), "only Box and Discrete spaces are supported")


def _action_matrix(actions: torch.Tensor, act_space: gym.Space) -> torch.Tensor:
    if isinstance(act_space, gym.spaces.Discrete):
        return torch.nn.functional.one_hot(actions.long().reshape(-1), int(act_space.n)).double()
    return actions.double().reshape(actions.shape[0], -1)


def make_feature_map(
    name: str,
    obs_space: gym.Space,
    act_space: gym.Space,
    *,
    rff_width: int = 256,
    rff_lengthscale: float = 1.0,
    seed: int = 0,
    env_feature_dim: int | None = None,
    device: str | torch.device = "cpu",
) -> FeatureMap:
    """The feature map called ``name`` for these spaces (errors name the field and the reason)."""
    if name == "onehot":
        return _onehot_map(obs_space, act_space)
    if name == "env":
        return _env_map(env_feature_dim)
    if name == "rff":
        return _rff_map(obs_space, act_space, int(rff_width), float(rff_lengthscale), int(seed))
    if ":" in name:
        return _user_map(name, obs_space, act_space, env_feature_dim)
    raise ConfigError("preferences.features", name, "must be onehot, env, rff or module:function")


def _onehot_map(obs_space: gym.Space, act_space: gym.Space) -> FeatureMap:
    """``φ(s, a) = e_s ⊗ e_a`` (d = S·A): the linear reward is the tabular one."""
    if not (isinstance(obs_space, gym.spaces.Discrete) and isinstance(act_space, gym.spaces.Discrete)):
        raise ConfigError(
            "preferences.features",
            "onehot",
            f"needs Discrete observations and actions (got {obs_space} and {act_space}); use rff or env",
        )
    S, A = int(obs_space.n), int(act_space.n)

    def onehot(obs, actions, _):
        a = torch.nn.functional.one_hot(actions.long().reshape(-1), A).double()
        return (obs.double()[:, :, None] * a[:, None, :]).reshape(obs.shape[0], S * A)

    return FeatureMap(S * A, onehot, "onehot")


def _env_map(env_feature_dim: int | None) -> FeatureMap:
    """The env's own ``info["features"]`` (refused where the env reports none)."""
    if env_feature_dim is None:
        raise ConfigError("preferences.features", "env", "the env does not report info['features']")

    def env(_obs, _actions, feats):
        if feats is None:
            raise ConfigError("preferences.features", "env", "no info['features'] in this rollout")
        return feats

    return FeatureMap(env_feature_dim, env, "env")


def _rff_map(
    obs_space: gym.Space, act_space: gym.Space, width: int, lengthscale: float, seed: int
) -> FeatureMap:
    """Random Fourier features ``√(2/W) cos(Ω z / ℓ + b)`` of ``z = (obs, action)``, ``Ω`` and ``b`` drawn
    from a generator seeded with ``seed + 7919``."""
    D = _space_dim(obs_space) + _space_dim(act_space)
    gen = torch.Generator().manual_seed(seed + 7919)
    omega = torch.randn(D, width, generator=gen, dtype=torch.float64) / lengthscale
    phase = 2 * math.pi * torch.rand(width, generator=gen, dtype=torch.float64)
    scale = math.sqrt(2.0 / width)

    def rff(obs, actions, _):
        z = torch.cat([obs.double().reshape(obs.shape[0], -1), _action_matrix(actions, act_space)], 1)
        return scale * torch.cos(z @ omega.to(z.device) + phase.to(z.device))

    return FeatureMap(width, rff, "rff")


def _user_map(
    name: str, obs_space: gym.Space, act_space: gym.Space, env_feature_dim: int | None
) -> FeatureMap:
    """A user's ``module:function``, probed once on two zero rows to learn ``d`` (and to fail early)."""
    fn = import_object(name, "preferences.features")
    n = 2
    obs = torch.zeros(n, _space_dim(obs_space), dtype=torch.float64, device="cpu")
    if isinstance(act_space, gym.spaces.Discrete):
        acts = torch.zeros(n, dtype=torch.long, device="cpu")
    else:
        acts = torch.zeros(n, *act_space.shape, dtype=torch.float64, device="cpu")
    envf = (
        None
        if env_feature_dim is None
        else torch.zeros(n, env_feature_dim, dtype=torch.float64, device="cpu")
    )
    try:
        probe = torch.as_tensor(fn(obs, acts, envf), device="cpu")
    except Exception as exc:  # the user's function: report it as a config error, one line
        raise ConfigError("preferences.features", name, f"calling it failed: {exc}") from None
    if probe.dim() != 2 or probe.shape[0] != n:
        raise ConfigError(
            "preferences.features", name, f"must return an (N, d) array, got shape {tuple(probe.shape)}"
        )
    return FeatureMap(int(probe.shape[1]), fn, name)


def reward_linearity(env_id: str, steps: int = 1000, seed: int = 0, env_kwargs: dict | None = None) -> dict:
    """How linear an env's reward is in its ``info["features"]``: R² of the least-squares fit
    r ≈ ⟨w, φ⟩ + c over ``steps`` steps of uniformly random actions, with the fitted ``w``."""
    import numpy as np

    env = resolve_env_factory(env_id, env_kwargs)()
    try:
        env.reset(seed=seed)
        env.action_space.seed(seed)
        feats, rews = [], []
        for _ in range(int(steps)):
            _, r, term, trunc, info = env.step(env.action_space.sample())
            if "features" not in info:
                raise ConfigError("features", env_id, "the env does not report info['features']")
            feats.append(np.asarray(info["features"], dtype=float))
            rews.append(float(r))
            if term or trunc:
                env.reset()
    finally:
        env.close()
    X = np.column_stack([np.stack(feats), np.ones(len(rews))])
    y = np.asarray(rews)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    ss = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((y - X @ coef) ** 2).sum()) / ss if ss > 0 else float("nan")
    names = list(getattr(env.unwrapped, "feature_names", ())) or [f"f{i}" for i in range(X.shape[1] - 1)]
    return {"r2": r2, "weights": dict(zip(names, coef[:-1].tolist(), strict=True)), "steps": int(steps)}

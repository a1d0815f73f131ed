"""Actions of a policy network for raw observations: the one code path behind ``predict`` of a training
algorithm (:meth:`~bayescrl.constrained.core.base.OnPolicyAlgorithm.predict`) and of a loaded policy
(:class:`~bayescrl.constrained.policy.TrainedPolicy`).

The observation goes through the run's encoder (one-hot for Discrete spaces) and its running mean/std
normalisation (frozen: never updated here), exactly as in
:meth:`~bayescrl.constrained.core.base.OnPolicyAlgorithm.evaluate`; Box actions are clipped to the action
space's bounds, as evaluation does before ``env.step``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from bayescrl.constrained.core.normalize import RunningMeanStd
from bayescrl.constrained.core.rollout import ObsEncoder
from bayescrl.utils.checks import boolean
from bayescrl.utils.errors import ConfigError, DataError


def batch_obs(space: gym.Space, obs: Any) -> tuple[np.ndarray, bool]:
    """``obs`` as a batch along the first axis, and whether it was a single observation."""
    arr = np.asarray(obs)
    if isinstance(space, gym.spaces.Discrete):
        single = arr.ndim == 0
        arr = arr.reshape(-1)
        if arr.dtype.kind not in "iu" or np.any((arr < 0) | (arr >= space.n)):
            raise DataError("obs", obs, f"must be integer state(s) in [0, {space.n})")
        return arr, single
    shape = tuple(space.shape)
    if arr.shape == shape:
        return arr.reshape(1, *shape), True
    if arr.ndim == len(shape) + 1 and arr.shape[1:] == shape:
        return arr, False
    raise DataError("obs", list(arr.shape), f"must have shape {shape} or (N, *{shape})")


def time_index(step: Any, n: int) -> np.ndarray:
    """``step`` (one 0-based time index, or one per observation) as ``n`` float32 indices."""
    why = f"must be a time index >= 0 (one, or {n}: one per observation)"
    try:
        h = np.asarray(step)
    except (TypeError, ValueError):  # ragged lists
        raise DataError("step", step, why) from None
    if h.dtype.kind not in "fiu" or h.ndim > 1 or not np.all(np.isfinite(h)) or np.any(h < 0):
        raise DataError("step", step, why)
    try:
        return np.broadcast_to(h.astype(np.float32), (n,))
    except ValueError:
        raise DataError("step", step, why) from None


def predict_actions(
    policy: torch.nn.Module,
    encoder: ObsEncoder,
    rms: RunningMeanStd | None,
    observation_space: gym.Space,
    action_space: gym.Space,
    horizon: int,
    time_feature: bool,
    obs: Any,
    deterministic: bool = True,
    step: int | np.ndarray | None = None,
    device: str | torch.device = "cpu",
) -> np.ndarray:
    """Action(s) for ``obs`` (one observation, or a batch along the first axis), numpy in and out.

    ``deterministic=True`` takes the mean (Gaussian) or the most likely action (Categorical); ``False``
    samples with torch's global generator. ``step`` (0-based time index within the episode) is needed
    only by policies trained with ``time_feature=True``.
    """
    boolean(deterministic, "deterministic")
    x, single = batch_obs(observation_space, obs)
    enc = encoder(x)
    if not np.all(np.isfinite(enc)):
        raise DataError("obs", obs, "must be finite")
    normed = enc.astype(np.float32) if rms is None else rms.normalize(enc)
    inp = torch.as_tensor(normed, dtype=torch.float32, device=device)
    if time_feature:
        if step is None:
            raise ConfigError("step", None, "this policy reads the time index; pass step= (0-based)")
        h = time_index(step, inp.shape[0])
        tf = torch.as_tensor(h / horizon, device=device).reshape(-1, 1)
        inp = torch.cat([inp, tf], 1)
    with torch.no_grad():
        a, _ = policy.act(inp, deterministic=deterministic)
    a_np = a.cpu().numpy()
    if isinstance(action_space, gym.spaces.Box):
        a_np = np.clip(a_np, action_space.low, action_space.high)
        a_np = a_np.reshape(a_np.shape[0], *action_space.shape)
    return a_np[0] if single else a_np

"""A trained constrained-RL policy as a plain predictor: ``bayescrl.load(run_dir).predict(obs)``.

:func:`load` reads ``run_dir/checkpoint.pt`` (written by ``bayescrl train`` or
:meth:`~bayescrl.constrained.core.base.OnPolicyAlgorithm.learn` with ``out_dir``) with
``weights_only=True``, rebuilds the policy network and the observation normalisation saved with it, and
returns a :class:`TrainedPolicy`. Nothing is trained or checkpointed again, and the global random
states (torch, numpy, python) are left as they were.
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from bayescrl.constrained.core.base import OnPolicyAlgorithm
from bayescrl.constrained.core.normalize import RunningMeanStd
from bayescrl.constrained.core.predict import predict_actions
from bayescrl.constrained.core.rollout import ObsEncoder
from bayescrl.constrained.registry import get_algorithm
from bayescrl.utils.errors import DataError


class TrainedPolicy:
    """``predict(obs, deterministic=True) -> action``, numpy in and out, single or batched observations.

    The observation goes through the run's encoder (one-hot for Discrete spaces) and its running
    mean/std normalisation (frozen at the checkpoint), exactly as in
    :meth:`~bayescrl.constrained.core.base.OnPolicyAlgorithm.evaluate`; Box actions are clipped to the
    action space's bounds, as evaluation does before ``env.step``.
    """

    def __init__(
        self,
        policy: torch.nn.Module,
        encoder: ObsEncoder,
        rms: RunningMeanStd | None,
        observation_space: gym.Space,
        action_space: gym.Space,
        horizon: int,
        time_feature: bool,
        info: dict[str, Any] | None = None,
        device: str | torch.device = "cpu",
    ):
        self.policy, self.encoder, self.rms = policy.eval(), encoder, rms
        self.observation_space, self.action_space = observation_space, action_space
        self.horizon, self.time_feature = int(horizon), bool(time_feature)
        self.info = dict(info or {})
        self.device = torch.device(device)

    def __repr__(self) -> str:
        return (
            f"TrainedPolicy(algo={self.info.get('algo')!r}, env={self.info.get('env')!r}, "
            f"iteration={self.info.get('iteration')}, obs={self.observation_space}, act={self.action_space})"
        )

    def predict(
        self,
        obs: Any,
        deterministic: bool = True,
        step: int | np.ndarray | None = None,
    ) -> np.ndarray:
        """Action(s) for ``obs`` (one observation, or a batch along the first axis); see
        :func:`~bayescrl.constrained.core.predict.predict_actions`.

        ``deterministic=True`` takes the mean (Gaussian) or the most likely action (Categorical);
        ``False`` samples with torch's global generator. ``step`` (time index within the episode) is
        needed only by policies trained with ``time_feature=True``.
        """
        return predict_actions(
            self.policy,
            self.encoder,
            self.rms,
            self.observation_space,
            self.action_space,
            self.horizon,
            self.time_feature,
            obs,
            deterministic,
            step,
            self.device,
        )


@contextmanager
def _global_rng_untouched():
    states = torch.get_rng_state(), np.random.get_state(), random.getstate()  # noqa: NPY002
    try:
        yield
    finally:
        torch.set_rng_state(states[0])
        np.random.set_state(states[1])  # noqa: NPY002
        random.setstate(states[2])


def load(run_dir: str | Path, device: str | torch.device = "cpu") -> TrainedPolicy:
    """The policy saved in ``run_dir/checkpoint.pt`` as a :class:`TrainedPolicy`.

    The run must have used an env id (``module:Class`` or a registered name), from which the
    observation and action spaces are rebuilt; a ``module:Class`` id imports that module (user code),
    as training did.
    """
    st = OnPolicyAlgorithm.read_checkpoint(run_dir, "run_dir")
    if st["env"] is None:
        raise DataError(
            "checkpoint", str(run_dir), "the run used an env object, not an id: rebuild it by hand"
        )
    cfg = dict(st["config"], n_envs=1, async_envs=False)  # one env is enough to know the spaces
    with _global_rng_untouched():
        algo = get_algorithm(st["algo"])(
            st["env"], st["cost_limits"], st["seed"], cfg, device=device, env_kwargs=st["env_kwargs"]
        )
    try:
        algo.policy.load_state_dict(st["policy"])
        if algo.rms is not None and st.get("rms") is not None:
            algo.rms.load_state_dict(st["rms"])
        info = {
            "algo": st["algo"],
            "env": st["env"],
            "env_kwargs": st["env_kwargs"],
            "cost_limits": st["cost_limits"],
            "seed": st["seed"],
            "iteration": st["iteration"],
            "env_steps": st["collector"]["global_step"],
            "run_dir": str(run_dir),
        }
        return TrainedPolicy(
            algo.policy,
            algo.encoder,
            algo.rms,
            algo.envs.single_observation_space,
            algo.envs.single_action_space,
            algo.horizon,
            algo.policy_time,
            info,
            device,
        )
    finally:
        algo.close()

"""How something outside the optimiser changes what it optimises, without reading its internals.

A :class:`RewardAdapter` (OmniSafe's adapters, TRL's reward functions) is handed every rollout before
advantages are computed and may return it with other rewards or costs — a learned reward
(:mod:`bayescrl.prefrl`), a shaped cost, a relabelled batch. It sees the algorithm only through an
:class:`AlgorithmView`: the env's spaces, the budget, the limits, where training stands.

    class Negate(BaseRewardAdapter):
        def relabel(self, batch):
            return dataclasses.replace(batch, rewards=batch.rewards * [-1.0, 1.0])

    agent.set_reward_adapter(Negate())
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import torch

from bayescrl.constrained.core.envs import env_horizon
from bayescrl.constrained.core.protocol import TrainingAlgorithm
from bayescrl.constrained.core.rollout import RolloutBatch


class AlgorithmView:
    """Read-only facts about an optimiser and where its training stands (what an adapter may use)."""

    def __init__(self, algo: TrainingAlgorithm):
        self._algo = algo

    @property
    def name(self) -> str:
        return self._algo.name

    @property
    def env_id(self) -> Any:
        """The env id (or factory) the optimiser was built with."""
        return self._algo.env_id

    @property
    def make_env(self) -> Callable[[], gym.Env]:
        """A factory of one fresh env like the training ones."""
        return self._algo.factory

    @property
    def observation_space(self) -> gym.Space:
        return self._algo.envs.single_observation_space

    @property
    def action_space(self) -> gym.Space:
        return self._algo.envs.single_action_space

    @property
    def num_envs(self) -> int:
        return self._algo.envs.num_envs

    @property
    def num_costs(self) -> int:
        """``m``, the number of cost channels."""
        return self._algo.m

    @property
    def horizon(self) -> int:
        """``H``, the episode horizon used by the estimates."""
        return self._algo.horizon

    @property
    def episode_horizon(self) -> int | None:
        """The horizon set in the config or reported by the env; None when :attr:`horizon` is only the
        fallback of an env without one."""
        known = self._algo.config.horizon or env_horizon(self._algo.factory)
        return None if known is None else int(known)

    @property
    def rollout_steps(self) -> int:
        """Vector steps per rollout (per env)."""
        return int(self._algo.config.rollout_steps)

    @property
    def cost_limits(self) -> list[float]:
        return [float(d) for d in self._algo.cost_limits]

    @property
    def average_reward(self) -> bool:
        """True when the optimiser maximises an average reward per step (limits are per-step rates)."""
        return getattr(self._algo.config, "advantage", "") == "average"

    def episode_cost_limits(self) -> list[float]:
        return self._algo.episode_cost_limits()

    def episode_limit_labels(self) -> list[str]:
        return self._algo.episode_limit_labels()

    @property
    def seed(self) -> int:
        return self._algo.seed

    @property
    def device(self) -> torch.device:
        return self._algo.device

    @property
    def checkpoint_every(self) -> int:
        """Iterations between checkpoints (0: only at the end)."""
        return int(self._algo.config.checkpoint_every or 0)

    @property
    def iteration(self) -> int:
        """Completed iterations (the rollout being relabelled is iteration ``iteration + 1``)."""
        return self._algo.iteration

    @property
    def env_steps(self) -> int:
        return self._algo.collector.global_step

    @property
    def total_steps(self) -> int | None:
        """The budget of the current :meth:`~OnPolicyAlgorithm.learn` call (None before the first)."""
        return self._algo.total_steps

    @property
    def exact_resume(self) -> bool:
        """False when a resumed run could not restore its envs exactly (its episodes start anew)."""
        return getattr(self._algo, "exact_resume", True)


@runtime_checkable
class RewardAdapter(Protocol):
    """What an optimiser calls: ``relabel`` every rollout, ``on_iteration`` after every update (it may
    add fields to the iteration record), ``should_stop`` to end :meth:`learn` after this iteration."""

    #: an ``info`` key the collector records per step into :attr:`RolloutBatch.info` (None: none)
    record_info: str | None

    def relabel(self, batch: RolloutBatch) -> RolloutBatch: ...

    def on_iteration(self, view: AlgorithmView, record: dict) -> None: ...

    def should_stop(self) -> bool: ...


class BaseRewardAdapter:
    """A :class:`RewardAdapter` that changes nothing; subclass and override what you need."""

    record_info: str | None = None

    def relabel(self, batch: RolloutBatch) -> RolloutBatch:
        return batch

    def on_iteration(self, view: AlgorithmView, record: dict) -> None:
        pass

    def should_stop(self) -> bool:
        return False

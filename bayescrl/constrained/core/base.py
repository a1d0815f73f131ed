"""The common on-policy training loop every constrained algorithm (e-COP, baselines, ACPO) plugs into.

:meth:`OnPolicyAlgorithm.learn` reads like CleanRL: rollout, reward adapter, advantages, update, callbacks.
Logging, checkpoints, progress and plots are callbacks (:mod:`~bayescrl.constrained.core.callbacks`); a
learned reward or cost comes in through a :class:`~bayescrl.constrained.core.adapter.RewardAdapter`.

Subclass :class:`OnPolicyAlgorithm`, set ``name`` and ``config_class`` (a :class:`TrainConfig`
subclass), and implement :meth:`update_policy`. Optional hooks: :meth:`setup` (after networks and
optimisers exist), :meth:`update` (default: policy, then critics), :meth:`extra_state` /
:meth:`load_extra_state` (anything to checkpoint), :meth:`multipliers` (logged per iteration).
See ``docs/ecop.md`` ("Plugging in an algorithm").

Every algorithm inherits Stable-Baselines3's interface: :meth:`~OnPolicyAlgorithm.predict` ``(obs) ->
(action, state)``, :meth:`~OnPolicyAlgorithm.save` ``(path)`` and :meth:`~OnPolicyAlgorithm.load`
``(path, env=None)``, on the checkpoint format of ``bayescrl train`` / ``--resume``.
"""

from __future__ import annotations

import numbers
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch

from bayescrl.constrained.core.adapter import AlgorithmView, RewardAdapter
from bayescrl.constrained.core.advantages import average_gae, discounted_gae, finite_horizon_advantages
from bayescrl.constrained.core.callbacks import (
    METRICS_LINES,
    Checkpointer,
    MaybeCallback,
    MetricsWriter,
    ProgressBar,
    as_callback,
)
from bayescrl.constrained.core.config import TrainConfig
from bayescrl.constrained.core.envs import (
    ConstraintWrapper,
    CostFn,
    RewardFn,
    env_default_limits,
    env_horizon,
    make_mjx_vector_env,
    make_vector_env,
    probe_num_costs,
    resolve_env_factory,
)
from bayescrl.constrained.core.networks import CategoricalPolicy, EnsembleMLP, GaussianPolicy
from bayescrl.constrained.core.normalize import RunningMeanStd
from bayescrl.constrained.core.predict import predict_actions
from bayescrl.constrained.core.rollout import Batch, ObsEncoder, RolloutBatch, RolloutCollector
from bayescrl.constrained.core.rollout_torch import TorchRolloutCollector
from bayescrl.constrained.registry import get_algorithm
from bayescrl.utils.checks import boolean, check_device, check_seed, number
from bayescrl.utils.errors import ConfigError, DataError
from bayescrl.utils.io import to_jsonable, write_json
from bayescrl.utils.optim import make_adam
from bayescrl.utils.plotting import plt
from bayescrl.utils.safe_state import encodable, load_state, save_state

CHECKPOINT = "checkpoint.pt"
__all__ = ["CHECKPOINT", "METRICS_LINES", "OnPolicyAlgorithm", "checkpoint_file"]


def checkpoint_file(path: str | Path) -> Path:
    """The checkpoint file of ``path``: ``path`` itself when it names a ``*.pt`` file (or an existing
    file), else ``path/checkpoint.pt`` (a run folder)."""
    path = Path(path)
    return path if path.suffix == ".pt" or path.is_file() else path / CHECKPOINT


class OnPolicyAlgorithm:
    """Base class: rollouts, advantages, critics, logging, evaluation, checkpoint/resume."""

    name: ClassVar[str] = "base"
    config_class: ClassVar[type[TrainConfig]] = TrainConfig
    #: algorithms that only support a single constraint (as in their papers) set this to 1
    max_constraints: ClassVar[int | None] = None
    #: ``cost_limits`` are average costs per step (ACPO), not budgets per episode: plots scale them by ``H``,
    #: and without explicit limits the env's per-episode ones are divided by ``H``
    limits_per_step: ClassVar[bool] = False

    def __init__(
        self,
        env: str | Any,
        cost_limits: list[float] | float | None = None,
        seed: int = 0,
        config: TrainConfig | dict | None = None,
        device: str | torch.device = "cpu",
        env_kwargs: dict | None = None,
        reward_fn: RewardFn | None = None,
        cost_fn: CostFn | None = None,
    ):
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ConfigError("seed", seed, "must be an integer >= 0")
        self.config = self._check_config(config)
        self.env_id, self.env_kwargs, self.seed = env, dict(env_kwargs or {}), seed
        self.device = torch.device(check_device(device))
        self.reward_fn, self.cost_fn = reward_fn, cost_fn
        #: relabels every rollout before advantages (a learned reward, see :mod:`bayescrl.prefrl`)
        self.reward_adapter: RewardAdapter | None = None
        #: the budget of the current (or last) :meth:`learn` call
        self.total_steps: int | None = None
        torch.manual_seed(seed)
        np.random.seed(seed % 2**32)  # noqa: NPY002 - global state, checkpointed for resume
        random.seed(seed)
        self.rng = np.random.default_rng(seed)  # action sampling during rollouts
        self.factory = resolve_env_factory(env, env_kwargs)
        self.m = probe_num_costs(self.factory, cost_fn, seed)
        self.horizon = self._resolve_horizon()
        self.cost_limits = self._resolve_limits(cost_limits)
        self._make_envs()
        self._make_networks()
        self.iteration = 0
        self.cum_cost = np.zeros(self.m)
        self.history: list[dict] = []
        self.last_eval: dict | None = None
        self._started = False
        self.setup()

    def _check_config(self, config: TrainConfig | dict | None) -> TrainConfig:
        """``config`` as this algorithm's :attr:`config_class` (a mapping is parsed and validated; a built
        config is checked again, its fields may have been set after it was built)."""
        config = config if isinstance(config, TrainConfig) else self.config_class.from_dict(config)
        if not isinstance(config, self.config_class):
            raise ConfigError(
                "config", type(config).__name__, f"{self.name} needs {self.config_class.__name__}"
            )
        return config.check()

    def _resolve_horizon(self) -> int:
        """The episode horizon ``H``: ``config.horizon``, else the env spec's, else 1000 (refused for
        ``finite_horizon`` advantages, which need the true ``H``)."""
        horizon = self.config.horizon or env_horizon(self.factory)
        if horizon is None:
            if self.config.advantage == "finite_horizon":
                raise ConfigError(
                    "horizon", None, "finite_horizon advantages need a horizon H (set config.horizon)"
                )
            horizon = 1000
        return int(horizon)

    def _resolve_limits(self, cost_limits) -> torch.Tensor:
        """The checked limits ``d_1..d_m``; without any, the env's own (per episode, or divided by ``H``
        where :attr:`limits_per_step`). More than :attr:`max_constraints` is refused."""
        if cost_limits is None and self.m > 0:
            cost_limits = env_default_limits(self.factory)  # budgets per episode
            if cost_limits is not None and self.limits_per_step:
                cost_limits = [d / self.horizon for d in cost_limits]  # the same budget as a rate per step
        limits = self._check_limits(cost_limits)
        if self.max_constraints is not None and self.m > self.max_constraints:
            raise ConfigError(
                "cost_limits",
                limits.tolist(),
                f"{self.name} supports at most {self.max_constraints} constraint(s), as in its paper",
            )
        return limits

    def _make_envs(self) -> None:
        """The vector env (gym on the CPU, or MJX on the device), the observation encoder, the running
        observation statistics (``normalize_obs``) and the rollout collector."""
        cfg, env, seed = self.config, self.env_id, self.seed
        if cfg.env_backend == "mjx":  # batched physics on the accelerator, rollouts as torch tensors
            if self.reward_fn is not None or self.cost_fn is not None:
                raise ConfigError("env_backend", "mjx", "reward_fn/cost_fn need the gym backend")
            self.envs = make_mjx_vector_env(env, cfg.n_envs, seed, self.device, self.env_kwargs, self.horizon)
        else:
            self.envs = make_vector_env(
                self.factory, cfg.n_envs, self.m, cfg.async_envs, self.reward_fn, self.cost_fn
            )
        self.encoder = ObsEncoder(self.envs.single_observation_space)
        self.rms = (
            RunningMeanStd((self.encoder.dim,), cfg.obs_clip)
            if cfg.normalize_obs and not self.encoder.discrete
            else None
        )
        if cfg.env_backend == "mjx":
            self.collector = TorchRolloutCollector(self.envs, self.rms, self.m, self.horizon, self.device)
        else:
            self.collector = RolloutCollector(
                self.envs, self.encoder, self.rms, self.m, self.horizon, self.device
            )
        self.policy_time = cfg.time_feature
        self.collector.policy_time = self.policy_time
        self.critic_time = cfg.advantage == "finite_horizon"

    def _make_networks(self) -> None:
        """Policy (Gaussian for Box actions, categorical for Discrete), the ``1 + m`` critics, their Adam
        optimisers and the discount of each channel."""
        cfg = self.config
        act_space = self.envs.single_action_space
        pdim = self.encoder.dim + int(self.policy_time)
        if isinstance(act_space, gym.spaces.Box):
            self.policy = GaussianPolicy(
                pdim, int(np.prod(act_space.shape)), cfg.actor_hidden, cfg.activation, cfg.log_std_init
            )
        elif isinstance(act_space, gym.spaces.Discrete):
            self.policy = CategoricalPolicy(pdim, int(act_space.n), cfg.actor_hidden, cfg.activation)
        else:
            raise ConfigError(
                "env.action_space", str(act_space), "only Box and Discrete actions are supported"
            )
        self.critic = EnsembleMLP(
            1 + self.m, self.encoder.dim + int(self.critic_time), cfg.critic_hidden, cfg.activation
        )
        self.policy.to(self.device)
        self.critic.to(self.device)
        self.pi_optim = make_adam(self.policy.parameters(), lr=cfg.pi_lr)
        self.vf_optim = make_adam(self.critic.parameters(), lr=cfg.vf_lr)
        gam_c = cfg.gamma if cfg.cost_gamma is None else cfg.cost_gamma
        self.gammas = torch.tensor([cfg.gamma] + [gam_c] * self.m, dtype=torch.float64, device="cpu")

    # ------------------------------------------------------------------ hooks for subclasses
    def setup(self) -> None:
        """Called at the end of ``__init__`` (networks, optimisers, ``self.m`` exist)."""

    def update_policy(self, batch: Batch) -> dict[str, float]:  # pragma: no cover - abstract
        raise NotImplementedError

    def update(self, batch: Batch) -> dict[str, float]:
        """Policy step, then the critics (unless the policy step already fitted them, see
        :func:`~bayescrl.constrained.core.ppo.first_order_policy_update`)."""
        self._critics_updated = False
        logs = self.update_policy(batch)
        if not self._critics_updated:
            logs.update(self.update_critics(batch))
        return logs

    def extra_state(self) -> dict[str, Any]:
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        pass

    def multipliers(self) -> list[float]:
        """Current Lagrange multipliers / penalty factors (one per constraint) for logging."""
        return []

    # ------------------------------------------------------------------ reward adapter
    def view(self) -> AlgorithmView:
        """A read-only view of this algorithm (env spaces, budget, limits, iteration) for adapters."""
        return AlgorithmView(self)

    def set_reward_adapter(self, adapter: RewardAdapter | None) -> None:
        """Route every rollout through ``adapter.relabel`` before advantages (None: the env's rewards);
        the collector records ``info[adapter.record_info]`` into :attr:`RolloutBatch.info`."""
        self.reward_adapter = adapter
        self.collector.record_info = None if adapter is None else adapter.record_info

    # ------------------------------------------------------------------ input builders
    def policy_input(self, obs: np.ndarray | torch.Tensor, h) -> torch.Tensor:
        x = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        if self.policy_time:
            tf = (torch.as_tensor(h, dtype=torch.float32, device=self.device) / self.horizon).reshape(-1, 1)
            x = torch.cat([x, tf], 1)
        return x

    def critic_input(self, obs: torch.Tensor, h) -> torch.Tensor:
        x = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        if self.critic_time:
            tf = torch.as_tensor(h, dtype=torch.float32, device=self.device).reshape(-1, 1) / self.horizon
            x = torch.cat([x, tf], 1)
        return x

    def critic_value(self, obs, h) -> torch.Tensor:
        return self.critic(self.critic_input(obs, h))

    # ------------------------------------------------------------------ limits
    def _check_limits(self, limits) -> torch.Tensor:
        if limits is None:
            limits = []
        if isinstance(limits, (np.ndarray, torch.Tensor)):
            limits = limits.tolist()
        if isinstance(limits, numbers.Real):
            limits = [limits]
        if not isinstance(limits, (list, tuple)):
            raise ConfigError("cost_limits", limits, "must be a number or a list of numbers")
        limits = list(limits)
        if len(limits) != self.m:
            raise ConfigError(
                "cost_limits",
                limits,
                f"the env reports {self.m} cost channel(s); give exactly {self.m} limit(s)",
            )
        limits = [number(d, "cost_limits", low=0, index=i) for i, d in enumerate(limits)]
        return torch.tensor(limits, dtype=torch.float64, device="cpu")

    # ------------------------------------------------------------------ advantages
    def compute_advantages(self, roll: RolloutBatch) -> Batch:
        """Advantages and critic targets of every channel; the flat :class:`Batch` of the update."""
        dev = self.device  # the rollout's arrays go to the device once per iteration, here
        rewards = torch.as_tensor(roll.rewards, device=dev)
        values = roll.values.to(dev)
        adv, ret, avg = self._channel_advantages(roll, rewards, values)
        T, n = roll.h.shape
        B = T * n
        j_r, j_c = self._episode_estimates(roll)
        return Batch(
            obs=torch.as_tensor(roll.obs.reshape(B, -1), device=dev),
            h=torch.as_tensor(roll.h.reshape(B), device=dev),
            actions=torch.as_tensor(roll.actions.reshape(B, *roll.actions.shape[2:]), device=dev),
            logp=torch.as_tensor(roll.logp.reshape(B), device=dev),
            rewards=rewards.reshape(B, -1).float(),
            values=values.reshape(B, -1).float(),
            advantages=adv.reshape(B, -1).float(),
            returns=ret.reshape(B, -1).float(),
            ep_returns=roll.ep_returns,
            ep_costs=roll.ep_costs,
            ep_lengths=roll.ep_lengths,
            ep_return_est=j_r,
            ep_cost_est=j_c.double(),
            raw_obs=roll.raw.reshape(B, -1),
            horizon=self.horizon,
            avg_rates=avg,
        )

    def _channel_advantages(
        self, roll: RolloutBatch, rewards: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``(advantages, critic targets, Ĵ)`` of every channel, ``(T, n, 1 + m)``, by ``config.advantage``:
        discounted GAE, average-reward GAE (Eq. `avg_GAE`; ``Ĵ`` per channel, else ``None``) or the
        finite-horizon advantages (:mod:`~bayescrl.constrained.core.advantages`)."""
        cfg, dev = self.config, self.device
        term, end = torch.as_tensor(roll.terminated, device=dev), torch.as_tensor(roll.ended, device=dev)
        next_values = roll.next_values.to(dev)
        gammas = self.gammas.to(dev)
        if cfg.advantage == "discounted":
            adv, ret = discounted_gae(rewards, values, next_values, term, end, gammas, cfg.gae_lambda)
            return adv, ret, None
        if cfg.advantage == "average":
            rates = self.average_rates(rewards, roll.h)
            return average_gae(rewards, values, next_values, term, end, cfg.gae_lambda, rates)
        at_horizon = torch.as_tensor(roll.at_horizon, device=dev)
        adv, ret = finite_horizon_advantages(
            rewards, values, next_values, at_horizon, term, end, cfg.gae_lambda, gammas
        )
        return adv, ret, None

    def _episode_estimates(self, roll: RolloutBatch) -> tuple[float, torch.Tensor]:
        """``(Ĵ_r, Ĵ_C)``: the mean return and costs of the episodes that ended in the rollout, or, when
        none did, the per-step rates times the horizon ``H``."""
        ep_ret, ep_costs = roll.ep_returns, roll.ep_costs
        if len(ep_ret):
            return float(ep_ret.mean()), torch.as_tensor(ep_costs.mean(0), device="cpu")
        j_r = float(roll.rewards[..., 0].mean() * self.horizon)
        if self.m == 0:  # no cost channels: reshape(-1, 0) is ambiguous
            return j_r, torch.zeros(0, dtype=torch.float64, device="cpu")
        j_c = torch.as_tensor(roll.rewards[..., 1:].reshape(-1, self.m).mean(0) * self.horizon, device="cpu")
        return j_r, j_c

    def average_rates(self, rewards: torch.Tensor, h) -> torch.Tensor | None:
        """``Ĵ`` per channel for the average-reward GAE (``None``: the batch mean, Eq. `avg_GAE`)."""
        return None

    @staticmethod
    def normalize(x: torch.Tensor, center_only: bool = False) -> torch.Tensor:
        x = x - x.mean(0)
        return x if center_only else x / (x.std(0) + 1e-8)

    @classmethod
    def normalize_cost_advantages(cls, adv_c: torch.Tensor, costs: torch.Tensor) -> torch.Tensor:
        """Cost advantages ``(B, m)`` normalised per channel to mean 0 and sd 1 (chapter `acpo`'s appendix
        `Experimental Details`), except a channel whose raw per-step costs ``costs[:, i]`` are all zero in
        this batch: it is only centred.  Its advantages are then value-function differences alone (no cost
        was observed), and scaling them to unit sd would give critic noise the weight of a real cost
        signal; centred, they keep their (small) size in cost units."""
        out = cls.normalize(adv_c)
        if adv_c.shape[1] == 0:
            return out
        no_cost = (costs == 0).all(0)
        if bool(no_cost.any()):
            out[:, no_cost] = cls.normalize(adv_c[:, no_cost], center_only=True)
        return out

    # ------------------------------------------------------------------ shared updates
    def minibatch_permutation(self, size: int) -> tuple[torch.Tensor, int]:
        """One epoch's sample order (a fresh ``randperm``) and the minibatch size; minibatch ``j`` is
        ``perm[j * mb : (j + 1) * mb]``. Drawn on torch's CPU stream (checkpointed) and moved once per epoch,
        so a CUDA run visits the samples in the CPU run's order."""
        perm = torch.randperm(size, device="cpu").to(self.device)
        return perm, min(self.config.minibatch_size, size)

    def minibatches(self, size: int):
        perm, mb = self.minibatch_permutation(size)
        for start in range(0, size, mb):
            yield perm[start : start + mb]

    def update_critics(self, batch: Batch) -> dict[str, float]:
        """Regress every critic on its own target (reward and each cost), minibatch Adam."""
        cfg = self.config
        x = self.critic_input(batch.obs, batch.h)
        target = batch.returns
        epochs = cfg.vf_epochs or cfg.update_epochs
        loss = torch.zeros((), device=self.device)
        for _ in range(epochs):
            for idx in self.minibatches(batch.size):
                loss = ((self.critic(x[idx]) - target[idx]) ** 2).mean(0).sum()
                self.vf_optim.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.max_grad_norm:
                    torch.nn.utils.clip_grad_norm_(self.critic.parameters(), cfg.max_grad_norm * (1 + self.m))
                self.vf_optim.step()
        return {"value_loss": float(loss.detach())}

    def approx_kl(self, logp_new: torch.Tensor, logp_old: torch.Tensor) -> torch.Tensor:
        """The low-variance estimator ``E[(r - 1) - log r]`` of KL(pi_old || pi_new)."""
        log_ratio = logp_new - logp_old
        return ((log_ratio.exp() - 1) - log_ratio).mean()

    # ------------------------------------------------------------------ training loop
    def learn(
        self,
        total_steps: int,
        out_dir: str | Path | None = None,
        progress: bool = True,
        callback: MaybeCallback = None,
    ) -> dict:
        """Train until ``total_steps`` env steps (counting those of earlier calls); returns the last record.

        ``callback``: a :class:`~bayescrl.constrained.core.callbacks.BaseCallback`, a list, or a function
        ``fn(algo, record)``. ``out_dir`` adds the :class:`~bayescrl.constrained.core.callbacks.MetricsWriter`
        and :class:`~bayescrl.constrained.core.callbacks.Checkpointer` of that folder, ``progress`` a
        :class:`~bayescrl.constrained.core.callbacks.ProgressBar` (both after ``callback``, so it may add
        fields to the record they write)."""
        if not isinstance(total_steps, int) or isinstance(total_steps, bool) or total_steps < 1:
            raise ConfigError("total_steps", total_steps, "must be an integer >= 1")
        cfg = self.config
        callbacks = [as_callback(callback)]
        if out_dir is not None:
            callbacks += [MetricsWriter(out_dir), Checkpointer(out_dir)]
        if progress:
            callbacks.append(ProgressBar())
        cb = as_callback(callbacks)
        self.total_steps = total_steps
        if not self._started:
            self.collector.reset(self.seed)
            self._started = True
        cb.init_callback(self)
        cb.on_training_start(total_steps)
        adapter, go = self.reward_adapter, True
        while go and self.collector.global_step < total_steps:
            t0 = time.perf_counter()
            self._anneal_lr(total_steps)
            roll = self.collector.collect(self.policy, self.critic_value, cfg.rollout_steps, self.rng)
            if adapter is not None:
                roll = adapter.relabel(roll)  # a learned reward / cost
            batch = self.compute_advantages(roll)
            t_roll = time.perf_counter() - t0
            logs = self.update(batch)
            record = self._end_iteration(batch, logs, t0, t_roll)
            if adapter is not None:  # first: it may add fields (true returns under a learned reward)
                adapter.on_iteration(self.view(), record)
                go = not adapter.should_stop()
            go = cb.on_iteration(record) is not False and go
        cb.on_training_end()
        return self.history[-1] if self.history else {}

    def _anneal_lr(self, total_steps: int) -> None:
        """``anneal_lr``: both learning rates decay linearly to 0 over ``total_steps``."""
        cfg = self.config
        if cfg.anneal_lr:
            frac = max(0.0, 1.0 - self.collector.global_step / total_steps)
            for opt, lr in ((self.pi_optim, cfg.pi_lr), (self.vf_optim, cfg.vf_lr)):
                for g in opt.param_groups:
                    g["lr"] = lr * frac

    def _end_iteration(self, batch: Batch, logs: dict, t0: float, t_roll: float) -> dict:
        """Observation statistics, counters, the iteration's record (with an evaluation every
        ``eval_every`` iterations), appended to :attr:`history`."""
        cfg = self.config
        if self.rms is not None:
            self.rms.update(batch.raw_obs)
        self.iteration += 1
        self.cum_cost += batch.rewards[:, 1:].double().sum(0).cpu().numpy()
        record = self._record(batch, logs, time.perf_counter() - t0, t_roll)
        if cfg.eval_every and self.iteration % cfg.eval_every == 0:
            ev = self.evaluate(cfg.eval_episodes)
            record["eval_return"], record["eval_costs"] = ev["mean_return"], ev["mean_costs"]
        self.history.append(record)
        return record

    def _record(self, batch: Batch, logs: dict, dt: float, t_roll: float) -> dict:
        steps = self.collector.global_step
        n_ep = len(batch.ep_returns)
        rec = {
            "iteration": self.iteration,
            "env_steps": steps,
            "episodes": n_ep,
            "ep_return": batch.ep_return_est,
            "ep_costs": batch.ep_cost_est.tolist(),
            "cost_limits": self.cost_limits.tolist(),
            "multipliers": [float(x) for x in self.multipliers()],
            "cost_rate": (self.cum_cost / max(steps, 1)).tolist(),
            "steps_per_s": batch.size / max(dt, 1e-9),
            "iter_s": dt,
            "rollout_s": t_roll,
            "update_s": dt - t_roll,
        }
        rec.update(
            {
                k: (float(v) if isinstance(v, (int, float, np.floating, torch.Tensor)) else v)
                for k, v in logs.items()
            }
        )
        return rec

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, episodes: int = 5, seed: int | None = None, deterministic: bool = True) -> dict:
        """Deterministic episodes on separate seeds (default ``seed + 10_000 + j``), reusing the training
        observation statistics (never updated here)."""
        if not isinstance(episodes, int) or isinstance(episodes, bool) or episodes < 1:
            raise ConfigError("episodes", episodes, "must be an integer >= 1")
        boolean(deterministic, "deterministic")
        base = self.seed + 10_000 if seed is None else check_seed(seed)
        env = ConstraintWrapper(self.factory(), self.m, self.reward_fn, self.cost_fn)
        returns, costs, lengths = [], [], []
        try:
            for j in range(episodes):
                obs, _ = env.reset(seed=base + j)
                done, ret, cost, h = False, 0.0, np.zeros(self.m), 0
                while not done:
                    enc = self.encoder(np.asarray([obs]))
                    x = self.policy_input(self.collector.normalize(enc), np.asarray([h]))
                    a, _ = self.policy.act(x, deterministic=deterministic)
                    a_np = a.cpu().numpy()[0]
                    if isinstance(env.action_space, gym.spaces.Box):
                        a_np = np.clip(a_np, env.action_space.low, env.action_space.high)
                    obs, r, term, trunc, info = env.step(a_np)
                    ret += float(r)
                    cost += info["cost"]
                    h += 1
                    done = term or trunc or h >= 100 * self.horizon
                returns.append(ret)
                costs.append(cost)
                lengths.append(h)
        finally:
            env.close()
        costs_arr = np.asarray(costs).reshape(episodes, self.m)
        res = {
            "returns": returns,
            "costs": costs_arr.tolist(),
            "lengths": lengths,
            "mean_return": float(np.mean(returns)),
            "mean_costs": costs_arr.mean(0).tolist(),
            "seeds": [base + j for j in range(episodes)],
        }
        self.last_eval = res
        return res

    # ------------------------------------------------------------------ prediction
    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
        *,
        step: int | np.ndarray | None = None,
    ) -> tuple[np.ndarray, Any]:
        """Stable-Baselines3-style ``(action, state)`` for ``observation`` (one, or a batch along the first
        axis); the policies are not recurrent, so ``state`` is returned unchanged and ``episode_start`` is
        ignored. Same path as :meth:`evaluate` (encoder, frozen observation normalisation, Box actions
        clipped): :func:`~bayescrl.constrained.core.predict.predict_actions`. ``step`` (0-based time index
        in the episode) is needed by policies with ``time_feature=True`` (e-COP's default)."""
        action = predict_actions(
            self.policy,
            self.encoder,
            self.rms,
            self.envs.single_observation_space,
            self.envs.single_action_space,
            self.horizon,
            self.policy_time,
            observation,
            deterministic,
            step,
            self.device,
        )
        return action, state

    # ------------------------------------------------------------------ checkpointing
    def state_dict(self) -> dict:
        """Everything :meth:`load` needs, in types :mod:`bayescrl.utils.safe_state` can store (tensors,
        numpy arrays, plain values), so a checkpoint loads with ``weights_only=True``."""
        rebuildable = isinstance(self.env_id, str) and encodable(self.env_kwargs)
        history = self.history if encodable(self.history) else to_jsonable(self.history)
        return {
            "format": 2,
            "algo": self.name,
            "env": self.env_id if rebuildable else None,
            "env_kwargs": self.env_kwargs if rebuildable else None,
            "seed": self.seed,
            "cost_limits": self.cost_limits.tolist(),
            "config": self.config.to_dict(),
            "policy": self.policy.state_dict(),
            "critic": self.critic.state_dict(),
            "pi_optim": self.pi_optim.state_dict(),
            "vf_optim": self.vf_optim.state_dict(),
            "rms": None if self.rms is None else self.rms.state_dict(),
            "iteration": self.iteration,
            "cum_cost": self.cum_cost.copy(),
            "history": history,
            "collector": self.collector.state_dict(),
            "started": self._started,
            "rng": {
                "torch": torch.get_rng_state(),
                "numpy": np.random.get_state(),  # noqa: NPY002
                "python": random.getstate(),
                "actions": self.rng.bit_generator.state,
            },
            "extra": self.extra_state(),
        }

    def save(self, path: str | Path) -> Path:
        """Write the checkpoint (:meth:`state_dict`, loadable with ``weights_only=True``) to ``path``: a
        ``*.pt`` file, or a run folder (``path/checkpoint.pt``, what ``bayescrl train`` writes and
        ``--resume`` reads). Returns the file written."""
        return save_state(self.state_dict(), checkpoint_file(path))

    def load_state_dict(self, st: dict) -> None:
        self.policy.load_state_dict(st["policy"])
        self.critic.load_state_dict(st["critic"])
        self.pi_optim.load_state_dict(st["pi_optim"])
        self.vf_optim.load_state_dict(st["vf_optim"])
        if self.rms is not None and st["rms"] is not None:
            self.rms.load_state_dict(st["rms"])
        self.iteration, self.cum_cost, self.history = st["iteration"], st["cum_cost"], list(st["history"])
        self._started = st["started"]
        if self._started:
            self.exact_resume = self.collector.load_state_dict(
                st["collector"], self.seed + 7919 * self.iteration
            )
        torch.set_rng_state(st["rng"]["torch"])
        np.random.set_state(st["rng"]["numpy"])  # noqa: NPY002
        random.setstate(st["rng"]["python"])
        self.rng.bit_generator.state = st["rng"]["actions"]
        self.load_extra_state(st["extra"])

    @staticmethod
    def read_checkpoint(run_dir: str | Path, field: str = "path") -> dict:
        """The decoded checkpoint (``run_dir/checkpoint.pt``, or ``run_dir`` itself when it is a file), read
        with ``weights_only=True``: no code is run; a crafted pickle, or a checkpoint of an earlier version
        that pickled objects, is refused with a :class:`DataError` on field ``checkpoint``. A missing one
        is refused on ``field`` (the argument that named it: ``path``, ``run_dir``, ``resume``)."""
        path = checkpoint_file(run_dir)
        if not path.exists():
            if path.name == CHECKPOINT:
                raise ConfigError(field, str(run_dir), f"no {CHECKPOINT} in this folder")
            raise ConfigError(field, str(run_dir), "no such checkpoint file")
        st = load_state(path, field="checkpoint")
        if not isinstance(st, dict) or "algo" not in st or "policy" not in st:
            raise DataError("checkpoint", str(path), "not a bayescrl constrained-RL checkpoint")
        return st

    @classmethod
    def load(
        cls,
        path: str | Path,
        env: str | Callable[..., gym.Env] | None = None,
        device: str | torch.device = "cpu",
        **overrides: Any,
    ) -> OnPolicyAlgorithm:
        """Rebuild an algorithm from a checkpoint (a run folder or a ``*.pt`` file, see :meth:`save`),
        ready to :meth:`predict` or to :meth:`learn` on (Stable-Baselines3's ``Algo.load(path, env)``).

        ``env`` (a gymnasium id, ``module:Class`` or a factory) replaces the saved env id; it is required
        when the run used an env object. ``ECOP.load`` refuses a checkpoint of another algorithm;
        ``OnPolicyAlgorithm.load`` builds whichever algorithm the checkpoint names."""
        st = cls.read_checkpoint(path)
        if env is None and st["env"] is None:
            raise ConfigError(
                "env", None, f"the run in {path} used an env object, not an id: pass env= to load it"
            )
        algo_cls = cls
        if cls is OnPolicyAlgorithm:
            algo_cls = get_algorithm(st["algo"])
        elif cls.name != st["algo"]:
            raise ConfigError(
                "checkpoint",
                str(checkpoint_file(path)),
                f"is a checkpoint of {st['algo']!r}, not of {cls.name!r}; load it with "
                f"OnPolicyAlgorithm.load (or get_algorithm({st['algo']!r}).load)",
            )
        algo = algo_cls(
            st["env"] if env is None else env,
            st["cost_limits"],
            st["seed"],
            st["config"],
            device=device,
            env_kwargs=st["env_kwargs"] if env is None else None,
            **overrides,
        )
        algo.load_state_dict(st)
        return algo

    def write_results(self, out_dir: str | Path, eval_episodes: int | None = None) -> dict:
        """Final evaluation + ``metrics.json`` + curves (``curves.json``, ``curves.png``)."""
        out = Path(out_dir)
        ev = self.evaluate(eval_episodes or self.config.eval_episodes)
        hist = self.history
        tail = hist[-max(1, len(hist) // 10) :]
        curves = {
            "env_steps": [r["env_steps"] for r in hist],
            "ep_return": [r["ep_return"] for r in hist],
            "ep_costs": [r["ep_costs"] for r in hist],
            "multipliers": [r["multipliers"] for r in hist],
            "cost_rate": [r["cost_rate"] for r in hist],
            "kl": [r.get("kl") for r in hist],
        }
        metrics = {
            "algo": self.name,
            "env": str(self.env_id),
            "seed": self.seed,
            "final_return": ev["mean_return"],
            "final_costs": ev["mean_costs"],
            "cost_limits": self.cost_limits.tolist(),
            "train_final_return": float(np.mean([r["ep_return"] for r in tail])) if tail else None,
            "train_final_costs": np.mean([r["ep_costs"] for r in tail], 0).tolist() if tail else None,
            "env_steps": self.collector.global_step,
            "iterations": self.iteration,
            "env_steps_per_s": self._env_steps_per_s(),
            "cost_rate": (self.cum_cost / max(self.collector.global_step, 1)).tolist(),
            "eval": ev,
            "config": self.config.to_dict(),
        }
        write_json(out / "metrics.json", metrics)
        write_json(out / "curves.json", curves)
        self._plot_curves(curves, out / "curves.png")
        return metrics

    def _env_steps_per_s(self) -> float | None:
        """Training throughput: env steps over the iterations' wall-clock seconds (``None`` before any)."""
        hist = self.history
        if not hist:
            return None
        steps = sum(
            r["env_steps"] - p["env_steps"] for p, r in zip([{"env_steps": 0}, *hist[:-1]], hist, strict=True)
        )
        return float(steps / max(sum(r["iter_s"] for r in hist), 1e-9))

    def _plot_curves(self, curves: dict, path: Path) -> None:
        """``curves.png``: episodic return and each episodic cost against env steps, limits dashed."""
        p = plt()
        ncol = 1 + max(self.m, 1)
        fig, axes = p.subplots(1, ncol, figsize=(4 * ncol, 3.2))
        axes = np.atleast_1d(axes)
        axes[0].plot(curves["env_steps"], curves["ep_return"])
        axes[0].set_title("episodic return")
        axes[0].set_ylabel("return (sum of rewards per episode)")
        for i in range(self.m):
            axes[1 + i].plot(curves["env_steps"], [c[i] for c in curves["ep_costs"]], label="cost")
            lim, label = self.episode_cost_limits()[i], self.episode_limit_labels()[i]
            axes[1 + i].axhline(lim, ls="--", color="k", lw=1, label=label)
            axes[1 + i].set_title(f"episodic cost {i} (limit dashed)")
            axes[1 + i].set_ylabel(f"cost {i} (sum per episode)")
            axes[1 + i].legend(fontsize=7)
        for ax in axes:
            ax.set_xlabel("env steps")
            ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        p.close(fig)

    def episode_cost_limits(self) -> list[float]:
        """The limits on the scale of the episodic costs ``ep_costs`` (sums over an episode): ``l_i`` itself,
        or ``l_i · H`` when the limits are per step (:attr:`limits_per_step`)."""
        scale = self.horizon if self.limits_per_step else 1
        return [float(lim) * scale for lim in self.cost_limits]

    def episode_limit_labels(self) -> list[str]:
        """Legend text of each limit of :meth:`episode_cost_limits` (``"limit l·H = 0.05 x 200 = 10"``)."""
        limits = [float(lim) for lim in self.cost_limits]
        if self.limits_per_step:
            return [f"limit l·H = {lim:g} x {self.horizon} = {lim * self.horizon:g}" for lim in limits]
        return [f"limit = {lim:g}" for lim in limits]

    def close(self) -> None:
        self.envs.close()

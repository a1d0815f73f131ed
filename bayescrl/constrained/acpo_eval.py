"""The thesis' average-reward evaluation protocol (chapter `acpo`, Sec. "Evaluation Details and Protocol").

"For every 10³ steps, we instantiate 10 evaluation trajectories with the current (deterministic) policy.
For each of these trajectories, we calculate the trajectory average reward for the next 10³ steps and
finally report the total average-reward as the mean of these 10 trajectories."

:func:`average_reward_evaluation` runs ``n_traj`` trajectories of ``traj_steps`` steps *in one batched
vector env* (one policy forward per step for all trajectories), on evaluation seeds ``eval_seed + j``
distinct from the training seeds, with the deterministic policy (Gaussian mean) and the training
observation statistics (frozen).  When an episode ends before ``traj_steps`` (the Circle/Gather tasks have
a time limit) the env is reset and the trajectory continues, so every trajectory averages exactly
``traj_steps`` steps: the per-step average reward ``J`` and costs ``J_{C_i}`` of Eq. `AvgR_obj`.

:class:`ProtocolEvaluator` is a ``learn(callback=...)`` callback that applies it every ``every`` env steps
(at the first iteration boundary after each multiple; with the table's batch of 2500 that is once per
iteration) and :class:`AverageProtocolMixin` adds ``final_avg_reward`` / ``final_avg_costs`` to
``metrics.json`` for any :class:`~bayescrl.constrained.core.base.OnPolicyAlgorithm`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from bayescrl.constrained.core.callbacks import BaseCallback
from bayescrl.constrained.core.envs import ConstraintWrapper
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import write_json

__all__ = ["AverageProtocolMixin", "ProtocolEvaluator", "average_reward_evaluation"]


@torch.no_grad()
def average_reward_evaluation(
    algo, n_traj: int = 10, traj_steps: int = 1000, eval_seed: int | None = None, deterministic: bool = True
) -> dict[str, Any]:
    """Mean over ``n_traj`` trajectories of the ``traj_steps``-step average reward and costs.

    ``eval_seed`` defaults to ``algo.seed + 10_000`` (the training envs use ``algo.seed``).  Returns
    ``avg_reward`` (float), ``avg_costs`` (m,), the per-trajectory values and the seeds used.
    """
    for name, val in (("n_traj", n_traj), ("traj_steps", traj_steps)):
        if not isinstance(val, int) or isinstance(val, bool) or val < 1:
            raise ConfigError(name, val, "must be an integer >= 1")
    base = algo.seed + 10_000 if eval_seed is None else int(eval_seed)
    m = algo.m
    envs = [ConstraintWrapper(algo.factory(), m, algo.reward_fn, algo.cost_fn) for _ in range(n_traj)]
    box = isinstance(envs[0].action_space, gym.spaces.Box)
    seeds = [base + j for j in range(n_traj)]
    obs = [env.reset(seed=s)[0] for env, s in zip(envs, seeds, strict=True)]
    h = np.zeros(n_traj, np.int64)
    rew = np.zeros(n_traj)
    cost = np.zeros((n_traj, m))
    episodes = np.zeros(n_traj, np.int64)
    try:
        for _ in range(traj_steps):
            enc = algo.encoder(np.stack([np.asarray(o) for o in obs]))
            x = algo.policy_input(algo.collector.normalize(enc), h)
            a, _ = algo.policy.act(x, deterministic=deterministic)
            a_np = a.cpu().numpy()
            for j, env in enumerate(envs):
                aj = np.clip(a_np[j], env.action_space.low, env.action_space.high) if box else a_np[j]
                o, r, term, trunc, info = env.step(aj)
                rew[j] += float(r)
                cost[j] += info["cost"]
                h[j] += 1
                if term or trunc:
                    episodes[j] += 1
                    o, _ = env.reset(seed=seeds[j] + 1_000_003 * int(episodes[j]))
                    h[j] = 0
                obs[j] = o
    finally:
        for env in envs:
            env.close()
    avg_r, avg_c = rew / traj_steps, cost / traj_steps
    return {
        "avg_reward": float(avg_r.mean()),
        "avg_costs": avg_c.mean(0).tolist(),
        "traj_avg_rewards": avg_r.tolist(),
        "traj_avg_costs": avg_c.tolist(),
        "seeds": seeds,
        "traj_steps": traj_steps,
    }


class ProtocolEvaluator(BaseCallback):
    """``learn(callback=ProtocolEvaluator(...))``: evaluate every ``every`` env steps; keeps a curve.

    Each evaluation appends ``{"env_steps", "avg_reward", "avg_costs"}`` to :attr:`curve`, adds
    ``eval_avg_reward`` / ``eval_avg_costs`` to the iteration's record and, when ``out_dir`` is given,
    rewrites ``out_dir/protocol_curve.json``.
    """

    def __init__(
        self,
        every: int = 1000,
        n_traj: int = 10,
        traj_steps: int = 1000,
        out_dir: str | Path | None = None,
        eval_seed: int | None = None,
    ):
        if not isinstance(every, int) or every < 1:
            raise ConfigError("eval_every_steps", every, "must be an integer >= 1")
        self.every, self.n_traj, self.traj_steps, self.eval_seed = every, n_traj, traj_steps, eval_seed
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.curve: list[dict[str, Any]] = []
        self._next = every

    def on_iteration(self, record: dict) -> None:
        algo = self.algo
        steps = algo.collector.global_step
        if steps < self._next:
            return
        self._next = (steps // self.every + 1) * self.every
        ev = average_reward_evaluation(algo, self.n_traj, self.traj_steps, self.eval_seed)
        point = {"env_steps": steps, "avg_reward": ev["avg_reward"], "avg_costs": ev["avg_costs"]}
        self.curve.append(point)
        record["eval_avg_reward"], record["eval_avg_costs"] = ev["avg_reward"], ev["avg_costs"]
        if self.out_dir is not None:
            write_json(self.out_dir / "protocol_curve.json", self.curve)


class AverageProtocolMixin:
    """Adds the thesis' protocol to ``write_results``: ``final_avg_reward`` and ``final_avg_costs``.

    Class attributes ``protocol_traj`` (10) and ``protocol_steps`` (1000) set the final evaluation.
    """

    protocol_traj: int = 10
    protocol_steps: int = 1000

    def write_results(self, out_dir: str | Path, eval_episodes: int | None = None) -> dict:
        metrics = super().write_results(out_dir, eval_episodes)  # type: ignore[misc]
        ev = average_reward_evaluation(self, self.protocol_traj, self.protocol_steps)
        metrics["final_avg_reward"] = ev["avg_reward"]
        metrics["final_avg_costs"] = ev["avg_costs"]
        metrics["protocol_eval"] = ev
        write_json(Path(out_dir) / "metrics.json", metrics)
        return metrics


def load_protocol_curve(run_dir: str | Path) -> list[dict[str, Any]]:
    """Read ``protocol_curve.json`` written by :class:`ProtocolEvaluator`."""
    path = Path(run_dir) / "protocol_curve.json"
    if not path.exists():
        raise ConfigError("run_dir", str(run_dir), "no protocol_curve.json (train with a ProtocolEvaluator)")
    return json.loads(path.read_text())

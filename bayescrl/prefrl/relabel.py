"""Relabelling a rollout: φ(s_t, a_t) of every step, and the learned reward (and cost) that replaces the
env's — ``thompson``: the reward under a posterior draw held for ``thompson_hold`` iterations (posterior
sampling, chapter `PSPL`); ``mean``: the posterior mean; ``lcb``: a lower posterior quantile of each step's
reward; a learned cost is an upper posterior quantile of each channel's cost."""

from __future__ import annotations

import numpy as np
import torch

from bayescrl.constrained.core.rollout import RolloutBatch
from bayescrl.prefrl.features import FeatureMap
from bayescrl.prefrl.spec import PreferenceSpec
from bayescrl.utils.errors import DataError


class Relabeller:
    """Holds the posterior draw the optimiser currently sees and the learned cost of running episodes."""

    def __init__(
        self, spec: PreferenceSpec, features: FeatureMap, discrete_actions: bool, num_envs: int, m: int
    ):
        self.spec, self.features, self.discrete_actions, self.m = spec, features, discrete_actions, m
        self.draw = None  # the posterior draw the optimiser currently sees (θ̃, or an ensemble member)
        self.cost_acc = np.zeros((num_envs, m))  # learned cost of each running episode (cost: learned)

    def step_features(self, roll: RolloutBatch) -> torch.Tensor:
        """φ(s_t, a_t) for every step of the rollout: (T, n, d) float64."""
        raw = roll.raw
        T, n = raw.shape[:2]
        obs = torch.as_tensor(raw.reshape(T * n, -1), dtype=torch.float64, device="cpu")
        acts = roll.actions
        a = torch.as_tensor(acts.reshape(T * n, *acts.shape[2:]), device="cpu")
        a = a.long() if self.discrete_actions else a.double()
        envf = roll.info
        envf = (
            None
            if envf is None
            else torch.as_tensor(envf.reshape(T * n, -1), dtype=torch.float64, device="cpu")
        )
        phi = self.features(obs, a, envf)
        if phi.shape != (T * n, self.features.dim):
            raise DataError(
                "preferences.features",
                self.features.name,
                f"gave shape {tuple(phi.shape)}, expected {(T * n, self.features.dim)}",
            )
        if not torch.isfinite(phi).all():
            bad = int((~torch.isfinite(phi)).any(1).nonzero()[0, 0])
            raise DataError(
                "features",
                phi[bad].tolist(),
                f"non-finite reward features at step {bad // n} of env {bad % n}",
            )
        return phi.reshape(T, n, -1)

    def reward(self, posterior, flat: torch.Tensor, iteration: int) -> torch.Tensor:
        """The learned reward of the steps ``flat`` (B, d) that the optimiser sees at ``iteration``."""
        s = self.spec
        if s.reward == "thompson":
            if self.draw is None or iteration % s.thompson_hold == 0:
                self.draw = posterior.draw()  # held for thompson_hold iterations
            return posterior.reward(flat, self.draw)
        if s.reward == "mean":
            self.draw = posterior.mean_draw()
            return posterior.reward(flat, self.draw)
        return posterior.quantile_reward(flat, s.lcb_quantile)

    def costs(self, cost_posteriors: list, flat: torch.Tensor, shape: tuple) -> np.ndarray:
        """The learned costs ``shape`` (T, n, m): each channel's upper ``cost_quantile``."""
        upper = [cp.quantile_cost(flat, self.spec.cost_quantile) for cp in cost_posteriors]
        return torch.stack(upper, -1).cpu().numpy().reshape(shape)

    def episode_costs(self, learned_c: np.ndarray, ended: np.ndarray) -> np.ndarray:
        """Learned cost of every episode that ended in this rollout, in the collector's order."""
        out = []
        for t in range(ended.shape[0]):
            self.cost_acc += learned_c[t]
            idx = np.flatnonzero(ended[t])
            if idx.size:
                out.append(self.cost_acc[idx].copy())
                self.cost_acc[idx] = 0.0
        return np.concatenate(out) if out else np.zeros((0, self.m))


def true_estimates(roll: RolloutBatch, true_r: np.ndarray, horizon: int) -> tuple[float, list[float]]:
    """True J and J_C of this rollout for the reports, as the optimiser would estimate them."""
    if len(roll.ep_returns):
        return float(roll.ep_returns.mean()), roll.ep_costs.mean(0).tolist()
    m = roll.rewards.shape[-1] - 1
    return float(true_r.mean() * horizon), (roll.rewards[..., 1:].reshape(-1, m).mean(0) * horizon).tolist()


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    den = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / den) if den > 0 else float("nan")

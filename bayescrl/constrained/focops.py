"""FOCOPS: First Order Constrained Optimization in Policy Space (Zhang, Vuong & Ross, 2020).

Per-state loss (their Eq. 9-10, several constraints with one ``nu_i`` each)::

    ( KL(pi_theta || pi_k)[s] - (1/lambda) rho (A - sum_i nu_i A_Ci) ) * 1[KL(pi_theta || pi_k)[s] <= delta]

``nu_i <- clip(nu_i + nu_lr (J_Ci - d_i), 0, nu_max)`` before the policy step. Hyperparameters from
their paper: ``lambda = 1.5``, ``nu_lr = 0.01``, ``nu_max = 2``, ``delta = 0.02``; discount 0.995 as in
the thesis' table ``table:hyperparams``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from bayescrl.constrained.core.base import OnPolicyAlgorithm
from bayescrl.constrained.core.config import TrainConfig
from bayescrl.constrained.core.optim import _detach_dist
from bayescrl.constrained.core.ppo import first_order_policy_update
from bayescrl.constrained.core.rollout import Batch


@dataclass
class FOCOPSConfig(TrainConfig):
    RANGES: ClassVar[dict[str, dict]] = {
        **TrainConfig.RANGES,
        "gamma": {"low": 0.0, "high": 1.0},
        "temperature": {"low": 0.0, "strict": True},
        "nu_lr": {"low": 0.0},
        "nu_max": {"low": 0.0},
        "delta": {"low": 0.0, "strict": True},
    }
    gamma: float = 0.995
    temperature: float = 1.5  # their lambda
    nu_lr: float = 0.01
    nu_max: float = 2.0
    delta: float = 0.02


class FOCOPS(OnPolicyAlgorithm):
    name = "focops"
    config_class = FOCOPSConfig

    def setup(self) -> None:
        self.nu = torch.zeros(self.m, dtype=torch.float64, device="cpu")

    def multipliers(self) -> list[float]:
        return self.nu.tolist()

    def extra_state(self) -> dict:
        return {"nu": self.nu.clone()}

    def load_extra_state(self, state: dict) -> None:
        self.nu = state["nu"].clone()

    def update_policy(self, batch: Batch) -> dict[str, float]:
        cfg = self.config
        self.nu = torch.clamp(self.nu + cfg.nu_lr * (batch.ep_cost_est - self.cost_limits), 0.0, cfg.nu_max)
        nu = self.nu.float().to(self.device)
        adv_r = batch.advantages[:, 0]
        adv_r = self.normalize(adv_r) if cfg.normalize_advantages else adv_r
        adv_c = self.normalize(batch.advantages[:, 1:], center_only=True)
        adv = adv_r - (adv_c * nu).sum(-1) if self.m else adv_r
        x = self.policy_input(batch.obs, batch.h)
        with torch.no_grad():
            old = _detach_dist(self.policy.distribution(x))

        def loss_fn(idx, ratio, dist):
            old_i = _slice(old, idx)
            kl = self.policy.kl(dist, old_i)  # KL(pi_theta || pi_k) per state
            per = kl - ratio * adv[idx] / cfg.temperature
            return (per * (kl.detach() <= cfg.delta).float()).mean()

        return first_order_policy_update(self, batch, loss_fn)


def _slice(dist, idx):
    if isinstance(dist, torch.distributions.Normal):
        return torch.distributions.Normal(dist.loc[idx], dist.scale[idx])
    return torch.distributions.Categorical(logits=dist.logits[idx])

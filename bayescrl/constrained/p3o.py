"""P3O: Penalized Proximal Policy Optimization (Zhang et al., 2022), a baseline of the thesis' tables.

Loss (their Eq. 11, one ReLU penalty per constraint)::

    -E[min(rho A, clip(rho) A)]
        + kappa * sum_i relu( E[max(rho A_Ci, clip(rho) A_Ci)] + (1 - gamma)(J_Ci - d_i) )

Reward advantages normalised, cost advantages centred. ``kappa`` (their penalty factor) defaults to 20.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bayescrl.constrained.core.base import OnPolicyAlgorithm
from bayescrl.constrained.core.config import TrainConfig
from bayescrl.constrained.core.ppo import clipped_surrogate, first_order_policy_update
from bayescrl.constrained.core.rollout import Batch
from bayescrl.utils.errors import ConfigError


@dataclass
class P3OConfig(TrainConfig):
    kappa: float = 20.0

    def validate(self) -> None:
        super().validate()
        if not self.kappa > 0:
            raise ConfigError("kappa", self.kappa, "must be > 0")


class P3O(OnPolicyAlgorithm):
    name = "p3o"
    config_class = P3OConfig

    def multipliers(self) -> list[float]:
        return [self.config.kappa] * self.m

    def update_policy(self, batch: Batch) -> dict[str, float]:
        cfg = self.config
        adv_r = batch.advantages[:, 0]
        adv_r = self.normalize(adv_r) if cfg.normalize_advantages else adv_r
        adv_c = self.normalize(batch.advantages[:, 1:], center_only=True)
        gam_c = float(self.gammas[1]) if self.m else cfg.gamma
        gap = ((1.0 - gam_c) * (batch.ep_cost_est - self.cost_limits)).float().to(self.device)

        def loss_fn(idx, ratio, dist):
            loss = -clipped_surrogate(ratio, adv_r[idx], cfg.clip, "min").mean()
            if self.m:
                l_c = clipped_surrogate(ratio, adv_c[idx], cfg.clip, "max").mean(0)
                loss = loss + cfg.kappa * torch.relu(l_c + gap).sum()
            return loss

        return first_order_policy_update(self, batch, loss_fn, uses_dist=False)

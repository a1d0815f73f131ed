"""PPO-Lagrangian (PPO-L in the seed's tables; Ray et al. 2019, safety-starter-agents).

Loss per minibatch: ``-( L^CLIP_R - sum_i lambda_i E[rho A_Ci] ) / (1 + sum_i lambda_i)`` with one
multiplier per constraint updated before the policy step by projected gradient ascent
``lambda_i <- max(0, lambda_i + lr (J_Ci - d_i))``. Reward advantages normalised, cost advantages
centred (as in safety-starter-agents).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bayescrl.constrained.core.base import OnPolicyAlgorithm
from bayescrl.constrained.core.config import TrainConfig
from bayescrl.constrained.core.optim import LagrangeMultipliers
from bayescrl.constrained.core.ppo import clipped_surrogate, first_order_policy_update
from bayescrl.constrained.core.rollout import Batch


@dataclass
class PPOLagConfig(TrainConfig):
    pass


class PPOLag(OnPolicyAlgorithm):
    name = "ppo-lag"
    config_class = PPOLagConfig

    def setup(self) -> None:
        self.lagrange = LagrangeMultipliers(self.m, self.config.lagrange_init, self.config.lagrange_lr)

    def multipliers(self) -> list[float]:
        return self.lagrange.value.tolist()

    def extra_state(self) -> dict:
        return {"lagrange": self.lagrange.state_dict()}

    def load_extra_state(self, state: dict) -> None:
        self.lagrange.load_state_dict(state["lagrange"])

    def update_policy(self, batch: Batch) -> dict[str, float]:
        cfg = self.config
        lam = self.lagrange.update(batch.ep_cost_est, self.cost_limits).float()
        adv_r = batch.advantages[:, 0]
        adv_r = self.normalize(adv_r) if cfg.normalize_advantages else adv_r
        adv_c = self.normalize(batch.advantages[:, 1:], center_only=True)
        denom = 1.0 + float(lam.sum())

        def loss_fn(idx, ratio, dist):
            surr_r = clipped_surrogate(ratio, adv_r[idx], cfg.clip, "min").mean()
            surr_c = (ratio.unsqueeze(-1) * adv_c[idx]).mean(0) if self.m else torch.zeros(0)
            return -(surr_r - (lam * surr_c).sum()) / denom

        return first_order_policy_update(self, batch, loss_fn)

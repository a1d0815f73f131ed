"""IPO: Interior-point Policy Optimization (Liu, Ding & Liu, 2020) -- PPO plus a log barrier.

Objective: ``L^CLIP(theta) + sum_i (1/t) log(d_i - J_Ci(theta))``. Its gradient is the PPO gradient minus
``(1/t) grad J_Ci / (d_i - J_Ci)``, realised (as in OmniSafe) as a penalised advantage
``A - sum_i w_i A_Ci`` with ``w_i = H_eff / (t (d_i - J_Ci))`` (``grad J_Ci ~ H_eff grad E[rho A_Ci]``),
normalised by ``1 + sum_i w_i``. IPO assumes feasible iterates; when ``J_Ci >= d_i`` the barrier is
undefined and we use ``w_i = penalty_max`` (a departure, the usual practical fix). ``t = 20`` as in the paper.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from bayescrl.constrained.core.base import OnPolicyAlgorithm
from bayescrl.constrained.core.config import TrainConfig
from bayescrl.constrained.core.ppo import clipped_surrogate, first_order_policy_update
from bayescrl.constrained.core.rollout import Batch


@dataclass
class IPOConfig(TrainConfig):
    RANGES: ClassVar[dict[str, dict]] = {
        **TrainConfig.RANGES,
        "t": {"low": 0.0, "strict": True},
        "penalty_max": {"low": 0.0, "strict": True},
    }
    t: float = 20.0
    penalty_max: float = 10.0


class IPO(OnPolicyAlgorithm):
    name = "ipo"
    config_class = IPOConfig

    def setup(self) -> None:
        self.w = torch.zeros(self.m, device="cpu")  # a logged multiplier, kept on the CPU

    def multipliers(self) -> list[float]:
        return self.w.tolist()

    def update_policy(self, batch: Batch) -> dict[str, float]:
        cfg = self.config
        h_eff = float(batch.ep_lengths.mean()) if len(batch.ep_lengths) else float(self.horizon)
        slack = (self.cost_limits - batch.ep_cost_est).float()
        w = torch.where(
            slack > 0, h_eff / (cfg.t * slack.clamp(min=1e-8)), torch.full_like(slack, cfg.penalty_max)
        )
        self.w = w.clamp(max=cfg.penalty_max)
        adv_r = batch.advantages[:, 0]
        adv_r = self.normalize(adv_r) if cfg.normalize_advantages else adv_r
        adv_c = self.normalize(batch.advantages[:, 1:], center_only=True)
        adv = (
            (adv_r - (adv_c * self.w.to(self.device)).sum(-1)) / (1.0 + float(self.w.sum()))
            if self.m
            else adv_r
        )

        def loss_fn(idx, ratio, dist):
            return -clipped_surrogate(ratio, adv[idx], cfg.clip, "min").mean()

        return first_order_policy_update(self, batch, loss_fn, uses_dist=False)

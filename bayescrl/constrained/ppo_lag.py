"""PPO-Lagrangian (PPO-L in the thesis' tables; Ray et al. 2019, safety-starter-agents).

Loss per minibatch: ``-( L^CLIP_R - sum_i lambda_i E[rho A_Ci] ) / (1 + sum_i lambda_i)`` with one
multiplier per constraint updated before the policy step by projected gradient ascent
``lambda_i <- max(0, lambda_i + lr (J_Ci - d_i))``. Reward advantages normalised, cost advantages
centred (as in safety-starter-agents, the code base of chapter `ecop`'s PPO-L).

``ell`` set (a number in [0, 1], or ``"table"`` for table `tab:lagrangian_parameters` by env id): the fixed
balanced Lagrangian of chapter `acpo` instead, ``-( (1 - ell) L^CLIP_R - ell sum_i E[rho A_Ci] )``, i.e.
Eq. `lagrangian_balanced` with PPO's clipped surrogate in place of the trust-region term (its constants
``c`` and ``delta`` do not change the gradient). That is the chapter's "PPO with the Lagrangian" baseline;
as the chapter's appendix `Experimental Details` says, it normalises both the reward and the cost
advantages (mean 0, sd 1), so ``ell`` weighs unit-scale terms.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bayescrl.constrained.atrpo import lagrangian_ell
from bayescrl.constrained.core.base import OnPolicyAlgorithm
from bayescrl.constrained.core.config import TrainConfig
from bayescrl.constrained.core.optim import LagrangeMultipliers
from bayescrl.constrained.core.ppo import clipped_surrogate, first_order_policy_update
from bayescrl.constrained.core.rollout import Batch
from bayescrl.utils.errors import ConfigError


@dataclass
class PPOLagConfig(TrainConfig):
    ell: float | str | None = None  # None: adaptive multipliers; number or "table": fixed balanced Lagrangian

    def validate(self) -> None:
        super().validate()
        number = isinstance(self.ell, (int, float)) and not isinstance(self.ell, bool)
        if not (self.ell is None or self.ell == "table" or (number and 0 <= self.ell <= 1)):
            raise ConfigError("ell", self.ell, "must be None (adaptive), 'table' or a number in [0, 1]")


def balanced_lagrangian_loss(surr_r: torch.Tensor, surr_c: torch.Tensor, ell: float) -> torch.Tensor:
    """``-((1 - ell) surr_r - ell sum_i surr_c_i)``: the policy loss of the fixed balanced Lagrangian."""
    return -((1.0 - ell) * surr_r - ell * surr_c.sum())


class PPOLag(OnPolicyAlgorithm):
    name = "ppo-lag"
    config_class = PPOLagConfig

    def setup(self) -> None:
        ell = self.config.ell
        self.ell = lagrangian_ell("ppo", str(self.env_id)) if ell == "table" else ell
        if self.ell is not None and self.m == 0:
            self.ell = 0.0  # no constraint: plain PPO (as ATRPO with m = 0)
        self.lagrange = LagrangeMultipliers(self.m, self.config.lagrange_init, self.config.lagrange_lr)

    def multipliers(self) -> list[float]:
        return [float(self.ell)] * self.m if self.ell is not None else self.lagrange.value.tolist()

    def extra_state(self) -> dict:
        return {"lagrange": self.lagrange.state_dict()}

    def load_extra_state(self, state: dict) -> None:
        self.lagrange.load_state_dict(state["lagrange"])

    def policy_advantages(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Reward advantages normalised; cost advantages normalised with a fixed ``ell`` (chapter `acpo`'s
        appendix: "for both rewards and constraints"; a channel with no cost in the batch only centred),
        only centred for the adaptive multipliers."""
        adv_r = batch.advantages[:, 0]
        adv_r = self.normalize(adv_r) if self.config.normalize_advantages else adv_r
        adv_c = batch.advantages[:, 1:]
        if self.ell is None:
            return adv_r, self.normalize(adv_c, center_only=True)
        return adv_r, self.normalize_cost_advantages(adv_c, batch.rewards[:, 1:])

    def update_policy(self, batch: Batch) -> dict[str, float]:
        cfg = self.config
        fixed = self.ell is not None
        lam = None if fixed else self.lagrange.update(batch.ep_cost_est, self.cost_limits).float()
        lam_d = None if fixed else lam.to(self.device)
        adv_r, adv_c = self.policy_advantages(batch)
        denom = 1.0 if fixed else 1.0 + float(lam.sum())

        def loss_fn(idx, ratio, dist):
            surr_r = clipped_surrogate(ratio, adv_r[idx], cfg.clip, "min").mean()
            surr_c = (ratio.unsqueeze(-1) * adv_c[idx]).mean(0) if self.m else ratio[:0]
            if fixed:
                return balanced_lagrangian_loss(surr_r, surr_c, float(self.ell))
            return -(surr_r - (lam_d * surr_c).sum()) / denom

        return first_order_policy_update(self, batch, loss_fn, uses_dist=False)

"""APPO: Augmented Proximal Policy Optimization (Dai et al. 2023), a baseline of chapter `ecop`'s Table
`rewards_costs_comparison` (hyperparameters: Table `table:hyperparams`, the APPO column = the core defaults).

The Lagrangian of PPO-L augmented with a quadratic deviation term (a multiplier-penalty function). Per
iteration, first the multiplier by Adam on ``−λ_i (J_Ci − d_i)`` (projected on ``λ_i ≥ 0``; the authors'
``Lagrangian`` component: init 1e-3, lr 0.2), then minibatch epochs on::

    f_i = max(0, λ_i + σ (J_Ci − d_i))                      (augmented-Lagrangian multiplier)
    loss = ( −E[min(ρA, clip(ρ)A)] + Σ_i f_i E[max(ρA_Ci, clip(ρ)A_Ci)] ) / (1 + Σ_i f_i)

with ``σ`` the quadratic penalty factor (0.1), reward advantages normalised and cost advantages centred
(as PPO-L). ``f_i`` is the derivative of ``λ_i ψ + (σ/2) ψ²`` continued by 0 below ``ψ = −λ_i/σ`` -- the
same multiplier-penalty as e-COP's damped term. Departure: the authors' code also defines a growth
``σ ← (1 + ρ) σ`` that its training loop never calls; it is not implemented.
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
class APPOConfig(TrainConfig):
    sigma: float = 0.1  # quadratic penalty factor
    lagrange_init: float = 1e-3
    lagrange_lr: float = 0.2  # Adam on the multiplier

    def validate(self) -> None:
        super().validate()
        if not self.sigma > 0:
            raise ConfigError("sigma", self.sigma, "must be > 0")


def appo_factor(lam: torch.Tensor, gap: torch.Tensor, sigma: float) -> torch.Tensor:
    """``f_i = max(0, λ_i + σ (J_Ci − d_i))``: the augmented-Lagrangian weight of the cost surrogate."""
    return torch.clamp(lam + sigma * gap, min=0.0)


class APPO(OnPolicyAlgorithm):
    name = "appo"
    config_class = APPOConfig

    def setup(self) -> None:
        self.lam = torch.nn.Parameter(
            torch.full((self.m,), float(self.config.lagrange_init), dtype=torch.float64, device="cpu")
        )
        self.lam_optim = torch.optim.Adam([self.lam], lr=self.config.lagrange_lr)

    def multipliers(self) -> list[float]:
        return self.lam.detach().tolist()

    def extra_state(self) -> dict:
        return {"lam": self.lam.detach().clone(), "lam_optim": self.lam_optim.state_dict()}

    def load_extra_state(self, state: dict) -> None:
        with torch.no_grad():
            self.lam.copy_(state["lam"])
        self.lam_optim.load_state_dict(state["lam_optim"])

    def update_multipliers(self, gap: torch.Tensor) -> torch.Tensor:
        """One Adam step on ``−λ·gap`` (gradient ascent on the Lagrangian in λ), then ``λ ← max(λ, 0)``."""
        self.lam_optim.zero_grad(set_to_none=True)
        (-(self.lam * gap.double()).sum()).backward()
        self.lam_optim.step()
        with torch.no_grad():
            self.lam.clamp_(min=0.0)
        return self.lam.detach()

    def update_policy(self, batch: Batch) -> dict[str, float]:
        cfg = self.config
        adv_r = batch.advantages[:, 0]
        adv_r = self.normalize(adv_r) if cfg.normalize_advantages else adv_r
        adv_c = self.normalize(batch.advantages[:, 1:], center_only=True)
        gap = (batch.ep_cost_est - self.cost_limits).double()
        lam = self.update_multipliers(gap) if self.m else self.lam.detach()
        f = appo_factor(lam, gap, cfg.sigma).float()
        denom = 1.0 + float(f.sum())
        f_d = f.to(self.device)

        def loss_fn(idx, ratio, dist):
            surr_r = clipped_surrogate(ratio, adv_r[idx], cfg.clip, "min").mean()
            if not self.m:
                return -surr_r
            surr_c = clipped_surrogate(ratio, adv_c[idx], cfg.clip, "max").mean(0)
            return (-surr_r + (f_d * surr_c).sum()) / denom

        logs = first_order_policy_update(self, batch, loss_fn, uses_dist=False)
        logs["appo_factor"] = f.tolist()
        return logs

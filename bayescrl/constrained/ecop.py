"""e-COP: Episodic Constrained Optimization of Policies (seed chapter `ecop`, Algorithm `practical-ECOP`).

Per iteration k:

1. collect trajectories with pi_{k-1}; compute the advantages ``A_h``, ``A_{C_i,h}`` of the
   non-stationary policy (its input carries ``h/H``) and update the critics (fitted in the same
   minibatch passes as the policy; the advantages were already computed with the pre-update critics,
   so the order is immaterial). Two estimators: the text's time-indexed, undiscounted ``A_h``
   (``advantage="finite_horizon", gamma=1.0``:
   :func:`~bayescrl.constrained.core.advantages.finite_horizon_advantages`, critics ``V_h(s)`` take
   ``h/H`` as input, ``V_{H+1} = 0``), used for finite-horizon tasks such as the tabular CMDPs; and the
   default, discounted GAE (``gamma`` 0.99, ``gae_lambda`` 0.95) -- see Departures;
2. Lagrange multipliers by Eq. `lagrangeupdaterule`:
   ``lambda_i <- max(0, lambda_i + beta * Psi_i(pi_{k-1}, pi_{k-1}))`` with
   ``Psi_i = sum_h E[A_{C_i,h}] + J_{C_i}(pi_{k-1}) - d_i``;
3. minimise the final loss of Eq. `main_e-COP_problem` with Adam (clipped surrogates)::

       L(theta) + sum_i lambda_i relu(L_Ci(theta) + J_Ci - d_i)
                + beta/2 sum_i ( relu(L_Ci(theta) + J_Ci - d_i + lambda_i/beta)^2 - lambda_i^2/beta^2 )

4. adaptive damping: if ``C(pi_k) >= zeta_k`` then ``beta <- min(beta_max, kappa beta)`` with
   ``C = sum_t sum_i max(J_Ci - d_i, -lambda_{t,i}/beta)`` and ``zeta = sqrt(m)/beta max_t ||lambda_t||_inf``.

How the backward sweep ``t = H..1`` is realised with function approximation: the policies
``pi_{k,1..H}`` share one network conditioned on ``h/H`` (``time_feature=True``), so ``pi_h`` is
non-stationary as the chapter requires. ``rho(theta_h)`` depends only on the samples at step ``h``, so
the gradient of ``tilde L_t`` w.r.t. the parameters of ``pi_t`` involves exactly the ``h = t`` reward
terms plus the penalty, whose argument is the cumulative cost surrogate ``sum_{h>=t}``. We take the
``t = 1`` loss (all ``h``), which contains every ``h``-term once; its gradient is the sum of the
per-``t`` gradients of the sweep when the penalty is inactive, and with a shared network the
sequential sweep collapses into minibatch epochs over all ``h``. Consequently ``Psi_{C_i,t}`` and
``lambda_{t,i}`` are identical across ``t`` (``sum_{h>=t} E[A_{C_i,h}] = 0`` under ``pi_{k-1}``) and we
keep one multiplier per constraint; ``C(pi_k)`` keeps the text's sum over ``t`` (a factor ``H``).

Departures (documented in ``docs/ecop.md``):

* default advantage estimator: discounted GAE (gamma 0.99, the baselines' value in Table
  `table:hyperparams`) with the time feature kept in the policy. The chapter's experiments are
  "infinite-horizon discounted safe RL tasks" run on the safety-starter-agents code base (appendix
  "Experimental Details"), whose estimators are discounted. Measured on PointReach (100k steps, 3 seeds):
  the literal undiscounted time-indexed estimator gives return 6.0 / 5.9 / 8.2 against 14.7 / 15.3 / 15.2
  with discounted GAE (gamma = 1 without a time-indexed critic: 8.7 / 5.3, so the undiscounted
  return-to-go's variance is the cause). ``advantage="finite_horizon", gamma=1.0`` restores the text;

* the cost surrogate uses the pessimistic ``max{rho A_C, clip(rho) A_C}`` (an upper bound on the cost
  change, as in P3O); the text's ``-min{...}`` would flip the sign of the cost change;
* ``sum_h E_{s ~ rho_h}[.]`` is estimated as ``H_eff * mean over samples`` with ``H_eff`` the mean
  episode length; cost advantages are centred but never scaled, so that ``L_Ci + J_Ci - d_i`` stays in
  cost units; reward advantages are normalised (mean 0, sd 1);
* ``Psi``, ``lambda`` and ``beta`` are in episode units, as in the text: ``lambda <- max(0, lambda +
  beta (J_C - d))`` and the penalty of Eq. `main_e-COP_problem` on ``L_Ci + J_Ci - d_i``.
  ``constraint_scale="per_step"`` (default) divides the whole loss by ``H_eff`` (the reward term becomes
  the per-sample mean; same minimiser, Adam steps of the usual size); ``"episode"`` keeps the literal
  ``sum_h`` reward term. (Until 2026-11-25 per_step divided ``J_Ci - d_i`` and the surrogate by ``H_eff``
  but not ``beta``: the effective damping and multiplier step were ``beta / H``; test
  ``test_ecop_multiplier_step_is_beta_times_episode_gap``. Before that, per_step also divided the cost
  advantages by their sd, which made ``L_Ci`` unitless next to ``J_Ci - d_i`` and inflated critic noise
  in cost-free batches -- see :meth:`ECOP.cost_advantages`);
* the loss is the *second* display of the chapter, Eq. `main_e-COP_problem`, with its term
  ``lambda relu(Psi)`` next to the damped term, so for ``Psi > 0`` the penalty's slope is
  ``2 lambda + beta Psi`` (``lambda + beta Psi`` on ``-lambda/beta < Psi <= 0``). The first display,
  Eq. `damped_intermediate_problem`, has only the damped term (slope ``lambda + beta Psi``); the
  algorithm box minimises Eq. `main_e-COP_problem`, the exact-penalty (P3O) term added when the clipped
  surrogates are introduced, so the code follows the algorithm (test ``test_ecop_penalty_slope``);
* in Eq. `lagrangeupdaterule`, ``Psi(pi_{k-1}, pi_{k-1})`` is evaluated as ``J_Ci - d_i``: its advantage
  term has expectation exactly 0 under ``pi_{k-1}``, and its sample estimate is only the critic's bias
  times ``H`` (which made the multipliers explode in our first PointCircle runs);
* ``C(pi_k)`` uses the latest rollout's estimate of ``J_Ci``; ``kappa``/``beta_max`` are not given in
  the text (defaults 1.02 and 20).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from bayescrl.constrained.core.base import OnPolicyAlgorithm
from bayescrl.constrained.core.config import TrainConfig
from bayescrl.constrained.core.ppo import clipped_surrogate, first_order_policy_update
from bayescrl.constrained.core.rollout import Batch
from bayescrl.utils.errors import ConfigError


@dataclass
class ECOPConfig(TrainConfig):
    # discounted GAE (gamma 0.99) in the deep-RL default, as in the chapter's experiments; the literal
    # time-indexed estimator is advantage="finite_horizon", gamma=1.0 (tabular/finite-horizon tasks)
    advantage: str = "discounted"
    gae_lambda: float = 0.95
    time_feature: bool = True
    beta: float = 5.0  # damping factor beta (initial value when adaptive)
    adaptive_beta: bool = True
    kappa: float = 1.02  # beta <- min(beta_max, kappa beta)
    beta_max: float = 20.0
    constraint_scale: str = "per_step"  # per_step: loss / H_eff (default) | episode: sum_h reward term
    # minibatch estimate of L_Ci minus H_eff * mean(A_C) over the minibatch (zero in expectation and over
    # the batch, constant in theta): the same derivative of L_Ci, far less noise in whether and how hard
    # the penalty acts (docs/ecop.md; off by default: the e-COP tables were measured without it)
    penalty_control_variate: bool = False

    def validate(self) -> None:
        super().validate()
        if not (math.isfinite(self.beta) and self.beta > 0):
            raise ConfigError("beta", self.beta, "must be a finite number > 0")
        if not self.kappa > 1:
            raise ConfigError("kappa", self.kappa, "must be > 1")
        if self.constraint_scale not in ("per_step", "episode"):
            raise ConfigError("constraint_scale", self.constraint_scale, "must be 'per_step' or 'episode'")
        if not self.beta_max >= self.beta:
            raise ConfigError("beta_max", self.beta_max, f"must be >= beta = {self.beta}")


def ecop_multiplier_update(lam: torch.Tensor, psi: torch.Tensor, beta: float) -> torch.Tensor:
    """Eq. `lagrangeupdaterule`: ``lambda_i <- max(0, lambda_i + beta Psi_i)`` (a violated constraint,
    ``Psi_i > 0``, raises its multiplier)."""
    return torch.clamp(lam + beta * psi, min=0.0)


def ecop_damping(
    gap: torch.Tensor, lam: torch.Tensor, beta: float, horizon: int, kappa: float, beta_max: float
) -> tuple[float, float, float]:
    """Adaptive damping of Algorithm `practical-ECOP`: returns ``(beta', C, zeta)``.

    ``C = sum_t sum_i max(J_Ci - d_i, -lambda_i/beta)`` (the ``H`` equal terms of the sum over ``t``, see
    the module docstring), ``zeta = sqrt(m)/beta max_i |lambda_i|``; ``beta' = min(beta_max, kappa beta)``
    if ``C >= zeta``, else ``beta``. ``gap [m]`` holds ``J_Ci - d_i`` and ``lam [m]`` the multipliers.
    With ``lambda = 0``: ``zeta = 0`` and ``C = H sum_i max(J_Ci - d_i, 0) >= 0``, so the test holds on
    *every* iteration, feasible or not, and beta grows by ``kappa`` per iteration until a multiplier is
    positive or ``beta_max`` is reached (the text's rule, kept).
    """
    c_val = float(horizon * torch.maximum(gap.double(), -lam.double() / beta).sum())
    zeta = math.sqrt(lam.numel()) / beta * float(lam.abs().max())
    return (min(beta_max, kappa * beta) if c_val >= zeta else beta), c_val, zeta


def ecop_penalty(psi: torch.Tensor, lam: torch.Tensor, beta: float) -> torch.Tensor:
    """The constraint part of Eq. `main_e-COP_problem` for a vector ``psi`` of ``L_Ci + J_Ci - d_i``."""
    lam = lam.to(psi.dtype)
    return (lam * torch.relu(psi)).sum() + 0.5 * beta * (
        torch.relu(psi + lam / beta) ** 2 - (lam / beta) ** 2
    ).sum()


class ECOP(OnPolicyAlgorithm):
    """e-COP (Algorithm `practical-ECOP`)."""

    name = "ecop"
    config_class = ECOPConfig

    def setup(self) -> None:
        self.lam = torch.zeros(self.m, dtype=torch.float64, device="cpu")
        self.beta = float(self.config.beta)

    def multipliers(self) -> list[float]:
        return self.lam.tolist()

    def extra_state(self) -> dict:
        return {"lam": self.lam.clone(), "beta": self.beta}

    def load_extra_state(self, state: dict) -> None:
        self.lam, self.beta = state["lam"].clone(), float(state["beta"])

    @staticmethod
    def cost_advantages(batch: Batch) -> torch.Tensor:
        """Cost advantages for ``L_Ci``: centred, never rescaled.

        ``L_Ci + J_Ci - d_i`` must stay an estimate of ``J_Ci(theta) - d_i`` (``H_eff mean(rho A_C)``
        next to ``J_C - d``), so ``A_C`` keeps the cost's units. Dividing by its sd (done before) mixed
        units -- the penalty switched on from the surrogate alone, whatever ``J_C - d`` was -- and, in
        batches with no cost, blew critic noise up to the reward advantages' scale (test
        ``test_ecop_cost_surrogate_scales_with_costs``).
        """
        adv = batch.advantages[:, 1:]
        return adv - adv.mean(0)

    @torch.no_grad()
    def penalty_diagnostics(
        self, batch: Batch, adv_c: torch.Tensor, gap: torch.Tensor, h_eff: float
    ) -> dict[str, list[float]]:
        """The penalty's argument after the update, on the whole batch (logged per iteration, in episode
        units): ``cost_surrogate`` ``L_Ci`` (the pessimistic ``H_eff mean max{rho A_C, clip(rho) A_C}``),
        ``cost_surrogate_plain`` (``H_eff mean rho A_C``, the unbiased importance-weighted estimate; the
        difference is what the pessimism adds) and ``psi`` ``= L_Ci + J_Ci - d_i``. The damped term of
        Eq. `main_e-COP_problem` pulls on the policy wherever ``psi > -lambda_i / beta`` (with
        ``lambda = 0``: wherever ``psi > 0``, i.e. the surrogate predicts more cost than the slack)."""
        ratio = torch.exp(
            self.policy.log_prob(self.policy_input(batch.obs, batch.h), batch.actions) - batch.logp
        )
        upper = h_eff * clipped_surrogate(ratio, adv_c, self.config.clip, "max").mean(0)
        plain = h_eff * (ratio.unsqueeze(-1) * adv_c).mean(0)
        return {
            "cost_surrogate": upper.tolist(),
            "cost_surrogate_plain": plain.tolist(),
            "psi": (upper + gap).tolist(),
        }

    def update_policy(self, batch: Batch) -> dict[str, float]:
        cfg = self.config
        h_eff = float(batch.ep_lengths.mean()) if len(batch.ep_lengths) else float(self.horizon)
        adv_r = batch.advantages[:, 0]
        adv_r = self.normalize(adv_r) if cfg.normalize_advantages else adv_r
        adv_c = self.cost_advantages(batch)
        # J_Ci(pi_{k-1}) - d_i in episode units, as in Eq. `lagrangeupdaterule` and `main_e-COP_problem`
        gap = (batch.ep_cost_est - self.cost_limits).float()
        # Eq. `lagrangeupdaterule` with Psi(pi_{k-1}, pi_{k-1}) (ratio = 1): the advantage term
        # sum_h E_{a ~ pi_{k-1}}[A^{pi_{k-1}}_{C,h}] is exactly 0, so Psi = J_C(pi_{k-1}) - d.
        self.lam = ecop_multiplier_update(self.lam, gap.double(), self.beta)
        lam, beta = self.lam.float().to(self.device), self.beta
        gap_d = gap.to(self.device)  # the multipliers and J_C - d stay on the CPU; the loss meets them here
        # per_step: the whole loss of Eq. `main_e-COP_problem` divided by H_eff (same minimiser, per-sample
        # reward term); episode: the literal sum over h of the reward term
        r_weight, p_weight = (1.0, 1.0 / h_eff) if cfg.constraint_scale == "per_step" else (h_eff, 1.0)

        def loss_fn(idx, ratio, dist):
            loss = -r_weight * clipped_surrogate(ratio, adv_r[idx], cfg.clip, "min").mean()
            if self.m:
                # L_Ci = sum_h E[max(rho A_C, clip(rho) A_C)] ~ H_eff * per-sample mean (episode units)
                l_c = h_eff * clipped_surrogate(ratio, adv_c[idx], cfg.clip, "max").mean(0)
                if cfg.penalty_control_variate:
                    l_c = l_c - h_eff * adv_c[idx].mean(0)
                loss = loss + p_weight * ecop_penalty(l_c + gap_d, lam, beta)
            return loss

        logs = first_order_policy_update(self, batch, loss_fn, uses_dist=False)
        if self.m:
            logs.update(self.penalty_diagnostics(batch, adv_c, gap_d, h_eff))
        if self.m and cfg.adaptive_beta:
            self.beta, c_val, zeta = ecop_damping(
                gap, self.lam, self.beta, self.horizon, cfg.kappa, cfg.beta_max
            )
            logs["secondary_cost"], logs["zeta"] = c_val, zeta
        logs["beta"] = self.beta
        return logs

"""ACPO: Average-Constrained Policy Optimization (chapter `acpo`, Algorithm `practical_acpo`).

One iteration (the core's loop collects the batch and, after :meth:`ACPO.update_policy`, fits the critics):

1. Batch of ``n_envs × rollout_steps`` (= 2500) steps with ``π_k``; average-reward GAE Eq. `avg_GAE`
   (λ = 0.95) for the reward and every cost, ``Ĵ`` and ``Ĵ_{C_i}`` = batch means (core ``average_gae``).
2. ``g``, ``a_i`` = gradients of the importance-weighted surrogates ``E[ρ Â]``, ``E[ρ Â_{C_i}]`` at
   ``θ_k`` (= ``E[∇log π Â]``, appendix `practical_acpo`); ``H`` = Fisher matrix (Hessian of the mean KL)
   through Fisher-vector products; ``H⁻¹g``, ``H⁻¹a_i`` by 10 conjugate-gradient iterations;
   ``c_i = Ĵ_{C_i} − l_i``.
3. If Eq. `acpo_approx` is feasible: ``(λ*, μ*)`` of the dual Eq. `acpo_dual` (closed form for one
   constraint, convex solve for several) and the step Eq. `acpo_dual_update`; else the recovery step
   Eq. `acpo_recovery` with parameter ``t`` (default 0.75).
4. Backtracking line search ``θ_k + s^j x`` (s = 0.75, j ≤ 10) until the acceptance test holds, else no
   update.

Cost limits are *average costs per step* ``l_i`` (the constraint ``J_{C_i}(π) ≤ l_i`` of the chapter),
not episodic budgets.

Departures (see also ``docs/acpo.md``):

* dual term ``−λδ`` instead of the printed ``−λδ/2`` (:mod:`bayescrl.constrained.acpo_math`);
* line-search test: after a recovery step the reference-CPO rule (KL ≤ δ, no cost surrogate increases,
  Eq. `acpo_trust` for the feasible constraints); after a dual step ``dual_check="kl"`` (default) only
  checks the trust region (KL ≤ δ) -- the step already satisfies the linearised constraints, and the box
  has no line search there; checking the cost surrogate too (``"full"``, CPO's code) stalls on the
  constraint boundary, where any tangent step raises the cost at second order;
* KL is ``KL(π_k ‖ π)`` (TRPO/CPO convention, the core's Fisher); the text writes ``KL(π ‖ π_k)``; both
  have the same Hessian ``H`` at ``θ_k``;
* reward advantages are normalised by batch mean/sd as the appendix says; cost advantages are only
  centred, because scaling them would change the units of ``a_i`` relative to ``c_i`` in the linearised
  constraint ``c_i + a_iᵀx ≤ 0``;
* several constraints: the text's recovery step is for one; we recover along the sum of the violated
  constraints' gradients;
* ``H`` is damped (``cg_damping · I``, TRPO/CPO codes) so CG solves a positive-definite system;
* ``Ĵ_{C_i}`` (in ``c_i`` and in the GAE's TD errors alike) is the *phase-stratified* batch mean
  (``cost_estimate="phase"``, :func:`phase_stratified_rate`):
  every within-episode time index weighted equally, which is the average cost of the reset chain.  The
  plain batch mean (``"batch"``, the text's "batch mean") is biased when a batch is not a whole number of
  episodes per env (2500 = 5 × 500 steps, 200-step episodes): on Point-Circle it alternated between
  under- and over-estimating ``J_C`` on successive iterations.
* ``error_correction > 0`` (off by default) adds an online estimate of the linearised cost model's error to
  ``c_i`` (:meth:`ACPO._corrected`); not in the text, see ``docs/acpo.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from bayescrl.constrained.acpo_eval import AverageProtocolMixin
from bayescrl.constrained.acpo_math import (
    Q_MIN,
    acpo_accept,
    acpo_dual,
    acpo_dual_update,
    acpo_feasible,
    acpo_recovery,
)
from bayescrl.constrained.core.base import OnPolicyAlgorithm
from bayescrl.constrained.core.config import CG_RANGES, TrainConfig
from bayescrl.constrained.core.optim import backtracking_line_search, conjugate_gradient, flat_grad
from bayescrl.constrained.core.rollout import Batch
from bayescrl.utils.errors import ConfigError

DUAL_CHECKS = ("kl", "full", "none")
COST_ESTIMATES = ("phase", "batch")

__all__ = ["ACPO", "ACPOConfig", "TrustRegionTerms", "phase_stratified_rate", "trust_region_terms"]


@dataclass
class ACPOConfig(TrainConfig):
    """Table `tab:hyperparameters` (CPO/PCPO/ACPO column) on top of the core's :class:`TrainConfig`."""

    RANGES: ClassVar[dict[str, dict]] = {**TrainConfig.RANGES, **CG_RANGES}
    advantage: str = "average"
    gae_lambda: float = 0.95
    n_envs: int = 5
    rollout_steps: int = 500  # batch 2500
    actor_hidden: tuple[int, ...] = (64, 32)
    critic_hidden: tuple[int, ...] = (64, 32)
    activation: str = "tanh"
    log_std_init: float = -1.0
    pi_lr: float = 2e-4  # unused by the trust-region step (kept for the table)
    vf_lr: float = 2e-4
    update_epochs: int = 10  # critic epochs
    minibatch_size: int = 128
    delta: float = 1e-4
    cg_iters: int = 10
    cg_damping: float = 0.1
    backtrack_coef: float = 0.75
    backtrack_iters: int = 10
    recovery_t: float = 0.75
    dual_check: str = "kl"
    cost_estimate: str = "phase"
    error_correction: float = 0.0  # EMA rate of the linearised-cost model error (0 = off, the text)

    def validate(self) -> None:
        super().validate()
        if self.advantage != "average":
            raise ConfigError("advantage", self.advantage, "ACPO is defined for the 'average' criterion")
        if not (isinstance(self.delta, (int, float)) and math.isfinite(self.delta) and self.delta > 0):
            raise ConfigError("delta", self.delta, "must be a finite number > 0")
        if not isinstance(self.cg_iters, int) or self.cg_iters < 1:
            raise ConfigError("cg_iters", self.cg_iters, "must be an integer >= 1")
        if self.cg_damping < 0:
            raise ConfigError("cg_damping", self.cg_damping, "must be >= 0")
        if not 0.0 < self.backtrack_coef < 1.0:
            raise ConfigError("backtrack_coef", self.backtrack_coef, "must lie in (0, 1)")
        if not isinstance(self.backtrack_iters, int) or self.backtrack_iters < 0:
            raise ConfigError("backtrack_iters", self.backtrack_iters, "must be an integer >= 0")
        if not 0.0 <= self.recovery_t <= 1.0:
            raise ConfigError("recovery_t", self.recovery_t, "must lie in [0, 1]")
        if self.dual_check not in DUAL_CHECKS:
            raise ConfigError("dual_check", self.dual_check, f"must be one of {DUAL_CHECKS}")
        if self.cost_estimate not in COST_ESTIMATES:
            raise ConfigError("cost_estimate", self.cost_estimate, f"must be one of {COST_ESTIMATES}")
        if not (isinstance(self.error_correction, (int, float)) and 0.0 <= self.error_correction <= 1.0):
            raise ConfigError("error_correction", self.error_correction, "must lie in [0, 1] (0 = off)")


@dataclass
class TrustRegionTerms:
    """Everything a trust-region update needs at ``θ_k`` (``d`` parameters, ``m`` constraints)."""

    g: torch.Tensor  # (d,) reward surrogate gradient
    A: torch.Tensor  # (d, m) cost surrogate gradients
    v: torch.Tensor  # (d,) H⁻¹g (CG)
    W: torch.Tensor  # (d, m) H⁻¹A (CG)
    q: float  # gᵀH⁻¹g
    r: np.ndarray  # (m,) AᵀH⁻¹g
    S: np.ndarray  # (m, m) AᵀH⁻¹A
    fvp: object
    x: torch.Tensor  # policy inputs
    old_dist: object
    old_logp: torch.Tensor
    adv_r: torch.Tensor
    adv_c: torch.Tensor


def phase_stratified_rate(costs: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """``Ĵ_C`` with every within-episode time index ``h`` weighted equally: ``mean_h mean_{t: h_t = h} C_t``.

    With episodic resets every ``H`` steps the stationary distribution of the (reset) chain is uniform over
    ``h``, so ``J_C(π) = (1/H) Σ_h E[C | h]``.  The plain batch mean weights ``h`` by how often it occurs
    in the batch; when the batch is not a whole number of episodes per env (5 envs × 500 steps with
    ``H = 200``: alternately phases ``[0, 200) ∪ [0, 200) ∪ [0, 100)`` and ``[100, 200) ∪ [0, 200) ∪
    [0, 200)``) it over-weights early or late phases on alternate iterations -- on Point-Circle, where
    costs are incurred late in an episode, the batch mean alternates between ≈ 0.5× and ≈ 1.5× the true
    rate.  Equals the batch mean when every ``h`` occurs equally often.  ``costs``: (B, m), ``h``: (B,).
    """
    costs = costs.double()
    hi = h.long()
    n_h = int(hi.max()) + 1 if hi.numel() else 0
    hi = hi.to(costs.device)
    sums = torch.zeros(n_h, costs.shape[1], dtype=costs.dtype, device=costs.device).index_add_(0, hi, costs)
    ones = torch.ones_like(hi, dtype=costs.dtype)
    counts = torch.zeros(n_h, dtype=costs.dtype, device=costs.device).index_add_(0, hi, ones)
    seen = counts > 0
    return (sums[seen] / counts[seen, None]).mean(0)


def fisher_vector_product(policy, x: torch.Tensor, damping: float, params: list) -> Callable:
    """``v ↦ (H + damping·I) v``, ``H`` = Hessian of the mean ``KL(π_k ‖ π_θ)`` at ``θ_k`` (double backward).

    Same maths as the core's ``fisher_vector_product``, but the KL graph and its gradient are built once
    and reused by every CG product (the core rebuilds both per product: ~2x the work at 10 CG iterations
    and ``1 + m`` right-hand sides).
    """
    with torch.no_grad():
        old = policy.distribution(x)
    old = _detach(old)
    kl = policy.kl(old, policy.distribution(x)).mean()
    grads = torch.autograd.grad(kl, params, create_graph=True, allow_unused=True)
    flat = torch.cat(
        [(torch.zeros_like(p) if gr is None else gr).reshape(-1) for gr, p in zip(grads, params, strict=True)]
    )

    def fvp(v: torch.Tensor) -> torch.Tensor:
        hv = torch.autograd.grad(flat @ v, params, retain_graph=True, allow_unused=True)
        out = torch.cat(
            [(torch.zeros_like(p) if h is None else h).reshape(-1) for h, p in zip(hv, params, strict=True)]
        )
        return out + damping * v

    return fvp


def _detach(dist):
    if isinstance(dist, torch.distributions.Normal):
        return torch.distributions.Normal(dist.loc.detach(), dist.scale.detach())
    return torch.distributions.Categorical(logits=dist.logits.detach())


def _trust_region_advantages(
    algo: OnPolicyAlgorithm, batch: Batch, normalize_costs: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reward advantages normalised (or centred, without ``normalize_advantages``) and cost advantages
    centred, or normalised with ``normalize_costs`` (see :func:`trust_region_terms`)."""
    adv_r = batch.advantages[:, 0]
    adv_r = algo.normalize(adv_r) if algo.config.normalize_advantages else adv_r - adv_r.mean()
    adv_c = batch.advantages[:, 1:]
    if normalize_costs:
        adv_c = algo.normalize_cost_advantages(adv_c, batch.rewards[:, 1:])
    else:
        adv_c = algo.normalize(adv_c, center_only=True)
    return adv_r, adv_c


def _surrogate_gradients(
    ratio: torch.Tensor, adv_r: torch.Tensor, adv_c: torch.Tensor, params: list
) -> tuple[torch.Tensor, torch.Tensor]:
    """``g = ∇E[ρ Â]`` ``(d,)`` and ``A = [∇E[ρ Â_{C_i}]]_i`` ``(d, m)`` at ``θ_k`` (float64)."""
    m = adv_c.shape[1]
    g = flat_grad((ratio * adv_r).mean(), params, retain_graph=True).double()
    cols = []
    for i in range(m):
        cols.append(flat_grad((ratio * adv_c[:, i]).mean(), params, retain_graph=i < m - 1).double())
    A = torch.stack(cols, 1) if cols else torch.zeros(g.shape[0], 0, dtype=g.dtype, device=g.device)
    return g, A


def trust_region_terms(
    algo: OnPolicyAlgorithm, batch: Batch, cg_iters: int, damping: float, normalize_costs: bool = False
) -> TrustRegionTerms:
    """Surrogate gradients, CG solutions and Gram quantities for ``algo.policy`` on ``batch``.

    Reward advantages normalised (if ``config.normalize_advantages``).  Cost advantages are centred
    (ACPO: ``a_i`` must stay in the units of ``c_i``) or, with ``normalize_costs``, normalised to mean 0 and
    sd 1 as the appendix `Experimental Details` says for all methods (the Lagrangian ATRPO baseline, whose
    step does not depend on ``c``); a cost channel with no cost in the batch is then only centred
    (:meth:`~bayescrl.constrained.core.base.OnPolicyAlgorithm.normalize_cost_advantages`).
    """
    policy = algo.policy
    x = algo.policy_input(batch.obs, batch.h)
    adv_r, adv_c = _trust_region_advantages(algo, batch, normalize_costs)
    with torch.no_grad():
        old_dist = policy.distribution(x)
        old_logp = policy.log_prob_from(old_dist, batch.actions)
    params = [p for p in policy.parameters() if p.requires_grad]
    ratio = torch.exp(policy.log_prob(x, batch.actions) - old_logp)
    g, A = _surrogate_gradients(ratio, adv_r, adv_c, params)
    fvp32 = fisher_vector_product(policy, x, damping, params)

    def fvp(v: torch.Tensor) -> torch.Tensor:
        return fvp32(v.float()).double()

    v = conjugate_gradient(fvp, g, cg_iters)
    W = torch.stack([conjugate_gradient(fvp, A[:, i], cg_iters) for i in range(algo.m)], 1) if algo.m else A
    return TrustRegionTerms(
        g=g,
        A=A,
        v=v,
        W=W,
        q=float(g @ v),
        r=(A.T @ v).cpu().numpy(),
        S=(A.T @ W).cpu().numpy(),
        fvp=fvp,
        x=x,
        old_dist=old_dist,
        old_logp=old_logp,
        adv_r=adv_r,
        adv_c=adv_c,
    )


def surrogate_changes(
    algo: OnPolicyAlgorithm, batch: Batch, tr: TrustRegionTerms
) -> tuple[float, np.ndarray, float]:
    """At the policy's current (trial) parameters: mean KL(π_k‖π), cost and reward surrogate changes."""
    with torch.no_grad():
        dist = algo.policy.distribution(tr.x)
        ratio = torch.exp(algo.policy.log_prob_from(dist, batch.actions) - tr.old_logp)
        kl = float(algo.policy.kl(tr.old_dist, dist).mean())
        d_r = float(((ratio - 1.0) * tr.adv_r).mean())
        d_c = ((ratio - 1.0)[:, None] * tr.adv_c).mean(0).double().cpu().numpy()
    return kl, d_c, d_r


class ACPO(AverageProtocolMixin, OnPolicyAlgorithm):
    """Average-Constrained Policy Optimization (Algorithm `practical_acpo`)."""

    name = "acpo"
    config_class = ACPOConfig
    limits_per_step = True  # the constraint J_C <= l of the chapter is on the average cost per step

    def setup(self) -> None:
        self._last: dict[str, float] = {}
        # model-error correction state: previous J_C estimate, predicted change of the taken step, bias
        self._prev_jc: np.ndarray | None = None
        self._prev_pred = np.zeros(self.m)
        self._bias = np.zeros(self.m)

    def _corrected(self, j_c: np.ndarray) -> np.ndarray:
        """Online estimate of the linearised cost model's error, ``max(b, 0)`` added to ``c`` (departure).

        ``b <- (1 - α) b + α (Ĵ_C,k − Ĵ_C,k−1 − a_{k−1}ᵀx_{k−1})``: the realised minus the predicted change of
        the previous step.  The surrogate ``E_{d_πk}[ρ Â_C]`` ignores the change of the state distribution,
        whose size Theorem `trust_degradation_violation` bounds by ``√(2(δ + V_max)) ν_C``; on Point-Circle
        predicted decreases were not realised on average (docs/acpo.md), so the policy sat above ``l``.
        Only tightens (``max(b, 0)``); ``error_correction = 0`` (default) is the text's constraint.
        """
        a = self.config.error_correction  # type: ignore[attr-defined]
        if self._prev_jc is not None and a > 0:
            self._bias = (1 - a) * self._bias + a * (j_c - self._prev_jc - self._prev_pred)
        self._prev_jc = j_c.copy()
        return np.maximum(self._bias, 0.0) if a > 0 else np.zeros_like(j_c)

    def multipliers(self) -> list[float]:
        return [float(x) for x in self._last.get("mu", [])]

    def average_rates(self, rewards: torch.Tensor, h) -> torch.Tensor | None:
        """``Ĵ`` of the GAE Eq. `avg_GAE`: with ``cost_estimate="phase"`` the phase-stratified rate of every
        channel, so the advantages and ``c_i = Ĵ_{C_i} − l_i`` use the same ``Ĵ_{C_i}``; ``"batch"``: the
        batch mean (the text)."""
        if self.config.cost_estimate != "phase":  # type: ignore[attr-defined]
            return None
        k = rewards.shape[-1]
        rate = phase_stratified_rate(
            rewards.reshape(-1, k), torch.as_tensor(h, device=rewards.device).reshape(-1)
        )
        return rate.to(rewards.dtype)

    def update_policy(self, batch: Batch) -> dict[str, float]:
        """One ACPO policy step (Algorithm `practical_acpo`, steps 2-4): trust-region terms, the dual
        step Eq. `acpo_dual_update` or the recovery step Eq. `acpo_recovery`, backtracking line search."""
        cfg: ACPOConfig = self.config  # type: ignore[assignment]
        tr = trust_region_terms(self, batch, cfg.cg_iters, cfg.cg_damping)
        j_c = self._cost_rates(batch)
        corr = self._corrected(j_c.numpy())
        c = (j_c - self.cost_limits).numpy() + corr
        logs = self._batch_logs(batch, tr, c, j_c)
        feasible = self.m == 0 or acpo_feasible(tr.S, c, cfg.delta)
        if feasible and tr.q <= Q_MIN:
            # no reward ascent direction (q = gᵀH⁻¹g ≈ 0, the dual Eq. `acpo_dual` is undefined) and x = 0
            # is feasible: no step. Same threshold as `acpo_dual` (a q in (1e-16, 1e-12] used to reach
            # it and raise mid-training); the recovery step below needs no q.
            logs.update(branch="none", backtracks=-1)
            self._last = {"mu": [0.0] * self.m}
            self._prev_pred = np.zeros(self.m)
            return logs
        if feasible:
            step, lam, mu = self._dual_step(tr, c)
            branch, check = "dual", cfg.dual_check
            logs.update(lam=lam)
        else:
            viol = torch.as_tensor(c > 0, device=tr.W.device)
            w, a = tr.W[:, viol].sum(1), tr.A[:, viol].sum(1)
            step = acpo_recovery(tr.v, w, tr.q, float(a @ w), cfg.delta, t=cfg.recovery_t)
            branch, check, mu = "recovery", "full", [0.0] * self.m
        ok, j = self._line_search(batch, tr, step, c, branch, check)
        kl, d_c, _ = surrogate_changes(self, batch, tr)
        self._last = {"mu": mu}
        frac = cfg.backtrack_coef**j if ok else 0.0
        self._prev_pred = (frac * (tr.A.T @ step)).cpu().numpy()
        logs.update(
            branch=branch if ok else "none",
            backtracks=j if ok else -1,
            kl=kl,
            mu=mu,
            lin_dc=(frac * (tr.A.T @ step)).tolist(),  # linearised cost change a_iᵀx of the taken step
            surr_dc=d_c.tolist() if ok else [0.0] * self.m,  # importance-weighted cost surrogate change
        )
        return logs

    def _cost_rates(self, batch: Batch) -> torch.Tensor:
        """``Ĵ_{C_i}`` on the CPU: the phase-stratified rate (``cost_estimate="phase"``, the ``Ĵ_C`` of the
        advantages, :meth:`average_rates`) or the batch mean (``"batch"``, the text)."""
        if self.config.cost_estimate == "phase":  # type: ignore[attr-defined]
            j_c = phase_stratified_rate(batch.rewards[:, 1:], batch.h)
        else:
            j_c = (
                batch.avg_rates[1:].double()
                if batch.avg_rates is not None
                else batch.rewards[:, 1:].double().mean(0)
            )
        return j_c.cpu()  # the constraint values are small CPU vectors (numpy below)

    def _batch_logs(self, batch: Batch, tr: TrustRegionTerms, c: np.ndarray, j_c: torch.Tensor) -> dict:
        """The iteration's record before the step: ``c``, model error, ``q`` and the batch's averages."""
        return {
            "c": c.tolist(),
            "model_error": self._bias.tolist(),
            "q": tr.q,
            "avg_reward": float(batch.rewards[:, 0].mean()),
            "avg_costs": j_c.tolist(),
            "batch_mean_costs": batch.rewards[:, 1:].double().mean(0).tolist(),
            "ep_cost_sd": (
                np.std(batch.ep_costs, 0) if len(batch.ep_costs) > 1 else np.zeros(self.m)
            ).tolist(),
        }

    def _dual_step(self, tr: TrustRegionTerms, c: np.ndarray) -> tuple[torch.Tensor, float, list[float]]:
        """``(x, λ*, μ*)``: the step Eq. `acpo_dual_update` from the dual Eq. `acpo_dual` (without
        constraints the TRPO step ``v / sqrt(q / 2δ)``)."""
        delta = self.config.delta  # type: ignore[attr-defined]
        if self.m == 0:
            return tr.v / math.sqrt(tr.q / (2 * delta)), math.sqrt(tr.q / (2 * delta)), []
        sol = acpo_dual(tr.q, tr.r, tr.S, c, delta)
        return acpo_dual_update(tr.v, tr.W, sol), sol.lam, sol.mu.tolist()

    def _line_search(
        self, batch: Batch, tr: TrustRegionTerms, step: torch.Tensor, c: np.ndarray, branch: str, check: str
    ) -> tuple[bool, int]:
        """Backtracking ``θ_k + s^j x`` until the acceptance test (Eq. `acpo_trust`, ``check``: ``"kl"``
        trust region only, ``"full"`` also the cost surrogates, ``"none"`` the full step) holds."""
        cfg: ACPOConfig = self.config  # type: ignore[assignment]

        def accept() -> bool:
            kl, d_c, d_r = surrogate_changes(self, batch, tr)
            if check == "kl":
                return acpo_accept(kl, np.zeros(self.m), np.zeros(self.m), cfg.delta)
            return acpo_accept(kl, d_c, c, cfg.delta, reward_change=d_r if branch == "dual" else None)

        if check == "none":
            return backtracking_line_search(self.policy, step.float(), lambda: True, 1, cfg.backtrack_coef)
        return backtracking_line_search(
            self.policy, step.float(), accept, cfg.backtrack_iters + 1, cfg.backtrack_coef
        )

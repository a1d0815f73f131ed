"""ACPO on a tabular average-reward CMDP with a softmax policy: the update rule checked against LP optima.

Algorithm `practical_acpo` with the estimates of line 4 replaced by their exact values (oracle mode) or by
Monte-Carlo estimates from one long trajectory per iteration (sampled mode):

* exact: ``J, J_{C_i}``, the stationary distribution ``d_π`` and the bias functions ``V̄`` come from
  :meth:`bayescrl.envs.tabular_cmdp.TabularCMDP.evaluate`; advantages from the average-reward Bellman
  equation Eq. `bellman_objective`, ``Ā(s,a) = r(s,a) − J + E[V̄(s')] − V̄(s)``.
* sampled: ``Ĵ`` is the batch mean, advantages are the average-reward GAE of Eq. `avg_GAE` (λ = 0.95) with a
  tabular critic fitted to the targets ``V̂_t^targ`` of appendix `practical_acpo`.

With the softmax parameterisation ``π(a|s) ∝ exp θ[s, a]`` the score is ``∂ log π(a|s)/∂θ[s, b] = 1{a=b} −
π(b|s)``, so ``g[s, b] = E_{d_π}[…] = d(s) π(b|s) Ā(s, b)`` (exact) and the Fisher matrix ``H`` is block
diagonal, ``H_s = d(s)(diag π_s − π_s π_sᵀ)``.  ``H`` is singular along ``θ[s] + const``; we add the damping
``damping · I`` (as every TRPO/CPO code does) so CG solves a positive-definite system.

The line-search test evaluates the constraints of Eq. `acpo_trust` on ``d_{π_k}`` exactly (exact mode) or by
importance weights on the batch (sampled mode): average KL ``≤ δ``, surrogate cost change, reward change.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch

from bayescrl.constrained.acpo_math import (
    acpo_accept,
    acpo_dual,
    acpo_dual_update,
    acpo_feasible,
    acpo_recovery,
)
from bayescrl.constrained.core.optim import conjugate_gradient, line_search
from bayescrl.envs.tabular_cmdp import TabularCMDP
from bayescrl.utils.errors import ConfigError

DUAL_CHECKS = ("kl", "full", "none")

__all__ = ["TabularACPOConfig", "TabularACPOResult", "run_tabular_acpo", "softmax_policy"]


@dataclass
class TabularACPOConfig:
    """Hyperparameters of tabular ACPO (defaults: table `tab:hyperparameters` except ``delta``).

    ``delta`` defaults to 0.01 instead of the table's 1e-4: with exact gradients and a handful of
    parameters a 1e-4 trust region needs ~10⁴ iterations to cross the simplex.
    """

    iterations: int = 200
    delta: float = 0.01
    recovery_t: float = 0.75
    cg_iters: int = 10
    damping: float = 1e-3
    backtrack_coef: float = 0.75
    backtrack_iters: int = 10
    dual_check: str = "kl"  # line-search test of the dual step: kl | full (CPO reference code) | none
    mode: str = "exact"  # exact | sampled
    batch_size: int = 2500
    n_chains: int = 25  # parallel chains in sampled mode (batch_size // n_chains steps each)
    gae_lambda: float = 0.95
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.iterations, int) or self.iterations < 1:
            raise ConfigError("iterations", self.iterations, "must be an integer >= 1")
        if not (math.isfinite(self.delta) and self.delta > 0):
            raise ConfigError("delta", self.delta, "must be a finite number > 0")
        if not 0.0 <= self.recovery_t <= 1.0:
            raise ConfigError("recovery_t", self.recovery_t, "must lie in [0, 1]")
        if self.mode not in ("exact", "sampled"):
            raise ConfigError("mode", self.mode, "must be 'exact' or 'sampled'")
        if self.dual_check not in DUAL_CHECKS:
            raise ConfigError("dual_check", self.dual_check, f"must be one of {DUAL_CHECKS}")
        if self.damping < 0:
            raise ConfigError("damping", self.damping, "must be >= 0")
        if not isinstance(self.n_chains, int) or self.n_chains < 1:
            raise ConfigError("n_chains", self.n_chains, "must be an integer >= 1")
        if not isinstance(self.batch_size, int) or self.batch_size < 2 * self.n_chains:
            raise ConfigError(
                "batch_size", self.batch_size, f"must be an integer >= 2 * n_chains = {2 * self.n_chains}"
            )
        if not 0.0 <= self.gae_lambda <= 1.0:
            raise ConfigError("gae_lambda", self.gae_lambda, "must lie in [0, 1]")


@dataclass
class TabularACPOResult:
    """Per-iteration exact ``J`` and ``J_C`` of the iterates, branch taken and final policy."""

    rewards: list[float] = field(default_factory=list)
    costs: list[list[float]] = field(default_factory=list)
    branch: list[str] = field(default_factory=list)  # "dual", "recovery" or "none" (line search failed)
    policy: np.ndarray | None = None


def softmax_policy(theta: torch.Tensor) -> torch.Tensor:
    """``π(a|s) = softmax(θ[s])`` for ``θ`` of shape (S, A)."""
    return torch.softmax(theta, dim=-1)


def _advantages(cmdp: TabularCMDP, pi: np.ndarray):
    """Exact ``J``, ``J_C`` (m,), ``d`` (S,) and advantages (1+m, S, A) by Eq. `bellman_objective`."""
    ev = cmdp.evaluate(pi)
    signals = np.concatenate([cmdp.expected_rewards[None], cmdp.expected_costs])  # (1+m, S, A)
    V = np.concatenate([ev.state_values[None], ev.cost_values])  # (1+m, S)
    J = np.concatenate([[ev.value], ev.costs])
    EV = np.einsum("sat,kt->ksa", cmdp.transitions, V)
    adv = signals - J[:, None, None] + EV - V[:, :, None]
    return ev.value, np.asarray(ev.costs), ev.state_distribution, adv


def _sample_advantages(
    cmdp: TabularCMDP, pi: np.ndarray, states0: np.ndarray, steps: int, lam: float, rng: np.random.Generator
):
    """``K = len(states0)`` parallel chains of ``steps`` steps (continuing, never reset: the average-reward
    setting); batch estimates ``Ĵ`` and the average-reward GAE of Eq. `avg_GAE` with a tabular critic.

    The critic is the per-state mean of the Monte-Carlo bias targets ``Σ_{t'≥t}(x_{t'} − Ĵ)`` (appendix
    `practical_acpo`), centred; GAE bootstraps with it, ``V(s_N)`` closing each chain.
    Returns ``Ĵ`` (1+m,), visited states (K, steps+1), actions (K, steps), advantages (1+m, K, steps).
    """
    S, A = pi.shape
    K = states0.shape[0]
    sig = np.concatenate([cmdp.expected_rewards[None], cmdp.expected_costs])  # (1+m, S, A)
    cpi, cP = np.cumsum(pi, -1), np.cumsum(cmdp.transitions, -1)
    states = np.empty((K, steps + 1), dtype=np.int64)
    actions = np.empty((K, steps), dtype=np.int64)
    states[:, 0] = states0
    u = rng.random((steps, 2, K))
    for t in range(steps):
        s = states[:, t]
        a = np.minimum((cpi[s] < u[t, 0][:, None] * cpi[s, -1:]).sum(-1), A - 1)
        actions[:, t] = a
        row = cP[s, a]
        states[:, t + 1] = np.minimum((row < u[t, 1][:, None] * row[:, -1:]).sum(-1), S - 1)
    x = sig[:, states[:, :-1], actions]  # (1+m, K, steps)
    J = x.reshape(x.shape[0], -1).mean(1)
    resid = x - J[:, None, None]
    mc = np.cumsum(resid[..., ::-1], axis=-1)[..., ::-1]
    flat_s = states[:, :-1].reshape(-1)
    counts = np.maximum(np.bincount(flat_s, minlength=S), 1)
    V = np.stack([np.bincount(flat_s, weights=mk.reshape(-1), minlength=S) / counts for mk in mc])
    V -= V.mean(1, keepdims=True)
    deltas = resid + V[:, states[:, 1:]] - V[:, states[:, :-1]]
    adv = np.zeros_like(deltas)
    run = np.zeros(deltas.shape[:2])
    for t in range(steps - 1, -1, -1):
        run = deltas[..., t] + lam * run
        adv[..., t] = run
    return J, states, actions, adv


def _kl(new: torch.Tensor, pi_t: torch.Tensor, d_t: torch.Tensor) -> torch.Tensor:
    """``Σ_s d(s) KL(π_new(·|s) ‖ π_k(·|s))`` (the text's direction, Eq. `acpo_trust`)."""
    log_ratio = new.clamp_min(1e-300).log() - pi_t.clamp_min(1e-300).log()
    return (d_t * (new * log_ratio).sum(-1)).sum()


def _surrogate_exact(th, d_t, adv, pi_t) -> tuple[float, np.ndarray, float]:
    """Exact KL and surrogate changes ``E_{s∼d_k, a∼π_θ}[Ā]`` (reward, costs) at ``θ``."""
    new = softmax_policy(th.view(pi_t.shape))
    ch = torch.einsum("s,sa,ksa->k", d_t, new, adv)
    return float(_kl(new, pi_t, d_t)), ch[1:].cpu().numpy(), float(ch[0])


def _surrogate_sampled(th, s_t, a_t, adv_t, d_t, pi_t) -> tuple[float, np.ndarray, float]:
    """Importance-weighted batch surrogate changes ``mean((ρ − 1) Â)``; KL on the empirical ``d``."""
    new = softmax_policy(th.view(pi_t.shape))
    ratio = new[s_t, a_t] / pi_t[s_t, a_t]
    ch = ((ratio - 1.0)[None] * adv_t).mean(1)
    return float(_kl(new, pi_t, d_t)), ch[1:].cpu().numpy(), float(ch[0])


def _fisher_vp(v: torch.Tensor, d_t, pi_t, damping: float) -> torch.Tensor:
    """``(H + damping I) v`` with ``H_s = d(s)(diag π_s − π_s π_sᵀ)`` (softmax Fisher, block diagonal)."""
    vs = v.view(pi_t.shape)
    hv = d_t[:, None] * (pi_t * vs - pi_t * (pi_t * vs).sum(-1, keepdim=True))
    return hv.reshape(-1) + damping * v


def _accept(x, theta, surrogate, c, delta: float, need_reward: bool, check: str) -> bool:
    kl, dc, dr = surrogate(theta + x)
    if check == "kl":
        return acpo_accept(kl, np.zeros_like(c), np.zeros_like(c), delta)
    return acpo_accept(kl, dc, c, delta, reward_change=dr if need_reward else None)


def _exact_gradients(
    d: np.ndarray, adv: np.ndarray, pi: np.ndarray, pi_t: torch.Tensor, device: str | torch.device
) -> tuple[torch.Tensor, torch.Tensor, Callable]:
    """Exact policy gradients ``g[k, (s, b)] = d(s) π(b|s) Ā_k(s, b)`` of the reward and each cost
    ``(1 + m, S·A)``, the state distribution and the exact surrogate."""
    m1 = adv.shape[0]
    weights = d[:, None] * pi  # (S, A): exact d_π(s) π(a|s)
    score_w = torch.as_tensor(weights[None] * adv, device=device)  # (1+m, S, A)
    grads = score_w.reshape(m1, -1)  # g[s, b] = d(s) π(b|s) Ā(s, b)
    d_t = torch.as_tensor(d, device=device)
    surrogate = partial(_surrogate_exact, d_t=d_t, adv=torch.as_tensor(adv, device=device), pi_t=pi_t)
    return grads, d_t, surrogate


def _sampled_gradients(
    cmdp: TabularCMDP, pi_t: torch.Tensor, chains: np.ndarray, steps: int, cfg: TabularACPOConfig,
    rng: np.random.Generator, device: str | torch.device,
) -> tuple[np.ndarray, torch.Tensor, torch.Tensor, Callable, np.ndarray]:  # fmt: skip
    """Score-function gradients from ``steps`` transitions of each chain (reward advantages standardised,
    cost advantages centred); returns ``(Ĵ_C, grads (1 + m, S·A), visit frequencies, sampled surrogate,
    the chains' last states)``."""
    S, A = cmdp.num_states, cmdp.num_actions
    pi = pi_t.cpu().numpy()
    Jhat, states, actions, adv_s = _sample_advantages(cmdp, pi, chains, steps, cfg.gae_lambda, rng)
    chains = states[:, -1]
    states, actions = states[:, :-1].reshape(-1), actions.reshape(-1)
    adv_s = adv_s.reshape(adv_s.shape[0], -1)
    n = states.shape[0]
    adv_s[0] = (adv_s[0] - adv_s[0].mean()) / (adv_s[0].std() + 1e-8)  # reward adv: mean/std
    adv_s[1:] = adv_s[1:] - adv_s[1:].mean(1, keepdims=True)  # cost adv: centred only
    s_t = torch.as_tensor(states, device=device)
    a_t = torch.as_tensor(actions, device=device)
    adv_t = torch.as_tensor(adv_s, device=device)
    onehot = torch.nn.functional.one_hot(a_t, A).double()
    score = onehot - pi_t[s_t]  # (n, A): ∂ log π(a_t|s_t)/∂θ[s_t, ·]
    grads = torch.zeros(adv_s.shape[0], S, A, dtype=torch.float64, device=device)
    grads.index_add_(1, s_t, (adv_t[:, :, None] * score[None]))
    grads = grads.reshape(adv_s.shape[0], -1) / n
    d_t = torch.as_tensor(np.bincount(states, minlength=S) / n, device=device)
    surrogate = partial(_surrogate_sampled, s_t=s_t, a_t=a_t, adv_t=adv_t, d_t=d_t, pi_t=pi_t)
    return Jhat[1:], grads, d_t, surrogate, chains


def _acpo_direction(
    grads: torch.Tensor, fvp: Callable, c: np.ndarray, cfg: TabularACPOConfig, device: str | torch.device
) -> tuple[torch.Tensor, str, bool] | None:
    """The step of Algorithm `practical_acpo`: ``(step, "dual" | "recovery", reward must improve)``, by
    conjugate gradients on ``F⁻¹ [g, A]``; None when the reward gradient vanishes (``gᵀF⁻¹g ≤ 1e-16``)."""
    g, Amat = grads[0], grads[1:].T  # (d,), (d, m)
    sol_all = conjugate_gradient(fvp, torch.cat([g[:, None], Amat], 1), iters=cfg.cg_iters)
    v, W = sol_all[:, 0], sol_all[:, 1:]
    q = float(g @ v)
    r = (Amat.T @ v).cpu().numpy()
    Smat = (Amat.T @ W).cpu().numpy()
    if q <= 1e-16:
        return None
    if acpo_feasible(Smat, c, cfg.delta):
        sol = acpo_dual(q, r, Smat, c, cfg.delta)
        return acpo_dual_update(v, W, sol), "dual", True
    # one constraint as in the text; with several, recover along the sum of the violated ones
    viol = c > 0
    w = W[:, torch.as_tensor(viol, device=device)].sum(1)
    s_val = float(Amat[:, torch.as_tensor(viol, device=device)].sum(1) @ w)
    return acpo_recovery(v, w, q, s_val, cfg.delta, t=cfg.recovery_t), "recovery", False


def _checked_step(
    step: torch.Tensor, branch: str, need_reward: bool, theta: torch.Tensor, surrogate: Callable,
    c: np.ndarray, cfg: TabularACPOConfig,
) -> torch.Tensor | None:  # fmt: skip
    """The step as taken: backtracked until :func:`_accept` holds (a dual step as is with ``dual_check:
    none``); None when the line search fails."""
    check = cfg.dual_check if branch == "dual" else "full"
    if check == "none":
        return step  # Algorithm `practical_acpo` line 7 read literally: the dual step is taken as is
    accept = partial(
        _accept,
        theta=theta,
        surrogate=surrogate,
        c=c,
        delta=cfg.delta,
        need_reward=need_reward,
        check=check,
    )
    taken, _ = line_search(step, accept, cfg.backtrack_coef, cfg.backtrack_iters)
    return taken


def run_tabular_acpo(
    cmdp: TabularCMDP, config: TabularACPOConfig | None = None, device: str | torch.device = "cpu"
) -> TabularACPOResult:
    """Run Algorithm `practical_acpo` on ``cmdp`` (criterion ``"average"``) from the uniform policy."""
    cfg = config or TabularACPOConfig()
    if cmdp.criterion != "average":
        raise ConfigError("cmdp.criterion", cmdp.criterion, "tabular ACPO needs the 'average' criterion")
    S, A = cmdp.num_states, cmdp.num_actions
    limits = np.asarray(cmdp.limits, dtype=np.float64)
    theta = torch.zeros(S * A, dtype=torch.float64, device=device)
    rng = np.random.default_rng(cfg.seed)
    chains = rng.integers(S, size=cfg.n_chains)
    steps = cfg.batch_size // cfg.n_chains
    out = TabularACPOResult()
    for _ in range(cfg.iterations):
        pi_t = softmax_policy(theta.view(S, A))
        pi = pi_t.cpu().numpy()
        J_true, Jc_true, d_true, adv_true = _advantages(cmdp, pi)
        out.rewards.append(J_true)
        out.costs.append(Jc_true.tolist())
        if cfg.mode == "exact":
            Jc = Jc_true
            grads, d_t, surrogate = _exact_gradients(d_true, adv_true, pi, pi_t, device)
        else:
            Jc, grads, d_t, surrogate, chains = _sampled_gradients(
                cmdp, pi_t, chains, steps, cfg, rng, device
            )
        fvp = partial(_fisher_vp, d_t=d_t, pi_t=pi_t, damping=cfg.damping)
        c = np.asarray(Jc) - limits
        direction = _acpo_direction(grads, fvp, c, cfg, device)
        taken = None if direction is None else _checked_step(*direction, theta, surrogate, c, cfg)
        if taken is None:
            out.branch.append("none")
            continue
        theta = theta + taken
        out.branch.append(direction[1])
    pi = softmax_policy(theta.view(S, A)).cpu().numpy()
    J_true, Jc_true, _, _ = _advantages(cmdp, pi)
    out.rewards.append(J_true)
    out.costs.append(Jc_true.tolist())
    out.policy = pi
    return out

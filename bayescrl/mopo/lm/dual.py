"""Head-batched MOPO dual quantities for language-model mini-batches (thin adapter over the core).

All formulas come from :mod:`bayescrl.mopo.objective`; this module only arranges LM mini-batches for it.
An *atom* is one response of the symmetrically augmented batch (record ``i`` gives ``(a_i, b_i, I_i)`` and
``(b_i, a_i, 1 - I_i)``, section `appendix:samplingbasedcop`), so the closed form of Eq. `empirical-dual`
is evaluated per response (a generated response appears once in an LM data set). ``H`` MOPO problems are
solved at once, one per policy head (head ``h`` maximises objective ``primary[h]`` under lower bounds on the
other ``C = K - 1`` objectives; figure `multiplepolicyheads`). Shapes: indicators ``(n, K)``; ``lam``,
``chi``, ``b`` ``(H, C)``; lagged log-ratios ``ell = log pi_lag(y) - log pi_ref(y)`` ``(H, n)``.

The reference measure of the atoms is the lagged reference reweighted onto the data,
``w_lag = softmax(ell)`` (uniform while ``pi_lag = pi_ref``), and ``rho* = pi* / pi_lag`` is normalised under
it (the core's ``normalize=True``: ``E_lag[rho*] = 1``, so ``G`` is a win-rate in [0, 1] on the scale of
the adaptive thresholds ``b = beta * G(rho^(t-t0))``). The lower bound uses the sign-corrected Eq.
`lbop_lagrangian`; both departures are explained in :mod:`bayescrl.mopo.objective`. ``chi`` is kept
``>= chi_min > 0`` instead of the projection ``[.]_+`` of Algorithm `mopo`, which would divide by zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bayescrl.mopo import objective as obj


def augment(prefs: torch.Tensor) -> torch.Tensor:
    """Indicators of the symmetric augmentation, ``(N, K) -> (2N, K)`` = ``[I ; 1 - I]``.

    Row ``i`` is response ``a`` of record ``i`` and row ``N + i`` response ``b``, so log-probabilities must be
    stacked ``[a ; b]`` (as :meth:`MOPOLMTrainer.batch` does). Uses :func:`objective.augment_symmetric`.
    """
    idx = torch.arange(prefs.shape[0], device="cpu")
    _, _, cols = obj.augment_symmetric(idx, idx, prefs.to(torch.get_default_dtype()))
    return cols


def split_heads(indicators: torch.Tensor, primary: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``p`` ``(H, n)`` and ``q`` ``(H, n, K-1)`` for heads with primary objectives ``primary`` ``(H,)``."""
    parts = [obj.split_objectives(indicators, int(k)) for k in primary]
    return torch.stack([p for p, _ in parts]), torch.stack([q for _, q in parts])


@dataclass
class BatchDual:
    """Per-batch quantities at a given ``lambda``: reference weights, ``rho*``, BC weights and ``G``."""

    w_lag: torch.Tensor  # (H, n), sums to 1: lagged reference measure of the atoms
    log_rho: torch.Tensor  # (H, n): log rho*_lambda = log pi*/pi_lag, E_lag[rho*] = 1
    u: torch.Tensor  # (H, n): BC weights pi*/pi_data, mean 1 (Eq. `policy-extraction`)
    g: torch.Tensor | None  # (H, C): G(rho*) = E_lag[rho* q], a win-rate (None: not requested)


def batch_dual(
    p: torch.Tensor, q: torch.Tensor, ell: torch.Tensor, lam: torch.Tensor, tau: float, with_g: bool = True
) -> BatchDual:
    """Closed-form ``rho*_lambda`` (Prop. `main_dual`), its constraint values and the BC weights.

    ``with_g=False`` skips ``G`` (the policy step only needs the weights ``u``)."""
    w_lag = obj.normalized_ratio(ell) / ell.shape[-1]
    log_rho = obj.log_rho_star(p, q, lam, tau, weight=w_lag, normalize=True)
    u = obj.bc_weights(log_rho, log_ratio_lag=ell)
    # G = E_lag[rho* q] = mean_data[u q]: evaluated with the uniform data measure (the G part of
    # ``objective.primal_values(u, p, q, tau)``, written out to skip its unused entropy term F), because
    # ``primal_values`` does not broadcast a per-head ``weight`` (H, n) against q's C dim
    g = ((u / u.shape[-1]).unsqueeze(-1) * q).sum(-2) if with_g else None
    return BatchDual(w_lag, log_rho, u, g)


def lower_bounds(d: BatchDual, q: torch.Tensor, chi: torch.Tensor, eps: float) -> torch.Tensor:
    """``LowerBound(G_k)`` of Prop. `lowerbound_dual` at ``chi`` (equals ``G`` when ``eps = 0``)."""
    if eps == 0.0:
        return d.g
    x = torch.exp(d.log_rho).unsqueeze(-1) * q
    return obj.lower_bound(x, chi, eps, weight=d.w_lag)


def chi_step(
    chi: torch.Tensor, d: BatchDual, q: torch.Tensor, eps: float, lr: float, chi_min: float = 1e-3
) -> torch.Tensor:
    """One projected gradient step on Eq. `chi_update`: ``chi <- max(chi - lr * grad J(chi), chi_min)``.

    ``J = objective.chi_loss = -LB(chi)``; its gradient is written out (the derivative in the docstring of
    :func:`objective.chi_star`): ``dJ/dchi = log E_w[exp(-x/chi)] + E_tilt[x]/chi + eps`` with the tilted
    measure ``tilt ∝ w exp(-x/chi)`` (zero for ``chi = inf``, where ``LB`` is the constant ``E_w[x]``).
    Autograd through ``chi_loss`` gives the same values up to float rounding at ~3x the cost.
    """
    if chi.numel() == 0 or eps == 0.0:
        return chi
    x = (torch.exp(d.log_rho).unsqueeze(-1) * q).detach().transpose(-1, -2)  # (H, C, n)
    c = chi.detach().to(x).unsqueeze(-1)  # (H, C, 1)
    finite = torch.isfinite(c)
    c = torch.where(finite, c, torch.ones_like(c))
    z = -x / c + torch.log(d.w_lag.detach().to(x)).unsqueeze(-2)
    grad = torch.logsumexp(z, dim=-1) + (torch.softmax(z, dim=-1) * x).sum(-1) / c.squeeze(-1) + eps
    grad = torch.where(finite.squeeze(-1), grad, torch.zeros_like(grad))
    return (chi - lr * grad).clamp_min(chi_min).detach()


def lambda_step(lam: torch.Tensor, bound: torch.Tensor, b: torch.Tensor, lr: float) -> torch.Tensor:
    """Projected descent on Eq. `lambda_policy_update`: ``lam <- [lam - lr (LB - b)]_+``.

    ``LB - b`` is the gradient of :func:`objective.lambda_loss` in ``lam`` with ``F`` and ``LB`` detached
    (Danskin), written out rather than differentiated (autograd cost ~1.5 ms per step on the tiny model).
    """
    return (lam - lr * (bound - b)).clamp_min(0.0).detach()


def barrier_lambda(g: torch.Tensor, b: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """Multipliers of the relaxed log barrier (``mopo-lb``, remark `logbarrier`)."""
    return obj.barrier_multipliers(g, b, sigma)


def barrier_lagrangian(
    log_ratio: torch.Tensor,
    p: torch.Tensor,
    q: torch.Tensor,
    weight: torch.Tensor,
    b: torch.Tensor,
    sigma: torch.Tensor,
    tau: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``L_LB(rho, sigma) = F(rho) - sum_k B_{sigma_k, sigma_k^2}(b_k - G_k(rho))`` (Eq. `logbarrier`), ``G``.

    ``rho = pi_psi / pi_lag`` of the atoms from ``log_ratio = log pi_psi - log pi_lag`` ``(H, n)``,
    self-normalised under the reference measure ``weight`` (``E_w[rho] = 1``, as ``rho*`` is normalised in
    :func:`batch_dual`); ``F = E_w[rho p] - tau E_w[rho ln rho]`` and ``G = E_w[rho q]``
    (:func:`objective.primal_values`). Differentiable in ``log_ratio``: its gradient is Eq.
    `log-barrier-objective-grad`, ``dF + sum_k lam_k dG_k`` with ``lam_k = sigma_k / max(G_k - b_k,
    sigma_k^2)``. With atoms = actions and ``weight = pi_ref`` this is the tabular objective of
    :func:`bayescrl.mopo.tabular.run_mopo_lb` (tested). Returns ``(L_LB (H,), G (H, C))``.
    """
    rho = obj.normalized_ratio(log_ratio, weight)
    f, g = obj.primal_values(rho, p, q, tau, weight=weight)
    return obj.barrier_objective(f, g, b, sigma), g


def threshold(beta: torch.Tensor, ell: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``b = beta * G(rho^(t-t0))`` with ``rho^(t-t0) = pi_lag / pi_ref`` self-normalised on the batch."""
    return obj.adaptive_threshold(beta, obj.normalized_ratio(ell), q)

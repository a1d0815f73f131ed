r"""MOPO objective: pure, batched torch functions for the concave problem `main-obj` (chapter `mopo`).

Every function works on *atoms*: the rows of a tensor of preference indicators. In tabular mode an atom is
an action (its preference values are per-action estimates and its weight is ``pi_ref(a)``); in sample mode
(language models, neural policies) an atom is one example ``(x, y, y')`` of a mini-batch (weight ``1/N``, or
self-normalised importance weights when the reference is lagged). Leading batch dimensions (runs, seeds,
thresholds) broadcast everywhere.

Shapes (``...`` = any leading batch dims, ``N`` atoms, ``K`` objectives, ``C = K - 1`` constraints)::

    split_objectives(ind[..., N, K], primary)            -> p[..., N], q[..., N, C]
    augment_symmetric(y[N], y_prime[N], ind[N, K], pointwise=None[N, J], pointwise_prime=None[N, J])
                                                         -> y[2N], y_prime[2N], ind[2N, K (+J)]
    safety_columns(pref[N], safe_y[N], safe_y_prime[N])  -> p[2N], q[2N, 1]          (Eq. `safe-obj`)
    scores(p[..., N], q[..., N, C], lam[..., C])         -> s[..., N] = p + lam . q
    log_rho_star(p, q, lam, tau, weight=None[..., N], normalize=True) -> log rho*_lam[..., N]
    rho_star(...)                                        -> exp(log_rho_star(...))   (Prop. `main_dual`)
    primal_values(rho, p, q, tau, weight=None)           -> (F[...], G[..., C])       (Eq. `main-obj`)
    dual_value(lam, p, q, b, tau, weight=None, normalize=True) -> D(lam)[...]         (Eq. `dual`)
    dual_gradient(lam, p, q, b, tau, weight=None, normalize=True) -> G(rho*_lam) - b [..., C]
    lower_bound(x[..., N, C], chi[..., C], eps, weight=None) -> LB[..., C]          (Prop. `lowerbound_dual`)
    chi_loss(x, chi, eps, weight=None)                   -> -sum_k LB_k [...]         (Eq. `chi_update`)
    chi_star(x, eps, weight=None)                        -> argmax_chi LB [..., C]    (1-D concave, bisection)
    lambda_loss(lam, F, lb, b)                           -> F - lam.(b - lb)   (Eq. `lambda_policy_update`)
    normalized_ratio(log_ratio[..., N], weight=None)     -> ratio[..., N] with sum(weight * ratio) = 1
    bc_weights(log_rho[..., N], log_ratio_lag=None, weight=None) -> w[..., N]       (Eq. `policy-extraction`)
    bc_loss(logp[..., N], w[..., N])                     -> -mean(w * logp) [...]
    pairwise_extraction_loss(logp[..., 2M], log_base[..., 2M], log_rho[..., 2M]) -> [...]  (rows [a ; b])
    adaptive_threshold(beta[C], rho_prev[..., N], q[..., N, C], weight=None) -> b = beta * G(rho_prev)
    log_barrier(z, sigma, s=None)                        -> B_{sigma,s}(z)            (remark `logbarrier`)
    barrier_objective(F, G, b, sigma)                    -> L_LB = F - sum_k B(b_k - G_k)  (Eq. `logbarrier`)
    barrier_multipliers(G, b, sigma)                     -> sigma / max(G - b, sigma^2)
    sigma_schedule(sigma0, gamma, t)                     -> sigma0 * gamma**t

``weight`` is the reference measure of the atoms and must sum to one over ``N`` (``None`` = uniform
``1/N``). ``p`` is the primary preference (the thesis' objective ``K``), ``q`` the ``K - 1`` constrained ones.

Departures from the text, all documented where they occur:

* **Normalisation** (``normalize=True``, the default). Problem `main-obj` maximises over a free ratio ``rho``
  and Prop. `main_dual` gives ``rho* = exp((p + lam.q)/tau - 1)``, which is not a density ratio, so
  ``G(rho*)`` is not a probability although ``b`` lives in ``[0, 1]``. With ``normalize=True`` we add the
  constraint ``E_ref[rho] = 1`` (``rho = pi / pi_ref``), which replaces the ``-1`` by the log-normaliser:
  ``rho* = exp(s/tau) / E_ref[exp(s/tau)]``, ``D(lam) = tau log E_ref[exp(s/tau)] - lam.b``. Then
  ``G(rho*)`` is the policy's preference probability and ``pi* = pi_ref rho*`` without further
  normalisation (for tabular policies this is exactly the thesis' ``pi* ∝ pi_ref rho*``). ``normalize=False``
  gives the literal Eq. `dual`.
* **Sign of the lower bound.** Problem `lbop` *minimises* ``E_{pi_k}[rho q_k]`` over a KL ball; its dual is
  ``max_{chi >= 0} -chi log E_ref[exp(-x/chi)] - chi eps`` with ``pi_k ∝ pi_ref exp(-x/chi)``
  (Donsker-Varadhan). Eq. `lbop_lagrangian` and Eq. `chi_update` print ``exp(+x/chi)``, which would not be a
  lower bound (it is ``<= -E[x]``); we use the minus sign, so ``LB <= G`` and ``LB -> G`` as ``eps -> 0``.
  The same sign fix makes Eq. `lambda_policy_update` read ``F - lam.(b - LB)``.
* **Lambda gradient.** ``lambda_loss`` is meant to be differentiated in ``lam`` with ``F`` and ``lb``
  detached: by Danskin's theorem the dual gradient is ``G(rho*_lam) - b`` (resp. ``LB - b``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = [
    "adaptive_threshold",
    "augment_symmetric",
    "barrier_multipliers",
    "barrier_objective",
    "bc_loss",
    "bc_weights",
    "chi_loss",
    "chi_star",
    "dual_gradient",
    "dual_value",
    "lambda_loss",
    "log_barrier",
    "log_rho_star",
    "lower_bound",
    "normalized_ratio",
    "primal_values",
    "rho_star",
    "safety_columns",
    "scores",
    "sigma_schedule",
    "split_objectives",
]


def _log_weight(like: Tensor, weight: Tensor | None) -> Tensor:
    """Log reference weights of the atoms (uniform ``-log N`` when ``weight`` is None)."""
    if weight is None:
        n = like.shape[-1]
        return torch.full_like(like, -math.log(n))
    return torch.log(weight.to(like))


def split_objectives(ind: Tensor, primary: int = -1) -> tuple[Tensor, Tensor]:
    """Split ``ind[..., N, K]`` into the primary ``p[..., N]`` and the constraints ``q[..., N, K-1]``.

    The thesis calls the primary objective ``K`` (the last column, ``primary=-1``); any column may be chosen.
    """
    k = ind.shape[-1]
    j = primary % k
    others = [i for i in range(k) if i != j]
    return ind[..., j], ind[..., others]


def augment_symmetric(
    y: Tensor,
    y_prime: Tensor,
    ind: Tensor,
    pointwise: Tensor | None = None,
    pointwise_prime: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Symmetric augmentation (appendix `samplingbasedcop`): append ``(y', y, 1 - I(y, y'))`` per record.

    ``ind[N, K]`` holds pairwise indicators ``I_k(y, y')`` (bit-flipped in the swapped copy). Optional
    pointwise labels of each response (e.g. the safety label ``q(y > 0)`` of Eq. `safe-obj`) are given for
    ``y`` and ``y'`` and are *swapped*, not flipped; they are appended after the pairwise columns.
    ``y``/``y_prime`` may be any tensors with a leading record dimension (action ids, features).
    """
    ys = torch.cat([y, y_prime], dim=0)
    yps = torch.cat([y_prime, y], dim=0)
    cols = torch.cat([ind, 1.0 - ind], dim=0)
    if pointwise is not None:
        if pointwise_prime is None:
            raise ValueError("pointwise_prime is required with pointwise")
        pw = torch.cat([pointwise, pointwise_prime], dim=0).to(cols)
        cols = torch.cat([cols, pw], dim=-1)
    return ys, yps, cols


def safety_columns(pref: Tensor, safe_y: Tensor, safe_y_prime: Tensor) -> tuple[Tensor, Tensor]:
    """Augmented ``(p, q)`` of the safety extension Eq. `safe-obj` from ``N`` records.

    ``pref[N]`` is the primary pairwise indicator ``I(y > y')``; ``safe_y``/``safe_y_prime`` are the binary
    safety labels ``q(y > 0)`` of both responses. Returns ``p[2N]`` and ``q[2N, 1]`` for the symmetric
    augmentation (the constraint ``E_{y~pi}[q(y > 0)] >= b`` then uses the same dual as `main-obj`).
    """
    _, _, cols = augment_symmetric(
        torch.zeros_like(pref), torch.zeros_like(pref), pref[:, None], safe_y[:, None], safe_y_prime[:, None]
    )
    return cols[:, 0], cols[:, 1:]


def scores(p: Tensor, q: Tensor, lam: Tensor) -> Tensor:
    """Scalarised preference ``s = p + lam^T q`` per atom (the exponent of Eq. `dual`)."""
    return p + (q * lam.unsqueeze(-2)).sum(-1)


def log_rho_star(
    p: Tensor,
    q: Tensor,
    lam: Tensor,
    tau: float | Tensor,
    weight: Tensor | None = None,
    normalize: bool = True,
) -> Tensor:
    """Log of the closed-form maximiser ``rho*_lam`` of the Lagrangian (Prop. `main_dual`, Eq. `dual`).

    ``normalize=False``: ``log rho* = s/tau - 1`` (the text). ``normalize=True``: ``log rho* = s/tau -
    log E_ref[exp(s/tau)]``, the maximiser under the extra constraint ``E_ref[rho] = 1`` (module docstring).
    ``tau`` may be a tensor broadcasting against the leading dims (``tau[..., None]`` is applied).
    """
    tau_t = torch.as_tensor(tau, dtype=p.dtype, device=p.device)
    if tau_t.ndim:
        tau_t = tau_t.unsqueeze(-1)
    z = scores(p, q, lam) / tau_t
    if not normalize:
        return z - 1.0
    return z - torch.logsumexp(z + _log_weight(z, weight), dim=-1, keepdim=True)


def rho_star(
    p: Tensor,
    q: Tensor,
    lam: Tensor,
    tau: float | Tensor,
    weight: Tensor | None = None,
    normalize: bool = True,
) -> Tensor:
    """``rho*_lam = exp(log_rho_star(...))`` (Prop. `main_dual`)."""
    return torch.exp(log_rho_star(p, q, lam, tau, weight, normalize))


def _expect_cols(weight: Tensor | None, rho: Tensor, q: Tensor) -> Tensor:
    """``sum_i w_i rho_i q_ic`` for ``rho[..., N]``, ``q[..., N, C]`` (uniform when ``weight`` is None)."""
    wr = rho / rho.shape[-1] if weight is None else weight.to(rho) * rho
    return (wr.unsqueeze(-1) * q).sum(-2)


def _expect(weight: Tensor | None, values: Tensor) -> Tensor:
    """``sum_i w_i values_i`` over the last (atom) dim; the uniform mean when ``weight`` is None."""
    if weight is None:
        return values.mean(-1)
    return (weight.to(values) * values).sum(-1)


def primal_values(
    rho: Tensor, p: Tensor, q: Tensor, tau: float | Tensor, weight: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Objective ``F(rho) = E_ref[rho p] - tau E_ref[rho ln rho]`` and constraints ``G(rho) = E_ref[rho q]``.

    Eq. `main-obj` (and its empirical form Eq. `empirical-cop` when the atoms are examples). ``rho ln rho``
    is taken as 0 at ``rho = 0``.
    """
    tau_t = torch.as_tensor(tau, dtype=rho.dtype, device=rho.device)
    ent = torch.where(
        rho > 0, rho * torch.log(rho.clamp_min(torch.finfo(rho.dtype).tiny)), torch.zeros_like(rho)
    )
    f = _expect(weight, rho * p) - tau_t * _expect(weight, ent)
    g = _expect_cols(weight, rho, q)
    return f, g


def dual_value(
    lam: Tensor,
    p: Tensor,
    q: Tensor,
    b: Tensor,
    tau: float | Tensor,
    weight: Tensor | None = None,
    normalize: bool = True,
) -> Tensor:
    """Dual function ``D(lam) = max_rho L(rho, lam) = F(rho*_lam) - lam^T (b - G(rho*_lam))`` (Eq. `dual`).

    Closed forms: ``tau log E_ref[exp(s/tau)] - lam.b`` (normalised) or ``tau E_ref[exp(s/tau - 1)] - lam.b``
    (literal). Convex in ``lam``; its minimiser over ``lam >= 0`` is ``lam*``.
    """
    tau_t = torch.as_tensor(tau, dtype=p.dtype, device=p.device)
    z = scores(p, q, lam) / (tau_t.unsqueeze(-1) if tau_t.ndim else tau_t)
    if normalize:
        val = tau_t * torch.logsumexp(z + _log_weight(z, weight), dim=-1)
    else:
        val = tau_t * _expect(weight, torch.exp(z - 1.0))
    return val - (lam * b).sum(-1)


def dual_gradient(
    lam: Tensor,
    p: Tensor,
    q: Tensor,
    b: Tensor,
    tau: float | Tensor,
    weight: Tensor | None = None,
    normalize: bool = True,
) -> Tensor:
    """Gradient of :func:`dual_value`: ``grad D(lam) = G(rho*_lam) - b`` (envelope theorem)."""
    rho = rho_star(p, q, lam, tau, weight, normalize)
    return _expect_cols(weight, rho, q) - b


def lower_bound(x: Tensor, chi: Tensor, eps: float | Tensor, weight: Tensor | None = None) -> Tensor:
    """Dual value of Problem `lbop`: ``LB_k(chi) = -chi_k log E_ref[exp(-x_k / chi_k)] - chi_k eps``.

    ``x[..., N, C] = rho(y) q_k(y > y')`` per atom. Prop. `lowerbound_dual` with the sign fixed (module
    docstring): ``LB_k <= E_ref[x_k] = G_k`` for every ``chi_k > 0`` and ``max_chi LB_k`` is the smallest
    ``E_{pi_k}[x_k]`` over ``KL(pi_k || pi_ref) <= eps``. ``chi = inf`` returns ``E_ref[x]`` (the ``eps = 0``
    limit).
    """
    xt = x.transpose(-1, -2)  # [..., C, N]
    chi_t = chi.to(x).unsqueeze(-1)
    lw = _log_weight(xt, None if weight is None else weight.unsqueeze(-2).expand_as(xt))
    finite = torch.isfinite(chi_t)
    safe_chi = torch.where(finite, chi_t, torch.ones_like(chi_t))
    lse = torch.logsumexp(-xt / safe_chi + lw, dim=-1)
    eps_t = torch.as_tensor(eps, dtype=x.dtype, device=x.device)
    lb = -safe_chi.squeeze(-1) * lse - safe_chi.squeeze(-1) * eps_t
    mean = (torch.exp(lw) * xt).sum(-1)
    return torch.where(finite.squeeze(-1), lb, mean)


def chi_loss(x: Tensor, chi: Tensor, eps: float | Tensor, weight: Tensor | None = None) -> Tensor:
    """Loss minimised over ``chi >= 0`` in Eq. `chi_update` (sign fixed): ``-sum_k LB_k(chi_k)``.

    With mini-batches this is the batch estimate of Eq. `empirical-chi-update` (the log sits outside the
    batch mean, as in the text).
    """
    return -lower_bound(x, chi, eps, weight).sum(-1)


def chi_star(
    x: Tensor, eps: float, weight: Tensor | None = None, lo: float = 1e-6, hi: float = 1e6, iters: int = 100
) -> Tensor:
    """Exact maximiser of the concave ``chi -> LB(chi)`` on ``[lo, hi]`` (bisection on ``dLB/dchi``).

    ``dLB/dchi = -log E[exp(-x/chi)] - E_{pi_chi}[x]/chi - eps`` with ``pi_chi ∝ w exp(-x/chi)``; the
    derivative is non-increasing, so bisection finds the root (or an endpoint). Used to check the stochastic
    ``chi`` updates; ``eps = 0`` returns ``hi`` (the maximiser is at infinity).
    """
    xt = x.transpose(-1, -2)
    lw = _log_weight(xt, None if weight is None else weight.unsqueeze(-2).expand_as(xt))

    def deriv(chi: Tensor) -> Tensor:
        z = -xt / chi.unsqueeze(-1) + lw
        lse = torch.logsumexp(z, dim=-1)
        tilt = torch.softmax(z, dim=-1)
        return -lse - (tilt * xt).sum(-1) / chi - eps

    a = torch.full(xt.shape[:-1], math.log(lo), dtype=x.dtype, device=x.device)
    bnd = torch.full_like(a, math.log(hi))
    for _ in range(iters):
        mid = 0.5 * (a + bnd)
        pos = deriv(torch.exp(mid)) > 0
        a = torch.where(pos, mid, a)
        bnd = torch.where(pos, bnd, mid)
    return torch.exp(0.5 * (a + bnd))


def lambda_loss(lam: Tensor, f: Tensor, lb: Tensor, b: Tensor) -> Tensor:
    """``J(lam; chi) = F(rho) - lam^T (b - LB(chi; rho))`` of Eq. `lambda_policy_update` (sign-fixed LB).

    Pass ``f`` and ``lb`` detached: the gradient in ``lam`` is then ``LB - b`` (Danskin), the quantity the
    projected step ``lam <- [lam - eta grad]_+`` of Algorithm `mopo` uses.
    """
    return f - (lam * (b - lb)).sum(-1)


def normalized_ratio(log_ratio: Tensor, weight: Tensor | None = None) -> Tensor:
    """Self-normalised density ratio: ``exp(log_ratio)`` rescaled so that ``sum_i w_i ratio_i = 1``.

    Turns per-example log-ratios ``log pi(y|x) - log pi_ref(y|x)`` into importance weights relative to the
    reference measure of the batch (used for the lagged reference and the adaptive thresholds).
    """
    lw = _log_weight(log_ratio, weight)
    return torch.exp(log_ratio - torch.logsumexp(log_ratio + lw, dim=-1, keepdim=True))


def bc_weights(log_rho: Tensor, log_ratio_lag: Tensor | None = None, weight: Tensor | None = None) -> Tensor:
    """Importance weights of the behaviour-cloning loss of Eq. `policy-extraction`.

    ``max_pi E_{y~pi*}[log pi(y)] = max_pi E_{y~pi_ref}[rho*(y) log pi(y)]``. When the reference has been
    lagged (``pi_ref <- pi_lag``, paragraph "Lagged reference policy") while the data come from the original
    reference, expectations under ``pi_lag`` are reweighted by ``rho_lag = pi_lag / pi_ref``: the weight of
    atom ``i`` is ``w_i rho_lag,i rho*_i``, self-normalised to sum to ``N`` (mean one) so the loss scale does
    not depend on ``tau``. Returned detached.
    """
    log_w = log_rho if log_ratio_lag is None else log_rho + log_ratio_lag
    n = log_w.shape[-1]
    return (normalized_ratio(log_w.detach(), weight) * (n * _weight_or_uniform(log_w, weight))).detach()


def _weight_or_uniform(like: Tensor, weight: Tensor | None) -> Tensor:
    return torch.full_like(like, 1.0 / like.shape[-1]) if weight is None else weight.to(like)


def bc_loss(logp: Tensor, w: Tensor) -> Tensor:
    """Weighted NLL ``-(1/N) sum_i w_i log pi_psi(y_i)`` (Eq. `lambda_policy_update`, right)."""
    return -(w * logp).mean(-1)


def pairwise_extraction_loss(logp: Tensor, log_base: Tensor, log_rho: Tensor) -> Tensor:
    """Pairwise (contrastive) extraction of ``pi* = pi_base rho*``: a departure from Eq. `policy-extraction`.

    Rows are the symmetric augmentation ``[a_1..a_M ; b_1..b_M]`` of ``M`` records (both answers to one
    prompt). For record ``i`` the target is ``pi*``'s choice probability between its two answers,
    ``t_i = pi*(a_i) / (pi*(a_i) + pi*(b_i)) = sigmoid(log rho*(a_i) - log rho*(b_i))`` (``pi_base`` cancels:
    both answers share the prompt), and the model's is ``sigmoid(z_i)`` with
    ``z_i = [log pi_psi(a_i) - log pi_base(a_i)] - [log pi_psi(b_i) - log pi_base(b_i)]``. The loss is the
    mean cross-entropy ``-(1/M) sum_i [t_i log sigmoid(z_i) + (1 - t_i) log sigmoid(-z_i)]``, i.e. the KL
    between the two choice distributions plus a constant.

    Why: Eq. `policy-extraction` minimises ``KL(pi* || pi_psi)`` by weighted behaviour cloning, whose weights
    are all ``>= 0``; with one pair per prompt it raises the likelihood of both answers (the preferred one
    more) and never lowers an answer, so little of the preference transfers to new prompts (docs/mopo.md,
    SmolLM2 example). This loss is minimised when ``log pi_psi - log pi_base`` differs by ``log rho*``
    between the two answers of every pair, as it does for ``pi*`` (when every pair of a finite answer set is
    observed, the minimiser is ``pi*`` itself; tested), but its gradient is contrastive: it lowers the answer
    ``rho*`` down-weights. With hard targets (``tau -> 0``) it is the DPO loss at inverse temperature 1; with
    ``rho*``'s soft targets it is soft-label DPO / EXO with two candidates (Mitchell 2023; Ji et al. 2024),
    with ``tau`` and the multipliers ``lambda`` setting the targets.

    ``log_base`` is ``log pi_ref`` (or ``log pi_lag`` when ``rho*`` is relative to a lagged reference).
    """
    m = logp.shape[-1] // 2
    if logp.shape[-1] != 2 * m or log_rho.shape[-1] != 2 * m:
        raise ValueError(f"need rows [a ; b] of 2M answers, got {logp.shape[-1]} and {log_rho.shape[-1]}")
    delta = logp - log_base
    z = delta[..., :m] - delta[..., m:]
    target = torch.sigmoid((log_rho[..., :m] - log_rho[..., m:]).detach())
    return torch.nn.functional.binary_cross_entropy_with_logits(z, target.to(z), reduction="none").mean(-1)


def adaptive_threshold(beta: Tensor, rho_prev: Tensor, q: Tensor, weight: Tensor | None = None) -> Tensor:
    """Adaptive constraint schedule ``b = beta * G(rho^(t - t0))`` (paragraph "Adaptive constraint schedule").

    ``rho_prev = pi_psi^(t-t0) / pi_ref`` per atom (see :func:`normalized_ratio` for log-ratios). ``beta`` is
    applied element-wise (the text's ``beta^T G`` for a vector threshold).
    """
    return beta * _expect_cols(weight, rho_prev, q)


def log_barrier(z: Tensor, sigma: Tensor | float, s: Tensor | float | None = None) -> Tensor:
    """Relaxed log barrier ``B_{sigma,s}(z)`` of remark `logbarrier` (``s = sigma^2`` by default).

    ``-sigma log(-z)`` for ``z <= -s``, ``sigma z / s + (1 - log s) sigma`` otherwise; convex, C^1, with
    derivative ``sigma / max(-z, s)``.
    """
    sigma_t = torch.as_tensor(sigma, dtype=z.dtype, device=z.device)
    s_t = sigma_t**2 if s is None else torch.as_tensor(s, dtype=z.dtype, device=z.device)
    inside = z <= -s_t
    safe = torch.where(inside, -z, torch.ones_like(z))
    return torch.where(
        inside, -sigma_t * torch.log(safe), sigma_t / s_t * z + (1.0 - torch.log(s_t)) * sigma_t
    )


def barrier_objective(f: Tensor, g: Tensor, b: Tensor, sigma: Tensor) -> Tensor:
    """``L_LB(rho, sigma) = F(rho) - sum_k B_{sigma_k, sigma_k^2}(b_k - G_k(rho))`` (Eq. `logbarrier`)."""
    return f - log_barrier(b - g, sigma).sum(-1)


def barrier_multipliers(g: Tensor, b: Tensor, sigma: Tensor) -> Tensor:
    """Implied multipliers ``lam_k = sigma_k / max(G_k - b_k, sigma_k^2)`` (appendix `logbarrier`)."""
    return sigma / torch.maximum(g - b, sigma**2)


def sigma_schedule(sigma0: Tensor | float, gamma: Tensor | float, t: int) -> Tensor:
    """Decreasing barrier parameter ``sigma^(t) = gamma^t sigma0`` (appendix `logbarrier`, 0 < gamma < 1)."""
    return torch.as_tensor(sigma0, device="cpu") * torch.as_tensor(gamma, device="cpu") ** t

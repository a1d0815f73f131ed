"""The pure mathematics of one ACPO update (chapter `acpo`, section `sec:acpo_implementation`).

Notation (the thesis'): at iterate ``θ_k`` let ``g`` be the gradient of the reward-advantage surrogate,
``A = [a_1 … a_m]`` the gradients of the cost-advantage surrogates, ``H`` the Fisher information (Hessian
of the average KL) and ``c_i = J_{C_i}(θ_k) − l_i``.  With ``x = θ − θ_k`` the local problem is
Eq. `acpo_approx`::

    max_x  gᵀx   s.t.   c_i + a_iᵀx ≤ 0  (i = 1..m),   ½ xᵀHx ≤ δ.

Everything here needs only the scalars/small matrices ``q = gᵀH⁻¹g``, ``r = AᵀH⁻¹g`` (the thesis'
``r := gᵀH⁻¹A``), ``S = AᵀH⁻¹A`` and ``c`` plus the conjugate-gradient solutions ``v = H⁻¹g`` and
``W = H⁻¹A`` (computed by the caller with the core's CG,
:func:`bayescrl.constrained.core.optim.conjugate_gradient`, re-exported here with the core's
:func:`~bayescrl.constrained.core.optim.line_search`).  Functions:

* :func:`acpo_feasible` -- does Eq. `acpo_approx` have a feasible point? (Algorithm `practical_acpo`, line 5)
* :func:`acpo_dual` -- the multipliers ``(λ*, μ*)`` of the dual Eq. `acpo_dual`: closed form for one
  constraint (the case analysis of Achiam et al. 2017, appendix 10.2), a small convex solve (scipy L-BFGS-B)
  for several.
* :func:`acpo_dual_update` -- the step of Eq. `acpo_dual_update`, ``x = (1/λ*) H⁻¹(g − Aμ*)``.
* :func:`acpo_recovery` -- the recovery step of Eq. `acpo_recovery` with parameter ``t``.
* :func:`line_search` / :func:`acpo_accept` -- the backtracking line search of appendix `approx_acpo`
  (``θ_{k+1} = θ_k + s^j (θ_{k+1/2} − θ_k)``, smallest ``j ∈ {0..L}``; else no update) and its test.

Departure from the text (documented in ``docs/acpo.md``): the dual Eq. `acpo_dual` is printed with the
term ``−λδ/2``, which is the dual of a trust region ``xᵀHx ≤ δ``; the primal Eq. `acpo_approx`, the trust
region Eq. `acpo_trust` (KL ≤ δ) and the recovery step (factor ``√(2δ)``) all use ``½xᵀHx ≤ δ``, whose dual
term is ``−λδ``.  We solve the primal as printed, i.e. we use ``−λδ`` (this is also what the CPO reference
code does: ``λ = √(q/2δ)`` when no constraint is active), so a full step has ``½xᵀHx = δ`` exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import minimize

from bayescrl.constrained.core.optim import conjugate_gradient, line_search
from bayescrl.utils.errors import ConfigError

_EPS = 1e-12
#: smallest ``q = gᵀH⁻¹g`` the dual accepts; callers skip the dual step at or below it (no ascent direction)
Q_MIN = _EPS

__all__ = [
    "DualSolution",
    "Q_MIN",
    "acpo_accept",
    "acpo_dual",
    "acpo_dual_objective",
    "acpo_dual_update",
    "acpo_feasible",
    "acpo_recovery",
    "conjugate_gradient",  # re-exported from bayescrl.constrained.core.optim (the package's one CG)
    "line_search",  # idem (the package's one backtracking line search)
    "min_kl_to_feasibility",
]


@dataclass(frozen=True)
class DualSolution:
    """Multipliers of Eq. `acpo_dual` and the value of the (maximised) dual function.

    ``case`` names the branch that produced the solution: ``"unconstrained"`` (no constraint active in the
    trust region, ``μ* = 0``), ``"single"`` (closed form, one constraint), ``"convex"`` (scipy, several).
    """

    lam: float
    mu: np.ndarray
    value: float
    case: str


def _as_problem(q: float, r, S, c, delta: float) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, float]:
    """Validate and convert ``(q, r, S, c, δ)`` to float64 numpy (``r, c``: (m,), ``S``: (m, m))."""
    q = float(q)
    r = np.atleast_1d(np.asarray(_np(r), dtype=np.float64))
    c = np.atleast_1d(np.asarray(_np(c), dtype=np.float64))
    S = np.atleast_2d(np.asarray(_np(S), dtype=np.float64))
    m = c.shape[0]
    if not math.isfinite(delta) or delta <= 0:
        raise ConfigError("delta", delta, "trust-region size must be a finite number > 0")
    if not math.isfinite(q) or q < 0:
        raise ConfigError("q", q, "q = gᵀH⁻¹g must be finite and >= 0 (H must be positive definite)")
    if r.shape != (m,) or S.shape != (m, m):
        raise ConfigError("S", S.shape, f"expected r of shape ({m},) and S of shape ({m}, {m}) for m={m}")
    for name, arr in (("r", r), ("S", S), ("c", c)):
        if not np.all(np.isfinite(arr)):
            raise ConfigError(name, arr.tolist(), "must be finite")
    if np.any(np.diag(S) < -1e-10):
        raise ConfigError("S", np.diag(S).tolist(), "diagonal of S = AᵀH⁻¹A must be >= 0")
    return q, r, S, c, float(delta)


def _np(x):
    return x.detach().cpu().double().numpy() if isinstance(x, torch.Tensor) else x


def acpo_dual_objective(lam: float, mu, q: float, r, S, c, delta: float) -> float:
    """The dual function ``D(λ, μ) = −(q − 2rᵀμ + μᵀSμ)/(2λ) + μᵀc − λδ`` (Eq. `acpo_dual`, see module note).

    For ``λ > 0, μ ⪰ 0``, ``−D(λ, μ)`` is ``max_x`` of the Lagrangian of Eq. `acpo_approx`, so ``−D``
    upper-bounds the primal optimum ``p* = max gᵀx`` (weak duality) and ``max D = D(λ*, μ*) = −p*``
    (strong duality; Slater holds whenever the problem is strictly feasible).
    """
    mu = np.atleast_1d(np.asarray(_np(mu), dtype=np.float64))
    q, r, S, c, delta = _as_problem(q, r, S, c, delta)
    quad = q - 2.0 * r @ mu + mu @ S @ mu
    return float(-quad / (2.0 * lam) + mu @ c - lam * delta)


def min_kl_to_feasibility(S, c) -> float:
    """``min ½xᵀHx s.t. c + Aᵀx ≤ 0`` = ``max_{μ⪰0} μᵀc − ½μᵀSμ`` (``inf`` if the half-spaces are empty).

    The approximate problem Eq. `acpo_approx` is feasible iff this value is ``≤ δ``.
    """
    c = np.atleast_1d(np.asarray(_np(c), dtype=np.float64))
    S = np.atleast_2d(np.asarray(_np(S), dtype=np.float64))
    m = c.shape[0]
    if np.all(c <= 0):
        return 0.0
    if m == 1:
        s = S[0, 0]
        return float(c[0] ** 2 / (2 * s)) if s > _EPS else math.inf

    def neg(mu: np.ndarray) -> tuple[float, np.ndarray]:
        return float(-(mu @ c) + 0.5 * mu @ S @ mu), -c + S @ mu

    res = minimize(neg, np.zeros(m), jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * m)
    if not np.isfinite(res.fun) or res.fun < -1e12:
        return math.inf
    return float(-res.fun)


def acpo_feasible(S, c, delta: float) -> bool:
    """Whether Eq. `acpo_approx` has a feasible point (line 5 of Algorithm `practical_acpo`).

    One constraint: infeasible iff ``c > 0`` and ``c²/s > 2δ`` (the half-space ``c + aᵀx ≤ 0`` misses the
    ellipsoid ``½xᵀHx ≤ δ``); several: :func:`min_kl_to_feasibility` ``≤ δ``.
    """
    if not math.isfinite(delta) or delta <= 0:
        raise ConfigError("delta", delta, "trust-region size must be a finite number > 0")
    return min_kl_to_feasibility(S, c) <= delta * (1 + 1e-9)


def acpo_dual(q: float, r, S, c, delta: float, method: str = "auto") -> DualSolution:
    """Solve the dual Eq. `acpo_dual` for ``(λ*, μ*)``; the problem must be feasible (:func:`acpo_feasible`).

    ``method="auto"`` uses the closed form when ``m = 1`` and the convex solve otherwise; ``"closed"`` /
    ``"convex"`` force one (``"convex"`` with ``m = 1`` is what the tests compare the closed form against).

    Closed form (``m = 1``, ``s = aᵀH⁻¹a``): for fixed ``λ`` the optimal ``μ = max(0, (λc + r)/s)``; on the
    interval where ``μ > 0`` the dual is ``f_a(λ) = −½(A/λ + Bλ) + rc/s`` with ``A = q − r²/s``,
    ``B = 2δ − c²/s``, elsewhere ``f_b(λ) = −½(q/λ + 2δλ)``.  Each piece is concave; the maximiser of each is
    projected on its interval and the better one is kept.

    Convex solve (``m ≥ 1``): eliminating ``λ`` (``λ = ‖g − Aμ‖_{H⁻¹}/√(2δ)``) gives the concave problem
    ``max_{μ⪰0} μᵀc − √(2δ (q − 2rᵀμ + μᵀSμ))`` solved by L-BFGS-B.
    """
    q, r, S, c, delta = _as_problem(q, r, S, c, delta)
    m = c.shape[0]
    if method not in ("auto", "closed", "convex"):
        raise ConfigError("method", method, "expected 'auto', 'closed' or 'convex'")
    if method == "closed" and m != 1:
        raise ConfigError("method", method, f"the closed form needs exactly one constraint, got m={m}")
    if q <= _EPS:
        raise ConfigError("q", q, "reward gradient is zero (q = gᵀH⁻¹g = 0): no ascent direction")
    if not acpo_feasible(S, c, delta):
        raise ConfigError("c", c.tolist(), f"Eq. acpo_approx is infeasible for delta={delta}; use recovery")
    if method == "convex" or (method == "auto" and m > 1):
        return _dual_convex(q, r, S, c, delta)
    return _dual_single(q, float(r[0]), float(S[0, 0]), float(c[0]), delta)


def _dual_single(q: float, r: float, s: float, c: float, delta: float) -> DualSolution:
    lam_free = math.sqrt(q / (2 * delta))
    if s <= _EPS:  # a = 0: the constraint is the constant c <= 0 (feasible, so inactive)
        return DualSolution(lam_free, np.zeros(1), -math.sqrt(2 * delta * q), "unconstrained")
    A = max(q - r * r / s, 0.0)
    B = 2 * delta - c * c / s
    if c < 0 and B < 0:  # the whole trust region is feasible
        return DualSolution(lam_free, np.zeros(1), -math.sqrt(2 * delta * q), "unconstrained")

    # Intervals of λ > 0 where μ(λ) = (λc + r)/s > 0 (piece a) or <= 0 (piece b).
    inf = math.inf
    if c > 0:
        ia, ib = (max(-r / c, 0.0), inf), (0.0, max(-r / c, 0.0))
    elif c < 0:
        ia, ib = (0.0, max(-r / c, 0.0)), (max(-r / c, 0.0), inf)
    else:
        ia, ib = ((0.0, inf), (0.0, 0.0)) if r > 0 else ((0.0, 0.0), (0.0, inf))

    def f_a(lam: float) -> float:
        return -0.5 * (A / lam + B * lam) + r * c / s

    def f_b(lam: float) -> float:
        return -0.5 * (q / lam + 2 * delta * lam)

    def proj(x: float, iv: tuple[float, float]) -> float:
        return min(max(x, iv[0]), iv[1])

    cands: list[tuple[float, float]] = []
    if ia[1] > ia[0]:
        lam_a = math.sqrt(A / B) if B > _EPS else inf
        lam_a = max(proj(lam_a, ia), _EPS)
        if math.isfinite(lam_a):
            cands.append((f_a(lam_a), lam_a))
    if ib[1] > ib[0]:
        lam_b = max(proj(lam_free, ib), _EPS)
        cands.append((f_b(lam_b), lam_b))
    if not cands:  # only reachable at c > 0, B = 0 exactly (a single feasible point)
        raise ConfigError("c", c, "degenerate problem: the feasible set is a single point")
    value, lam = max(cands)
    mu = max(0.0, (lam * c + r) / s)
    return DualSolution(lam, np.array([mu]), value, "single")


def _dual_convex(q: float, r: np.ndarray, S: np.ndarray, c: np.ndarray, delta: float) -> DualSolution:
    m = c.shape[0]
    k = math.sqrt(2 * delta)

    def neg(mu: np.ndarray) -> tuple[float, np.ndarray]:
        quad = max(q - 2 * r @ mu + mu @ S @ mu, _EPS)
        root = math.sqrt(quad)
        val = mu @ c - k * root
        grad = c - k * (S @ mu - r) / root
        return float(-val), -grad

    res = minimize(
        neg,
        np.zeros(m),
        jac=True,
        method="L-BFGS-B",
        bounds=[(0.0, None)] * m,
        options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 1000},
    )
    mu = np.maximum(res.x, 0.0)
    quad = max(q - 2 * r @ mu + mu @ S @ mu, _EPS)
    lam = math.sqrt(quad) / k
    case = "unconstrained" if np.all(mu == 0) else "convex"
    return DualSolution(lam, mu, float(-res.fun), case)


def acpo_dual_update(v: torch.Tensor, W: torch.Tensor | None, sol: DualSolution) -> torch.Tensor:
    """Step ``x = θ_{k+1} − θ_k = (1/λ*)(H⁻¹g − H⁻¹A μ*)`` of Eq. `acpo_dual_update`.

    ``v = H⁻¹g`` has shape (d,), ``W = H⁻¹A`` shape (d, m) (or ``None`` when ``μ* = 0``).
    """
    direction = v.clone()
    if W is not None and np.any(sol.mu != 0):
        mu = torch.as_tensor(sol.mu, dtype=v.dtype, device=v.device)
        direction = direction - W.reshape(v.shape[0], -1) @ mu
    return direction / sol.lam


def acpo_recovery(
    v: torch.Tensor, w: torch.Tensor, q: float, s: float, delta: float, t: float = 0.75
) -> torch.Tensor:
    """Recovery step ``θ_{k+1/2} − θ_k`` of Eq. `acpo_recovery`.

    ``x = −√(2δ) [ t H⁻¹a/√(aᵀH⁻¹a) + (1 − t) H⁻¹g/√(gᵀH⁻¹g) ]`` with ``v = H⁻¹g``, ``w = H⁻¹a``,
    ``q = gᵀH⁻¹g``, ``s = aᵀH⁻¹a``.  ``t = 1`` is CPO's recovery (steepest descent of the linearised cost on
    the trust-region boundary, change ``−√(2δs)``); ``t = 0`` steps against the reward gradient.  By the
    triangle inequality in the ``H``-norm, ``½xᵀHx ≤ δ`` for every ``t ∈ [0, 1]``.  A zero gradient (``q`` or
    ``s`` = 0) contributes no term.
    """
    if not (0.0 <= t <= 1.0) or not math.isfinite(t):
        raise ConfigError("t", t, "recovery parameter must lie in [0, 1]")
    if not math.isfinite(delta) or delta <= 0:
        raise ConfigError("delta", delta, "trust-region size must be a finite number > 0")
    step = torch.zeros_like(v)
    if t > 0 and s > _EPS:
        step = step + t * w / math.sqrt(s)
    if t < 1 and q > _EPS:
        step = step + (1 - t) * v / math.sqrt(q)
    return -math.sqrt(2 * delta) * step


def acpo_accept(
    kl: float,
    cost_change: np.ndarray | list[float],
    c: np.ndarray | list[float],
    delta: float,
    reward_change: float | None = None,
) -> bool:
    """Acceptance test of the line search (appendix `approx_acpo`, "Line Search").

    ``kl`` is the (sample) average KL ``D̄_KL(π_θ ‖ π_k)``, ``cost_change[i]`` the surrogate change
    ``E_{s∼d_k, a∼π_θ}[Ā_{C_i}]`` (importance-weighted) and ``c_i = Ĵ_{C_i}(π_k) − l_i``.  Accept iff
    ``kl ≤ δ`` and for every constraint ``c_i + Δ_i ≤ max(0, c_i)`` -- feasible constraints stay feasible
    (the constraints of Eq. `acpo_trust`) and an infeasible one must not get worse -- and, when
    ``reward_change`` is given (normal step), the reward surrogate does not decrease.

    Departure: the text asks for "approximate constraint satisfaction" ``c_i + Δ_i ≤ 0``; after a recovery
    step from a point where Eq. `acpo_approx` is infeasible no step inside the trust region can meet it
    (that is what infeasible means), so the literal test would freeze the policy forever.  We use the
    reference CPO rule ``Δ_i ≤ max(−c_i, 0)``, which equals the literal test whenever ``c_i ≤ 0``.
    """
    cost_change = np.atleast_1d(np.asarray(cost_change, dtype=np.float64))
    c = np.atleast_1d(np.asarray(c, dtype=np.float64))
    if not math.isfinite(kl) or kl > delta:
        return False
    if not np.all(np.isfinite(cost_change)) or np.any(cost_change > np.maximum(-c, 0.0)):
        return False
    return reward_change is None or (math.isfinite(reward_change) and reward_change >= 0.0)

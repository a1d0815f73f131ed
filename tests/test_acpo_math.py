"""ACPO math: dual closed form vs generic solvers, dual update, recovery step, line search."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from bayescrl.constrained.acpo_math import (
    acpo_accept,
    acpo_dual,
    acpo_dual_objective,
    acpo_dual_update,
    acpo_feasible,
    acpo_recovery,
    line_search,
    min_kl_to_feasibility,
)
from bayescrl.utils import ConfigError


def _instance(rng: np.random.Generator, d: int, m: int, c_scale: float = 0.3):
    M = rng.normal(size=(d, d))
    H = M @ M.T + 0.5 * np.eye(d)
    g = rng.normal(size=d)
    A = rng.normal(size=(d, m))
    c = rng.normal(scale=c_scale, size=m)
    Hinv = np.linalg.inv(H)
    v, W = Hinv @ g, Hinv @ A
    return H, g, A, c, v, W, float(g @ v), A.T @ v, A.T @ W


def _primal_slsqp(H, g, A, c, delta):
    """Generic solver for Eq. acpo_approx: max gᵀx s.t. c + Aᵀx <= 0, ½xᵀHx <= δ."""
    d = g.shape[0]
    cons = [
        {"type": "ineq", "fun": lambda x: -(c + A.T @ x), "jac": lambda x: -A.T},
        {"type": "ineq", "fun": lambda x: delta - 0.5 * x @ H @ x, "jac": lambda x: -(H @ x)},
    ]
    best = None
    # start points: the origin, a small offset and (m = 1) the trust-region point of least cost, which is
    # feasible whenever the problem is (a generic solver may be given a feasible start)
    w = np.linalg.solve(H, A[:, 0])
    starts = (np.zeros(d), 1e-3 * np.ones(d), -np.sqrt(2 * delta / (A[:, 0] @ w)) * w * (1 - 1e-9))
    for x0 in starts:
        res = minimize(
            lambda x: -(g @ x),
            x0,
            jac=lambda x: -g,
            constraints=cons,
            method="SLSQP",
            options={"ftol": 1e-13, "maxiter": 500},
        )
        if res.success and (best is None or res.fun < best.fun):
            best = res
    assert best is not None
    return best.x, -best.fun


def _feasible_instances(m: int, n: int, seed: int, delta: float):
    """Feasible random instances; |c| ~ √δ so that every branch of the case analysis occurs."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        inst = _instance(rng, d=6, m=m, c_scale=3 * np.sqrt(delta))
        if acpo_feasible(inst[-1], inst[3], delta):
            out.append(inst)
    return out


@pytest.mark.parametrize("delta", [1e-4, 0.05])
def test_single_constraint_closed_form_matches_convex_solve_and_primal(delta):
    cases = set()
    for H, g, A, c, v, W, q, r, S in _feasible_instances(1, 25, seed=1, delta=delta):
        closed = acpo_dual(q, r, S, c, delta, method="closed")
        convex = acpo_dual(q, r, S, c, delta, method="convex")
        cases.add((closed.case, bool(c[0] > 0)))
        assert closed.lam == pytest.approx(convex.lam, rel=1e-5, abs=1e-8)
        assert closed.mu[0] == pytest.approx(convex.mu[0], rel=1e-4, abs=1e-7)
        # strong duality: the step's value equals the primal optimum of a generic solver
        x = acpo_dual_update(torch.tensor(v), torch.tensor(W), closed).numpy()
        _, p_star = _primal_slsqp(H, g, A, c, delta)
        assert g @ x == pytest.approx(p_star, rel=1e-4, abs=1e-8)
        assert -closed.value == pytest.approx(p_star, rel=1e-4, abs=1e-8)  # max of Eq. acpo_dual = −p*
        # the step is feasible for Eq. acpo_approx
        assert 0.5 * x @ H @ x <= delta * (1 + 1e-6)
        assert c[0] + A[:, 0] @ x <= 1e-7 * (1 + abs(c[0]))
    # both the "constraint inactive" and "active" branches, from feasible and infeasible θ_k, were hit
    assert {case for case, _ in cases} == {"single", "unconstrained"}
    assert {pos for case, pos in cases if case == "single"} == {True, False}


@pytest.mark.parametrize("m", [2, 3])
def test_several_constraints_convex_solve_matches_primal(m):
    delta = 0.05
    for H, g, A, c, v, W, q, r, S in _feasible_instances(m, 12, seed=10 + m, delta=delta):
        sol = acpo_dual(q, r, S, c, delta)
        x = acpo_dual_update(torch.tensor(v), torch.tensor(W), sol).numpy()
        _, p_star = _primal_slsqp(H, g, A, c, delta)
        assert g @ x == pytest.approx(p_star, rel=1e-4, abs=1e-7)
        assert 0.5 * x @ H @ x <= delta * (1 + 1e-4)
        assert np.all(c + A.T @ x <= 1e-5)
        # strong duality at the optimum (max D = −p*), and D is smaller at a perturbed dual point
        assert acpo_dual_objective(sol.lam, sol.mu, q, r, S, c, delta) == pytest.approx(sol.value, rel=1e-6)
        assert -sol.value == pytest.approx(p_star, rel=1e-4, abs=1e-7)
        assert acpo_dual_objective(1.3 * sol.lam, sol.mu + 0.1, q, r, S, c, delta) <= sol.value + 1e-12


def test_feasibility_matches_generic_min_kl():
    rng = np.random.default_rng(3)
    for m in (1, 2, 3):
        for _ in range(10):
            H, g, A, c, v, W, q, r, S = _instance(rng, d=6, m=m, c_scale=1.0)
            cons = [{"type": "ineq", "fun": lambda x, A=A, c=c: -(c + A.T @ x), "jac": lambda x, A=A: -A.T}]
            res = minimize(
                lambda x, H=H: 0.5 * x @ H @ x,
                np.zeros(6),
                jac=lambda x, H=H: H @ x,
                constraints=cons,
                method="SLSQP",
                options={"ftol": 1e-14},
            )
            assert min_kl_to_feasibility(S, c) == pytest.approx(res.fun, rel=1e-4, abs=1e-9)


def test_dual_rejects_infeasible_and_bad_input():
    # one constraint with c > 0 and c²/s > 2δ: the half-space misses the trust region
    with pytest.raises(ConfigError, match="infeasible"):
        acpo_dual(1.0, [0.1], [[1.0]], [1.0], 1e-4)
    assert not acpo_feasible([[1.0]], [1.0], 1e-4)
    assert acpo_feasible([[1.0]], [0.01], 1e-4)  # c²/(2s) = 5e-5 <= δ
    with pytest.raises(ConfigError, match="delta"):
        acpo_dual(1.0, [0.1], [[1.0]], [-1.0], 0.0)
    with pytest.raises(ConfigError, match="closed form"):
        acpo_dual(1.0, [0.1, 0.2], np.eye(2), [-1.0, -1.0], 1e-2, method="closed")


@pytest.mark.parametrize("t", [0.0, 0.25, 0.5, 0.75, 1.0])
def test_recovery_reduces_linearised_cost_inside_trust_region(t):
    rng = np.random.default_rng(7)
    delta = 1e-3
    checked = 0
    for _ in range(30):
        H, g, A, c, v, W, q, r, S = _instance(rng, d=6, m=1)
        s = float(S[0, 0])
        x = acpo_recovery(torch.tensor(v), torch.tensor(W[:, 0]), q, s, delta, t=t).numpy()
        assert 0.5 * x @ H @ x <= delta * (1 + 1e-9)
        change = A[:, 0] @ x  # change of the linearised cost c + aᵀx
        expected = -math.sqrt(2 * delta) * (t * math.sqrt(s) + (1 - t) * float(r[0]) / math.sqrt(q))
        assert change == pytest.approx(expected, rel=1e-9)
        if t == 1.0:  # CPO's recovery: steepest decrease, exactly −√(2δs) (the most any TR step can do)
            assert change == pytest.approx(-math.sqrt(2 * delta * s), rel=1e-9)
        if r[0] > 0 or t == 1.0:  # reward and cost gradients aligned (⟨g, a⟩_{H⁻¹} > 0): cost goes down
            assert change < 0
            checked += 1
    assert checked >= 10
    with pytest.raises(ConfigError, match="t"):
        acpo_recovery(torch.ones(2), torch.ones(2), 1.0, 1.0, delta, t=1.5)


def test_line_search_returns_smallest_accepted_backtrack():
    step = torch.tensor([1.0, -2.0])
    # accept once the step norm falls below 1: 0.75^j * √5 < 1 first at j = 3
    out, j = line_search(step, lambda x: float(x.norm()) < 1.0, coef=0.75, max_backtracks=10)
    assert j == 3 and torch.allclose(out, step * 0.75**3)
    out, j = line_search(step, lambda x: False)
    assert out is None and j == -1
    calls = []
    line_search(step, lambda x: calls.append(1) is not None, max_backtracks=10)
    assert len(calls) == 11  # j ∈ {0, …, L}


def test_accept_rule():
    assert acpo_accept(5e-5, [-0.1], [-0.05], 1e-4)
    assert not acpo_accept(2e-4, [-0.1], [-0.05], 1e-4)  # KL above δ
    assert not acpo_accept(5e-5, [0.06], [-0.05], 1e-4)  # feasible constraint broken
    assert acpo_accept(5e-5, [-0.01], [0.5], 1e-4)  # infeasible but improving
    assert not acpo_accept(5e-5, [0.01], [0.5], 1e-4)  # infeasible and worse
    assert not acpo_accept(5e-5, [-0.1], [-0.05], 1e-4, reward_change=-1e-3)

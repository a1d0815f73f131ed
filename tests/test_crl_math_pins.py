"""Hand-computed pins of the constrained-RL maths that end-to-end tests cannot see: the CG budget, e-COP's
multiplier update and adaptive damping, GAE cut at a truncation in the middle of a rollout.

Each test fails under one single-line mutation listed in ``tools/mutation_check.py``."""

import math

import pytest
import torch

from bayescrl.constrained.core.advantages import average_gae, discounted_gae
from bayescrl.constrained.core.optim import conjugate_gradient
from bayescrl.constrained.ecop import ecop_damping, ecop_multiplier_update


def _spd(d: int, seed: int) -> torch.Tensor:
    """SPD matrix with d well-separated eigenvalues 1..d (CG is exact in d steps, not fewer)."""
    q, _ = torch.linalg.qr(
        torch.randn(d, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    )
    return q @ torch.diag(torch.arange(1.0, d + 1, dtype=torch.float64)) @ q.T


def test_cg_uses_its_whole_budget_and_is_exact_in_d_steps():
    """CG's k-th iterate minimises the A-norm error over the Krylov space K_k(A, b): after one iteration
    x = (bᵀb / bᵀAb) b, after d iterations the residual is round-off (d distinct eigenvalues), after d - 1
    it is not. Fails if the loop runs ``iters - 1`` times."""
    d = 6
    A = _spd(d, 0)
    b = torch.randn(d, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    x1 = conjugate_gradient(lambda v: A @ v, b, iters=1, tol=0.0)
    torch.testing.assert_close(x1, (b @ b) / (b @ A @ b) * b, rtol=1e-12, atol=1e-14)
    xd = conjugate_gradient(lambda v: A @ v, b, iters=d, tol=0.0)
    assert float((A @ xd - b).norm() / b.norm()) < 1e-9
    xd1 = conjugate_gradient(lambda v: A @ v, b, iters=d - 1, tol=0.0)
    assert float((A @ xd1 - b).norm() / b.norm()) > 1e-4  # d - 1 steps are not enough
    # several right-hand sides: each column gets the full budget too
    B = torch.stack([b, A @ b + 1.0], 1)
    X = conjugate_gradient(lambda v: A @ v, B, iters=d, tol=0.0)
    assert float((A @ X - B).norm() / B.norm()) < 1e-9


def test_ecop_multiplier_update_by_hand():
    """Eq. `lagrangeupdaterule`: lambda <- max(0, lambda + beta Psi); a violated constraint (Psi > 0)
    raises its multiplier, a satisfied one lowers it down to 0."""
    lam = torch.tensor([1.0, 0.5, 0.0, 0.0], dtype=torch.float64)
    psi = torch.tensor([0.2, -1.0, 0.3, -0.3], dtype=torch.float64)
    out = ecop_multiplier_update(lam, psi, 2.0)
    torch.testing.assert_close(out, torch.tensor([1.4, 0.0, 0.6, 0.0], dtype=torch.float64))


def test_ecop_damping_threshold_by_hand():
    """Algorithm `practical-ECOP`: C = H sum_i max(J_Ci - d_i, -lambda_i/beta), zeta = sqrt(m)/beta
    max|lambda|; beta <- min(beta_max, kappa beta) iff C >= zeta. m = 4 so sqrt(m) != m, beta = 2 so
    1/beta != beta."""
    lam = torch.tensor([0.8, 0.2, 0.0, 0.4], dtype=torch.float64)
    gap = torch.tensor([0.05, -0.3, 0.01, -0.01], dtype=torch.float64)
    beta, H = 2.0, 10
    new_beta, c_val, zeta = ecop_damping(gap, lam, beta, H, kappa=1.5, beta_max=20.0)
    # max(0.05, -0.4) + max(-0.3, -0.1) + max(0.01, 0) + max(-0.01, -0.2) = 0.05 - 0.1 + 0.01 - 0.01
    assert c_val == pytest.approx(10 * (-0.05))
    assert zeta == pytest.approx(math.sqrt(4) / 2.0 * 0.8)  # = 0.8
    assert new_beta == beta  # C < zeta: beta kept
    # threshold placed between the right zeta (0.8) and what sqrt(m) -> m (1.6) or /beta -> *beta (3.2) give
    gap3 = torch.tensor([0.1, 0.0, 0.02, 0.0], dtype=torch.float64)  # C = 10 * 0.12 = 1.2
    new_beta, c_val, zeta = ecop_damping(gap3, lam, beta, H, kappa=1.5, beta_max=20.0)
    assert c_val == pytest.approx(1.2) and zeta == pytest.approx(0.8)
    assert new_beta == pytest.approx(3.0)
    assert ecop_damping(gap3, lam, 15.0, H, kappa=1.5, beta_max=20.0)[0] == 20.0  # capped at beta_max


def _gae_mid_truncation():
    """Two envs, 5 steps. Env 0: truncated (not terminated) at t = 1, a new episode starts at t = 2 and
    terminates at t = 4. Env 1: no episode end (the recursion runs through)."""
    T = 5
    r = torch.tensor([[1.0, 0.5], [2.0, 0.5], [3.0, 0.5], [4.0, 0.5], [5.0, 0.5]]).reshape(T, 2, 1)
    v = torch.tensor([[0.5, 1.0], [0.4, 1.0], [0.3, 1.0], [0.2, 1.0], [0.1, 1.0]]).reshape(T, 2, 1)
    nv = torch.tensor([[0.4, 1.0], [7.0, 1.0], [0.2, 1.0], [0.1, 1.0], [9.0, 1.0]]).reshape(T, 2, 1)
    term = torch.zeros(T, 2, dtype=torch.bool)
    end = torch.zeros(T, 2, dtype=torch.bool)
    end[1, 0] = True  # truncation: V(final_obs) = 7 bootstraps, the recursion is cut
    term[4, 0] = end[4, 0] = True
    return r, v, nv, term, end


def test_discounted_gae_cuts_the_recursion_at_a_mid_rollout_truncation():
    r, v, nv, term, end = _gae_mid_truncation()
    g, lam = 0.9, 0.8
    adv, ret = discounted_gae(r, v, nv, term, end, g, lam)
    d = [1 + g * 0.4 - 0.5, 2 + g * 7.0 - 0.4, 3 + g * 0.2 - 0.3, 4 + g * 0.1 - 0.2, 5 - 0.1]
    gl = g * lam
    expect0 = [d[0] + gl * d[1], d[1], d[2] + gl * d[3] + gl**2 * d[4], d[3] + gl * d[4], d[4]]
    torch.testing.assert_close(adv[:, 0, 0], torch.tensor(expect0))
    d1 = [0.5 + g * 1.0 - 1.0] * 5  # env 1: never cut
    expect1 = [sum(gl ** (k - t) * d1[k] for k in range(t, 5)) for t in range(5)]
    torch.testing.assert_close(adv[:, 1, 0], torch.tensor(expect1))
    torch.testing.assert_close(ret, adv + v)


def test_average_gae_cuts_the_recursion_at_a_mid_rollout_truncation():
    r, v, nv, term, end = _gae_mid_truncation()
    lam, j = 0.7, torch.tensor([2.0])
    adv, _, _ = average_gae(r, v, nv, term, end, lam, avg_reward=j)
    d = [1 - 2 + 0.4 - 0.5, 2 - 2 + 7.0 - 0.4, 3 - 2 + 0.2 - 0.3, 4 - 2 + 0.1 - 0.2, 5 - 2 - 0.1]
    expect0 = [d[0] + lam * d[1], d[1], d[2] + lam * d[3] + lam**2 * d[4], d[3] + lam * d[4], d[4]]
    torch.testing.assert_close(adv[:, 0, 0], torch.tensor(expect0))

"""Closed-form pins of the Bradley–Terry model with rater belief ϑ_i ~ N(θ, I/λ_i²), in both the fast
solver (``bayescrl.inference.bootstrap``) and the Pyro model the generic engines run
(``bayescrl.models.pyro_models.bt_linear_model``).

The generic-vs-fast cross-checks elsewhere pass when both paths carry the same mistake; these tests compare
each path with Eq. `mapestimateproblem` (lemma `mapestimatelemma`) written out by hand, with the
preference term in the softmax form of Eq. `rater_preference_dist` (Y = 0: Ā⁽⁰⁾ preferred), λ ≠ 1 and
two raters. Each fails under one single-line mutation listed in ``tools/mutation_check.py``."""

import math

import pyro.poutine as poutine
import torch

from bayescrl.inference.bootstrap import (
    map_estimate,
    newton_solve,
    perturbed_map,
    sample_perturbation,
    surrogate_loss,
)
from bayescrl.models.linear import BTLinearProblem
from bayescrl.models.pyro_models import bt_linear_model

D64 = torch.float64
MU0 = torch.tensor([0.5, -0.2], dtype=D64)
COV0 = torch.tensor([[1.0, 0.3], [0.3, 0.8]], dtype=D64)
BETA = torch.tensor([2.0, 0.5], dtype=D64)
LAM = torch.tensor([0.5, 3.0], dtype=D64)  # λ² ≠ λ for both raters
SD = 0.7
X0 = torch.tensor([[1.0, 0.0], [0.2, 1.0], [-1.0, 0.5], [0.3, -0.4]], dtype=D64)
X1 = torch.tensor([[0.0, 1.0], [1.0, -0.5], [0.4, 0.4], [-0.6, 0.1]], dtype=D64)
Y = torch.tensor([0.0, 1.0, 1.0, 0.0], dtype=D64)
RATER = torch.tensor([0, 1, 0, 1])
X = torch.tensor([[1.0, 1.0], [0.5, -1.0]], dtype=D64)
R = torch.tensor([1.0, -0.5], dtype=D64)


def _problem() -> BTLinearProblem:
    return BTLinearProblem.from_data(
        MU0, COV0, BETA.tolist(), LAM.tolist(), SD, x0=X0, x1=X1, y=Y, rater=RATER, x=X, r=R
    )


def _neg_log_pref(vartheta: torch.Tensor) -> torch.Tensor:
    """−Σ_n log P(Y_n | ϑ), P(Y = k) = e^{β⟨Ā⁽ᵏ⁾, ϑ⟩} / (e^{β⟨Ā⁽⁰⁾, ϑ⟩} + e^{β⟨Ā⁽¹⁾, ϑ⟩})."""
    vt = vartheta[RATER]  # [N, d]
    u = BETA[RATER, None] * torch.stack([(X0 * vt).sum(-1), (X1 * vt).sum(-1)], -1)  # [N, 2]
    chosen = torch.where(Y == 0, u[:, 0], u[:, 1])
    return (torch.logsumexp(u, -1) - chosen).sum()


def _hand_loss(theta: torch.Tensor, vartheta: torch.Tensor) -> torch.Tensor:
    """L1 + L2 + L3 of Eq. `mapestimateproblem` (L1 with noise variance σ²)."""
    l1 = 0.5 * ((R - X @ theta) ** 2).sum() / SD**2
    da = theta - MU0
    l3 = 0.5 * (LAM**2 * ((theta - vartheta) ** 2).sum(-1)).sum() + 0.5 * da @ torch.linalg.solve(COV0, da)
    return l1 + _neg_log_pref(vartheta) + l3


def _point(seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, generator=g, dtype=D64), torch.randn(2, 2, generator=g, dtype=D64)


def test_fast_surrogate_loss_is_eq_mapestimateproblem():
    prob = _problem()
    for seed in range(3):
        th, vt = _point(seed)
        got = surrogate_loss(prob, th[None], vt[None])
        torch.testing.assert_close(got, _hand_loss(th, vt).reshape(1), rtol=1e-12, atol=1e-12)


def test_fast_map_is_a_stationary_point_of_the_hand_written_loss():
    """The MAP of the direct and the Newton-CG solvers zeroes the gradient of Eq. `mapestimateproblem`."""
    prob = _problem()
    res = map_estimate(prob, tol=1e-10)
    pert = sample_perturbation(
        prob.batch_view(), 1, p_offline=1.0, p_online=1.0, online_reward_noise=False, anchor_prior=False
    )
    cg = newton_solve(prob.batch_view(), pert, solver="newton-cg", tol=1e-10)
    for th, vt in ((res.theta[0], res.vartheta[0]), (cg.theta[0, 0], cg.vartheta[0, 0])):
        th, vt = th.clone().requires_grad_(True), vt.clone().requires_grad_(True)
        g_th, g_vt = torch.autograd.grad(_hand_loss(th, vt), (th, vt))
        assert float(torch.cat([g_th, g_vt.reshape(-1)]).norm()) < 1e-7


def test_pyro_model_density_is_the_closed_form():
    """log p(θ, ϑ, Y, R) of ``bt_linear_model`` (what SVI / NUTS / the generic bootstrap see) at fixed values,
    with N(ϑ_i; θ, I/λ_i²) written out: −(d/2) log 2π + d log λ_i − λ_i²/2 ‖ϑ_i − θ‖²."""
    d = 2
    for seed in range(3):
        th, vt = _point(seed)
        cond = poutine.condition(bt_linear_model, {"theta": th, "vartheta": vt})
        tr = poutine.trace(cond).get_trace(MU0, COV0, BETA, LAM, SD, X0, X1, Y, RATER, X, R)
        log_theta = torch.distributions.MultivariateNormal(MU0, COV0).log_prob(th)
        log_vt = (
            -0.5 * d * math.log(2 * math.pi) + d * LAM.log() - 0.5 * LAM**2 * ((vt - th) ** 2).sum(-1)
        ).sum()
        log_r = (-0.5 * math.log(2 * math.pi * SD**2) - 0.5 * (R - X @ th) ** 2 / SD**2).sum()
        expect = log_theta + log_vt + log_r - _neg_log_pref(vt)
        torch.testing.assert_close(tr.log_prob_sum(), expect, rtol=1e-12, atol=1e-10)


def test_perturbed_map_anchor_when_the_prior_dominates_the_data():
    """Perturbed MAP with a Gaussian–linear likelihood is exact posterior sampling (randomised least
    squares): θ̃ = argmin ‖r + σω − Xθ‖²/2σ² + ½(θ − μ0 − θ')ᵀΣ0⁻¹(θ − μ0 − θ'), θ' ~ N(0, Σ0), has law
    N(m, C) with C = (Σ0⁻¹ + XᵀX/σ²)⁻¹, m = C(Σ0⁻¹μ0 + Xᵀr/σ²). With one weak observation the prior
    dominates, so the draws' mean is ≈ μ0 (not 2μ0, not 0) and their covariance ≈ Σ0 = L Lᵀ (not Lᵀ L)."""
    mu0 = torch.tensor([2.0, -1.5, 1.0], dtype=D64)
    cov0 = torch.tensor([[1.0, 0.8, 0.0], [0.8, 2.0, 0.6], [0.0, 0.6, 0.5]], dtype=D64)
    L = torch.linalg.cholesky(cov0)
    assert float((L.mT @ L - cov0).abs().max()) > 0.5  # the transposed factor gives another covariance
    sd = 1.5
    x = torch.tensor([[0.3, -0.2, 0.1]], dtype=D64)
    r = torch.tensor([0.4], dtype=D64)
    prob = BTLinearProblem.from_data(mu0, cov0, [1.0], [2.0], sd, x=x, r=r)
    M = 20000
    res = perturbed_map(prob, M, generator=torch.Generator().manual_seed(0))
    assert res.all_converged
    prec = torch.linalg.inv(cov0) + x.T @ x / sd**2
    C = torch.linalg.inv(prec)
    m = C @ (torch.linalg.solve(cov0, mu0) + x.T @ r / sd**2)
    assert float((m - mu0).abs().max()) < 0.1  # the prior dominates
    se = C.diagonal().sqrt() / M**0.5
    assert ((res.theta.mean(0) - m).abs() < 4 * se).all()
    torch.testing.assert_close(torch.cov(res.theta.T), C, rtol=0, atol=0.04 * float(C.diagonal().max()))

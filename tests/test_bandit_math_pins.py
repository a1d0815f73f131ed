"""Closed-form pins of chapter `warmPref-PS` maths that cross-checks cannot see: LinTS's inflation, the rater
belief's prior ϑ ~ N(μ0, Σ0 + I/λ²) in the competence evidence, and the sign of Eq.
`rater_preference_dist` with a prior mean μ0 ≠ 0 (with μ0 = 0 the evidence is symmetric in the sign).

Each test fails under one single-line mutation listed in ``tools/mutation_check.py``."""

import math

import pyro.poutine as poutine
import torch
import torch.nn.functional as F

from bayescrl.bandits.agents import GaussianPSAgent
from bayescrl.raters.competence import competence_model, log_marginal_likelihood
from bayescrl.raters.likelihood import signed_diff as _signed_diff

D64 = torch.float64


def test_lints_samples_have_covariance_v_squared_sigma():
    """Agrawal & Goyal: θ̃ ~ N(θ̂, v² B⁻¹). With v = 3 the sample covariance is 9Σ (not 81Σ or 3Σ)."""
    S, v = 8_000, 3.0
    cov = torch.tensor([[1.0, 0.6], [0.6, 0.5]], dtype=D64)
    mean = torch.tensor([0.3, -1.0], dtype=D64)
    agent = GaussianPSAgent(
        None, mean.expand(S, 2), cov.expand(S, 2, 2), 1.0, generator=torch.Generator().manual_seed(0), scale=v
    )
    theta = agent._scaled()
    torch.testing.assert_close(theta.mean(0), mean, atol=0.08, rtol=0)
    emp = torch.cov(theta.T)
    torch.testing.assert_close(emp, v**2 * cov, atol=0.05 * v**2, rtol=0)


def _pairs(N: int = 200, seed: int = 0):
    """One-dimensional D0 drawn from Eq. `rater_preference_dist` with ϑ = 2, β = 2 (Y = 0: x0 preferred)."""
    g = torch.Generator().manual_seed(seed)
    x0, x1 = torch.randn(1, N, 1, generator=g, dtype=D64), torch.randn(1, N, 1, generator=g, dtype=D64)
    p0 = torch.sigmoid(2.0 * (x0 - x1)[..., 0] * 2.0)
    y = (torch.rand(1, N, generator=g, dtype=D64) >= p0).long()
    return x0, x1, y


def _evidence_by_quadrature(x0, x1, y, beta: float, mu0: float, var: float) -> float:
    """log ∫ Π_n P(Y_n | ϑ) N(ϑ; μ0, var) dϑ on a fine grid, P(Y = 0 | ϑ) = σ(β (x0 − x1) ϑ)."""
    v = torch.linspace(-10, 10, 20_001, dtype=D64)
    log_prior = -0.5 * (v - mu0) ** 2 / var - 0.5 * math.log(2 * math.pi * var)
    margin = (x0 - x1)[0, :, 0, None] * v[None]  # [N, grid]
    ll = torch.where(y[0, :, None] == 0, F.logsigmoid(beta * margin), F.logsigmoid(-beta * margin)).sum(0)
    return float(torch.logsumexp(ll + log_prior, 0) + math.log(float(v[1] - v[0])))


def test_competence_evidence_matches_quadrature_with_nonzero_prior_mean():
    """p(D0 | β) with ϑ ~ N(μ0, Σ0 + I/λ²): λ = 0.25 (1/λ² = 16 vs 1/λ = 4) and μ0 = 1 ≠ 0 (the sign of
    ``s_n`` matters). Laplace on N = 200 pairs is within 0.01 nats of the quadrature; λ instead of λ² moves
    the evidence by > 0.5 nats, a flipped sign by > 0.2."""
    x0, x1, y = _pairs()
    lam, mu0, s0 = 0.25, 1.0, 0.5
    betas = torch.tensor([0.5, 2.0], dtype=D64)
    got = log_marginal_likelihood(
        x0, x1, y, betas, torch.tensor([mu0], dtype=D64), torch.tensor([[s0]], dtype=D64), lam
    )
    for k, b in enumerate(betas.tolist()):
        ref = _evidence_by_quadrature(x0, x1, y, b, mu0, s0 + 1 / lam**2)
        assert abs(float(got[0, k]) - ref) < 0.03, (b, float(got[0, k]), ref)


def test_signed_diff_is_preferred_minus_other():
    """Eq. `rater_preference_dist`: Y = 0 means Ā⁽⁰⁾ preferred, so s_n (Ā⁽⁰⁾ − Ā⁽¹⁾) is winner − loser."""
    x0 = torch.tensor([[[1.0, 2.0], [1.0, 2.0]]], dtype=D64)
    x1 = torch.tensor([[[0.0, 5.0], [0.0, 5.0]]], dtype=D64)
    z = _signed_diff(x0, x1, torch.tensor([[0, 1]]))
    torch.testing.assert_close(z, torch.tensor([[[1.0, -3.0], [-1.0, 3.0]]], dtype=D64))


def test_competence_model_density_is_the_closed_form():
    """The Pyro model's log density at fixed (β, ϑ, Y): log LogNormal(β) + log N(ϑ; μ0, Σ0 + I/λ²) +
    Σ_n log P(Y_n | ϑ) with P(Y = 0) = σ(β⟨Ā⁽⁰⁾ − Ā⁽¹⁾, ϑ⟩)."""
    x0 = torch.tensor([[[1.0, 0.0], [0.5, 1.0], [0.0, 2.0]]], dtype=D64)
    x1 = torch.tensor([[[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]]], dtype=D64)
    y = torch.tensor([[0, 1, 1]])
    mu0, cov0, lam = (
        torch.tensor([0.5, -1.0], dtype=D64),
        torch.tensor([[1.0, 0.2], [0.2, 0.5]], dtype=D64),
        0.5,
    )
    beta, vt = torch.tensor([[2.0]], dtype=D64), torch.tensor([[[0.3, -0.7]]], dtype=D64)
    cond = poutine.condition(competence_model, {"beta": beta, "vartheta": vt})
    tr = poutine.trace(cond).get_trace(x0, x1, y, mu0, cov0, lam, beta_loc=0.0, beta_scale=1.0)
    cov = cov0 + torch.eye(2, dtype=D64) / lam**2
    torch.testing.assert_close(tr.nodes["vartheta"]["fn"].covariance_matrix.reshape(2, 2), cov)
    margin = 2.0 * ((x0 - x1)[0] @ vt[0, 0])  # β⟨Ā⁽⁰⁾ − Ā⁽¹⁾, ϑ⟩
    log_lik = torch.where(y[0] == 0, F.logsigmoid(margin), F.logsigmoid(-margin)).sum()
    log_prior = torch.distributions.MultivariateNormal(mu0, cov).log_prob(vt[0, 0])
    log_beta = torch.distributions.LogNormal(0.0, 1.0).log_prob(beta[0, 0])
    torch.testing.assert_close(tr.log_prob_sum(), log_lik + log_prior + log_beta)


def test_competence_evidence_newton_does_not_cycle():
    """Few pairs, μ0 ≠ 0, β ≥ 1: undamped Newton fell into a 2-cycle here (log p ≈ −1600 at β = 2 for a
    true −10.8); the damped solve stays within the Laplace error of the quadrature."""
    g = torch.Generator().manual_seed(0)
    x0, x1 = torch.randn(1, 12, 1, generator=g, dtype=D64), torch.randn(1, 12, 1, generator=g, dtype=D64)
    y = torch.tensor([[0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 1]])
    betas = torch.tensor([0.5, 2.0, 10.0], dtype=D64)
    got = log_marginal_likelihood(
        x0, x1, y, betas, torch.tensor([1.5], dtype=D64), torch.tensor([[0.5]], dtype=D64), 0.5
    )
    for k, b in enumerate(betas.tolist()):
        ref = _evidence_by_quadrature(x0, x1, y, b, 1.5, 0.5 + 1 / 0.5**2)
        assert abs(float(got[0, k]) - ref) < 0.15, (b, float(got[0, k]), ref)

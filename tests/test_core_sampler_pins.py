"""Moments of one posterior draw from each sampler the engines hand out: the exact Gaussian–linear
posterior, the Laplace approximation's joint Gaussian over (θ, ϑ) and the Dirichlet posterior's
explicit-generator Gamma sampler (Marsaglia & Tsang 2000, boosted by U^{1/α} for α < 1). The covariances
are far from diagonal, so a draw ``ε Lᵀ`` written as ``ε L`` (covariance Lᵀ L instead of L Lᵀ) is seen.
Each test fails under a single-line mutation listed in ``tools/mutation_check.py``."""

import torch

from bayescrl.inference.exact import DirichletPosterior, GaussianLinearPosterior
from bayescrl.inference.laplace import laplace
from bayescrl.models.linear import BTLinearProblem

D64 = torch.float64
N = 40000
MEAN = torch.tensor([1.0, -2.0, 0.5], dtype=D64)
COV = torch.tensor([[1.0, 0.8, 0.0], [0.8, 2.0, 0.6], [0.0, 0.6, 0.5]], dtype=D64)


def _check_moments(x: torch.Tensor, mean: torch.Tensor, cov: torch.Tensor, n: int = N) -> None:
    se = cov.diagonal().sqrt() / n**0.5
    assert ((x.mean(0) - mean).abs() < 4.5 * se).all(), (x.mean(0), mean)
    torch.testing.assert_close(torch.cov(x.T), cov, rtol=0, atol=0.04 * float(cov.diagonal().max()))


def test_exact_gaussian_draws_have_the_posterior_moments():
    L = torch.linalg.cholesky(COV)
    assert float((L.mT @ L - COV).abs().max()) > 0.5
    post = GaussianLinearPosterior(MEAN, COV, 1.0)
    _check_moments(post.sample(N, torch.Generator().manual_seed(0)), MEAN, COV)


def test_laplace_draws_have_the_joint_gaussian_moments():
    """θ and the raters' ϑ drawn jointly from N(MAP, H⁻¹): the draws' moments are the result's
    ``mean``/``cov`` (θ block and the θ–ϑ cross-covariance)."""
    x0 = torch.tensor([[1.0, 0.0, 0.5], [0.2, 1.0, -1.0], [-1.0, 0.5, 0.0]], dtype=D64)
    x1 = torch.tensor([[0.0, 1.0, 0.0], [1.0, -0.5, 0.3], [0.4, 0.4, 1.0]], dtype=D64)
    prob = BTLinearProblem.from_data(
        MEAN, COV, [2.0], [0.8], 1.0, x0=x0, x1=x1, y=torch.tensor([1.0, 0.0, 1.0], dtype=D64)
    )
    lap = laplace(prob)
    th, vt = lap.sample(N, torch.Generator().manual_seed(1))
    joint = torch.cat([th, vt[:, 0]], 1)
    _check_moments(joint, lap.mean, lap.cov)
    assert float(lap.cov[:3, 3:].abs().max()) > 0.3  # θ and ϑ are strongly coupled (λ = 0.8)


def test_dirichlet_gamma_sampler_has_the_dirichlet_moments():
    """With a generator the Gamma draws come from the package's own Marsaglia–Tsang sampler. Dirichlet(α):
    mean α/α₀, Cov = (diag(α)α₀ − ααᵀ) / (α₀²(α₀ + 1)); α₁ < 1 takes the boosted path."""
    alpha = torch.tensor([[0.4, 2.5, 7.0], [1.0, 1.0, 3.0]], dtype=D64)
    post = DirichletPosterior(alpha)
    x = post.sample(N, torch.Generator().manual_seed(2))  # [N, 2, 3]
    for b in range(2):
        a = alpha[b]
        a0 = a.sum()
        cov = (torch.diag(a) * a0 - torch.outer(a, a)) / (a0**2 * (a0 + 1))
        _check_moments(x[:, b], a / a0, cov)

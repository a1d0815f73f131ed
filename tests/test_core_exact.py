"""Conjugate closed forms: Gaussian–linear rank-one updates and Dirichlet–categorical counts."""

import torch

from bayescrl.inference.exact import DirichletPosterior, GaussianLinearPosterior
from bayescrl.utils import set_torch_threads

set_torch_threads(1)
DT = torch.float64


def closed_form(mu0, cov0, X, r, sd):
    prec = torch.linalg.inv(cov0) + X.T @ X / sd**2
    cov = torch.linalg.inv(prec)
    mean = cov @ (torch.linalg.solve(cov0, mu0) + X.T @ r / sd**2)
    return mean, cov


def test_rank_one_updates_equal_closed_form_batched():
    g = torch.Generator().manual_seed(0)
    B, d, T, sd = 4, 5, 30, 0.3
    mu0 = torch.randn(B, d, generator=g, dtype=DT)
    A = torch.randn(d, d, generator=g, dtype=DT)
    cov0 = A @ A.T + torch.eye(d, dtype=DT)
    X = torch.randn(B, T, d, generator=g, dtype=DT)
    r = torch.randn(B, T, generator=g, dtype=DT)
    post = GaussianLinearPosterior(mu0, cov0, sd)
    for t in range(T):
        post.update(X[:, t], r[:, t])
    many = GaussianLinearPosterior(mu0, cov0, sd).update_many(X, r)
    for b in range(B):
        m, c = closed_form(mu0[b], cov0, X[b], r[b], sd)
        torch.testing.assert_close(post.mean[b], m, atol=1e-6, rtol=0)
        torch.testing.assert_close(post.cov[b], c, atol=1e-6, rtol=0)
        torch.testing.assert_close(many.mean[b], m, atol=1e-6, rtol=0)
    assert post.count.tolist() == [T] * B


def test_masked_update_and_sampling_moments():
    post = GaussianLinearPosterior(torch.zeros(2, 2, dtype=DT), torch.eye(2, dtype=DT), 1.0)
    post.update(
        torch.tensor([[1.0, 0.0], [1.0, 0.0]]), torch.tensor([2.0, 2.0]), mask=torch.tensor([True, False])
    )
    torch.testing.assert_close(post.mean[0], torch.tensor([1.0, 0.0], dtype=DT))  # 1·2/(1+1)
    torch.testing.assert_close(post.mean[1], torch.zeros(2, dtype=DT))
    torch.testing.assert_close(post.cov[0, 0, 0], torch.tensor(0.5, dtype=DT))
    s = post.sample(50000, torch.Generator().manual_seed(1))
    assert s.shape == (2, 50000, 2)
    assert abs(float(s[0, :, 0].var()) - 0.5) < 0.02 and abs(float(s[0, :, 0].mean()) - 1.0) < 0.02


def test_dirichlet_counts_and_samples():
    S, A = 3, 2
    post = DirichletPosterior(torch.full((S, A, S), 0.5, dtype=DT))
    s = torch.tensor([0, 0, 0, 1])
    a = torch.tensor([1, 1, 1, 0])
    nxt = torch.tensor([2, 2, 1, 0])
    post.update((s, a), nxt)
    torch.testing.assert_close(post.alpha[0, 1], torch.tensor([0.5, 1.5, 2.5], dtype=DT))
    torch.testing.assert_close(post.mean[0, 1], torch.tensor([1 / 9, 3 / 9, 5 / 9], dtype=DT))
    draws = post.sample(20000, torch.Generator().manual_seed(0))
    assert draws.shape == (20000, S, A, S)
    torch.testing.assert_close(draws.mean(0)[0, 1], post.mean[0, 1], atol=0.01, rtol=0)
    # Dirichlet variance α_k(α0 − α_k)/(α0²(α0 + 1)) for the first coordinate: 0.5·4/(4.5²·5.5)
    assert abs(float(draws[:, 0, 1, 0].var()) - 2.0 / (4.5**2 * 5.5)) < 0.001

"""Perturbed-MAP (bootstrap) solver: gradients, optimum, exactness on Gaussian–linear data, batching."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from bayescrl.inference.bootstrap import (
    _Terms,
    map_estimate,
    perturbed_map,
    sample_perturbation,
    surrogate_loss,
)
from bayescrl.inference.exact import GaussianLinearPosterior
from bayescrl.models.linear import BTLinearProblem
from bayescrl.utils import set_torch_threads

set_torch_threads(1)
DT = torch.float64


def make_problem(seed=0, d=3, N=40, T=25, R=2, beta=(4.0, 2.0), lam=(3.0, 1.5), online_frac=0.3):
    g = torch.Generator().manual_seed(seed)
    theta = torch.randn(d, generator=g, dtype=DT)
    x0 = torch.randn(N, d, generator=g, dtype=DT)
    x1 = torch.randn(N, d, generator=g, dtype=DT)
    rater = torch.randint(0, R, (N,), generator=g)
    y = (torch.rand(N, generator=g, dtype=DT) < torch.sigmoid(2 * (x1 - x0) @ theta)).to(DT)
    online = torch.rand(N, generator=g) < online_frac
    X = torch.randn(T, d, generator=g, dtype=DT)
    r = X @ theta + 0.5 * torch.randn(T, generator=g, dtype=DT)
    mu0 = 0.1 * torch.arange(d, dtype=DT)
    A = torch.randn(d, d, generator=torch.Generator().manual_seed(99), dtype=DT)
    cov0 = A @ A.T / d + 0.5 * torch.eye(d, dtype=DT)
    return BTLinearProblem.from_data(
        mu0, cov0, beta[:R], lam[:R], 0.5, x0=x0, x1=x1, y=y, rater=rater, pref_online=online, x=X, r=r
    )


def test_gradient_and_hessian_match_autograd():
    prob = make_problem()
    g = torch.Generator().manual_seed(1)
    pert = sample_perturbation(prob, 3, p_offline=0.5, p_online=0.75, generator=g)
    terms = _Terms(prob.batch_view())
    d, R = prob.dim, prob.num_raters
    z = torch.randn(1, 3, (R + 1) * d, generator=g, dtype=DT)

    def f(zz):
        return terms.loss(zz[..., :d], zz[..., d:].reshape(1, 3, R, d), pert).sum()

    grad, hess = terms.grad_hess(z[..., :d], z[..., d:].reshape(1, 3, R, d), pert)
    ag = torch.autograd.functional.jacobian(f, z)
    ah = torch.autograd.functional.hessian(f, z)  # block diagonal over the 3 samples
    torch.testing.assert_close(grad, ag, rtol=1e-9, atol=1e-9)
    for m in range(3):
        torch.testing.assert_close(hess[0, m], ah[0, m, :, 0, m, :], rtol=1e-9, atol=1e-9)
    # and a finite-difference check of the loss itself along a random direction
    v = torch.randn_like(z)
    eps = 1e-6
    fd = (f(z + eps * v) - f(z - eps * v)) / (2 * eps)
    assert abs(float(fd - (grad * v).sum())) < 1e-5 * (1 + abs(float(fd)))


def test_plain_map_matches_scipy():
    prob = make_problem(seed=3)
    res = map_estimate(prob)
    assert bool(res.converged.all()) and res.grad_norm.max() < 1e-8
    d, R = prob.dim, prob.num_raters

    def fun(z):
        zt = torch.tensor(z, dtype=DT, requires_grad=True)
        loss = surrogate_loss(prob, zt[:d].reshape(1, d), zt[d:].reshape(1, R, d)).sum()
        loss.backward()
        return float(loss.detach()), zt.grad.numpy()

    opt = minimize(
        fun, np.zeros((R + 1) * d), jac=True, method="BFGS", options={"gtol": 1e-10, "maxiter": 5000}
    )
    np.testing.assert_allclose(res.theta[0].numpy(), opt.x[:d], atol=1e-5)
    np.testing.assert_allclose(res.vartheta[0].reshape(-1).numpy(), opt.x[d:], atol=1e-5)
    # plain MAP via perturbed_map with all perturbations off gives the same point
    res2 = perturbed_map(prob, 2, p_offline=1.0, p_online=1.0, online_reward_noise=False, anchor_prior=False)
    torch.testing.assert_close(res2.theta, res.theta.expand(2, d), atol=1e-7, rtol=0)


def test_bootstrap_is_exact_sampling_on_gaussian_linear():
    """No preferences: perturbed MAP = randomised least squares = exact posterior sampling."""
    g = torch.Generator().manual_seed(5)
    d, T, sd = 3, 30, 0.7
    X = torch.randn(T, d, generator=g, dtype=DT)
    r = X @ torch.tensor([1.0, -0.5, 0.3], dtype=DT) + sd * torch.randn(T, generator=g, dtype=DT)
    mu0 = torch.tensor([0.2, 0.0, -0.1], dtype=DT)
    cov0 = torch.tensor([[1.0, 0.3, 0.0], [0.3, 2.0, 0.1], [0.0, 0.1, 0.5]], dtype=DT)
    prob = BTLinearProblem.from_data(mu0, cov0, 1.0, 2.0, sd, x=X, r=r)
    M = 40000
    res = perturbed_map(prob, M, generator=g)
    assert res.all_converged
    exact = GaussianLinearPosterior(mu0, cov0, sd).update_many(X, r)
    se = exact.cov.diagonal().sqrt() / M**0.5
    assert ((res.theta.mean(0) - exact.mean).abs() < 4 * se).all()
    emp_cov = torch.cov(res.theta.T)
    assert ((emp_cov - exact.cov).abs() < 0.03 * exact.cov.diagonal().max()).all()
    # ϑ = θ + N(0, I/λ²) exactly
    dv = res.vartheta[:, 0] - res.theta
    torch.testing.assert_close(dv.var(0), torch.full((d,), 0.25, dtype=DT), rtol=0.05, atol=0)


def test_batched_equals_separate_and_warm_start():
    probs = [make_problem(seed=s, N=n, T=t) for s, n, t in [(0, 40, 25), (1, 10, 0), (2, 0, 5)]]
    batched = BTLinearProblem.stack(probs)
    kw = {"p_offline": 1.0, "p_online": 1.0, "online_reward_noise": False, "anchor_prior": False, "tol": 1e-9}
    rb = perturbed_map(batched, 2, **kw)
    assert rb.theta.shape == (3, 2, 3) and rb.vartheta.shape == (3, 2, 2, 3)
    for b, p in enumerate(probs):
        rs = perturbed_map(p, 2, **kw)
        torch.testing.assert_close(rb.theta[b], rs.theta, atol=1e-8, rtol=0)
    # warm start from the solution: already converged, no Newton iteration needed
    warm = perturbed_map(batched, 2, init=rb, **kw)
    assert warm.iters == 0 and warm.all_converged


def test_perturbation_weights_and_convergence_reported():
    prob = make_problem(N=400, online_frac=0.5)
    g = torch.Generator().manual_seed(0)
    pert = sample_perturbation(prob, 500, p_offline=0.6, p_online=0.75, generator=g)
    w = pert.pref_weight[0]
    onl = prob.pref_online
    assert abs(float(w[:, onl].mean()) - 0.75) < 0.01 and abs(float(w[:, ~onl].mean()) - 0.6) < 0.01
    res = perturbed_map(prob, 8, max_iter=1, generator=g)  # one Newton step cannot reach 1e-6
    assert not res.all_converged and res.iters == 1


def test_append_matches_from_data():
    prob = make_problem(N=6, T=4)
    p2 = BTLinearProblem.empty(prob.mu0, prob.cov0, prob.beta, prob.lam, prob.noise_sd, pref_capacity=2)
    for i in range(6):
        p2.append_preferences(prob.x0[i], prob.x1[i], prob.y[i : i + 1], prob.rater[i], prob.pref_online[i])
    p2.append_rewards(prob.x, prob.r)
    kw = {"p_offline": 1.0, "online_reward_noise": False, "anchor_prior": False}
    torch.testing.assert_close(perturbed_map(p2, 1, **kw).theta, perturbed_map(prob, 1, **kw).theta)
    # batched append: one row per batch element
    pb = BTLinearProblem.empty(prob.mu0, prob.cov0, prob.beta, prob.lam, 0.5, batch_size=2)
    pb.append_rewards(prob.x[:2], prob.r[:2])
    assert pb.n_reward.tolist() == [1, 1]


@pytest.mark.parametrize("bad", ["y", "lam", "cov"])
def test_bad_values_raise(bad):
    from bayescrl.utils import DataError

    kw = {"mu0": [0.0, 0.0], "cov0": [[1.0, 0.0], [0.0, 1.0]], "beta": 1.0, "lam": 1.0}
    if bad == "lam":
        kw["lam"] = 0.0
    if bad == "cov":
        kw["cov0"] = [[1.0, 2.0], [2.0, 1.0]]
    y = [2.0] if bad == "y" else [1.0]
    with pytest.raises(
        DataError, match={"y": r"preferences.y\[0\] = 2.0", "lam": "raters.lam", "cov": "prior.cov"}[bad]
    ):
        BTLinearProblem.from_data(**kw, x0=[[1.0, 0.0]], x1=[[0.0, 1.0]], y=y)

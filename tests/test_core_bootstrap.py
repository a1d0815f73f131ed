"""Perturbed-MAP (bootstrap) solver: gradients, optimum, exactness on Gaussian–linear data, batching."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from bayescrl.inference.bootstrap import (
    _NewtonCG,
    _Terms,
    _use_cg,
    map_estimate,
    newton_solve,
    perturbed_map,
    sample_perturbation,
    surrogate_loss,
)
from bayescrl.inference.exact import GaussianLinearPosterior
from bayescrl.inference.laplace import laplace
from bayescrl.models.linear import BTLinearProblem
from bayescrl.utils import ConfigError, set_torch_threads

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


def _big_problem(seed=0, d=40, N=300, T=20, R=3):
    return make_problem(seed=seed, d=d, N=N, T=T, R=R, beta=(4.0, 2.0, 1.0), lam=(3.0, 1.5, 10.0))


def test_block_newton_step_equals_dense_solve():
    prob = make_problem(seed=2, d=4, R=2)
    pert = sample_perturbation(prob, 3, p_offline=0.5, generator=torch.Generator().manual_seed(3))
    terms = _Terms(prob.batch_view())
    g0 = torch.Generator().manual_seed(4)
    th = torch.randn(1, 3, 4, generator=g0, dtype=DT)
    vt = torch.randn(1, 3, 2, 4, generator=g0, dtype=DT)
    g, k_vt = terms.grad_blocks(th, vt, pert)
    step, bad = terms.block_newton_step(g, k_vt)
    dense = -torch.linalg.solve(terms.assemble(k_vt), g.unsqueeze(-1)).squeeze(-1)
    assert not bool(bad.any())
    torch.testing.assert_close(step, dense, rtol=1e-9, atol=1e-10)


def test_newton_cg_products_and_preconditioner_are_exact():
    """Hessian products equal the assembled Hessian; the preconditioner inverts the mean-curvature Hessian."""
    prob = _big_problem(d=6, N=60)
    pert = sample_perturbation(
        prob, 5, p_offline=0.5, p_online=0.75, generator=torch.Generator().manual_seed(0)
    )
    terms = _Terms(prob.batch_view())
    cg = _NewtonCG(terms, pert)
    d, R = prob.dim, prob.num_raters
    g0 = torch.Generator().manual_seed(1)
    z = torch.randn(1, (R + 1) * d, 5, generator=g0, dtype=DT)
    v = torch.randn(1, (R + 1) * d, 5, generator=g0, dtype=DT)
    loss, cache = cg.loss(z, cg.data)
    grad, h = cg.grad(cg.data, cache)
    th, vt = z.mT[..., :d], z.mT[..., d:].reshape(1, 5, R, d)
    ref_g, ref_h = terms.grad_hess(th, vt, pert)
    torch.testing.assert_close(loss, terms.loss(th, vt, pert), rtol=1e-12, atol=1e-9)
    torch.testing.assert_close(grad.mT, ref_g, rtol=1e-10, atol=1e-10)
    hv = (ref_h @ v.mT.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(cg.hvp(v, h).mT, hv, rtol=1e-10, atol=1e-10)
    # the preconditioner with the curvature of sample 2 is the exact inverse Hessian of sample 2
    prec = cg.preconditioner(h[..., 2])
    x = prec(v)
    torch.testing.assert_close((ref_h[:, 2] @ x[..., 2:3]).squeeze(-1), v[..., 2], rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("batched", [False, True])
def test_newton_cg_matches_direct_newton(batched):
    if batched:  # ragged data sets: padding rows, one without comparisons, one without rewards
        prob = BTLinearProblem.stack([_big_problem(0), _big_problem(1, N=120, T=0), _big_problem(2, N=0)])
    else:
        prob = _big_problem(3)
    pert = sample_perturbation(
        prob, 12, p_offline=0.5, p_online=0.75, generator=torch.Generator().manual_seed(5)
    )
    direct = newton_solve(prob, pert, solver="newton", tol=1e-9)
    cg = newton_solve(prob, pert, solver="newton-cg", tol=1e-9)
    assert direct.all_converged and cg.all_converged and cg.grad_norm.max() <= 1e-9
    torch.testing.assert_close(cg.theta, direct.theta, atol=1e-8, rtol=0)
    torch.testing.assert_close(cg.vartheta, direct.vartheta, atol=1e-8, rtol=0)
    torch.testing.assert_close(cg.loss, direct.loss, atol=1e-9, rtol=1e-12)
    # "auto" picks Newton-CG for many samples, and perturbed_map(solver=...) reaches the same optimum
    assert _use_cg(prob.dim, 12) and not _use_cg(3, 2)
    kw = {"p_offline": 0.5, "tol": 1e-9}
    a = perturbed_map(prob, 12, generator=torch.Generator().manual_seed(6), solver="newton", **kw)
    b = perturbed_map(prob, 12, generator=torch.Generator().manual_seed(6), **kw)
    torch.testing.assert_close(a.theta, b.theta, atol=1e-8, rtol=0)
    with pytest.raises(ConfigError, match="solver"):
        perturbed_map(prob, 2, solver="lbfgs")


def test_map_and_laplace_warm_start_after_appending():
    """A warm start from the MAP before a few new comparisons converges to the same MAP in fewer steps."""
    prob = make_problem(seed=6, N=400, T=30)
    first = map_estimate(prob)
    lap0 = laplace(prob)
    more = prob.clone()
    g = torch.Generator().manual_seed(8)
    more.append_preferences(
        torch.randn(3, 3, generator=g, dtype=DT),
        torch.randn(3, 3, generator=g, dtype=DT),
        [1.0, 0.0, 1.0],
        [0, 1, 1],
    )
    cold = map_estimate(more)
    assert float((cold.theta - first.theta).abs().max()) > 1e-3  # the new data moved the MAP
    for init in (
        first,
        (first.theta[0], first.vartheta[0]),
    ):  # MAPResult or a (theta [d], vartheta [R,d]) pair
        warm = map_estimate(more, init=init)
        assert warm.all_converged and warm.iters < cold.iters
        torch.testing.assert_close(warm.theta, cold.theta, atol=1e-9, rtol=0)
        torch.testing.assert_close(warm.vartheta, cold.vartheta, atol=1e-9, rtol=0)
    lap_cold = laplace(more)
    for init in (lap0, first):
        lap_warm = laplace(more, init=init)
        assert bool(lap_warm.converged) and lap_warm.iters < lap_cold.iters
        torch.testing.assert_close(lap_warm.mean, lap_cold.mean, atol=1e-9, rtol=0)
        torch.testing.assert_close(lap_warm.cov, lap_cold.cov, atol=1e-9, rtol=1e-7)
    # batched: a converged start needs no step
    batched = BTLinearProblem.stack([prob, make_problem(seed=7, N=50)])
    res = map_estimate(batched)
    again = map_estimate(batched, init=res)
    assert again.iters == 0 and again.all_converged and res.iters > 0


def test_newton_cg_checks_its_low_precision_steps():
    """With very inexact low-precision products (bfloat16) the float64 check corrects the tight steps."""
    prob = _big_problem(d=8, N=200)
    pert = sample_perturbation(prob, 6, p_offline=0.5, generator=torch.Generator().manual_seed(2))
    ref = newton_solve(prob, pert, solver="newton", tol=1e-9)
    cg = _NewtonCG(_Terms(prob.batch_view()), pert)
    cg.low, cg.dr_low = torch.bfloat16, cg.rows.dr.to(torch.bfloat16)  # ~3 significant digits
    calls = []
    pcg = cg.pcg

    def counted(*args, low=False):
        calls.append(low)
        return pcg(*args, low=low)

    cg.pcg = counted
    start = (torch.cat([ref.theta, ref.vartheta.flatten(-2)], -1) + 0.3).mT.contiguous()  # near the optimum
    # one tight step meets its forcing condition in float64 although bfloat16 alone cannot
    g, h = cg.grad(cg.data, cg.loss(start, cg.data)[1])
    gn = g.norm(dim=1)
    live = torch.ones_like(gn, dtype=torch.bool)
    prec = cg.preconditioner(h.mean(-1))
    step = cg.newton_step(g, h, live, 1e-6 * gn, gn, prec)
    assert bool(((cg.hvp(step, h) + g).norm(dim=1) <= 1e-6 * gn).all())
    rough = pcg(g, h, live, 1e-6 * gn, prec, low=True)
    assert bool(((cg.hvp(rough, h) + g).norm(dim=1) > 1e-6 * gn).any())  # bfloat16 alone misses it
    z, loss, gn, it = cg.solve(start, 1e-9, 50)
    assert bool((gn <= 1e-9).all()) and False in calls  # float64 corrections happened
    d = prob.dim
    torch.testing.assert_close(z.mT[..., :d], ref.theta, atol=1e-8, rtol=0)
    torch.testing.assert_close(loss, ref.loss, atol=1e-9, rtol=1e-12)


def _arm_problem(seed=0, d=4, K=6, N=120, T=10, R=2):
    """Comparisons between K arms: pairs repeat, in both orientations (what the grouping of rows merges)."""
    g = torch.Generator().manual_seed(seed)
    arms = torch.randn(K, d, generator=g, dtype=DT)
    i0 = torch.randint(0, K, (N,), generator=g)
    i1 = (i0 + torch.randint(1, K, (N,), generator=g)) % K  # never the same arm
    rater = torch.randint(0, R, (N,), generator=g)
    theta = torch.randn(d, generator=g, dtype=DT)
    y = (torch.rand(N, generator=g, dtype=DT) < torch.sigmoid(3 * (arms[i1] - arms[i0]) @ theta)).to(DT)
    X = arms[torch.randint(0, K, (T,), generator=g)]
    r = X @ theta + 0.5 * torch.randn(T, generator=g, dtype=DT)
    online = torch.rand(N, generator=g) < 0.3
    prob = BTLinearProblem.from_data(
        torch.zeros(d, dtype=DT), torch.eye(d, dtype=DT), (4.0, 2.0)[:R], (30.0, 3.0)[:R], 0.5,
        x0=arms[i0], x1=arms[i1], y=y, rater=rater, pref_online=online, x=X, r=r,
    )  # fmt: skip
    pairs = {
        (int(a), min(int(b), int(c)), max(int(b), int(c))) for a, b, c in zip(rater, i0, i1, strict=True)
    }
    return prob, len(pairs)


def _row_loss(prob, pert, theta, vartheta):
    """Eq. `final_surrogate_perturbed_loss` row by row (no grouping): theta [M,d], vartheta [M,R,d]."""
    z = prob.beta[prob.rater] * ((prob.x1 - prob.x0) * vartheta[:, prob.rater]).sum(-1)  # [M,N]
    w = pert.pref_weight[0]
    l2 = (w * (torch.log1p(torch.exp(-z.abs())) + z.clamp_min(0) - prob.y * z)).sum(-1)
    l1 = 0.5 / prob.noise_sd**2 * ((pert.reward_target[0] - theta @ prob.x.T) ** 2).sum(-1)
    dv = theta.unsqueeze(1) - vartheta + pert.vartheta_shift[0]
    l3 = 0.5 * (prob.lam**2 * (dv**2).sum(-1)).sum(-1)
    da = theta - pert.theta_anchor[0]
    return l1 + l2 + l3 + 0.5 * (da @ torch.linalg.inv(prob.cov0) * da).sum(-1)


def test_grouped_rows_and_exact_steps_reach_the_row_by_row_optimum():
    """Rows with equal or opposite Δ are merged (softplus(−z) + Y z = softplus(z) − (1 − Y) z) and the
    batched exact Newton steps solve the merged problem: at the result, the gradient of the loss written
    row by row (autograd, no merging) vanishes; a wrong target for flipped rows or a wrong Hessian fails."""
    prob, n_pairs = _arm_problem()
    rows = _Terms(prob.batch_view()).rows
    assert int(rows.valid.sum()) == n_pairs < prob.y.shape[0]  # (rater, unordered pair) groups
    M = 24
    pert = sample_perturbation(
        prob, M, p_offline=0.5, p_online=0.75, generator=torch.Generator().manual_seed(1)
    )
    res = newton_solve(prob, pert, tol=1e-10)  # "auto": d = 4, exact steps in the columns layout
    assert res.all_converged and res.iters <= 12  # Newton's quadratic convergence
    th = res.theta[0].clone().requires_grad_(True)
    vt = res.vartheta[0].clone().requires_grad_(True)
    loss = _row_loss(prob, pert, th, vt)
    gth, gvt = torch.autograd.grad(loss.sum(), (th, vt))
    grad = torch.cat([gth, gvt.flatten(1)], -1).norm(dim=-1)
    assert float(grad.max()) < 1e-8
    torch.testing.assert_close(res.loss[0], loss.detach(), rtol=1e-12, atol=1e-10)
    # the same optimum by preconditioned CG and by the dense direct solver
    for solver in ("newton-cg", "newton"):
        other = newton_solve(prob, pert, tol=1e-10, solver=solver)
        torch.testing.assert_close(other.theta, res.theta, atol=1e-8, rtol=0)


def test_exact_step_equals_dense_newton_step():
    """:meth:`_NewtonCG.exact_step` (one GEMM for the data blocks, ϑ_i eliminated) is −H⁻¹g of the dense H."""
    prob, _ = _arm_problem(seed=2, d=3)
    M = 5
    pert = sample_perturbation(prob, M, p_offline=0.5, generator=torch.Generator().manual_seed(3))
    terms = _Terms(prob.batch_view())
    cg = _NewtonCG(terms, pert, direct=True)
    R, d = prob.num_raters, prob.dim
    z = torch.randn(1, (R + 1) * d, M, generator=torch.Generator().manual_seed(4), dtype=DT)
    g, h = cg.grad(cg.data, cg.loss(z, cg.data)[1])
    live = torch.ones(1, M, dtype=torch.bool)
    live[0, 2] = False
    step = cg.exact_step(g, h, live)
    _, H = terms.grad_hess(z.mT[..., :d], z.mT[..., d:].reshape(1, M, R, d), pert)
    dense = -torch.linalg.solve(H, g.mT.unsqueeze(-1)).squeeze(-1).mT
    dense[..., 2] = 0.0  # columns out of play do not move
    torch.testing.assert_close(step, dense, rtol=1e-9, atol=1e-11)

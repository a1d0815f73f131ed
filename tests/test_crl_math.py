"""Known-answer tests of the constrained-RL core: CG, Fisher products, advantages, e-COP/CPO/PCPO maths."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from bayescrl.constrained.core.advantages import average_gae, discounted_gae, finite_horizon_advantages
from bayescrl.constrained.core.networks import EnsembleMLP, GaussianPolicy
from bayescrl.constrained.core.normalize import RunningMeanStd
from bayescrl.constrained.core.optim import (
    backtracking_line_search,
    conjugate_gradient,
    fisher_vector_product,
    flat_params,
    line_search,
    set_flat_params,
)
from bayescrl.constrained.core.ppo import clipped_surrogate
from bayescrl.constrained.cpo import cpo_direction
from bayescrl.constrained.ecop import ECOP, ecop_penalty
from bayescrl.utils.errors import ConfigError


def test_conjugate_gradient_matches_direct_solve():
    g = torch.Generator().manual_seed(0)
    M = torch.randn(12, 12, generator=g, dtype=torch.float64)
    A = M @ M.T + 0.5 * torch.eye(12, dtype=torch.float64)
    b = torch.randn(12, generator=g, dtype=torch.float64)
    x = conjugate_gradient(lambda v: A @ v, b, iters=50)
    torch.testing.assert_close(x, torch.linalg.solve(A, b), rtol=1e-6, atol=1e-8)
    # a few iterations give a worse answer -- the test can fail
    assert (conjugate_gradient(lambda v: A @ v, b, iters=2) - torch.linalg.solve(A, b)).norm() > 1e-3


def test_one_cg_and_line_search_serve_core_and_acpo():
    """The ACPO maths and the core share one CG / line search; CG solves k right-hand sides at once
    (each column as its own CG) and the module-level search is the pure one on parameters."""
    from bayescrl.constrained import acpo_math, acpo_tabular

    assert acpo_math.conjugate_gradient is conjugate_gradient and acpo_math.line_search is line_search
    assert acpo_tabular.conjugate_gradient is conjugate_gradient and acpo_tabular.line_search is line_search
    g = torch.Generator().manual_seed(1)
    M = torch.randn(9, 9, generator=g, dtype=torch.float64)
    A = M @ M.T + 0.5 * torch.eye(9, dtype=torch.float64)
    B = torch.randn(9, 3, generator=g, dtype=torch.float64)
    X = conjugate_gradient(lambda v: A @ v, B, iters=40)
    torch.testing.assert_close(X, torch.linalg.solve(A, B), rtol=1e-6, atol=1e-8)
    for j in range(3):  # batched columns = separate solves (to round-off)
        torch.testing.assert_close(X[:, j], conjugate_gradient(lambda v: A @ v, B[:, j], iters=40))
    with pytest.raises(ConfigError):
        conjugate_gradient(lambda v: A @ v, B, iters=0)
    # backtracking on a module = the pure search: the first accepted candidate 0.5^j step, j smallest
    lin = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        lin.weight.zero_()
    step = torch.tensor([4.0, 0.0])
    ok, j = backtracking_line_search(lin, step, lambda: float(lin.weight.detach().norm()) < 1.5, 10, 0.5)
    assert ok and j == 2 and lin.weight.flatten().tolist() == [1.0, 0.0]
    cand, jj = line_search(step, lambda x: float(x.norm()) < 1.5, coef=0.5, max_backtracks=10)
    assert jj == 2 and cand.tolist() == [1.0, 0.0]
    ok, j = backtracking_line_search(lin, step, lambda: False, 4, 0.5)  # fails: parameters restored
    assert not ok and j == 4 and lin.weight.flatten().tolist() == [1.0, 0.0]


def test_fisher_vector_product_matches_kl_hessian():
    torch.manual_seed(0)
    pol = GaussianPolicy(3, 2, hidden=(4,)).double()
    obs = torch.randn(7, 3, dtype=torch.float64)
    theta0 = flat_params(pol).clone()
    with torch.no_grad():
        old = pol.distribution(obs)
        old = torch.distributions.Normal(old.loc.clone(), old.scale.clone())

    def kl_of(theta):
        set_flat_params(pol, theta)
        return pol.kl(old, pol.distribution(obs)).mean()

    # explicit Hessian by finite differences of the autograd gradient
    n = theta0.numel()
    H = torch.zeros(n, n, dtype=torch.float64)
    eps = 1e-5
    for i in range(n):
        e = torch.zeros(n, dtype=torch.float64)
        e[i] = eps
        grads = []
        for sgn in (1, -1):
            t = (theta0 + sgn * e).requires_grad_(False)
            set_flat_params(pol, t)
            kl = pol.kl(old, pol.distribution(obs)).mean()
            grads.append(
                torch.cat([gg.reshape(-1) for gg in torch.autograd.grad(kl, list(pol.parameters()))])
            )
        H[:, i] = (grads[0] - grads[1]) / (2 * eps)
    set_flat_params(pol, theta0)
    v = torch.randn(n, dtype=torch.float64)
    fvp = fisher_vector_product(pol, obs, damping=0.1)
    torch.testing.assert_close(fvp(v), H @ v + 0.1 * v, rtol=1e-4, atol=1e-6)
    assert float(kl_of(theta0).detach()) == pytest.approx(0.0, abs=1e-12)


def test_discounted_gae_by_hand():
    # one env, 4 steps, episode ends (terminated) at t=1, truncated at t=3 with V(final)=5
    r = torch.tensor([[1.0], [2.0], [3.0], [4.0]]).reshape(4, 1, 1)
    v = torch.tensor([0.5, 0.4, 0.3, 0.2]).reshape(4, 1, 1)
    nv = torch.tensor([0.4, 9.0, 0.2, 5.0]).reshape(4, 1, 1)
    term = torch.tensor([0, 1, 0, 0]).reshape(4, 1).bool()
    end = torch.tensor([0, 1, 0, 1]).reshape(4, 1).bool()
    g, lam = 0.9, 0.8
    adv, ret = discounted_gae(r, v, nv, term, end, g, lam)
    d0 = 1 + g * 0.4 - 0.5
    d1 = 2 - 0.4  # terminal: no bootstrap
    d2 = 3 + g * 0.2 - 0.3
    d3 = 4 + g * 5.0 - 0.2  # truncated: bootstrap from V(final_obs)
    expect = [d0 + g * lam * d1, d1, d2 + g * lam * d3, d3]
    torch.testing.assert_close(adv.reshape(-1), torch.tensor(expect))
    torch.testing.assert_close(ret, adv + v)


def test_average_gae_matches_eq_avg_gae():
    torch.manual_seed(1)
    T = 6
    r = torch.rand(T, 1, 2, dtype=torch.float64)
    v = torch.rand(T + 1, 1, 2, dtype=torch.float64)
    zeros = torch.zeros(T, 1, dtype=torch.bool)
    lam = 0.7
    adv, ret, j = average_gae(r, v[:-1], v[1:], zeros, zeros, lam)
    j_hat = r.mean(0).reshape(-1)
    torch.testing.assert_close(j, j_hat)
    for t in range(T):  # A_t = sum_{t'>=t} lam^{t'-t} (r_t' - J + V(s_t'+1) - V(s_t'))
        expect = sum(lam ** (k - t) * (r[k, 0] - j_hat + v[k + 1, 0] - v[k, 0]) for k in range(t, T))
        torch.testing.assert_close(adv[t, 0], expect)
    torch.testing.assert_close(ret, adv + v[:-1])


def test_finite_horizon_lambda1_is_reward_to_go_minus_value():
    H = 5
    r = torch.arange(1.0, H + 1).reshape(H, 1, 1)
    v = torch.full((H, 1, 1), 0.25)
    nv = torch.full((H, 1, 1), 100.0)  # must be ignored at h = H
    at_h = torch.tensor([0, 0, 0, 0, 1]).reshape(H, 1).bool()
    zeros = torch.zeros(H, 1, dtype=torch.bool)
    adv, _ = finite_horizon_advantages(r, v, torch.cat([v[1:], nv[-1:]]), at_h, zeros, at_h, lam=1.0)
    rtg = torch.flip(torch.cumsum(torch.flip(r.reshape(-1), [0]), 0), [0])
    torch.testing.assert_close(adv.reshape(-1), rtg - 0.25)


def test_running_mean_std_matches_numpy():
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, size=(500, 3))
    rms = RunningMeanStd((3,), clip=None)
    for chunk in np.array_split(data, 7):
        rms.update(chunk)
    np.testing.assert_allclose(rms.mean, data.mean(0), rtol=1e-10)
    np.testing.assert_allclose(rms.var, data.var(0), rtol=1e-10)
    assert rms.count == 500


def test_ensemble_critics_are_independent():
    torch.manual_seed(0)
    ens = EnsembleMLP(3, 4, (8, 8))
    x = torch.randn(5, 4)
    out = ens(x)
    assert out.shape == (5, 3)
    out[:, 1].sum().backward()
    assert ens.weights[0].grad[0].abs().sum() == 0 and ens.weights[0].grad[2].abs().sum() == 0
    assert ens.weights[0].grad[1].abs().sum() > 0


def test_ecop_penalty_closed_form_and_gradient():
    lam, beta = torch.tensor([2.0, 0.0]), 5.0
    psi = torch.tensor([0.3, -1.0], requires_grad=True)
    val = ecop_penalty(psi, lam, beta)
    # i=0: 2*0.3 + 2.5*((0.3+0.4)^2 - 0.16); i=1: relu terms all 0
    assert float(val.detach()) == pytest.approx(2 * 0.3 + 2.5 * (0.7**2 - 0.16))
    val.backward()
    # d/dpsi_0 = lam + beta (psi + lam/beta) = 2 + 5*0.7
    torch.testing.assert_close(psi.grad, torch.tensor([2 + 5 * 0.7, 0.0]))
    # damping is active before the constraint is violated when lambda > 0: psi in (-lam/beta, 0)
    psi2 = torch.tensor([-0.2, -1.0], requires_grad=True)
    ecop_penalty(psi2, lam, beta).backward()
    assert psi2.grad[0] == pytest.approx(5 * (-0.2 + 0.4))


def test_ecop_cost_surrogate_scales_with_costs():
    """``L_C + (J_C - d) / H`` must stay in cost units (per_step scale): costs and limit times k give a
    penalty argument times k (Theorem `th:relu_solution_same`); a batch without cost must not blow the
    critic's noise up to unit scale. Failed when cost advantages were divided by their sd."""
    g = torch.Generator().manual_seed(0)
    adv = torch.randn(400, 3, generator=g) * torch.tensor([1.0, 7.0, 0.01]) + 2.0
    ratio = torch.exp(0.1 * torch.randn(400, generator=g))
    gap = torch.tensor([0.05, -0.05])  # (J_C - d) / H per constraint

    def psi(k):
        a = ECOP.cost_advantages(SimpleNamespace(advantages=adv * torch.tensor([1.0, k, k])))
        return clipped_surrogate(ratio, a, 0.2, "max").mean(0) + k * gap, a

    (p1, a1), (p3, a3) = psi(1.0), psi(3.0)
    torch.testing.assert_close(p3, 3 * p1)
    torch.testing.assert_close(a3, 3 * a1)
    torch.testing.assert_close(a1.mean(0), torch.zeros(2), atol=1e-5, rtol=0)
    assert float(a1[:, 0].std()) == pytest.approx(7.0, rel=0.1)
    assert float(a1[:, 1].std()) < 0.02  # critic noise of a cost-free batch stays small


def _qcqp_reference(g, b, H, c, delta):
    """max g.x s.t. b.x + c <= 0, x H x / 2 <= delta (SLSQP)."""
    cons = [
        {"type": "ineq", "fun": lambda x: -(b @ x + c)},
        {"type": "ineq", "fun": lambda x: delta - 0.5 * x @ H @ x},
    ]
    best = None
    for x0 in (np.zeros_like(g), -0.01 * b, 0.01 * g):
        res = minimize(
            lambda x: -(g @ x), x0, constraints=cons, method="SLSQP", options={"ftol": 1e-12, "maxiter": 500}
        )
        if res.success and (best is None or res.fun < best.fun):
            best = res
    return best.x


@pytest.mark.parametrize("c", [-0.05, -0.001, 0.02])
def test_cpo_dual_matches_qcqp(c):
    rng = np.random.default_rng(3)
    n = 4
    M = rng.normal(size=(n, n))
    H = M @ M.T + np.eye(n)
    g, b = rng.normal(size=n), rng.normal(size=n)
    delta = 0.01
    Hi = np.linalg.inv(H)
    q, r, s = g @ Hi @ g, g @ Hi @ b, b @ Hi @ b
    lam, nu, case = cpo_direction(q, r, s, c, delta)
    x = -np.sqrt(2 * delta / s) * Hi @ b if case == 0 else (Hi @ g - nu * Hi @ b) / lam
    ref = _qcqp_reference(g, b, H, c, delta)
    assert case != 0
    np.testing.assert_allclose(x, ref, rtol=2e-3, atol=2e-5)


def test_cpo_infeasible_case_recovers():
    lam, nu, case = cpo_direction(q=1.0, r=0.1, s=0.01, c=5.0, delta=0.01)
    assert case == 0 and nu == pytest.approx(np.sqrt(2 * 0.01 / 0.01))


@pytest.mark.parametrize("kind", ["gauss", "cat"])
def test_numpy_rollout_actor_matches_torch_log_prob(kind):
    from bayescrl.constrained.core.networks import CategoricalPolicy

    torch.manual_seed(0)
    pol = GaussianPolicy(5, 3, (16, 16)) if kind == "gauss" else CategoricalPolicy(5, 4, (16, 16))
    x = np.random.default_rng(0).normal(size=(64, 5)).astype(np.float32)
    a, logp = pol.numpy_actor().act(x, np.random.default_rng(1))
    ref = pol.log_prob(torch.from_numpy(x), torch.from_numpy(a)).detach().numpy()
    np.testing.assert_allclose(logp, ref, rtol=1e-4, atol=1e-4)

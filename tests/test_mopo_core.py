"""Known answers for bayescrl.mopo.objective: closed forms vs scipy, finite differences, duality."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize, minimize_scalar

from bayescrl.mopo import objective as O

DT = torch.float64


def _instance(seed: int, n: int = 6, c: int = 2):
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(n, generator=g, dtype=DT)
    q = torch.rand(n, c, generator=g, dtype=DT)
    w = torch.softmax(torch.randn(n, generator=g, dtype=DT), 0)
    lam = torch.rand(c, generator=g, dtype=DT) * 2
    return p, q, w, lam


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("tau", [0.3, 1.0])
def test_rho_star_literal_matches_scipy_maximiser(seed, tau):
    """Prop. `main_dual`: rho* = exp((p + lam.q)/tau - 1) maximises the Lagrangian over rho > 0."""
    p, q, w, lam = _instance(seed)
    b = torch.zeros(2, dtype=DT)

    def neg_lagr(log_rho):
        rho = torch.as_tensor(np.exp(log_rho))
        f, g = O.primal_values(rho, p, q, tau, w)
        return -float(f + (lam * (g - b)).sum())

    res = minimize(neg_lagr, np.zeros(6), method="BFGS", options={"gtol": 1e-10})
    rho = O.rho_star(p, q, lam, tau, w, normalize=False)
    np.testing.assert_allclose(np.exp(res.x), rho.numpy(), rtol=1e-4)
    # the dual value is the Lagrangian at its maximiser
    assert float(O.dual_value(lam, p, q, b, tau, w, normalize=False)) == pytest.approx(-res.fun, rel=1e-8)


@pytest.mark.parametrize("seed", [0, 3])
def test_rho_star_normalised_matches_constrained_scipy_maximiser(seed):
    """Normalised variant: maximiser of the Lagrangian subject to E_ref[rho] = 1 (SLSQP)."""
    p, q, w, lam = _instance(seed)
    tau = 0.5
    wn = w.numpy()

    def neg_lagr(rho):
        f, g = O.primal_values(torch.as_tensor(rho), p, q, tau, w)
        return -float(f + (lam * g).sum())

    cons = [{"type": "eq", "fun": lambda r: float(wn @ r) - 1.0}]
    res = minimize(
        neg_lagr,
        np.ones(6),
        method="SLSQP",
        bounds=[(1e-9, None)] * 6,
        constraints=cons,
        options={"ftol": 1e-14, "maxiter": 500},
    )
    rho = O.rho_star(p, q, lam, tau, w)
    np.testing.assert_allclose(res.x, rho.numpy(), rtol=1e-4, atol=1e-6)
    assert float((w * rho).sum()) == pytest.approx(1.0, abs=1e-12)
    assert float(O.dual_value(lam, p, q, torch.zeros(2, dtype=DT), tau, w)) == pytest.approx(
        -res.fun, rel=1e-7
    )


@pytest.mark.parametrize("normalize", [True, False])
def test_dual_gradient_matches_finite_differences_batched(normalize):
    """grad D(lam) = G(rho*_lam) - b, for a batch of multipliers at once."""
    p, q, w, _ = _instance(5, n=7, c=3)
    lam = torch.rand(4, 3, dtype=DT) * 3  # 4 multipliers in one call
    b = torch.tensor([0.3, 0.5, 0.2], dtype=DT)
    tau = 0.4
    grad = O.dual_gradient(lam, p, q, b, tau, w, normalize)
    h = 1e-6
    for k in range(3):
        e = torch.zeros(3, dtype=DT)
        e[k] = h
        fd = (
            O.dual_value(lam + e, p, q, b, tau, w, normalize)
            - O.dual_value(lam - e, p, q, b, tau, w, normalize)
        ) / (2 * h)
        np.testing.assert_allclose(grad[:, k].numpy(), fd.numpy(), rtol=1e-6, atol=1e-8)
    # and a wrong sign would fail: D is convex, so the gradient is monotone
    lam2 = lam + 0.5
    assert float(((O.dual_gradient(lam2, p, q, b, tau, w, normalize) - grad) * 0.5).sum()) > 0


def test_lower_bound_is_strong_dual_of_lbop():
    """max_chi LB(chi) = min_{KL(pi||ref) <= eps} E_pi[x] (Problem `lbop`, Prop. `lowerbound_dual`)."""
    g = torch.Generator().manual_seed(7)
    x = torch.rand(5, 1, generator=g, dtype=DT)
    w = torch.softmax(torch.randn(5, generator=g, dtype=DT), 0)
    eps = 0.05
    chi = O.chi_star(x, eps, w)
    lb = float(O.lower_bound(x, chi, eps, w)[0])
    # chi* vs a scalar maximiser
    res = minimize_scalar(
        lambda lc: -float(O.lower_bound(x, torch.tensor([np.exp(lc)]), eps, w)[0]),
        bounds=(-8, 8),
        method="bounded",
        options={"xatol": 1e-10},
    )
    assert float(chi[0]) == pytest.approx(np.exp(res.x), rel=1e-3)
    # primal: min over the KL ball
    wn, xn = w.numpy(), x[:, 0].numpy()
    cons = [
        {"type": "eq", "fun": lambda z: np.exp(z).sum() - 1.0},
        {"type": "ineq", "fun": lambda z: eps - float(np.exp(z) @ (z - np.log(wn)))},
    ]
    prim = minimize(
        lambda z: float(np.exp(z) @ xn),
        np.log(wn),
        method="SLSQP",
        constraints=cons,
        options={"ftol": 1e-14, "maxiter": 500},
    )
    assert lb == pytest.approx(prim.fun, abs=1e-6)
    g_val = float((w * x[:, 0]).sum())
    assert lb < g_val  # a lower bound of G
    inf_lb = O.lower_bound(x, torch.tensor([float("inf")], dtype=DT), 0.0, w)
    assert float(inf_lb[0]) == pytest.approx(g_val)


def test_chi_loss_gradient_matches_finite_differences():
    x = torch.rand(3, 9, 2, dtype=DT)
    chi = torch.tensor([[0.3, 1.2]], dtype=DT).expand(3, 2).clone().requires_grad_(True)
    O.chi_loss(x, chi, 0.1).sum().backward()
    h = 1e-6
    for k in range(2):
        e = torch.zeros(2, dtype=DT)
        e[k] = h
        fd = (O.chi_loss(x, chi.detach() + e, 0.1) - O.chi_loss(x, chi.detach() - e, 0.1)) / (2 * h)
        np.testing.assert_allclose(chi.grad[:, k].numpy(), fd.numpy(), rtol=1e-6)


def test_log_barrier_continuity_derivative_and_limit():
    sigma = 0.3
    s = sigma**2
    z = torch.linspace(-2, 1, 301, dtype=DT, requires_grad=True)
    val = O.log_barrier(z, sigma)
    val.sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), (sigma / torch.clamp(-z.detach(), min=s)).numpy(), rtol=1e-10)
    left = O.log_barrier(torch.tensor([-s - 1e-9], dtype=DT), sigma)
    right = O.log_barrier(torch.tensor([-s + 1e-9], dtype=DT), sigma)
    assert float(left) == pytest.approx(float(right), abs=1e-6)
    # converges to the characteristic function chi{z <= 0} as sigma -> 0
    zs = torch.tensor([-0.5, 0.05], dtype=DT)
    small = O.log_barrier(zs, 1e-3)
    assert abs(float(small[0])) < 1e-2 and float(small[1]) > 40
    lam = O.barrier_multipliers(torch.tensor([0.5, 0.9]), torch.tensor([0.5, 0.5]), torch.tensor([0.1, 0.1]))
    np.testing.assert_allclose(lam.numpy(), [0.1 / 0.01, 0.1 / 0.4], rtol=1e-6)


def test_symmetric_augmentation_and_safety_columns():
    y = torch.tensor([0, 1])
    yp = torch.tensor([2, 0])
    ind = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    ya, ypa, ia = O.augment_symmetric(y, yp, ind)
    assert ya.tolist() == [0, 1, 2, 0] and ypa.tolist() == [2, 0, 0, 1]
    assert ia.tolist() == [[1, 0], [0, 0], [0, 1], [1, 1]]
    p, q = O.safety_columns(torch.tensor([1.0]), torch.tensor([0.0]), torch.tensor([1.0]))
    assert p.tolist() == [1.0, 0.0] and q[:, 0].tolist() == [0.0, 1.0]  # safety labels swap, not flip
    pp, qq = O.split_objectives(torch.tensor([[1.0, 0.0, 1.0]]), primary=1)
    assert pp.tolist() == [0.0] and qq.tolist() == [[1.0, 1.0]]


def test_bc_weights_recover_optimal_policy_and_lagged_reweighting():
    """Eq. `policy-extraction`: the weighted-BC optimum over a softmax is pi_ref * rho* (and with a lag)."""
    p, q, w, lam = _instance(11, n=4)
    tau = 0.5
    lag = torch.softmax(torch.randn(4, dtype=DT), 0)  # lagged reference
    log_rho = O.log_rho_star(p, q, lam, tau, lag)  # rho relative to the lag
    wts = O.bc_weights(log_rho, torch.log(lag / w), w)
    res = minimize(
        lambda z: float(O.bc_loss(torch.log_softmax(torch.as_tensor(z), 0), wts)),
        np.zeros(4),
        method="BFGS",
        options={"gtol": 1e-12},
    )
    target = lag * torch.exp(log_rho)
    np.testing.assert_allclose(torch.softmax(torch.as_tensor(res.x), 0).numpy(), target.numpy(), atol=1e-5)
    # adaptive thresholds: b = beta * E_{pi_prev}[q]
    b = O.adaptive_threshold(torch.tensor([0.9, 0.5], dtype=DT), lag / w, q, w)
    np.testing.assert_allclose(b.numpy(), (torch.tensor([0.9, 0.5], dtype=DT) * (lag @ q)).numpy())


def test_pairwise_extraction_recovers_optimal_policy_over_all_pairs():
    """The pairwise loss over every pair of 4 actions is minimised by pi_psi = pi_lag * rho* (a softmax)."""
    p, q, w, lam = _instance(12, n=4)
    lag = torch.softmax(torch.randn(4, dtype=DT), 0)
    log_rho = O.log_rho_star(p, q, lam, 0.5, lag)
    i, j = torch.triu_indices(4, 4, 1)  # 6 records (a, b) = (i, j)
    rows = torch.cat([i, j])

    def loss(z):
        logp = torch.log_softmax(torch.as_tensor(z), 0)[rows]
        return float(O.pairwise_extraction_loss(logp, torch.log(lag)[rows], log_rho[rows]))

    res = minimize(loss, np.zeros(4), method="BFGS", options={"gtol": 1e-12})
    target = lag * torch.exp(log_rho)
    np.testing.assert_allclose(torch.softmax(torch.as_tensor(res.x), 0).numpy(), target.numpy(), atol=1e-5)


def test_pairwise_extraction_hand_values_and_contrastive_gradient():
    """z = (la - ba) - (lb - bb); loss = BCE(z, sigmoid(rho_a - rho_b)); DPO (beta 1) for a hard target."""
    logp = torch.tensor([-3.0, -5.0], dtype=DT, requires_grad=True)  # rows [a ; b], one record
    base = torch.tensor([-4.0, -4.0], dtype=DT)
    log_rho = torch.tensor([1.0, 0.0], dtype=DT)
    t, z = torch.sigmoid(torch.tensor(1.0, dtype=DT)), torch.tensor(2.0, dtype=DT)
    want = -(t * torch.log(torch.sigmoid(z)) + (1 - t) * torch.log(torch.sigmoid(-z)))
    out = O.pairwise_extraction_loss(logp, base, log_rho)
    assert out.item() == pytest.approx(want.item(), rel=1e-12)
    out.backward()
    s = float(torch.sigmoid(z) - t)  # d loss / dz
    np.testing.assert_allclose(logp.grad.numpy(), [s, -s])
    # at the target (z = log rho_a - log rho_b) the gradient vanishes; below it, the loser is pushed down
    lp = torch.tensor([-4.0, -4.0], dtype=DT, requires_grad=True)
    O.pairwise_extraction_loss(lp, base, log_rho).backward()
    assert lp.grad[0] < 0 < lp.grad[1]  # raise a, lower b (weighted BC would raise both)
    assert O.bc_weights(log_rho.unsqueeze(0)).min() > 0
    hard = O.pairwise_extraction_loss(logp.detach(), base, torch.tensor([60.0, 0.0], dtype=DT))
    assert float(hard) == pytest.approx(float(-torch.nn.functional.logsigmoid(z)), rel=1e-9)
    with pytest.raises(ValueError, match="rows"):
        O.pairwise_extraction_loss(torch.zeros(3), torch.zeros(3), torch.zeros(3))


def test_normalized_ratio_from_log_ratios():
    lr = torch.tensor([[0.0, 1.0, -1.0]], dtype=DT)
    r = O.normalized_ratio(lr)
    assert float(r.mean()) == pytest.approx(1.0)
    np.testing.assert_allclose((r[0, 1] / r[0, 0]).item(), np.e)


def test_safety_extension_dual_meets_safety_threshold():
    """Eq. `safe-obj`: the constraint E_{y~pi}[q(y > 0)] >= b through the same dual; active at lam* > 0."""
    g = torch.Generator().manual_seed(3)
    n = 40
    pref = (torch.rand(n, generator=g) < 0.5).double()
    safe_y = (torch.rand(n, generator=g) < 0.4).double()
    safe_yp = (torch.rand(n, generator=g) < 0.4).double()
    # make the primary preference favour unsafe responses, so the constraint binds
    pref = torch.where(safe_y > safe_yp, torch.zeros_like(pref), torch.where(safe_y < safe_yp, 1.0, pref))
    p, q = O.safety_columns(pref, safe_y, safe_yp)
    tau, b = 0.2, torch.tensor([0.6], dtype=DT)
    res = minimize_scalar(
        lambda l: float(O.dual_value(torch.tensor([l], dtype=DT), p, q, b, tau)),
        bounds=(0, 50),
        method="bounded",
        options={"xatol": 1e-10},
    )
    lam = torch.tensor([res.x], dtype=DT)
    rho = O.rho_star(p, q, lam, tau)
    safe_rate = float((rho * q[:, 0]).mean())  # E_{pi}[q(y > 0)] over the augmented atoms
    assert res.x > 0.1
    assert safe_rate == pytest.approx(0.6, abs=1e-5)
    assert float((rho * q[:, 0]).mean()) > float(q[:, 0].mean())  # safer than the reference


def test_batched_weights_broadcast_per_run():
    """Per-run reference weights [R, N] with C != R constraints: each run uses its own weights."""
    g = torch.Generator().manual_seed(4)
    w = torch.softmax(torch.randn(3, 5, generator=g, dtype=DT), -1)
    rho, p = torch.rand(3, 5, generator=g, dtype=DT), torch.rand(3, 5, generator=g, dtype=DT)
    q = torch.rand(3, 5, 2, generator=g, dtype=DT)
    _, gv = O.primal_values(rho, p, q, 0.5, w)
    for r in range(3):
        np.testing.assert_allclose(gv[r].numpy(), (w[r, :, None] * rho[r, :, None] * q[r]).sum(0).numpy())
    lam = torch.rand(3, 2, generator=g, dtype=DT)
    grad = O.dual_gradient(lam, p, q, torch.zeros(2, dtype=DT), 0.5, w)
    for r in range(3):
        np.testing.assert_allclose(
            grad[r].numpy(), O.dual_gradient(lam[r], p[r], q[r], torch.zeros(2, dtype=DT), 0.5, w[r]).numpy()
        )

"""Tabular MOPO: exact solver (KKT, scipy), stochastic `mopo` and mopo-lb vs exact, data errors, CLI."""

import json

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from bayescrl.mopo.tabular import (
    Adam,
    TabularProblem,
    parse_tabular,
    run_mopo,
    run_mopo_lb,
    solve_exact,
    total_variation,
)
from bayescrl.utils import ConfigError, DataError

D2 = [("y1", "y2", [1, 1]), ("y1", "y3", [1, 0]), ("y2", "y3", [0, 0])]


def _cfg(recs, **kw):
    return {
        "actions": ["y1", "y2", "y3"],
        "data": [{"y": a, "y_prime": b, "prefs": p} for a, b, p in recs],
        **kw,
    }


def _random_problem(seed: int, n_act: int = 5, k: int = 3, n: int = 40) -> TabularProblem:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(n_act, (n,), generator=g)
    yp = (y + torch.randint(1, n_act, (n,), generator=g)) % n_act
    ind = (torch.rand(n, k, generator=g) < 0.5).double()
    ref = torch.softmax(torch.randn(n_act, generator=g, dtype=torch.float64) * 0.5, 0)
    return TabularProblem([f"a{i}" for i in range(n_act)], y, yp, ind, primary=k - 1, ref=ref)


@pytest.mark.parametrize("seed", range(4))
def test_exact_solver_satisfies_kkt_and_matches_scipy_primal(seed):
    prob = _random_problem(seed)
    p_hat, q_hat = prob.action_scores()
    tau = 0.3
    # constraint 0 halfway between the unconstrained optimum's G and the best achievable G: it binds
    free = solve_exact(prob, tau, torch.zeros(2, dtype=torch.float64))
    b = free.G + 0.5 * (q_hat.max(0).values - free.G) * torch.tensor([1.0, 0.0], dtype=torch.float64)
    b[1] = free.G[1] - 0.05
    sol = solve_exact(prob, tau, b)
    # independent KKT check in numpy
    pi, lam, ref = sol.policy.numpy(), sol.lam.numpy(), prob.ref.numpy()
    ph, qh, bn = p_hat.numpy(), q_hat.numpy(), b.numpy()
    v = ph + qh @ lam - tau * np.log(pi / ref)
    assert np.ptp(v) < 1e-6  # stationarity (constant = normalisation multiplier)
    g = pi @ qh
    assert np.all(g >= bn - 1e-7) and np.all(lam >= 0)
    np.testing.assert_allclose(lam * (g - bn), 0, atol=1e-7)
    assert pi.sum() == pytest.approx(1.0)
    assert max(sol.kkt.values()) < 1e-6

    # primal problem solved directly by SLSQP over the simplex
    def neg_obj(x):
        return -(x @ ph - tau * np.sum(x * np.log(np.maximum(x, 1e-300) / ref)))

    cons = [{"type": "eq", "fun": lambda x: x.sum() - 1}] + [
        {"type": "ineq", "fun": lambda x, k=k: x @ qh[:, k] - bn[k]} for k in range(2)
    ]
    res = minimize(
        neg_obj,
        ref,
        method="SLSQP",
        bounds=[(1e-12, 1)] * 5,
        constraints=cons,
        options={"ftol": 1e-14, "maxiter": 1000},
    )
    np.testing.assert_allclose(res.x, pi, atol=2e-4)
    assert lam[0] > 1e-3 and lam[1] == 0  # one active, one inactive constraint


def test_exact_solver_rejects_infeasible_threshold():
    prob = parse_tabular(_cfg(D2, primary=1))
    with pytest.raises(ConfigError, match="Slater"):
        solve_exact(prob, 0.5, torch.tensor([1.0], dtype=torch.float64))  # G <= 1 with equality only at y1


def test_d2_exact_equal_mass_at_front_midpoint():
    prob = parse_tabular(_cfg(D2, primary=1))
    sol = solve_exact(prob, 0.1, torch.tensor([0.75], dtype=torch.float64))
    assert float(sol.lam[0]) == pytest.approx(1.0, abs=1e-4)
    assert float(sol.policy[0]) == pytest.approx(0.5, abs=1e-3) and float(sol.policy[2]) == pytest.approx(
        0.5, abs=1e-3
    )


def test_adam_is_torch_adam_with_the_kingma_ba_update_and_geometric_lr():
    """The solvers' optimiser is ``torch.optim.Adam`` fed explicit gradients: first step
    ``-lr g / (|g| + eps)`` exactly (bias-corrected moments are ``g`` and ``g^2``), then the Kingma-Ba
    recursion with ``lr_t = lr (lr_final / lr)^((t-1)/(steps-1))`` (written out here)."""
    gen = torch.Generator().manual_seed(0)
    grads = torch.randn(40, 3, 2, generator=gen, dtype=torch.float64)
    x = torch.zeros(3, 2, dtype=torch.float64)
    opt = Adam(x, 0.1, lr_final=0.01, steps=40)
    assert isinstance(opt.opt, torch.optim.Adam)
    opt.step(grads[0])
    torch.testing.assert_close(x, -0.1 * grads[0] / (grads[0].abs() + 1e-8), rtol=1e-14, atol=0)
    ref, m, v = -0.1 * grads[0] / (grads[0].abs() + 1e-8), 0.1 * grads[0], 0.001 * grads[0] ** 2
    for t in range(2, 41):
        g = grads[t - 1]
        opt.step(g)
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g**2
        lr = 0.1 * 0.1 ** ((t - 1) / 39)
        ref = ref - lr * (m / (1 - 0.9**t)) / ((v / (1 - 0.999**t)).sqrt() + 1e-8)
    torch.testing.assert_close(x, ref, rtol=1e-10, atol=1e-14)
    assert opt.opt.param_groups[0]["lr"] == pytest.approx(0.01)
    # a list of tensors (the batched networks) is one optimiser: same as separate ones
    a, b = torch.zeros(2, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
    both = Adam([a, b], 0.05, steps=5)
    sep = [torch.zeros(2, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)]
    opts = [Adam(t, 0.05, steps=5) for t in sep]
    for t in range(5):
        ga, gb = grads[t, 0, :], grads[t, :, 1]
        both.step([ga, gb])
        opts[0].step(ga)
        opts[1].step(gb)
    torch.testing.assert_close(a, sep[0], rtol=1e-14, atol=0)
    torch.testing.assert_close(b, sep[1], rtol=1e-14, atol=0)


def test_stochastic_mopo_reaches_exact_policy_within_tv():
    """Algorithm `mopo` (batch 12, Adam, fixed pi_ref and b, eps = 0) -> exact solver's policy, TV < 0.02."""
    prob = parse_tabular(_cfg(D2, primary=1))
    b = torch.tensor([0.75], dtype=torch.float64)
    ex = solve_exact(prob, 1.0, b)
    run = run_mopo(prob, 1.0, steps=3000, lr=0.05, lr_final=0.002, batch=12, b=b, runs=4, seed=1)
    tv = total_variation(run.policy, ex.policy)
    assert float(tv.max()) < 0.02, tv
    assert torch.allclose(run.lam.mean(0), ex.lam, atol=0.15)
    # a wrong multiplier gives a visibly different policy (the test can fail)
    wrong = run_mopo(prob, 1.0, steps=300, lr=0.05, b=torch.tensor([0.3], dtype=torch.float64), runs=1)
    assert float(total_variation(wrong.policy, ex.policy).max()) > 0.05


def test_stochastic_mopo_random_instance_two_constraints():
    prob = _random_problem(0, n_act=4, n=30)
    p_hat, q_hat = prob.action_scores()
    g_ref = prob.ref @ q_hat
    b = g_ref + 0.5 * (q_hat.max(0).values - g_ref) * torch.tensor([1.0, 0.2], dtype=torch.float64)
    ex = solve_exact(prob, 0.5, b)
    run = run_mopo(prob, 0.5, steps=3000, lr=0.05, lr_final=0.002, batch=None, b=b, runs=1)
    assert float(total_variation(run.policy, ex.policy).max()) < 0.02


def test_lower_bound_makes_constraint_conservative():
    """eps > 0 constrains LB(G) <= G, so the returned policy over-satisfies b compared to eps = 0."""
    prob = parse_tabular(_cfg(D2, primary=1))
    b = torch.tensor([0.7], dtype=torch.float64)
    plain = run_mopo(prob, 1.0, steps=800, lr=0.05, lr_final=0.005, batch=24, b=b, runs=2)
    robust = run_mopo(prob, 1.0, steps=800, lr=0.05, lr_final=0.005, batch=24, b=b, eps=0.1, runs=2)
    assert float(robust.G.mean()) > float(plain.G.mean()) + 0.02


def test_mopo_lb_full_batch_reaches_exact_policy():
    prob = parse_tabular(_cfg(D2, primary=1))
    b = torch.tensor([0.75], dtype=torch.float64)
    ex = solve_exact(prob, 1.0, b)
    run = run_mopo_lb(prob, 1.0, b, steps=1500, lr=0.05, lr_final=0.002, batch=None, gamma=0.995)
    assert float(total_variation(run.policy, ex.policy).max()) < 0.02
    assert float(run.lam[0, 0]) == pytest.approx(float(ex.lam[0]), rel=0.1)  # implied multiplier


def test_barrier_fixed_point_and_ascent_on_the_barrier_lagrangian_agree():
    """The two mopo-lb updates reach the same policy on D2 at a fixed sigma (the multiplier fixed point and
    ascent on L_LB), and the fixed point tends to the exact solution as sigma -> 0."""
    from bayescrl.mopo.tabular import barrier_fixed_point

    prob = parse_tabular(_cfg(D2, primary=1))
    b = torch.tensor([0.75], dtype=torch.float64)
    fixed, lam = barrier_fixed_point(prob, 1.0, b, sigma=0.1)
    ascent = run_mopo_lb(prob, 1.0, b, steps=300, lr=0.1, lr_final=0.005, batch=None, sigma0=0.1, gamma=1.0)
    assert float(total_variation(fixed, ascent.policy[0])) < 0.01
    assert float(lam[0]) == pytest.approx(float(ascent.lam[0, 0]), rel=0.05)
    ex = solve_exact(prob, 1.0, b)
    assert float(total_variation(fixed, ex.policy)) > 0.03  # sigma = 0.1 keeps the iterate strictly inside
    small, lam_s = barrier_fixed_point(prob, 1.0, b, sigma=1e-4)
    assert float(total_variation(small, ex.policy)) < 1e-3
    assert float(lam_s[0]) == pytest.approx(float(ex.lam[0]), rel=1e-2)


@pytest.mark.parametrize(
    ("records", "field", "index"),
    [
        (
            [{"y": "y1", "y_prime": "y2", "prefs": [1, 0]}, {"y": "y1", "y_prime": "y3", "prefs": [1]}],
            "data.prefs",
            1,
        ),
        (
            [{"y": "y1", "y_prime": "y2", "prefs": [1, 0]}, {"y": "y9", "y_prime": "y3", "prefs": [1, 1]}],
            "data.y",
            1,
        ),
        ([{"y": "y1", "prefs": [1, 0]}], "data.y_prime", 0),
        (
            [{"y": "y1", "y_prime": "y2", "prefs": [1, 0]}] * 2
            + [{"y": "y1", "y_prime": "y2", "prefs": [1, 2]}],
            "data.prefs",
            2,
        ),
    ],
)
def test_malformed_data_rejected_naming_record(records, field, index):
    with pytest.raises(DataError) as err:
        parse_tabular({"actions": ["y1", "y2", "y3"], "data": records})
    assert err.value.field == field and err.value.index == index
    assert f"{field}[{index}]" in str(err.value)


def test_cli_tabular_exact_and_error_exit(tmp_path):
    import yaml

    from bayescrl.cli import main

    cfg = _cfg(D2, primary=1, mode="tabular", solver="exact", tau=0.1, b=[0.75])
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    main(["mopo", str(path), "--out", str(tmp_path / "o")])
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert set(res) >= {"policy", "lambda", "G", "b"}
    assert res["policy"]["y1"] == pytest.approx(0.5, abs=1e-3) and res["lambda"][0] == pytest.approx(
        1.0, abs=1e-3
    )
    assert (tmp_path / "o" / "policy.png").exists()
    cfg["data"][1]["prefs"] = [1]
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(SystemExit) as bad:
        main(["mopo", str(path), "--out", str(tmp_path / "o2")])
    assert bad.value.code == 2


@pytest.mark.parametrize("solver", ["mopo", "mopo-lb"])
def test_a_run_does_not_depend_on_how_many_runs_share_the_call(solver):
    """Run r of a call with ``runs = 3, seed = s`` is the single run with ``seed = s + r`` (one random stream
    per run), for both stochastic solvers, mini-batches of 12, the lower-bound step and a lagged reference."""
    prob = parse_tabular(_cfg(D2, primary=1))
    b = torch.tensor([0.7], dtype=torch.float64)
    if solver == "mopo":
        kw = dict(steps=60, lr=0.05, batch=12, b=b, eps=0.1, t0=20)

        def fit(**k):
            return run_mopo(prob, 1.0, **kw, **k)
    else:

        def fit(**k):
            return run_mopo_lb(prob, 1.0, b, steps=60, lr=0.05, batch=12, gamma=0.99, **k)

    together = fit(runs=3, seed=5)
    for r in range(3):
        alone = fit(runs=1, seed=5 + r)
        for got, want in ((together.policy, alone.policy), (together.lam, alone.lam), (together.G, alone.G)):
            torch.testing.assert_close(got[r], want[0], rtol=1e-12, atol=1e-14)
    # the runs see different mini-batches (the check is not vacuous)
    assert float(total_variation(together.policy[0], together.policy[1])) > 1e-4

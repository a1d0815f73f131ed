"""ACPO / ATRPO on the constrained-RL core: Fisher CG vs direct solve, Lagrangian step, protocol evaluator."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from bayescrl.constrained.acpo import ACPO, ACPOConfig, fisher_vector_product
from bayescrl.constrained.acpo_eval import average_reward_evaluation
from bayescrl.constrained.atrpo import ATRPO, lagrangian_ell, lagrangian_step
from bayescrl.constrained.core.networks import GaussianPolicy
from bayescrl.constrained.core.optim import conjugate_gradient, flat_params
from bayescrl.envs import make_ergodic_cmdp
from bayescrl.utils import ConfigError


def _cmdp_factory(seed: int = 0):
    cmdp = make_ergodic_cmdp(num_states=5, num_actions=3, seed=seed)
    return cmdp, (lambda: cmdp.make_env(max_episode_steps=200))


def test_fisher_cg_matches_direct_solve_on_network():
    torch.manual_seed(0)
    pol = GaussianPolicy(3, 2, (6, 5), "tanh", -0.5)
    obs = torch.randn(64, 3)
    params = list(pol.parameters())
    damping = 0.1
    fvp = fisher_vector_product(pol, obs, damping, params)
    d = flat_params(pol).numel()
    # explicit Fisher: Hessian of the mean KL(π_k ‖ π_θ) at θ_k by double autograd, one column at a time
    H = torch.stack([fvp(e) for e in torch.eye(d)], 1)
    assert torch.allclose(H, H.T, atol=1e-5)
    # finite-difference check of one column of H against the KL gradient
    theta0 = flat_params(pol).clone()
    with torch.no_grad():
        old = pol.distribution(obs)
    old = torch.distributions.Normal(old.loc.clone(), old.scale.clone())

    def kl_grad(theta):
        from bayescrl.constrained.core.optim import set_flat_params

        set_flat_params(pol, theta)
        kl = pol.kl(old, pol.distribution(obs)).mean()
        return torch.cat([gr.reshape(-1) for gr in torch.autograd.grad(kl, list(pol.parameters()))])

    e = torch.zeros(d)
    e[3] = 1.0
    eps = 1e-3
    fd = (kl_grad(theta0 + eps * e) - kl_grad(theta0 - eps * e)) / (2 * eps)
    from bayescrl.constrained.core.optim import set_flat_params

    set_flat_params(pol, theta0)
    assert torch.allclose(fd + damping * e, H[:, 3], atol=2e-3, rtol=1e-2)
    b = torch.randn(d)
    from bayescrl.constrained.core.optim import fisher_vector_product as core_fvp

    assert torch.allclose(core_fvp(pol, obs, damping)(b), fvp(b), atol=1e-5)  # same maths as the core's
    x = conjugate_gradient(fvp, b, iters=4 * d, tol=1e-14)
    assert torch.allclose(x, torch.linalg.solve(H, b), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("ell", [0.0, 0.3, 0.5, 0.8])
def test_lagrangian_step_maximises_balanced_lagrangian_in_trust_region(ell):
    """Eq. lagrangian_balanced restricted to ½xᵀHx <= δ, against SLSQP."""
    rng = np.random.default_rng(int(ell * 10))
    d, delta = 5, 0.02
    M = rng.normal(size=(d, d))
    H = M @ M.T + np.eye(d)
    g, a, c = rng.normal(size=d), rng.normal(size=d), 0.3
    v, w = np.linalg.solve(H, g), np.linalg.solve(H, a)
    x = lagrangian_step(torch.tensor(v), torch.tensor(w), g @ v, a @ v, a @ w, ell, delta).numpy()

    def f(x):
        return (1 - ell) * g @ x - ell * ((c + a @ x) + (0.5 * x @ H @ x - delta))

    cons = [{"type": "ineq", "fun": lambda x: delta - 0.5 * x @ H @ x}]
    res = minimize(lambda x: -f(x), np.zeros(d), constraints=cons, method="SLSQP", options={"ftol": 1e-14})
    assert f(x) == pytest.approx(-res.fun, rel=1e-5, abs=1e-8)
    assert 0.5 * x @ H @ x <= delta * (1 + 1e-9)


def test_lagrangian_table_lookup():
    assert lagrangian_ell("atrpo", "bayescrl/PointGather-v0") == 0.50
    assert lagrangian_ell("atrpo", "bayescrl/AntCircle-v0") == 0.60
    assert lagrangian_ell("ppo", "bayescrl/AntCircle-v0") == 0.50
    assert lagrangian_ell("atrpo", "bayescrl/PointCircle-v0") == 0.5  # not in the table: default


def test_protocol_evaluator_matches_exact_average_reward():
    cmdp, factory = _cmdp_factory(0)
    algo = ACPO(
        factory,
        cost_limits=cmdp.limits.tolist(),
        seed=0,
        config={"n_envs": 1, "rollout_steps": 10, "normalize_obs": False},
    )
    with torch.no_grad():  # make the deterministic policy a known non-trivial one
        logits = algo.policy.distribution(torch.eye(5)).logits
    pi_det = np.eye(3)[logits.argmax(-1).numpy()]
    exact = cmdp.evaluate(pi_det)
    ev = average_reward_evaluation(algo, n_traj=10, traj_steps=300)
    assert ev["avg_reward"] == pytest.approx(exact.value, abs=0.05)
    assert ev["avg_costs"][0] == pytest.approx(exact.costs[0], abs=0.05)
    assert ev["seeds"] == list(range(10_000, 10_010))  # disjoint from the training seed
    algo.close()


def test_acpo_update_respects_trust_region_and_writes_protocol_metrics(tmp_path):
    cmdp, factory = _cmdp_factory(1)
    delta = 0.01
    algo = ACPO(
        factory,
        cost_limits=cmdp.limits.tolist(),
        seed=0,
        config={
            "n_envs": 2,
            "rollout_steps": 250,
            "delta": delta,
            "normalize_obs": False,
            "update_epochs": 2,
        },
    )
    algo.learn(1000, out_dir=tmp_path, progress=False)
    hist = algo.history
    assert len(hist) == 2
    coef = algo.config.backtrack_coef
    for rec in hist:
        assert rec["branch"] in ("dual", "recovery")  # a step was accepted every iteration
        frac = coef ** rec["backtracks"]
        # the accepted step s^j x uses the trust region: KL ≈ ½ s^{2j} xᵀFx, with ½ xᵀ(F + damping I)x = δ
        # for the full step (measured ≈ 0.55 δ here); a step √2 shorter would give ≈ 0.28 δ
        assert 0.3 * frac**2 * delta < rec["kl"] <= delta * (1 + 1e-6)
        lin, surr = np.asarray(rec["lin_dc"]), np.asarray(rec["surr_dc"])
        # the importance-weighted cost surrogate moves as its linearisation a_iᵀx predicts (first order)
        np.testing.assert_allclose(surr, lin, rtol=0.25, atol=1e-4)
        if rec["branch"] == "recovery":  # Eq. `acpo_recovery` descends the violated costs
            assert (lin < 0).all() and (np.asarray(rec["c"]) > 0).any()
        else:  # Eq. `acpo_approx`: the full step meets the linearised constraints
            assert (np.asarray(rec["c"]) + lin / frac <= 1e-6).all()
    algo.protocol_traj, algo.protocol_steps = 2, 100
    metrics = algo.write_results(tmp_path, eval_episodes=1)
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert {"final_avg_reward", "final_avg_costs"} <= set(saved)
    assert saved["final_avg_reward"] == pytest.approx(metrics["final_avg_reward"])
    algo.close()


def test_atrpo_runs_and_config_errors():
    cmdp, factory = _cmdp_factory(2)
    algo = ATRPO(
        factory,
        cost_limits=cmdp.limits.tolist(),
        seed=0,
        config={
            "n_envs": 2,
            "rollout_steps": 100,
            "delta": 0.01,
            "normalize_obs": False,
            "update_epochs": 1,
            "ell": 0.5,
        },
    )
    algo.learn(200, progress=False)
    rec = algo.history[-1]
    # a step was taken, inside the trust region and using it (KL ≈ ½ s^{2j} xᵀFx ≈ 0.48 δ measured here)
    assert rec["branch"] == "step"
    assert 0.3 * algo.config.backtrack_coef ** (2 * rec["backtracks"]) * 0.01 < rec["kl"] <= 0.01 * (1 + 1e-6)
    algo.close()
    with pytest.raises(ConfigError, match="advantage"):
        ACPOConfig(advantage="discounted")
    with pytest.raises(ConfigError, match="recovery_t"):
        ACPOConfig(recovery_t=-0.1)


def test_ppo_with_fixed_balanced_lagrangian():
    """Chapter `acpo`'s PPO baseline: loss -((1 - ell) L_R - ell sum_i L_Ci), ell fixed (table or number)."""
    from bayescrl.constrained.ppo_lag import PPOLag, PPOLagConfig, balanced_lagrangian_loss

    loss = balanced_lagrangian_loss(torch.tensor(2.0), torch.tensor([1.0, 3.0]), 0.25)
    assert float(loss) == pytest.approx(-(0.75 * 2.0 - 0.25 * 4.0))
    # ell = 1: the loss is the cost surrogate alone, ell = 0: the reward surrogate alone
    assert float(balanced_lagrangian_loss(torch.tensor(2.0), torch.tensor([5.0]), 1.0)) == pytest.approx(5.0)
    assert float(balanced_lagrangian_loss(torch.tensor(2.0), torch.tensor([5.0]), 0.0)) == pytest.approx(-2.0)
    cmdp, factory = _cmdp_factory(2)
    cfg = {"n_envs": 2, "rollout_steps": 100, "normalize_obs": False, "update_epochs": 1, "ell": 0.3}
    algo = PPOLag(factory, cost_limits=[0.0], seed=0, config=cfg)
    adaptive = PPOLag(factory, cost_limits=[0.0], seed=0, config={**cfg, "ell": None})
    for a in (algo, adaptive):
        a.learn(400, progress=False)
        a.close()
    assert [h["multipliers"] for h in algo.history] == [[0.3]] * 2
    assert adaptive.history[-1]["multipliers"][0] > 0.0  # limit 0 < cost: the adaptive multiplier grows
    gather = PPOLag("bayescrl/PointGather-v0", [0.1], seed=0, config={"ell": "table", "n_envs": 1})
    assert gather.multipliers() == [0.55]  # table `tab:lagrangian_parameters`, PPO row
    gather.close()
    assert PPOLagConfig().ell is None  # default: the adaptive PPO-Lagrangian (e-COP chapter)
    for bad in (1.5, -0.1, "tabel", True):
        with pytest.raises(ConfigError, match="ell"):
            PPOLagConfig(ell=bad)


def test_acpo_default_limits_are_the_env_budgets_per_step():
    # PointCircle's own limit is 10 per 200-step episode; ACPO's limit is an average per step: 10 / 200
    algo = ACPO("bayescrl/PointCircle-v0", None, 0, {"n_envs": 1, "rollout_steps": 8})
    try:
        assert algo.horizon == 200 and algo.cost_limits.tolist() == [0.05]
        assert algo.episode_cost_limits() == [pytest.approx(10.0)]  # what the curves draw
    finally:
        algo.close()
    given = ACPO("bayescrl/PointCircle-v0", [0.02], 0, {"n_envs": 1, "rollout_steps": 8})
    assert given.cost_limits.tolist() == [0.02]  # explicit limits are taken as they are (per step)
    given.close()

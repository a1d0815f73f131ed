"""Agents of chapter `warmPref-PS`: known answers (ridge regression, IPO optimum, autograd, ε rule)."""

import math

import pytest
import torch

from bayescrl.bandits.agents import BootstrapAgent, GaussianPSAgent, build_problem
from bayescrl.bandits.config import resolve_config
from bayescrl.bandits.dpo import preference_loss, preference_loss_grad, train_preference_policy
from bayescrl.bandits.experiment import make_agent, make_world
from bayescrl.bandits.prior import informed_prior
from bayescrl.bandits.warmtsof import WarmTSOFAgent, get_epsilon
from bayescrl.inference.bootstrap import map_estimate


def small(**over):
    cfg = {"bandit": {"K": 8, "d": 3, "T": 20}, "offline": {"N": 10, "beta": 5.0, "lam": 10.0}}
    for k, v in over.items():
        cfg.setdefault(k, {}).update(v) if isinstance(v, dict) else cfg.__setitem__(k, v)
    cfg = resolve_config(cfg)
    env, data = make_world(cfg, 3)
    return cfg, env, data


def test_lints_mean_is_ridge_regression():
    # Agrawal & Goyal: mean B^{-1} f with B = ridge I + sum a a^T, f = sum r a
    cfg, env, data = small(options={"lints_ridge": 2.0, "lints_v": 0.5})
    agent = make_agent({"id": "lints", "label": "lints"}, cfg, env, data)
    X, R = [], []
    for t in range(12):
        arm, _ = agent.act(t)
        r, _ = env.pull(arm, t)
        agent.update(arm, r)
        X.append(env.arms[torch.arange(3), arm])
        R.append(r)
    X, R = torch.stack(X, 1), torch.stack(R, 1)  # [S,T,d], [S,T]
    B = 2.0 * torch.eye(3, dtype=X.dtype) + X.mT @ X
    ref = torch.linalg.solve(B, (X.mT @ R[..., None]).squeeze(-1))
    assert torch.allclose(agent.post.mean, ref, atol=1e-9)
    assert torch.allclose(agent.post.cov, torch.linalg.inv(B), atol=1e-9)


def test_build_problem_holds_d0():
    cfg, env, data = small()
    beta = torch.full((3, 1), 5.0, dtype=torch.float64)
    prob = build_problem(env, data, beta, torch.full_like(beta, 10.0))
    x0, x1 = data.features(env.arms)
    assert torch.equal(prob.x0[:, :10], x0) and torch.equal(prob.x1[:, :10], x1)
    assert torch.equal(prob.y[:, :10].long(), data.y) and bool(prob.pref_mask.all())
    assert prob.reward_mask.shape == (3, 20) and not bool(prob.reward_mask.any())


def test_informed_prior_laplace_is_map_with_theta_block_of_inverse_hessian():
    cfg, env, data = small()
    beta = torch.full((3, 1), 5.0, dtype=torch.float64)
    lam = torch.full_like(beta, 10.0)
    mean, cov = informed_prior(env, data, beta, lam, "laplace")
    res = map_estimate(build_problem(env, data, beta, lam))
    assert torch.allclose(mean, res.theta[:, 0], atol=1e-8)
    assert torch.allclose(cov, torch.linalg.inv(res.hessian[:, 0])[:, :3, :3], atol=1e-8)
    # with no offline data the informed prior is the uninformed prior nu_0
    cfg0, env0, data0 = small(offline={"N": 0})
    m0, c0 = informed_prior(env0, data0, beta, lam, "laplace")
    assert torch.allclose(m0, env0.mu0.expand(3, 3)) and torch.allclose(c0, env0.cov0.expand(3, 3, 3))


def test_bootstrap_without_perturbation_and_data_is_the_exact_posterior_mean():
    # p_offline = 1, no noise, no anchoring, N = 0: the MAP of L1 + L3 is the Gaussian posterior mean
    cfg, env, data = small(offline={"N": 0})
    beta = torch.ones(3, 1, dtype=torch.float64)
    boot = BootstrapAgent(
        env,
        data,
        beta,
        beta,
        generator=torch.Generator().manual_seed(0),
        p_offline=1.0,
        online_noise=False,
        anchor_prior=False,
        tol=1e-10,
    )
    ps = GaussianPSAgent(
        env,
        env.mu0.expand(3, 3),
        env.cov0.expand(3, 3, 3),
        env.noise_sd,
        generator=torch.Generator().manual_seed(0),
    )
    for t in range(5):
        arm = torch.tensor([t % 8, (3 * t) % 8, (5 * t + 1) % 8])
        r, _ = env.pull(arm, t)
        boot.update(arm, r)
        ps.update(arm, r)
    assert torch.allclose(boot.sample_theta(), ps.post.mean, atol=1e-8)


@pytest.mark.parametrize("loss", ["dpo", "ipo"])
def test_preference_loss_gradient_matches_autograd(loss):
    h = torch.linspace(-30, 30, 13, dtype=torch.float64, requires_grad=True)
    preference_loss(h, loss, 0.1).sum().backward()
    assert torch.allclose(preference_loss_grad(h.detach(), loss, 0.1), h.grad, atol=1e-12)


def test_ipo_reaches_its_closed_form_optimum():
    # one pair, arm 0 always preferred over arm 1: IPO's optimum is psi_0 - psi_1 = 1/(2 tau) = 5
    w, lo = torch.zeros(2, 6, dtype=torch.long), torch.ones(2, 6, dtype=torch.long)
    psi = train_preference_policy(
        w,
        lo,
        4,
        loss="ipo",
        steps=3000,
        lr=0.015,
        batch=4,
        tau=0.1,
        generator=torch.Generator().manual_seed(0),
    )
    assert torch.allclose(psi[:, 0] - psi[:, 1], torch.full((2,), 5.0, dtype=torch.float64), atol=0.05)
    assert torch.equal(psi[:, 2:], torch.zeros(2, 2, dtype=torch.float64))  # unseen arms untouched
    # DPO has no finite optimum: the margin keeps growing with the number of steps
    d1 = train_preference_policy(w, lo, 4, loss="dpo", steps=500, generator=torch.Generator().manual_seed(0))
    d2 = train_preference_policy(w, lo, 4, loss="dpo", steps=2000, generator=torch.Generator().manual_seed(0))
    assert bool(((d2[:, 0] - d2[:, 1]) > (d1[:, 0] - d1[:, 1]) + 1).all())


def test_hybrid_reward_model_is_anchored_at_true_min_and_updates_to_empirical_mean():
    cfg, env, data = small(options={"dpo_steps": 200, "dpo_epsilon": 0.0})
    agent = make_agent({"id": "hybrid-dpo", "label": "dpo"}, cfg, env, data)
    assert torch.allclose(agent.reward_model.min(1).values, env.means.min(1).values)
    arm, _ = agent.act(0)
    assert torch.equal(arm, agent.r0.argmax(1))  # epsilon = 0: greedy
    agent.update(arm, torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
    agent.update(arm, torch.tensor([3.0, 2.0, 1.0], dtype=torch.float64))
    assert torch.allclose(
        agent.reward_model[torch.arange(3), arm], torch.full((3,), 2.0, dtype=torch.float64)
    )


def test_get_epsilon_rule_and_feedback_cost():
    assert get_epsilon(0.0, 4, 4, 1.0) == pytest.approx(1.0)
    assert get_epsilon(0.1, 1, 9, 2.0) == pytest.approx(5.9)
    assert get_epsilon(10.0, 1, 4, 1.0) == 0.0  # never asks when the question costs more than it can win
    cfg, env, data = small()
    beta = torch.full((3, 1), 5.0, dtype=torch.float64)
    lam = torch.full_like(beta, 10.0)
    g = torch.Generator().manual_seed(0)
    always = WarmTSOFAgent(env, data, beta, lam, generator=g, cost=0.1, eps0=1e6)
    arm, cost = always.act(0)
    assert torch.allclose(cost, torch.full((3,), 0.1, dtype=torch.float64))
    assert int(always.problem.pref_mask.sum()) == 3 * 11 and bool(always.problem.pref_online[:, 10].all())
    never = WarmTSOFAgent(env, data, beta, lam, generator=g, cost=5.0, eps0=1.0)
    _, cost = never.act(0)
    assert float(cost.abs().sum()) == 0.0 and int(never.queries.sum()) == 0


def test_unit_scaled_lints_equals_ps_in_distribution():
    # with ridge 1, sigma = 1 and nu_0 = N(0, I), LinTS(v = 1) and PS have the same posterior
    cfg, env, data = small()
    a = make_agent({"id": "lints", "label": "x"}, cfg, env, data)
    b = make_agent({"id": "ps", "label": "x"}, cfg, env, data)
    assert torch.allclose(a.post.cov, b.post.cov) and math.isclose(cfg["options"]["lints_v"], 1.0)


def test_two_raters_keep_their_own_competence_and_records():
    cfg, env, data = small(offline={"raters": [{"N": 4, "beta": 20.0, "lam": 1000.0}, {"N": 6, "beta": 2.0}]})
    agent = make_agent({"id": "warmpref-ps-bootstrap", "label": "b"}, cfg, env, data)
    p = agent.problem
    assert p.beta.shape == (3, 2) and p.beta[0].tolist() == [20.0, 2.0]
    assert p.lam[0].tolist() == [1000.0, 10.0]  # the second rater inherits offline.lam
    assert p.rater[0, :10].tolist() == [0] * 4 + [1] * 6
    arm, _ = agent.act(0)
    assert agent.prev.vartheta.shape == (3, 1, 2, 3)  # one belief per rater

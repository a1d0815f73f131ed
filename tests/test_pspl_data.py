"""Raters, offline data, Dirichlet counts, β estimation, offline DPO/IPO."""

import math

import pytest
import torch

from bayescrl.pbrl.agents import PSPL, Context
from bayescrl.pbrl.data import TrajectoryPairs, behaviour_policy, offline_dataset, sample_pairs
from bayescrl.pbrl.envs import riverswim
from bayescrl.pbrl.mdp import TabularMDP, one_hot_features, transition_counts, value_iteration
from bayescrl.pbrl.offline_baselines import train_offline_policy
from bayescrl.pbrl.posterior import TrajectoryPreferenceModel, dirichlet_mode
from bayescrl.raters import BeliefRater
from bayescrl.raters.competence import beta_entropy as _beta_entropy
from bayescrl.raters.competence import beta_mle_given_theta
from bayescrl.utils.errors import ConfigError


def test_bt_rater_probability_closed_form():
    theta = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    r = BeliefRater.sample(theta, 1, beta=3.0, lam=math.inf)
    assert torch.equal(r.vartheta[0], theta)
    phi0 = torch.tensor([[1.0, 0.0, 2.0]], dtype=torch.float64)
    phi1 = torch.tensor([[0.0, 1.0, 0.0]], dtype=torch.float64)
    # P(Y=0) = σ(β⟨φ0 − φ1, ϑ⟩) = σ(3 · (1 + 2 + 1)) (Eq. pref_logistic_trajectories)
    assert r.prob_prefers_0(phi0, phi1).item() == pytest.approx(1 / (1 + math.exp(-12.0)))
    greedy = BeliefRater(theta.unsqueeze(0), 3.0, math.inf, "greedy")
    assert greedy.prob_prefers_0(phi1, phi0).item() == 0.0
    assert greedy.prob_prefers_0(phi0, phi0).item() == 0.5


def test_rater_belief_spread_is_one_over_lambda():
    theta = torch.zeros(4, dtype=torch.float64)
    r = BeliefRater.sample(theta, 4000, beta=1.0, lam=20.0, generator=torch.Generator().manual_seed(0))
    assert r.vartheta.std().item() == pytest.approx(1 / 20, rel=0.05)


def test_bt_label_frequencies():
    theta = torch.tensor([0.3], dtype=torch.float64)
    r = BeliefRater(theta.expand(20000, 1), beta=2.0, lam=math.inf)
    y = r.label(
        torch.ones(20000, 1, dtype=torch.float64),
        torch.zeros(20000, 1, dtype=torch.float64),
        generator=torch.Generator().manual_seed(1),
    )
    p0 = 1 / (1 + math.exp(-0.6))
    assert (y == 0).double().mean().item() == pytest.approx(p0, abs=0.015)


def test_offline_dataset_shapes_and_embeddings():
    mdp = riverswim(H=10)
    g = torch.Generator().manual_seed(0)
    rater = BeliefRater.sample(mdp.theta, 3, 10.0, 50.0, generator=g)
    D = offline_dataset(mdp, rater, 7, generator=g)
    assert D.states.shape == (3, 7, 2, 11) and D.actions.shape == (3, 7, 2, 10) and D.y.shape == (3, 7)
    assert torch.all(D.phi.sum(-1) == 10)  # visit counts sum to H
    assert torch.all(D.states[..., 0] == 0)  # ρ = δ_0
    with pytest.raises(ConfigError, match="offline.N"):
        offline_dataset(mdp, rater, -1)
    with pytest.raises(ConfigError, match="offline.behaviour"):
        offline_dataset(mdp, rater, 3, behaviour="expert")


def test_eps_optimal_behaviour_policy():
    mdp = riverswim()
    pi = behaviour_policy(mdp, "eps-optimal", 0.2)
    _, _, opt = value_iteration(mdp.P, mdp.r, mdp.H)
    assert torch.allclose(pi.sum(-1), torch.ones(mdp.H, mdp.S, dtype=torch.float64))
    assert pi.gather(-1, opt.unsqueeze(-1)).min().item() == pytest.approx(0.9)


def test_dirichlet_posterior_counts_are_exact():
    """PSPL's η posterior = α0 + every observed (s, a, s') of D0 and of the online episodes."""
    mdp = riverswim(H=6)
    g = torch.Generator().manual_seed(2)
    rater = BeliefRater.sample(mdp.theta, 2, 10.0, 50.0, generator=g)
    D = offline_dataset(mdp, rater, 5, generator=g)
    ctx = Context(mdp, D, K=3, generator=g, beta=10.0, lam=50.0, alpha0=0.5)
    agent = PSPL(ctx)
    all_s, all_a = [D.states.reshape(2, -1, 7)], [D.actions.reshape(2, -1, 6)]
    for _ in range(3):
        pi0, pi1 = agent.policies()
        pairs = sample_pairs(mdp, pi0.unsqueeze(1), pi1.unsqueeze(1), rater, generator=g)
        agent.observe(pairs)
        all_s.append(pairs.states.reshape(2, -1, 7))
        all_a.append(pairs.actions.reshape(2, -1, 6))
    s, a = torch.cat(all_s, 1), torch.cat(all_a, 1)
    expect = torch.zeros(2, 6, 2, 6, dtype=torch.float64)
    for b in range(2):  # explicit loops: an independent count
        for n in range(s.shape[1]):
            for h in range(5):
                expect[b, s[b, n, h], a[b, n, h], s[b, n, h + 1]] += 1
    assert torch.equal(agent.eta.counts, expect)
    assert torch.equal(agent.eta.alpha, 0.5 + expect)
    assert expect.sum() == 2 * (5 + 3) * 2 * 5


def test_weighted_counts_and_dirichlet_mode():
    mdp = riverswim(H=5)
    g = torch.Generator().manual_seed(0)
    D = offline_dataset(mdp, BeliefRater.sample(mdp.theta, 2, 1.0, 1.0, generator=g), 4, generator=g)
    model = TrajectoryPreferenceModel(D, mdp.S, mdp.A, K=2)
    ones = torch.ones(2, 3, 6)
    assert torch.equal(model.counts(ones)[:, 1], model.counts())
    w = torch.zeros(2, 1, 6)
    w[:, 0, 1] = 1.0  # only pair 1 counts
    n1 = transition_counts(D.states[:, 1], D.actions[:, 1], mdp.S, mdp.A)
    assert torch.equal(model.counts(w)[:, 0], n1)
    alpha = torch.tensor([[1.0, 3.0, 2.0], [1.0, 1.0, 1.0]])
    assert torch.allclose(dirichlet_mode(alpha), torch.tensor([[0.0, 2 / 3, 1 / 3], [1 / 3, 1 / 3, 1 / 3]]))
    with pytest.raises(ConfigError, match="alpha0"):
        dirichlet_mode(torch.tensor([0.5, 2.0]))


def _synthetic_pairs(beta: float, n: int, seed: int = 0) -> tuple[TrajectoryPairs, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    d = 5
    theta = torch.randn(d, generator=g, dtype=torch.float64)
    phi = torch.randn(2, n, 2, d, generator=g, dtype=torch.float64)
    rater = BeliefRater(theta.expand(2, d), beta, math.inf)
    y = rater.label(phi[:, :, 0], phi[:, :, 1], generator=g)
    z = torch.zeros(2, n, 2, 2, dtype=torch.long)
    return TrajectoryPairs(z, z[..., :1], phi, y), theta


def test_beta_mle_recovers_known_beta():
    data, theta = _synthetic_pairs(beta=2.0, n=20000)
    beta, at_bound = beta_mle(data, theta)
    assert not at_bound.any()
    assert beta.tolist() == pytest.approx([2.0, 2.0], rel=0.06)
    # the MLE is a stationary point of the log-likelihood: finite-difference derivative ≈ 0
    m = (1 - 2 * data.y[0].double()) * ((data.phi[0, :, 0] - data.phi[0, :, 1]) @ theta)
    ll = lambda b: torch.nn.functional.logsigmoid(b * m).sum().item()  # noqa: E731
    b0 = beta[0].item()
    assert abs(ll(b0 + 1e-4) - ll(b0 - 1e-4)) / 2e-4 < 1e-2


def test_beta_mle_separable_data_flagged_at_bound():
    data, theta = _synthetic_pairs(beta=1.0, n=50)
    rater = BeliefRater(theta.expand(2, -1), 1.0, math.inf, "greedy")
    data.y = rater.label(data.phi[:, :, 0], data.phi[:, :, 1])
    beta, at_bound = beta_mle(data, theta, beta_max=500.0)
    assert at_bound.all() and beta.tolist() == [500.0, 500.0]


def test_beta_entropy_closed_form():
    # one pair per seed; winner visits (s, a) = (0, 0), (0, 0), (1, 1), (2, 0): ζ = (1/2, 1/4, 1/4)
    states = torch.tensor([[[[0, 0, 1, 2, 0], [1, 1, 1, 1, 1]]]])
    actions = torch.tensor([[[[0, 0, 1, 0], [0, 0, 0, 0]]]])
    data = TrajectoryPairs(states, actions, torch.zeros(1, 1, 2, 6), torch.tensor([[0]]))
    ent = -(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25))
    assert beta_entropy(data, 3, 2, c=2.0).item() == pytest.approx(2.0 / ent)


def test_dpo_and_ipo_learn_the_preferred_action():
    """One state, H = 1: the winner always took action 2 -> both losses make action 2 greedy."""
    P = torch.ones(1, 3, 1, dtype=torch.float64)
    mdp = TabularMDP(
        P,
        torch.ones(1, dtype=torch.float64),
        1,
        one_hot_features(1, 3),
        torch.tensor([0.0, 0.1, 1.0], dtype=torch.float64),
    )
    n = 64
    states = torch.zeros(2, n, 2, 2, dtype=torch.long)
    actions = torch.zeros(2, n, 2, 1, dtype=torch.long)
    actions[:, :, 1, 0] = 2
    actions[:, :, 0, 0] = torch.randint(0, 2, (2, n), generator=torch.Generator().manual_seed(0))
    data = TrajectoryPairs(states, actions, torch.zeros(2, n, 2, 3), torch.ones(2, n, dtype=torch.long))
    ref = torch.full((1, 1, 3), 1 / 3, dtype=torch.float64)
    for loss in ("dpo", "ipo"):
        pi = train_offline_policy(
            data, ref, 1, 3, loss=loss, tau=1.0, steps=25, lr=5e-2, generator=torch.Generator().manual_seed(0)
        )
        assert pi.shape == (2, 1, 1) and torch.all(pi == 2)
    assert mdp.r[0].argmax() == 2
    with pytest.raises(ConfigError, match="agents.loss"):
        train_offline_policy(data, ref, 1, 3, loss="kto")


def test_warm_started_laplace_matches_core_laplace():
    """PSPL's θ-posterior (warm-started Newton + Hessian) equals the core's `laplace` engine."""
    from bayescrl.inference.laplace import laplace
    from bayescrl.pbrl.posterior import laplace_theta

    mdp = riverswim(S=4, H=6)
    g = torch.Generator().manual_seed(3)
    D = offline_dataset(mdp, BeliefRater.sample(mdp.theta, 2, 5.0, 10.0, generator=g), 30, generator=g)
    model = TrajectoryPreferenceModel(D, mdp.S, mdp.A, K=1, beta=5.0, lam=10.0)
    cold, _ = model.solve(1, perturbed=False, tol=1e-10)
    res, _ = model.solve(1, perturbed=False, init=cold, tol=1e-10, return_hessian=True)
    mean, cov = laplace_theta(res, mdp.d)
    ref = laplace(model.problem, tol=1e-10)
    assert torch.allclose(mean, ref.theta_mean, atol=1e-7)
    assert torch.allclose(cov, ref.theta_cov, atol=1e-7)


def beta_mle(data, theta, **kw):
    """PSPL's β MLE: :func:`beta_mle_given_theta` on the pairs' margins under ``theta``."""
    return beta_mle_given_theta(data.margins(theta), **kw)


def beta_entropy(data, S, A, c=1.0):
    """PSPL's entropy rule: the winners' state–action visits, no cap."""
    return _beta_entropy(data.winner_visits(A), S * A, c, None)

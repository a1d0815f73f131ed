"""Tabular MDP core: value iteration vs brute force, exact policy value, regret, roll-outs, counts."""

import itertools

import pytest
import torch

from bayescrl.pbrl.envs import make_env, mountaincar, riverswim
from bayescrl.pbrl.mdp import (
    TabularMDP,
    embed,
    one_hot_features,
    policy_value,
    rollout,
    simple_regret,
    transition_counts,
    value_iteration,
)
from bayescrl.utils.errors import ConfigError


def tiny_mdp(seed: int = 0, S: int = 2, A: int = 2, H: int = 3) -> TabularMDP:
    g = torch.Generator().manual_seed(seed)
    P = torch.rand(S, A, S, generator=g, dtype=torch.float64) + 0.1
    P = P / P.sum(-1, keepdim=True)
    r = torch.rand(S, A, generator=g, dtype=torch.float64)
    rho = torch.rand(S, generator=g, dtype=torch.float64)
    return TabularMDP(P, rho / rho.sum(), H, one_hot_features(S, A), r.reshape(-1))


def brute_force_value(mdp: TabularMDP, pi: tuple) -> float:
    """Expected return by explicit enumeration of every trajectory (no dynamic programming)."""
    S, H = mdp.S, mdp.H
    total = 0.0
    for states in itertools.product(range(S), repeat=H):
        prob = float(mdp.rho[states[0]])
        ret = 0.0
        for h, s in enumerate(states):
            a = pi[h][s]
            ret += float(mdp.r[s, a])
            if h + 1 < H:
                prob *= float(mdp.P[s, a, states[h + 1]])
        total += prob * ret
    return total


@pytest.mark.parametrize("seed", [0, 1])
def test_value_iteration_matches_brute_force_over_all_policies(seed):
    mdp = tiny_mdp(seed)
    S, A, H = mdp.S, mdp.A, mdp.H
    best = -1.0
    for flat in itertools.product(range(A), repeat=S * H):  # all 64 deterministic policies
        pi = tuple(tuple(flat[h * S : (h + 1) * S]) for h in range(H))
        v = brute_force_value(mdp, pi)
        assert policy_value(mdp.P, mdp.r, mdp.rho, torch.tensor(pi)).item() == pytest.approx(v, abs=1e-12)
        best = max(best, v)
    V, Q, pi_star = value_iteration(mdp.P, mdp.r, H)
    assert (mdp.rho * V[0]).sum().item() == pytest.approx(best, abs=1e-12)
    assert brute_force_value(mdp, tuple(map(tuple, pi_star.tolist()))) == pytest.approx(best, abs=1e-12)
    assert torch.all(V[H] == 0)


def test_value_iteration_is_batched():
    mdps = [tiny_mdp(s) for s in range(3)]
    P = torch.stack([m.P for m in mdps])
    r = torch.stack([m.r for m in mdps])
    V, _, pi = value_iteration(P.unsqueeze(1).expand(3, 2, 2, 2, 2), r.unsqueeze(1).expand(3, 2, 2, 2), 3)
    for i, m in enumerate(mdps):
        Vi, _, pii = value_iteration(m.P, m.r, 3)
        assert torch.allclose(V[i, 1], Vi) and torch.equal(pi[i, 0], pii)


def test_simple_regret_zero_for_optimal_and_exact_otherwise():
    mdp = riverswim(S=6, H=20)
    V, _, pi = value_iteration(mdp.P, mdp.r, mdp.H)
    assert simple_regret(mdp, pi).item() == pytest.approx(0.0, abs=1e-12)
    always_left = torch.zeros(mdp.H, mdp.S, dtype=torch.long)
    # always-left from state 0 collects 0.005 every step
    assert simple_regret(mdp, always_left).item() == pytest.approx(V[0, 0].item() - 20 * 0.005, abs=1e-12)
    assert simple_regret(mdp, always_left).item() > 3.0


def test_riverswim_structure():
    mdp = riverswim(S=6, H=20)
    assert torch.allclose(mdp.P.sum(-1), torch.ones(6, 2, dtype=torch.float64))
    assert mdp.P[0, 1, 1] == 0.6 and mdp.P[2, 1, 3] == 0.35 and mdp.P[5, 1, 5] == 0.6
    _, _, pi = value_iteration(mdp.P, mdp.r, mdp.H)
    assert pi[0].tolist() == [1] * 6  # swim right everywhere at the start of a long episode


def test_mountaincar_is_a_valid_mdp_and_goal_absorbing():
    mdp = mountaincar(n_pos=5, n_vel=5, H=20, repeat=8, m=6)
    G = mdp.info["goal_state"]
    assert torch.allclose(mdp.P.sum(-1), torch.ones(mdp.S, 3, dtype=torch.float64))
    assert torch.all(mdp.P[G, :, G] == 1) and torch.all(mdp.r[G] == 1) and mdp.r[:G].abs().sum() == 0
    assert mdp.rho.sum().item() == pytest.approx(1.0)
    V, _, pi = value_iteration(mdp.P, mdp.r, mdp.H)
    uniform = torch.full((mdp.H, mdp.S, 3), 1 / 3, dtype=torch.float64)
    v_opt = (mdp.rho * V[0]).sum().item()
    assert v_opt > 2 * policy_value(mdp.P, mdp.r, mdp.rho, uniform).item() > 0


def test_rollout_monte_carlo_matches_exact_value():
    mdp = tiny_mdp(3)
    pi = torch.tensor([[0, 1], [1, 1], [1, 0]])
    g = torch.Generator().manual_seed(0)
    n = 20000
    s, a = rollout(mdp.P, mdp.rho, pi.expand(n, 3, 2), generator=g)
    ret = mdp.r[s[:, :3], a].sum(-1)
    exact = policy_value(mdp.P, mdp.r, mdp.rho, pi).item()
    assert ret.mean().item() == pytest.approx(exact, abs=4 * ret.std().item() / n**0.5)


def test_embedding_and_transition_counts_by_hand():
    S, A = 3, 2
    feats = one_hot_features(S, A)
    states = torch.tensor([[0, 1, 1, 2]])  # H = 3, last state is s_{H+1}
    actions = torch.tensor([[1, 0, 1]])
    phi = embed(feats, states, actions)
    expect = torch.zeros(S * A, dtype=torch.float64)
    expect[0 * A + 1] += 1
    expect[1 * A + 0] += 1
    expect[1 * A + 1] += 1
    assert torch.equal(phi[0], expect)
    n = transition_counts(states, actions, S, A)
    assert n.sum() == 2  # H - 1 observed transitions (Eq. eta_informed_prior)
    assert n[0, 1, 1] == 1 and n[1, 0, 1] == 1


@pytest.mark.parametrize(
    "cfg, field",
    [
        ({"name": "lake"}, "env.name"),
        ({"name": "riverswim", "H": 0}, "env.H"),
        ({"name": "riverswim", "bins": 3}, "env.bins"),
        ({"name": "mountaincar", "n_pos": 2.5}, "env.n_pos"),
    ],
)
def test_bad_env_configs_rejected(cfg, field):
    with pytest.raises(ConfigError) as e:
        make_env(cfg)
    assert e.value.field == field


def test_invalid_transition_matrix_rejected():
    P = torch.full((2, 1, 2), 0.4, dtype=torch.float64)
    with pytest.raises(ConfigError, match="sum to 1"):
        TabularMDP(P, torch.tensor([1.0, 0.0]), 2, one_hot_features(2, 1), torch.zeros(2))

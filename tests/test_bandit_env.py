"""Linear bandit environment and offline preference data (chapter `warmPref-PS`): known answers."""

import math

import pytest
import torch

from bayescrl.bandits.env import LinearBandit, make_arms
from bayescrl.bandits.offline import sample_offline
from bayescrl.raters import Rater, label
from bayescrl.utils.errors import ConfigError


def gens(n, base=0):
    return [torch.Generator().manual_seed(base + s) for s in range(n)]


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.8])
def test_arm_correlation_matches_rho(rho):
    # corr(a_k[j], a_l[j]) = rho across many independent draws of the arm set (closed form)
    g = torch.Generator().manual_seed(3)
    arms = torch.stack([make_arms(1, 2, 3, rho, [g])[0] for _ in range(4000)])  # [4000, 2, 3]
    a, b = arms[:, 0].reshape(-1), arms[:, 1].reshape(-1)
    corr = torch.corrcoef(torch.stack([a, b]))[0, 1]
    assert abs(float(corr) - rho) < 0.04
    # E||a||^2 = 1 (the 1/d scaling)
    assert abs(float((arms**2).sum(-1).mean()) - 1.0) < 0.05


def test_rho_out_of_range_rejected():
    with pytest.raises(ConfigError, match="bandit.rho"):
        make_arms(1, 3, 2, 1.0, gens(1))


def test_pull_rewards_and_regret():
    env = LinearBandit.sample(3, 5, 2, 10, 0.5, 0.0, gens(3))
    best = env.means.argmax(1)
    r, reg = env.pull(best, 0)
    assert torch.allclose(reg, torch.zeros(3, dtype=reg.dtype))
    assert torch.allclose(r, env.best_mean + env.noise[:, 0])
    worst = env.means.argmin(1)
    _, reg = env.pull(worst, 1)
    assert torch.allclose(reg, env.means.max(1).values - env.means.min(1).values)


def test_bradley_terry_label_frequency_matches_eq_rater_preference_dist():
    # P(Y = 0) = sigma(beta <x0 - x1, vartheta>) (Eq. `rater_preference_dist`)
    n = 200_000
    x0 = torch.tensor([0.3, -0.2], dtype=torch.float64).expand(n, 2)
    x1 = torch.tensor([-0.1, 0.4], dtype=torch.float64).expand(n, 2)
    vt = torch.tensor([1.0, 0.5], dtype=torch.float64).expand(n, 2)
    beta = 2.0
    y = label(x0, x1, vt, beta, "bt", torch.Generator().manual_seed(0))
    p0 = 1 / (1 + math.exp(-beta * ((0.3 + 0.1) * 1.0 + (-0.2 - 0.4) * 0.5)))
    assert abs(float((y == 0).double().mean()) - p0) < 4 * math.sqrt(p0 * (1 - p0) / n)
    g = label(x0[:3], x1[:3], vt[:3], beta, "greedy", None)
    assert g.tolist() == [0, 0, 0]  # <x0 - x1, vt> = 0.1 > 0: x0 preferred, deterministically


def test_offline_data_shapes_raters_and_reproducibility():
    env = LinearBandit.sample(2, 6, 3, 5, 1.0, 0.3, gens(2))
    raters = [Rater("a", 5.0, 10.0), Rater("b", 20.0, 1000.0, "greedy")]
    d1 = sample_offline(env.arms, env.theta, raters, gens(2, 100), counts=[4, 3])
    d2 = sample_offline(env.arms, env.theta, raters, gens(2, 100), counts=[4, 3])
    assert d1.i0.shape == (2, 7) and d1.vartheta.shape == (2, 2, 3)
    assert d1.rater[0].tolist() == [0] * 4 + [1] * 3
    assert torch.equal(d1.y, d2.y) and torch.equal(d1.i0, d2.i0)
    # greedy rater: labels follow its own vartheta exactly
    x0, x1 = d1.features(env.arms)
    diff = ((x0 - x1) * d1.vartheta[:, 1:2]).sum(-1)[:, 4:]
    assert torch.equal(d1.y[:, 4:], (diff < 0).long())
    # rater beliefs are N(theta, I/lam^2): with lam = 1000 they sit within 5e-3 of theta
    assert float((d1.vartheta[:, 1] - env.theta).abs().max()) < 5e-3


def test_invalid_rater_rejected():
    env = LinearBandit.sample(1, 3, 2, 5, 1.0, 0.0, gens(1))
    with pytest.raises(ConfigError, match=r"offline.N = -1"):
        sample_offline(env.arms, env.theta, [Rater()], gens(1), counts=[-1])
    with pytest.raises(ConfigError, match=r"rater.beta = -2"):
        Rater("r0", -2.0, 1.0)

"""PSPL's two θ draws per episode (Algorithm `main_algo_theoretical`): given the Gaussian θ posterior
N(m, C) the agent samples, the draws have mean m, covariance C = L Lᵀ (not Lᵀ L) and the two draws of an
episode are independent. Fails under the mutation ``eps @ chol`` listed in ``tools/mutation_check.py``."""

import torch

from bayescrl.pbrl.agents import PSPL, Context
from bayescrl.pbrl.data import offline_dataset
from bayescrl.pbrl.envs import riverswim
from bayescrl.raters import BeliefRater


def test_pspl_theta_draws_have_the_posterior_covariance():
    mdp = riverswim(S=4, H=3)
    d = mdp.features.shape[-1]
    g = torch.Generator().manual_seed(0)
    B = 2000
    rater = BeliefRater.sample(mdp.theta, B, 3.0, 10.0, generator=g)
    agent = PSPL(Context(mdp, offline_dataset(mdp, rater, 2, generator=g), 1, g, beta=3.0, lam=10.0))
    L = torch.eye(d, dtype=torch.float64)
    L[1:, 0] = 2.0  # far from symmetric: L Lᵀ and Lᵀ L differ by O(10) entries
    cov = L @ L.T
    mean = torch.linspace(-1.0, 1.0, d, dtype=torch.float64)
    agent.theta_posterior = lambda: (mean.expand(B, d), cov.expand(B, d, d))
    drawn = []
    reward = agent.ctx.reward

    def capture(theta):
        drawn.append(theta.detach().clone())
        return reward(theta)

    agent.ctx.reward = capture  # the draws are what the agent turns into rewards
    agent.policies()
    theta = drawn[0]  # [B, 2, d]
    assert theta.shape == (B, 2, d)
    both = theta.reshape(-1, d)
    torch.testing.assert_close(both.mean(0), mean, atol=0.15, rtol=0)
    emp = torch.cov(both.T)
    assert float((emp - cov).abs().max()) < 0.1 * float(cov.abs().max()), (emp, cov)
    # the two draws of one episode are independent: cross-covariance ≈ 0
    cross = (theta[:, 0] - mean).T @ (theta[:, 1] - mean) / B
    assert float(cross.abs().max()) < 0.1 * float(cov.abs().max())

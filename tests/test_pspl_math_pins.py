"""PSPL's two θ draws per episode (Algorithm `main_algo_theoretical`): given the Gaussian θ posterior
N(m, C) the agent samples, the draws have mean m, covariance C = L Lᵀ (not Lᵀ L) and the two draws of an
episode are independent. Fails under the mutation ``eps @ chol`` listed in ``tools/mutation_check.py``."""

import torch

from bayescrl.pbrl.agents import PSPL, Context
from bayescrl.pbrl.data import offline_dataset
from bayescrl.pbrl.diffusion.agents import PSPLTheta
from bayescrl.pbrl.diffusion.policy import GaussianNoisePolicy, reward_gradient_update
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


def test_reward_gradient_step_by_hand():
    """:func:`~bayescrl.pbrl.diffusion.policy.reward_gradient_update` (DRaFT/AlignProp step, appendix
    `pickapic`): loss_p = −mean_n r_pn / sd_n(r_p) with the sd *detached* (no gradient through the
    normalisation), minus mean_{n,t} A_pn log N(ε_pnt; μ, σ²) for the score-function term. The last layer's
    weights are 0, so μ = ε̂ + b3[:D], log σ = b3[D:]; rewards linear in b3 give every gradient in closed
    form, and one SGD step of rate η moves b3 by −η ∂loss/∂b3."""
    P, D, n, T, eta = 2, 2, 3, 2, 0.5
    pol = GaussianNoisePolicy(P, D, 1, hidden=4, sd_init=0.2, seed=0)
    b3 = pol.b3.detach().clone()[:, 0]  # [P, 2D]
    g = torch.Generator().manual_seed(1)
    c = torch.randn(P, n, 2 * D, generator=g)
    offset = torch.tensor([[3.0, 4.0, 6.0], [-1.0, 0.5, -2.5]])  # mean(r) far from 0
    eps_hat = torch.randn(P, n, T, D, generator=g)
    actions = eps_hat + b3[:, None, None, :D] + 0.3 * torch.randn(P, n, T, D, generator=g)
    inputs = torch.randn(P, n, T, 2 * D + 2, generator=g)
    adv = torch.tensor([[1.0, -0.5, 2.0], [0.3, 0.0, -1.2]])
    reward = (c * pol.b3).sum(-1) + offset  # [P, n], differentiable in b3
    opt = torch.optim.SGD(pol.parameters(), lr=eta)
    reward_gradient_update(pol, opt, reward, inputs=inputs, eps_hat=eps_hat, actions=actions, sf_adv=adv)
    r = ((c * b3[:, None]).sum(-1) + offset).double()
    sd = r.std(1, keepdim=True)  # sample sd over the n rollouts of one policy
    grad = -(c.double() / sd[..., None]).mean(1)  # d(−mean r/sd)/d b3, sd held fixed
    mu, log_sd = eps_hat.double() + b3[:, None, None, :D].double(), b3[:, None, None, D:].double()
    z = (actions.double() - mu) / log_sd.exp()
    w = adv.double()[:, :, None, None] / (n * T)
    grad[:, :D] -= (w * z / log_sd.exp()).sum((1, 2))  # d log N / dμ = (ε − μ)/σ²
    grad[:, D:] -= (w * (z**2 - 1)).sum((1, 2))  # d log N / d log σ = z² − 1
    torch.testing.assert_close(pol.b3.detach()[:, 0].double(), b3.double() - eta * grad, rtol=1e-5, atol=1e-6)


def test_diffusion_pspl_theta_draws_have_the_laplace_moments():
    """The image experiment's PSPL θ draws (``PSPLTheta.sample``): mean + ε Lᵀ with L Lᵀ the Laplace
    covariance of ``gaussian()`` (a prior far from diagonal, so ε L would give another covariance)."""
    cov0 = torch.tensor([[1.0, 0.8, 0.0], [0.8, 2.0, 0.6], [0.0, 0.6, 0.5]], dtype=torch.float64)
    phi0 = torch.tensor([[[1.0, 0.0, 2.5], [0.3, 1.0, 1.0]]], dtype=torch.float64)
    phi1 = torch.tensor([[[0.0, 1.0, 2.5], [0.0, -0.5, 1.0]]], dtype=torch.float64)
    pspl = PSPLTheta(phi0, phi1, torch.tensor([[0, 1]]), 2, cov0, beta=1.5, lam=10.0)
    mean, cov = pspl.gaussian()
    L = torch.linalg.cholesky(cov[0])
    assert float((L.mT @ L - cov[0]).abs().max()) > 0.15  # >> the tolerance below
    n = 40000
    x = pspl.sample(n, torch.Generator().manual_seed(0))[0]
    assert ((x.mean(0) - mean[0]).abs() < 4.5 * cov[0].diagonal().sqrt() / n**0.5).all()
    torch.testing.assert_close(torch.cov(x.T), cov[0], rtol=0, atol=0.04 * float(cov[0].diagonal().max()))

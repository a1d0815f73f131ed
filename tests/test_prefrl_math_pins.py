"""Selection probabilities of the ``top-two`` query rule (``bayescrl.prefrl.queries``): draw a uniform, draw
b uniform among the others, pair = (best segment under a, best segment other than it under b). Fails under
the mutation of the challenger draw listed in ``tools/mutation_check.py``."""

import itertools

import torch

from bayescrl.prefrl.queries import select_pairs
from bayescrl.prefrl.reward_model import LinearRewardPosterior

# 4 posterior draws over 4 segments; draws 1 and 2 agree on the leader (segment 1)
SCORES = torch.tensor(
    [
        [4.0, 1.0, 3.0, 2.0],  # lead 0, then 2
        [3.0, 4.0, 1.0, 2.0],  # lead 1, then 0
        [1.0, 4.0, 2.0, 3.0],  # lead 1, then 3
        [2.0, 3.0, 4.0, 1.0],  # lead 2, then 1
    ],
    dtype=torch.float64,
)


def _exact_probabilities(scores: torch.Tensor) -> dict[tuple[int, int], float]:
    """Enumerate the S(S − 1) ordered draw pairs (a, b), a ≠ b, each with probability 1/(S(S − 1))."""
    S, K = scores.shape
    probs: dict[tuple[int, int], float] = {}
    for a, b in itertools.permutations(range(S), 2):
        lead = int(scores[a].argmax())
        chal = max((k for k in range(K) if k != lead), key=lambda k: float(scores[b, k]))
        probs[(lead, chal)] = probs.get((lead, chal), 0.0) + 1.0 / (S * (S - 1))
    return probs


def test_top_two_selection_probabilities():
    exact = _exact_probabilities(SCORES)
    # by hand: lead 0 (a = 0, 1/4): b = 1 -> 1, b = 2 -> 1, b = 3 -> 2
    assert abs(exact[(0, 1)] - 2 / 12) < 1e-12 and abs(exact[(0, 2)] - 1 / 12) < 1e-12
    n = 24_000
    pairs = select_pairs("top-two", SCORES, n, torch.Generator().manual_seed(0))
    assert bool((pairs[:, 0] != pairs[:, 1]).all())
    counts: dict[tuple[int, int], int] = {}
    for p in map(tuple, pairs.tolist()):
        counts[p] = counts.get(p, 0) + 1
    assert set(counts) <= set(exact)
    for pair, p in exact.items():
        freq = counts.get(pair, 0) / n
        assert abs(freq - p) < 4.5 * (p * (1 - p) / n) ** 0.5 + 1e-3, (pair, freq, p)


def test_linear_reward_posterior_draws_have_its_moments():
    """The learner's Thompson draws θ̃ = m + ε Lᵀ (C = L Lᵀ): before any label the prior N(μ0, Σ0), after a
    Laplace refit N(MAP, H⁻¹_θθ); a prior given by ``prior_scale`` s alone is N(0, s² I)."""
    mean = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    cov = torch.tensor([[1.0, 0.8, 0.0], [0.8, 2.0, 0.6], [0.0, 0.6, 0.5]], dtype=torch.float64)
    post = LinearRewardPosterior(3, ["a"], beta=[2.0], lam=[0.8], prior_mean=mean, prior_cov=cov, seed=0)
    n = 40000

    def check(m, c):
        x = post.sample(n)
        assert ((x.mean(0) - m).abs() < 4.5 * c.diagonal().sqrt() / n**0.5).all()
        torch.testing.assert_close(torch.cov(x.T), c, rtol=0, atol=0.04 * float(c.diagonal().max()))

    check(mean, cov)
    phi0 = torch.tensor([[1.0, 0.0, 0.5], [0.2, 1.0, -1.0], [-1.0, 0.5, 0.0]], dtype=torch.float64)
    phi1 = torch.tensor([[0.0, 1.0, 0.0], [1.0, -0.5, 0.3], [0.4, 0.4, 1.0]], dtype=torch.float64)
    post.add(phi0, phi1, [1, 0, 1], [0, 0, 0])
    post.update()
    assert float((post.cov() - cov).abs().max()) > 0.05  # the labels moved the posterior
    check(post.mean(), post.cov())
    scaled = LinearRewardPosterior(2, ["a"], beta=[1.0], lam=[1.0], prior_scale=1.7)
    torch.testing.assert_close(scaled.cov(), 1.7**2 * torch.eye(2, dtype=torch.float64))

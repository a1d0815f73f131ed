"""Selection probabilities of the ``top-two`` query rule (``bayescrl.prefrl.queries``): draw a uniform, draw
b uniform among the others, pair = (best segment under a, best segment other than it under b). Fails under
the mutation of the challenger draw listed in ``tools/mutation_check.py``."""

import itertools

import torch

from bayescrl.prefrl.queries import select_pairs

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

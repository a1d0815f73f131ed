"""Pins of the per-run seeding helpers (:mod:`bayescrl.utils.seeding`) with inputs that differ from row to
row, so that a run reading another run's rows (a wrong block offset) changes the result: Bernoulli draws
of 0/1 probabilities and multinomial draws of one-hot rows are determined by their inputs, so every row's
output names the row it was drawn from. Fails under the mutations listed in ``tools/mutation_check.py``."""

import torch

from bayescrl.utils.seeding import bernoulli, multinomial, per_run, randint, run_generators

# 3 runs x 2 rows, every row different
P01 = torch.tensor(
    [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0], [0, 1, 0, 1]], dtype=torch.float64
)


def test_run_generators_are_seed_plus_run():
    """Run r of a call with ``seed`` is the stream ``seed + r`` (``key(seed + r)``)."""
    gens = run_generators(11, 3)
    for r, g in enumerate(gens):
        assert torch.equal(
            torch.rand(5, generator=g), torch.rand(5, generator=torch.Generator().manual_seed(11 + r))
        )
    keyed = run_generators(4, 3, key=lambda s: 1000 * s + 7)
    assert [g.initial_seed() for g in keyed] == [4007, 5007, 6007]


def test_per_run_blocks_read_each_runs_own_rows():
    """Run i's block is rows [2i, 2i + 2): a 0/1 Bernoulli returns its input, a one-hot multinomial its
    row's category, and ``per_run`` hands each run its own rows (along ``dim`` too)."""
    gens = run_generators(3, 3)
    torch.testing.assert_close(bernoulli(P01, gens), P01, rtol=0, atol=0)
    torch.testing.assert_close(bernoulli(P01.T, run_generators(3, 3), dim=1), P01.T, rtol=0, atol=0)
    onehot = torch.eye(6)[[4, 0, 5, 2, 1, 3]]
    assert multinomial(onehot, 1, run_generators(3, 3))[:, 0].tolist() == [4, 0, 5, 2, 1, 3]
    x = torch.arange(12.0).reshape(6, 2)
    seen = per_run(lambda xb, g: xb + 0 * torch.rand(xb.shape, generator=g), x, run_generators(3, 3))
    torch.testing.assert_close(seen, x, rtol=0, atol=0)
    # and each run's noise is its own stream's, in order: run r's rows == the single run seed 3 + r
    noisy = per_run(lambda xb, g: xb + torch.rand(xb.shape, generator=g), x, run_generators(3, 3))
    for r in range(3):
        alone = x[2 * r : 2 * r + 2] + torch.rand((2, 2), generator=torch.Generator().manual_seed(3 + r))
        torch.testing.assert_close(noisy[2 * r : 2 * r + 2], alone, rtol=0, atol=0)
    ints = randint(1000, (6, 3), run_generators(3, 3))
    for r in range(3):
        alone = torch.randint(1000, (2, 3), generator=torch.Generator().manual_seed(3 + r))
        assert torch.equal(ints[2 * r : 2 * r + 2], alone)

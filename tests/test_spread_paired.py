"""``bayescrl.utils.spread.paired``: two methods on the same seeds, against hand-computed values."""

from __future__ import annotations

import pytest

from bayescrl.utils.spread import paired


def test_paired_by_hand():
    """a − b per seed: −1, −2, −3, −4, +0.5 (mean −1.9, sample sd √(12.2 / 4), t_.975(4) = 2.7764); a below b
    on 4 seeds, above on 1; Wilcoxon signed-rank: W+ = 1 (the +0.5 has the smallest |difference|), exact
    two-sided p = 2 · #{W+ <= 1} / 2^5 = 2 · 2 / 32 = 0.125."""
    pr = paired([0.0, 0.0, 0.0, 0.0, 0.5], [1.0, 2.0, 3.0, 4.0, 0.0])
    half = 2.7764451 * (12.2 / 4) ** 0.5 / 5**0.5
    assert pr.spread.mean == pytest.approx(-1.9) and pr.spread.n == 5
    assert pr.spread.ci95 == pytest.approx((-1.9 - half, -1.9 + half), rel=1e-6)
    assert (pr.below, pr.above) == (4, 1)
    assert pr.wilcoxon_p == pytest.approx(0.125, abs=1e-12)
    assert paired([1.0, 2.0, 3.0, 4.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.5]).wilcoxon_p == pytest.approx(0.125)


def test_paired_without_a_test():
    """One seed, or no nonzero difference: no p-value (and one seed no interval); unaligned lists refused."""
    one = paired([1.0], [2.0])
    assert one.wilcoxon_p is None and one.spread.ci95 is None and one.below == 1
    assert paired([1.0, 2.0], [1.0, 2.0]).wilcoxon_p is None
    with pytest.raises(ValueError, match="3 values against 2"):
        paired([1.0, 2.0, 3.0], [1.0, 2.0])

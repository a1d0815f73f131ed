"""The one way results report spread over seeds/runs: sample sd (``ddof = 1``), ``n``, and a 95 %
t-interval of the mean where an interval is shown; one run (``n = 1``) has no spread (never "± 0").

:func:`spread` computes it from values; :func:`fmt_spread` prints ``mean ± sd (n = 5)``;
:func:`fmt_num` prints a number to significant digits (small numbers never round to 0). :func:`paired`
compares two methods run on the same seeds: the spread of their per-seed differences, how many of them
fall on each side of 0, and the two-sided Wilcoxon signed-rank test.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Paired", "Spread", "fmt_num", "fmt_spread", "paired", "sample_sd", "spread", "t_halfwidth"]


@dataclass(frozen=True)
class Spread:
    """Mean, sample sd (None for n < 2), n, and the 95 % t-interval of the mean (None for n < 2)."""

    mean: float
    sd: float | None
    n: int

    @property
    def se(self) -> float | None:
        return None if self.sd is None else self.sd / math.sqrt(self.n)

    @property
    def ci95(self) -> tuple[float, float] | None:
        if self.sd is None:
            return None
        h = t_halfwidth(self.sd, self.n)
        return (self.mean - h, self.mean + h)


def sample_sd(values: Iterable[float]) -> float | None:
    """The sample standard deviation (``ddof = 1``) of ``values``; None for fewer than two."""
    v = [float(x) for x in values]
    if len(v) < 2:
        return None
    m = math.fsum(v) / len(v)
    return math.sqrt(math.fsum((x - m) ** 2 for x in v) / (len(v) - 1))


def spread(values: Iterable[float]) -> Spread:
    """:class:`Spread` of ``values`` (mean, sample sd, n)."""
    v = [float(x) for x in values]
    if not v:
        raise ValueError("spread of no values")
    return Spread(math.fsum(v) / len(v), sample_sd(v), len(v))


@dataclass(frozen=True)
class Paired:
    """Per-seed differences ``a − b`` of two methods run on the same seeds: their :class:`Spread`, the
    seeds on which ``a`` is below (``below``: difference < 0) and above ``b``, and the two-sided Wilcoxon
    signed-rank p-value (None for fewer than two seeds or no nonzero difference)."""

    spread: Spread
    below: int
    above: int
    wilcoxon_p: float | None


def paired(a: Iterable[float], b: Iterable[float]) -> Paired:
    """:class:`Paired` of the per-seed differences ``a[i] − b[i]`` (``a`` and ``b`` aligned by seed)."""
    x, y = [float(v) for v in a], [float(v) for v in b]
    if len(x) != len(y):
        raise ValueError(f"paired: {len(x)} values against {len(y)}")
    d = [u - v for u, v in zip(x, y, strict=True)]
    p = None
    if len(d) > 1 and any(d):
        from scipy.stats import wilcoxon

        p = float(wilcoxon(d).pvalue)
    return Paired(spread(d), sum(v < 0 for v in d), sum(v > 0 for v in d), p)


def t_halfwidth(sd: float, n: int, level: float = 0.95) -> float:
    """Half-width of the ``level`` t-interval of a mean of ``n`` values with sample sd ``sd``."""
    if n < 2:
        return float("nan")
    from scipy.stats import t

    return float(t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)


def fmt_num(x: float | None, digits: int = 4) -> str:
    """``x`` to ``digits`` significant digits (``1.234e-05``, not ``0.00``); None/NaN as ``–``."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{float(x):.{digits}g}"


def fmt_spread(
    mean: float | None, sd: float | None, n: int | None = None, digits: int = 4, show_n: bool = True
) -> str:
    """``mean ± sd (n = N)``: ``sd`` the sample sd; no ``±`` when ``n == 1`` or sd is None (``show_n``:
    the ``(n = N)`` suffix, for tables whose header gives n)."""
    show_sd = sd is not None and (n is None or n > 1)
    text = fmt_num(mean, digits) + (f" ± {fmt_num(sd, digits)}" if show_sd else "")
    return text + (f" (n = {n})" if n is not None and show_n else "")

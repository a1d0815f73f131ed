"""Synthetic data from the standard model: offline preferences (and optional online rewards).

The warmPref-PS protocol (Section `sec:chapter3_empirical`): K arms with features drawn once, the two
compared actions uniform over the arms (μ = Unif), θ ~ ν0, each rater's belief ϑ_i ~ N(θ, I/λ_i²) and
labels from the Bradley–Terry model of Eq. `rater_preference_dist`. The result is a data-file mapping (see
``docs/core.md``) that also records the true θ and ϑ under ``truth``.

Departure: the two actions of a comparison are always *different* arms, uniform over the ordered pairs
``x0 ≠ x1`` (the text draws them i.i.d., so with few arms many comparisons would be an arm against itself,
whose label is a coin flip that carries no information). A drawn pair that collides gets its second arm
redrawn among the other ``K - 1`` on a separate stream, so every pair that did not collide, and every
label, is the same as with i.i.d. draws.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from bayescrl.models.spec import from_spec, spec_mapping
from bayescrl.utils.checks import boolean, check_seed
from bayescrl.utils.errors import ConfigError

DT = torch.float64


class _Draws:
    """The random streams of one simulation: items (arms or Gaussian features), distinct-arm pairs and
    Bradley–Terry labels of the raters' beliefs ``vt`` (``greedy``: argmax labels)."""

    def __init__(self, m: Any, vt: torch.Tensor, arms: torch.Tensor | None, gen: torch.Generator, seed: int,
                 greedy: bool):  # fmt: skip
        self.m, self.p, self.vt, self.arms, self.gen, self.greedy = m, m.problem, vt, arms, gen, greedy
        self.redraw = torch.Generator().manual_seed(seed + 0x5EED)  # second arms of colliding pairs only

    def index(self, n: int) -> torch.Tensor:
        """``n`` arm indices, uniform."""
        return torch.randint(0, len(self.arms), (n,), generator=self.gen)

    def items(self, n: int) -> torch.Tensor:
        """``n`` items ``(n, d)``: uniform arms, or Gaussian features without arms."""
        if self.arms is None:
            return torch.randn(n, self.p.dim, generator=self.gen, dtype=DT)
        return self.arms[self.index(n)]

    def pairs(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` compared pairs ``(x0, x1)`` of different arms (module docstring: the departure)."""
        if self.arms is None:  # Gaussian items: distinct with probability 1
            return self.items(n), self.items(n)
        k = len(self.arms)
        i0, i1 = self.index(n), self.index(n)
        same = i0 == i1
        shift = 1 + torch.randint(0, k - 1, (int(same.sum()),), generator=self.redraw)
        i1[same] = (i0[same] + shift) % k  # uniform over the K - 1 other arms
        return self.arms[i0], self.arms[i1]

    def prefs(self, n: int) -> list[dict[str, Any]]:
        """``n`` labelled comparisons, the raters in turn (Eq. `rater_preference_dist`)."""
        x0, x1 = self.pairs(n)
        rater = torch.arange(n) % self.p.num_raters
        z = self.p.beta[rater] * ((x1 - x0) * self.vt[rater]).sum(-1)
        y = (z > 0).double() if self.greedy else torch.bernoulli(torch.sigmoid(z), generator=self.gen)
        ids = self.m.rater_ids
        return [
            {"x0": x0[i].tolist(), "x1": x1[i].tolist(), "y": int(y[i]), "rater": ids[int(rater[i])]}
            for i in range(n)
        ]


def _check_sizes(num_prefs: int, num_rewards: int, num_arms: int | None, heldout: int) -> None:
    """Counts are integers >= 0; ``num_arms`` >= 2 or None."""
    for name, v in (("num_prefs", num_prefs), ("num_rewards", num_rewards), ("heldout", heldout)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ConfigError(name, v, "must be an integer >= 0")
    if num_arms is not None and (not isinstance(num_arms, int) or num_arms < 2):
        raise ConfigError("num_arms", num_arms, "must be an integer >= 2 (or None for Gaussian items)")


def simulate(
    spec: dict[str, Any] | str | Path,
    *,
    num_prefs: int = 20,
    num_rewards: int = 0,
    num_arms: int | None = 50,
    heldout: int = 0,
    seed: int = 0,
    greedy: bool = False,
) -> dict[str, Any]:
    """Draw θ, ϑ and data; preferences are split evenly over the spec's raters.

    ``spec``: a mapping or a YAML/JSON file path (as :func:`~bayescrl.models.spec.from_spec`). ``greedy=True``
    makes raters pick argmax β⟨x, ϑ⟩ deterministically (the thesis' "flawed expert").
    """
    spec = spec_mapping(spec)
    _check_sizes(num_prefs, num_rewards, num_arms, heldout)
    seed, greedy = check_seed(seed), boolean(greedy, "greedy")
    base = {k: v for k, v in spec.items() if k not in ("preferences", "rewards", "heldout", "truth")}
    m = from_spec(base)
    p = m.problem
    d, R = p.dim, p.num_raters
    gen = torch.Generator().manual_seed(seed)
    theta = p.mu0 + torch.randn(d, generator=gen, dtype=DT) @ torch.linalg.cholesky(p.cov0).T
    vt = theta + torch.randn(R, d, generator=gen, dtype=DT) / p.lam[:, None]
    arms = torch.randn(num_arms, d, generator=gen, dtype=DT) if num_arms else None
    draws = _Draws(m, vt, arms, gen, seed, greedy)
    out = dict(base)
    out["preferences"] = draws.prefs(num_prefs)
    if num_rewards:
        x = draws.items(num_rewards)
        r = x @ theta + p.noise_sd * torch.randn(num_rewards, generator=gen, dtype=DT)
        out["rewards"] = [{"x": x[i].tolist(), "r": float(r[i])} for i in range(num_rewards)]
    if heldout:
        out["heldout"] = draws.prefs(heldout)
    out["truth"] = {"theta": theta.tolist(), "vartheta": vt.tolist(), "seed": seed}
    return out

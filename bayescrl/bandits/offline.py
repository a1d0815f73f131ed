"""Offline preference data ``D0`` of chapter `warmPref-PS`, batched over seeds.

Each of ``N`` records is a pair ``(Ā⁽⁰⁾, Ā⁽¹⁾)`` drawn i.i.d. from the action-sampling distribution ``μ``
(uniform over the ``K`` arms by default) and a label ``Y`` (``Y = 0``: ``Ā⁽⁰⁾`` preferred). A rater ``i``
with competence ``(β_i, λ_i)`` holds its own estimate ``ϑ_i ~ N(θ, I/λ_i²)`` and labels

* ``expert: bt`` — by the noisy Bradley–Terry model of Eq. `rater_preference_dist`,
  ``P(Y=0) = σ(β⟨Ā⁽⁰⁾ - Ā⁽¹⁾, ϑ⟩)``;
* ``expert: greedy`` — by the deterministic "flawed" greedy expert of the sensitivity study,
  ``Y = argmax_i β⟨Ā⁽ⁱ⁾, ϑ⟩`` (ties go to ``Y = 0``).

Raters are :class:`bayescrl.raters.Rater` (``expert`` says how it labels); several raters each contribute
``counts[i]`` records, and the rater of every record is kept (``rater [S,N]``) so that agents can use each
rater's own ``(β_i, λ_i)`` and ``ϑ_i``. Labels are drawn by :func:`bayescrl.raters.label`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from bayescrl.raters import Rater, label
from bayescrl.utils.errors import ConfigError


@dataclass
class OfflineData:
    """``D0`` for ``S`` seeds: arm indices ``i0, i1 [S,N]``, labels ``y [S,N]`` (0: ``i0`` preferred),
        ``rater [S,N]`` (index into ``raters``), the raters' estimates ``vartheta [S,R,d]``, the number of
    records of each rater ``counts``."""

    i0: torch.Tensor
    i1: torch.Tensor
    y: torch.Tensor
    rater: torch.Tensor
    vartheta: torch.Tensor
    raters: list[Rater]
    counts: list[int]

    @property
    def N(self) -> int:
        return self.i0.shape[1]

    def features(self, arms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x0, x1)`` ``[S,N,d]`` for arms ``[S,K,d]``."""
        idx = lambda i: i[..., None].expand(-1, -1, arms.shape[-1])
        return arms.gather(1, idx(self.i0)), arms.gather(1, idx(self.i1))

    def winners(self) -> torch.Tensor:
        """Index of the preferred arm of every record ``[S,N]``."""
        return torch.where(self.y == 0, self.i0, self.i1)


def _check_counts(raters: Sequence[Rater], counts: Sequence[int]) -> None:
    """Refuse a count list of another length than ``raters`` or a count that is not an integer >= 0."""
    if len(counts) != len(raters):
        raise ConfigError("offline.N", list(counts), f"give one count per rater ({len(raters)})")
    for r, n in enumerate(counts):
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ConfigError(
                "offline.raters.N" if len(raters) > 1 else "offline.N",
                n,
                "must be an integer >= 0",
                r if len(raters) > 1 else None,
            )


def _rater_records(
    arms: torch.Tensor,
    theta: torch.Tensor,
    rater: Rater,
    r: int,
    n: int,
    mu: torch.Tensor,
    g: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One seed's ``n`` records of rater ``r`` (arms ``[K,d]``, ``θ [d]`` on the CPU): its belief
    ϑ = θ + ε/λ, ε ~ N(0, I), pairs drawn from ``mu`` and its labels; returns ``i0, i1, y, rater [n]`` and
    ``ϑ [d]``."""
    d = arms.shape[-1]
    vt = theta + torch.randn(d, generator=g, dtype=theta.dtype) / rater.lam_value()
    if n:
        pair = torch.multinomial(mu, 2 * n, replacement=True, generator=g).view(2, n)
    else:
        pair = torch.zeros(2, 0, dtype=torch.long, device="cpu")
    y = label(arms[pair[0]], arms[pair[1]], vt.expand(n, d), rater.beta_value(), rater.expert, g)
    return pair[0], pair[1], y, torch.full((n,), r, dtype=torch.long, device="cpu"), vt


def sample_offline(
    arms: torch.Tensor,
    theta: torch.Tensor,
    raters: Sequence[Rater],
    generators: list[torch.Generator],
    mu: torch.Tensor | None = None,
    *,
    counts: Sequence[int],
) -> OfflineData:
    """Draw ``D0`` for every seed (arms ``[S,K,d]``, ``θ [S,d]``), one generator per seed, ``counts[i]``
    records of rater ``i`` (known competence: a prior's mean is used).

    ``mu [K]`` is the action-sampling distribution (uniform when ``None``). Records of rater ``i`` come
    after those of rater ``i-1``.
    """
    S, K, d = arms.shape
    if mu is None:
        mu = torch.full((K,), 1.0 / K, dtype=torch.float64, device="cpu")
    _check_counts(raters, counts)
    i0s, i1s, ys, rs, vts = [], [], [], [], []
    for s, g in enumerate(generators):
        records = [
            _rater_records(arms[s].cpu(), theta[s].cpu(), rater, r, n, mu, g)
            for r, (rater, n) in enumerate(zip(raters, counts, strict=True))
        ]
        i0_s, i1_s, y_s, r_s, vt_s = zip(*records, strict=True)
        i0s.append(torch.cat(i0_s))
        i1s.append(torch.cat(i1_s))
        ys.append(torch.cat(y_s))
        rs.append(torch.cat(r_s))
        vts.append(torch.stack(vt_s))
    dev = arms.device
    return OfflineData(
        torch.stack(i0s).to(dev),
        torch.stack(i1s).to(dev),
        torch.stack(ys).to(dev),
        torch.stack(rs).to(dev),
        torch.stack(vts).to(dev),
        list(raters),
        list(counts),
    )

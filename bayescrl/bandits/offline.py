"""Offline preference data ``D0`` of chapter `warmPref-PS`, batched over seeds.

Each of ``N`` records is a pair ``(Ā⁽⁰⁾, Ā⁽¹⁾)`` drawn i.i.d. from the action-sampling distribution ``μ``
(uniform over the ``K`` arms by default) and a label ``Y`` (``Y = 0``: ``Ā⁽⁰⁾`` preferred). A rater ``i``
with competence ``(β_i, λ_i)`` holds its own estimate ``ϑ_i ~ N(θ, I/λ_i²)`` and labels

* ``expert: bt`` — by the noisy Bradley–Terry model of Eq. `rater_preference_dist`,
  ``P(Y=0) = σ(β⟨Ā⁽⁰⁾ - Ā⁽¹⁾, ϑ⟩)``;
* ``expert: greedy`` — by the deterministic "flawed" greedy expert of the sensitivity study,
  ``Y = argmax_i β⟨Ā⁽ⁱ⁾, ϑ⟩`` (ties go to ``Y = 0``).

Several raters each contribute ``N_i`` records; the rater of every record is kept (``rater [S,N]``) so
that agents can use each rater's own ``(β_i, λ_i)`` and ``ϑ_i``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from bayescrl.utils.errors import ConfigError
from bayescrl.utils.seeding import draw

if TYPE_CHECKING:
    from bayescrl.utils.seeding import Streams


@dataclass
class Rater:
    """True competence of one rater: deliberateness ``beta``, knowledgeability ``lam``, ``N`` records."""

    N: int
    beta: float
    lam: float
    expert: str = "bt"

    def validate(self, field: str = "offline") -> None:
        if not isinstance(self.N, int) or isinstance(self.N, bool) or self.N < 0:
            raise ConfigError(f"{field}.N", self.N, "must be an integer >= 0")
        if not self.beta >= 0:  # also rejects NaN
            raise ConfigError(f"{field}.beta", self.beta, "deliberateness must be >= 0")
        if not self.lam > 0:
            raise ConfigError(f"{field}.lam", self.lam, "knowledgeability must be > 0")
        if self.expert not in ("bt", "greedy"):
            raise ConfigError(f"{field}.expert", self.expert, "must be 'bt' or 'greedy'")


@dataclass
class OfflineData:
    """``D0`` for ``S`` seeds: arm indices ``i0, i1 [S,N]``, labels ``y [S,N]`` (0: ``i0`` preferred),
    ``rater [S,N]`` (index into ``raters``), the raters' estimates ``vartheta [S,R,d]``."""

    i0: torch.Tensor
    i1: torch.Tensor
    y: torch.Tensor
    rater: torch.Tensor
    vartheta: torch.Tensor
    raters: list[Rater]

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


def label(
    x0: torch.Tensor,
    x1: torch.Tensor,
    vartheta: torch.Tensor,
    beta: torch.Tensor | float,
    expert: str,
    generator: Streams,
) -> torch.Tensor:
    """Labels ``y [...]`` for pairs ``x0, x1 [..., d]`` by a rater with estimate ``vartheta [..., d]``
    (one generator per seed: the seeds' rows, leading dimension)."""
    diff = ((x0 - x1) * vartheta).sum(-1)
    if expert == "greedy":
        return (diff < 0).long()
    p0 = torch.sigmoid(torch.as_tensor(beta, dtype=diff.dtype, device=diff.device) * diff)
    u = draw(torch.rand, p0.shape, generator, dtype=p0.dtype, device=p0.device)
    return (u >= p0).long()


def sample_offline(
    arms: torch.Tensor,
    theta: torch.Tensor,
    raters: list[Rater],
    generators: list[torch.Generator],
    mu: torch.Tensor | None = None,
) -> OfflineData:
    """Draw ``D0`` for every seed (arms ``[S,K,d]``, ``θ [S,d]``), one generator per seed.

    ``mu [K]`` is the action-sampling distribution (uniform when ``None``). Records of rater ``i`` come
    after those of rater ``i-1``.
    """
    S, K, d = arms.shape
    if mu is None:
        mu = torch.full((K,), 1.0 / K, dtype=torch.float64)
    for r, rater in enumerate(raters):
        rater.validate(f"offline.raters[{r}]" if len(raters) > 1 else "offline")
    i0s, i1s, ys, rs, vts = [], [], [], [], []
    for s, g in enumerate(generators):
        i0_s, i1_s, y_s, r_s, vt_s = [], [], [], [], []
        for r, rater in enumerate(raters):
            vt = theta[s].cpu() + torch.randn(d, generator=g, dtype=theta.dtype) / rater.lam
            if rater.N:
                pair = torch.multinomial(mu, 2 * rater.N, replacement=True, generator=g).view(2, rater.N)
            else:
                pair = torch.zeros(2, 0, dtype=torch.long)
            a = arms[s].cpu()
            y = label(a[pair[0]], a[pair[1]], vt.expand(rater.N, d), rater.beta, rater.expert, g)
            i0_s.append(pair[0])
            i1_s.append(pair[1])
            y_s.append(y)
            r_s.append(torch.full((rater.N,), r, dtype=torch.long))
            vt_s.append(vt)
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
    )

"""Simulated raters: the rater-competence model of the thesis plus B-Pref's irrationalities.

Rater i has deliberateness β_i and knowledgeability λ_i (Eq. `rater_preference_dist`): its belief about the
reward is the truth plus an error ξ_i ~ N(0, I/λ_i²) in feature space, drawn once per rater (ϑ_i = θ + ξ_i),
and it prefers item 0 with probability σ(β_i ⟨x0 − x1, ϑ_i⟩) (:mod:`bayescrl.raters.likelihood`).

* :func:`label` / :class:`BeliefRater` — labels of pairs of feature vectors (arms, trajectory embeddings)
  by raters whose beliefs ϑ are drawn per seed; ``expert: greedy`` is the deterministic "flawed" expert of
  the thesis' sensitivity studies, ``Y = argmax_i ⟨x_i, ϑ⟩``.
* :class:`RaterPool` — a pool of raters answering queries on segments σ of an RL agent's experience, where
  the perceived return is ``R̃_i(σ) = Σ_t γ_i^{L-1-t} (r(s_t, a_t) + ⟨ξ_i, φ(s_t, a_t)⟩)``, r the env's true
  reward the learner never sees. The irrationalities of B-Pref (Lee et al., 2021): ``gamma`` < 1 is a
  myopic rater (recent steps weigh more), ``skip_below`` skips a query when both segments' true returns are
  below it, ``equal_within`` answers "equal" when |R̃(σ0) − R̃(σ1)| is below it, and ``mistake`` flips the
  answer with that probability. Skipped and "equal" answers carry no direction (they do not enter the
  Bradley–Terry likelihood).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch
from torch import Tensor

from bayescrl.raters.likelihood import score_diff
from bayescrl.raters.rater import EXPERTS, Rater, number
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.seeding import draw

if TYPE_CHECKING:
    from bayescrl.utils.seeding import Streams

SKIP, EQUAL = -1, 2  # answer codes besides 0 (σ0 preferred) and 1 (σ1 preferred)


def label(
    x0: Tensor,
    x1: Tensor,
    vartheta: Tensor,
    beta: Tensor | float,
    expert: str,
    generator: Streams,
    *,
    greedy_ties: str = "first",
) -> Tensor:
    """Labels ``Y [...]`` (long, 0 = ``x0`` preferred) for pairs ``x0, x1 [..., d]`` by a rater with belief
    ``vartheta [..., d]``; ``generator``: one stream, or one per seed (the seeds' rows, leading dimension).

    ``expert="bt"``: ``Y = 1`` iff ``u ≥ σ(β ⟨x0 − x1, ϑ⟩)``, ``u ~ U(0, 1)``. ``expert="greedy"``:
    the better item by ``ϑ``; an exact tie goes to ``Y = 0`` without a draw (``greedy_ties="first"``,
    warmPref-PS) or to a fair coin (``greedy_ties="coin"``, PSPL: every pair then draws a uniform)."""
    diff = score_diff(x0, x1, vartheta)
    if expert == "greedy":
        if greedy_ties == "first":
            return (diff < 0).long()
        p0 = torch.where(diff > 0, 1.0, torch.where(diff < 0, 0.0, 0.5)).to(x0.dtype)
    else:
        p0 = torch.sigmoid(torch.as_tensor(beta, dtype=diff.dtype, device=diff.device) * diff)
    u = draw(torch.rand, p0.shape, generator, dtype=p0.dtype, device=p0.device)
    return (u >= p0).long()


def check_competence(beta: float, lam: float, prefix: str = "offline") -> None:
    """Reject an invalid simulated competence (β ≥ 0, λ > 0, ``.inf`` allowed), naming ``prefix.beta/lam``."""
    number(beta, f"{prefix}.beta", lo=0.0, finite=False)
    number(lam, f"{prefix}.lam", lo=0.0, strict=True, finite=False)


@dataclass
class BeliefRater:
    """A batch of simulated raters, one per seed: beliefs ``vartheta [B, d]``, deliberateness ``beta``,
    knowledgeability ``lam`` and ``expert`` kind (PSPL's rater over trajectory embeddings)."""

    vartheta: Tensor
    beta: float
    lam: float
    expert: str = "bt"

    @classmethod
    def sample(
        cls, theta: Tensor, B: int, beta: float, lam: float, expert: str = "bt", *, generator=None
    ) -> BeliefRater:
        """Draw ϑ_b ∼ N(θ, I/λ²) for b < B (``lam = inf`` gives ϑ = θ)."""
        check_competence(beta, lam)
        if expert not in EXPERTS:
            raise ConfigError("offline.expert", expert, f"choose one of {list(EXPERTS)}")
        noise = draw(torch.randn, (B, theta.shape[-1]), generator, dtype=theta.dtype, device=theta.device)
        sd = 0.0 if math.isinf(lam) else 1.0 / lam
        return cls(theta + sd * noise, float(beta), float(lam), expert)

    @classmethod
    def of(cls, rater: Rater, theta: Tensor, B: int, *, generator=None) -> BeliefRater:
        """:meth:`sample` for a declared :class:`~bayescrl.raters.rater.Rater` with known competence."""
        return cls.sample(theta, B, rater.beta_value(), rater.lam_value(), rater.expert, generator=generator)

    def _vt(self, phi0: Tensor) -> Tensor:
        return self.vartheta.reshape(self.vartheta.shape[0], *([1] * (phi0.dim() - 2)), -1)

    def prob_prefers_0(self, phi0: Tensor, phi1: Tensor) -> Tensor:
        """``P(Y = 0)`` for embeddings ``phi0, phi1 [B, ..., d]`` (Eq. `pref_logistic_trajectories`)."""
        score = score_diff(phi0, phi1, self._vt(phi0))
        if self.expert == "greedy":
            return torch.where(score > 0, 1.0, torch.where(score < 0, 0.0, 0.5)).to(phi0.dtype)
        return torch.sigmoid(self.beta * score)

    def label(self, phi0: Tensor, phi1: Tensor, *, generator=None) -> Tensor:
        """Sample labels ``Y [B, ...]`` (long, 0 = τ0 preferred; greedy ties: a fair coin)."""
        p0 = self.prob_prefers_0(phi0, phi1)
        u = draw(torch.rand, p0.shape, generator, dtype=p0.dtype, device=p0.device)
        return (u >= p0).long()


class SegmentsLike(Protocol):
    """What :class:`RaterPool` reads of a batch of K segments: ``perceived [K, R]`` (every rater's R̃),
    ``true_return [K]``, ``costs [K, C]``, ``phi [K, d]`` (the segment embedding Φ(σ))."""

    perceived: np.ndarray
    true_return: np.ndarray
    costs: np.ndarray
    phi: np.ndarray


class RaterPool:
    """A pool of simulated raters; ``answer`` labels query pairs, each by a rater drawn by ``weight``."""

    def __init__(self, specs: list[Rater], feature_dim: int, seed: int = 0):
        if not specs:
            raise ConfigError("raters", [], "give at least one rater")
        ids = [s.id for s in specs]
        dup = next((i for i in ids if ids.count(i) > 1), None)
        if dup is not None:
            raise ConfigError("raters.id", dup, "rater ids must be unique")
        self.specs, self.ids = list(specs), ids
        self.rng = np.random.default_rng(seed)
        # ξ_i ~ N(0, I/λ_i²): each rater's fixed error about the reward, in feature space
        self.xi = np.stack([self.rng.standard_normal(feature_dim) / s.lam_value() for s in specs])
        w = np.asarray([s.weight for s in specs])
        self.share = w / w.sum()

    def perceive(self, phi_steps: np.ndarray, rewards: np.ndarray) -> np.ndarray:
        """R̃_i(σ) of every rater i for segments with per-step features ``(K, L, d)`` and rewards
        ``(K, L)``: shape (K, R). Computed when a segment is cut (the per-step features are not kept)."""
        L = rewards.shape[1]
        gam = np.asarray([s.gamma for s in self.specs])[:, None]
        disc = gam ** (L - 1 - np.arange(L))[None, :]  # (R, L), all ones for gamma = 1
        belief = np.einsum("kld,rd->krl", phi_steps, self.xi)
        return ((rewards[:, None, :] + belief) * disc[None]).sum(-1)

    def draw_raters(self, k: int) -> np.ndarray:
        return self.rng.choice(len(self.specs), size=k, p=self.share)

    def answer(self, seg0: SegmentsLike, seg1: SegmentsLike, rater: np.ndarray) -> np.ndarray:
        """Answers (K,): 0 = σ0 preferred, 1 = σ1 preferred, ``EQUAL`` or ``SKIP``."""
        k = np.arange(len(rater))
        r0, r1 = seg0.perceived[k, rater], seg1.perceived[k, rater]
        return self._answer(r0, r1, rater, np.maximum(seg0.true_return, seg1.true_return))

    def answer_costs(
        self, seg0: SegmentsLike, seg1: SegmentsLike, rater: np.ndarray, channel: int
    ) -> np.ndarray:
        """Safety judgements "σ0 is the costlier" (0) or "σ1 is" (1) on cost ``channel``: the same
        Bradley–Terry rater on the perceived segment cost C̃_i(σ) = C(σ) + ⟨ξ_i, Φ(σ)⟩ (the safe-rlhf kind of
        cost preference). ``skip_below`` compares the larger true cost."""
        c0 = seg0.costs[:, channel] + np.einsum("kd,kd->k", seg0.phi, self.xi[rater])
        c1 = seg1.costs[:, channel] + np.einsum("kd,kd->k", seg1.phi, self.xi[rater])
        return self._answer(c0, c1, rater, np.maximum(seg0.costs[:, channel], seg1.costs[:, channel]))

    def judge_safety(
        self, segs: SegmentsLike, rater: np.ndarray, channel: int, threshold: float
    ) -> np.ndarray:
        """Absolute judgements (K,): 1 = "unsafe" with probability sigmoid(β_i (C̃_i(σ) − b)), b the
        per-segment tolerance ``threshold``; mistakes flip it."""
        c = segs.costs[:, channel] + np.einsum("kd,kd->k", segs.phi, self.xi[rater])
        beta = np.asarray([self.specs[i].beta_value() for i in rater])
        p = 1.0 / (1.0 + np.exp(-np.clip(beta * (c - threshold), -60, 60)))
        unsafe = (self.rng.random(len(rater)) < p).astype(np.int64)
        flip = self.rng.random(len(rater)) < np.asarray([self.specs[i].mistake for i in rater])
        return np.where(flip, 1 - unsafe, unsafe)

    def _answer(self, r0: np.ndarray, r1: np.ndarray, rater: np.ndarray, top: np.ndarray) -> np.ndarray:
        beta = np.asarray([self.specs[i].beta_value() for i in rater])
        p0 = 1.0 / (1.0 + np.exp(-np.clip(beta * (r0 - r1), -60, 60)))
        y = (self.rng.random(len(rater)) >= p0).astype(np.int64)
        eps = np.asarray([self.specs[i].mistake for i in rater])
        flip = self.rng.random(len(rater)) < eps
        y = np.where(flip, 1 - y, y)
        eq = np.asarray(
            [np.inf if self.specs[i].equal_within is None else self.specs[i].equal_within for i in rater]
        )
        y = np.where(np.abs(r0 - r1) < np.where(np.isinf(eq), -1.0, eq), EQUAL, y)
        skip = np.asarray(
            [-np.inf if self.specs[i].skip_below is None else self.specs[i].skip_below for i in rater]
        )
        return np.where(top < skip, SKIP, y)

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state, "specs": [s.to_dict() for s in self.specs]}

    def load_state_dict(self, st: dict) -> None:
        self.rng.bit_generator.state = st["rng"]

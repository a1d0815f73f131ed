"""Simulated raters: the rater-competence model of the thesis plus B-Pref's irrationalities.

Rater i has deliberateness β_i and knowledgeability λ_i (Eq. `rater_preference_dist`): its belief about the
reward is the truth plus a fixed error ξ_i ~ N(0, I/λ_i²) in feature space, drawn once per rater
(ϑ_i = θ + ξ_i when the true reward is ⟨θ, φ⟩), and it prefers σ0 over σ1 with probability

    P(σ0 ≻ σ1) = sigmoid(β_i (R̃_i(σ0) − R̃_i(σ1))),
    R̃_i(σ) = Σ_t γ_i^{L-1-t} (r(s_t, a_t) + ⟨ξ_i, φ(s_t, a_t)⟩),

r being the env's true reward, which the learner never sees. The irrationalities of B-Pref (Lee et al., 2021):
``gamma`` < 1 is a myopic rater (recent steps weigh more), ``skip_below`` skips a query when both segments'
true returns are below it, ``equal_within`` answers "equal" when |R̃(σ0) − R̃(σ1)| is below it, and
``mistake`` flips the answer with that probability. Skipped and "equal" answers are recorded but do not enter
the Bradley–Terry likelihood (they carry no direction).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from bayescrl.prefrl.segments import Segments
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import check_keys

SKIP, EQUAL = -1, 2  # answer codes besides 0 (σ0 preferred) and 1 (σ1 preferred)


@dataclass(frozen=True)
class RaterSpec:
    """One simulated rater (its competence is the ground truth the learner may or may not be told)."""

    id: str
    beta: float = 1.0
    lam: float = 1.0
    gamma: float = 1.0
    skip_below: float | None = None
    equal_within: float | None = None
    mistake: float = 0.0
    weight: float = 1.0  # relative share of the queries this rater answers

    @classmethod
    def from_dict(cls, d: dict, index: int, where: str = "raters") -> RaterSpec:
        if not isinstance(d, dict):
            raise ConfigError(
                where, d, "each rater is a mapping like {id: expert, beta: 10, lam: 100}", index
            )
        check_keys(d, cls.__dataclass_fields__, f"{where}[{index}]")
        if not isinstance(d.get("id"), str) or not d.get("id"):
            raise ConfigError(f"{where}.id", d.get("id"), "every rater needs a non-empty string id", index)
        out = {"id": d["id"]}
        for key, lo, lo_open, hi in (
            ("beta", 0.0, False, math.inf),
            ("lam", 0.0, True, math.inf),
            ("gamma", 0.0, True, 1.0),
            ("mistake", 0.0, False, 0.5),
            ("weight", 0.0, True, math.inf),
        ):
            if key in d:
                out[key] = _number(d[key], f"{where}.{key}", index, lo, lo_open, hi)
        for key in ("skip_below", "equal_within"):
            if d.get(key) is not None:
                out[key] = _number(d[key], f"{where}.{key}", index, -math.inf, False, math.inf)
        return cls(**out)


def _number(v, field: str, index: int, lo: float, lo_open: bool, hi: float) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        raise ConfigError(field, v, "must be a finite number", index)
    v = float(v)
    if v < lo or (lo_open and v == lo) or v > hi:
        left = "(" if lo_open else "["
        raise ConfigError(field, v, f"must be in {left}{lo:g}, {hi:g}]", index)
    return v


class RaterPool:
    """A pool of simulated raters; ``answer`` labels query pairs, each by a rater drawn by ``weight``."""

    def __init__(self, specs: list[RaterSpec], feature_dim: int, seed: int = 0):
        if not specs:
            raise ConfigError("raters", [], "give at least one rater")
        ids = [s.id for s in specs]
        dup = next((i for i in ids if ids.count(i) > 1), None)
        if dup is not None:
            raise ConfigError("raters.id", dup, "rater ids must be unique")
        self.specs, self.ids = list(specs), ids
        self.rng = np.random.default_rng(seed)
        # ξ_i ~ N(0, I/λ_i²): each rater's fixed error about the reward, in feature space
        self.xi = np.stack([self.rng.standard_normal(feature_dim) / s.lam for s in specs])
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

    def answer(self, seg0: Segments, seg1: Segments, rater: np.ndarray) -> np.ndarray:
        """Answers (K,): 0 = σ0 preferred, 1 = σ1 preferred, ``EQUAL`` or ``SKIP``."""
        k = np.arange(len(rater))
        r0, r1 = seg0.perceived[k, rater], seg1.perceived[k, rater]
        return self._answer(r0, r1, rater, np.maximum(seg0.true_return, seg1.true_return))

    def answer_costs(self, seg0: Segments, seg1: Segments, rater: np.ndarray, channel: int) -> np.ndarray:
        """Safety judgements "σ0 is the costlier" (0) or "σ1 is" (1) on cost ``channel``: the same
        Bradley–Terry rater on the perceived segment cost C̃_i(σ) = C(σ) + ⟨ξ_i, Φ(σ)⟩ (the safe-rlhf kind of
        cost preference). ``skip_below`` compares the larger true cost."""
        c0 = seg0.costs[:, channel] + np.einsum("kd,kd->k", seg0.phi, self.xi[rater])
        c1 = seg1.costs[:, channel] + np.einsum("kd,kd->k", seg1.phi, self.xi[rater])
        return self._answer(c0, c1, rater, np.maximum(seg0.costs[:, channel], seg1.costs[:, channel]))

    def judge_safety(self, segs: Segments, rater: np.ndarray, channel: int, threshold: float) -> np.ndarray:
        """Absolute judgements (K,): 1 = "unsafe" with probability sigmoid(β_i (C̃_i(σ) − b)), b the
        per-segment tolerance ``threshold``; mistakes flip it."""
        c = segs.costs[:, channel] + np.einsum("kd,kd->k", segs.phi, self.xi[rater])
        beta = np.asarray([self.specs[i].beta for i in rater])
        p = 1.0 / (1.0 + np.exp(-np.clip(beta * (c - threshold), -60, 60)))
        unsafe = (self.rng.random(len(rater)) < p).astype(np.int64)
        flip = self.rng.random(len(rater)) < np.asarray([self.specs[i].mistake for i in rater])
        return np.where(flip, 1 - unsafe, unsafe)

    def _answer(self, r0: np.ndarray, r1: np.ndarray, rater: np.ndarray, top: np.ndarray) -> np.ndarray:
        beta = np.asarray([self.specs[i].beta for i in rater])
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
        return {"rng": self.rng.bit_generator.state, "specs": [asdict(s) for s in self.specs]}

    def load_state_dict(self, st: dict) -> None:
        self.rng.bit_generator.state = st["rng"]

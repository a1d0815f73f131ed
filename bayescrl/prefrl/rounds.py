"""Query rounds: pick pairs of buffered segments (:mod:`~bayescrl.prefrl.queries`), have raters answer, and
feed the answers to the reward posterior (or, with ``cost: learned``, to each cost channel's posterior)."""

from __future__ import annotations

import numpy as np
import torch

from bayescrl.prefrl.queries import select_pairs
from bayescrl.prefrl.segments import SegmentBuffer, Segments
from bayescrl.prefrl.spec import PreferenceSpec
from bayescrl.raters import EQUAL, SKIP, RaterPool


class QueryRounds:
    """Counts the queries asked (``num_queries``, ``answers``, ``rounds``) and updates the posteriors."""

    def __init__(
        self,
        spec: PreferenceSpec,
        posterior,
        buffer: SegmentBuffer,
        raters: RaterPool,
        gen: torch.Generator,
        cost_posteriors: list | None = None,
        cost_raters: RaterPool | None = None,
    ):
        self.spec, self.posterior, self.buffer, self.raters, self.gen = spec, posterior, buffer, raters, gen
        self.cost_posteriors, self.cost_raters = cost_posteriors or [], cost_raters
        self.num_queries = 0  # answered queries (labels asked for), including skips and "equal"
        self.answers = {"labels": 0, "skip": 0, "equal": 0}
        self.rounds: list[dict] = []
        self.num_cost_queries = 0

    def due(self, iteration: int) -> bool:
        """A reward round is due at this iteration (its turn, budget left, two segments to compare)."""
        q = self.spec.queries
        return iteration % q.every == 0 and self.num_queries < q.total and len(self.buffer) >= 2

    def cost_due(self, iteration: int) -> bool:
        q = self.spec.cost_queries
        return iteration % q.every == 0 and self.num_cost_queries < q.total

    def select(self) -> np.ndarray:
        """Row indices (n, 2) into the buffer of this round's query pairs."""
        s = self.spec
        n = min(s.queries.per_round, s.queries.total - self.num_queries)
        returns = self.posterior.returns(self.buffer.data, max(s.posterior_samples, 2))
        beta = float(np.mean(self.posterior.beta))
        pairs = select_pairs(
            s.queries.select, returns, n, self.gen, beta=beta, candidates=s.queries.candidates
        )
        return pairs.numpy()

    def simulated_round(self, iteration: int) -> None:
        """Pick pairs, have the simulated raters answer, update the posterior."""
        data = self.buffer.data
        pairs = self.select()
        s0, s1 = data.take(pairs[:, 0]), data.take(pairs[:, 1])
        who = self.raters.draw_raters(len(pairs))
        y = self.raters.answer(s0, s1, who)
        self.ingest(s0, s1, y, who, iteration)

    def ingest(self, s0: Segments, s1: Segments, y: np.ndarray, who: np.ndarray, iteration: int) -> None:
        """Record answers ``y`` (0, 1, ``EQUAL``, ``SKIP``) of raters ``who`` and update the posterior."""
        self.num_queries += len(y)
        use = (y == 0) | (y == 1)
        self.answers["labels"] += int(use.sum())
        self.answers["skip"] += int((y == SKIP).sum())
        self.answers["equal"] += int((y == EQUAL).sum())
        if use.any():
            self.posterior.add_segments(
                s0.take(np.flatnonzero(use)), s1.take(np.flatnonzero(use)), y[use], who[use]
            )
            self.posterior.update()
        rec = {"iteration": iteration, "num_queries": self.num_queries, **self.posterior.summary()}
        self.rounds.append(rec)

    def cost_round(self) -> None:
        """Per cost channel: ask the cost raters which of two segments is costlier and whether each is
        unsafe (its cost above the tolerance); update that channel's posterior."""
        s, data = self.spec, self.buffer.data
        if data is None or len(data) < 2:
            return
        n = min(s.cost_queries.per_round, s.cost_queries.total - self.num_cost_queries)
        for j, cp in enumerate(self.cost_posteriors):
            returns = cp.returns(data, max(s.posterior_samples, 2))
            beta = float(np.mean(cp.beta))
            pairs = select_pairs(
                s.cost_queries.select, returns, n, self.gen, beta=beta, candidates=s.cost_queries.candidates
            ).numpy()
            s0, s1 = data.take(pairs[:, 0]), data.take(pairs[:, 1])
            who = self.cost_raters.draw_raters(len(pairs))
            y = self.cost_raters.answer_costs(s0, s1, who, j)
            use = np.flatnonzero((y == 0) | (y == 1))
            if use.size:
                cp.add_comparisons(s0.take(use), s1.take(use), y[use], who[use])
            for seg in (s0, s1):
                cp.add_safety(seg, self.cost_raters.judge_safety(seg, who, j, cp.threshold), who)
            cp.update()
        self.num_cost_queries += n

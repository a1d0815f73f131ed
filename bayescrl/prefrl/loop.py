"""The learning loop: rollout → queries → posterior update → reward draw → one constrained-optimiser step.

:class:`PreferenceLearner` is a :class:`~bayescrl.constrained.core.adapter.RewardAdapter`: it attaches to any
registered :class:`~bayescrl.constrained.core.base.OnPolicyAlgorithm` with ``set_reward_adapter`` and reads
the optimiser only through its :class:`~bayescrl.constrained.core.adapter.AlgorithmView`. On every rollout it

1. computes φ(s_t, a_t) for all steps in one batched call and cuts the rollout into segments
   (:mod:`~bayescrl.prefrl.segments`), kept in a buffer of recent segments;
2. every ``queries.every`` iterations, while the budget lasts, picks ``queries.per_round`` pairs
   (:mod:`~bayescrl.prefrl.queries`), has the simulated raters answer (:mod:`~bayescrl.raters.simulated`) and
   updates the posterior (warm-started; :mod:`~bayescrl.prefrl.reward_model`, or the MLP ensemble of
   :mod:`~bayescrl.prefrl.ensemble`) — or, with ``labels: external``, writes the pairs to
   ``OUT/queries/pending.json`` and stops training until people's answers come back (``--resume``);
3. replaces the env reward of the rollout by the learned one — ``thompson``: the reward under a posterior
   draw, held for ``thompson_hold`` iterations (posterior sampling, chapter `PSPL`); ``mean``: the posterior
   mean; ``lcb``: a lower posterior quantile of each step's reward (risk-averse);
4. with ``cost: learned``, asks the cost raters too and replaces the env costs by an upper posterior
   quantile of the learned cost (:class:`~bayescrl.prefrl.reward_model.CostPosterior`), including the
   episode costs the optimiser's constraint estimates use.

The env's reward (and, with a learned cost, its cost) reaches only the simulated raters and the reports:
the iteration records' ``ep_return`` / ``ep_costs`` are the true ones, ``learned_ep_costs`` what the
optimiser saw.

Each job is its own module: building the posterior (:mod:`~bayescrl.prefrl.build`), relabelling
(:mod:`~bayescrl.prefrl.relabel`), query rounds (:mod:`~bayescrl.prefrl.rounds`), label files
(:mod:`~bayescrl.prefrl.label_files`) and reports (:mod:`~bayescrl.prefrl.report`); this one wires them.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from bayescrl.constrained.core.adapter import AlgorithmView, BaseRewardAdapter
from bayescrl.constrained.core.base import OnPolicyAlgorithm
from bayescrl.constrained.core.callbacks import Checkpointer, MetricsWriter, ProgressBar, ResultsWriter
from bayescrl.constrained.core.rollout import RolloutBatch
from bayescrl.constrained.registry import get_algorithm
from bayescrl.inference.rater_report import save_plot
from bayescrl.prefrl.build import (
    build_cost_posteriors,
    build_features,
    build_reward_posterior,
    check_segment_length,
    cost_thresholds,
)
from bayescrl.prefrl.build import load_offline as _load_offline
from bayescrl.prefrl.label_files import LabelFiles
from bayescrl.prefrl.relabel import Relabeller, pearson, true_estimates
from bayescrl.prefrl.report import PreferenceReport
from bayescrl.prefrl.rounds import QueryRounds
from bayescrl.prefrl.segments import SegmentBuffer, cut_segments
from bayescrl.prefrl.spec import PreferenceSpec, parse_preference_spec
from bayescrl.raters import RaterPool
from bayescrl.utils.errors import DataError
from bayescrl.utils.io import to_jsonable

PREFS_STATE = "prefs_state.pt"
__all__ = ["PREFS_STATE", "PreferenceLearner", "train_with_preferences", "_load_offline"]


class PreferenceLearner(BaseRewardAdapter):
    """Learn the reward from preferences while ``algo`` optimises it under the env's true constraints.

    Built on ``algo`` (an :class:`~bayescrl.constrained.core.base.OnPolicyAlgorithm`), it attaches itself as
    the algorithm's reward adapter; ``algo.learn(steps)`` then trains on the learned reward."""

    def __init__(
        self,
        algo: OnPolicyAlgorithm,
        spec: PreferenceSpec | dict | str | Path,
        seed: int | None = None,
        out_dir: str | Path | None = None,
    ):
        self.spec = spec if isinstance(spec, PreferenceSpec) else parse_preference_spec(spec)
        s = self.spec
        self.algo = algo  # the optimiser being driven (read through self.view only)
        self.view: AlgorithmView = algo.view()
        view = self.view
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.seed = view.seed if seed is None else int(seed)
        check_segment_length(s.segment_length, view)
        self.record_info = "features" if s.features == "env" else None
        self.features = build_features(s, view, self.seed)
        d = self.features.dim
        self.raters = RaterPool(list(s.raters), d, seed=self.seed + 1)
        self.posterior = build_reward_posterior(s, d, self.seed + 2)
        self.cost_posteriors: list = []
        self.cost_raters = None
        if s.cost == "learned":
            self.cost_raters = RaterPool(list(s.cost_raters), d, seed=self.seed + 4)
            self.cost_thresholds = cost_thresholds(s, view)
            self.cost_posteriors = build_cost_posteriors(s, d, self.cost_thresholds, self.seed + 5)
        self.buffer = SegmentBuffer(s.buffer_size)
        self.gen = torch.Generator().manual_seed(self.seed + 3)
        self.queries = QueryRounds(
            s, self.posterior, self.buffer, self.raters, self.gen, self.cost_posteriors, self.cost_raters
        )
        self.labels = LabelFiles(self.out_dir, [r.id for r in s.raters], s.segment_length)
        discrete = isinstance(view.action_space, gym.spaces.Discrete)
        self.relabeller = Relabeller(s, self.features, discrete, view.num_envs, view.num_costs)
        self.report = PreferenceReport(s.cost == "learned")
        self.true_estimates: tuple[float, list[float]] | None = None
        self.last_corr = float("nan")
        self.update_seconds = 0.0
        self._stop = False
        algo.set_reward_adapter(self)

    # ------------------------------------------------------------------ what the parts hold
    @property
    def num_queries(self) -> int:
        """Answered queries (labels asked for), including skips and "equal"."""
        return self.queries.num_queries

    @property
    def num_cost_queries(self) -> int:
        return self.queries.num_cost_queries

    @property
    def answers(self) -> dict:
        return self.queries.answers

    @property
    def rounds(self) -> list[dict]:
        return self.queries.rounds

    @property
    def curve(self) -> list[dict]:
        return self.report.curve

    @property
    def draw(self):
        """The posterior draw the optimiser currently sees (θ̃, or an ensemble member)."""
        return self.relabeller.draw

    @property
    def pending(self) -> list[dict]:
        """Queries waiting for people's labels (``labels: external``)."""
        return self.labels.pending

    @property
    def waiting(self) -> int:
        """Number of queries waiting for people's labels."""
        return len(self.labels.pending)

    def step_features(self, roll: RolloutBatch) -> torch.Tensor:
        """φ(s_t, a_t) for every step of the rollout: (T, n, d) float64."""
        return self.relabeller.step_features(roll)

    # ------------------------------------------------------------------ the reward adapter
    def relabel(self, roll: RolloutBatch) -> RolloutBatch:
        """``roll`` with the env reward (and, with ``cost: learned``, the costs and episode costs) replaced
        by the learned ones; the buffer, the posterior and the queries advance on the way."""
        t0 = time.perf_counter()
        s, it = self.spec, self.view.iteration
        phi = self.relabeller.step_features(roll)
        true_r = roll.rewards[..., 0].copy()
        segs = cut_segments(
            phi,
            true_r,
            roll.rewards[..., 1:],
            roll.ended,
            roll.raw,
            roll.actions,
            s.segment_length,
            self.buffer.next_id,
            it,
            perceive=self.raters.perceive,
            keep_steps=self.posterior.needs_steps,
        )
        self.buffer.add(segs)
        flat = phi.reshape(-1, phi.shape[-1])
        post = self.posterior
        # correlation with the true reward on this rollout's states, before any label about them (held out)
        self.last_corr = pearson(post.reward(flat, post.mean_draw()).cpu().numpy(), true_r.reshape(-1))
        if self.queries.due(it):
            self.query_round()
        learned = self.relabeller.reward(post, flat, it)
        self.true_estimates = true_estimates(roll, true_r, self.view.horizon)
        rewards, ep_costs = roll.rewards.copy(), roll.ep_costs
        if s.cost == "learned":
            if self.queries.cost_due(it):
                self.queries.cost_round()
            learned_c = self.relabeller.costs(self.cost_posteriors, flat, rewards[..., 1:].shape)
            rewards[..., 1:] = learned_c
            ep_costs = self.relabeller.episode_costs(learned_c, roll.ended)
        rewards[..., 0] = learned.cpu().numpy().reshape(true_r.shape)
        self.update_seconds += time.perf_counter() - t0
        return dataclasses.replace(roll, rewards=rewards, ep_costs=ep_costs)

    def on_iteration(self, view: AlgorithmView, record: dict) -> None:
        """Add the preference fields to the iteration record and the curve; save the preference state
        next to each of the algorithm's periodic checkpoints."""
        self.report.on_iteration(
            record, self.num_queries, self.last_corr, self.true_estimates, self.num_cost_queries
        )
        every = view.checkpoint_every
        if self.out_dir is not None and every and view.iteration % every == 0:
            self.save(self.out_dir)

    def should_stop(self) -> bool:
        """True once after a round of queries went out to people (training waits for their labels)."""
        stop, self._stop = self._stop, False
        return stop

    # ------------------------------------------------------------------ queries
    def query_round(self) -> None:
        """Pick pairs and collect answers (simulated raters now; people: write the queries and stop)."""
        if self.spec.labels == "external":
            if not self.labels.pending:
                self.request_labels()
            return
        self.queries.simulated_round(self.view.iteration)

    def request_labels(self) -> None:
        """Write this round's queries to ``OUT/queries/pending.json`` and stop training after this
        iteration; ``bayescrl prefs export/import`` and ``train --resume`` continue from there."""
        self.labels.check_folder()
        pairs = self.queries.select()
        self.labels.write_pending(
            pairs, self.buffer.data, len(self.rounds) + 1, self.view.env_id, self.view.iteration
        )
        self._stop = True

    def ingest(self, s0, s1, y: np.ndarray, who: np.ndarray) -> None:
        """Record answers ``y`` (0, 1, ``EQUAL``, ``SKIP``) of raters ``who`` and update the posterior."""
        self.queries.ingest(s0, s1, y, who, self.view.iteration)

    def ingest_answers(self) -> int:
        """Feed ``OUT/queries/answers.json`` (written by ``bayescrl prefs import``) to the posterior; the
        queries it answers leave the pending list. Returns the number of answers used."""
        return self.labels.take_answers(self.buffer, self.ingest)

    # ------------------------------------------------------------------ reports
    def results(self) -> dict:
        return {
            "num_queries": self.num_queries,
            "answers": dict(self.answers),
            "reward_correlation": self.report.final_correlation(),
            "competence": (
                {"all raters": self.posterior.beta[0]}
                if self.spec.competence == "ignore"
                else dict(zip(self.posterior.rater_ids, self.posterior.beta, strict=True))
            ),
            **({"raters": rows} if (rows := getattr(self.posterior, "rater_rows", list)()) else {}),
            "posterior_converged": self.posterior.diagnostics["converged"],
            **({"num_cost_queries": self.num_cost_queries} if self.cost_posteriors else {}),
            "preference_seconds": self.update_seconds,
            "preferences": self.spec.to_dict(),
        }

    def write_results(self, out_dir: str | Path, metrics: dict) -> dict:
        """Adds ``final_true_return``, ``final_true_costs``, ``num_queries``, ``reward_correlation`` to
        ``metrics`` (and ``metrics.json``); writes ``preference_rounds.json`` and
        ``preference_curves.png`` (and ``rater_competence.png`` of a hierarchical rater pool)."""
        metrics = self.report.write(out_dir, metrics, self.results(), self.rounds, self.view)
        if getattr(self.posterior, "pool", None) is not None:
            save_plot(self.posterior.pool, Path(out_dir))
        return metrics

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict:
        """Tensors and plain JSON-like values only, so :meth:`load` can use ``weights_only=True``."""
        buf = self.buffer.state_dict()
        if buf["data"] is not None:
            buf["data"] = {k: torch.as_tensor(v, device="cpu") for k, v in buf["data"].items()}
        return to_jsonable(
            {
                "num_queries": self.num_queries,
                "answers": self.answers,
                "rounds": self.rounds,
                "curve": self.curve,
                "raters": self.raters.state_dict(),
                "pending": self.pending,
            }
        ) | {
            "posterior": self.posterior.state_dict(),
            "buffer": buf,
            "gen": self.gen.get_state(),
            "cost": {
                "posteriors": [cp.state_dict() for cp in self.cost_posteriors],
                "num_queries": self.num_cost_queries,
                "acc": torch.as_tensor(self.relabeller.cost_acc, device="cpu")
                if self.cost_posteriors
                else None,
                "raters": to_jsonable(self.cost_raters.state_dict()) if self.cost_posteriors else None,
            },
        }

    def save(self, out_dir: str | Path) -> None:
        torch.save(self.state_dict(), Path(out_dir) / PREFS_STATE)

    def load(self, out_dir: str | Path) -> None:
        """Restore a saved state (labels, buffer, generators), refit the posterior, take in new answers."""
        path = Path(out_dir) / PREFS_STATE
        try:
            st = torch.load(path, weights_only=True)  # never unpickles code from a shared run folder
        except Exception as exc:
            raise DataError("resume", str(path), f"corrupt or unsafe preference state: {exc}") from None
        buf = dict(st["buffer"])
        if buf["data"] is not None:
            buf["data"] = {k: v.numpy() for k, v in buf["data"].items()}
        self.buffer.load_state_dict(buf)
        self.gen.set_state(st["gen"])
        self.raters.load_state_dict(st["raters"])
        q = self.queries
        q.num_queries, q.answers = st["num_queries"], st["answers"]
        q.rounds, self.report.curve = st["rounds"], st["curve"]
        self.labels.pending = list(st.get("pending", []))
        self.posterior.load_state_dict(st["posterior"])
        cost = st["cost"]
        for cp, cst in zip(self.cost_posteriors, cost["posteriors"], strict=True):
            cp.load_state_dict(cst)
        q.num_cost_queries = cost["num_queries"]
        if self.cost_posteriors:
            self.cost_raters.load_state_dict(cost["raters"])
            acc = self.relabeller.cost_acc  # envs reset unless restored exactly: episodes start anew
            exact = self.view.exact_resume
            self.relabeller.cost_acc = cost["acc"].numpy().copy() if exact else np.zeros_like(acc)
        self.ingest_answers()


def train_with_preferences(
    algo: str,
    env,
    preferences: PreferenceSpec | dict | str | Path,
    *,
    total_steps: int,
    cost_limits=None,
    seed: int = 0,
    config: dict | None = None,
    env_kwargs: dict | None = None,
    out_dir: str | Path | None = None,
    device: str = "cpu",
    progress: bool = False,
) -> dict:
    """Train ``algo`` on ``env`` with the reward learned from preferences; returns the metrics.

    >>> m = train_with_preferences("ecop", "bayescrl/SmallCMDP-v0", {"raters": [{"id": "a", "beta": 5}]},
    ...                            total_steps=2000, env_kwargs={"horizon": 10})  # doctest: +SKIP
    """
    import tempfile

    spec = preferences if isinstance(preferences, PreferenceSpec) else parse_preference_spec(preferences)
    agent = get_algorithm(algo)(env, cost_limits, seed, config or {}, device=device, env_kwargs=env_kwargs)
    tmp = None
    if out_dir is None:
        tmp = tempfile.TemporaryDirectory()
        out_dir = tmp.name
    learner = PreferenceLearner(agent, spec, out_dir=out_dir)
    try:
        results = ResultsWriter(out_dir)  # after the last checkpoint, as in ``bayescrl train``
        callbacks = [MetricsWriter(out_dir), Checkpointer(out_dir), *([ProgressBar()] if progress else [])]
        agent.learn(total_steps, progress=False, callback=[*callbacks, results])
        learner.save(out_dir)
        metrics = learner.write_results(out_dir, results.metrics)
    finally:
        agent.close()
        if tmp is not None:
            tmp.cleanup()
    metrics["_learner"] = learner
    return metrics

"""The learning loop: rollout → queries → posterior update → reward draw → one constrained-optimiser step.

:class:`PreferenceLearner` attaches to any registered
:class:`~bayescrl.constrained.core.base.OnPolicyAlgorithm` through its ``reward_relabel`` hook; on
every rollout it

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
"""

from __future__ import annotations

import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from bayescrl.constrained.core.envs import env_horizon
from bayescrl.inference.rater_report import save_plot
from bayescrl.prefrl.queries import select_pairs
from bayescrl.prefrl.reward_model import CostPosterior, LinearRewardPosterior
from bayescrl.prefrl.segments import SegmentBuffer, cut_segments
from bayescrl.prefrl.spec import PreferenceSpec, parse_preference_spec
from bayescrl.raters import EQUAL, SKIP, RaterPool
from bayescrl.utils.errors import ConfigError, DataError
from bayescrl.utils.io import check_keys, load_json, load_yaml, to_jsonable, write_json

PREFS_STATE = "prefs_state.pt"


def _probe_env_features(factory) -> int | None:
    env = factory()
    try:
        _, info = env.reset(seed=0)
        if "features" not in info:
            _, _, _, _, info = env.step(env.action_space.sample())
        f = info.get("features")
        return None if f is None else int(np.asarray(f).size)
    finally:
        env.close()


class PreferenceLearner:
    """Learn the reward from preferences while ``algo`` optimises it under the env's true constraints."""

    def __init__(
        self,
        algo,
        spec: PreferenceSpec | dict | str | Path,
        seed: int | None = None,
        out_dir: str | Path | None = None,
    ):
        from bayescrl.prefrl.features import make_feature_map

        self.spec = spec if isinstance(spec, PreferenceSpec) else parse_preference_spec(spec)
        s = self.spec
        self.algo = algo
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.seed = algo.seed if seed is None else int(seed)
        _check_segment_length(algo, s.segment_length)
        obs_space = algo.envs.single_observation_space
        act_space = algo.envs.single_action_space
        env_dim = None
        if s.features == "env":
            env_dim = _probe_env_features(algo.factory)
            if env_dim is None:
                raise ConfigError(
                    "preferences.features", "env", f"env {algo.env_id!r} does not report info['features']"
                )
            algo.collector.record_info = "features"
        self.features = make_feature_map(
            s.features,
            obs_space,
            act_space,
            rff_width=s.rff_width,
            rff_lengthscale=s.rff_lengthscale,
            seed=self.seed,
            env_feature_dim=env_dim,
            device=algo.device,
        )
        d = self.features.dim
        self.discrete_actions = isinstance(act_space, gym.spaces.Discrete)
        self.raters = RaterPool(list(s.raters), d, seed=self.seed + 1)
        rater_ids = [r.id for r in s.raters]
        beta = [r.beta for r in s.raters]
        lam = [r.lam for r in s.raters]
        self.offline = _load_offline(s.offline, d, rater_ids) if s.offline else None
        if self.offline is not None:
            rater_ids.append(self.offline["id"])
            beta.append(self.offline["beta"])
            lam.append(self.offline["lam"])
        common = dict(
            beta=beta,
            lam=lam,
            competence=s.competence,
            prior_scale=s.prior_scale,
            learner_lam=s.learner_lam,
            seed=self.seed + 2,
        )
        if s.reward_model == "ensemble":
            from bayescrl.prefrl.ensemble import EnsembleRewardPosterior

            self.posterior = EnsembleRewardPosterior(
                d, rater_ids, members=s.ensemble_size, hidden=s.hidden, **common
            )
        else:
            self.posterior = LinearRewardPosterior(
                d,
                rater_ids,
                engine=s.engine,
                engine_options=s.engine_options,
                num_samples=s.posterior_samples,
                **common,
            )
            if self.offline is not None:  # competence: infer: the offline file's rater anchors the pool
                self.posterior.known_raters[len(rater_ids) - 1] = (self.offline["beta"], self.offline["lam"])
        if self.offline is not None:
            o = self.offline
            self.posterior.add(
                o["x0"], o["x1"], o["y"], np.full(len(o["y"]), len(rater_ids) - 1), offline=True
            )
            self.posterior.update()
        # cost: learned -- one linear posterior per cost channel, from the cost raters' safety judgements
        self.cost_posteriors: list[CostPosterior] = []
        self.num_cost_queries = 0
        if s.cost == "learned":
            self.cost_raters = RaterPool(list(s.cost_raters), d, seed=self.seed + 4)
            self.cost_thresholds = self._cost_thresholds()
            self.cost_posteriors = [
                CostPosterior(
                    d,
                    [r.id for r in s.cost_raters],
                    beta=[r.beta for r in s.cost_raters],  # known: it fixes the cost's scale
                    lam=[r.lam for r in s.cost_raters],
                    threshold=self.cost_thresholds[j],
                    prior_scale=s.prior_scale,
                    engine=s.engine,
                    engine_options=s.engine_options,
                    num_samples=s.posterior_samples,
                    seed=self.seed + 5 + j,
                )
                for j in range(algo.m)
            ]
            self.cost_acc = np.zeros((algo.envs.num_envs, algo.m))  # learned cost of each running episode
        self.true_estimates: tuple[float, list[float]] | None = None
        self.buffer = SegmentBuffer(s.buffer_size)
        self.gen = torch.Generator().manual_seed(self.seed + 3)
        self.num_queries = 0  # answered queries (labels asked for), including skips and "equal"
        self.answers = {"labels": 0, "skip": 0, "equal": 0}
        self.rounds: list[dict] = []
        self.curve: list[dict] = []
        self.last_corr = float("nan")
        self.draw = None  # the posterior draw the optimiser currently sees (θ̃, or an ensemble member)
        self.pending: list[dict] = []  # queries waiting for people's labels (labels: external)
        self.update_seconds = 0.0
        algo.reward_relabel = self.relabel

    # ------------------------------------------------------------------ the hook
    def step_features(self, roll: dict) -> torch.Tensor:
        """φ(s_t, a_t) for every step of the rollout: (T, n, d) float64."""
        raw = roll["raw"]
        T, n = raw.shape[:2]
        obs = torch.as_tensor(raw.reshape(T * n, -1), dtype=torch.float64)
        acts = roll["actions"]
        a = torch.as_tensor(acts.reshape(T * n, *acts.shape[2:]))
        a = a.long() if self.discrete_actions else a.double()
        envf = roll.get("features")
        envf = None if envf is None else torch.as_tensor(envf.reshape(T * n, -1), dtype=torch.float64)
        phi = self.features(obs, a, envf)
        if phi.shape != (T * n, self.features.dim):
            raise DataError(
                "preferences.features",
                self.features.name,
                f"gave shape {tuple(phi.shape)}, expected {(T * n, self.features.dim)}",
            )
        if not torch.isfinite(phi).all():
            bad = int((~torch.isfinite(phi)).any(1).nonzero()[0, 0])
            raise DataError(
                "features",
                phi[bad].tolist(),
                f"non-finite reward features at step {bad // n} of env {bad % n}",
            )
        return phi.reshape(T, n, -1)

    def relabel(self, roll: dict) -> None:
        """Replace ``roll["rewards"][..., 0]`` (the env reward) by the learned reward, in place."""
        t0 = time.perf_counter()
        s = self.spec
        phi = self.step_features(roll)
        true_r = roll["rewards"][..., 0].copy()
        segs = cut_segments(
            phi,
            true_r,
            roll["rewards"][..., 1:],
            roll["ended"],
            roll["raw"],
            roll["actions"],
            s.segment_length,
            self.buffer.next_id,
            self.algo.iteration,
            perceive=self.raters.perceive,
            keep_steps=self.posterior.needs_steps,
        )
        self.buffer.add(segs)
        flat = phi.reshape(-1, phi.shape[-1])
        post = self.posterior
        # correlation with the true reward on this rollout's states, before any label about them (held out)
        mean_r = post.reward(flat, post.mean_draw()).numpy()
        self.last_corr = _pearson(mean_r, true_r.reshape(-1))
        it = self.algo.iteration
        if it % s.queries.every == 0 and self.num_queries < s.queries.total and len(self.buffer) >= 2:
            self.query_round()
        if s.reward == "thompson":
            if self.draw is None or it % s.thompson_hold == 0:
                self.draw = post.draw()  # held for thompson_hold iterations
            learned = post.reward(flat, self.draw)
        elif s.reward == "mean":
            self.draw = post.mean_draw()
            learned = post.reward(flat, self.draw)
        else:
            learned = post.quantile_reward(flat, s.lcb_quantile)
        self.true_estimates = self._true_estimates(roll, true_r)
        if s.cost == "learned":
            if it % s.cost_queries.every == 0 and self.num_cost_queries < s.cost_queries.total:
                self.cost_query_round()
            upper = [cp.quantile_cost(flat, s.cost_quantile) for cp in self.cost_posteriors]
            learned_c = torch.stack(upper, -1).numpy().reshape(roll["rewards"][..., 1:].shape)
            roll["rewards"][..., 1:] = learned_c
            roll["ep_costs"] = self._episode_costs(learned_c, roll["ended"])
        roll["rewards"][..., 0] = learned.numpy().reshape(true_r.shape)
        self.update_seconds += time.perf_counter() - t0

    def _true_estimates(self, roll: dict, true_r: np.ndarray) -> tuple[float, list[float]]:
        """True J and J_C of this rollout for the reports, as the optimiser would estimate them."""
        if len(roll["ep_returns"]):
            return float(roll["ep_returns"].mean()), roll["ep_costs"].mean(0).tolist()
        h = self.algo.horizon
        return float(true_r.mean() * h), (
            roll["rewards"][..., 1:].reshape(-1, self.algo.m).mean(0) * h
        ).tolist()

    def _episode_costs(self, learned_c: np.ndarray, ended: np.ndarray) -> np.ndarray:
        """Learned cost of every episode that ended in this rollout, in the collector's order."""
        out = []
        for t in range(ended.shape[0]):
            self.cost_acc += learned_c[t]
            idx = np.flatnonzero(ended[t])
            if idx.size:
                out.append(self.cost_acc[idx].copy())
                self.cost_acc[idx] = 0.0
        return np.concatenate(out) if out else np.zeros((0, self.algo.m))

    def _cost_thresholds(self) -> list[float]:
        """The raters' per-segment tolerance b per cost channel: ``cost_threshold`` when given, else the
        limit's share of a segment (d·L/H for episodic limits, d·L for per-step average-cost limits)."""
        s, algo = self.spec, self.algo
        if s.cost_threshold is not None:
            return [float(s.cost_threshold)] * algo.m
        per_step = getattr(algo.config, "advantage", "") == "average"
        scale = s.segment_length if per_step else s.segment_length / algo.horizon
        return [float(d) * scale for d in algo.cost_limits]

    def cost_query_round(self) -> None:
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

    def query_round(self) -> None:
        """Pick pairs and collect answers (simulated raters now; people: write the queries and stop)."""
        if self.spec.labels == "external":
            if not self.pending:
                self.request_labels()
            return
        data = self.buffer.data
        pairs = self.select()
        s0, s1 = data.take(pairs[:, 0]), data.take(pairs[:, 1])
        who = self.raters.draw_raters(len(pairs))
        y = self.raters.answer(s0, s1, who)
        self.ingest(s0, s1, y, who)

    def ingest(self, s0, s1, y: np.ndarray, who: np.ndarray) -> None:
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
        rec = {"iteration": self.algo.iteration, "num_queries": self.num_queries, **self.posterior.summary()}
        self.rounds.append(rec)

    # ------------------------------------------------------------------ people as raters
    def request_labels(self) -> None:
        """Write this round's queries to ``OUT/queries/pending.json`` and stop training after this
        iteration; ``bayescrl prefs export/import`` and ``train --resume`` continue from there."""
        if self.out_dir is None:
            raise ConfigError("preferences.labels", "external", "needs a run folder (out_dir)")
        pairs = self.select()
        data = self.buffer.data
        rnd = len(self.rounds) + 1
        self.pending = [
            {"id": f"r{rnd}q{k}", "seg0": int(data.ids[i]), "seg1": int(data.ids[j])}
            for k, (i, j) in enumerate(pairs)
        ]

        def seg(row: int) -> dict:
            return {
                "segment": int(data.ids[row]),
                "obs": data.obs[row].tolist(),
                "actions": data.actions[row].reshape(data.actions.shape[1], -1).tolist(),
                "features": data.phi[row].tolist(),
            }

        qdir = self.out_dir / "queries"
        qdir.mkdir(parents=True, exist_ok=True)
        write_json(
            qdir / "pending.json",
            {
                "env": str(self.algo.env_id),
                "round": rnd,
                "iteration": int(self.algo.iteration),
                "segment_length": self.spec.segment_length,
                "raters": [r.id for r in self.spec.raters],
                "observation_names": None,
                "action_names": None,
                "queries": [
                    {"id": q["id"], "left": seg(i), "right": seg(j)}
                    for q, (i, j) in zip(self.pending, pairs, strict=True)
                ],
            },
        )
        self.algo.stop_requested = True

    @property
    def waiting(self) -> int:
        """Number of queries waiting for people's labels."""
        return len(self.pending)

    def ingest_answers(self) -> int:
        """Feed ``OUT/queries/answers.json`` (written by ``bayescrl prefs import``) to the posterior; the
        queries it answers leave the pending list. Returns the number of answers used."""
        path = None if self.out_dir is None else self.out_dir / "queries" / "answers.json"
        if not self.pending or path is None or not path.exists():
            return 0
        fix = f"delete it and import the labels again (bayescrl prefs import {self.out_dir} LABELS.json)"
        raw = load_json(path, "answers.json", kind=dict, recover=fix)
        rnd = int(self.pending[0]["id"][1:].split("q")[0])
        if raw.get("round") != rnd:
            raise DataError("answers.round", raw.get("round"), f"the pending queries are round {rnd}")
        by_id = {q["id"]: q for q in self.pending}
        ids = [r.id for r in self.spec.raters]
        rows = []
        answers = raw.get("answers", [])
        if not isinstance(answers, list):
            raise DataError("answers.json", str(path), f"'answers' must be a list; {fix}")
        for i, a in enumerate(answers):
            if not isinstance(a, dict):
                raise DataError("answers", a, f"each answer is {{query, y, rater}}; {fix}", i)
            q = by_id.get(a.get("query"))
            if q is None:
                raise DataError("answers.query", a.get("query"), "not a pending query", i)
            if a.get("y") not in (0, 1, EQUAL, SKIP) or a.get("rater") not in ids:
                raise DataError("answers", a, "y must be 0, 1, 2 or -1 and rater a spec rater", i)
            rows.append((q, int(a["y"]), ids.index(a["rater"])))
        if rows:
            s0 = self.buffer.by_id([q["seg0"] for q, _, _ in rows])
            s1 = self.buffer.by_id([q["seg1"] for q, _, _ in rows])
            self.ingest(s0, s1, np.array([y for _, y, _ in rows]), np.array([w for _, _, w in rows]))
        done = {q["id"] for q, _, _ in rows}
        self.pending = [q for q in self.pending if q["id"] not in done]
        path.replace(path.with_name(f"answered_round{rnd}.json"))
        if not self.pending:
            (path.parent / "pending.json").unlink(missing_ok=True)
        return len(rows)

    # ------------------------------------------------------------------ reports
    def after_iteration(self, algo, record: dict) -> None:
        """``learn(callback=...)``: adds the preference fields to the iteration record and the curve."""
        record["num_queries"] = self.num_queries
        record["reward_correlation"] = self.last_corr
        if self.true_estimates is not None:  # the optimiser's J / J_C are on the learned scale
            if self.spec.cost == "learned":
                record["learned_ep_costs"] = record["ep_costs"]
                record["num_cost_queries"] = self.num_cost_queries
            record["ep_return"], record["ep_costs"] = self.true_estimates
        every = algo.config.checkpoint_every
        if self.out_dir is not None and every and algo.iteration % every == 0:
            self.save(self.out_dir)  # next to the algorithm's checkpoint of this iteration
        self.curve.append(
            {
                "iteration": record["iteration"],
                "env_steps": record["env_steps"],
                "num_queries": self.num_queries,
                "true_return": record["ep_return"],
                "true_costs": record["ep_costs"],
                "reward_correlation": self.last_corr,
            }
        )

    def results(self) -> dict:
        tail = [c["reward_correlation"] for c in self.curve[-max(1, len(self.curve) // 10) :]]
        tail = [c for c in tail if c == c]  # NaN before the first label (a constant learned reward)
        return {
            "num_queries": self.num_queries,
            "answers": dict(self.answers),
            "reward_correlation": float(np.mean(tail)) if tail else None,
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
        ``preference_curves.png``."""
        from bayescrl.utils.plotting import plt

        out = Path(out_dir)
        metrics = dict(metrics)
        metrics["final_true_return"] = metrics["final_return"]
        metrics["final_true_costs"] = metrics["final_costs"]
        metrics.update(self.results())
        write_json(out / "metrics.json", metrics)
        write_json(out / "preference_rounds.json", {"rounds": self.rounds, "curve": self.curve})
        if self.curve:
            p = plt()
            fig, axes = p.subplots(1, 3, figsize=(12, 3.2))
            x = [c["env_steps"] for c in self.curve]
            axes[0].plot(x, [c["true_return"] for c in self.curve])
            axes[0].set_title("true episodic return")
            axes[0].set_ylabel("return (sum of true rewards per episode)")
            limits, labels = self.algo.episode_cost_limits(), self.algo.episode_limit_labels()
            for i, (lim, label) in enumerate(zip(limits, labels, strict=True)):
                (line,) = axes[1].plot(x, [c["true_costs"][i] for c in self.curve], label=f"cost {i}")
                axes[1].axhline(lim, ls="--", color=line.get_color(), lw=1, label=f"cost {i} {label}")
            axes[1].set_title("true episodic cost (limit dashed)")
            axes[1].set_ylabel("cost (sum per episode)")
            if len(limits):
                axes[1].legend(fontsize=7)
            axes[2].plot(x, [c["reward_correlation"] for c in self.curve])
            axes[2].set_title("corr(learned, true reward)")
            axes[2].set_ylabel("Pearson correlation (-1 to 1)")
            for ax in axes:
                ax.set_xlabel("env steps")
                ax.grid(alpha=0.3)
            fig.tight_layout()
            fig.savefig(out / "preference_curves.png", dpi=90)
            p.close(fig)
        if getattr(self.posterior, "pool", None) is not None:
            save_plot(self.posterior.pool, out)
        return metrics

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict:
        """Tensors and plain JSON-like values only, so :meth:`load` can use ``weights_only=True``."""
        buf = self.buffer.state_dict()
        if buf["data"] is not None:
            buf["data"] = {k: torch.as_tensor(v) for k, v in buf["data"].items()}
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
                "acc": torch.as_tensor(self.cost_acc) if self.cost_posteriors else None,
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
        self.num_queries, self.answers = st["num_queries"], st["answers"]
        self.rounds, self.curve = st["rounds"], st["curve"]
        self.pending = list(st.get("pending", []))
        self.posterior.load_state_dict(st["posterior"])
        cost = st["cost"]
        for cp, cst in zip(self.cost_posteriors, cost["posteriors"], strict=True):
            cp.load_state_dict(cst)
        self.num_cost_queries = cost["num_queries"]
        if self.cost_posteriors:
            self.cost_raters.load_state_dict(cost["raters"])
            exact = getattr(self.algo, "exact_resume", True)  # envs reset on resume: episodes start anew
            self.cost_acc = cost["acc"].numpy().copy() if exact else np.zeros_like(self.cost_acc)
        self.ingest_answers()


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    den = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / den) if den > 0 else float("nan")


def _check_segment_length(algo, length: int) -> None:
    """Refuse a segment length that no rollout window can hold: longer than a rollout (per env), or than
    every episode (a segment lies within one episode), so that no query would ever be asked."""
    steps = int(algo.config.rollout_steps)
    if length > steps:
        why = f"longer than a rollout (config.rollout_steps = {steps}): no segment, so no query, ever"
        raise ConfigError("preferences.segment_length", length, why)
    if length > algo.horizon:
        known = algo.config.horizon or env_horizon(algo.factory)  # not the 1000-step fallback
        if known is not None and length > int(known):
            why = f"longer than an episode (horizon {int(known)}): no segment, so no query, ever"
            raise ConfigError("preferences.segment_length", length, why)


def _load_offline(path: str, d: int, rater_ids: list[str]) -> dict:
    """An offline preference file: ``{rater: {id, beta?, lam?}, records: [{x0: [...], x1: [...], y: 0|1}]}``
    with x0, x1 the segments' embeddings Φ in the spec's feature space (d numbers each)."""
    raw = load_yaml(path) if not str(path).endswith(".json") else load_json(path, "offline")
    if not isinstance(raw, dict):
        raise DataError("offline", path, "must be a mapping with 'rater' and 'records'")
    check_keys(raw, ("rater", "records"), "offline", error=DataError)
    rater = raw.get("rater") or {}
    if not isinstance(rater, dict):
        raise DataError("offline.rater", rater, "must be a mapping like {id: offline}")
    check_keys(rater, ("id", "beta", "lam"), "offline.rater", error=DataError)
    rid = rater.get("id", "offline")
    if rid in rater_ids:
        raise DataError("offline.rater.id", rid, "clashes with an online rater's id")
    beta = float(rater.get("beta", 1.0))
    lam = float(rater.get("lam", 1.0))
    recs = raw.get("records")
    if not isinstance(recs, list) or not recs:
        raise DataError("offline.records", recs, "must be a non-empty list")
    x0, x1, y = [], [], []
    for i, r in enumerate(recs):
        if not isinstance(r, dict):
            raise DataError("offline.records", r, "each record is {x0: [...], x1: [...], y: 0 or 1}", i)
        check_keys(r, ("x0", "x1", "y"), "offline.records", error=DataError, index=i)
        a, b = np.asarray(r.get("x0"), dtype=np.float64), np.asarray(r.get("x1"), dtype=np.float64)
        if a.shape != (d,) or b.shape != (d,):
            raise DataError("offline.records.x0", r.get("x0"), f"x0 and x1 need {d} numbers", i)
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            raise DataError("offline.records.x0", r.get("x0"), "must be finite", i)
        if r.get("y") not in (0, 1) or isinstance(r.get("y"), bool):
            raise DataError("offline.records.y", r.get("y"), "must be 0 or 1", i)
        x0.append(a)
        x1.append(b)
        y.append(int(r["y"]))
    return {"id": rid, "beta": beta, "lam": lam, "x0": np.stack(x0), "x1": np.stack(x1), "y": np.asarray(y)}


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

    from bayescrl.constrained.registry import get_algorithm

    spec = preferences if isinstance(preferences, PreferenceSpec) else parse_preference_spec(preferences)
    agent = get_algorithm(algo)(env, cost_limits, seed, config or {}, device=device, env_kwargs=env_kwargs)
    tmp = None
    if out_dir is None:
        tmp = tempfile.TemporaryDirectory()
        out_dir = tmp.name
    learner = PreferenceLearner(agent, spec, out_dir=out_dir)
    try:
        agent.learn(total_steps, out_dir=out_dir, progress=progress, callback=learner.after_iteration)
        learner.save(out_dir)
        metrics = learner.write_results(out_dir, agent.write_results(out_dir))
    finally:
        agent.close()
        if tmp is not None:
            tmp.cleanup()
    metrics["_learner"] = learner
    return metrics

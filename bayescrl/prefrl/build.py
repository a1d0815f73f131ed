"""Building the preference learner's parts from a spec: the feature map φ, the reward posterior (warm-started
by an offline preference file), the cost posteriors of ``cost: learned`` and their raters' tolerances."""

from __future__ import annotations

import numpy as np

from bayescrl.constrained.core.adapter import AlgorithmView
from bayescrl.prefrl.ensemble import EnsembleRewardPosterior
from bayescrl.prefrl.features import FeatureMap, make_feature_map
from bayescrl.prefrl.reward_model import CostPosterior, LinearRewardPosterior
from bayescrl.prefrl.spec import PreferenceSpec
from bayescrl.utils.errors import ConfigError, DataError
from bayescrl.utils.io import check_keys, load_json, load_yaml


def probe_env_features(factory) -> int | None:
    """Size of the env's ``info['features']`` (None when it reports none)."""
    env = factory()
    try:
        _, info = env.reset(seed=0)
        if "features" not in info:
            _, _, _, _, info = env.step(env.action_space.sample())
        f = info.get("features")
        return None if f is None else int(np.asarray(f).size)
    finally:
        env.close()


def check_segment_length(length: int, view: AlgorithmView) -> None:
    """Refuse a segment length that no rollout window can hold: longer than a rollout (per env), or than
    every episode (a segment lies within one episode), so that no query would ever be asked."""
    steps = view.rollout_steps
    if length > steps:
        why = f"longer than a rollout (config.rollout_steps = {steps}): no segment, so no query, ever"
        raise ConfigError("preferences.segment_length", length, why)
    if length > view.horizon:
        known = view.episode_horizon  # not the 1000-step fallback
        if known is not None and length > known:
            why = f"longer than an episode (horizon {known}): no segment, so no query, ever"
            raise ConfigError("preferences.segment_length", length, why)


def build_features(spec: PreferenceSpec, view: AlgorithmView, seed: int) -> FeatureMap:
    """The feature map φ(s, a) the spec names, on the optimiser's spaces."""
    env_dim = None
    if spec.features == "env":
        env_dim = probe_env_features(view.make_env)
        if env_dim is None:
            raise ConfigError(
                "preferences.features", "env", f"env {view.env_id!r} does not report info['features']"
            )
    return make_feature_map(
        spec.features,
        view.observation_space,
        view.action_space,
        rff_width=spec.rff_width,
        rff_lengthscale=spec.rff_lengthscale,
        seed=seed,
        env_feature_dim=env_dim,
        device=view.device,
    )


def build_reward_posterior(spec: PreferenceSpec, d: int, seed: int):
    """The reward posterior over ``d`` features (linear or MLP ensemble), one rater slot per spec rater
    plus the offline file's rater, warm-started with the offline records
    (Eq. `pref_logistic_trajectories`)."""
    rater_ids = [r.id for r in spec.raters]
    beta = [r.beta for r in spec.raters]
    lam = [r.lam for r in spec.raters]
    offline = load_offline(spec.offline, d, rater_ids) if spec.offline else None
    if offline is not None:
        rater_ids.append(offline["id"])
        beta.append(offline["beta"])
        lam.append(offline["lam"])
    common = dict(
        beta=beta,
        lam=lam,
        competence=spec.competence,
        prior_scale=spec.prior_scale,
        learner_lam=spec.learner_lam,
        seed=seed,
    )
    if spec.reward_model == "ensemble":
        post = EnsembleRewardPosterior(d, rater_ids, members=spec.ensemble_size, hidden=spec.hidden, **common)
    else:
        post = LinearRewardPosterior(
            d,
            rater_ids,
            engine=spec.engine,
            engine_options=spec.engine_options,
            num_samples=spec.posterior_samples,
            **common,
        )
        if offline is not None:  # competence: infer: the offline file's rater anchors the pool
            post.known_raters[len(rater_ids) - 1] = (offline["beta"], offline["lam"])
    if offline is not None:
        o = offline
        post.add(o["x0"], o["x1"], o["y"], np.full(len(o["y"]), len(rater_ids) - 1), offline=True)
        post.update()
    return post


def cost_thresholds(spec: PreferenceSpec, view: AlgorithmView) -> list[float]:
    """The raters' per-segment tolerance b per cost channel: ``cost_threshold`` when given, else the
    limit's share of a segment (d·L/H for episodic limits, d·L for per-step average-cost limits)."""
    if spec.cost_threshold is not None:
        return [float(spec.cost_threshold)] * view.num_costs
    scale = spec.segment_length if view.average_reward else spec.segment_length / view.horizon
    return [float(d) * scale for d in view.cost_limits]


def build_cost_posteriors(spec: PreferenceSpec, d: int, thresholds: list[float], seed: int) -> list:
    """``cost: learned``: one linear posterior per cost channel, from the cost raters' safety judgements."""
    return [
        CostPosterior(
            d,
            [r.id for r in spec.cost_raters],
            beta=[r.beta for r in spec.cost_raters],  # known: it fixes the cost's scale
            lam=[r.lam for r in spec.cost_raters],
            threshold=thresholds[j],
            prior_scale=spec.prior_scale,
            engine=spec.engine,
            engine_options=spec.engine_options,
            num_samples=spec.posterior_samples,
            seed=seed + j,
        )
        for j in range(len(thresholds))
    ]


def load_offline(path: str, d: int, rater_ids: list[str]) -> dict:
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

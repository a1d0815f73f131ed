"""The preference spec (``--preferences SPEC.yaml``): validated before any work starts, unknown keys refused.

```yaml
features: onehot            # onehot | env | rff | module:function   (rff_width: 256, rff_lengthscale: 1.0)
reward_model: linear        # linear | ensemble (ensemble_size, hidden)
segment_length: 8
buffer_size: 2000           # recent segments kept as query candidates
raters: [{id: expert, beta: 10.0, lam: 100.0}, {id: novice, beta: 0.5, lam: 2.0}]   # simulated
labels: simulated           # simulated | external (people label through `bayescrl prefs export/import`)
competence: infer           # infer (hierarchical: β_i, λ_i per rater) | infer-beta | known | ignore
queries: {total: 400, per_round: 20, every: 1, select: bald, candidates: 1000}
engine: laplace             # any bayescrl.inference engine (engine_options: {...})
posterior_samples: 64
prior_scale: 1.0
learner_lam: 1000.0         # λ the learner assumes with infer-beta or ignore (ϑ_i ≈ θ)
reward: thompson            # thompson | mean | lcb   (lcb_quantile: 0.1; thompson_hold: 1)
cost: env                   # env | learned (from cost_raters' safety judgements; cost_quantile: 0.9)
cost_raters: [{id: safety, beta: 5.0, lam: 100.0}]   # cost: learned only; their beta sets the cost's scale
cost_queries: {total: 400, per_round: 20, every: 1, select: bald}
cost_threshold: null        # raters' per-segment cost tolerance for "unsafe" (default: the limit's share)
offline: null               # optional offline preference file (JSON/YAML)
```
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bayescrl.inference.engines import ENGINES
from bayescrl.inference.options import check_learner_engine_options
from bayescrl.inference.rater_report import check_choice
from bayescrl.prefrl.queries import RULES
from bayescrl.raters import Rater, parse_raters
from bayescrl.utils.checks import choice, number, positive_int
from bayescrl.utils.configpaths import load_config
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import check_keys

FEATURES = ("onehot", "env", "rff")
#: the values of ``competence`` (``infer``: the hierarchical rater model; ``infer-beta``: β_i only)
COMPETENCE = ("infer", "infer-beta", "known", "ignore")
#: ``engine`` -> the rater-pool engine of ``competence: infer`` (:func:`bayescrl.inference.fit_rater_pool`)
POOL_ENGINE = {"laplace": "laplace-eb", "svi": "svi", "nuts": "nuts"}

#: the rater keys of a preference spec (simulated raters: known competence, B-Pref irrationalities)
RATER_KEYS = ("id", "beta", "lam", "gamma", "skip_below", "equal_within", "mistake", "weight")


@dataclass(frozen=True)
class QuerySpec:
    total: int = 400
    per_round: int = 20
    every: int = 1
    select: str = "bald"
    candidates: int = 1000


@dataclass(frozen=True)
class PreferenceSpec:
    raters: tuple[Rater, ...]
    features: str = "onehot"
    rff_width: int = 256
    rff_lengthscale: float = 1.0
    reward_model: str = "linear"
    ensemble_size: int = 5
    hidden: tuple[int, ...] = (64, 64)
    segment_length: int = 8
    buffer_size: int = 2000
    competence: str = "infer"
    queries: QuerySpec = field(default_factory=QuerySpec)
    engine: str = "laplace"
    engine_options: dict = field(default_factory=dict)
    posterior_samples: int = 64
    prior_scale: float = 1.0
    learner_lam: float = 1000.0
    reward: str = "thompson"
    lcb_quantile: float = 0.1
    thompson_hold: int = 1
    cost: str = "env"
    cost_raters: tuple[Rater, ...] = ()
    cost_queries: QuerySpec = field(default_factory=QuerySpec)
    cost_quantile: float = 0.9
    cost_threshold: float | None = None
    labels: str = "simulated"
    offline: str | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["hidden"] = list(self.hidden)
        for key in ("raters", "cost_raters"):
            d[key] = [{k: r[k] for k in RATER_KEYS} for r in d[key]]
        if self.cost == "env":
            for key in ("cost_raters", "cost_queries", "cost_quantile", "cost_threshold"):
                d.pop(key)
        return d


def _raters(raw: Any, name: str) -> tuple[Rater, ...]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(
            f"preferences.{name}", raw, "give a non-empty list of raters like [{id: a, beta: 5}]"
        )
    return tuple(parse_raters(raw, name, keys=RATER_KEYS, require_id=True, priors=False))


def _queries(q: Any, name: str) -> QuerySpec:
    q = q or {}
    if not isinstance(q, dict):
        raise ConfigError(f"preferences.{name}", q, "must be a mapping like {total: 400, per_round: 20}")
    check_keys(q, QuerySpec.__dataclass_fields__, f"preferences.{name}")
    return QuerySpec(
        total=positive_int(q.get("total", 400), f"preferences.{name}.total", 0),
        per_round=positive_int(q.get("per_round", 20), f"preferences.{name}.per_round"),
        every=positive_int(q.get("every", 1), f"preferences.{name}.every"),
        select=choice(q.get("select", "bald"), f"preferences.{name}.select", RULES),
        candidates=positive_int(q.get("candidates", 1000), f"preferences.{name}.candidates"),
    )


def parse_preference_spec(spec: dict | str | Path) -> PreferenceSpec:
    """Validate a spec mapping (or YAML/JSON file) into a :class:`PreferenceSpec`; errors name the field."""
    if isinstance(spec, (str, Path)):
        spec = load_config(spec, ("offline",))  # the offline file is relative to the spec file
    if not isinstance(spec, dict):
        raise ConfigError("preferences", spec, "must be a mapping")
    check_keys(spec, PreferenceSpec.__dataclass_fields__, "preferences")
    raters = _raters(spec.get("raters"), "raters")
    out: dict[str, Any] = {"raters": raters}
    feats = spec.get("features", "onehot")
    if not isinstance(feats, str) or (feats not in FEATURES and ":" not in feats):
        raise ConfigError(
            "preferences.features", feats, f"must be one of {list(FEATURES)} or module:function"
        )
    out["features"] = feats
    out["queries"] = _queries(spec.get("queries", {}), "queries")
    out.update(_numbers(spec, out["queries"]))
    out.update(_model(spec))
    out.update(_cost(spec, out["buffer_size"]))
    out["labels"] = choice(spec.get("labels", "simulated"), "preferences.labels", ("simulated", "external"))
    off = spec.get("offline")
    if off is not None:
        if not isinstance(off, (str, Path)) or not Path(off).is_file():
            raise ConfigError("preferences.offline", off, "must be the path of an existing preference file")
        out["offline"] = str(off)
    return PreferenceSpec(**out)


def _numbers(spec: dict, qs: QuerySpec) -> dict[str, Any]:
    """The integer sizes (features, ensemble, segments, samples, buffer: at least ``per_round``), the
    positive scales and the ensemble's hidden widths that ``spec`` sets."""
    out: dict[str, Any] = {}
    for key, lo in (
        ("rff_width", 1),
        ("ensemble_size", 1),
        ("segment_length", 1),
        ("posterior_samples", 2),
        ("thompson_hold", 1),
    ):
        if key in spec:
            out[key] = positive_int(spec[key], f"preferences.{key}", lo)
    out["buffer_size"] = positive_int(spec.get("buffer_size", 2000), "preferences.buffer_size", 2)
    if qs.per_round > out["buffer_size"]:
        raise ConfigError(
            "preferences.queries.per_round",
            qs.per_round,
            f"larger than the segment buffer (buffer_size = {out['buffer_size']})",
        )
    for key in ("rff_lengthscale", "prior_scale", "learner_lam"):
        if key in spec:
            out[key] = number(spec[key], f"preferences.{key}", 0.0, math.inf, strict=True)
    if "lcb_quantile" in spec:
        out["lcb_quantile"] = number(spec["lcb_quantile"], "preferences.lcb_quantile", 0.0, 0.5, strict=True)
    if "hidden" in spec:
        h = spec["hidden"]
        if not isinstance(h, (list, tuple)) or not h:
            raise ConfigError("preferences.hidden", h, "must be a non-empty list of layer widths")
        out["hidden"] = tuple(positive_int(w, "preferences.hidden") for w in h)
    return out


def _model(spec: dict) -> dict[str, Any]:
    """Reward model, competence, inference engine (``competence: infer`` needs a rater-pool engine) and
    its options, and the reward the agent optimises."""
    out: dict[str, Any] = {}
    out["reward_model"] = choice(
        spec.get("reward_model", "linear"), "preferences.reward_model", ("linear", "ensemble")
    )
    if out["reward_model"] == "ensemble" and spec.get("offline") is not None:
        raise ConfigError(
            "preferences.offline", spec["offline"], "offline files carry Φ only: use reward_model linear"
        )
    out["competence"] = check_choice(spec.get("competence", "infer"), "preferences.competence", COMPETENCE)
    out["engine"] = choice(spec.get("engine", "laplace"), "preferences.engine", ENGINES)
    if out["competence"] == "infer" and out["reward_model"] == "linear" and out["engine"] not in POOL_ENGINE:
        raise ConfigError(
            "preferences.engine", out["engine"], f"competence: infer runs one of {', '.join(POOL_ENGINE)}"
        )
    out["engine_options"] = check_learner_engine_options(
        out["engine"], spec.get("engine_options"), "preferences"
    )
    out["reward"] = choice(spec.get("reward", "thompson"), "preferences.reward", ("thompson", "mean", "lcb"))
    return out


def _cost(spec: dict, buffer_size: int) -> dict[str, Any]:
    """``cost: env`` (the ``cost_*`` keys refused) or ``learned`` with its raters, queries, threshold and
    quantile."""
    out: dict[str, Any] = {"cost": choice(spec.get("cost", "env"), "preferences.cost", ("env", "learned"))}
    if out["cost"] != "learned":
        for key in ("cost_raters", "cost_queries", "cost_quantile", "cost_threshold"):
            if spec.get(key) is not None:
                raise ConfigError(f"preferences.{key}", spec[key], "only used with cost: learned")
        return out
    out["cost_raters"] = _raters(spec.get("cost_raters"), "cost_raters")
    out["cost_queries"] = _queries(spec.get("cost_queries", {}), "cost_queries")
    if out["cost_queries"].per_round > buffer_size:
        raise ConfigError(
            "preferences.cost_queries.per_round",
            out["cost_queries"].per_round,
            f"larger than the segment buffer (buffer_size = {buffer_size})",
        )
    if spec.get("cost_threshold") is not None:
        threshold = spec["cost_threshold"]
        out["cost_threshold"] = number(threshold, "preferences.cost_threshold", 0.0, math.inf)
    if "cost_quantile" in spec:
        out["cost_quantile"] = number(spec["cost_quantile"], "preferences.cost_quantile", 0.5, 1.0)
    return out

"""The preference spec (``--preferences SPEC.yaml``): validated before any work starts, unknown keys refused.

```yaml
features: onehot            # onehot | env | rff | module:function   (rff_width: 256, rff_lengthscale: 1.0)
reward_model: linear        # linear | ensemble (ensemble_size, hidden)
segment_length: 8
buffer_size: 2000           # recent segments kept as query candidates
raters: [{id: expert, beta: 10.0, lam: 100.0}, {id: novice, beta: 0.5, lam: 2.0}]   # simulated
competence: infer           # infer | known | ignore
queries: {total: 400, per_round: 20, every: 1, select: bald, candidates: 1000}
engine: laplace             # any bayescrl.inference engine (engine_options: {...})
posterior_samples: 64
prior_scale: 1.0
learner_lam: 10.0           # λ the learner assumes when competence is inferred or ignored
reward: thompson            # thompson | mean | lcb   (lcb_quantile: 0.1)
cost: env                   # env (learned is not available yet)
offline: null               # optional offline preference file (JSON/YAML)
```
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bayescrl.inference.engines import ENGINES
from bayescrl.prefrl.queries import RULES
from bayescrl.prefrl.raters import RaterSpec
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import check_keys, load_yaml

FEATURES = ("onehot", "env", "rff")


@dataclass(frozen=True)
class QuerySpec:
    total: int = 400
    per_round: int = 20
    every: int = 1
    select: str = "bald"
    candidates: int = 1000


@dataclass(frozen=True)
class PreferenceSpec:
    raters: tuple[RaterSpec, ...]
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
    learner_lam: float = 10.0
    reward: str = "thompson"
    lcb_quantile: float = 0.1
    cost: str = "env"
    offline: str | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["hidden"] = list(self.hidden)
        return d


def _int(v: Any, name: str, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or int(v) != v:
        raise ConfigError(name, v, f"must be an integer >= {lo}")
    if int(v) < lo:
        raise ConfigError(name, v, f"must be an integer >= {lo}")
    return int(v)


def _float(v: Any, name: str, lo: float = 0.0, hi: float = math.inf, open_lo: bool = True) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        raise ConfigError(name, v, "must be a finite number")
    v = float(v)
    if v < lo or (open_lo and v == lo) or v > hi:
        raise ConfigError(name, v, f"must be in {'(' if open_lo else '['}{lo:g}, {hi:g}]")
    return v


def _choice(v: Any, name: str, options) -> str:
    if v not in options:
        raise ConfigError(name, v, f"must be one of {list(options)}")
    return v


def parse_preference_spec(spec: dict | str | Path) -> PreferenceSpec:
    """Validate a spec mapping (or YAML/JSON file) into a :class:`PreferenceSpec`; errors name the field."""
    if isinstance(spec, (str, Path)):
        spec = load_yaml(spec)
    if not isinstance(spec, dict):
        raise ConfigError("preferences", spec, "must be a mapping")
    check_keys(spec, PreferenceSpec.__dataclass_fields__, "preferences")
    raw = spec.get("raters")
    if not isinstance(raw, list) or not raw:
        raise ConfigError(
            "preferences.raters", raw, "give a non-empty list of raters like [{id: a, beta: 5}]"
        )
    raters = tuple(RaterSpec.from_dict(r, i) for i, r in enumerate(raw))
    ids = [r.id for r in raters]
    dup = next((i for i in ids if ids.count(i) > 1), None)
    if dup is not None:
        raise ConfigError("preferences.raters.id", dup, "rater ids must be unique")
    out: dict[str, Any] = {"raters": raters}
    feats = spec.get("features", "onehot")
    if not isinstance(feats, str) or (feats not in FEATURES and ":" not in feats):
        raise ConfigError(
            "preferences.features", feats, f"must be one of {list(FEATURES)} or module:function"
        )
    out["features"] = feats
    q = spec.get("queries", {}) or {}
    if not isinstance(q, dict):
        raise ConfigError("preferences.queries", q, "must be a mapping like {total: 400, per_round: 20}")
    check_keys(q, QuerySpec.__dataclass_fields__, "preferences.queries")
    qs = QuerySpec(
        total=_int(q.get("total", 400), "preferences.queries.total", 0),
        per_round=_int(q.get("per_round", 20), "preferences.queries.per_round"),
        every=_int(q.get("every", 1), "preferences.queries.every"),
        select=_choice(q.get("select", "bald"), "preferences.queries.select", RULES),
        candidates=_int(q.get("candidates", 1000), "preferences.queries.candidates"),
    )
    out["queries"] = qs
    for key, lo in (("rff_width", 1), ("ensemble_size", 1), ("segment_length", 1), ("posterior_samples", 2)):
        if key in spec:
            out[key] = _int(spec[key], f"preferences.{key}", lo)
    out["buffer_size"] = _int(spec.get("buffer_size", 2000), "preferences.buffer_size", 2)
    if qs.per_round > out["buffer_size"]:
        raise ConfigError(
            "preferences.queries.per_round",
            qs.per_round,
            f"larger than the segment buffer (buffer_size = {out['buffer_size']})",
        )
    for key in ("rff_lengthscale", "prior_scale", "learner_lam"):
        if key in spec:
            out[key] = _float(spec[key], f"preferences.{key}")
    if "lcb_quantile" in spec:
        out["lcb_quantile"] = _float(spec["lcb_quantile"], "preferences.lcb_quantile", 0.0, 0.5)
    if "hidden" in spec:
        h = spec["hidden"]
        if not isinstance(h, (list, tuple)) or not h:
            raise ConfigError("preferences.hidden", h, "must be a non-empty list of layer widths")
        out["hidden"] = tuple(_int(w, "preferences.hidden") for w in h)
    out["reward_model"] = _choice(spec.get("reward_model", "linear"), "preferences.reward_model", ("linear",))
    out["competence"] = _choice(
        spec.get("competence", "infer"), "preferences.competence", ("infer", "known", "ignore")
    )
    out["engine"] = _choice(spec.get("engine", "laplace"), "preferences.engine", ENGINES)
    opts = spec.get("engine_options", {}) or {}
    if not isinstance(opts, dict):
        raise ConfigError("preferences.engine_options", opts, "must be a mapping")
    out["engine_options"] = dict(opts)
    out["reward"] = _choice(spec.get("reward", "thompson"), "preferences.reward", ("thompson", "mean", "lcb"))
    out["cost"] = _choice(spec.get("cost", "env"), "preferences.cost", ("env",))
    off = spec.get("offline")
    if off is not None:
        if not isinstance(off, (str, Path)) or not Path(off).is_file():
            raise ConfigError("preferences.offline", off, "must be the path of an existing preference file")
        out["offline"] = str(off)
    return PreferenceSpec(**out)

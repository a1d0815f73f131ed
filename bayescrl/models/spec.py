"""Declarative model spec (YAML / JSON) → Pyro model + tensors for the fast engines.

Schema (every field validated; errors name field, record index and value)::

    dim: d                                   # required, integer >= 1
    prior: {mean: [d floats], cov: [[d×d]]}  # default N(0, I); cov may be a scalar or a diagonal list
    noise_sd: σ                              # σ of online rewards, > 0 (default 1)
    raters:                                  # default one rater {id: r0, beta: 1, lam: 1}
      - {id: r0, beta: 10.0, lam: 100.0}     # fixed competence (β >= 0, λ > 0)
      - {id: r1, beta: {prior: lognormal, loc: 2.0, scale: 0.5}, lam: 10.0}   # unknown β
    preferences: [{x0: [d], x1: [d], y: 0|1, rater: r0, online: false}]     # y = 0: x0 preferred
    rewards: [{x: [d], r: float}]
    transitions:                              # optional Dirichlet transition model (PSPL's η)
      {num_states: S, num_actions: A, alpha0: 1.0 | [S floats],
       data: [{s: int, a: int, next: int}]}
    heldout: [ {x0, x1, y, rater} ]           # optional held-out comparisons for `compare`
    truth: {theta: [d]}                       # optional (written by `simulate`)

Competence priors: ``lognormal {loc, scale}``, ``gamma {concentration, rate}``, ``halfnormal {scale}``
(the thesis' "unknown competence" case; the thesis estimates β separately by MLE/entropy, here it can
also be inferred jointly by the svi / nuts engines).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bayescrl.models.linear import BTLinearProblem
from bayescrl.models.pyro_models import CompetencePrior, TransitionData, bt_linear_model
from bayescrl.raters import parse_raters
from bayescrl.utils.checks import check_device
from bayescrl.utils.errors import ConfigError, DataError
from bayescrl.utils.io import check_keys, json_loads, load_yaml

DT = torch.float64


@dataclass
class SpecModel:
    """A parsed spec: the Pyro model (``model()``), its data, and the standard-model problem."""

    problem: BTLinearProblem
    rater_ids: tuple[str, ...]
    beta_priors: dict[int, CompetencePrior] = field(default_factory=dict)
    lam_priors: dict[int, CompetencePrior] = field(default_factory=dict)
    transitions: TransitionData | None = None
    heldout: BTLinearProblem | None = None
    truth: dict[str, torch.Tensor] | None = None
    spec: dict[str, Any] = field(default_factory=dict)

    max_plate_nesting: int = 1

    @property
    def dim(self) -> int:
        return self.problem.dim

    @property
    def fixed_competence(self) -> bool:
        return not self.beta_priors and not self.lam_priors

    def model_args(self, observed: bool = True) -> dict[str, Any]:
        p = self.problem
        pm, rm = p.pref_mask, p.reward_mask
        return {
            "mu0": p.mu0,
            "cov0": p.cov0,
            "beta": p.beta,
            "lam": p.lam,
            "noise_sd": p.noise_sd,
            "x0": p.x0[pm],
            "x1": p.x1[pm],
            "y": p.y[pm] if observed else None,
            "rater": p.rater[pm],
            "x": p.x[rm],
            "r": p.r[rm] if observed else None,
            "rater_ids": self.rater_ids,
            "beta_priors": self.beta_priors or None,
            "lam_priors": self.lam_priors or None,
            "transitions": self.transitions,
        }

    @property
    def model(self):
        """The Pyro model with the spec's data bound (call with no arguments)."""
        return partial(bt_linear_model, **self.model_args())

    def observed(self) -> dict[str, torch.Tensor]:
        a = self.model_args()
        out = {}
        if a["x0"].shape[0]:
            out["pref"] = a["y"]
        if a["x"].shape[0]:
            out["reward"] = a["r"]
        if self.transitions is not None and self.transitions.s.shape[0]:
            out["transition"] = self.transitions.next
        return out


# ---------------------------------------------------------------------------- helpers
def _num(value: Any, fld: str, index: int | None = None, *, positive=False, nonneg=False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataError(fld, value, "must be a number", index=index)
    v = float(value)
    if not math.isfinite(v):
        raise DataError(fld, value, "must be finite", index=index)
    if positive and v <= 0:
        raise DataError(fld, value, "must be > 0", index=index)
    if nonneg and v < 0:
        raise DataError(fld, value, "must be >= 0", index=index)
    return v


def _vec(value: Any, d: int, fld: str, index: int | None = None) -> list[float]:
    if not isinstance(value, (list, tuple)) or len(value) != d:
        n = len(value) if isinstance(value, (list, tuple)) else type(value).__name__
        raise DataError(fld, value, f"must be a list of dim = {d} numbers (got {n})", index=index)
    return [_num(v, fld, index) for v in value]


_NUMBER_TYPES = frozenset((int, float))


def _vectors(values: list, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised check of candidate vectors: ``ok [n]`` and the stacked ``[n, d]`` float64 array.

    A row is ok when it is a list/tuple of d finite plain ``int``/``float`` numbers (checked at C speed);
    other rows are zero in the array and must go through :func:`_vec`, which names the problem (or
    accepts the row, e.g. numpy scalars) — so errors are exactly those of the per-value check.
    """
    n = len(values)
    ok = np.fromiter(
        (
            isinstance(v, (list, tuple)) and len(v) == d and _NUMBER_TYPES.issuperset(map(type, v))
            for v in values
        ),
        dtype=bool,
        count=n,
    )
    arr = np.zeros((n, d))
    if not ok.any():
        return ok, arr
    try:
        if ok.all():
            arr = np.array(values, dtype=np.float64).reshape(n, d)
        else:
            good = np.flatnonzero(ok)
            arr[good] = np.array([values[i] for i in good], dtype=np.float64).reshape(-1, d)
    except (OverflowError, ValueError):  # e.g. an int too large for a float: let _vec raise as before
        return np.zeros(n, dtype=bool), np.zeros((n, d))
    ok &= np.isfinite(arr).all(1)
    return ok, arr


def _matrix(values: list, d: int, fld: str) -> np.ndarray:
    """Rows that must each be a list of d finite numbers; the first bad row raises :func:`_vec`'s error."""
    ok, arr = _vectors(values, d)
    for i in np.flatnonzero(~ok):
        arr[i] = _vec(values[i], d, fld, int(i))
    return arr


def _records(spec: dict, key: str) -> list:
    recs = spec.get(key) or []
    if not isinstance(recs, list):
        raise DataError(key, recs, "must be a list of records")
    for i, rec in enumerate(recs):
        if not isinstance(rec, dict):
            raise DataError(key, rec, "each record must be a mapping", index=i)
    return recs


def _pref_record(rec: dict, i: int, d: int, ids: dict[str, int], key: str):
    """One comparison, checked field by field: the reference check that names field, index and value."""
    for k in ("x0", "x1", "y"):
        if k not in rec:
            raise DataError(f"{key}.{k}", None, "missing field", index=i)
    x0 = _vec(rec["x0"], d, f"{key}.x0", i)
    x1 = _vec(rec["x1"], d, f"{key}.x1", i)
    if rec["y"] not in (0, 1) or isinstance(rec["y"], bool):
        raise DataError(f"{key}.y", rec["y"], "must be 0 (x0 preferred) or 1 (x1 preferred)", index=i)
    rid = rec.get("rater", next(iter(ids)) if len(ids) == 1 else None)
    if rid is None:
        raise DataError(f"{key}.rater", None, f"required when there are several raters {list(ids)}", index=i)
    if str(rid) not in ids:
        raise DataError(f"{key}.rater", rid, f"unknown rater id (known: {list(ids)})", index=i)
    onl = rec.get("online", False)
    if not isinstance(onl, bool):
        raise DataError(f"{key}.online", onl, "must be true or false", index=i)
    return x0, x1, float(rec["y"]), ids[str(rid)], onl


def _prefs(recs: list, d: int, ids: dict[str, int], key: str):
    """Comparisons as arrays ``x0, x1 [n,d]``, ``y [n]``, ``rater [n]`` (int), ``online [n]`` (bool).

    The vectors are checked in bulk (:func:`_vectors`); a record that fails any fast check goes through
    :func:`_pref_record`, in record order, so the first bad record is reported exactly as before.
    """
    n = len(recs)
    ok0, x0 = _vectors([rec.get("x0") for rec in recs], d)
    ok1, x1 = _vectors([rec.get("x1") for rec in recs], d)
    ok = (ok0 & ok1).tolist()
    y, rater, online = np.empty(n), np.empty(n, dtype=np.int64), np.zeros(n, dtype=bool)
    default = next(iter(ids)) if len(ids) == 1 else None
    for i, rec in enumerate(recs):
        yi, rid, onl = rec.get("y"), rec.get("rater", default), rec.get("online", False)
        if ok[i] and type(yi) in _NUMBER_TYPES and (yi == 0 or yi == 1) and type(onl) is bool:
            r = ids.get(rid if type(rid) is str else str(rid)) if rid is not None else None
            if r is not None:
                y[i], rater[i], online[i] = yi, r, onl
                continue
        x0[i], x1[i], y[i], rater[i], online[i] = _pref_record(rec, i, d, ids, key)
    return x0, x1, y, rater, online


def _rewards(recs: list, d: int):
    """Online rewards as arrays ``x [n,d]``, ``r [n]`` (bulk check, per-record errors as for comparisons)."""
    okx, xs = _vectors([rec.get("x") for rec in recs], d)
    okx = okx.tolist()
    rs = np.empty(len(recs))
    for i, rec in enumerate(recs):
        ri = rec.get("r")
        if okx[i] and (type(ri) is int or (type(ri) is float and math.isfinite(ri))):
            rs[i] = ri
            continue
        for k in ("x", "r"):
            if k not in rec:
                raise DataError(f"rewards.{k}", None, "missing field", index=i)
        xs[i] = _vec(rec["x"], d, "rewards.x", i)
        rs[i] = _num(rec["r"], "rewards.r", i)
    return xs, rs


# ---------------------------------------------------------------------------- keys
#: every key a spec / data file may hold (``engine_options`` is read by ``infer`` / ``compare``)
SPEC_KEYS = (
    "dim",
    "prior",
    "noise_sd",
    "raters",
    "preferences",
    "rewards",
    "transitions",
    "heldout",
    "truth",
    "engine_options",
    "name",
    "description",
)
_SECTION_KEYS = {
    "prior": ("mean", "cov"),
    "truth": ("theta", "vartheta", "seed"),
    "transitions": ("num_states", "num_actions", "alpha0", "data"),
}
_RECORD_KEYS = {
    "preferences": frozenset(("x0", "x1", "y", "rater", "online")),
    "heldout": frozenset(("x0", "x1", "y", "rater", "online")),
    "rewards": frozenset(("x", "r")),
}


def _check_record_keys(recs: Any, allowed: frozenset, where: str) -> None:
    if not isinstance(recs, list):
        return  # the parser names it
    for i, rec in enumerate(recs):
        if isinstance(rec, dict) and not allowed.issuperset(rec):  # a set test per record: cheap on big files
            check_keys(rec, sorted(allowed), where, error=DataError, index=i)


def check_spec_keys(spec: dict[str, Any]) -> None:
    """Refuse unknown keys anywhere in a spec (top level, ``prior``, ``noise``, data records), naming the
    field path and the closest valid key. Rater entries and their competence priors are checked as strictly
    by :func:`bayescrl.raters.parse_raters`."""
    check_keys(spec, SPEC_KEYS)
    for key, names in _SECTION_KEYS.items():
        if isinstance(spec.get(key), dict):
            check_keys(spec[key], names, key)
    t = spec.get("transitions")
    if isinstance(t, dict):
        _check_record_keys(t.get("data"), frozenset(("s", "a", "next")), "transitions.data")
    for key, allowed in _RECORD_KEYS.items():
        _check_record_keys(spec.get(key), allowed, key)


# ---------------------------------------------------------------------------- entry point
def from_spec(spec: dict[str, Any] | str | Path, *, device: str | torch.device = "cpu") -> SpecModel:
    """Build the model from a spec mapping or a YAML/JSON file path (a data file is a complete spec):
    unknown keys are refused at every level (:func:`check_spec_keys`), then the :class:`SpecModel` is built
    on ``device``."""
    spec = spec_mapping(spec)
    device = check_device(device)
    check_spec_keys(spec)
    d = _dim(spec)
    mean, cov = _prior(spec.get("prior") or {}, d)
    noise_sd = _num(spec.get("noise_sd", 1.0), "noise_sd", positive=True)
    ids, beta, lam, beta_priors, lam_priors = _rater_table(spec.get("raters"))
    problem_of = partial(
        BTLinearProblem.from_data, mean, cov, beta, lam, noise_sd, rater_ids=tuple(ids), device=device
    )
    x0, x1, y, rater, online = _prefs(_records(spec, "preferences"), d, ids, "preferences")
    xs, rs = _rewards(_records(spec, "rewards"), d)
    n = len(y)
    problem = problem_of(
        x0=x0 if n else None,
        x1=x1 if n else None,
        y=y,
        rater=rater if n else None,
        pref_online=online if n else None,
        x=xs if len(rs) else None,
        r=rs,
    )
    heldout = None
    if spec.get("heldout"):
        h = _prefs(_records(spec, "heldout"), d, ids, "heldout")
        heldout = problem_of(x0=h[0], x1=h[1], y=h[2], rater=h[3])
    transitions = _transitions(spec.get("transitions"), device) if spec.get("transitions") else None
    truth = _truth(spec.get("truth"), d, len(ids), device)
    return SpecModel(problem, tuple(ids), beta_priors, lam_priors, transitions, heldout, truth, spec)


def _dim(spec: dict[str, Any]) -> int:
    """The reward dimension d (required, an integer >= 1)."""
    if "dim" not in spec:
        raise ConfigError("dim", None, "required (reward dimension d)")
    d = spec["dim"]
    if isinstance(d, bool) or not isinstance(d, int) or d < 1:
        raise ConfigError("dim", d, "must be an integer >= 1")
    return d


def _prior(prior: Any, d: int) -> tuple[list[float], torch.Tensor]:
    """The prior mean ``[d]`` and covariance ``[d, d]`` of θ (Eq. `informed_prior`'s N(μ0, Σ0)): ``cov`` a
    scalar (times I), a diagonal list or a symmetric positive-definite matrix."""
    if not isinstance(prior, dict):
        raise ConfigError("prior", prior, "must be a mapping {mean, cov}")
    mean = _vec(prior.get("mean", [0.0] * d), d, "prior.mean")
    cov_raw = prior.get("cov", 1.0)
    if isinstance(cov_raw, (int, float)) and not isinstance(cov_raw, bool):
        cov = torch.eye(d, dtype=DT) * _num(cov_raw, "prior.cov", positive=True)
    elif isinstance(cov_raw, list) and cov_raw and not isinstance(cov_raw[0], list):
        cov = torch.diag(torch.tensor(_vec(cov_raw, d, "prior.cov"), dtype=DT))
    else:
        if not isinstance(cov_raw, list) or len(cov_raw) != d:
            raise DataError("prior.cov", cov_raw, f"must be a {d}×{d} matrix, a diagonal list or a scalar")
        cov = torch.from_numpy(_matrix(cov_raw, d, "prior.cov"))
    if not torch.allclose(cov, cov.T, atol=1e-10):
        raise DataError("prior.cov", cov_raw, "must be symmetric")
    if torch.linalg.cholesky_ex(cov)[1] != 0:
        raise DataError("prior.cov", cov_raw, "must be positive definite")
    return mean, cov


def _rater_table(
    raters: Any,
) -> tuple[dict[str, int], list[float], list[float], dict[int, CompetencePrior], dict[int, CompetencePrior]]:
    """Rater index by id, β and λ values (a prior's mean for the fixed-competence engines) and the priors of
    the raters whose β or λ is unknown; no ``raters`` is one rater with β = λ = 1."""
    raters = raters or [{"id": "r0", "beta": 1.0, "lam": 1.0}]
    if not isinstance(raters, list):
        raise ConfigError("raters", raters, "must be a list of {id, beta, lam}")
    ids: dict[str, int] = {}
    beta, lam, beta_priors, lam_priors = [], [], {}, {}
    for i, r in enumerate(parse_raters(raters, "raters", keys=("id", "beta", "lam"))):  # the one schema
        ids[r.id] = i
        beta.append(r.beta_value())  # a prior's mean for the fixed-competence engines
        lam.append(r.lam_value())
        if isinstance(r.beta, CompetencePrior):
            beta_priors[i] = r.beta
        if isinstance(r.lam, CompetencePrior):
            lam_priors[i] = r.lam
    return ids, beta, lam, beta_priors, lam_priors


def _truth(truth: Any, d: int, num_raters: int, device) -> dict[str, torch.Tensor] | None:
    """The true θ (and the raters' ϑ, if given) of simulated data, or None without ``truth.theta``."""
    if not isinstance(truth, dict) or "theta" not in truth:
        return None
    out = {"theta": torch.tensor(_vec(truth["theta"], d, "truth.theta"), dtype=DT, device=device)}
    vt = truth.get("vartheta")
    if vt is not None:
        if not isinstance(vt, list) or len(vt) != num_raters:
            raise DataError("truth.vartheta", vt, f"must list one [d] vector per rater ({num_raters})")
        out["vartheta"] = torch.from_numpy(_matrix(vt, d, "truth.vartheta")).to(device)
    return out


def _transitions(t: Any, device) -> TransitionData:
    if not isinstance(t, dict):
        raise ConfigError("transitions", t, "must be a mapping {num_states, num_actions, alpha0, data}")
    S, A = t.get("num_states"), t.get("num_actions")
    for name, v in (("transitions.num_states", S), ("transitions.num_actions", A)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(name, v, "must be an integer >= 1")
    a0 = t.get("alpha0", 1.0)
    if isinstance(a0, list):
        alpha = torch.tensor(
            [_num(v, "transitions.alpha0", i, positive=True) for i, v in enumerate(a0)], dtype=DT
        )
        if alpha.shape[0] != S:
            raise DataError("transitions.alpha0", a0, f"must have num_states = {S} entries")
    else:
        alpha = torch.full((S,), _num(a0, "transitions.alpha0", positive=True), dtype=DT)
    s, a, nxt = [], [], []
    for i, rec in enumerate(_records(t, "data")):
        for k, hi in (("s", S), ("a", A), ("next", S)):
            v = rec.get(k)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < hi:
                raise DataError(f"transitions.data.{k}", v, f"must be an integer in [0, {hi})", index=i)
        s.append(rec["s"])
        a.append(rec["a"])
        nxt.append(rec["next"])
    L = partial(torch.tensor, dtype=torch.long, device=device)
    return TransitionData(S, A, alpha.to(device).expand(S * A, S).clone(), L(s), L(a), L(nxt))


def load_spec(path: str | Path) -> dict[str, Any]:
    """Read a model spec or data file: ``*.json`` with the json module, anything else (and a ``.json``
    file that is not strict JSON) through :func:`bayescrl.utils.io.load_yaml`, the package's one YAML
    reader (scientific notation as floats, one-line errors naming the file).

    PyYAML's pure-Python reader takes ~15 s per 10⁶ numbers (a data file with 2,000 comparisons in
    d = 256 has that many), hence the json fast path.
    """
    path = Path(path)
    if not path.exists():
        raise ConfigError("config", str(path), "file not found")
    if path.suffix.lower() == ".json":
        try:  # a repeated key, which json.loads would let the last win, is refused (by the YAML reader)
            data = json_loads(path.read_text(), "config", str(path))
        except (DataError, UnicodeDecodeError):
            data = None
        if isinstance(data, dict):
            return data
    return load_yaml(path)


def spec_mapping(spec: dict[str, Any] | str | Path) -> dict[str, Any]:
    """The spec mapping ``spec``, read by :func:`load_spec` when it is a YAML/JSON file path."""
    if isinstance(spec, (str, Path)):
        spec = load_spec(spec)
    if not isinstance(spec, dict):
        raise ConfigError("spec", spec, "must be a mapping")
    return spec

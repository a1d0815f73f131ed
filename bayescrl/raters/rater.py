"""The rater of the thesis: deliberateness β, knowledgeability λ, belief ϑ_i ~ N(θ, I/λ_i²).

Chapter `warmPref-PS` (Eq. `rater_preference_dist`) and chapter `PSPL` (Eq. `pref_logistic_trajectories`)
model a rater by two numbers: ``β ≥ 0`` (deliberateness: β = 0 answers at random, β → ∞ picks the better
item) and ``λ > 0`` (knowledgeability: the rater's own reward vector is ϑ ~ N(θ, I/λ²), λ → ∞ gives
ϑ = θ). Each is either a known number or, when unknown, a :class:`CompetencePrior` (inferred by the
engines that support it). ``beta=None`` means "unknown, no prior stated": the family's competence rule
(:mod:`bayescrl.raters.competence`) estimates it.

A simulated rater may also carry the irrationalities of B-Pref (Lee et al., 2021; see
:mod:`bayescrl.raters.simulated`): ``gamma`` (myopia), ``skip_below``, ``equal_within``, ``mistake``, and
a ``weight`` (share of the queries it answers); ``expert: greedy`` is the deterministic "flawed" expert of
the thesis' sensitivity studies (``Y = argmax_i ⟨x_i, ϑ⟩``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import pyro.distributions as dist
import torch

from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import check_keys

#: prior families of an unknown β or λ and their parameters
PRIOR_PARAMS: dict[str, tuple[str, ...]] = {
    "lognormal": ("loc", "scale"),
    "gamma": ("concentration", "rate"),
    "halfnormal": ("scale",),
}
COMPETENCE_PRIORS = tuple(PRIOR_PARAMS)
_POSITIVE_PARAMS = {"scale", "concentration", "rate"}
EXPERTS = ("bt", "greedy")
#: the default prior of an unknown knowledgeability in the hierarchical rater model
#: (:class:`bayescrl.inference.hierarchical.RaterPrior`): the raters of a pool share a level μ_λ,
#: μ_λ ~ N(LAM_PRIOR_LOC, LAM_POOL_SCALE²), log λ_i | μ_λ ~ N(μ_λ, LAM_PRIOR_SCALE²) — with a wide
#: LAM_POOL_SCALE the pool's own raters decide how informed its raters are (see docs/raters.md)
LAM_PRIOR_LOC = 0.0
LAM_PRIOR_SCALE = 1.5
LAM_POOL_SCALE = 10.0


@dataclass(frozen=True)
class CompetencePrior:
    """Prior of an unknown competence parameter (β or λ) of one rater, e.g.
    ``CompetencePrior("lognormal", {"loc": 0.0, "scale": 1.5})`` (declared as
    ``{prior: lognormal, loc: 0.0, scale: 1.5}``)."""

    family: str
    params: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_prior(self.family, self.params, "prior")

    @classmethod
    def lognormal(cls, loc: float, scale: float) -> CompetencePrior:
        """``LogNormal(loc, scale)``: log β ~ N(loc, scale²)."""
        return cls("lognormal", {"loc": float(loc), "scale": float(scale)})

    def distribution(self, like: torch.Tensor) -> dist.Distribution:
        """The Pyro distribution, parameters as tensors of ``like``'s dtype and device."""
        p = {k: torch.as_tensor(v, dtype=like.dtype, device=like.device) for k, v in self.params.items()}
        if self.family == "lognormal":
            return dist.LogNormal(p["loc"], p["scale"])
        if self.family == "gamma":
            return dist.Gamma(p["concentration"], p["rate"])
        return dist.HalfNormal(p["scale"])

    @property
    def mean(self) -> float:
        """The prior mean (the value a fixed-competence engine plugs in)."""
        return float(self.distribution(torch.zeros((), dtype=torch.float64, device="cpu")).mean)

    def to_dict(self) -> dict[str, Any]:
        return {"prior": self.family, **self.params}


def check_prior(family: Any, params: Any, fld: str, index: int | None = None) -> dict[str, float]:
    """Check a prior's family and parameters (scale, concentration, rate > 0; an unknown one is refused with
    the closest parameter of that family); returns the parameters."""
    if family not in PRIOR_PARAMS:
        raise ConfigError(f"{fld}.prior", family, f"must be one of {list(COMPETENCE_PRIORS)}", index=index)
    base, _, name = fld.rpartition(".")
    where, at = (f"{base}[{index}].{name}", None) if index is not None and base else (fld, index)
    check_keys(params, PRIOR_PARAMS[family], where, index=at)
    out = {}
    for k in PRIOR_PARAMS[family]:
        if k not in params:
            raise ConfigError(f"{fld}.{k}", None, f"required by the {family} prior", index=index)
        out[k] = number(
            params[k], f"{fld}.{k}", index, lo=0.0 if k in _POSITIVE_PARAMS else None, strict=True
        )
    return out


def number(
    v: Any,
    fld: str,
    index: int | None = None,
    *,
    lo: float | None = None,
    hi: float | None = None,
    strict: bool = False,
    finite: bool = True,
) -> float:
    """``v`` as a float, checked: a number (YAML 1.1's ``"1e4"`` string too), finite unless
    ``finite=False`` (then ``+inf`` passes), ``>= lo`` (``> lo`` if ``strict``), ``<= hi``."""
    if isinstance(v, str):  # YAML 1.1 reads 1e4 (no dot) as a string
        try:
            v = float(v)
        except ValueError:
            raise ConfigError(fld, v, "must be a number", index=index) from None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        raise ConfigError(fld, v, "must be a number", index=index)
    v = float(v)
    if (finite or v == -math.inf) and not math.isfinite(v):
        raise ConfigError(fld, v, "must be finite", index=index)
    if lo is not None and (v <= lo if strict else v < lo):
        raise ConfigError(fld, v, f"must be {'>' if strict else '>='} {lo:g}", index=index)
    if hi is not None and v > hi:
        raise ConfigError(fld, v, f"must be <= {hi:g}", index=index)
    return v


@dataclass(frozen=True)
class Rater:
    """One rater: ``id``, deliberateness ``beta`` and knowledgeability ``lam`` (each a known value or a
    :class:`CompetencePrior`; ``beta=None``: unknown, estimated), the labelling ``expert`` kind (``bt``:
    Bradley–Terry, ``greedy``: the flawed greedy expert) and the B-Pref irrationalities of a simulated
    rater (:mod:`bayescrl.raters.simulated`). Validated on construction (:class:`ConfigError` naming the
    field)."""

    id: str = "r0"
    beta: float | CompetencePrior | None = 1.0
    lam: float | CompetencePrior = 1.0
    expert: str = "bt"
    gamma: float = 1.0
    skip_below: float | None = None
    equal_within: float | None = None
    mistake: float = 0.0
    weight: float = 1.0

    def __post_init__(self) -> None:
        for key in FIELDS:
            object.__setattr__(self, key, check_field(key, getattr(self, key), f"rater.{key}", None))

    @property
    def known(self) -> bool:
        """Both β and λ are known values (no prior, not unknown)."""
        return isinstance(self.beta, float) and isinstance(self.lam, float)

    def beta_value(self, default: float = 1.0) -> float:
        """β as a number: the value, the prior mean, or ``default`` when unknown."""
        if self.beta is None:
            return default
        return self.beta.mean if isinstance(self.beta, CompetencePrior) else self.beta

    def lam_value(self) -> float:
        """λ as a number: the value or the prior mean."""
        return self.lam.mean if isinstance(self.lam, CompetencePrior) else self.lam

    def to_dict(self) -> dict[str, Any]:
        """The declaration of this rater (priors as ``{prior: family, ...}``)."""
        out = asdict(self)
        for key in ("beta", "lam"):
            v = getattr(self, key)
            if isinstance(v, CompetencePrior):
                out[key] = v.to_dict()
        return out


#: every key a rater declaration may use
FIELDS = tuple(Rater.__dataclass_fields__)


def check_field(
    key: str,
    v: Any,
    fld: str,
    index: int | None,
    *,
    unknown_beta: bool = True,
    finite: bool = False,
    priors: bool = True,
) -> Any:
    """One rater field, checked and normalised (the rules of :class:`Rater`): ``beta >= 0`` or a prior
    (or None when ``unknown_beta``), ``lam > 0`` or a prior (``+inf`` only when not ``finite``),
    ``gamma`` in (0, 1], ``mistake`` in [0, 0.5], ``weight > 0``, ``skip_below`` / ``equal_within`` a
    number or None, ``expert`` one of ``bt``, ``greedy``; ``priors=False`` refuses a prior."""
    if key == "id":
        if isinstance(v, bool) or not isinstance(v, (str, int)) or str(v) == "":
            raise ConfigError(fld, v, "every rater needs a non-empty string id", index=index)
        return str(v)
    if key in ("beta", "lam"):
        if isinstance(v, (CompetencePrior, dict)) and not priors:
            raise ConfigError(fld, v, "must be a number here (a prior is not accepted)", index=index)
        if isinstance(v, CompetencePrior):
            return v
        if isinstance(v, dict):
            params = {k: x for k, x in v.items() if k != "prior"}
            return CompetencePrior(v.get("prior"), check_prior(v.get("prior"), params, fld, index))
        if key == "beta":
            if v is None and unknown_beta:
                return None
            return number(v, fld, index, lo=0.0, finite=finite)
        return number(v, fld, index, lo=0.0, strict=True, finite=finite)
    if key == "expert":
        if v not in EXPERTS:
            raise ConfigError(fld, v, f"choose one of {list(EXPERTS)}", index=index)
        return v
    if key == "gamma":
        return number(v, fld, index, lo=0.0, hi=1.0, strict=True)
    if key == "mistake":
        return number(v, fld, index, lo=0.0, hi=0.5)
    if key == "weight":
        return number(v, fld, index, lo=0.0, strict=True)
    if key in ("skip_below", "equal_within"):
        return None if v is None else number(v, fld, index)
    raise ConfigError(fld, v, f"unknown rater field (valid: {', '.join(FIELDS)})", index=index)

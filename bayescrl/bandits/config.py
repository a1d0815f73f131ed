"""Experiment configuration of the ``bandit`` command: :class:`BanditExperiment`, a validated dataclass
(each field documented; see :mod:`bayescrl.utils.config`).

Schema (every key optional; defaults are the thesis' evaluation protocol, Section
`sec:chapter3_empirical`)::

    seed: 0                      # base seed; seed s of a run uses seed + s
    device: cpu
    bandit:  {K: 50, d: 6, T: 300, noise_sd: 1.0, rho: 0.0, prior_mean: 0.0, prior_sd: 1.0}
    offline: {N: 20, beta: 10.0, lam: 100.0, expert: bt,   # expert: bt | greedy
              mu: null}                                     # action-sampling weights [K] (null: uniform)
             # or several raters: raters: [{N: 10, beta: 5, lam: 10, expert: bt}, ...]
    assumed: {beta: true, lam: true}   # competence the agents assume: a number (or one per rater),
                                       # 'true', or for beta an estimator 'mle' | 'entropy' | 'bayes'
                                       # | 'infer' (hierarchical: β_i and λ_i) | 'infer-beta' (= 'mle')
    agents: [warmpref-ps-bootstrap, naive-ps, ps, lints]
             # an item may be a mapping {id: ..., label: ..., beta: ..., lam: ..., <option>: ...}
    options: {...}                     # agent options, see :class:`AgentOptions`
    sweep: {offline.N: [5, 50], ...}   # optional: run every cell of the cartesian product
                                       # (``run_sweep``; ignored by ``run_experiment``)

``prior_mean`` may be a scalar or a list of length ``d``; ``prior_sd`` a scalar or a list of length ``d``
(a diagonal prior covariance ``Σ0``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from bayescrl.inference.options import check_engine_options, check_learner_engine_options
from bayescrl.raters import Rater, parse_rater
from bayescrl.utils.checks import check_device, check_memory_of, choice, mapping, number, positive_int
from bayescrl.utils.config import Config
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.hints import did_you_mean
from bayescrl.utils.io import check_keys

AGENT_IDS = (
    "warmpref-ps",
    "warmpref-ps-bootstrap",
    "ps",
    "lints",
    "naive-ps",
    "hybrid-dpo",
    "hybrid-ipo",
    "warmtsof",
)
#: *-oracle: labelled ablation (true β); infer: β_i and λ_i of the hierarchical rater model; infer-beta = mle
BETA_ESTIMATORS = ("mle", "entropy", "bayes", "entropy-oracle", "infer", "infer-beta")


def _vector(field: str, v: Any, d: int, positive: bool = False) -> list[float]:
    vals = [v] * d if not isinstance(v, (list, tuple)) else list(v)
    if len(vals) != d:
        raise ConfigError(field, v, f"length {len(vals)} does not match bandit.d = {d}")
    return [
        number(x, f"{field}[{i}]", 0.0 if positive else None, strict=positive) for i, x in enumerate(vals)
    ]


@dataclass
class BanditSettings(Config):
    """``bandit:`` the linear bandit (Section `sec:chapter3_empirical`)."""

    SECTION: ClassVar[str] = "bandit"
    K: int = 50
    """number of arms"""
    d: int = 6
    """feature dimension of an arm"""
    T: int = 300
    """online rounds"""
    noise_sd: float = 1.0
    """sd of the Gaussian noise on an online reward"""
    rho: float = 0.0
    """correlation of the arms' features, in [0, 1)"""
    prior_mean: float | list[float] = 0.0
    """mean of the prior of theta: a number or a list of length d"""
    prior_sd: float | list[float] = 1.0
    """sd of the prior of theta (diagonal Sigma0): a number or a list of length d, each > 0"""

    def validate(self) -> None:
        self.K = positive_int(self.K, "bandit.K", 2)
        self.d = positive_int(self.d, "bandit.d", 1)
        self.T = positive_int(self.T, "bandit.T", 1)
        self.noise_sd = number(self.noise_sd, "bandit.noise_sd", 0.0, strict=True)
        if number(self.rho, "bandit.rho", 0.0) >= 1.0:
            raise ConfigError("bandit.rho", float(self.rho), "must be in [0, 1)")
        self.prior_mean = _vector("bandit.prior_mean", self.prior_mean, self.d)
        self.prior_sd = _vector("bandit.prior_sd", self.prior_sd, self.d, positive=True)


@dataclass
class OfflineSettings(Config):
    """``offline:`` the offline preference data D0 and the rater(s) who labelled it."""

    SECTION: ClassVar[str] = "offline"
    N: int = 20
    """offline comparisons (of the one rater; each item of ``raters`` may give its own)"""
    beta: float = 10.0
    """the rater's deliberateness beta (>= 0)"""
    lam: float = 100.0
    """the rater's knowledgeability lambda (> 0)"""
    expert: str = "bt"
    """how the rater labels: bt (Bradley-Terry) or greedy"""
    mu: list[float] | None = None
    """action-sampling weights of D0, one per arm (null: uniform)"""
    raters: list[dict] | None = None
    """several raters instead: [{id, N, beta, lam, expert}, ...] (missing keys default to the above)"""

    def validate(self) -> None:
        raters_of(vars(self))  # every rater declaration, and N


@dataclass
class AssumedCompetence(Config):
    """``assumed:`` the competence the agents assume."""

    SECTION: ClassVar[str] = "assumed"
    beta: Any = "true"
    """a number (or one per rater), 'true', or an estimator: mle, entropy, bayes, infer, infer-beta"""
    lam: Any = "true"
    """a number > 0 (or one per rater) or 'true'"""

    def validate(self) -> None:
        self.beta, self.lam = _norm_competence(self.beta), _norm_competence(self.lam)


@dataclass
class AgentOptions(Config):
    """``options:`` the agents' options (an agent item of ``agents`` may override any of them)."""

    SECTION: ClassVar[str] = "options"
    p_offline: float = 0.5
    """bootstrapped warmPref-PS (Eq. `final_surrogate_perturbed_loss`): Bern(p) weights on offline terms"""
    online_noise: bool = True
    """bootstrapped warmPref-PS: perturb online rewards with N(0, sigma^2) noise"""
    anchor_prior: bool = True
    """bootstrapped warmPref-PS: anchor at theta' ~ N(mu0, Sigma0), vartheta' ~ N(0, I/lambda^2)"""
    tol: float = 1e-6
    """tolerance of the perturbed MAP solves"""
    max_iter: int = 50
    """iterations of the perturbed MAP solves"""
    engine: str = "laplace"
    """engine of warmPref-PS's informed prior (Eq. `informed_prior`): laplace, svi or nuts"""
    engine_options: dict = field(default_factory=dict)
    """keyword options of bayescrl.inference.engines.fit (svi / nuts; laplace takes none: refused)"""
    lints_v: float = 1.0
    """LinTS (Agrawal & Goyal): theta ~ N(B^-1 f, v^2 B^-1)"""
    lints_ridge: float = 1.0
    """LinTS: B = ridge I + sum a a^T"""
    naive_beta: float = 1.0
    """naive-PS: the beta it assumes (it ignores competence)"""
    naive_lam: float = 1e4
    """naive-PS: the lambda it assumes (vartheta ~ theta)"""
    dpo_steps: int = 20000
    """hybrid DPO / IPO (appendix `appendix:dpoipo`): optimiser steps"""
    dpo_lr: float = 0.015
    """hybrid DPO / IPO: learning rate"""
    dpo_batch: int = 12
    """hybrid DPO / IPO: batch size"""
    dpo_tau: float = 0.1
    """hybrid DPO / IPO: temperature tau"""
    dpo_epsilon: float = 0.16
    """hybrid DPO / IPO: exploration probability"""
    dpo_prior_weight: float = 0.0
    """hybrid DPO / IPO: weight of the offline reward model in the online running mean"""
    cost: float = 0.0
    """warmTSOF (Algorithm `prac_warmtsof`): cost of a query"""
    eps0: float = 1.0
    """warmTSOF: initial exploration"""
    p_online: float = 0.5
    """warmTSOF: Bern(p) weights on online comparisons too (Eq. `final_surrogate_perturbed_loss`)"""
    entropy_c: float = 1.0
    """competence estimation: the entropy estimator's free constant (untuned; 25 gives 'entropy-oracle')"""
    beta_prior_loc: float = math.log(5.0)
    """competence estimation ('bayes'): prior location of log beta"""
    beta_prior_scale: float = 1.5
    """competence estimation ('bayes'): prior scale of log beta"""
    bayes_steps: int = 800
    """competence estimation ('bayes'): optimiser steps"""

    def validate(self) -> None:
        for k in ("p_offline", "p_online"):
            if number(getattr(self, k), f"options.{k}", 0.0) > 1:
                raise ConfigError(f"options.{k}", getattr(self, k), "must be a probability in [0, 1]")
        choice(self.engine, "options.engine", ("laplace", "svi", "nuts"), "must be laplace, svi or nuts")
        where = "options.engine_options"
        if self.engine != "laplace":  # laplace reads none: refused unless an agent's engine reads them
            self.engine_options = check_engine_options(self.engine, self.engine_options, where)
        mapping(self.engine_options, where)
        for k in (
            "lints_v",
            "lints_ridge",
            "naive_lam",
            "dpo_lr",
            "dpo_tau",
            "entropy_c",
            "beta_prior_scale",
        ):
            number(getattr(self, k), f"options.{k}", 0.0, strict=True)
        for k in ("dpo_steps", "dpo_batch", "max_iter", "bayes_steps"):
            positive_int(getattr(self, k), f"options.{k}", 1)
        if number(self.dpo_epsilon, "options.dpo_epsilon", 0.0) > 1:
            raise ConfigError("options.dpo_epsilon", self.dpo_epsilon, "must be a probability in [0, 1]")
        for k in ("cost", "dpo_prior_weight", "eps0", "naive_beta"):
            number(getattr(self, k), f"options.{k}", 0.0)


#: the agent options and their defaults
DEFAULT_OPTIONS: dict[str, Any] = AgentOptions.defaults()


@dataclass
class BanditExperiment(Config):
    """A ``bandit`` experiment (every key optional; defaults: the thesis' evaluation protocol)."""

    seed: int = 0
    """base seed; seed s of a run uses seed + s"""
    device: str = "cpu"
    """torch device"""
    bandit: BanditSettings = field(default_factory=BanditSettings)
    """the linear bandit"""
    offline: OfflineSettings = field(default_factory=OfflineSettings)
    """the offline data D0 and its rater(s)"""
    assumed: AssumedCompetence = field(default_factory=AssumedCompetence)
    """the competence the agents assume"""
    agents: list = field(default_factory=lambda: ["warmpref-ps-bootstrap", "naive-ps", "ps", "lints"])
    """agent ids, or mappings {id, label, beta, lam, <option>: ...} for variants"""
    options: AgentOptions = field(default_factory=AgentOptions)
    """the agents' options"""

    def validate(self) -> None:
        self.seed = positive_int(self.seed, "seed", 0)
        self.device = check_device(self.device)
        K = self.bandit.K
        raters, _ = raters_of(vars(self.offline))
        mu = self.offline.mu
        if mu is not None:  # action-sampling distribution of D0 (None: uniform)
            if not isinstance(mu, (list, tuple)) or len(mu) != K:
                raise ConfigError("offline.mu", mu, f"must be null (uniform) or a list of K = {K} weights")
            w = [number(x, "offline.mu", 0.0) for x in mu]
            if sum(w) <= 0:
                raise ConfigError("offline.mu", mu, "weights must not all be zero")
            self.offline.mu = [x / sum(w) for x in w]
        _check_competence("assumed.beta", self.assumed.beta, len(raters), BETA_ESTIMATORS)
        _check_competence("assumed.lam", self.assumed.lam, len(raters), ())
        self.agents = normalise_agents(self.agents)
        for i, a in enumerate(self.agents):
            for k in ("beta", "lam"):
                if k in a:
                    a[k] = _norm_competence(a[k])
            if "beta" in a:
                _check_competence(f"agents[{i}].beta", a["beta"], len(raters), BETA_ESTIMATORS)
            if "lam" in a:
                _check_competence(f"agents[{i}].lam", a["lam"], len(raters), ())
        self._check_agent_options()

    def _check_agent_options(self) -> None:
        """Every agent's options with its overrides checked as ``options`` is (``agents[i].KEY`` names an
        override); engine options that no agent's engine reads (laplace reads none) are refused."""
        base = self.options.to_dict()
        unread = bool(base["engine_options"])
        for i, a in enumerate(self.agents):
            over = {k: v for k, v in a.items() if k in base}
            try:
                merged = AgentOptions.from_dict({**base, **over}).to_dict() if over else base
            except ConfigError as exc:
                name = exc.field.removeprefix("options.")
                if name.split(".")[0] not in over:
                    raise
                raise ConfigError(f"agents[{i}].{name}", exc.value, exc.reason) from None
            if "engine_options" in over:  # kept as checked (1e3 -> 1000), as the engine reads them
                a["engine_options"] = check_learner_engine_options(
                    merged["engine"], over["engine_options"], f"agents[{i}]"
                )
            elif merged["engine"] != "laplace":  # reads the shared options: keep them as checked
                unread, self.options.engine_options = False, merged["engine_options"]
        if unread:
            check_learner_engine_options("laplace", base["engine_options"], "options")


#: an experiment's settings at their defaults
DEFAULTS: dict[str, Any] = BanditExperiment.defaults()
#: top-level keys a config file may hold besides the settings (``sweep``: see ``run_sweep``)
EXTRA_KEYS = {"name": None, "description": None, "sweep": None}


def raters_of(offline: Mapping) -> tuple[list[Rater], list[int]]:
    """The raters of ``offline`` and their record counts: one rater from ``N, beta, lam, expert`` unless
    ``raters`` is given (each item's missing keys default to ``offline``'s). Raters are declared with the
    schema of :mod:`bayescrl.raters.spec`, plus ``N``."""
    if offline.get("raters"):
        raters, counts = [], []
        for i, r in enumerate(offline["raters"]):
            f = f"offline.raters[{i}]"
            if not isinstance(r, Mapping):
                raise ConfigError("offline.raters", r, "each rater must be a mapping {N, beta, lam}", index=i)
            check_keys(r, ("id", "N", "beta", "lam", "expert"), f)
            counts.append(positive_int(r.get("N", offline["N"]), f"{f}.N", 0))
            decl = {k: v for k, v in r.items() if k != "N"}
            defaults = {"id": f"r{i}", **{k: offline[k] for k in ("beta", "lam", "expert")}}
            raters.append(parse_rater(decl, f, keys=("id", "beta", "lam", "expert"), defaults=defaults))
        return raters, counts
    n = positive_int(offline["N"], "offline.N", 0)
    decl = {k: offline[k] for k in ("beta", "lam", "expert")}
    return [parse_rater(decl, "offline", keys=("beta", "lam", "expert"))], [n]


def _norm_competence(v: Any) -> Any:
    """YAML reads ``true`` as a boolean: accept it as the string ``'true'`` (the true competence)."""
    if isinstance(v, (list, tuple)):
        return [_norm_competence(x) for x in v]
    return "true" if v is True else v


def _check_competence(field: str, v: Any, n_raters: int, estimators: tuple[str, ...]) -> None:
    items = v if isinstance(v, (list, tuple)) else [v]
    if isinstance(v, (list, tuple)) and len(v) != n_raters:
        raise ConfigError(field, v, f"needs one value per rater ({n_raters})")
    for i, x in enumerate(items):
        if isinstance(x, str):
            if x != "true" and x not in estimators:
                hint = did_you_mean(x, ["true", *estimators])
                raise ConfigError(
                    field, x, f"must be a number, 'true' or one of {list(estimators)}{hint}", index=i
                )
        else:
            number(x, field, 0.0, strict=field.endswith("lam"))


def normalise_agents(agents: Any) -> list[dict[str, Any]]:
    """Agents as ``[{id, label, ...overrides}]`` with unique labels; unknown ids are rejected."""
    if isinstance(agents, str):
        agents = [agents]
    if not isinstance(agents, (list, tuple)) or not agents:
        raise ConfigError("agents", agents, "must be a non-empty list of agent ids")
    out, labels = [], set()
    for i, a in enumerate(agents):
        spec = {"id": a} if isinstance(a, str) else dict(a) if isinstance(a, Mapping) else None
        if spec is None or "id" not in spec:
            raise ConfigError("agents", a, "must be an agent id or a mapping with an 'id'", index=i)
        if spec["id"] not in AGENT_IDS:
            raise ConfigError("agents", spec["id"], f"unknown agent id; expected one of {list(AGENT_IDS)}", i)
        spec.setdefault("label", spec["id"])
        if spec["label"] in labels:
            raise ConfigError("agents", spec["label"], "duplicate label; give each variant a 'label'", i)
        labels.add(spec["label"])
        check_keys(spec, ["id", "label", "beta", "lam", *AgentOptions.schema()], f"agents[{i}]")
        out.append(spec)
    return out


def check_size(cfg: Mapping[str, Any], seeds: int = 1) -> None:
    """Refuse a resolved config whose ``seeds`` batched seeds would not fit in memory: per seed the arms
    (``K x d``), the offline pairs (``N x 2 x d``), the online rounds and regret curves (``T``, per agent)
    and the posterior covariances (``d x d``)."""
    seeds = positive_int(seeds, "seeds")
    b, n_agents = cfg["bandit"], len(cfg["agents"])
    N = sum(raters_of(cfg["offline"])[1])

    def estimate(n: Mapping[str, int]) -> float:
        K, d, T = n["bandit.K"], n["bandit.d"], n["bandit.T"]
        per_seed = K * (d + 1) + 4 * d * d + n["offline.N"] * 2 * (d + 2) + T * (2 * d + 4 * n_agents)
        return 8 * 4 * n["--seeds"] * per_seed  # float64, ~4 live copies (temporaries, each agent's data)

    sizes = {"bandit.K": b["K"], "bandit.d": b["d"], "bandit.T": b["T"], "offline.N": N, "--seeds": seeds}
    what = f"{seeds} seed(s) of this bandit run (K={b['K']}, d={b['d']}, T={b['T']}, N={N})"
    check_memory_of(estimate, sizes, what)


def resolve_config(config: Mapping[str, Any] | None, seeds: int = 1) -> dict[str, Any]:
    """:class:`BanditExperiment` of ``config`` (every field validated; ``name``, ``description`` and
    ``sweep`` left out) as a plain mapping, once ``seeds`` seeds of it are known to fit in memory
    (:func:`check_size`; raises :class:`ConfigError`)."""
    cfg = BanditExperiment.from_dict(config, extra=EXTRA_KEYS).to_dict()
    check_size(cfg, seeds)
    return cfg

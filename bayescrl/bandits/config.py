"""Experiment configuration of the ``bandit`` command: defaults, merging and validation.

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
    options: {...}                     # agent options, see ``DEFAULT_OPTIONS``
    sweep: {offline.N: [5, 50], ...}   # optional: run every cell of the cartesian product
                                       # (``run_sweep``; ignored by ``run_experiment``)

``prior_mean`` may be a scalar or a list of length ``d``; ``prior_sd`` a scalar or a list of length ``d``
(a diagonal prior covariance ``Σ0``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

from bayescrl.raters import Rater, parse_rater
from bayescrl.utils.checks import check_device, check_memory_of, positive_int
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

DEFAULT_OPTIONS: dict[str, Any] = {
    # Bootstrapped warmPref-PS (Eq. `final_surrogate_perturbed_loss`)
    "p_offline": 0.5,  # Bern(p) weights ω_n on offline terms
    "online_noise": True,  # ζ_s ~ N(0, σ²) on online rewards
    "anchor_prior": True,  # θ' ~ N(μ0, Σ0), ϑ' ~ N(0, I/λ²)
    "tol": 1e-6,
    "max_iter": 50,
    # warmPref-PS (Algorithm `Prefwarm-PS`): engine of the informed prior, Eq. `informed_prior`
    "engine": "laplace",  # laplace | svi | nuts
    "engine_options": {},  # keyword options of bayescrl.inference.engines.fit (svi / nuts)
    # LinTS (Agrawal & Goyal): θ̃ ~ N(B⁻¹f, v² B⁻¹), B = ridge·I + Σ a aᵀ
    "lints_v": 1.0,
    "lints_ridge": 1.0,
    # naive-PS: uses D0 but ignores competence (β = 1, ϑ ≈ θ)
    "naive_beta": 1.0,
    "naive_lam": 1e4,
    # hybrid DPO / IPO (appendix `appendix:dpoipo`)
    "dpo_steps": 20000,
    "dpo_lr": 0.015,
    "dpo_batch": 12,
    "dpo_tau": 0.1,
    "dpo_epsilon": 0.16,
    "dpo_prior_weight": 0.0,  # weight of the offline reward model in the online running mean
    # warmTSOF (Algorithm `prac_warmtsof`)
    "cost": 0.0,
    "eps0": 1.0,
    "p_online": 0.5,  # ω_n ~ Bern(0.5) on online comparisons too (Eq. `final_surrogate_perturbed_loss`)
    # competence estimation
    "entropy_c": 1.0,  # the text's free hyperparameter, untuned (25 gave β̂ ≈ the true β: 'entropy-oracle')
    "beta_prior_loc": math.log(5.0),
    "beta_prior_scale": 1.5,
    "bayes_steps": 800,
}

DEFAULTS: dict[str, Any] = {
    "seed": 0,
    "device": "cpu",
    "bandit": {"K": 50, "d": 6, "T": 300, "noise_sd": 1.0, "rho": 0.0, "prior_mean": 0.0, "prior_sd": 1.0},
    "offline": {"N": 20, "beta": 10.0, "lam": 100.0, "expert": "bt", "mu": None},
    "assumed": {"beta": "true", "lam": "true"},
    "agents": ["warmpref-ps-bootstrap", "naive-ps", "ps", "lints"],
    "options": {},
}
TOP_KEYS = {"seed", "device", "bandit", "offline", "assumed", "agents", "options", "name", "description"}
TOP_KEYS |= {"sweep"}


def _merge(base: dict, over: Mapping, path: str) -> dict:
    out = copy.deepcopy(base)
    check_keys(over, sorted(base), path)
    for k, v in over.items():
        out[k] = v
    return out


def _int(field: str, v: Any, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ConfigError(field, v, f"must be an integer >= {lo}")
    return v


def _num(field: str, v: Any, lo: float | None = None, strict: bool = False) -> float:
    if isinstance(v, str):  # YAML 1.1 reads "1e4" (no dot) as a string
        try:
            v = float(v)
        except ValueError:
            raise ConfigError(field, v, "must be a finite number") from None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(field, v, "must be a finite number")
    if lo is not None and (v <= lo if strict else v < lo):
        raise ConfigError(field, v, f"must be {'>' if strict else '>='} {lo}")
    return float(v)


def _vector(field: str, v: Any, d: int, positive: bool = False) -> list[float]:
    vals = [v] * d if not isinstance(v, (list, tuple)) else list(v)
    if len(vals) != d:
        raise ConfigError(field, v, f"length {len(vals)} does not match bandit.d = {d}")
    return [_num(f"{field}[{i}]", x, 0.0 if positive else None, strict=positive) for i, x in enumerate(vals)]


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
            counts.append(_int(f"{f}.N", r.get("N", offline["N"]), 0))
            decl = {k: v for k, v in r.items() if k != "N"}
            defaults = {"id": f"r{i}", **{k: offline[k] for k in ("beta", "lam", "expert")}}
            raters.append(parse_rater(decl, f, keys=("id", "beta", "lam", "expert"), defaults=defaults))
        return raters, counts
    n = _int("offline.N", offline["N"], 0)
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
            if field.endswith("lam"):
                _num(field, x, 0.0, strict=True)
            else:
                _num(field, x, 0.0)


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
        check_keys(spec, ["id", "label", "beta", "lam", *DEFAULT_OPTIONS], f"agents[{i}]")
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
    """Merge ``config`` over :data:`DEFAULTS` and validate every field, and that ``seeds`` seeds of it fit
    in memory (:func:`check_size`; raises :class:`ConfigError`)."""
    config = {k: v for k, v in dict(config or {}).items() if k != "sweep"}
    sections = {**{k: v for k, v in DEFAULTS.items() if isinstance(v, dict)}, "options": DEFAULT_OPTIONS}
    check_keys(config, {k: sections.get(k) for k in sorted(TOP_KEYS)})  # a misplaced key: its section
    cfg = copy.deepcopy(DEFAULTS)
    cfg["seed"] = _int("seed", config.get("seed", 0), 0)
    cfg["device"] = check_device(config.get("device", "cpu"))
    for sect in ("bandit", "offline", "assumed"):
        sub = config.get(sect) or {}
        if not isinstance(sub, Mapping):
            raise ConfigError(sect, sub, "must be a mapping")
        base = dict(cfg[sect], raters=None) if sect == "offline" else cfg[sect]
        cfg[sect] = _merge(base, sub, sect)
    cfg["options"] = _merge(DEFAULT_OPTIONS, config.get("options") or {}, "options")
    b = cfg["bandit"]
    b["K"] = _int("bandit.K", b["K"], 2)
    b["d"] = _int("bandit.d", b["d"], 1)
    b["T"] = _int("bandit.T", b["T"], 1)
    b["noise_sd"] = _num("bandit.noise_sd", b["noise_sd"], 0.0, strict=True)
    rho = _num("bandit.rho", b["rho"], 0.0)
    if rho >= 1.0:
        raise ConfigError("bandit.rho", rho, "must be in [0, 1)")
    b["prior_mean"] = _vector("bandit.prior_mean", b["prior_mean"], b["d"])
    b["prior_sd"] = _vector("bandit.prior_sd", b["prior_sd"], b["d"], positive=True)
    raters, _ = raters_of(cfg["offline"])
    for k in ("beta", "lam"):
        cfg["assumed"][k] = _norm_competence(cfg["assumed"][k])
    mu = cfg["offline"]["mu"]
    if mu is not None:  # action-sampling distribution of D0 (None: uniform)
        if not isinstance(mu, (list, tuple)) or len(mu) != b["K"]:
            raise ConfigError("offline.mu", mu, f"must be null (uniform) or a list of K = {b['K']} weights")
        w = [_num("offline.mu", x, 0.0) for x in mu]
        if sum(w) <= 0:
            raise ConfigError("offline.mu", mu, "weights must not all be zero")
        cfg["offline"]["mu"] = [x / sum(w) for x in w]
    _check_competence("assumed.beta", cfg["assumed"]["beta"], len(raters), BETA_ESTIMATORS)
    _check_competence("assumed.lam", cfg["assumed"]["lam"], len(raters), ())
    cfg["agents"] = normalise_agents(config.get("agents", DEFAULTS["agents"]))
    for i, a in enumerate(cfg["agents"]):
        for k in ("beta", "lam"):
            if k in a:
                a[k] = _norm_competence(a[k])
        if "beta" in a:
            _check_competence(f"agents[{i}].beta", a["beta"], len(raters), BETA_ESTIMATORS)
        if "lam" in a:
            _check_competence(f"agents[{i}].lam", a["lam"], len(raters), ())
    o = cfg["options"]
    for k in ("p_offline", "p_online"):
        p = _num(f"options.{k}", o[k], 0.0)
        if p > 1:
            raise ConfigError(f"options.{k}", p, "must be a probability in [0, 1]")
    if o["engine"] not in ("laplace", "svi", "nuts"):
        raise ConfigError("options.engine", o["engine"], "must be laplace, svi or nuts")
    for k in ("lints_v", "lints_ridge", "naive_lam", "dpo_lr", "dpo_tau", "entropy_c", "beta_prior_scale"):
        _num(f"options.{k}", o[k], 0.0, strict=True)
    for k in ("dpo_steps", "dpo_batch", "max_iter", "bayes_steps"):
        _int(f"options.{k}", o[k], 1)
    eps = _num("options.dpo_epsilon", o["dpo_epsilon"], 0.0)
    if eps > 1:
        raise ConfigError("options.dpo_epsilon", eps, "must be a probability in [0, 1]")
    _num("options.cost", o["cost"], 0.0)
    _num("options.dpo_prior_weight", o["dpo_prior_weight"], 0.0)
    _num("options.eps0", o["eps0"], 0.0)
    _num("options.naive_beta", o["naive_beta"], 0.0)
    check_size(cfg, seeds)
    return cfg

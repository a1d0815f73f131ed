"""PSPL experiment runner: config validation, agents × seeds (seeds batched), regrets, JSON + PNG.

Config schema (YAML; every key optional except ``env.name``)::

    env:     {name: riverswim|mountaincar, H: 20, S: 6}          # mountaincar: n_pos, n_vel, H, repeat, m
    offline: {N: 1000, beta: 10, lam: 50, expert: bt|greedy, behaviour: uniform|eps-optimal, epsilon: 0.5}
    prior:   {mu0: 0.0, sigma0: 1.0, alpha0: 1.0}                 # θ ~ N(mu0, sigma0² I), η ~ Dir(alpha0)
    model:   {beta: null, lam: null, beta_estimate: null|mle|entropy|mle-oracle|entropy-oracle, entropy_c: 1}
             # *-oracle: the true θ (MLE) or a c calibrated to the true β (entropy), labelled ablations
             # the competence the Bayesian agents assume (null = the true offline value) — misspecification
    K: 100                                                       # online episodes
    seed: 0
    agents: [pspl-bootstrap, pspl, dps, lpbrl, dpo, ipo, uniform]
    agent_params: {pspl-bootstrap: {p_online: 0.75, p_offline: 0.6}, dpo: {steps: 500, tau: 0.1}, ...}
    sweep: {key: offline.lam, values: [1, 10, 100]}              # optional: one run per value

Metrics per agent (mean and sd over seeds): simple regret (Eq. `simple_regret_def`, exact, by value
iteration on the true MDP) of the output policy after k = 0..K online episodes, and the cumulative regret
Σ_k [V* − (V^{π_k^(0)} + V^{π_k^(1)})/2] of the explored policy pairs (offline agents: none).
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from tqdm.auto import tqdm

from bayescrl.pbrl.agents import AGENTS, OFFLINE_AGENTS, ONLINE_AGENTS, Context
from bayescrl.pbrl.data import (
    BEHAVIOURS,
    TrajectoryPairs,
    behaviour_policy,
    offline_dataset,
    offline_rater,
    sample_pairs,
)
from bayescrl.pbrl.envs import describe, env_sizes, make_env
from bayescrl.pbrl.mdp import TabularMDP, policy_value, value_iteration
from bayescrl.pbrl.offline_baselines import train_offline_policy
from bayescrl.pbrl.posterior import reference_theta
from bayescrl.raters import BeliefRater
from bayescrl.raters.competence import beta_entropy, beta_mle_given_theta
from bayescrl.utils.checks import (
    check_device,
    check_memory_of,
    check_no_nan,
    choice,
    mapping,
    number,
    positive_int,
)
from bayescrl.utils.config import Config
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import apply_overrides, check_keys, validate_sweep_block, write_json
from bayescrl.utils.plotting import plot_mean_sd
from bayescrl.utils.seeding import run_generators

DEFAULT_AGENTS = ("pspl-bootstrap", "pspl", "dps", "lpbrl", "dpo", "ipo", "uniform")


@dataclass
class OfflineData(Config):
    """``offline:`` the offline trajectory pairs D0 and the rater who labelled them."""

    SECTION: ClassVar[str] = "offline"
    N: int = 1000
    """offline trajectory pairs"""
    beta: float = 10.0
    """the rater's deliberateness beta (>= 0, .inf: noiseless)"""
    lam: float = 50.0
    """the rater's knowledgeability lambda (> 0 or .inf)"""
    expert: str = "bt"
    """how the rater labels: bt (Bradley-Terry) or greedy"""
    behaviour: str = "uniform"
    """the policy that rolled out D0: uniform or eps-optimal"""
    epsilon: float = 0.5
    """eps-optimal behaviour: probability of a uniform action"""

    def validate(self) -> None:
        if not isinstance(self.N, int) or isinstance(self.N, bool) or self.N < 0:
            raise ConfigError("offline.N", self.N, "must be an integer >= 0")
        offline_rater(vars(self))
        choice(self.behaviour, "offline.behaviour", BEHAVIOURS, f"choose one of {list(BEHAVIOURS)}")
        if not 0 <= number(self.epsilon, "offline.epsilon", 0) <= 1:
            raise ConfigError("offline.epsilon", self.epsilon, "must lie in [0, 1]")


@dataclass
class Prior(Config):
    """``prior:`` the agents' prior: theta ~ N(mu0, sigma0^2 I), transitions eta ~ Dir(alpha0)."""

    SECTION: ClassVar[str] = "prior"
    mu0: float = 0.0
    """prior mean of theta"""
    sigma0: float = 1.0
    """prior sd of theta (> 0)"""
    alpha0: float = 1.0
    """Dirichlet concentration of the transition prior (> 0)"""

    def validate(self) -> None:
        number(self.mu0, "prior.mu0")
        number(self.sigma0, "prior.sigma0", 0, strict=True)
        number(self.alpha0, "prior.alpha0", 0, strict=True)


@dataclass
class AssumedModel(Config):
    """``model:`` the competence the Bayesian agents assume (null: the true offline value)."""

    SECTION: ClassVar[str] = "model"
    beta: float | None = None
    """assumed beta (null: the rater's)"""
    lam: float | None = None
    """assumed lambda (null: the rater's)"""
    beta_estimate: str | None = None
    """estimate beta from D0 instead: mle, entropy, or the labelled ablations mle-oracle, entropy-oracle"""
    entropy_c: float = 1.0
    """the entropy estimator's constant (> 0)"""

    def validate(self) -> None:
        if self.beta is not None:
            number(self.beta, "model.beta", 0)
        if self.lam is not None:
            number(self.lam, "model.lam", 0, strict=True)
        choice(
            self.beta_estimate, "model.beta_estimate", BETA_ESTIMATES, f"choose one of {list(BETA_ESTIMATES)}"
        )
        number(self.entropy_c, "model.entropy_c", 0, strict=True)


@dataclass
class PSPLExperiment(Config):
    """A ``pspl`` experiment (every key optional except ``env.name``)."""

    env: dict = field(default_factory=lambda: {"name": "riverswim"})
    """the tabular MDP: {name: riverswim, S, H} or {name: mountaincar, n_pos, n_vel, H, repeat, m}"""
    offline: OfflineData = field(default_factory=OfflineData)
    """the offline data D0 and its rater"""
    prior: Prior = field(default_factory=Prior)
    """the agents' prior"""
    model: AssumedModel = field(default_factory=AssumedModel)
    """the competence the agents assume"""
    K: int = 100
    """online episodes"""
    seed: int = 0
    """base seed; seed b of a --seeds S run uses seed + b"""
    agents: list = field(default_factory=lambda: list(DEFAULT_AGENTS))
    """agents to run (distinct), from pspl-bootstrap, pspl, dps, lpbrl, dpo, ipo, uniform"""
    agent_params: dict = field(default_factory=dict)
    """per-agent parameters: {agent: {key: value}} (keys: AGENT_PARAMS)"""
    sweep: dict | None = None
    """one run per value: {key: offline.lam, values: [1, 10, 100]}"""

    def validate(self) -> None:
        self.env = dict(mapping(self.env, "env"))
        if not isinstance(self.K, int) or isinstance(self.K, bool) or self.K < 0:
            raise ConfigError("K", self.K, "number of online episodes must be an integer >= 0")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ConfigError("seed", self.seed, "must be an integer")
        agents = self.agents
        if isinstance(agents, str):
            agents = self.agents = [agents]
        if not isinstance(agents, list) or not agents:
            raise ConfigError("agents", agents, f"must be a non-empty list of {list(AGENTS)}")
        for i, a in enumerate(agents):
            if a not in AGENTS:
                raise ConfigError("agents", a, f"unknown agent; choose from {list(AGENTS)}", index=i)
        if len(set(agents)) != len(agents):
            raise ConfigError("agents", agents, "agents must be distinct")
        if not isinstance(self.agent_params, Mapping):
            raise ConfigError("agent_params", self.agent_params, "must be a mapping agent -> parameters")
        check_keys(self.agent_params, AGENTS, "agent_params")
        for a, p in self.agent_params.items():
            if not isinstance(p, Mapping):
                raise ConfigError(f"agent_params.{a}", p, "must be a mapping")
            check_keys(p, AGENT_PARAMS[a], f"agent_params.{a}")
        p = self.agent_params.get("pspl-bootstrap", {})
        for key in ("p_online", "p_offline"):
            if key in p and not (isinstance(p[key], (int, float)) and 0 < p[key] <= 1):
                raise ConfigError(
                    f"agent_params.pspl-bootstrap.{key}", p[key], "Bernoulli weight must be in (0, 1]"
                )
        mo, off = self.model, self.offline
        if "pspl" in agents and mo.beta is None and mo.beta_estimate is None and math.isinf(float(off.beta)):
            raise ConfigError(
                "offline.beta",
                off.beta,
                "the pspl agent would assume this β, and its Laplace posterior needs a finite one (an "
                "infinite β makes the likelihood a step function); set model.beta to the β it should assume, "
                "e.g. 100",
            )


#: an experiment's settings at their defaults
DEFAULTS: dict[str, Any] = PSPLExperiment.defaults()
#: top-level keys a config may hold besides the settings (kept in the resolved config)
EXTRA_KEYS = ("name", "description")
#: Each agent's random stream (posterior samples, online pairs and labels, offline mini-batches) is keyed
#: by (seed, agent name): agent ``a`` draws from ``seed * 1000 + 17 * AGENT_STREAM[a] + 1`` whatever the
#: ``agents`` list holds or in which order, so an agent's result does not depend on which agents share
#: the run (the index is the agent's place in the default list, so runs of that list are unchanged).
#: Seeds are batched with one stream per seed (:func:`~bayescrl.utils.seeding.run_generators`): seed
#: ``b`` of a ``--seeds S`` run uses ``seed + b`` for its rater and D0 and ``(seed + b) * 1000 + ...``
#: for each agent, so it is the single run (``--seeds 1``) with seed ``seed + b``, whatever S is.
AGENT_STREAM: dict[str, int] = {
    a: i for i, a in enumerate([*DEFAULT_AGENTS, *(a for a in AGENTS if a not in DEFAULT_AGENTS)])
}
_POSTERIOR = ("tol", "max_iter")
#: the keys each agent reads from ``agent_params.<agent>``
AGENT_PARAMS: dict[str, tuple[str, ...]] = {
    "pspl": (*_POSTERIOR, "engine", "refit_every", "samples", "options"),
    "pspl-bootstrap": (*_POSTERIOR, "p_online", "p_offline", "output"),
    "uniform": _POSTERIOR,
    "dps": ("prior_sd", "noise_sd"),
    "lpbrl": (*_POSTERIOR, "reg", "c_reward", "c_transition"),
    "dpo": ("tau", "steps", "lr", "batch_size"),
    "ipo": ("tau", "steps", "lr", "batch_size"),
}


def validate_config(cfg: Mapping[str, Any], seeds: int = 1) -> dict:
    """:class:`PSPLExperiment` of ``cfg`` (every field validated; ``name`` and ``description`` kept) as a
    plain mapping, once ``seeds`` seeds of it are known to fit in memory (:func:`check_size`), its env
    builds and every sweep value gives a valid config; raises :class:`ConfigError`."""
    if not isinstance(cfg, Mapping):
        raise ConfigError("config", cfg, "must be a mapping")
    out = PSPLExperiment.from_dict(cfg, extra=dict.fromkeys(EXTRA_KEYS)).to_dict()
    out.update({k: copy.deepcopy(cfg[k]) for k in cfg if k in EXTRA_KEYS})
    check_size(out, seeds)  # before the env is built: a huge S or H is refused, not allocated
    make_env(out["env"])  # validates the env block
    validate_sweep_block(out, lambda c: validate_config(c, seeds))
    return out


def check_size(cfg: Mapping[str, Any], seeds: int = 1) -> None:
    """Refuse a run whose tensors would not fit in memory: the MDP and its one-hot features
    (``S·A x S·A``), and per seed the posterior over θ (``d x d``, ``d = S·A``), the transition counts, the
    offline and online trajectory pairs (states, actions and features φ) and value iteration."""
    seeds = positive_int(seeds, "seeds")
    sz = env_sizes(cfg["env"])
    A = sz["A"]
    field = "env.S" if cfg["env"].get("name") == "riverswim" else "env (S = n_pos·n_vel + 1)"

    def estimate(n: Mapping[str, int]) -> float:
        S, H, d = n[field], n["env.H"], n[field] * A
        pair = 2 * (2 * H + 1 + d)  # one trajectory pair: states, actions and φ of both sides
        per_seed = 3 * d * d + 2 * S * A * S + 2 * H * S * A + (n["offline.N"] + n["K"]) * pair
        shared = d * d + S * A * S + 8 * sz["grid"] * S / sz["S"]
        return 8 * 4 * (n["--seeds"] * per_seed + shared)  # float64, ~4 live copies (temporaries, agents)

    sizes = {field: sz["S"], "env.H": sz["H"], "offline.N": cfg["offline"]["N"], "K": cfg["K"]}
    sizes["--seeds"] = seeds
    what = f"{seeds} seed(s) of this PSPL run (S={sz['S']}, A={A}, H={sz['H']}, d={sz['S'] * A})"
    check_memory_of(estimate, sizes, what)


#: β estimates from D0: ``mle``/``entropy`` use only D0 and the prior; ``*-oracle`` use the true θ / β
BETA_ESTIMATES = (None, "mle", "entropy", "mle-oracle", "entropy-oracle")


def _entropy_beta(data, mdp: TabularMDP, c: float) -> torch.Tensor:
    """The entropy rule ``c / 𝓗(ζ)``, ζ the winners' state–action visits (no cap: ``c / max(𝓗, 1e-12)``)."""
    return beta_entropy(data.winner_visits(mdp.A), mdp.S * mdp.A, c, None, field="model.entropy_c")


def _agent_beta(cfg: dict, data, mdp: TabularMDP) -> tuple[torch.Tensor | float, dict]:
    """The β the Bayesian agents assume: true, misspecified (``model.beta``) or estimated from D0."""
    mo, off = cfg["model"], cfg["offline"]
    est = mo["beta_estimate"]
    if est in ("mle", "mle-oracle"):
        # estimate-only: θ_ref from D0 and the prior; the oracle ablation uses the true θ
        pr = cfg["prior"]
        ref = (
            mdp.theta
            if est == "mle-oracle"
            else reference_theta(data, mdp.S, mdp.A, mu0=pr["mu0"], sigma0=pr["sigma0"])
        )
        if data.N == 0:
            raise ConfigError("offline.N", 0, "cannot estimate beta from an empty offline data set")
        beta, at_bound = beta_mle_given_theta(data.margins(ref))
        return beta, {"beta_estimate": est, "beta_hat": beta.tolist(), "at_bound": at_bound.tolist()}
    if est in ("entropy", "entropy-oracle"):
        c = float(mo["entropy_c"])
        if est == "entropy-oracle":  # c calibrated to the true β on this data (labelled ablation)
            c = float(off["beta"]) * float((1.0 / _entropy_beta(data, mdp, 1.0)).mean())
        beta = _entropy_beta(data, mdp, c)
        return beta, {"beta_estimate": est, "beta_hat": beta.tolist(), "entropy_c": c}
    beta = off["beta"] if mo["beta"] is None else mo["beta"]
    return float(beta), {"beta_estimate": None, "beta_assumed": float(beta)}


@dataclass
class _World:
    """What every agent of one run shares: the MDP, the rater, D0 and the competence the Bayesian agents
    assume."""

    mdp: TabularMDP
    """the true MDP (θ, P, ρ)"""
    rater: BeliefRater
    """the rater of D0 and of the online queries, one belief per seed"""
    data: TrajectoryPairs
    """D0, the offline trajectory pairs"""
    v_star: float
    """the optimal value V*(s_0) (value iteration on the true MDP)"""
    beta: torch.Tensor | float
    """the β the Bayesian agents assume"""
    lam: float
    """the λ the Bayesian agents assume (finite)"""
    behaviour: torch.Tensor
    """D0's behaviour policy π_ref"""

    def value(self, pi: torch.Tensor) -> torch.Tensor:
        """V^π(s_0) per seed on the true MDP."""
        return policy_value(self.mdp.P, self.mdp.r, self.mdp.rho, pi)


def run_agents(cfg: dict, seeds: int, *, device: str = "cpu", progress: bool = True) -> dict:
    """Run every agent of a validated config on ``seeds`` seeds (batched, one random stream per seed: seed
    ``b`` is the single-seed run with ``cfg["seed"] + b``); return the metrics dict."""
    if not isinstance(seeds, int) or seeds < 1:
        raise ConfigError("seeds", seeds, "must be an integer >= 1")
    world, beta_info = _make_world(cfg, seeds, device)
    model = {**beta_info, "lam_assumed": world.lam}
    out: dict[str, Any] = {"optimal_value": world.v_star, "model": model, "agents": {}}
    for name in cfg["agents"]:
        t0 = time.perf_counter()
        agen = run_generators(cfg["seed"], seeds, key=lambda s, i=AGENT_STREAM[name]: s * 1000 + 17 * i + 1)
        params = dict(cfg["agent_params"].get(name, {}))
        if name in OFFLINE_AGENTS:
            sr, cum, extra = _run_offline_agent(world, name, params, agen, seeds, cfg["K"])
        else:
            sr, cum, extra = _run_online_agent(world, name, params, agen, cfg, progress)
        wall = time.perf_counter() - t0
        out["agents"][name] = summarise(sr, cum, wall) | extra
    return out


def _make_world(cfg: dict, seeds: int, device: str) -> tuple[_World, dict]:
    """The MDP, the rater (β, λ of ``offline``) and D0 of every seed, V*, and the competence the agents
    assume (with its description for results.json)."""
    # the random streams are CPU generators (one per seed/agent); draws move to the device
    # (bayescrl.utils.seeding.draw), so a CUDA run uses the same numbers as a CPU run
    mdp = make_env(cfg["env"], device=device)
    off = cfg["offline"]
    gen = run_generators(cfg["seed"], seeds)  # seed b of the batch: the single run with seed `seed + b`
    rater = BeliefRater.sample(mdp.theta, seeds, off["beta"], off["lam"], off["expert"], generator=gen)
    data = offline_dataset(mdp, rater, off["N"], off["behaviour"], off["epsilon"], generator=gen)
    V, _, _ = value_iteration(mdp.P, mdp.r, mdp.H)
    v_star = float((mdp.rho * V[0]).sum())
    lam = float(off["lam"] if cfg["model"]["lam"] is None else cfg["model"]["lam"])
    if math.isinf(lam):
        lam = 1e4  # the core needs a finite λ: 1e4 makes ϑ = θ to 1e-4
    beta, beta_info = _agent_beta(cfg, data, mdp)
    beh = behaviour_policy(mdp, off["behaviour"], off["epsilon"])
    return _World(mdp, rater, data, v_star, beta, lam, beh), beta_info


def _run_offline_agent(
    world: _World, name: str, params: dict, agen: list[torch.Generator], seeds: int, K: int
) -> tuple[torch.Tensor, None, dict]:
    """DPO / IPO trained on D0 only: its simple regret is flat over the K episodes, no cumulative regret."""
    pi = train_offline_policy(
        world.data,
        world.behaviour,
        world.mdp.S,
        world.mdp.A,
        loss=name,
        tau=float(params.get("tau", 0.1)),
        steps=int(params.get("steps", 500)),
        lr=float(params.get("lr", 3e-4)),
        batch_size=int(params.get("batch_size", 256)),
        generator=agen,
    )
    sr = (world.v_star - world.value(pi)).unsqueeze(-1).expand(seeds, K + 1)
    return sr, None, {}


def _run_online_agent(
    world: _World, name: str, params: dict, agen: list[torch.Generator], cfg: dict, progress: bool
) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """K online episodes of agent ``name``: simple regret of its output policy after k = 0..K episodes
    (Eq. `simple_regret_def`), cumulative regret of the policy pairs it played, solver statistics."""
    mdp, K, pr, v_star, value = world.mdp, cfg["K"], cfg["prior"], world.v_star, world.value
    ctx = Context(
        mdp,
        world.data,
        K,
        agen,
        mu0=pr["mu0"],
        sigma0=pr["sigma0"],
        alpha0=pr["alpha0"],
        beta=world.beta,
        lam=world.lam,
        behaviour=world.behaviour,
        params=params,
    )
    agent = ONLINE_AGENTS[name](ctx)
    seeds = len(agen)
    sr = torch.zeros(seeds, K + 1, dtype=torch.float64, device=mdp.P.device)
    cum = torch.zeros(seeds, K, dtype=torch.float64, device=mdp.P.device)
    sr[:, 0] = v_star - value(agent.output_policy())
    run = 0.0
    for k in tqdm(range(K), desc=f"{mdp.name}:{name}", disable=not progress, leave=False):
        pi0, pi1 = agent.policies()
        pairs = sample_pairs(mdp, pi0.unsqueeze(1), pi1.unsqueeze(1), world.rater, generator=agen)
        agent.observe(pairs)
        run = run + v_star - 0.5 * (value(pi0) + value(pi1))
        cum[:, k] = run
        sr[:, k + 1] = v_star - value(agent.output_policy())
    extra = {}
    if hasattr(agent, "solver_iters") and agent.solver_iters:
        extra = {
            "newton_iters_mean": float(np.mean(agent.solver_iters)),
            "not_converged": int(agent.not_converged),
        }
    return sr, cum, extra


def summarise(sr: torch.Tensor, cum: torch.Tensor | None, wall: float) -> dict:
    """Mean/sd over seeds of the regret curves (``sr [B, K+1]``, ``cum [B, K]``)."""
    # the sample sd over seeds (ddof = 1, bayescrl.utils.spread); 0 for one seed
    sd = lambda t: t.std(0, unbiased=True) if t.shape[0] > 1 else torch.zeros_like(t[0])  # noqa: E731
    res = {
        "final_simple_regret_mean": float(sr[:, -1].mean()),
        "final_simple_regret_std": float(sd(sr)[-1]),
        "simple_regret_curve_mean": sr.mean(0).tolist(),
        "simple_regret_curve_std": sd(sr).tolist(),
        "final_simple_regret_per_seed": sr[:, -1].tolist(),
        "cumulative_regret_mean": None if cum is None else cum.mean(0).tolist(),
        "cumulative_regret_std": None if cum is None else sd(cum).tolist(),
        "wall_time_s": wall,
    }
    return res


def run_experiment(
    config: Mapping[str, Any],
    seeds: int = 5,
    out: str | Path | None = None,
    *,
    device: str = "cpu",
    progress: bool = True,
    plots: bool = True,
) -> dict:
    """Validate, run (every sweep value if ``sweep`` is set), write ``out/results.json`` and plots."""
    cfg = validate_config(config, seeds)
    device = check_device(device)
    t0 = time.perf_counter()
    result: dict[str, Any] = {"config": cfg, "seeds": seeds, "env": describe(make_env(cfg["env"]))}
    if cfg["sweep"] is None:
        result.update(run_agents(cfg, seeds, device=device, progress=progress))
    else:
        key, runs = cfg["sweep"]["key"], []
        base = {k: v for k, v in cfg.items() if k != "sweep"}
        for v in cfg["sweep"]["values"]:
            sub = validate_config(apply_overrides(base, [f"{key}={json.dumps(v)}"]))
            runs.append({"value": v, **run_agents(sub, seeds, device=device, progress=progress)})
        result["sweep"] = {"key": key, "values": cfg["sweep"]["values"], "runs": runs}
    result["total_wall_time_s"] = time.perf_counter() - t0

    check_no_nan(result, str(out or "results"))  # before anything is written: never a NaN results.json
    if out is not None:
        out = Path(out)
        write_json(out / "results.json", result)
        if plots:
            plot_results(result, out)
    return result


SIMPLE_REGRET_LABEL = "simple regret V* − V^π (return units, log scale)"


def plot_results(result: dict, out: Path) -> list[Path]:
    """Simple regret (log scale) and cumulative regret vs episode, mean with shaded ±1 sd over seeds.

    Regret is in the MDP's value units: ``V*(s_0) - V^pi(s_0)``, the expected episode return lost by the
    agent's current (simple) or played (cumulative) policies."""
    name = result["env"]["name"]
    if "sweep" not in result:
        return _plot_agents(result["agents"], name, out)
    return _plot_sweep(result["sweep"], name, out)


def _plot_agents(ag: dict, name: str, out: Path) -> list[Path]:
    """``simple_regret.png`` of every agent and ``cumulative_regret.png`` of the online ones."""
    curves = {a: (r["simple_regret_curve_mean"], r["simple_regret_curve_std"]) for a, r in ag.items()}
    x = list(range(len(next(iter(curves.values()))[0])))
    paths = [
        plot_mean_sd(
            curves,
            out / "simple_regret.png",
            "online episodes k",
            SIMPLE_REGRET_LABEL,
            title=f"{name}: simple regret",
            x=x,
            logy=True,
        )
    ]
    cum = {
        a: (r["cumulative_regret_mean"], r["cumulative_regret_std"])
        for a, r in ag.items()
        if r["cumulative_regret_mean"] is not None and len(r["cumulative_regret_mean"])
    }
    if cum:
        paths.append(
            plot_mean_sd(
                cum,
                out / "cumulative_regret.png",
                "online episodes k",
                "cumulative regret Σ_k (V* − V^πk) (return units)",
                title=f"{name}: cumulative regret",
            )
        )
    return paths


def _plot_sweep(sw: dict, name: str, out: Path) -> list[Path]:
    """``sweep_<agent>.png``: each agent's simple regret for every value of the swept key."""
    paths = []
    for a in list(sw["runs"][0]["agents"]):
        curves = {}
        for run in sw["runs"]:
            r = run["agents"][a]
            curves[f"{sw['key']}={run['value']}"] = (
                r["simple_regret_curve_mean"],
                r["simple_regret_curve_std"],
            )
        x = list(range(len(next(iter(curves.values()))[0])))
        paths.append(
            plot_mean_sd(
                curves,
                out / f"sweep_{a}.png",
                "online episodes k",
                SIMPLE_REGRET_LABEL,
                title=f"{name}: {a}, varying {sw['key']}",
                x=x,
                logy=True,
            )
        )
    return paths

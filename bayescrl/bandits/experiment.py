"""Experiment runner of chapter `warmPref-PS`: every agent on the same ``S`` seeds, batched over seeds.

Seed ``s`` of a run with base seed ``b`` draws its arms, ``θ``, reward noise and ``D0`` from a generator
seeded with ``b + s`` (so adding seeds never changes the first ones' environments); agent randomness comes
from one generator per agent and seed, seeded with ``b + s`` and the agent's label (so results do not
depend on the order of the agent list, and seed ``s`` is the single-seed run with base seed ``b + s``,
whatever the number of seeds: :func:`~bayescrl.utils.seeding.run_generators`).
"""

from __future__ import annotations

import itertools
import json
import time
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from bayescrl.bandits.agents import Agent, BootstrapAgent, GaussianPSAgent
from bayescrl.bandits.config import raters_of, resolve_config
from bayescrl.bandits.dpo import HybridPreferenceAgent
from bayescrl.bandits.env import LinearBandit
from bayescrl.bandits.offline import OfflineData, sample_offline
from bayescrl.bandits.prior import informed_prior
from bayescrl.bandits.warmtsof import WarmTSOFAgent
from bayescrl.inference.hierarchical import RaterPrior, fit_rater_pool
from bayescrl.inference.rater_report import (
    format_seed_summary,
    format_table,
    save_plot,
    seed_summary,
    table_rows,
)
from bayescrl.raters.competence import beta_bayes, beta_entropy, beta_mle
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import apply_overrides, write_json
from bayescrl.utils.plotting import plot_mean_sd, plt
from bayescrl.utils.seeding import run_generators, set_torch_threads
from bayescrl.utils.spread import fmt_spread


def make_world(cfg: Mapping[str, Any], seeds: int) -> tuple[LinearBandit, OfflineData]:
    """Environment and ``D0`` of every seed (see the module docstring for the seeding scheme)."""
    b, dev = cfg["bandit"], cfg["device"]
    gens = run_generators(cfg["seed"], seeds)
    mu0 = torch.tensor(b["prior_mean"], dtype=torch.float64, device="cpu")
    cov0 = torch.diag(torch.tensor(b["prior_sd"], dtype=torch.float64, device="cpu") ** 2)
    env = LinearBandit.sample(
        seeds, b["K"], b["d"], b["T"], b["noise_sd"], b["rho"], gens, mu0=mu0, cov0=cov0, device=dev
    )
    mu = cfg["offline"]["mu"]
    mu = None if mu is None else torch.tensor(mu, dtype=torch.float64, device="cpu")
    raters, counts = raters_of(cfg["offline"])
    data = sample_offline(env.arms, env.theta, raters, gens, mu=mu, counts=counts)
    return env, data


def pool_competence(
    infer: list[bool],
    beta: torch.Tensor,
    lam: torch.Tensor,
    env: LinearBandit,
    data: OfflineData,
    opts: Mapping[str, Any],
    seed: int = 0,
) -> list:
    """``beta: infer``: per seed, the hierarchical rater model on ``D0``
    (:func:`~bayescrl.inference.hierarchical.fit_rater_pool`, engine ``options.engine``: laplace ->
    laplace-eb; priors ``log β ~ N(beta_prior_loc, beta_prior_scale²)``, ``log λ_i ~ N(μ_λ, 1.5²)`` with the
    pool's level ``μ_λ ~ N(0, 10²)`` (:class:`~bayescrl.inference.hierarchical.RaterPrior`), θ ~ the
    bandit's prior). Raters with ``infer[r]`` get β_i and λ_i inferred (posterior medians written into
    ``beta, lam [S,R]`` in place); the others anchor the pool with their assumed (β, λ). A single rater's λ
    stays at its prior median (not identified from one rater). Returns the pool posteriors, one per
    seed."""
    engine = {"laplace": "laplace-eb", "svi": "svi", "nuts": "nuts"}[opts["engine"]]
    extra = dict(opts["engine_options"]) if engine != "laplace-eb" else {}
    prior = RaterPrior(beta_loc=opts["beta_prior_loc"], beta_scale=opts["beta_prior_scale"])
    x0, x1 = data.features(env.arms)
    pools = []
    for s in range(env.num_seeds):
        raters = [
            {"id": r.id} if infer[i] else {"id": r.id, "beta": float(beta[s, i]), "lam": float(lam[s, i])}
            for i, r in enumerate(data.raters)
        ]
        post = fit_rater_pool(
            x0[s].double().cpu(),
            x1[s].double().cpu(),
            data.y[s].double().cpu(),
            data.rater[s].cpu(),
            raters,
            prior,
            engine,
            mu0=env.mu0.double().cpu(),
            cov0=env.cov0.double().cpu(),
            num_draws=400,
            seed=seed + s,
            **extra,
        )
        for name, t in (("beta", beta), ("lam", lam)):
            med = post.flat(name).median(0).values
            for i in range(len(data.raters)):
                if infer[i]:
                    t[s, i] = float(med[i])
        pools.append(post)
    return pools


def assumed_competence(
    spec_beta: Any,
    spec_lam: Any,
    env: LinearBandit,
    data: OfflineData,
    opts: Mapping[str, Any],
    seed: int = 0,
    pools: list | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The competence ``(beta [S,R], lam [S,R])`` an agent assumes: numbers, ``'true'``, β-estimates
    (``bayes``: seed ``s`` fitted with Pyro seed ``seed + s``; ``infer-beta`` is ``mle``) or ``infer`` (β_i
    and λ_i of the hierarchical rater model, :func:`pool_competence`; their ``lam`` is not used). The pool
    posteriors of ``infer`` (one per seed) are appended to ``pools`` when given."""
    S, R = env.num_seeds, len(data.raters)
    dt, dev = env.arms.dtype, env.arms.device
    lam_items = spec_lam if isinstance(spec_lam, (list, tuple)) else [spec_lam] * R
    lam = torch.tensor(
        [data.raters[r].lam_value() if lam_items[r] == "true" else float(lam_items[r]) for r in range(R)],
        dtype=dt,
        device="cpu",
    ).to(dev)
    lam = lam.expand(S, R).clone()
    beta_items = spec_beta if isinstance(spec_beta, (list, tuple)) else [spec_beta] * R
    beta = torch.empty(S, R, dtype=dt, device=dev)
    for r, item in enumerate(beta_items):
        beta[:, r] = _assumed_beta(item, r, float(lam[0, r]), env, data, opts, seed)
    infer = [item == "infer" for item in beta_items]
    if any(infer):
        fitted = pool_competence(infer, beta, lam, env, data, opts, seed=seed)
        if pools is not None:
            pools.extend(fitted)
    return beta, lam


def _assumed_beta(
    item: Any,
    r: int,
    lam_r: float,
    env: LinearBandit,
    data: OfflineData,
    opts: Mapping[str, Any],
    seed: int,
) -> torch.Tensor | float:
    """The β of rater ``r`` that an agent assumes, per seed ``[S]`` or one number: the true β, a number, or
    estimated from the rater's records of ``D0`` (``mle``, ``entropy``, ``entropy-oracle``, ``bayes``);
    ``infer`` gives a placeholder 1 that :func:`pool_competence` replaces."""
    rows = data.rater[0] == r  # records of rater r (same layout in every seed)

    def sub(t: torch.Tensor) -> torch.Tensor:
        return t[:, rows]

    if item == "true":
        return data.raters[r].beta_value()
    if item == "infer":
        return 1.0  # set by the pool fit
    if item in ("mle", "infer-beta"):
        x0, x1 = data.features(env.arms)
        return beta_mle(sub(x0), sub(x1), sub(data.y), env.mu0, env.cov0, lam_r)
    if item == "entropy":
        return beta_entropy(sub(data.winners()), env.K, c=opts["entropy_c"])
    if item == "entropy-oracle":  # labelled ablation: c calibrated to the true β on this data
        h = 1.0 / beta_entropy(sub(data.winners()), env.K, c=1.0)
        c = float(data.raters[r].beta_value()) * float(h.mean())
        return beta_entropy(sub(data.winners()), env.K, c=c)
    if item == "bayes":
        x0, x1 = data.features(env.arms)
        return beta_bayes(
            sub(x0),
            sub(x1),
            sub(data.y),
            env.mu0,
            env.cov0,
            lam_r,
            beta_loc=opts["beta_prior_loc"],
            beta_scale=opts["beta_prior_scale"],
            steps=opts["bayes_steps"],
            seed=seed,
        )
    return float(item)


def make_agent(
    spec: Mapping[str, Any], cfg: Mapping[str, Any], env: LinearBandit, data: OfflineData
) -> Agent:
    """Instantiate the agent of ``spec`` (``{id, label, beta?, lam?, <option overrides>}``)."""
    opts = {**cfg["options"], **{k: v for k, v in spec.items() if k in cfg["options"]}}
    crc = zlib.crc32(spec["label"].encode())
    gen = run_generators(cfg["seed"], env.num_seeds, key=lambda s: s * 1_000_003 + crc)
    aid, lbl = spec["id"], spec["label"]
    S, d = env.num_seeds, env.d
    boot = {k: opts[k] for k in ("p_offline", "p_online", "online_noise", "anchor_prior", "tol", "max_iter")}
    if aid in ("warmpref-ps-bootstrap", "warmpref-ps", "warmtsof"):
        return _informed_agent(spec, cfg, env, data, opts, gen, boot)
    if aid == "naive-ps":
        R = len(data.raters)
        beta = torch.full((S, R), float(opts["naive_beta"]), dtype=env.arms.dtype, device=env.arms.device)
        lam = torch.full_like(beta, float(opts["naive_lam"]))
        return BootstrapAgent(env, data, beta, lam, generator=gen, label=lbl, **boot)
    if aid == "ps":
        mean, cov = env.mu0.expand(S, d), env.cov0.expand(S, d, d)
        return GaussianPSAgent(env, mean, cov, env.noise_sd, generator=gen, label=lbl)
    if aid == "lints":
        eye = torch.eye(d, dtype=env.arms.dtype, device=env.arms.device)
        mean = torch.zeros(S, d, dtype=env.arms.dtype, device=env.arms.device)
        cov = (eye / opts["lints_ridge"]).expand(S, d, d)
        return GaussianPSAgent(env, mean, cov, 1.0, generator=gen, scale=opts["lints_v"], label=lbl)
    if aid in ("hybrid-dpo", "hybrid-ipo"):
        return HybridPreferenceAgent(
            env,
            data,
            loss=aid.split("-")[1],
            generator=gen,
            steps=opts["dpo_steps"],
            lr=opts["dpo_lr"],
            batch=opts["dpo_batch"],
            tau=opts["dpo_tau"],
            epsilon=opts["dpo_epsilon"],
            prior_weight=opts["dpo_prior_weight"],
            label=lbl,
        )
    raise ConfigError("agents", aid, "unknown agent id")  # pragma: no cover - validated before


def _informed_agent(
    spec: Mapping[str, Any],
    cfg: Mapping[str, Any],
    env: LinearBandit,
    data: OfflineData,
    opts: Mapping[str, Any],
    gen: list[torch.Generator],
    boot: Mapping[str, Any],
) -> Agent:
    """An agent that uses ``D0`` with the competence it assumes (:func:`assumed_competence`):
    warmPref-PS by the bootstrap (Alg. 1), warmTSOF, or warmPref-PS from the informed Gaussian prior
    (Eq. `informed_prior`, engine ``options.engine``). The assumed β, λ and rater pools are attached."""
    aid, lbl = spec["id"], spec["label"]
    pools: list = []
    beta, lam = assumed_competence(
        spec.get("beta", cfg["assumed"]["beta"]),
        spec.get("lam", cfg["assumed"]["lam"]),
        env,
        data,
        opts,
        seed=cfg["seed"],
        pools=pools,
    )
    if aid == "warmpref-ps-bootstrap":
        agent: Agent = BootstrapAgent(env, data, beta, lam, generator=gen, label=lbl, **boot)
    elif aid == "warmtsof":
        agent = WarmTSOFAgent(
            env, data, beta, lam, generator=gen, cost=opts["cost"], eps0=opts["eps0"], label=lbl, **boot
        )
    else:
        mean, cov = informed_prior(
            env, data, beta, lam, opts["engine"], opts["engine_options"], seed=cfg["seed"]
        )
        agent = GaussianPSAgent(env, mean, cov, env.noise_sd, generator=gen, label=lbl)
    agent.assumed_beta = beta  # type: ignore[attr-defined]
    agent.assumed_lam = lam  # type: ignore[attr-defined]
    agent.rater_pools = pools  # type: ignore[attr-defined]
    return agent


def run_agent(
    agent_spec: Mapping[str, Any],
    cfg: Mapping[str, Any],
    env: LinearBandit,
    data: OfflineData,
    progress: bool = False,
) -> dict[str, Any]:
    """Run one agent for ``T`` rounds on all seeds; returns its regret curves ``[S,T]`` and diagnostics."""
    t0 = time.perf_counter()
    agent = make_agent(agent_spec, cfg, env, data)
    S, T = env.num_seeds, env.T
    regret = torch.zeros(S, T, dtype=env.arms.dtype, device=env.arms.device)
    for t in tqdm(range(T), desc=agent.label, disable=not progress, leave=False):
        arm, cost = agent.act(t)
        reward, inst = env.pull(arm, t)
        agent.update(arm, reward)
        regret[:, t] = inst + cost
    wall = time.perf_counter() - t0
    out: dict[str, Any] = {"id": agent_spec["id"], "regret": regret.cumsum(1).cpu(), "wall_time_s": wall}
    if isinstance(agent, BootstrapAgent):
        out["map_not_converged_fraction"] = agent.not_converged / max(agent.solves, 1)
    if isinstance(agent, WarmTSOFAgent):
        out["queries_mean"] = float(agent.queries.double().mean())
    if hasattr(agent, "assumed_beta"):
        out["assumed_beta_mean"] = agent.assumed_beta.mean(0).tolist()
    if getattr(agent, "rater_pools", None):
        out["assumed_lam_mean"] = agent.assumed_lam.mean(0).tolist()
        out["rater_pools"] = list(agent.rater_pools)  # one posterior per seed: the rater table
    return out


def summarise(label: str, res: Mapping[str, Any]) -> dict[str, Any]:
    """JSON summary of one agent: final regret and the mean ± sd cumulative regret curve over seeds."""
    cum = res["regret"].numpy()
    ddof = 1 if cum.shape[0] > 1 else 0
    summary = {
        "id": res["id"],
        "final_regret_mean": float(cum[:, -1].mean()),
        "final_regret_std": float(cum[:, -1].std(ddof=ddof)),
        "final_regret_per_seed": cum[:, -1].tolist(),
        "regret_curve_mean": cum.mean(0).round(4).tolist(),  # 4 decimals keep results.json small
        "regret_curve_std": cum.std(0, ddof=ddof).round(4).tolist(),
        "wall_time_s": res["wall_time_s"],
    }
    for k in ("map_not_converged_fraction", "queries_mean", "assumed_beta_mean", "assumed_lam_mean"):
        if k in res:
            summary[k] = res[k]
    if res.get("rater_pools"):  # beta: infer: the hierarchical rater table of every seed's D0
        pools = res["rater_pools"]
        summary["raters"] = [row for s, post in enumerate(pools) for row in table_rows(post, seed=s)]
        summary["raters_over_seeds"] = seed_summary(summary["raters"])
    return summary


def run_experiment(
    config: Mapping[str, Any] | None, seeds: int = 5, out: str | Path | None = None, progress: bool = False
) -> dict[str, Any]:
    """Run every agent of ``config`` on ``seeds`` seeds; write ``out/results.json`` and ``out/regret.png``.

    Returns ``{"config": resolved config, "seeds": S, "agents": {label: summary}, "wall_time_s": total}``
    where each summary has ``final_regret_mean/std``, ``regret_curve_mean/std`` (cumulative
    pseudo-regret, length ``T``) and ``wall_time_s``.
    """
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ConfigError("seeds", seeds, "must be an integer >= 1")
    set_torch_threads()
    cfg = resolve_config(config, seeds)
    t0 = time.perf_counter()
    env, data = make_world(cfg, seeds)
    agents: dict[str, Any] = {}
    pools = []
    for spec in cfg["agents"]:
        res = run_agent(spec, cfg, env, data, progress)
        if res.get("rater_pools"):
            pools.append(res["rater_pools"][0])
        agents[spec["label"]] = summarise(spec["label"], res)
    result = {"config": cfg, "seeds": seeds, "agents": agents, "wall_time_s": time.perf_counter() - t0}
    if out is not None:
        out = Path(out)
        write_json(out / "results.json", result)
        curves = {k: (v["regret_curve_mean"], v["regret_curve_std"]) for k, v in agents.items()}
        b, o = cfg["bandit"], cfg["offline"]
        title = f"K={b['K']}, d={b['d']}, N={o['N']}, β={o['beta']}, λ={o['lam']} ({seeds} seeds)"
        plot_mean_sd(
            curves, out / "regret.png", "round t", "cumulative pseudo-regret (reward units)", title=title
        )
        if pools:  # the first agent with beta: infer (seed 0's posterior)
            save_plot(pools[0], out)
    return result


def _cell_name(assign: Mapping[str, Any]) -> str:
    return ",".join(f"{k.split('.')[-1]}={v}" for k, v in assign.items())


def run_sweep(
    config: Mapping[str, Any],
    seeds: int = 5,
    out: str | Path | None = None,
    progress: bool = False,
    cell_outputs: bool = True,
) -> dict[str, Any]:
    """Run ``config`` once per cell of its ``sweep: {dotted.key: [values], ...}`` (cartesian product).

    Each cell is a full :func:`run_experiment` (written to ``out/<cell>/`` if ``cell_outputs``);
    ``out/summary.json`` holds
    ``{"cells": {cell: {agent: {final_regret_mean, final_regret_std, wall_time_s}}}}`` and
    ``out/summary.png`` a grouped bar chart (mean ± 1 sd final regret).
    """
    sweep = config.get("sweep") or {}
    grid = _sweep_grid(config, sweep, seeds)
    cells: dict[str, Any] = {}
    t0 = time.perf_counter()
    for assign, cfg in grid:
        name = _cell_name(assign)
        folder = name.replace("=", "_").replace(",", "__")
        sub = None if out is None or not cell_outputs else Path(out) / folder
        res = run_experiment(cfg, seeds=seeds, out=sub, progress=progress)
        cells[name] = {
            "assign": assign,
            "agents": {
                a: {k: v[k] for k in ("final_regret_mean", "final_regret_std", "wall_time_s")}
                for a, v in res["agents"].items()
            },
        }
    summary = {"sweep": dict(sweep), "seeds": seeds, "cells": cells, "wall_time_s": time.perf_counter() - t0}
    if out is not None:
        write_json(Path(out) / "summary.json", summary)
        plot_cells(cells, Path(out) / "summary.png", title=config.get("name", ""))
    return summary


def _sweep_grid(
    config: Mapping[str, Any], sweep: Any, seeds: int
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every cell ``(assignment, config)`` of the cartesian product of ``sweep``, each validated before the
    first one runs (an error names its cell)."""
    if not isinstance(sweep, Mapping) or not sweep:
        raise ConfigError("sweep", sweep, "must be a non-empty mapping {dotted.key: [values]}")
    for k, v in sweep.items():
        if not isinstance(v, (list, tuple)) or not v:
            raise ConfigError(f"sweep.{k}", v, "must be a non-empty list of values")
    base = {k: v for k, v in config.items() if k != "sweep"}
    keys = list(sweep)
    grid = []
    for values in itertools.product(*(sweep[k] for k in keys)):
        assign = dict(zip(keys, values, strict=True))
        cfg = apply_overrides(base, [f"{k}={json.dumps(v)}" for k, v in assign.items()])
        try:
            resolve_config(cfg, seeds)
        except ConfigError as exc:
            why = f"{exc.reason} (sweep cell {_cell_name(assign)})"
            raise ConfigError(exc.field, exc.value, why, exc.index) from None
        grid.append((assign, cfg))
    return grid


def plot_cells(cells: Mapping[str, Any], path: Path, title: str = "") -> Path:
    """Grouped bars: final cumulative regret (mean ± 1 sd) of every agent in every sweep cell."""
    p = plt()
    names = list(cells)
    agents = list(next(iter(cells.values()))["agents"])
    width = 0.8 / len(agents)
    fig, ax = p.subplots(figsize=(max(6.4, 1.1 * len(names) + 2), 4.2))
    for j, a in enumerate(agents):
        xs = [i + (j - (len(agents) - 1) / 2) * width for i in range(len(names))]
        m = [cells[n]["agents"][a]["final_regret_mean"] for n in names]
        sd = [cells[n]["agents"][a]["final_regret_std"] for n in names]
        ax.bar(xs, m, width, yerr=sd, capsize=2, label=a)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=20, ha="right", fontsize=8)
    ax.set_xlabel("sweep cell")
    ax.set_ylabel("final cumulative regret (reward units, ±1 sd over seeds)")
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    p.close(fig)
    return path


def final_table(result: Mapping[str, Any]) -> str:
    """A one-line-per-agent text table of final regret (mean ± sd) and wall time (sweeps: per cell)."""
    if "cells" in result:
        n = result.get("seeds")
        cells = result["cells"].items()
        return "\n\n".join(f"[{name}]\n" + final_table({**cell, "seeds": n}) for name, cell in cells)
    n = result.get("seeds")
    lines = [f"{'agent':28s} {'regret (mean ± sd, n = ' + str(n) + ')':>30s} {'time [s]':>9s}"]
    for label, s in result["agents"].items():
        reg = fmt_spread(s["final_regret_mean"], s["final_regret_std"], n, show_n=False)
        lines.append(f"{label:28s} {reg:>30s} {s['wall_time_s']:9.2f}")
    for label, s in result["agents"].items():
        if s.get("raters_over_seeds") and (n or 1) > 1:
            lines.append(f"{label}: " + format_seed_summary(s["raters_over_seeds"]))
        elif s.get("raters"):
            lines.append(f"{label}: " + format_table(s["raters"]))
    return "\n".join(lines)


__all__ = ["final_table", "make_world", "run_experiment", "run_sweep"]

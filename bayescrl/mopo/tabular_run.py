"""A tabular MOPO config end to end (``bayescrl mopo`` with ``mode: tabular``): the config checked as the
command checks it, the preference model (win rates or a Bradley–Terry posterior,
:mod:`bayescrl.mopo.preferences`), the solver of :mod:`bayescrl.mopo.tabular` it names, its results and the
learning-curve plot."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from bayescrl.inference.rater_report import PLOT_NAME, save_plot
from bayescrl.mopo.config import check_tabular
from bayescrl.mopo.preferences import PREFERENCE_MODELS, fit_bradley_terry, parse_bt_options
from bayescrl.mopo.tabular import (
    MopoRun,
    TabularProblem,
    as_threshold,
    check_tau,
    run_mopo,
    run_mopo_lb,
    solve_exact,
    total_variation,
)
from bayescrl.utils import ConfigError
from bayescrl.utils.checks import check_device, choice
from bayescrl.utils.plotting import plot_mean_sd


def apply_preference_model(
    problem: TabularProblem, model: str = "empirical", options: Mapping[str, Any] | None = None
) -> tuple[TabularProblem, dict]:
    """Set ``problem.scores`` from ``preference_model`` (:mod:`bayescrl.mopo.preferences`).

    ``empirical``: the problem is returned unchanged (its records give the estimates) and no extra results.
    ``bradley-terry``: the posterior mean of ``p_k(a)`` for the primary objective and, for the constrained
    ones, the mean or (``lower_quantile``) that lower posterior quantile; the extra results are
    ``preference_probs`` (mean and 90 % interval per objective and action), the competence used per rater and
    the engine's diagnostics. For Gaussian posterior marginals the per-action lower quantile bounds the
    quantile of ``G(pi) = sum_a pi(a) q(a)`` from below (the sd of a mixture is at most the mixture of sds).
    """
    if model not in PREFERENCE_MODELS:
        raise ConfigError("preference_model", model, f"must be one of {list(PREFERENCE_MODELS)}")
    if model == "empirical":
        return problem, {}
    opts = parse_bt_options(options)
    rater = problem.rater if problem.rater is not None else torch.zeros_like(problem.y)
    est = fit_bradley_terry(
        problem.y, problem.y_prime, problem.ind, rater, problem.raters, problem.ref, **opts
    )
    k = problem.n_objectives
    others = [i for i in range(k) if i != problem.primary]
    dev = problem.ref.device
    lq = opts["lower_quantile"]
    q_src = est.mean if lq is None else est.quantile(float(lq))
    scores = (est.mean[problem.primary].to(dev), q_src[others].T.contiguous().to(dev))
    extra = {
        "preference_model": model,
        "preference_probs": est.to_json(problem.actions),
        "rater_beta": est.beta,
        **({"raters": [row for r in est.diagnostics.values() for row in r["raters"]]} if est.pools else {}),
        "inference": {
            "engine": opts["engine"],
            "competence": opts["competence"],
            "lower_quantile": lq,
            "num_samples": opts["num_samples"],
            "diagnostics": est.diagnostics,
        },
    }
    if est.pools:
        extra["_pools"] = est.pools  # plotted (then dropped) by solve_config
    return replace(problem, scores=scores), extra


def solve_config(
    config: Mapping[str, Any], device: str | torch.device = "cpu", out: str | Path | None = None
) -> tuple[dict, MopoRun | None]:
    """Run the tabular solver ``config['solver']``; returns (results dict, stochastic run or None). With
    ``competence: infer`` and ``out``, the rater plot goes to ``out/rater_competence.png`` (one per
    objective, ``rater_competence_<objective>.png``, when there are several). The config is checked first
    as the CLI checks it (:func:`bayescrl.mopo.config.check_tabular`: unknown keys, every number by name,
    every record), and ``device``."""
    device = check_device(device)
    choice(config.get("mode", "tabular"), "mode", ("tabular",), "must be tabular (the tabular solvers)")
    return solve_problem(config, check_tabular({**config, "mode": "tabular"}, device), device, out)


def solve_problem(
    config: Mapping[str, Any],
    problem: TabularProblem,
    device: str | torch.device = "cpu",
    out: str | Path | None = None,
) -> tuple[dict, MopoRun | None]:
    """:func:`solve_config` on a config already checked by :func:`~bayescrl.mopo.config.check_tabular`,
    which returned ``problem``."""
    tau, solver = check_tau(config.get("tau", 1.0)), config.get("solver", "exact")
    augment = bool(config.get("augment", True))
    if solver not in SOLVERS:
        raise ConfigError("solver", solver, "must be one of exact, mopo, mopo-lb")
    problem, pref_extra = apply_preference_model(
        problem, config.get("preference_model", "empirical"), config.get("bradley_terry")
    )
    pools = pref_extra.pop("_pools", [])
    if out is not None:
        for k, pool in enumerate(pools):
            suffix = "" if len(pools) == 1 else f"_{k}"
            save_plot(pool, out, PLOT_NAME.replace(".png", f"{suffix}.png"))
    opts: dict[str, Any] = dict(config.get(solver.replace("-", "_"), {}) or {})
    b_cfg = config.get("b")
    b = None if b_cfg is None else as_threshold(b_cfg, problem.n_objectives - 1)
    res: dict[str, Any] = {
        "solver": solver,
        "tau": tau,
        "actions": problem.actions,
        "primary": problem.primary,
        **pref_extra,
    }
    if solver == "exact":
        return {**res, **_exact_results(problem, tau, b, augment)}, None
    run = _stochastic_run(problem, solver, opts, tau, b, augment, device)
    return {**res, **_run_results(run, problem, tau, b, opts, augment)}, run


#: the tabular solvers (``solver``)
SOLVERS = ("exact", "mopo", "mopo-lb")


def _exact_results(problem: TabularProblem, tau: float, b: Tensor | None, augment: bool) -> dict[str, Any]:
    """``solver: exact``: the policy, ``lambda``, ``G``, ``b``, ``F`` and the KKT residuals."""
    if b is None:
        raise ConfigError("b", None, "the exact solver needs a fixed threshold b")
    sol = solve_exact(problem, tau, b, augment)
    return {
        "policy": dict(zip(problem.actions, sol.policy.tolist(), strict=True)),
        "lambda": sol.lam.tolist(),
        "G": sol.G.tolist(),
        "b": sol.b.tolist(),
        "F": sol.F,
        "kkt": sol.kkt,
    }


def _stochastic_run(
    problem: TabularProblem, solver: str, opts: Mapping[str, Any], tau: float, b: Tensor | None,
    augment: bool, device: str | torch.device,
) -> MopoRun:  # fmt: skip
    """``solver: mopo`` (:func:`run_mopo`; adaptive thresholds with ``beta``) or ``mopo-lb``
    (:func:`run_mopo_lb`) with the solver section's settings ``opts``."""
    common = {
        k: opts[k] for k in ("steps", "lr", "batch", "runs", "seed", "log_every", "lr_final") if k in opts
    }
    if solver == "mopo":
        beta = opts.get("beta")
        return run_mopo(
            problem,
            tau,
            b=None if beta is not None else b,
            beta=beta,
            t0=opts.get("t0"),
            eps=float(opts.get("eps", 0.0)),
            augment=augment,
            device=device,
            **common,
        )
    if b is None:
        raise ConfigError("b", None, "mopo-lb needs a fixed threshold b")
    extra = {k: opts[k] for k in ("sigma0", "gamma", "sigma_min") if k in opts}
    return run_mopo_lb(problem, tau, b, augment=augment, device=device, **common, **extra)


def _run_results(
    run: MopoRun, problem: TabularProblem, tau: float, b: Tensor | None, opts: Mapping[str, Any],
    augment: bool,
) -> dict[str, Any]:  # fmt: skip
    """A stochastic run's mean policy, ``lambda``, ``G``, ``b`` over runs, the policy per run and, with a
    fixed ``b``, the exact solution and each run's total-variation distance to it."""
    out: dict[str, Any] = {
        "policy": dict(zip(problem.actions, run.policy.mean(0).tolist(), strict=True)),
        "lambda": run.lam.mean(0).tolist(),
        "G": run.G.mean(0).tolist(),
        "b": run.b.mean(0).tolist(),
        "policy_per_run": run.policy.tolist(),
    }
    if b is not None and opts.get("beta") is None:
        ex = solve_exact(problem, tau, b, augment)
        out["exact_policy"] = dict(zip(problem.actions, ex.policy.tolist(), strict=True))
        out["tv_to_exact"] = total_variation(run.policy, ex.policy).tolist()
    return out


def plot_history(
    run: MopoRun, actions: Sequence[str], path, title: str = "", exact: Mapping[str, float] | None = None
):
    """Action probabilities (mean ± sd over runs) against steps, like figure `mopo_action_probs`; with
    ``exact`` (action -> probability of the exact solution, Eq. `mopo_closed_form`) drawn as dashed lines in
    each action's colour. Returns the figure (closed)."""
    pol = run.history["policy"]  # [T, R, A]
    curves = {
        # sample sd over runs (ddof = 1); a flat band for one run
        a: (
            pol[:, :, i].mean(1).tolist(),
            (pol[:, :, i].std(1) if pol.shape[1] > 1 else 0 * pol[:, :, i].mean(1)).tolist(),
        )
        for i, a in enumerate(actions)
    }
    return plot_mean_sd(
        curves,
        path,
        xlabel="solver step",
        ylabel="action probability π(y)",
        title=title,
        x=run.steps,
        refs={f"{a} (exact)": float(exact[a]) for a in actions if a in exact} if exact else None,
        band_label="±1 sd over runs",
    )

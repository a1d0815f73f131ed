"""Engine comparison on one model and data: accuracy, speed, predictive log-loss, calibration.

Per engine: seconds per 1,000 posterior samples (fit + sampling), error of the θ posterior mean and
covariance against the reference (exact where it exists, else NUTS), 2-Wasserstein distance between
the Gaussian fits, marginal and joint (dyadic, τ = 10) predictive log-loss on held-out comparisons, the
coverage of 90 % central credible intervals for the true θ over repeated synthetic draws from the prior,
and (MCMC) R-hat / ESS. Joint log-loss follows the epistemic-neural-network testbed (Osband et al.):
−log (1/S) Σ_s Π_{i≤τ} p_s(y_i) over batches of τ comparisons built from 2 anchor pairs, whose labels
are drawn from the true rater — marginal log-loss barely separates good from poor posteriors.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from bayescrl.inference.bootstrap import perturbed_map
from bayescrl.inference.engines import ENGINES, fit
from bayescrl.inference.exact import GaussianLinearPosterior
from bayescrl.inference.laplace import laplace
from bayescrl.inference.posterior import import_arviz
from bayescrl.models.linear import BTLinearProblem
from bayescrl.models.spec import SpecModel
from bayescrl.utils.errors import ConfigError, DataError
from bayescrl.utils.io import write_json
from bayescrl.utils.plotting import plt
from bayescrl.utils.runlog import progress_enabled
from bayescrl.utils.seeding import bernoulli, draw, randint

DT = torch.float64


def gaussian_w2(m1: torch.Tensor, c1: torch.Tensor, m2: torch.Tensor, c2: torch.Tensor) -> float:
    """2-Wasserstein distance between N(m1, c1) and N(m2, c2)."""

    def sqrtm(a):
        w, v = torch.linalg.eigh(0.5 * (a + a.T))
        return (v * w.clamp_min(0).sqrt()) @ v.T

    s2 = sqrtm(c2)
    cross = sqrtm(s2 @ c1 @ s2)
    val = ((m1 - m2) ** 2).sum() + torch.trace(c1 + c2 - 2 * cross)
    return float(val.clamp_min(0).sqrt())


def applicable_engines(model: SpecModel) -> list[str]:
    out = []
    conj = model.fixed_competence and not bool(model.problem.pref_mask.any())
    for e in ENGINES:
        if e == "exact" and not conj:
            continue
        out.append(e)
    return out


def _pref_prob(samples: dict[str, torch.Tensor], x0, x1, rater, beta, y) -> torch.Tensor:
    """p_s(y_i) for samples s and comparisons i: [S, n]."""
    vt = samples["vartheta"][:, rater, :]  # [S, n, d]
    z = beta[rater] * ((x1 - x0) * vt).sum(-1)
    p1 = torch.sigmoid(z)
    return torch.where(y.bool(), p1, 1 - p1)


def heldout_logloss(
    samples: dict[str, torch.Tensor],
    model: SpecModel,
    *,
    tau: int = 10,
    batches: int = 300,
    seed: int = 0,
    max_samples: int = 1000,
) -> dict[str, float] | None:
    """Marginal and joint (dyadic) predictive log-loss; None when there is nothing to evaluate on.

    Uses at most ``max_samples`` posterior samples (memory is samples × batches × τ × d).
    """
    samples = {k: v[:max_samples] for k, v in samples.items()}
    p = model.problem
    gen = torch.Generator().manual_seed(seed)
    if model.truth is not None:
        X0, X1, rr, yy = _simulated_heldout(model, tau, batches, gen)
    elif model.heldout is not None and bool(model.heldout.pref_mask.any()):
        X0, X1, rr, yy, tau = _resampled_heldout(model, tau, batches, gen)
    else:
        return None
    pr = _pref_prob(samples, X0, X1, rr, p.beta, yy).clamp_min(1e-300)  # [S, batches·τ]
    S = pr.shape[0]
    marginal = -float((torch.logsumexp(pr.log(), 0) - math.log(S)).mean())
    joint_lp = pr.log().reshape(S, batches, tau).sum(-1)  # [S, batches]
    joint = -float((torch.logsumexp(joint_lp, 0) - math.log(S)).mean()) / tau
    return {"marginal": marginal, "joint_per_item": joint, "tau": tau}


def _simulated_heldout(
    model: SpecModel, tau: int, batches: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Dyadic held-out comparisons labelled by the true rater: ``batches`` batches of ``tau`` comparisons,
    each drawn from 2 random anchor pairs; returns ``x0, x1 [batches·τ, d]``, raters and labels."""
    p = model.problem
    d, R = p.dim, p.num_raters
    truth_vt = model.truth.get("vartheta")
    truth_vt = model.truth["theta"].expand(R, d) if truth_vt is None else truth_vt
    dev = p.mu0.device  # drawn on the CPU stream, moved: the same numbers on every device
    x0 = draw(torch.randn, (batches, 2, d), gen, dtype=DT, device=dev)
    x1 = draw(torch.randn, (batches, 2, d), gen, dtype=DT, device=dev)
    pick = randint(2, (batches, tau), gen, device=dev)
    rater = randint(R, (batches, 1), gen, device=dev).expand(batches, tau)
    X0 = torch.gather(x0, 1, pick[..., None].expand(batches, tau, d))
    X1 = torch.gather(x1, 1, pick[..., None].expand(batches, tau, d))
    z = p.beta[rater] * ((X1 - X0) * truth_vt[rater]).sum(-1)
    y = bernoulli(torch.sigmoid(z), gen)
    return X0.reshape(-1, d), X1.reshape(-1, d), rater.reshape(-1), y.reshape(-1)


def _resampled_heldout(
    model: SpecModel, tau: int, batches: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """``batches`` random subsets of ``min(tau, n)`` of the spec's n held-out comparisons (flattened, as
    :func:`_simulated_heldout`) and the batch size."""
    h, d = model.heldout, model.problem.dim
    m = h.pref_mask
    n = int(m.sum())
    perms = [torch.randperm(n, generator=gen, device="cpu")[: min(tau, n)] for _ in range(batches)]
    idx = torch.stack(perms).to(m.device)
    X0, X1, rr, yy = (
        h.x0[m][idx].reshape(-1, d),
        h.x1[m][idx].reshape(-1, d),
        h.rater[m][idx].reshape(-1),
        h.y[m][idx].reshape(-1),
    )
    return X0, X1, rr, yy, idx.shape[1]


def _synthetic_batch(
    model: SpecModel, reps: int, gen: torch.Generator
) -> tuple[BTLinearProblem, torch.Tensor]:
    """``reps`` data sets with the spec's design, θ* ~ prior, labels/rewards from the model."""
    p = model.problem
    d, R = p.dim, p.num_raters
    chol = torch.linalg.cholesky(p.cov0)
    dev = p.mu0.device  # drawn on the CPU stream, moved: the same numbers on every device
    theta = p.mu0 + draw(torch.randn, (reps, d), gen, dtype=DT, device=dev) @ chol.T
    vt = theta[:, None, :] + draw(torch.randn, (reps, R, d), gen, dtype=DT, device=dev) / p.lam[:, None]
    pm, rm = p.pref_mask, p.reward_mask
    x0, x1, rater = p.x0[pm], p.x1[pm], p.rater[pm]
    z = p.beta[rater] * ((x1 - x0) * vt[:, rater, :]).sum(-1)  # [reps, N]
    y = bernoulli(torch.sigmoid(z), gen)
    x = p.x[rm]
    r = theta @ x.T + p.noise_sd * draw(torch.randn, (reps, x.shape[0]), gen, dtype=DT, device=dev)
    B = reps
    prob = replace(
        p,
        x0=x0.expand(B, *x0.shape).clone(),
        x1=x1.expand(B, *x1.shape).clone(),
        y=y,
        rater=rater.expand(B, -1).clone(),
        pref_online=p.pref_online[pm].expand(B, -1).clone(),
        pref_mask=torch.ones(B, x0.shape[0], dtype=torch.bool, device=dev),
        x=x.expand(B, *x.shape).clone(),
        r=r,
        reward_mask=torch.ones(B, x.shape[0], dtype=torch.bool, device=dev),
    )
    return prob, theta


def coverage(
    model: SpecModel,
    engine: str,
    *,
    reps: int,
    level: float = 0.9,
    num_samples: int = 400,
    seed: int = 0,
    options: dict | None = None,
    progress: bool = True,
) -> float | None:
    """Fraction of θ* coordinates inside the engine's central ``level`` credible interval (batched reps)."""
    if reps <= 0 or not model.fixed_competence:
        return None
    gen = torch.Generator().manual_seed(seed + 7919)
    prob, theta = _synthetic_batch(model, reps, gen)
    options = options or {}
    if engine == "exact":
        if bool(model.problem.pref_mask.any()):
            return None
        post = GaussianLinearPosterior(prob.mu0.expand(reps, -1), prob.cov0, prob.noise_sd).update_many(
            prob.x, prob.r
        )
        samples = post.sample(num_samples, gen)
    elif engine == "laplace":
        samples = laplace(prob).sample(num_samples, gen)[0]
    elif engine == "bootstrap":
        samples = perturbed_map(prob, num_samples, generator=gen, **options).theta
    else:  # svi / nuts: one fit per repetition
        samples = _refit_each(model, prob, engine, reps, num_samples, seed, options, progress)
    lo = torch.quantile(samples, (1 - level) / 2, dim=-2)
    hi = torch.quantile(samples, (1 + level) / 2, dim=-2)
    return float(((theta >= lo) & (theta <= hi)).double().mean())


def _refit_each(
    model: SpecModel,
    prob: BTLinearProblem,
    engine: str,
    reps: int,
    num_samples: int,
    seed: int,
    options: dict,
    progress: bool,
) -> torch.Tensor:
    """θ samples ``[reps, num_samples, d]``: ``engine`` fitted once per synthetic data set of ``prob`` (seed
    ``seed + b`` for data set ``b``)."""
    rows = []
    bar = tqdm(range(reps), desc=f"coverage[{engine}]", leave=False, disable=not progress_enabled(progress))
    for b in bar:
        one = BTLinearProblem.from_data(
            prob.mu0,
            prob.cov0,
            prob.beta,
            prob.lam,
            prob.noise_sd,
            x0=prob.x0[b],
            x1=prob.x1[b],
            y=prob.y[b],
            rater=prob.rater[b],
            x=prob.x[b],
            r=prob.r[b],
        )
        sm = replace(model, problem=one, transitions=None)
        rows.append(fit(sm, engine=engine, seed=seed + b, **options).sample(num_samples, seed + b)["theta"])
    return torch.stack(rows)


def compare_engines(
    model: SpecModel,
    engines: list[str] | None = None,
    *,
    num_samples: int = 1000,
    seed: int = 0,
    coverage_reps: int = 100,
    coverage_reps_slow: int = 0,
    engine_options: dict[str, dict] | None = None,
    out_dir: str | Path | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Run every applicable engine; return (and write, if ``out_dir``) the comparison report.

    ``progress``: a bar over the engines and, inside it, each engine's own (NUTS: warm-up and draws of every
    chain; SVI: steps), hidden when the ``bayescrl`` logger is quiet (``bayescrl -q``)."""
    engine_options = engine_options or {}
    reference, order = _engine_order(model, engines)
    rows: dict[str, dict[str, Any]] = {}
    samples_by: dict[str, torch.Tensor] = {}
    # engines take from milliseconds (exact) to minutes (NUTS): no ETA from their average (the inner
    # bars of NUTS and SVI carry one)
    bar_format = "{l_bar}{bar}| {n_fmt}/{total_fmt} engines [{elapsed}]"
    for e in tqdm(order, desc="compare", bar_format=bar_format, disable=not progress_enabled(progress)):
        reps = coverage_reps_slow if e in ("svi", "nuts") else coverage_reps
        rows[e], samples_by[e] = _engine_row(
            model, e, engine_options.get(e, {}), num_samples, seed, reps, progress
        )
    ref_mean, ref_cov = _reference_moments(model, reference, samples_by[reference])
    for e, row in rows.items():
        th = samples_by[e]
        m, c = th.mean(0), torch.cov(th.T).reshape(model.dim, model.dim)
        ref_cov_m = ref_cov.reshape(model.dim, model.dim)
        row["mean_error"] = float((m - ref_mean).norm())
        row["cov_rel_error"] = float((c - ref_cov_m).norm() / ref_cov_m.norm())
        row["w2"] = gaussian_w2(m, c, ref_mean, ref_cov_m)
    report = {"reference": reference, "num_samples": num_samples, "seed": seed, "engines": rows}
    if out_dir is not None:
        out = Path(out_dir)
        write_json(out / "compare.json", report)
        (out / "compare.md").write_text(markdown_table(report))
        plot_marginals(samples_by, out / "marginals.png", truth=model.truth)
    return report


def _engine_order(model: SpecModel, engines: list[str] | None) -> tuple[str, list[str]]:
    """The reference engine (exact where it applies, else NUTS) and the engines to run, reference first;
    refuses a model without observations and engines that do not apply to it."""
    p = model.problem
    if not bool(p.pref_mask.any()) and not bool(p.reward_mask.any()):
        raise DataError("preferences", [], "compare needs at least one observation (preferences or rewards)")
    ok = applicable_engines(model)
    engines = engines or ok
    for e in engines:
        if e not in ok:
            raise ConfigError("engines", e, f"not applicable to this model (applicable: {ok})")
    reference = "exact" if "exact" in ok else "nuts"
    return reference, [reference] + [e for e in engines if e != reference]


def _engine_row(
    model: SpecModel, e: str, opts: dict, num_samples: int, seed: int, reps: int, progress: bool
) -> tuple[dict[str, Any], torch.Tensor]:
    """Fit engine ``e`` and draw ``num_samples``; its report row (timings, θ moments, held-out log-loss,
    coverage over ``reps`` synthetic data sets, diagnostics) and its θ samples ``[S, d]``."""
    t0 = time.perf_counter()
    post = fit(model, engine=e, seed=seed, progress=progress, **opts)
    t1 = time.perf_counter()
    s = post.sample(num_samples, seed)
    t2 = time.perf_counter()
    th = s["theta"].double()
    cov = torch.cov(th.T).reshape(model.dim, model.dim)
    row: dict[str, Any] = {
        "seconds_per_1000": (t2 - t0) / th.shape[0] * 1000,
        "fit_seconds": t1 - t0,
        "sample_seconds": t2 - t1,
        "theta_mean": th.mean(0),
        "theta_sd": cov.diagonal().sqrt(),
        "logloss": heldout_logloss(s, model, seed=seed),
        "approximate": post.approximate,
    }
    row["coverage90"] = coverage(model, e, reps=reps, seed=seed, options=opts, progress=progress)
    diag = {k: v for k, v in post.diagnostics.items() if k != "elbo"}
    if e == "nuts":
        summ = import_arviz().summary(post.to_arviz(log_likelihood=False), var_names=["theta"])
        diag["summary"] = summ.reset_index().to_dict(orient="list")
    row["diagnostics"] = diag
    return row, th


def _reference_moments(
    model: SpecModel, reference: str, th: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and covariance of the reference posterior: the closed form for ``exact`` (no Monte-Carlo error),
    else those of its samples ``th``."""
    if reference != "exact":
        return th.mean(0), torch.cov(th.T)
    p = model.problem
    post = GaussianLinearPosterior(p.mu0, p.cov0, p.noise_sd)
    post.update_many(p.x[p.reward_mask], p.r[p.reward_mask])
    return post.mean, post.cov


def markdown_table(report: dict[str, Any]) -> str:
    ref = report["reference"]
    lines = [
        f"Reference: **{ref}**; {report['num_samples']} samples per engine.",
        "",
        "| engine | s / 1000 samples | mean err | cov rel. err | W2 | marginal log-loss | joint log-loss | "
        "coverage 90% | diagnostics |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def f(v, fmt="{:.4g}"):
        return "–" if v is None or (isinstance(v, float) and not math.isfinite(v)) else fmt.format(v)

    for e, r in report["engines"].items():
        ll = r["logloss"] or {}
        dg = r["diagnostics"]
        keys = ("converged", "converged_fraction", "steps", "rhat_max", "ess_bulk_min", "divergences")
        diag = ", ".join(f"{k}={f(dg[k]) if isinstance(dg[k], float) else dg[k]}" for k in keys if k in dg)
        lines.append(
            f"| {e} | {f(r['seconds_per_1000'])} | {f(r['mean_error'])} | {f(r['cov_rel_error'])} | "
            f"{f(r['w2'])} | "
            f"{f(ll.get('marginal'))} | {f(ll.get('joint_per_item'))} | {f(r['coverage90'])} | {diag} |"
        )
    return "\n".join(lines) + "\n"


def plot_marginals(samples: dict[str, torch.Tensor], path: Path, truth: dict | None = None) -> Path:
    p = plt()
    d = next(iter(samples.values())).shape[1]
    cols = min(d, 4)
    rows = math.ceil(d / cols)
    fig, axes = p.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    for j in range(d):
        ax = axes[j // cols][j % cols]
        for e, th in samples.items():
            ax.hist(th[:, j].cpu().numpy(), bins=40, density=True, histtype="step", label=e)
        if truth is not None:
            ax.axvline(float(truth["theta"][j]), color="k", ls="--", lw=1)
        ax.set_title(f"theta[{j}]", fontsize=9)
    for j in range(d, rows * cols):
        axes[j // cols][j % cols].axis("off")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    p.close(fig)
    return path

"""Hierarchical rater competence: θ, every rater's belief ϑ_i and competences (β_i, λ_i) inferred jointly.

The model is the multi-rater standard model of the warmPref-PS chapter (Eq. `rater_preference_dist`,
lemma `mapestimatelemma`; :func:`bayescrl.models.pyro_models.bt_linear_model` writes it in Pyro):

    θ ~ N(μ0, Σ0),   ϑ_i | θ, λ_i ~ N(θ, I/λ_i²),
    Y_n | ϑ, β ~ Bernoulli(σ(β_i ⟨x1_n − x0_n, ϑ_i⟩)),   i = rater(n)   (Y = 1: x1 preferred),

with LogNormal priors on the unknown competences, the λ_i (and optionally the β_i) hierarchical across the
pool (:class:`RaterPrior`; default μ_β = beta_loc fixed, lam_pool_scale = 10):

    log β_i ~ N(μ_β, prior.beta_scale²),   μ_β ~ N(prior.beta_loc, prior.beta_pool_scale²),
    log λ_i ~ N(μ_λ, prior.lam_scale²),    μ_λ ~ N(prior.lam_loc, prior.lam_pool_scale²)

(a pool scale 0: the level is fixed at its loc, independent priors). The thesis treats competence as a
property of each rater; sharing the level μ_λ lets the pool decide whether its raters are informed
(one rater's λ is pulled towards the others', not towards a fixed guess).

The thesis notes that λ cannot be estimated from one rater (one belief ϑ, one draw of its distance to θ);
across a pool it can: the raters' disagreement tells how far each ϑ_i sits from the θ they share. A rater
whose competence is known (``beta=`` / ``lam=`` given) keeps those values and anchors the pool; without
any known value only the priors fix the scale trade-off of β_i and θ (β_i ϑ_i is what a rater's data sees).

Engines (:func:`fit_rater_pool`):

* ``laplace-eb`` (fast, scales to d in the hundreds): competences by type-II MAP — maximise
  log p(D | log β, log λ) + log p(log β, log λ), the marginal likelihood of the data with (θ, ϑ) integrated
  out by a Laplace approximation at the MAP of lemma `mapestimatelemma`, over the log competences with
  SciPy's L-BFGS-B. The Hessian of (θ, ϑ_1..ϑ_R) is block-arrow (each ϑ_i couples only to θ), so its
  log det and solves cost R factorisations of A_i = λ_i² I + K_i (d×d, or U×U by Woodbury and the matrix
  determinant lemma where every rater has U < d comparisons) and one of the θ Schur complement.
  The gradient is analytic and exact: the trace terms of d log det H/dh plus the MAP's response
  dẑ/dh = −H⁻¹ ∂g/∂h (implicit differentiation). The inner MAP is found by inexact Newton with the line
  search and convergence test of :mod:`bayescrl.inference.bootstrap` (gradient 2-norm ≤ 10⁻⁹), started
  from the better of the first-order prediction ẑ + (dẑ/dh)Δh and the last MAP, each step solved by
  conjugate gradients on exact Hessian-vector products preconditioned by the block factors of the
  previous evaluation (refactored only where those are too far off). The optimiser's trial points are
  evaluated in a search mode: on the CPU the matrix products of the blocks and of the gradient's trace
  terms in float32 (the gradient to about 10⁻⁵, F to about 10⁻⁶), the inner MAP to 10⁻⁶ and at most 20
  Newton steps (a wild trial point is not solved to the end: its evidence where the solve stops is in
  practice far below the last point's, and the line search backs off). L-BFGS-B stops at a
  gradient of ``tol`` (10⁻²); its end point is re-solved exactly and one Newton step with the competence
  Hessian takes the gradient to about 10⁻⁵. The competences' posterior is the
  Gaussian (in log space) with the Hessian of that objective (forward differences of the analytic
  gradient, float32 trace products from d = 64 on the CPU, taken at the optimiser's end point, one Newton
  step from the optimum); (θ, ϑ)
  are Gaussian at the MAP, with θ's covariance widened by the competences' uncertainty through the MAP's
  sensitivity (θ ≈ θ̂ + J (h − ĥ) + N(0, S⁻¹), J = dθ̂/dh).
* ``svi``: Pyro SVI on the model above (:func:`bayescrl.inference.svi.fit_svi`, multivariate-normal guide).
* ``nuts``: Pyro NUTS (:func:`bayescrl.inference.nuts.fit_nuts`), the reference.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyro
import pyro.distributions as dist
import scipy.optimize
import torch
import torch.nn.functional as F

from bayescrl.inference.bootstrap import map_estimate, spd_cholesky
from bayescrl.inference.nuts import fit_nuts
from bayescrl.inference.posterior import import_arviz
from bayescrl.inference.sites import site_infos
from bayescrl.inference.svi import fit_svi
from bayescrl.models.linear import BTLinearProblem
from bayescrl.models.pyro_models import CompetencePrior, bt_linear_model
from bayescrl.raters.rater import LAM_POOL_SCALE, LAM_PRIOR_LOC, LAM_PRIOR_SCALE
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.plotting import plt as _plt

POOL_ENGINES = ("laplace-eb", "svi", "nuts")
VERDICTS = ("trusted", "random", "deliberate-but-misinformed", "uncertain")


@dataclass(frozen=True)
class RaterPrior:
    """LogNormal priors of the unknown competences, optionally hierarchical across the pool.

    Independent (``*_pool_scale = 0``): ``log β_i ~ N(beta_loc, beta_scale²)``,
    ``log λ_i ~ N(lam_loc, lam_scale²)``. The locations suit θ ~ N(0, I) with unit-scale item differences:
    median β = 5 (a typical logit of a few units), λ around 1 (a belief as far from θ as θ's own prior
    spread per coordinate); a log-sd of 1.5 spans a factor ~e^{1.5·1.64} ≈ 12 either way at 90 %.

    Hierarchical (``lam_pool_scale`` s > 0, the default for λ: s = 10,
    :data:`bayescrl.raters.rater.LAM_POOL_SCALE`; ``beta_pool_scale`` likewise for β, default 0): the
    raters of unknown λ share a pool level μ_λ,

        μ_λ ~ N(lam_loc, s²),   log λ_i | μ_λ ~ N(μ_λ, lam_scale²),

    so the pool's own raters decide how informed its raters are, and each λ_i is shrunk towards the
    others. μ_λ is integrated out exactly (laplace-eb; the Pyro engines sample it as the site
    ``lam_pool``): the free log λ's are jointly N(lam_loc·1, lam_scale² I + s² 11ᵀ), whose log density
    is −½ (Σ e_i² − c (Σ e_i)²)/lam_scale² + const with e_i = log λ_i − lam_loc and
    c = s²/(lam_scale² + n s²) (n free raters); s → ∞ is empirical Bayes on μ_λ (no pull on the pool's
    level, only on the spread)."""

    beta_loc: float = math.log(5.0)
    beta_scale: float = 1.5
    lam_loc: float = LAM_PRIOR_LOC
    lam_scale: float = LAM_PRIOR_SCALE
    beta_pool_scale: float = 0.0
    lam_pool_scale: float = LAM_POOL_SCALE

    def validate(self) -> None:
        for name in ("beta_scale", "lam_scale"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ConfigError(f"prior.{name}", v, "must be a finite number > 0")
        for name in ("beta_pool_scale", "lam_pool_scale"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ConfigError(f"prior.{name}", v, "must be a finite number >= 0 (0: independent)")
        for name in ("beta_loc", "lam_loc"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v)):
                raise ConfigError(f"prior.{name}", v, "must be a finite number")

    @staticmethod
    def _term(h, free, loc, scale, pool_scale):
        if pool_scale == 0:  # independent
            return -0.5 * (((h - loc) / scale) ** 2 * free).sum(-1), -(h - loc) / scale**2 * free
        e = (h - loc) * free
        c = pool_scale**2 / (scale**2 + float(free.sum()) * pool_scale**2)
        se = e.sum(-1, keepdim=True)
        logp = -0.5 * (e.square().sum(-1) - c * se.squeeze(-1) ** 2) / scale**2
        return logp, -(e - c * se * free) / scale**2

    def log_density(self, h_b, h_l, free_b, free_l):
        """log p of the free log competences ``h_b, h_l [B,R]`` (``free_* [R]`` 1 where inferred), up to a
        constant, and its gradient: ``(logp [B], d/dh_b [B,R], d/dh_l [B,R])``."""
        lb, gb = self._term(h_b, free_b, self.beta_loc, self.beta_scale, self.beta_pool_scale)
        ll, gl = self._term(h_l, free_l, self.lam_loc, self.lam_scale, self.lam_pool_scale)
        return lb + ll, gb, gl

    def marginal_scale(self, site: str) -> float:
        """The prior sd of one free log competence (``site``: ``"beta"`` or ``"lam"``), μ integrated out."""
        if site == "beta":
            return math.hypot(self.beta_scale, self.beta_pool_scale)
        return math.hypot(self.lam_scale, self.lam_pool_scale)


@dataclass(frozen=True)
class PoolRater:
    """One rater of the pool: ``id`` and, where known, its deliberateness ``beta`` (> 0) and
    knowledgeability ``lam`` (> 0); ``None`` means inferred under :class:`RaterPrior`."""

    id: str
    beta: float | None = None
    lam: float | None = None


@dataclass
class RaterPoolPosterior:
    """Posterior of a rater pool.

    ``draws``: ``theta [C,D,d]``, ``vartheta [C,D,R,d]``, ``beta [C,D,R]``, ``lam [C,D,R]`` (C chains of D
    draws; C = 1 for laplace-eb and svi). ``known_beta`` / ``known_lam [R]``: values fixed by the user;
    ``lam_from_prior [R]``: λ not identified (a single rater) — its draws are prior draws and θ was fitted
    with λ at the prior median. ``diagnostics``: engine information (``converged``, ``warnings``, timings).
    """

    engine: str
    rater_ids: list[str]
    draws: dict[str, torch.Tensor]
    known_beta: torch.Tensor
    known_lam: torch.Tensor
    lam_from_prior: torch.Tensor
    margin_scale: float
    diagnostics: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ summaries
    def flat(self, site: str) -> torch.Tensor:
        v = self.draws[site]
        return v.reshape(-1, *v.shape[2:])

    @property
    def theta_mean(self) -> torch.Tensor:
        return self.flat("theta").mean(0)

    @property
    def theta_cov(self) -> torch.Tensor:
        return torch.cov(self.flat("theta").T)

    def interval(self, site: str, level: float = 0.9) -> tuple[torch.Tensor, torch.Tensor]:
        """Equal-tailed ``level`` interval of every component of ``site`` (lower, upper)."""
        s = self.flat(site)
        q = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=s.dtype, device=s.device)
        lo, hi = torch.quantile(s, q, dim=0)
        return lo, hi

    def verdicts(self, beta_min: float = 1.0, snr_min: float = 2.0) -> list[str]:
        """One verdict per rater from the 90 % intervals (rule: see :meth:`rater_table`)."""
        b_lo, b_hi = self.interval("beta")
        l_lo, l_hi = self.interval("lam")
        m = self.margin_scale
        tn = float(self.theta_mean.norm()) / math.sqrt(self.theta_mean.shape[0])
        out = []
        for i in range(len(self.rater_ids)):
            if b_hi[i] * m < beta_min:
                out.append("random")
            elif b_lo[i] * m < beta_min or bool(self.lam_from_prior[i]):
                out.append("uncertain")
            elif l_lo[i] * tn >= snr_min:
                out.append("trusted")
            elif l_hi[i] * tn < snr_min:
                out.append("deliberate-but-misinformed")
            else:
                out.append("uncertain")
        return out

    def rater_table(self, beta_min: float = 1.0, snr_min: float = 2.0) -> list[dict[str, Any]]:
        """Per rater: posterior mean and 90 % interval of β_i and λ_i, flags, and a verdict.

        Verdict rule (dimensionless, so that it does not depend on the units of the features): with
        m = RMS over the comparisons of ⟨x1 − x0, E θ⟩ (a typical true-reward gap) and
        k = ‖E θ‖/√d (θ's scale per coordinate),

        * ``random``: the 90 % upper bound of β_i·m is below ``beta_min`` (a typical comparison is decided
          with logit < 1, near a coin flip);
        * ``trusted``: the 90 % lower bound of β_i·m is ≥ ``beta_min`` and that of λ_i·k ≥ ``snr_min``
          (belief signal-to-noise; the expected cosine of ϑ_i and θ is λk/√(1+λ²k²) ≥ 0.89 at 2);
        * ``deliberate-but-misinformed``: β_i·m lower bound ≥ ``beta_min`` and the 90 % upper bound of
          λ_i·k is below ``snr_min``;
        * ``uncertain``: otherwise (an interval straddles a threshold, or λ_i is only its prior).
        """
        b_lo, b_hi = self.interval("beta")
        l_lo, l_hi = self.interval("lam")
        b_mean, l_mean = self.flat("beta").mean(0), self.flat("lam").mean(0)
        verdict = self.verdicts(beta_min, snr_min)
        rows = []
        for i, rid in enumerate(self.rater_ids):
            rows.append(
                {
                    "rater": rid,
                    "beta_mean": float(b_mean[i]),
                    "beta_lo": float(b_lo[i]),
                    "beta_hi": float(b_hi[i]),
                    "lam_mean": float(l_mean[i]),
                    "lam_lo": float(l_lo[i]),
                    "lam_hi": float(l_hi[i]),
                    "beta_known": bool(self.known_beta[i]),
                    "lam_known": bool(self.known_lam[i]),
                    "lam_from_prior": bool(self.lam_from_prior[i]),
                    "verdict": verdict[i],
                }
            )
        return rows

    def summary(self) -> str:
        """A short text table (one line per rater) with the pool's caveats."""
        lines = [f"rater pool posterior ({self.engine}), {len(self.rater_ids)} rater(s)"]
        for r in self.rater_table():
            lines.append(
                f"  {r['rater']:>12}  beta {r['beta_mean']:8.3g} [{r['beta_lo']:.3g}, {r['beta_hi']:.3g}]"
                f"{' (known)' if r['beta_known'] else ''}  lam {r['lam_mean']:8.3g} "
                f"[{r['lam_lo']:.3g}, {r['lam_hi']:.3g}]{' (known)' if r['lam_known'] else ''}"
                f"{' (prior only: not identified from one rater)' if r['lam_from_prior'] else ''}"
                f"  {r['verdict']}"
            )
        for w in self.diagnostics.get("warnings", []):
            lines.append(f"  warning: {w}")
        return "\n".join(lines)

    def to_arviz(self):
        """``arviz.InferenceData``: posterior ``theta (theta_dim)``, ``vartheta (rater, vartheta_dim)``,
        ``beta (rater)``, ``lam (rater)`` with the rater ids as the ``rater`` coordinate."""
        az = import_arviz()
        post = {k: v.detach().cpu().numpy() for k, v in self.draws.items()}
        idata = az.from_dict(
            posterior=post,
            dims={
                "theta": ["theta_dim"],
                "vartheta": ["rater", "vartheta_dim"],
                "beta": ["rater"],
                "lam": ["rater"],
            },
            coords={"rater": list(self.rater_ids)},
        )
        idata.posterior.attrs["engine"] = self.engine
        return idata

    def plot(self, path: str | Path, truth: Mapping[str, Sequence[float]] | None = None):
        """Save a PNG with the 90 % intervals of β_i and λ_i per rater (log scale), coloured by verdict;
        ``truth`` (``{"beta": [...], "lam": [...]}``) adds the true values. Returns the figure."""
        plt = _plt()
        colours = {"trusted": "tab:green", "random": "tab:grey", "uncertain": "tab:orange"}
        colours["deliberate-but-misinformed"] = "tab:red"
        verdict = self.verdicts()
        fig, axes = plt.subplots(1, 2, figsize=(9, 0.5 * len(self.rater_ids) + 1.8), sharey=True)
        ypos = np.arange(len(self.rater_ids))
        for ax, site, label in (
            (axes[0], "beta", "deliberateness β"),
            (axes[1], "lam", "knowledgeability λ"),
        ):
            lo, hi = self.interval(site)
            mid = self.flat(site).median(0).values
            for i in range(len(self.rater_ids)):
                c = colours[verdict[i]]
                ax.plot([float(lo[i]), float(hi[i])], [ypos[i], ypos[i]], color=c, lw=3)
                ax.plot(float(mid[i]), ypos[i], "o", color=c)
                if truth is not None and site in truth:
                    ax.plot(float(truth[site][i]), ypos[i], "kx")
            ax.set_xscale("log")
            ax.set_xlabel(f"{label} (90 % interval)")
        axes[0].set_yticks(ypos, [f"{r} ({v})" for r, v in zip(self.rater_ids, verdict, strict=True)])
        fig.suptitle(f"rater pool posterior ({self.engine})")
        fig.tight_layout()
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=90)
        plt.close(fig)
        return fig


# ---------------------------------------------------------------------------- input checking
def _raters(raters: Sequence[PoolRater | str | Mapping]) -> list[PoolRater]:
    out = []
    for i, r in enumerate(raters):
        if isinstance(r, str):
            r = PoolRater(r)
        elif isinstance(r, Mapping):
            unknown = set(r) - {"id", "beta", "lam"}
            if unknown or "id" not in r:
                raise ConfigError("raters", dict(r), "each rater needs 'id' and may set 'beta', 'lam'", i)
            r = PoolRater(str(r["id"]), r.get("beta"), r.get("lam"))
        elif not isinstance(r, PoolRater) and hasattr(r, "id"):  # e.g. bayescrl.raters.Rater
            known = [v if isinstance(v, (int, float)) else None for v in (r.beta, getattr(r, "lam", None))]
            r = PoolRater(str(r.id), *known)  # a prior object or None: inferred under `prior`
        elif not isinstance(r, PoolRater):
            raise ConfigError("raters", r, "must be a PoolRater, an id or a mapping", i)
        for name in ("beta", "lam"):
            v = getattr(r, name)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ConfigError(f"raters.{name}", v, "a known competence must be a finite number > 0", i)
        out.append(r)
    if not out:
        raise ConfigError("raters", [], "declare at least one rater")
    ids = [r.id for r in out]
    if len(set(ids)) != len(ids):
        raise ConfigError("raters", ids, "rater ids must be unique")
    return out


def _rater_index(rater_index, ids: list[str], n: int, device) -> torch.Tensor:
    if isinstance(rater_index, torch.Tensor):
        vals = rater_index.reshape(-1).tolist()
    else:
        vals = list(rater_index)
    if len(vals) != n:
        raise ConfigError("rater_index", len(vals), f"needs one rater per comparison ({n})")
    pos = {r: i for i, r in enumerate(ids)}
    out = []
    for k, v in enumerate(vals):
        if isinstance(v, str):
            if v not in pos:
                raise ConfigError("rater_index", v, f"rater not declared in raters {ids}", k)
            out.append(pos[v])
        else:
            if int(v) != v or not 0 <= int(v) < len(ids):
                raise ConfigError(
                    "rater_index", v, f"rater not declared (index must be in [0, {len(ids)}))", k
                )
            out.append(int(v))
    return torch.tensor(out, dtype=torch.long, device=device)


@dataclass
class _Pool:
    """Validated data: differences per rater, padded ``D [R,U,d]``, ``Y [R,U]``, ``M [R,U]``."""

    x0: torch.Tensor
    x1: torch.Tensor
    y: torch.Tensor
    rater: torch.Tensor
    D: torch.Tensor
    Y: torch.Tensor
    M: torch.Tensor
    mu0: torch.Tensor
    cov0: torch.Tensor
    prec0: torch.Tensor
    logdet_prec0: torch.Tensor
    Q: torch.Tensor | None = None  # D_i D_iᵀ [R,U,U] where U < d (A_i⁻¹ by Woodbury, :func:`_block_inverses`)
    # D in other dtypes (the search mode's float32), made once; not passed on by dataclasses.replace
    casts: dict = field(default_factory=dict, init=False, repr=False)

    def D_as(self, dtype: torch.dtype) -> torch.Tensor:
        if dtype == self.D.dtype:
            return self.D
        if dtype not in self.casts:
            self.casts[dtype] = self.D.to(dtype)
        return self.casts[dtype]


def _pool(x0, x1, y, rater, R: int, mu0, cov0, device, dtype) -> _Pool:
    delta = x1 - x0
    counts = torch.bincount(rater, minlength=R)
    U = max(int(counts.max()), 1)
    N, d = delta.shape
    order = torch.argsort(rater, stable=True)
    start = torch.cumsum(counts, 0) - counts
    slot = torch.arange(N, device=device) - start[rater[order]]
    D = torch.zeros(R, U, d, dtype=dtype, device=device)
    Y = torch.zeros(R, U, dtype=dtype, device=device)
    M = torch.zeros(R, U, dtype=dtype, device=device)
    D[rater[order], slot] = delta[order]
    Y[rater[order], slot] = y[order]
    M[rater[order], slot] = 1.0
    chol = torch.linalg.cholesky(cov0)
    prec0 = torch.cholesky_inverse(chol)
    Q = D @ D.mT if U < d else None
    return _Pool(x0, x1, y, rater, D, Y, M, mu0, cov0, prec0, -2 * chol.diagonal().log().sum(), Q)


# ---------------------------------------------------------------------------- laplace-eb core
def _blocks(pool: _Pool, theta, V, beta, lam):
    """Loss L (lemma `mapestimatelemma`, unperturbed), gradient blocks and A_i = λ_i² I + K_i, batched over
    a leading dim B: ``theta [B,d]``, ``V [B,R,d]``, ``beta, lam [B,R]``."""
    z = beta.unsqueeze(-1) * torch.einsum("rud,brd->bru", pool.D, V)
    s = torch.sigmoid(z)
    nll = ((F.softplus(z, threshold=36.0) - pool.Y * z) * pool.M).sum((-1, -2))
    dv = theta.unsqueeze(-2) - V
    lam2 = lam**2
    dt = theta - pool.mu0
    loss = nll + 0.5 * (lam2 * (dv**2).sum(-1)).sum(-1) + 0.5 * ((dt @ pool.prec0) * dt).sum(-1)
    g_theta = dt @ pool.prec0 + (lam2.unsqueeze(-1) * dv).sum(-2)
    g_V = -lam2.unsqueeze(-1) * dv + beta.unsqueeze(-1) * torch.einsum(
        "bru,rud->brd", pool.M * (s - pool.Y), pool.D
    )
    w = pool.M * s * (1 - s) * beta.unsqueeze(-1) ** 2  # [B,R,U]
    K = (w.unsqueeze(-1) * pool.D).mT @ pool.D  # Σ_n w_n Δ_n Δ_nᵀ per rater, no [U,d,d] tensor
    eye = torch.eye(theta.shape[-1], dtype=theta.dtype, device=theta.device)
    A = lam2[..., None, None] * eye + K
    return loss, g_theta, g_V, K, A


def _schur(pool: _Pool, K, A, lam):
    """Cholesky of A_i and of the θ Schur complement S = Σ0⁻¹ + Σ_i λ_i² A_i⁻¹ K_i (as in
    :meth:`bayescrl.inference.bootstrap._Terms.block_newton_step`)."""
    chol_a = spd_cholesky(A)  # A_i ≈ K_i, singular when λ_i → 0 and rater i has fewer comparisons than d
    ak = torch.cholesky_solve(K, chol_a)
    S = pool.prec0 + ((lam**2)[..., None, None] * ak).sum(-3)
    S = 0.5 * (S + S.mT)
    return chol_a, spd_cholesky(S)


def _objective(pool: _Pool, prior: RaterPrior, h_b, h_l, theta_hat, V_hat, free_b, free_l):
    """Log of the Laplace-approximate marginal likelihood plus the log prior of the free log competences,
    and the MAP's first-order response z1 = ẑ − H⁻¹ g (differentiable in h): returns ``(F [B], theta1, V1)``.

    ``h_b, h_l [B,R]`` log β, log λ (known / fixed entries constant); ``theta_hat [B,d]``, ``V_hat [B,R,d]``
    the converged MAP at the current h (detached).
    """
    beta, lam = h_b.exp(), h_l.exp()
    _, g_t, g_V, K, A = _blocks(pool, theta_hat, V_hat, beta, lam)
    chol_a, chol_s = _schur(pool, K, A, lam)
    lam2 = (lam**2).unsqueeze(-1)
    # Newton correction by eliminating the ϑ_i: S δθ = −gθ − Σ λ² A⁻¹ gV, δV = A⁻¹(λ² δθ − gV)
    a_gv = torch.cholesky_solve(g_V.unsqueeze(-1), chol_a).squeeze(-1)
    rhs = -g_t - (lam2 * a_gv).sum(-2)
    d_theta = torch.cholesky_solve(rhs.unsqueeze(-1), chol_s).squeeze(-1)
    d_V = torch.cholesky_solve((lam2 * d_theta.unsqueeze(-2) - g_V).unsqueeze(-1), chol_a).squeeze(-1)
    theta1, V1 = theta_hat + d_theta, V_hat + d_V
    loss, _, _, K1, A1 = _blocks(pool, theta1, V1, beta, lam)
    chol_a1, chol_s1 = _schur(pool, K1, A1, lam)
    logdet = 2 * chol_a1.diagonal(dim1=-2, dim2=-1).log().sum((-1, -2)) + 2 * chol_s1.diagonal(
        dim1=-2, dim2=-1
    ).log().sum(-1)
    d = theta_hat.shape[-1]
    ev = -loss + d * h_l.sum(-1) + 0.5 * pool.logdet_prec0 - 0.5 * logdet
    lp = prior.log_density(h_b, h_l, free_b, free_l)[0]
    return ev + lp, theta1, V1


# ---------------------------------------------------------------------------- laplace-eb: analytic core
@dataclass
class _Laplace:
    """The Laplace approximation at a point (θ, ϑ) for log competences h, batched over a leading dim B.

    Factors of the block-arrow Hessian H = [[Σ0⁻¹ + Σ_i λ_i² I, −λ_i² I], [−λ_i² I, A_i]]
    (A_i = λ_i² I + K_i): ``ainv [B,R,d,d]`` = A_i⁻¹ (symmetric, row-major; float32 in the search mode
    where U < d), ``proj`` = P_i = I − λ_i² A_i⁻¹ (where U < d formed directly as M_iᵀM_i, without the
    cancellation of that difference where λ_i is large; otherwise from A_i⁻¹ in float64), ``chol_s`` the
    Cholesky factor of the θ Schur complement S = Σ0⁻¹ + Σ_i λ_i² P_i; ``F [B]`` the log evidence plus log
    prior (as :func:`_objective`), ``loss [B]`` the loss L at the point.
    """

    beta: torch.Tensor
    lam2: torch.Tensor
    dv: torch.Tensor
    z: torch.Tensor
    s: torch.Tensor
    w: torch.Tensor
    g_theta: torch.Tensor
    g_V: torch.Tensor
    ainv: torch.Tensor
    proj: torch.Tensor
    chol_s: torch.Tensor
    F: torch.Tensor
    loss: torch.Tensor


def _loss_grad(pool: _Pool, h_b, h_l, theta, V):
    """β, λ², θ − ϑ_i, logits z, σ(z), the loss gradient (θ block, ϑ blocks) and the loss L of lemma
    `mapestimatelemma` at ``theta [B,d]``, ``V [B,R,d]`` for ``h_b, h_l [B,R]`` (O(N d), no factorisation)."""
    beta, lam2 = h_b.exp(), (2 * h_l).exp()
    z = beta.unsqueeze(-1) * torch.einsum("rud,brd->bru", pool.D, V)
    s = torch.sigmoid(z)
    nll = ((F.softplus(z, threshold=36.0) - pool.Y * z) * pool.M).sum((-1, -2))
    dv = theta.unsqueeze(-2) - V
    dt = theta - pool.mu0
    p0dt = dt @ pool.prec0
    loss = nll + 0.5 * (lam2 * (dv**2).sum(-1)).sum(-1) + 0.5 * (p0dt * dt).sum(-1)
    g_theta = p0dt + (lam2.unsqueeze(-1) * dv).sum(-2)
    g_V = -lam2.unsqueeze(-1) * dv + beta.unsqueeze(-1) * torch.einsum(
        "bru,rud->brd", pool.M * (s - pool.Y), pool.D
    )
    return beta, lam2, dv, z, s, g_theta, g_V, loss


def _chol_inverse(chol: torch.Tensor) -> torch.Tensor:
    """A⁻¹ from the Cholesky factors of A, symmetric and row-major. The CPU kernel (LAPACK potri, its
    triangle mirrored) returns an exactly symmetric matrix in column-major layout: its transpose is the
    same matrix as a contiguous view (products with it run at BLAS speed, ~10× faster for matrix-vector
    products than the strided layout); elsewhere the two triangles are averaged."""
    inv = torch.cholesky_inverse(chol)
    return inv.mT if inv.device.type == "cpu" else 0.5 * (inv + inv.mT)


def _search_dtype(fast: bool, x: torch.Tensor, lam2: torch.Tensor) -> torch.dtype:
    """The dtype of the search mode's matrix products: float32 on the CPU (twice the throughput of
    float64 there) unless a λ_i² is below ``_SEARCH_MIN_LAM2`` (A_i⁻¹ = (I − M_iᵀM_i)/λ_i² then loses
    too much to cancellation); the data's dtype on an accelerator (fast float64 there; no TF32)."""
    if not fast or x.device.type != "cpu":
        return x.dtype
    return x.dtype if bool((lam2 < _SEARCH_MIN_LAM2).any()) else torch.float32


def _block_inverses(pool: _Pool, beta, lam2, w, fast=False):
    """A_i⁻¹ for A_i = λ_i² I + K_i, K_i = β_i² Σ_n w_n Δ_n Δ_nᵀ (``w [B,R,U]`` = M σ'(z)), its log det
    ``[B,R]``, Σ_i λ_i² P_i ``[B,d,d]`` (S − Σ0⁻¹) and P_i = I − λ_i² A_i⁻¹ = A_i⁻¹ K_i. Where the raters
    have fewer comparisons U than features d, by Woodbury in the U-dimensional space: with
    G_i = β_i diag(√w) D_i and C_i = λ_i² I_U + G_i G_iᵀ = L Lᵀ, M_i = L⁻¹ G_i: P_i = M_iᵀ M_i and
    log det A_i = (d − U) log λ_i² + log det C_i (U×U factorisations, no d×d one); otherwise by the d×d
    Cholesky factors of A_i (singular to round-off when λ_i → 0 with U < d: jittered, see spd_cholesky).
    ``fast`` (the Woodbury path only): M_i, P_i and the returned A⁻¹ in float32 (:func:`_search_dtype`;
    log det A_i stays exact, S carries float32 rounding, and with S the evidence F, to about 10⁻⁶)."""
    d = pool.D.shape[-1]
    l2 = lam2[..., None, None]
    if pool.Q is not None:
        U = pool.D.shape[1]
        sw = beta.unsqueeze(-1) * w.sqrt()  # [B,R,U]
        C = sw.unsqueeze(-1) * pool.Q * sw.unsqueeze(-2)
        C.diagonal(dim1=-2, dim2=-1).add_(lam2.unsqueeze(-1))
        chol_c = spd_cholesky(C)
        pdt = _search_dtype(fast, C, lam2)
        G = sw.to(pdt).unsqueeze(-1) * pool.D_as(pdt)
        # M_iᵀ = G_iᵀ L⁻ᵀ [B,R,d,U] as a right-hand solve on the transposed view: LAPACK's layout, no copy
        # (2-4× faster on the CPU than the left-hand solve L⁻¹ G_i, which torch transposes first)
        Mt = torch.linalg.solve_triangular(chol_c.mT.to(pdt), G.mT, upper=True, left=False)
        P = Mt @ Mt.mT  # I − λ² A⁻¹
        lam2_p = lam2.to(pdt)
        schur = (lam2_p.unsqueeze(-2) @ P.flatten(-2)).reshape(P.shape[:-3] + (d, d))  # Σ_i λ_i² P_i
        ainv = P.mul(-1 / lam2_p[..., None, None])  # A⁻¹ = (I − P) / λ²
        ainv.diagonal(dim1=-2, dim2=-1).add_(1 / lam2_p.unsqueeze(-1))
        logdet = (d - U) * lam2.log() + 2 * chol_c.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return ainv, logdet, schur.to(C.dtype), P
    A = ((w * beta.unsqueeze(-1) ** 2).unsqueeze(-1) * pool.D).mT @ pool.D  # K_i
    A.diagonal(dim1=-2, dim2=-1).add_(lam2.unsqueeze(-1))  # A_i = λ_i² I + K_i
    chol_a = spd_cholesky(A)
    ainv = _chol_inverse(chol_a)
    P = ainv.mul(-l2)  # I − λ² A⁻¹ = A⁻¹ K (float64: its cancellation where λ is large costs ~λ² ε)
    P.diagonal(dim1=-2, dim2=-1).add_(1.0)
    schur = (lam2.unsqueeze(-2) @ P.flatten(-2)).reshape(P.shape[:-3] + (d, d))
    return ainv, 2 * chol_a.diagonal(dim1=-2, dim2=-1).log().sum(-1), schur, P


def _laplace(pool: _Pool, prior: RaterPrior, h_b, h_l, theta, V, free_b, free_l, fast=False) -> _Laplace:
    """Evidence and Hessian factors at ``theta [B,d]``, ``V [B,R,d]`` (the MAP) for ``h_b, h_l [B,R]``:
    the R blocks A_i (:func:`_block_inverses`, ``fast`` as there) and one factorisation of the Schur
    complement (no ((R+1)d)² matrix)."""
    beta, lam2, dv, z, s, g_theta, g_V, loss = _loss_grad(pool, h_b, h_l, theta, V)
    d = theta.shape[-1]
    w = pool.M * s * (1 - s)
    ainv, logdet_a, schur, proj = _block_inverses(pool, beta, lam2, w, fast)
    S = pool.prec0 + schur
    chol_s = spd_cholesky(0.5 * (S + S.mT))
    logdet = logdet_a.sum(-1) + 2 * chol_s.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    ev = -loss + d * h_l.sum(-1) + 0.5 * pool.logdet_prec0 - 0.5 * logdet
    lp = prior.log_density(h_b, h_l, free_b, free_l)[0]
    return _Laplace(beta, lam2, dv, z, s, w, g_theta, g_V, ainv, proj, chol_s, ev + lp, loss)


_INNER_TOL = 1e-9  # gradient 2-norm of the inner MAP at which laplace-eb evaluates the evidence
_SEARCH_TOL = 1e-6  # the same at the competence optimiser's trial points (its end point is re-solved)
_SEARCH_MAX = 20  # inner Newton steps at a trial point before its F is taken where it stopped (good: ≤ 15)
_SEARCH_REFACTOR = 3  # refactorisations at a trial point before the same
_INNER_MAX = 100  # inner Newton steps before a plain map_estimate
_CG_MAX = 20  # conjugate-gradient iterations of one inner Newton step before its factors are rebuilt
_REFACTOR = 30  # refactorisations of the inner Newton system before a plain map_estimate
_FAST_SEARCH = True  # the competence optimiser's trial points in search mode (_Evidence.fast_search)
_SEARCH_MIN_LAM2 = 1e-2  # below this λ_i² the search mode keeps float64 (see _search_dtype)
_HESS_EPS = 1e-4  # forward-difference step of the competence Hessian with float64 gradients
_HESS_EPS_SEARCH = 5e-4  # the same with float32 trace products (see _competence_hessian)
_HESS_SEARCH_MIN_D = 64  # the competence Hessian's trace products in float32 from this d on (CPU)
_HESS_CHUNK = 1  # competence-Hessian columns per batch (batches of 5 measured ~15 % slower at d = 256)
_HESS_BYTES = 2**29  # memory for one batch of competence-Hessian columns


def _block_solve(lp: _Laplace, r_theta, r_V):
    """H⁻¹ r for the block-arrow Hessian of ``lp``: ``r_theta [B,k,d]``, ``r_V [B,k,R,d]`` (k right-hand
    sides) → (x_θ, x_ϑ) of the same shapes, by eliminating the ϑ_i:
    S x_θ = r_θ + Σ_i λ_i² A_i⁻¹ r_i,   x_i = A_i⁻¹(r_i + λ_i² x_θ). ``lp.ainv`` may be a lower-precision
    copy (a preconditioner): the products run in its dtype, the rest in that of ``r_V``."""
    lam2 = lp.lam2[:, :, None, None]  # [B,R,1,1]
    # right-hand sides as rows (r_iᵀ A_i⁻¹ = (A_i⁻¹ r_i)ᵀ, A_i⁻¹ symmetric): a batched product with a
    # single column runs several times slower than with a single row
    dt = r_V.dtype
    y = (r_V.transpose(1, 2).to(lp.ainv.dtype) @ lp.ainv).to(dt)  # [B,R,k,d]
    rhs = r_theta.mT + (lam2 * y).sum(1).mT  # [B,d,k]
    x_theta = torch.cholesky_solve(rhs, lp.chol_s).mT  # [B,k,d]
    x_V = y + lam2 * (x_theta.unsqueeze(1).to(lp.ainv.dtype) @ lp.ainv).to(dt)
    return x_theta, x_V.transpose(1, 2)


def _newton_direction(lp: _Laplace, R: int, d: int, g: torch.Tensor) -> torch.Tensor:
    """−H⁻¹g for ``g [1,1,(R+1)d]`` laid out (θ, ϑ_1..ϑ_R) as in :func:`~bayescrl.inference.bootstrap.
    newton_solve` (its ``linear_solve`` hook), with the factors of ``lp``."""
    x_t, x_V = _block_solve(lp, g[:, :, :d], g[:, :, d:].reshape(1, 1, R, d))
    return -torch.cat([x_t, x_V.reshape(1, 1, R * d)], -1)


def _hess_vec(pool: _Pool, wb2, lam2, v_t, v_V):
    """H v for the block-arrow Hessian of the loss at curvature weights ``wb2 = M σ'(z) β² [R,U]``:
    ``v_t [d]``, ``v_V [R,d]`` → ((H v)_θ, (H v)_ϑ), O(N d + R d) (no d×d block formed)."""
    Dv = (v_V.unsqueeze(-2) @ pool.D.mT).squeeze(-2)  # [R,U] (as rows: see _block_solve)
    Kv = ((wb2 * Dv).unsqueeze(-2) @ pool.D).squeeze(-2)
    diff = lam2.unsqueeze(-1) * (v_t - v_V)
    return v_t @ pool.prec0 + diff.sum(0), Kv - diff


def _inner_map(
    pool: _Pool, prior, hb, hl, theta, V, lp, free_b, free_l, diag, tol=_INNER_TOL, steps=_INNER_MAX
):
    """The MAP (θ̂, ϑ̂) of the loss L at log competences ``hb, hl [R]`` from ``theta [d]``, ``V [R,d]``.

    Inexact Newton with the line search and convergence test of
    :func:`~bayescrl.inference.bootstrap.newton_solve` (Armijo 1e-4 with halving; gradient 2-norm ≤
    ``tol``, at most ``steps`` Newton steps), on the padded per-rater data: each Newton system H s = −g
    is solved by conjugate gradients on exact Hessian-vector products (O(N d + R d)), preconditioned by
    the block-arrow factors of ``lp`` (those of the last solved evaluation, a nearby problem; its A_i⁻¹
    rounded to float32, which changes the preconditioner, not the system solved), to a relative residual
    min(0.5, ‖g‖^½) (Eisenstat–Walker-type forcing, superlinear convergence; absolute residual at least
    0.1 ``tol``). Where ``_CG_MAX`` iterations do not reach it (the factors are too far from the current
    Hessian) the factors are rebuilt at the current point (:func:`_laplace`) and the step is solved again
    (with fresh factors, an unfinished CG step is taken as it is: a descent direction all the same).
    Returns ``(theta, V, converged)``."""
    hb1, hl1 = hb[None], hl[None]
    theta, V = theta[None], V[None]
    if lp is not None and bool(torch.isfinite(pre := lp.ainv.float()).all()):
        lp = replace(lp, ainv=pre)  # the preconditioner's A_i⁻¹ in float32: half the memory traffic
    out = _loss_grad(pool, hb1, hl1, theta, V)
    gn = float(torch.sqrt(out[5].square().sum() + out[6].square().sum()))
    fresh = False
    for _ in range(steps):
        if gn <= tol:
            return theta[0], V[0], True
        if lp is None:
            if diag["refactor_left"] <= 0:
                break
            lp = _laplace(pool, prior, hb1, hl1, theta, V, free_b, free_l)
            diag["factorisations"] += 1
            diag["refactor_left"] -= 1
            fresh = True
        beta, lam2, loss, g_t, g_V = out[0][0], out[1][0], out[7], out[5][0], out[6][0]
        wb2 = pool.M * out[4][0] * (1 - out[4][0]) * beta.unsqueeze(-1) ** 2
        x_t, x_V, solved = _pcg(pool, lp, wb2, lam2, g_t, g_V, gn, diag, tol)
        if not solved and not fresh:  # the factors are too far from this Hessian: rebuild them here
            lp = None
            continue
        fresh = False
        alpha, out = _armijo(pool, hb1, hl1, theta, V, x_t, x_V, g_t, g_V, loss)
        theta, V = theta + alpha * x_t, V + alpha * x_V
        gn = float(torch.sqrt(out[5].square().sum() + out[6].square().sum()))
        diag["inner_steps"] += 1
    return theta[0], V[0], gn <= tol


def _pcg(pool: _Pool, lp: _Laplace, wb2, lam2, g_t, g_V, gn: float, diag, tol=_INNER_TOL) -> tuple:
    """PCG on H s = −g from s = 0 (its first iterate is the step −H̃⁻¹g, scaled), preconditioned by the
    block factors ``lp``, to the forcing tolerance of :func:`_inner_map`. Returns ``(s_θ, s_ϑ, solved)``."""
    r_t, r_V = -g_t, -g_V
    x_t, x_V = torch.zeros_like(r_t), torch.zeros_like(r_V)
    z_t, z_V = (v[0, 0] for v in _block_solve(lp, r_t[None, None], r_V[None, None]))
    p_t, p_V = z_t, z_V
    rz = float((r_t * z_t).sum() + (r_V * z_V).sum())
    eta = max(min(0.5, math.sqrt(gn)) * gn, 0.1 * tol)
    solved = False
    for _k in range(_CG_MAX):
        q_t, q_V = _hess_vec(pool, wb2, lam2, p_t, p_V)
        pap = float((p_t * q_t).sum() + (p_V * q_V).sum())
        if not pap > 0:  # a breakdown (zero or non-finite curvature): rebuild the factors / take x
            break
        a = rz / pap
        x_t, x_V = x_t + a * p_t, x_V + a * p_V
        r_t, r_V = r_t - a * q_t, r_V - a * q_V
        diag["cg_iters"] += 1
        if float(torch.sqrt(r_t.square().sum() + r_V.square().sum())) <= eta:
            solved = True
            break
        z_t, z_V = (v[0, 0] for v in _block_solve(lp, r_t[None, None], r_V[None, None]))
        rz_new = float((r_t * z_t).sum() + (r_V * z_V).sum())
        p_t, p_V = z_t + (rz_new / rz) * p_t, z_V + (rz_new / rz) * p_V
        rz = rz_new
    return x_t, x_V, solved


def _armijo(pool: _Pool, hb1, hl1, theta, V, x_t, x_V, g_t, g_V, loss) -> tuple[float, tuple]:
    """Armijo backtracking (1e-4, halving, at most 30 halvings) along the Newton step ``x``; a step whose
    predicted decrease is negligible is taken whole. Returns ``(alpha, _loss_grad at the new point)``."""
    slope = float((g_t * x_t).sum() + (g_V * x_V).sum())  # < 0: CG iterates of an SPD system
    tiny = -slope <= 1e-12 * (1 + abs(float(loss)))
    alpha = 1.0
    for _ in range(30):
        out = _loss_grad(pool, hb1, hl1, theta + alpha * x_t, V + alpha * x_V)
        if float(out[7]) <= float(loss) + 1e-4 * alpha * slope or tiny:
            break
        alpha *= 0.5
    return alpha, out


def _latent_draws(pool: _Pool, lp: _Laplace, e_t, e_V):
    """(θ − θ̂, ϑ − ϑ̂) ~ N(0, H⁻¹) from standard normals ``e_t [n,d]``, ``e_V [n,R,d]`` with the block
    factors of ``lp`` (B = 1): θ − θ̂ = L_S⁻ᵀ e, ϑ_i − ϑ̂_i = A_i⁻¹ λ_i² (θ − θ̂) + L_i⁻ᵀ e_i
    = L_i⁻ᵀ(L_i⁻¹ λ_i² (θ − θ̂) + e_i) (A_i = L_i L_iᵀ, factored here once): two triangular solves per
    rater."""
    chol_s, lam2 = lp.chol_s[0], lp.lam2[0]
    A = ((lp.w[0] * lp.beta[0].unsqueeze(-1) ** 2).unsqueeze(-1) * pool.D).mT @ pool.D
    A.diagonal(dim1=-2, dim2=-1).add_(lam2.unsqueeze(-1))
    chol_a = spd_cholesky(A)
    # the draws as rows, solved from the right (xᵀ = eᵀ L⁻¹ for x = L⁻ᵀ e): LAPACK's layout, no copies
    dtheta = torch.linalg.solve_triangular(chol_s, e_t, upper=False, left=False)  # [n,d]
    half = torch.linalg.solve_triangular(chol_a.mT, lam2[:, None, None] * dtheta, upper=True, left=False)
    dV = torch.linalg.solve_triangular(chol_a, half + e_V.transpose(0, 1), upper=False, left=False)  # [R,n,d]
    return dtheta, dV.transpose(0, 1)


def _dg_dh(pool: _Pool, lp: _Laplace):
    """∂g/∂h of the loss gradient g = ∇_(θ,ϑ) L with respect to (log β_1..R, log λ_1..R), as 2R right-hand
    sides ``[B,2R,d]``, ``[B,2R,R,d]``."""
    B, R, d = lp.dv.shape
    r_t = lp.dv.new_zeros(B, 2 * R, d)
    r_V = lp.dv.new_zeros(B, 2 * R, R, d)
    idx = torch.arange(R, device=lp.dv.device)
    # log β_i: ∂/∂h [β Σ M(σ(z) − y) Δ] = β Σ (M(σ − y) + w z) Δ on ϑ_i only
    cb = pool.M * (lp.s - pool.Y) + lp.w * lp.z
    r_V[:, idx, idx] = lp.beta.unsqueeze(-1) * torch.einsum("bru,rud->brd", cb, pool.D)
    # log λ_i: ∂/∂h [λ²(θ − ϑ_i)] = 2λ²(θ − ϑ_i) on θ, its negative on ϑ_i
    t = 2 * lp.lam2.unsqueeze(-1) * lp.dv
    r_t[:, R:] = t
    r_V[:, R + idx, idx] = -t
    return r_t, r_V


def _evidence_grad(pool: _Pool, prior: RaterPrior, lp: _Laplace, h_b, h_l, free_b, free_l, fast=False):
    """Exact gradient of ``lp.F`` over (log β, log λ) ``[B,2R]`` at a converged MAP, analytically:
    dF/dh = −∂L/∂h − ½ [tr(H⁻¹ ∂H/∂h) − uᵀ ∂g/∂h] + ∂ log p(h)/∂h with u = H⁻¹ ∇_(θ,ϑ) log det H
    (the MAP's response dẑ/dh = −H⁻¹ ∂g/∂h by implicit differentiation).

    ``fast``: the three R·d²·(d or U) matrix products of the trace terms (most of the cost) in float32
    (:func:`_search_dtype`), the rest in the data's dtype: the gradient to about 10⁻⁵ instead of round-off
    (used by the competence optimiser, whose tolerance is coarser, and from d = 64 by the competence
    Hessian's perturbed gradients; the optimum's gradient is taken exactly)."""
    B, R, d = lp.dv.shape
    beta, lam2, dt = lp.beta, lp.lam2, lp.dv.dtype
    sinv = _chol_inverse(lp.chol_s)  # Σ_θθ = S⁻¹
    pdt = _search_dtype(fast, lp.ainv, lam2)
    a_p, D_p, s_p = lp.ainv.to(pdt), pool.D_as(pdt), sinv.to(pdt).unsqueeze(-3)
    # Σ_ii = A_i⁻¹ + λ_i⁴ A_i⁻¹ S⁻¹ A_i⁻¹ (the ϑ_i block of H⁻¹); with the rows A_i⁻¹Δ_n of D_i A_i⁻¹,
    # q_n = β_i² Δ_nᵀ Σ_ii Δ_n (the Laplace variance of the logit z_n)
    DA = D_p @ a_p  # [B,R,U,d]
    DAS = DA @ s_p
    q = beta.unsqueeze(-1) ** 2 * (
        (DA.to(dt) * pool.D).sum(-1) + lam2.unsqueeze(-1) ** 2 * (DAS * DA).sum(-1).to(dt)
    )
    # ∂ log det H / ∂ log λ_i = 2λ_i² tr Cov(θ − ϑ_i), and with P_i = I − λ_i² A_i⁻¹
    # tr Cov(θ − ϑ_i) = tr(Σ_θθ − Σ_θi − Σ_iθ + Σ_ii) = tr(P_i S⁻¹ P_i) + tr A_i⁻¹,
    # λ_i² tr A_i⁻¹ = d − tr P_i;
    # the d cancels against the prior-free term d of dF/d log λ_i, leaving terms of order U and round-off
    # of order U ε (the four-term sum cancels to round-off × λ_i² d where λ_i is large)
    p_p = lp.proj.to(pdt)
    tr_psp = torch.linalg.vecdot((s_p @ p_p).flatten(-2), p_p.flatten(-2))  # tr(P S⁻¹ P), Frobenius product
    lam_cov = lam2 * tr_psp.to(dt) - p_p.diagonal(dim1=-2, dim2=-1).sum(-1).to(dt)  # λ² tr Cov(θ − ϑ) − d
    w1 = lp.w * (1 - 2 * lp.s)  # dσ'(z)/dz (masked)
    # ∇_ϑ log det H (θ does not enter H), then u = H⁻¹ of it
    t = beta.unsqueeze(-1) * torch.einsum("bru,rud->brd", w1 * q, pool.D)
    u_t, u_V = _block_solve(lp, t.new_zeros(B, 1, d), t.unsqueeze(1))
    r_t, r_V = _dg_dh(pool, lp)
    implicit = (r_t * u_t).sum(-1) + (r_V * u_V).sum((-1, -2))  # uᵀ ∂g/∂h [B,2R]
    dlogdet = torch.cat([((2 * lp.w + w1 * lp.z) * q).sum(-1), 2 * lam_cov], -1) - implicit  # λ part − 2d
    dloss = torch.cat([(pool.M * (lp.s - pool.Y) * lp.z).sum(-1), lam2 * (lp.dv**2).sum(-1)], -1)
    g = -dloss - 0.5 * dlogdet  # the λ part's + d (from d log λ_i in F) is in dlogdet's − 2d
    _, gp_b, gp_l = prior.log_density(h_b, h_l, free_b, free_l)
    g[:, :R] += gp_b
    g[:, R:] += gp_l
    return g


class _Evidence:
    """The laplace-eb objective over the free log competences ``u`` (the known ones fixed at ``h_b0``,
    ``h_l0``): :meth:`evaluate` solves the inner MAP, the Laplace evidence F and its exact gradient, and
    keeps the last evaluation in ``state`` (h, the MAP, its sensitivity dẑ/dh = J, F, dF/du, the factors
    ``lp``) and the last one whose inner MAP was solved in ``warm`` (the next inner solve's start and
    preconditioner: a wild trial point that the search left unsolved must not seed the points after it)."""

    def __init__(self, pool: _Pool, prior: RaterPrior, problem, h_b0, h_l0, free_b, free_l):
        self.pool, self.prior, self.problem = pool, prior, problem
        self.h0 = torch.cat([h_b0, h_l0])
        self.free_b, self.free_l = free_b, free_l
        self.free = torch.cat([free_b, free_l]).bool()
        self.nf = int(self.free.sum())
        self.R, self.d = pool.D.shape[0], pool.D.shape[-1]
        self.diag: dict[str, Any] = {"warnings": [], "objective_evals": 0, "inner_steps": 0}
        self.diag["factorisations"] = 0
        self.state: dict[str, Any] = {"h": None, "lp": None, "inner_ok": True}
        self.warm: dict[str, Any] = {"h": None, "lp": None}
        # the optimiser's trial points: float32 trace products (_evidence_grad) and a looser inner MAP
        self.fast_search = _FAST_SEARCH
        self.fast = False

    def split(self, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.h0.clone()
        h = h.masked_scatter(self.free, u) if self.nf else h
        return h[: self.R], h[self.R :]

    def _start(self, hb, hl) -> tuple[torch.Tensor, torch.Tensor]:
        """The inner solve's start: the better (lower loss) of the last MAP and its first-order prediction
        ẑ + J Δh at the new h (a long step of the outer optimiser extrapolates badly), from the last solved
        evaluation; cold: μ0."""
        st, R = self.warm, self.R
        if st["h"] is None:
            return self.pool.mu0, self.pool.mu0.expand(R, self.d)  # map_estimate's own cold start
        dh = torch.cat([hb, hl]) - st["h"]
        th0 = torch.stack([st["theta"] + dh @ st["J_t"], st["theta"]])
        V0 = torch.stack([st["V"] + torch.einsum("j,jrd->rd", dh, st["J_V"]), st["V"]])
        loss0 = _loss_grad(self.pool, hb.expand(2, R), hl.expand(2, R), th0, V0)[7]
        k = int(torch.nan_to_num(loss0, nan=math.inf).argmin())
        if not math.isfinite(float(loss0[k])):  # both diverged (a wild trial point before): cold start
            return self.pool.mu0, self.pool.mu0.expand(R, self.d)
        return th0[k], V0[k]

    def evaluate(self, u: torch.Tensor) -> None:
        """F and dF/du at ``u``. The inner MAP is tight (the evidence and its gradient are evaluated at
        that point, no further correction): Newton steps solved with the block factors of the last solved
        evaluation (:func:`_inner_map`, started from ``warm``), a plain map_estimate as the last resort."""
        pool, prior, diag, fb, fl = self.pool, self.prior, self.diag, self.free_b, self.free_l
        hb, hl = self.split(u)
        search = self.fast and self.warm["h"] is not None  # a trial point after the first evaluation
        diag["refactor_left"] = _SEARCH_REFACTOR if search else _REFACTOR
        diag.setdefault("cg_iters", 0)
        tol, steps = (_SEARCH_TOL, _SEARCH_MAX) if search else (_INNER_TOL, _INNER_MAX)
        start = self._start(hb, hl)
        th, V, ok = _inner_map(pool, prior, hb, hl, *start, self.warm["lp"], fb, fl, diag, tol, steps)
        finite = bool(torch.isfinite(th).all() & torch.isfinite(V).all())
        if not ok and search and finite:  # a wild trial point: F where the inner solve stopped (in practice
            diag["unsolved_trials"] = diag.get("unsolved_trials", 0) + 1  # far below; the search backs off)
        elif not ok:
            if not finite:  # diverged: a cold start
                th, V = pool.mu0, pool.mu0.expand(self.R, self.d)
            prob = replace(self.problem, beta=hb.exp(), lam=hl.exp())
            res = map_estimate(prob, tol=_INNER_TOL, max_iter=200, return_hessian=False, init=(th, V))
            diag["inner_steps"] += int(res.iters)
            th, V, ok = res.theta[0], res.vartheta[0], bool(res.converged.all())
        lp = _laplace(pool, prior, hb[None], hl[None], th[None], V[None], fb, fl, self.fast)
        g = _evidence_grad(pool, prior, lp, hb[None], hl[None], fb, fl, self.fast)[0]
        x_t, x_V = _block_solve(lp, *_dg_dh(pool, lp))  # dẑ/dh = −H⁻¹ ∂g/∂h
        point = dict(h=torch.cat([hb, hl]), theta=th, V=V, J_t=-x_t[0], J_V=-x_V[0], lp=lp)
        self.state.update(point, u=u.clone(), F=float(lp.F[0]), g=g[self.free], inner_ok=ok)
        if ok or not search:  # (inner_ok is judged at the last, returned point)
            self.warm = point
        diag["objective_evals"] += 1
        diag["factorisations"] += 1
        diag.pop("refactor_left")


def _optimise_competences(ev: _Evidence, u0: torch.Tensor, tol: float, max_iter: int) -> tuple[Any, float]:
    """Maximise F over the free log competences with L-BFGS-B from ``u0``; ``ev.state`` ends at the
    optimum. Returns ``(u_hat, max |dF/du|)`` (a warning in ``ev.diag`` where the gradient stayed large)."""
    if not ev.nf:
        ev.evaluate(u0)
        return u0, 0.0
    dt, dev = u0.dtype, u0.device
    best: dict[str, Any] = {"F": -math.inf, "u": u0}

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        ev.evaluate(torch.as_tensor(x, dtype=dt, device=dev))
        st = ev.state
        if not (math.isfinite(st["F"]) and bool(torch.isfinite(st["g"]).all())):
            return math.inf, np.zeros_like(x)  # the inner MAP diverged here: the line search backs off
        if st["F"] > best["F"]:
            best.update(F=st["F"], u=st["u"])
        return -st["F"], -st["g"].cpu().numpy()

    ev.fast = ev.fast_search
    try:
        res = scipy.optimize.minimize(
            fun, u0.cpu().numpy(), jac=True, method="L-BFGS-B",
            options={"maxiter": max_iter, "gtol": tol, "ftol": 1e-13, "maxcor": 30},
        )  # fmt: skip
    finally:
        ev.fast = False
    u_hat = torch.as_tensor(res.x, dtype=dt, device=dev)
    if not bool(torch.isfinite(u_hat).all()) or not math.isfinite(-res.fun):  # diverged: the best point
        u_hat = best["u"]
    if ev.fast_search or not torch.equal(ev.state["u"], u_hat):  # L-BFGS-B may end elsewhere
        ev.evaluate(u_hat)  # the end point with the tight MAP and the exact gradient
    grad_norm = float(ev.state["g"].abs().max())
    ev.diag["competence_iters"] = int(res.nit)
    ev.diag["log_evidence_map"] = ev.state["F"]  # log p(D | ĥ) + log p(ĥ), Laplace (up to a constant)
    if not grad_norm <= 100 * tol or not math.isfinite(grad_norm):
        ev.diag["warnings"].append(
            f"laplace-eb: competence optimiser stopped with gradient {grad_norm:.2e} after {res.nit} "
            f"iterations (max_iter = {max_iter}): {res.message}"
        )
    return u_hat, grad_norm


def _competence_hessian(ev: _Evidence, hb, hl) -> torch.Tensor:
    """Hessian of −F over the free log competences at the optimum ``hb, hl`` (``ev.state`` there):
    forward differences of the analytic gradient, each at the MAP predicted to second order (first-order
    step along dẑ/dh, then one Newton correction with the factors at ĥ), in batches of columns. The
    blocks are float64. From d = ``_HESS_SEARCH_MIN_D`` on, with the search mode on (CPU, every λ_i² ≥
    10⁻²), the perturbed gradients' trace products are float32 (a third less time) and the step is
    ``_HESS_EPS_SEARCH``, larger than the float64 one (``_HESS_EPS``, 0.02 % from the exact Hessian in
    sd) because the float32 rounding (about 10⁻⁶ in the gradient) enters divided by it: the competences'
    posterior sd then within about 0.5 % of the float64 Hessian's (see docs/core.md); below that d the
    Hessian is cheap and stays float64."""
    pool, prior, st, R, d, nf = ev.pool, ev.prior, ev.state, ev.R, ev.d, ev.nf
    cols = torch.nonzero(ev.free).flatten()
    Hh = hb.new_zeros(nf, nf)
    lp0, g0 = st["lp"], st["g"]
    h_hat = torch.cat([hb, hl])
    fast = ev.fast_search and d >= _HESS_SEARCH_MIN_D
    fast = fast and _search_dtype(True, lp0.ainv, lp0.lam2) != lp0.ainv.dtype
    eps = _HESS_EPS_SEARCH if fast else _HESS_EPS
    # columns per batch: about 10 [R,d,d] float64 temporaries per column within _HESS_BYTES
    chunk = max(1, min(_HESS_CHUNK, _HESS_BYTES // (64 * R * d * d)))
    for c in range(0, nf, chunk):
        js = cols[c : c + chunk]
        k = js.shape[0]
        hj = h_hat.expand(k, 2 * R).clone()
        hj[torch.arange(k, device=hj.device), js] += eps
        thj = st["theta"] + eps * st["J_t"][js]
        Vj = st["V"] + eps * st["J_V"][js]
        g_t, g_V = _loss_grad(pool, hj[:, :R], hj[:, R:], thj, Vj)[5:7]
        x_t, x_V = _block_solve(lp0, g_t.unsqueeze(0), g_V.unsqueeze(0))
        thj, Vj = thj - x_t[0], Vj - x_V[0]
        lpj = _laplace(pool, prior, hj[:, :R], hj[:, R:], thj, Vj, ev.free_b, ev.free_l)
        gj = _evidence_grad(pool, prior, lpj, hj[:, :R], hj[:, R:], ev.free_b, ev.free_l, fast)
        Hh[:, c : c + k] = -(gj[:, ev.free].T - g0[:, None]) / eps
    return 0.5 * (Hh + Hh.T)


def _newton_polish(ev: _Evidence, u_hat: torch.Tensor, hess: torch.Tensor) -> torch.Tensor:
    """One Newton step u + H⁻¹ dF/du from the optimiser's end point with the competence Hessian ``hess``
    (of −F, :func:`_competence_hessian`): from a gradient of 10⁻² the optimum to about 10⁻⁵, for one
    evaluation instead of the ten or so L-BFGS-B would take. Kept only where F does not decrease and the
    Hessian is positive definite; ``ev.state`` ends at the returned point."""
    evals, evecs = torch.linalg.eigh(hess)
    if not ev.nf or not bool((evals > 0).all()):
        return u_hat
    step = evecs @ ((evecs.T @ ev.state["g"]) / evals)
    if not float(step.abs().max()) > 1e-10:
        return u_hat
    before, warm = dict(ev.state), ev.warm
    ev.evaluate(u_hat + step)
    st = ev.state
    ok = st["inner_ok"] and bool(torch.isfinite(st["g"]).all()) and math.isfinite(st["F"])
    if not (ok and st["F"] >= before["F"] - 1e-9):
        ev.state, ev.warm = before, warm
        return u_hat
    return u_hat + step


def _competence_cov(ev: _Evidence, hess: torch.Tensor) -> torch.Tensor:
    """The competences' Laplace covariance (in log space) at the optimum: the inverse of the competence
    Hessian ``hess``, with the prior curvature in directions where that is not positive."""
    if not ev.nf:
        return ev.h0.new_zeros(0, 0)
    evals, evecs = torch.linalg.eigh(hess)
    if bool((evals <= 0).any()):
        ev.diag["warnings"].append(
            "laplace-eb: the competence posterior is not locally concave (smallest curvature "
            f"{float(evals.min()):.2e}); its intervals use the prior curvature in those directions"
        )
        floor = 1.0 / max(ev.prior.marginal_scale("beta"), ev.prior.marginal_scale("lam")) ** 2
        evals = torch.where(evals > 0, evals, torch.full_like(evals, floor))
    return (evecs / evals) @ evecs.T


def _laplace_draws(ev: _Evidence, hb, hl, cov_h, n: int, gen) -> dict[str, torch.Tensor]:
    """Draws ``[n,...]``: competences h ~ N(ĥ, cov_h); (θ, ϑ) | ĥ Gaussian with precision H at the MAP
    (the factors of the last evaluation), θ widened by the competences' uncertainty through the MAP's
    sensitivity (θ ≈ θ̂ + J (h − ĥ) + N(0, S⁻¹))."""
    st, R, d, nf = ev.state, ev.R, ev.d, ev.nf
    dt, dev = hb.dtype, hb.device
    cols = torch.nonzero(ev.free).flatten()
    J_t = st["J_t"][cols].T.contiguous()  # [d,nf]
    J_V = st["J_V"][cols].permute(1, 2, 0).contiguous()  # [R,d,nf]
    if nf:
        ch = spd_cholesky(0.5 * (cov_h + cov_h.T))
        dh = torch.randn(n, nf, generator=gen, dtype=dt).to(dev) @ ch.T  # [n, nf]
    else:
        dh = torch.zeros(n, 0, dtype=dt, device=dev)
    e_t = torch.randn(n, d, generator=gen, dtype=dt).to(dev)
    e_V = torch.randn(n, R, d, generator=gen, dtype=dt).to(dev)
    dtheta, dV = _latent_draws(ev.pool, st["lp"], e_t, e_V)
    theta_d = st["theta"] + dtheta + dh @ J_t.T
    V_d = st["V"] + dV + torch.einsum("rdj,nj->nrd", J_V, dh)
    h_all = torch.cat([hb, hl]).expand(n, 2 * R).clone()
    if nf:
        h_all[:, ev.free] = h_all[:, ev.free] + dh
    return {"theta": theta_d, "vartheta": V_d, "beta": h_all[:, :R].exp(), "lam": h_all[:, R:].exp()}


def _fit_laplace_eb(pool, prior, problem, h_b0, h_l0, free_b, free_l, num_draws, gen, tol, max_iter):
    """The laplace-eb engine: type-II MAP of the competences, their Laplace covariance, then draws."""
    ev = _Evidence(pool, prior, problem, h_b0, h_l0, free_b, free_l)
    t0 = time.perf_counter()
    u_hat, grad_norm = _optimise_competences(ev, torch.cat([h_b0, h_l0])[ev.free].clone(), tol, max_iter)
    diag = ev.diag
    t1 = time.perf_counter()
    hess = _competence_hessian(ev, *ev.split(u_hat)) if ev.nf else None
    t2 = time.perf_counter()
    if ev.nf:  # the Hessian's one Newton step; the covariance is its inverse (one step away: see docs)
        u_hat = _newton_polish(ev, u_hat, hess)
        grad_norm = float(ev.state["g"].abs().max())
        diag["log_evidence_map"] = ev.state["F"]
    if not ev.state["inner_ok"]:
        diag["warnings"].append("laplace-eb: the MAP of (theta, vartheta) did not reach its tolerance")
    hb, hl = ev.split(u_hat)
    cov_h = _competence_cov(ev, hess)
    t3 = time.perf_counter()
    draws = _laplace_draws(ev, hb, hl, cov_h, num_draws, gen)
    diag.update(
        optimise_seconds=t1 - t0 + t3 - t2,
        hessian_seconds=t2 - t1,
        sample_seconds=time.perf_counter() - t3,
        competence_grad=grad_norm,
        log_competence_map=torch.cat([hb, hl]).tolist(),
        log_competence_cov=cov_h.tolist(),
        theta_map=ev.state["theta"].tolist(),
    )
    return {k: v.unsqueeze(0) for k, v in draws.items()}, diag


# ---------------------------------------------------------------------------- Pyro engines
class _GivenPoolLevel:
    """The LogNormal prior of one rater's competence given the pool level μ (a sampled tensor): the
    ``distribution(like)`` protocol of :class:`~bayescrl.models.pyro_models.CompetencePrior`."""

    def __init__(self, loc: torch.Tensor, scale: float):
        self.loc, self.scale = loc, scale

    def distribution(self, like: torch.Tensor) -> dist.Distribution:
        scale = torch.as_tensor(self.scale, dtype=like.dtype, device=like.device)
        return dist.LogNormal(self.loc.to(like.dtype), scale)


def _pyro_model(pool: _Pool, beta_fixed, lam_fixed, free_b, free_l, prior: RaterPrior, ids):
    """The model of the module docstring for the Pyro engines; a hierarchical prior (``*_pool_scale`` > 0)
    samples its pool level as the site ``pool_beta_loc`` / ``pool_lam_loc`` (μ ~ N(loc, pool_scale²))."""
    zeros = pool.mu0.new_zeros(0, pool.mu0.shape[0])
    base = partial(
        bt_linear_model,
        pool.mu0,
        pool.cov0,
        beta_fixed,
        lam_fixed,
        1.0,
        pool.x0,
        pool.x1,
        pool.y,
        pool.rater,
        zeros,
        None,
        rater_ids=tuple(ids),
    )
    sites = (("beta", free_b, prior.beta_loc, prior.beta_scale, prior.beta_pool_scale),
             ("lam", free_l, prior.lam_loc, prior.lam_scale, prior.lam_pool_scale))  # fmt: skip

    def model():
        priors = {}
        for name, free, loc, scale, pool_scale in sites:
            free_i = [i for i in range(len(ids)) if free[i]]
            if pool_scale > 0 and free_i:
                level = pyro.sample(f"pool_{name}_loc", dist.Normal(float(loc), float(pool_scale)))
                priors[name] = {i: _GivenPoolLevel(level, scale) for i in free_i}
            else:
                cp = CompetencePrior("lognormal", {"loc": loc, "scale": scale})
                priors[name] = {i: cp for i in free_i}
        return base(beta_priors=priors["beta"], lam_priors=priors["lam"])

    return model


def _assemble(samples: dict[str, torch.Tensor], beta_fixed, lam_fixed, free_b, free_l, ids) -> dict:
    """Pyro site draws ``[C,D,...]`` → ``theta, vartheta, beta [C,D,R], lam [C,D,R]``."""
    th = samples["theta"]
    C, Dn = th.shape[:2]
    out = {"theta": th.double(), "vartheta": samples["vartheta"].double()}
    for name, fixed, free in (("beta", beta_fixed, free_b), ("lam", lam_fixed, free_l)):
        cols = []
        for i, rid in enumerate(ids):
            if free[i]:
                cols.append(samples[f"{name}_{rid}"].reshape(C, Dn).double())
            else:
                cols.append(torch.full((C, Dn), float(fixed[i]), dtype=torch.float64, device=th.device))
        out[name] = torch.stack(cols, -1)
    return out


# ---------------------------------------------------------------------------- public entry point
def fit_rater_pool(
    X0,
    X1,
    y,
    rater_index,
    raters: Sequence[PoolRater | str | Mapping],
    prior: RaterPrior | Mapping | None = None,
    engine: str = "laplace-eb",
    *,
    mu0=None,
    cov0=None,
    num_draws: int = 1000,
    seed: int = 0,
    device: str | torch.device = "cpu",
    tol: float = 1e-2,
    max_iter: int = 200,
    **engine_options: Any,
) -> RaterPoolPosterior:
    """Infer θ, every rater's belief ϑ_i and its competences β_i, λ_i from a pool's comparisons.

    Inputs (N comparisons, d features, R raters):

    * ``X0, X1 [N,d]``: the two items' features; ``y [N]``: 1 if rater ``rater_index[n]`` preferred
      ``X1[n]`` (Bradley–Terry, Eq. `rater_preference_dist`: P(y = 1) = σ(β_i⟨X1 − X0, ϑ_i⟩)), else 0;
    * ``rater_index [N]``: integer positions into ``raters`` or rater ids (str); an undeclared rater is a
      ``ConfigError("rater_index", ...)``;
    * ``raters``: R entries, each a :class:`PoolRater`, an id, ``{"id", "beta"?, "lam"?}``, or any object
      with ``id``, ``beta``, ``lam`` attributes (a rater of :mod:`bayescrl.raters`); a numeric ``beta`` /
      ``lam`` is known (fixed, anchors the pool), a missing one (or a prior object) is inferred;
    * ``prior``: :class:`RaterPrior` (or its fields as a mapping): ``log β_i ~ N(beta_loc, beta_scale²)``,
      ``log λ_i ~ N(μ_λ, lam_scale²)`` with the pool's level ``μ_λ ~ N(lam_loc, lam_pool_scale²)``
      (LogNormal β_i, λ_i; β likewise with ``beta_pool_scale`` > 0); ``mu0 [d]``, ``cov0 [d,d]``: the prior
      N(μ0, Σ0) of θ (default N(0, I));
    * ``engine``: ``"laplace-eb"`` (fast, type-II MAP of the competences, see the module docstring),
      ``"svi"`` or ``"nuts"`` (the reference); ``engine_options`` go to
      :func:`~bayescrl.inference.svi.fit_svi` / :func:`~bayescrl.inference.nuts.fit_nuts`
      (e.g. ``num_samples``, ``warmup``, ``num_chains``; ``max_steps``, ``guide``);
    * ``num_draws``: draws kept by laplace-eb and svi; ``seed``; ``device``; ``tol`` / ``max_iter``: the
      competence optimiser's gradient tolerance and iterations (laplace-eb; one Newton step with the
      competence Hessian follows, which takes a gradient of 10⁻² to about 10⁻⁵).

    Returns a :class:`RaterPoolPosterior` (draws of ``theta``, ``vartheta``, ``beta``, ``lam`` with rater
    coordinate; ``rater_table()``, ``to_arviz()``, ``plot(path)``, ``summary()``). With one rater λ is not
    identified: it stays at its prior (flagged ``lam_from_prior``; θ uses the prior median). Without any
    known competence a ``UserWarning`` says that only the prior fixes the β–θ scale; an engine that did not
    converge raises a ``RuntimeWarning`` (reasons in ``diagnostics["warnings"]``).
    """
    if engine not in POOL_ENGINES:
        raise ConfigError("engine", engine, f"must be one of {list(POOL_ENGINES)}")
    prior = _rater_prior(prior)
    if num_draws < 1:
        raise ConfigError("num_draws", num_draws, "must be >= 1")
    rs = _raters(raters)
    ids = [r.id for r in rs]
    X0, X1, y_t, rater, mu0_t, cov0_t = _pool_tensors(X0, X1, y, rater_index, ids, mu0, cov0, device)
    comp = _Competences.of(rs, prior, device)
    user_warn = []
    if not bool(comp.known_b.any() | comp.known_l.any()):
        user_warn.append(
            "no rater's competence is known: only the prior (of theta and of log beta, log lam) fixes the "
            "beta-theta scale; anchor the pool with a rater of known beta/lam where one exists"
        )
    pool = _pool(X0, X1, y_t, rater, len(rs), mu0_t, cov0_t, device, torch.float64)
    gen = torch.Generator().manual_seed(int(seed))
    if engine == "laplace-eb":
        if engine_options:
            raise ConfigError("engine_options", sorted(engine_options), "laplace-eb takes no further options")
        problem = BTLinearProblem.from_data(
            mu0_t, cov0_t, comp.h_b0.exp(), comp.h_l0.exp(), x0=X0, x1=X1, y=y_t, rater=rater,
            rater_ids=ids, device=device,
        )  # fmt: skip
        fb, fl = (f.to(device).to(torch.float64) for f in (comp.free_b, comp.free_l))
        draws, diag = _fit_laplace_eb(
            pool, prior, problem, comp.h_b0, comp.h_l0, fb, fl, num_draws, gen, tol, max_iter
        )
    else:
        draws, diag = _fit_pyro(engine, pool, prior, comp, ids, num_draws, seed, gen, engine_options)
    post = _posterior(engine, ids, rs, prior, comp, draws, diag, gen, X0, X1)
    for msg in user_warn:
        warnings.warn(msg, UserWarning, stacklevel=2)
        post.diagnostics["warnings"].append(msg)
    for msg in diag.get("warnings", []):
        if msg.startswith(("one rater", "no rater")):
            continue
        warnings.warn(f"{engine} did not converge: {msg}", RuntimeWarning, stacklevel=2)
    return post


def _rater_prior(prior: RaterPrior | Mapping | None) -> RaterPrior:
    """``prior`` as a validated :class:`RaterPrior` (None: the defaults; a mapping: its fields)."""
    if prior is None:
        prior = RaterPrior()
    elif isinstance(prior, Mapping):
        known = ("beta_loc", "beta_scale", "lam_loc", "lam_scale", "beta_pool_scale", "lam_pool_scale")
        unknown = set(prior) - set(known)
        if unknown:
            raise ConfigError("prior", sorted(unknown), f"unknown field(s); known: {', '.join(known)}")
        prior = RaterPrior(**prior)
    prior.validate()
    return prior


def _pool_tensors(X0, X1, y, rater_index, ids: list[str], mu0, cov0, device):
    """Checked float64 tensors on ``device``: ``X0, X1 [N,d]``, ``y [N]`` (0/1), the rater positions
    ``[N]``, ``mu0 [d]`` and ``cov0 [d,d]`` (defaults N(0, I)); a ConfigError names the bad input."""
    dt = torch.float64
    X0 = torch.as_tensor(X0, dtype=dt, device=device)
    X1 = torch.as_tensor(X1, dtype=dt, device=device)
    if X0.dim() != 2 or X1.shape != X0.shape:
        raise ConfigError("X1", tuple(X1.shape), f"X0 and X1 must both be [N, d] (X0 is {tuple(X0.shape)})")
    N, d = X0.shape
    y_t = torch.as_tensor(y, dtype=dt, device=device).reshape(-1)
    if y_t.shape[0] != N:
        raise ConfigError("y", y_t.shape[0], f"needs one label per comparison ({N})")
    if not bool(((y_t == 0) | (y_t == 1)).all()):
        raise ConfigError("y", y_t[(y_t != 0) & (y_t != 1)][:3].tolist(), "labels must be 0 or 1")
    if not bool(torch.isfinite(X0).all() & torch.isfinite(X1).all()):
        raise ConfigError("X0", "non-finite", "features must be finite")
    rater = _rater_index(rater_index, ids, N, device)
    mu0_t = (
        torch.zeros(d, dtype=dt, device=device)
        if mu0 is None
        else torch.as_tensor(mu0, dtype=dt, device=device)
    )
    cov0_t = (
        torch.eye(d, dtype=dt, device=device)
        if cov0 is None
        else torch.as_tensor(cov0, dtype=dt, device=device)
    )
    if mu0_t.shape != (d,):
        raise ConfigError("mu0", tuple(mu0_t.shape), f"must have shape [{d}]")
    if cov0_t.shape != (d, d) or torch.linalg.cholesky_ex(cov0_t)[1] != 0:
        raise ConfigError(
            "cov0", tuple(cov0_t.shape), f"must be a symmetric positive-definite [{d}, {d}] matrix"
        )
    return X0, X1, y_t, rater, mu0_t, cov0_t


@dataclass
class _Competences:
    """Which competences are known (``known_b``, ``known_l [R]`` bool, CPU), which λ only have their prior
    (``lam_prior_only``: a single rater), which are inferred (``free_b``, ``free_l``), and the log
    competences to start from (``h_b0``, ``h_l0 [R]``: the known values, else the prior location)."""

    known_b: torch.Tensor
    known_l: torch.Tensor
    lam_prior_only: torch.Tensor
    free_b: torch.Tensor
    free_l: torch.Tensor
    h_b0: torch.Tensor
    h_l0: torch.Tensor

    @classmethod
    def of(cls, rs: list[PoolRater], prior: RaterPrior, device) -> _Competences:
        dt = torch.float64
        known_b = torch.tensor([r.beta is not None for r in rs], device="cpu")
        known_l = torch.tensor([r.lam is not None for r in rs], device="cpu")
        lam_prior_only = (~known_l) & torch.tensor(len(rs) == 1, device="cpu")
        h_b0 = torch.tensor(
            [math.log(r.beta) if r.beta is not None else prior.beta_loc for r in rs], dtype=dt, device=device
        )
        h_l0 = torch.tensor(
            [math.log(r.lam) if r.lam is not None else prior.lam_loc for r in rs], dtype=dt, device=device
        )
        return cls(known_b, known_l, lam_prior_only, ~known_b, (~known_l) & ~lam_prior_only, h_b0, h_l0)


def _fit_pyro(engine: str, pool: _Pool, prior, comp: _Competences, ids, num_draws, seed, gen, options):
    """The svi and nuts engines on :func:`_pyro_model`: draws in the pool layout and diagnostics."""
    beta_fixed, lam_fixed = comp.h_b0.exp(), comp.h_l0.exp()
    free_b, free_l = comp.free_b.tolist(), comp.free_l.tolist()
    fn = _pyro_model(pool, beta_fixed, lam_fixed, free_b, free_l, prior, ids)
    infos = site_infos(fn)
    if engine == "nuts":
        chains, _stats, diag = fit_nuts(fn, infos, seed=seed, **options)
    else:
        opts = {"guide": "mvn", "reparam": True, **options}
        sampler, diag = fit_svi(fn, infos, seed=seed, **opts)
        chains = {k: v.unsqueeze(0) for k, v in sampler(num_draws, gen).items()}
    draws = _assemble(chains, beta_fixed, lam_fixed, free_b, free_l, ids)
    diag = {k: v for k, v in diag.items() if k != "elbo"}
    diag.setdefault("warnings", [])
    return draws, diag


def _posterior(engine, ids, rs, prior, comp: _Competences, draws, diag, gen, X0, X1) -> RaterPoolPosterior:
    """The posterior object: known competences exactly the user's values, a single rater's λ drawn from
    its prior (with the warning that says so), ``converged`` and the margin scale of the verdicts."""
    for name, known, vals in (
        ("beta", comp.known_b, [r.beta for r in rs]),
        ("lam", comp.known_l, [r.lam for r in rs]),
    ):
        for i in torch.nonzero(known).flatten().tolist():
            draws[name][..., i] = float(vals[i])  # exactly the user's value (not exp(log(value)))
    if bool(comp.lam_prior_only.any()):
        C, Dn = draws["lam"].shape[:2]
        z = torch.randn(C, Dn, generator=gen, dtype=torch.float64)
        draws["lam"][..., 0] = torch.exp(prior.lam_loc + prior.marginal_scale("lam") * z).to(draws["lam"])
        diag["warnings"] = list(diag.get("warnings", [])) + [
            "one rater: lam is not identified from a single rater's data (the thesis' observation) and "
            "stays at its prior (lam_from_prior)"
        ]
    diag["converged"] = not any(not w.startswith(("one rater",)) for w in diag.get("warnings", []))
    N, d = X0.shape
    th_mean = draws["theta"].reshape(-1, d).mean(0)
    margin = float(((X1 - X0) @ th_mean).pow(2).mean().sqrt()) if N else 1.0
    return RaterPoolPosterior(
        engine, ids, draws, comp.known_b, comp.known_l, comp.lam_prior_only, margin, diag
    )


def simulate_pool(
    d: int,
    betas: Sequence[float],
    lams: Sequence[float],
    n_per_rater: int | Sequence[int],
    *,
    seed: int = 0,
    theta: torch.Tensor | None = None,
    device: str | torch.device = "cpu",
) -> dict[str, torch.Tensor]:
    """Simulate a linear rater pool: θ ~ N(0, I) (unless given), ϑ_i = θ + ε_i/λ_i (ε_i ~ N(0, I)),
    items x ~ N(0, I/d) (so ⟨x1 − x0, θ⟩ has variance ≈ 2), y ~ Bernoulli(σ(β_i⟨x1 − x0, ϑ_i⟩)).

    Returns ``X0, X1 [N,d]``, ``y [N]``, ``rater [N]`` (rater i's rows contiguous), ``theta [d]``,
    ``vartheta [R,d]``.
    """
    g = torch.Generator().manual_seed(int(seed))
    R = len(betas)
    n = [int(n_per_rater)] * R if isinstance(n_per_rater, int) else [int(v) for v in n_per_rater]
    dt = torch.float64
    th = (
        torch.randn(d, generator=g, dtype=dt)
        if theta is None
        else torch.as_tensor(theta, dtype=dt, device="cpu")
    )
    lam = torch.tensor(list(lams), dtype=dt, device="cpu")
    beta = torch.tensor(list(betas), dtype=dt, device="cpu")
    vt = th + torch.randn(R, d, generator=g, dtype=dt) / lam[:, None]
    rater = torch.cat([torch.full((k,), i, dtype=torch.long, device="cpu") for i, k in enumerate(n)])
    N = rater.shape[0]
    X0 = torch.randn(N, d, generator=g, dtype=dt) / math.sqrt(d)
    X1 = torch.randn(N, d, generator=g, dtype=dt) / math.sqrt(d)
    p = torch.sigmoid(beta[rater] * ((X1 - X0) * vt[rater]).sum(-1))
    y = torch.bernoulli(p, generator=g)
    out = {"X0": X0, "X1": X1, "y": y, "rater": rater, "theta": th, "vartheta": vt}
    return {k: v.to(device) for k, v in out.items()}

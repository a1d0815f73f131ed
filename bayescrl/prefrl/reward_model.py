"""The learner's posterior over the reward r_θ(s, a) = ⟨θ, φ(s, a)⟩ given rater preferences over segments.

The model is the standard model of :mod:`bayescrl.models.linear` with x = Φ(σ) (Eq. `informed_prior`,
Eq. `rater_preference_dist`, Eq. `pref_logistic_trajectories`): θ ~ N(0, s²I), rater i's belief
ϑ_i ~ N(θ, I/λ_i²), P(σ0 ≻ σ1) = sigmoid(β_i⟨ϑ_i, Φ(σ0) − Φ(σ1)⟩). Every :mod:`bayescrl.inference` engine
applies: ``laplace`` and ``bootstrap`` use the fast batched Newton paths (warm-started from the previous
fit, so an update after a round of queries costs a few Newton steps), ``svi`` / ``nuts`` / ``exact`` go
through :func:`bayescrl.inference.fit` on the same data.

Rater competence is ``known`` (the learner is told each rater's β, λ), ``infer`` (the hierarchical rater
model, :func:`bayescrl.inference.hierarchical.fit_rater_pool`: θ, every rater's belief ϑ_i, β_i and λ_i
jointly; a rater of known competence, such as an offline file's, anchors the pool; λ of a single rater stays
at its prior), ``infer-beta`` (β_i estimated from the rater's own labels by marginal maximum likelihood, θ
integrated out — the thesis' plug-in recipe of chapter `warmPref-PS`,
:func:`bayescrl.raters.competence.beta_mle`; λ is the learner's ``learner_lam``) or ``ignore``
(all labels treated as from one rater with β = 1, λ = ``learner_lam``: the usual point of view of
preference-based RL libraries, kept as the ablation).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch

from bayescrl.inference.arviz import draws_to_arviz, import_arviz, num_draws
from bayescrl.inference.bootstrap import perturbed_map
from bayescrl.inference.engines import fit
from bayescrl.inference.hierarchical import fit_rater_pool
from bayescrl.inference.laplace import laplace
from bayescrl.inference.rater_report import table_rows
from bayescrl.models.linear import BTLinearProblem
from bayescrl.models.spec import SpecModel
from bayescrl.prefrl.spec import COMPETENCE, POOL_ENGINE
from bayescrl.raters.competence import beta_mle
from bayescrl.utils.errors import ConfigError


def _prior(
    dim: int, prior_scale: float, prior_mean: torch.Tensor | None, prior_cov: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(μ0, Σ0)`` of θ (float64, CPU): ``N(0, s²I)`` of Eq. `informed_prior` unless given."""
    mu0 = torch.zeros(dim, dtype=torch.float64, device="cpu") if prior_mean is None else prior_mean.double()
    if prior_cov is not None:
        return mu0, prior_cov.double()
    return mu0, prior_scale**2 * torch.eye(dim, dtype=torch.float64, device="cpu")


def _learner_competence(
    competence: str, R: int, beta: list[float], lam: list[float], learner_lam: float
) -> tuple[list[float], list[float]]:
    """The ``(β, λ)`` per rater the likelihood starts from: the given ones (``known``), ``(1, learner_lam)``
    (``infer-beta``: β is estimated later), placeholders ``(1, 1)`` (``infer``: the pool fit infers them)
    or one anonymous rater ``(1, learner_lam)`` (``ignore``)."""
    if competence == "known":
        return list(beta), list(lam)
    if competence == "infer-beta":
        return [1.0] * R, [learner_lam] * R
    if competence == "infer":  # placeholders: the pool fit infers them (known_raters keep theirs)
        return [1.0] * R, [1.0] * R
    return [1.0], [learner_lam]  # one anonymous rater


class LinearRewardPosterior:
    """Posterior over θ from segment preferences; batched sampling, warm-started refits.

    The interface the learning loop uses (shared with
    :class:`~bayescrl.prefrl.ensemble.EnsembleRewardPosterior`): ``add_segments``, ``update``, ``draw`` /
    ``mean_draw`` / ``reward`` (a posterior draw and the per-step reward under it), ``quantile_reward``,
    ``returns`` (segment returns under S draws, for the query rules), ``summary``, ``state_dict`` /
    ``load_state_dict``.
    """

    needs_steps = False  # the linear model only needs each segment's Φ, not its per-step features

    def __init__(
        self,
        dim: int,
        rater_ids: list[str],
        *,
        beta: list[float],
        lam: list[float],
        competence: str = "known",
        engine: str = "laplace",
        engine_options: dict | None = None,
        num_samples: int = 64,
        prior_scale: float = 1.0,
        learner_lam: float = 1000.0,
        seed: int = 0,
        device: str | torch.device = "cpu",
        prior_mean: torch.Tensor | None = None,
        prior_cov: torch.Tensor | None = None,
    ):
        if competence not in COMPETENCE:
            raise ConfigError("competence", competence, f"must be one of {', '.join(COMPETENCE)}")
        if competence == "infer" and engine not in POOL_ENGINE:
            raise ConfigError("engine", engine, f"competence: infer runs one of {', '.join(POOL_ENGINE)}")
        self.dim, self.competence, self.engine = int(dim), competence, engine
        mu0, cov0 = _prior(dim, prior_scale, prior_mean, prior_cov)
        self.engine_options = dict(engine_options or {})
        self.num_samples, self.device = int(num_samples), torch.device(device)
        self.rater_ids = list(rater_ids)
        b, lm = _learner_competence(competence, len(rater_ids), beta, lam, learner_lam)
        self.learner_lam = float(learner_lam)
        self.problem = BTLinearProblem.empty(
            mu0,
            cov0,
            b,
            lm,
            pref_capacity=256,
            rater_ids=rater_ids if competence != "ignore" else ["all"],
            device=self.device,
        )
        self.gen = torch.Generator().manual_seed(int(seed))
        self._mean = mu0.clone().to(self.device)
        self._cov = cov0.clone().to(self.device)
        self._pool: torch.Tensor | None = None  # bootstrap / MCMC draws of θ, (M, d)
        self._warm = None  # the previous fit (LaplaceResult or MAPResult): Newton's starting point
        self.diagnostics: dict = {"converged": True, "fits": 0}
        self.known_raters: dict[int, tuple[float, float]] = {}  # infer: raters of known (β, λ), by index
        self.pool = None  # infer: the last RaterPoolPosterior

    # ------------------------------------------------------------------ data
    @property
    def num_labels(self) -> int:
        return int(self.problem.pref_mask.sum())

    def add(self, phi0, phi1, y, rater, offline: bool = False) -> None:
        """Append comparisons ``phi0, phi1 (K, d)``, ``y (K,)`` in {0, 1} (0: σ0 preferred), raters."""
        y = np.asarray(y)
        if len(y) == 0:
            return
        rater = np.asarray(rater, dtype=np.int64)
        if self.competence == "ignore":
            rater = np.zeros_like(rater)
        self.problem.append_preferences(
            torch.as_tensor(np.asarray(phi0), dtype=torch.float64, device=self.device),
            torch.as_tensor(np.asarray(phi1), dtype=torch.float64, device=self.device),
            torch.as_tensor(y, dtype=torch.float64, device=self.device),
            torch.as_tensor(rater, device=self.device),
            torch.full((len(y),), not offline, dtype=torch.bool, device=self.device),
        )

    def add_segments(self, s0, s1, y, rater) -> None:
        """Comparisons of :class:`~bayescrl.prefrl.segments.Segments` ``s0`` vs ``s1`` (rows aligned)."""
        self.add(s0.phi, s1.phi, y, rater)

    # ------------------------------------------------------------------ fitting
    def update(self) -> None:
        """Refit after new labels (competence first when inferred, then the θ posterior)."""
        if self.competence == "infer-beta":
            self._infer_beta()
        p = self.problem
        if self.competence == "infer":
            conv = self._fit_pool()
        elif self.engine == "laplace":
            res = laplace(p, init=self._warm)  # warm start: a round adds few labels
            self._warm = res
            self._mean, self._cov = res.theta_mean.clone(), res.theta_cov.clone()
            self._pool = None
            conv = bool(res.converged.all())
        elif self.engine == "bootstrap":
            opts = {"p_offline": 0.5, "p_online": 0.5, **self.engine_options}
            res = perturbed_map(p, self.num_samples, init=self._warm, generator=self.gen, **opts)
            self._warm = res
            self._pool = res.theta
            self._mean, self._cov = res.theta.mean(0), torch.cov(res.theta.T).reshape(self.dim, self.dim)
            conv = bool(res.converged.all())
        else:
            conv = self._fit_generic()
        self.diagnostics["fits"] += 1
        self.diagnostics["converged"] = conv
        if not conv:
            warnings.warn(f"reward posterior ({self.engine}) did not converge", RuntimeWarning, stacklevel=2)

    def _fit_generic(self) -> bool:
        model = SpecModel(problem=self.problem, rater_ids=tuple(self.problem.rater_ids or ()))
        seed = int(torch.randint(2**31 - 1, (1,), generator=self.gen))
        post = fit(model, engine=self.engine, seed=seed, **self.engine_options)
        th = post.sample(self.num_samples, seed=seed)["theta"].double().reshape(-1, self.dim)
        self._pool = th
        self._mean, self._cov = th.mean(0), torch.cov(th.T).reshape(self.dim, self.dim)
        diag = post.diagnostics
        return bool(diag.get("converged", diag.get("converged_fraction", 1.0) == 1.0))

    def _fit_pool(self) -> bool:
        """``competence: infer``: θ's posterior from the pool's labels under the hierarchical rater model
        (:func:`~bayescrl.inference.hierarchical.fit_rater_pool`; engine ``laplace`` -> ``laplace-eb``);
        the raters of :attr:`known_raters` keep their (β, λ), the others' are inferred. Sets the draws of θ,
        each rater's posterior-mean β (for the query rules) and :attr:`pool` (its rater table)."""
        p = self.problem
        m = p.pref_mask
        if not int(m.sum()):
            return True
        raters = [
            {"id": rid, "beta": self.known_raters[i][0], "lam": self.known_raters[i][1]}
            if i in self.known_raters
            else {"id": rid}
            for i, rid in enumerate(self.rater_ids)
        ]
        seed = int(torch.randint(2**31 - 1, (1,), generator=self.gen))
        opts = self.engine_options if self.engine != "laplace" else {}
        post = fit_rater_pool(  # warns once when no rater is known: only the priors fix the scale
            p.x0[m].double().cpu(),
            p.x1[m].double().cpu(),
            p.y[m].double().cpu(),
            p.rater[m].cpu(),
            raters,
            engine=POOL_ENGINE[self.engine],
            mu0=p.mu0.double().cpu(),
            cov0=p.cov0.double().cpu(),
            num_draws=max(self.num_samples, 200),
            seed=seed,
            **opts,
        )
        self.pool = post
        th = post.flat("theta").double().to(self.device)
        self._pool = th
        self._mean, self._cov = th.mean(0), torch.cov(th.T).reshape(self.dim, self.dim)
        p.beta[:] = post.flat("beta").mean(0).to(p.beta)
        return bool(post.diagnostics.get("converged", True))

    def rater_rows(self) -> list[dict]:
        """The rater table (:func:`bayescrl.inference.rater_report.table_rows`) of the last pool fit, or
        ``[]`` (competence other than ``infer``, or no labels yet)."""
        return table_rows(self.pool) if self.pool is not None else []

    def _infer_beta(self) -> None:
        """β̂_i by marginal maximum likelihood on rater i's own labels (θ ~ prior integrated out)."""
        p = self.problem
        m = p.pref_mask
        grid = torch.logspace(-2, 2.5, 28, dtype=torch.float64, device=p.mu0.device)
        for i in range(p.num_raters):
            rows = m & (p.rater == i)
            if int(rows.sum()) < 5:
                continue
            est = beta_mle(
                p.x0[rows][None], p.x1[rows][None], p.y[rows][None], p.mu0, p.cov0, self.learner_lam, grid
            )
            p.beta[i] = est[0]

    @property
    def beta(self) -> list[float]:
        return self.problem.beta.tolist()

    # ------------------------------------------------------------------ draws and summaries
    def mean(self) -> torch.Tensor:
        return self._mean

    def cov(self) -> torch.Tensor:
        return self._cov

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``n`` posterior draws of θ, shape (n, d): from the Gaussian (laplace) or the pool of draws;
        on ``generator`` when given, else on the learner's own stream."""
        gen = self.gen if generator is None else generator
        if self._pool is not None:
            idx = torch.randint(self._pool.shape[0], (n,), generator=gen)
            return self._pool[idx]
        chol = torch.linalg.cholesky(
            self._cov + 1e-12 * torch.eye(self.dim, dtype=self._cov.dtype, device=self._cov.device)
        )
        z = torch.randn(n, self.dim, generator=gen, dtype=torch.float64).to(chol.device)  # the CPU stream
        return self._mean + z @ chol.mT

    def to_arviz(self, n: int = 1000, seed: int = 0, var_name: str = "theta"):
        """``arviz.InferenceData`` of ``n`` draws of θ (4 chains, :mod:`bayescrl.inference.arviz`); drawn on
        a generator seeded by ``seed``, so the learner's own stream does not move."""
        th = self.sample(num_draws(n), torch.Generator().manual_seed(int(seed)))
        return draws_to_arviz(
            {var_name: th}, dims={var_name: [f"{var_name}_dim"]}, attrs={"engine": self.engine}
        )

    def draw(self) -> torch.Tensor:
        """One posterior draw θ̃ (Thompson sampling)."""
        return self.sample(1)[0]

    def mean_draw(self) -> torch.Tensor:
        return self._mean

    def reward(self, phi: torch.Tensor, draw: torch.Tensor) -> torch.Tensor:
        """Per-step reward ⟨θ, φ⟩ of ``phi (N, d)`` under a draw (or the mean)."""
        return phi.to(draw) @ draw

    def returns(self, segs, n: int) -> torch.Tensor:
        """Returns ⟨θ_s, Φ_k⟩ of the segments under ``n`` posterior draws: (n, K)."""
        return self.sample(n) @ torch.as_tensor(segs.phi, dtype=torch.float64, device=self.device).T

    def quantile_reward(self, phi: torch.Tensor, quantile: float) -> torch.Tensor:
        """The ``quantile`` posterior quantile of ⟨θ, φ⟩ per row (Gaussian approximation of the posterior):
        a lower one (< 0.5) for a risk-averse reward, an upper one (> 0.5) for a pessimistic cost."""
        z = math.sqrt(2.0) * torch.erfinv(
            torch.tensor(2.0 * quantile - 1.0, dtype=torch.float64, device=self._mean.device)
        )
        phi = phi.to(self._mean)
        mean = phi @ self._mean
        var = ((phi @ self._cov) * phi).sum(-1).clamp_min(0.0)
        return mean + z * var.sqrt()

    def summary(self, k: int = 8) -> dict:
        """Competences, diagnostics and ``arviz.summary(kind="stats")``'s table (mean, sd, 94 % HDI) of the
        first ``k`` coordinates of θ: in closed form for the Gaussian (Laplace) posterior, from the draws
        otherwise (no random numbers are consumed)."""
        if self._pool is None:
            mean, sd = self._mean[:k], self._cov.diagonal()[:k].clamp_min(0).sqrt()
            lo, hi = mean - 1.880793608151251 * sd, mean + 1.880793608151251 * sd  # Φ⁻¹(0.97)
        else:
            th = self._pool[:, :k]
            mean, sd = th.mean(0), th.std(0)
            lo, hi = _hdi(th, 0.94)
        table = {
            f"theta[{i}]": {"mean": m, "sd": s, "hdi_3%": a, "hdi_97%": b}
            for i, (m, s, a, b) in enumerate(
                zip(mean.tolist(), sd.tolist(), lo.tolist(), hi.tolist(), strict=True)
            )
        }
        return {
            "num_labels": self.num_labels,
            "arviz_summary": table,
            "beta": self.beta,
            "converged": self.diagnostics["converged"],
        }

    def arviz_summary(self, n: int = 200, k: int = 8):
        """``arviz.summary`` of ``n`` draws of θ_1..θ_k (a DataFrame)."""
        th = self.sample(n)[:, :k]
        return import_arviz().summary(draws_to_arviz({"theta": th}), kind="stats")

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict:
        p = self.problem
        return {
            "pref": {k: getattr(p, k) for k in ("x0", "x1", "y", "rater", "pref_online", "pref_mask")},
            "beta": p.beta.clone(),
            "gen": self.gen.get_state(),
        }

    def load_state_dict(self, st: dict) -> None:
        p = self.problem
        for k, v in st["pref"].items():
            setattr(p, k, v)
        p.beta = st["beta"].to(p.beta.dtype)
        self.gen.set_state(st["gen"])
        if self.num_labels:
            self.update()


def _hdi(draws: torch.Tensor, prob: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per column, the shortest interval holding ``prob`` of the draws (ArviZ's HDI), ``draws (n, k)``."""
    x, _ = draws.sort(0)
    n = x.shape[0]
    w = max(1, min(n - 1, int(math.floor(prob * n))))
    widths = x[w:] - x[: n - w]
    i = widths.argmin(0)
    cols = torch.arange(x.shape[1], device=x.device)
    return x[i, cols], x[i + w, cols]


class CostPosterior:
    """Posterior over a linear cost c_κ(s, a) = ⟨κ, φ(s, a)⟩ from raters' safety judgements.

    Comparisons ("which segment is costlier", the safe-rlhf kind of cost preference) identify only cost
    *differences*; the constraint J_C ≤ d needs the cost's level too. So every queried segment also gets
    an absolute judgement, "unsafe" with probability sigmoid(β (C(σ) − b)), b = ``threshold`` the raters'
    per-segment tolerance. Both are the standard Bradley–Terry model on the augmented parameter (κ, 1): a
    comparison has x = (Φ(σ), 0), a safety label compares x0 = (Φ(σ), 0) with x1 = (0, b), and the last
    coordinate has prior mean 1 with a negligible variance (a known offset). The optimiser then sees an
    upper posterior quantile of the per-step cost (pessimism shrinks as the evidence grows).
    """

    def __init__(self, dim: int, rater_ids, beta, lam, threshold: float, *, prior_scale: float = 1.0, **kw):
        self.dim, self.threshold = int(dim), float(threshold)
        mean = torch.zeros(dim + 1, dtype=torch.float64, device="cpu")
        mean[-1] = 1.0
        cov = torch.diag(
            torch.cat([torch.full((dim,), prior_scale**2, device="cpu"), torch.tensor([1e-8], device="cpu")])
        ).double()
        self.inner = LinearRewardPosterior(
            dim + 1, rater_ids, beta=beta, lam=lam, competence="known", prior_mean=mean, prior_cov=cov, **kw
        )

    def _aug(self, phi) -> torch.Tensor:
        phi = torch.as_tensor(np.asarray(phi), dtype=torch.float64, device="cpu")
        return torch.cat([phi, torch.zeros(*phi.shape[:-1], 1, dtype=torch.float64, device=phi.device)], -1)

    @property
    def beta(self) -> list[float]:
        return self.inner.beta

    @property
    def num_labels(self) -> int:
        return self.inner.num_labels

    def add_comparisons(self, s0, s1, y, rater) -> None:
        """``y = 0``: ``s0`` judged the costlier."""
        self.inner.add(self._aug(s0.phi), self._aug(s1.phi), y, rater)

    def add_safety(self, segs, unsafe, rater) -> None:
        """``unsafe[k] = 1``: segment k judged unsafe (its cost above ``threshold``)."""
        x1 = torch.zeros(len(segs), self.dim + 1, dtype=torch.float64, device="cpu")
        x1[:, -1] = self.threshold
        self.inner.add(self._aug(segs.phi), x1, 1 - np.asarray(unsafe), rater)

    def update(self) -> None:
        self.inner.update()

    def mean(self) -> torch.Tensor:
        return self.inner.mean()[: self.dim]

    def quantile_cost(self, phi: torch.Tensor, quantile: float) -> torch.Tensor:
        return self.inner.quantile_reward(self._aug(phi), quantile)

    def to_arviz(self, n: int = 1000, seed: int = 0):
        """``arviz.InferenceData`` of ``n`` draws of the cost weights κ (variable ``kappa``, 4 chains)."""
        kappa = self.inner.sample(num_draws(n), torch.Generator().manual_seed(int(seed)))[:, : self.dim]
        return draws_to_arviz(
            {"kappa": kappa}, dims={"kappa": ["kappa_dim"]}, attrs={"engine": self.inner.engine}
        )

    def returns(self, segs, n: int) -> torch.Tensor:
        return (
            self.inner.sample(n)[:, : self.dim]
            @ torch.as_tensor(segs.phi, dtype=torch.float64, device=self.inner.device).T
        )

    def state_dict(self) -> dict:
        return self.inner.state_dict()

    def load_state_dict(self, st: dict) -> None:
        self.inner.load_state_dict(st)

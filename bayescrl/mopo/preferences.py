r"""Per-action preference probabilities for tabular MOPO: empirical win rates or a Bayesian Bradley–Terry fit.

MOPO's problem Eq. `main-obj` needs, per objective ``k`` and action ``y``, the expected preference
``p_k(y) = E_{y'~pi_ref}[P_k(y > y')]`` (the thesis' ``p_k(y > mu)``, with ``mu = pi_ref`` as in the tabular
experiments). A record always compares two *different* actions, so both estimators below target
``p_k(y) = E_{y'~pi_ref}[P_k(y > y') | y' != y]`` (the same quantity with the tie term dropped; for
``A`` actions and a uniform reference the two differ by the affine map ``x -> 1/(2A) + (1 - 1/A) x``).

* ``preference_model: empirical`` -- :func:`empirical_scores`. ``estimator: win_rate`` (default): the
  fraction of the (augmented) records with ``y_i = y`` that prefer ``y``; in ``[0, 1]`` like the thesis'
  ``p(y > mu)`` inside Eq. `dual`. ``estimator: score``: the importance-weighted score
  ``sum_{i: y_i = y} I_k / (N pi_ref(y))`` of Eq. `empirical-cop` (the previous default; it exceeds 1 when an
  action is over-represented relative to ``pi_ref``). The two agree when ``pi_ref`` is the data's
  frequency of ``y`` (the default ``reference: data``). An action without records gets 0 (data set D3).
* ``preference_model: bradley-terry`` -- :func:`fit_bradley_terry`. Per objective ``k``, utilities
  ``u_k in R^A`` over actions with the rater-competence model of :mod:`bayescrl.models` (Eq.
  `rater_preference_dist`: one-hot items, ``theta = u_k``, rater ``i``'s belief ``vartheta_i ~ N(u_k,
  I/lam_i^2)``, ``P(y_i > y'_i) = sigmoid(beta_i (vartheta_i[y] - vartheta_i[y']))``), prior
  ``u_k ~ N(0, s^2 I)``, fitted by any :mod:`bayescrl.inference` engine. The *true* preference probability is
  ``P_k(y > y') = sigmoid(u_k(y) - u_k(y'))``: a rater with ``beta = 1`` and large ``lam`` labels with it,
  so ``beta`` is competence relative to that scale (one rater with a known ``beta``, or a single rater,
  fixes it). Posterior draws of ``u_k`` give draws of ``p_k(y)``; MOPO uses their mean and, with
  ``lower_quantile``, a lower posterior quantile of the constrained objectives.

Competence (``raters: [{id, beta?, lam?}]``): a rater with ``beta`` has known competence; without it,
``competence: infer`` (default) estimates ``beta_i`` by maximising its marginal likelihood (the evidence of
:func:`bayescrl.raters.competence.log_marginal_likelihood`, behind ``beta_mle``: the thesis' plug-in recipe
of chapter `warmPref-PS`) on rater ``i``'s labels with ``u_k`` integrated out under its posterior given the
known raters' labels (so the known raters set the scale), optionally times a log-normal prior ``log beta ~
N(0, beta_prior_sd^2)`` (default ``.inf``: none, the plain marginal maximum likelihood), then refits ``u_k``
with the plug-in ``beta``; ``competence: joint`` puts a log-normal prior (sd ``beta_prior_sd``, 1.5 when
infinite) on the unknown ``beta_i`` inside the Pyro model and lets the engine (svi, nuts, or the generic
laplace / bootstrap) infer it jointly with ``u_k``. ``lam`` defaults to 1000 (each rater's belief is the
truth up to label noise).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from bayescrl.inference.arviz import draws_to_arviz
from bayescrl.inference.engines import ENGINES, fit
from bayescrl.inference.hierarchical import RaterPrior, fit_rater_pool
from bayescrl.inference.laplace import laplace
from bayescrl.inference.options import check_engine_options
from bayescrl.inference.rater_report import check_choice, table_rows
from bayescrl.models.linear import BTLinearProblem
from bayescrl.models.pyro_models import CompetencePrior
from bayescrl.models.spec import SpecModel
from bayescrl.raters import Rater
from bayescrl.raters import parse_raters as parse_rater_list
from bayescrl.raters.competence import log_marginal_likelihood
from bayescrl.utils import ConfigError, DataError
from bayescrl.utils.io import check_keys

if TYPE_CHECKING:  # the inference engines load Pyro
    from bayescrl.inference.hierarchical import RaterPoolPosterior

PREFERENCE_MODELS = ("empirical", "bradley-terry")
ESTIMATORS = ("win_rate", "score")
COMPETENCE = ("infer", "infer-beta", "joint")
DEFAULT_LAM = 1000.0
#: keys of the ``bradley_terry`` config section
BT_KEYS = (
    "engine",
    "engine_options",
    "num_samples",
    "prior_scale",
    "competence",
    "beta_prior_sd",
    "lower_quantile",
    "seed",
)


@dataclass
class PreferenceEstimate:
    """Per-objective, per-action preference probabilities ``p_k(a)``: ``mean [K, A]``; with a posterior also
    ``draws [S, K, A]``; ``beta`` the competence used per rater and objective; ``diagnostics`` per
    objective."""

    mean: Tensor
    draws: Tensor | None = None
    beta: dict[str, list[float]] = field(default_factory=dict)  # rater -> beta per objective
    diagnostics: dict[str, Any] = field(default_factory=dict)
    pools: list[RaterPoolPosterior] = field(default_factory=list)  # competence: infer, one per objective

    def quantile(self, q: float) -> Tensor:
        """Posterior ``q``-quantile of ``p_k(a)`` ``[K, A]`` (the mean when there are no draws)."""
        if self.draws is None:
            return self.mean
        return torch.quantile(self.draws, q, dim=0)

    def to_json(self, actions: Sequence[str], objectives: Sequence[str] | None = None) -> dict:
        """``{objective: {action: {mean, q05, q95}}}`` (the 90 % equal-tailed posterior interval)."""
        lo, hi = self.quantile(0.05), self.quantile(0.95)
        names = objectives or [str(k) for k in range(self.mean.shape[0])]
        return {
            names[k]: {
                a: {"mean": float(self.mean[k, j]), "q05": float(lo[k, j]), "q95": float(hi[k, j])}
                for j, a in enumerate(actions)
            }
            for k in range(self.mean.shape[0])
        }


# ------------------------------------------------------------------------------------------ parsing


def parse_raters(raters: Any) -> list[Rater]:
    """Validate ``raters: [{id, beta?, lam?}]`` with the raters' schema (:func:`bayescrl.raters.parse_raters`;
    ``lam`` defaults to 1000, a missing ``beta`` is unknown); at least one known ``beta`` when several raters
    are listed and any is unknown (a single rater without ``beta`` gets ``beta = 1``: it sets the scale)."""
    if raters is None:
        return []
    out = parse_rater_list(
        raters,
        "raters",
        keys=("id", "beta", "lam"),
        defaults={"lam": DEFAULT_LAM},
        require_id=True,
        unknown_beta=True,
        priors=False,
    )
    if len(out) == 1 and out[0].beta is None:
        out[0] = replace(out[0], beta=1.0)
    if any(r.beta is None for r in out) and all(r.beta is None for r in out):
        raise ConfigError(
            "raters",
            [r.id for r in out],
            "give at least one rater's beta: with several raters of unknown competence the scale of the "
            "utilities is not identified",
        )
    return out


def parse_bt_options(opts: Any) -> dict[str, Any]:
    """Defaults and checks of the ``bradley_terry`` section (all before any fit)."""
    opts = dict(opts or {})
    check_keys(opts, BT_KEYS, "bradley_terry")
    out = {
        "engine": opts.get("engine", "laplace"),
        "engine_options": None,  # checked below, once the engine is known
        "num_samples": opts.get("num_samples", 2000),
        "prior_scale": opts.get("prior_scale", 1.5),
        "competence": opts.get("competence", "infer"),
        "beta_prior_sd": opts.get("beta_prior_sd", math.inf),
        "lower_quantile": opts.get("lower_quantile"),
        "seed": opts.get("seed", 0),
    }
    if out["engine"] not in ENGINES or out["engine"] == "exact":
        raise ConfigError(
            "bradley_terry.engine",
            out["engine"],
            "must be one of laplace, bootstrap, svi, nuts (the Bradley-Terry likelihood is not conjugate)",
        )
    out["engine_options"] = check_engine_options(  # unknown keys and bad values, by name, before any fit
        out["engine"], opts.get("engine_options") or {}, "bradley_terry.engine_options"
    )
    n = out["num_samples"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 10:
        raise ConfigError("bradley_terry.num_samples", n, "must be an integer >= 10")
    s = out["prior_scale"]
    if isinstance(s, bool) or not isinstance(s, (int, float)) or not 0 < s < math.inf:
        raise ConfigError("bradley_terry.prior_scale", s, "must be a finite number > 0")
    check_choice(out["competence"], "bradley_terry.competence", COMPETENCE)
    if out["competence"] == "infer" and out["engine"] == "bootstrap":
        raise ConfigError(
            "bradley_terry.engine",
            "bootstrap",
            "competence: infer (the rater pool) runs laplace, svi or nuts",
        )
    sd = out["beta_prior_sd"]
    if isinstance(sd, bool) or not isinstance(sd, (int, float)) or not sd > 0:
        raise ConfigError("bradley_terry.beta_prior_sd", sd, "must be a number > 0 (.inf: no prior)")
    q = out["lower_quantile"]
    if q is not None and (isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 < q < 0.5):
        raise ConfigError("bradley_terry.lower_quantile", q, "must be in (0, 0.5) or null")
    if isinstance(out["seed"], bool) or not isinstance(out["seed"], int) or out["seed"] < 0:
        raise ConfigError("bradley_terry.seed", out["seed"], "must be an integer >= 0")
    return out


# ---------------------------------------------------------------------------------------- estimators


def action_frequency(y: Tensor, n_actions: int) -> Tensor:
    """Empirical frequency of each action among the records' ``y`` ``[A]`` (float64)."""
    counts = torch.zeros(n_actions, dtype=torch.float64, device=y.device)
    counts.index_add_(0, y, torch.ones_like(y, dtype=torch.float64))
    return counts / counts.sum()


def empirical_scores(
    y: Tensor, p: Tensor, q: Tensor, ref: Tensor, estimator: str = "win_rate"
) -> tuple[Tensor, Tensor]:
    """Per-action ``(p_hat[A], q_hat[A, C])`` from (augmented) records ``y[N]``, ``p[N]``, ``q[N, C]``.

    ``win_rate``: ``sum_{i: y_i = a} I / #{i: y_i = a}`` (0 for an action without records); ``score``:
    ``sum_{i: y_i = a} I / (N pi_ref(a))`` (Eq. `empirical-cop`'s per-action form; the previous default,
    kept bit-for-bit).
    """
    if estimator not in ESTIMATORS:
        raise ConfigError("estimator", estimator, f"must be one of {list(ESTIMATORS)}")
    n_act = ref.shape[0]
    sp = torch.zeros(n_act, dtype=p.dtype, device=p.device).index_add_(0, y, p)
    sq = torch.zeros(n_act, q.shape[-1], dtype=q.dtype, device=q.device).index_add_(0, y, q)
    if estimator == "score":
        denom = y.shape[0] * ref
    else:
        denom = torch.zeros(n_act, dtype=p.dtype, device=p.device).index_add_(0, y, torch.ones_like(p))
    safe = torch.where(denom > 0, denom, torch.ones_like(denom))
    return sp / safe, sq / safe[:, None]


def pairwise_to_action(u: Tensor, ref: Tensor) -> Tensor:
    """``p(a) = sum_{a' != a} ref(a') sigmoid(u_a - u_a') / (1 - ref(a))`` for utilities ``u[..., A]``."""
    diff = torch.sigmoid(u.unsqueeze(-1) - u.unsqueeze(-2))  # [..., A, A]: P(a > a')
    eye = torch.eye(u.shape[-1], dtype=torch.bool, device=u.device)
    w = ref.to(u).expand_as(diff).masked_fill(eye, 0.0)
    return (diff * w).sum(-1) / w.sum(-1).clamp_min(torch.finfo(u.dtype).tiny)


def _problem(x1, x0, labels, rater, betas, lams, prior_sd, ids):
    """Rater-competence BT problem on features ``x1`` (the first item, preferred when the label is 1) and
    ``x0`` ``[N, d]``, prior ``N(0, prior_sd^2 I)``."""
    d = x1.shape[-1]
    return BTLinearProblem.from_data(
        torch.zeros(d, dtype=torch.float64, device="cpu"),
        prior_sd**2 * torch.eye(d, dtype=torch.float64, device="cpu"),
        betas,
        lams,
        x0=x0,  # Y = 1: x1 preferred (Eq. `rater_preference_dist`)
        x1=x1,
        y=labels,
        rater=rater,
        rater_ids=ids,
    )


def _infer_betas(
    x1: Tensor,
    x0: Tensor,
    labels: Tensor,
    rater: Tensor,
    raters: list[Rater],
    prior_sd: float,
    beta_prior_sd: float,
) -> list[float]:
    """Plug-in ``beta_i`` of the unknown raters (module docstring): the mode over a log grid of
    ``log p(D_i | beta, D_known) + log N(log beta; 0, beta_prior_sd^2)``, the evidence of rater ``i``'s labels
    with ``u`` integrated out under its Laplace posterior given the known raters' labels
    (:func:`bayescrl.raters.competence.log_marginal_likelihood`, the marginal likelihood behind
    ``beta_mle``). The optional log-normal prior (``beta_prior_sd`` finite) keeps the estimate off the grid's
    edge when the known raters' few labels leave the scale of ``u`` uncertain (D3 with 4 expert labels: the
    plain maximum is at 0.006 for a rater with beta = 0.15); with 10 expert labels per pair the plain
    maximum was the better plug-in in the benchmark (``benchmarks/mopo_bayes.py``), hence the default."""
    known = [i for i, r in enumerate(raters) if r.beta is not None]
    mask = torch.isin(rater, torch.tensor(known, dtype=rater.dtype, device="cpu"))
    prob = _problem(
        x1[mask],
        x0[mask],
        labels[mask],
        torch.searchsorted(torch.tensor(known, device="cpu"), rater[mask]),
        [raters[i].beta for i in known],
        [raters[i].lam for i in known],
        prior_sd,
        tuple(raters[i].id for i in known),
    )
    if int(mask.sum()):
        lap = laplace(prob)
        mu, cov = lap.theta_mean.double(), lap.theta_cov.double()
    else:
        mu, cov = prob.mu0, prob.cov0
    coarse = torch.logspace(
        -2, 2, 17, dtype=torch.float64, device="cpu"
    )  # factor 1.78, then a factor-1.12 refinement
    fine = torch.logspace(-0.25, 0.25, 11, dtype=torch.float64, device="cpu")

    def mode(args, grid: Tensor) -> Tensor:
        lp = log_marginal_likelihood(*args[:3], grid, *args[3:])[0]
        if math.isfinite(beta_prior_sd):
            lp = lp - 0.5 * (torch.log(grid) / beta_prior_sd) ** 2
        return grid[lp.argmax()]

    out = []
    for i, r in enumerate(raters):
        if r.beta is not None:
            out.append(r.beta)
            continue
        rows = rater == i
        if not int(rows.sum()):
            out.append(1.0)  # no labels: the value is never used
            continue
        args = (x0[rows][None], x1[rows][None], labels[rows][None], mu, cov, r.lam)
        b0 = mode(args, coarse)
        out.append(float(mode(args, (b0 * fine).clamp(1e-2, 1e2))))
    return out


@dataclass
class RewardPosterior:
    """Posterior draws of the linear Bradley–Terry weights, ``theta [S, K, d]`` (one fit per objective), the
    competence used per rater and objective (``beta``: rater -> list over objectives) and each fit's
    diagnostics (objective index -> dict)."""

    theta: Tensor
    beta: dict[str, list[float]]
    diagnostics: dict[str, Any]
    pools: list[RaterPoolPosterior] = field(default_factory=list)  # competence: infer, one per objective

    def to_arviz(self):
        """``arviz.InferenceData`` of the draws ``theta`` (dims ``(chain, draw, objective, theta_dim)``; the
        ``S`` independent draws split into 4 chains, :mod:`bayescrl.inference.arviz`)."""
        return draws_to_arviz({"theta": self.theta}, dims={"theta": ["objective", "theta_dim"]})


POOL_ENGINE = {"laplace": "laplace-eb", "svi": "svi", "nuts": "nuts"}


def _fit_pool_rewards(
    x1: Tensor,
    x0: Tensor,
    ind: Tensor,
    rater: Tensor,
    raters: list[Rater],
    prior_sd: float,
    engine: str,
    engine_options: Mapping[str, Any] | None,
    num_samples: int,
    beta_prior_sd: float,
    seed: int,
) -> RewardPosterior:
    """``competence: infer``: the hierarchical rater model per objective
    (:func:`~bayescrl.inference.hierarchical.fit_rater_pool`: ``theta = u_k``, every rater's belief
    ``vartheta_i ~ N(u_k, I/lam_i^2)``, ``beta_i`` and ``lam_i`` jointly; Eq. `rater_preference_dist`). A
    rater with a given ``beta`` anchors the pool (its ``lam`` as given, default 1000); the others' ``beta``
    and ``lam`` are inferred under ``log beta ~ N(0, s^2)`` (s = ``beta_prior_sd``, 1.5 when infinite: beta
    = 1 labels with the true preference probability) and ``log lam_i ~ N(mu, 1.5^2)`` with the pool's level
    ``mu ~ N(0, 10^2)`` (:class:`~bayescrl.inference.hierarchical.RaterPrior`'s default). Engine
    ``laplace`` runs the fast ``laplace-eb``; ``svi`` / ``nuts`` run Pyro on the same model."""
    if engine not in POOL_ENGINE:
        raise ConfigError("bradley_terry.engine", engine, "competence: infer runs laplace, svi or nuts")
    d, k_n = x1.shape[-1], ind.shape[-1]
    pool_raters = [
        {"id": r.id} if r.beta is None else {"id": r.id, "beta": float(r.beta), "lam": float(r.lam)}
        for r in raters
    ]
    prior = RaterPrior(beta_loc=0.0, beta_scale=beta_prior_sd if math.isfinite(beta_prior_sd) else 1.5)
    draws, diags, pools = [], {}, []
    for k in range(k_n):
        post = fit_rater_pool(
            x0,
            x1,
            ind[:, k].double().cpu(),
            rater,
            pool_raters,
            prior,
            POOL_ENGINE[engine],
            mu0=torch.zeros(d, dtype=torch.float64, device="cpu"),
            cov0=prior_sd**2 * torch.eye(d, dtype=torch.float64, device="cpu"),
            num_draws=num_samples,
            seed=seed + k,
            **dict(engine_options or {}),
        )
        draws.append(post.flat("theta")[:num_samples].double())
        pools.append(post)
        diags[str(k)] = {
            key: val
            for key, val in post.diagnostics.items()
            if isinstance(val, (bool, int, float, str)) or key == "warnings"
        }
        diags[str(k)]["raters"] = table_rows(post, objective=k) if k_n > 1 else table_rows(post)
    beta = {r.id: [float(p.flat("beta")[:, i].mean()) for p in pools] for i, r in enumerate(raters)}
    return RewardPosterior(torch.stack(draws, 1), beta, diags, pools)


def fit_bt_rewards(
    x1: Tensor,
    x0: Tensor,
    ind: Tensor,
    rater: Tensor,
    raters: list[Rater],
    *,
    prior_sd: float = 1.5,
    engine: str = "laplace",
    engine_options: Mapping[str, Any] | None = None,
    num_samples: int = 2000,
    competence: str = "infer",
    beta_prior_sd: float = math.inf,
    seed: int = 0,
) -> RewardPosterior:
    """Posterior of linear rewards ``r_k(z) = theta_k . z`` per objective from compared items' features
    ``x1, x0 [N, d]`` (``ind [N, K]`` = 1: the ``x1`` item preferred under objective ``k``), rater indices
    ``rater [N]`` into ``raters`` and the prior ``theta_k ~ N(0, prior_sd^2 I)``.

    One fit of the rater-competence Bradley–Terry model (:mod:`bayescrl.models`, Eq.
    `rater_preference_dist`) per objective with :func:`bayescrl.inference.fit`; competence as in the module
    docstring (``infer``: plug-in marginal-likelihood ``beta``; ``joint``: log-normal prior inside the
    model). One-hot features give the tabular utilities (:func:`fit_bradley_terry`); the language-model path
    uses features of prompt-response pairs (:mod:`bayescrl.mopo.lm.reward_head`). Raises
    :class:`DataError` for a rater index without a rater.
    """
    if not raters:
        raters = [Rater("r0", 1.0, DEFAULT_LAM)]
    x1, x0, rater = x1.double().cpu(), x0.double().cpu(), rater.cpu().long()
    d, k_n = x1.shape[-1], ind.shape[-1]
    if rater.numel() and int(rater.max()) >= len(raters):
        raise DataError("data.rater", int(rater.max()), "rater index without a rater in 'raters'")
    ids = tuple(r.id for r in raters)
    draws, diags, betas_used = [], {}, {}
    joint_sd = beta_prior_sd if math.isfinite(beta_prior_sd) else 1.5  # a proper prior for the joint fit
    if competence == "infer":
        return _fit_pool_rewards(
            x1, x0, ind, rater, raters, prior_sd, engine, engine_options, num_samples, beta_prior_sd, seed
        )
    for k in range(k_n):
        labels = ind[:, k].double().cpu()
        if competence == "infer-beta":
            betas = _infer_betas(x1, x0, labels, rater, raters, prior_sd, beta_prior_sd)
            priors = {}
        else:
            betas = [1.0 if r.beta is None else r.beta for r in raters]
            priors = {
                i: CompetencePrior("lognormal", {"loc": 0.0, "scale": joint_sd})
                for i, r in enumerate(raters)
                if r.beta is None
            }
        prob = _problem(x1, x0, labels, rater, betas, [r.lam for r in raters], prior_sd, ids)
        model = SpecModel(problem=prob, rater_ids=ids, beta_priors=priors)
        post = fit(model, engine=engine, seed=seed + k, **dict(engine_options or {}))
        s = post.sample(num_samples, seed=seed + k)
        draws.append(s["theta"].double().reshape(num_samples, d))
        beta_k = {
            r.id: (float(s[f"beta_{r.id}"].double().median()) if f"beta_{r.id}" in s else betas[i])
            for i, r in enumerate(raters)
        }
        betas_used[str(k)] = beta_k
        diags[str(k)] = {
            key: val
            for key, val in post.diagnostics.items()
            if isinstance(val, (bool, int, float, str)) or key == "warnings"
        }
        diags[str(k)]["beta"] = beta_k
    return RewardPosterior(
        torch.stack(draws, 1),
        {r.id: [betas_used[str(k)][r.id] for k in range(k_n)] for r in raters},
        diags,
    )


def fit_bradley_terry(
    y: Tensor,
    y_prime: Tensor,
    ind: Tensor,
    rater: Tensor,
    raters: list[Rater],
    ref: Tensor,
    *,
    engine: str = "laplace",
    engine_options: Mapping[str, Any] | None = None,
    num_samples: int = 2000,
    prior_scale: float = 1.5,
    competence: str = "infer",
    beta_prior_sd: float = math.inf,
    seed: int = 0,
    **_: Any,
) -> PreferenceEstimate:
    """Posterior of ``p_k(a)`` per objective from raw (not augmented) records ``y, y_prime [N]``,
    ``ind [N, K]`` (1: ``y`` preferred) and rater indices ``rater [N]`` into ``raters``.

    :func:`fit_bt_rewards` on one-hot features (``theta = u_k``, prior sd ``prior_scale``);
    ``num_samples`` posterior draws of ``u_k`` become draws of ``p_k`` (:func:`pairwise_to_action`). Raises
    :class:`DataError` for a rater index without a rater.
    """
    if not raters:
        raters = [Rater("r0", 1.0, DEFAULT_LAM)]
    n_act = ref.shape[0]
    y, y_prime, rater = y.cpu().long(), y_prime.cpu().long(), rater.cpu().long()
    if int(rater.max()) >= len(raters):
        raise DataError("data.rater", int(rater.max()), "rater index without a rater in 'raters'")
    eye = torch.eye(n_act, dtype=torch.float64, device="cpu")
    post = fit_bt_rewards(
        eye[y],
        eye[y_prime],
        ind,
        rater,
        raters,
        prior_sd=prior_scale,
        engine=engine,
        engine_options=engine_options,
        num_samples=num_samples,
        competence=competence,
        beta_prior_sd=beta_prior_sd,
        seed=seed,
    )
    d = pairwise_to_action(post.theta.transpose(0, 1), ref.double().cpu()).transpose(0, 1)  # [S, K, A]
    return PreferenceEstimate(d.mean(0), d, beta=post.beta, diagnostics=post.diagnostics, pools=post.pools)

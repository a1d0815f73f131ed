"""Estimating a rater's competence from its labels (one copy for every family), batched over seeds.

The thesis estimates β separately and plugs it in (Section `sec:chapter3_empirical`, "Unknown Competence";
appendix `Estimating Rater Competence in Practice` of chapter `PSPL`):

* :func:`beta_mle` — marginal maximum likelihood. With ``ϑ`` also free the likelihood only depends on
  ``βϑ`` (β is not identified), so we maximise the *marginal* likelihood
  ``p(D | β) = E_{ϑ ~ N(μ0, Σ0 + I/λ²)} Π_n σ(β s_n ⟨x0_n − x1_n, ϑ⟩)`` (``s_n = +1`` if ``Y_n = 0`` else
  ``−1``; ``θ`` integrated out exactly since ``ϑ | θ ~ N(θ, I/λ²)``) over a log-spaced grid of ``β``, the
  integral over ``ϑ`` by a Laplace approximation (batched Newton, :func:`log_marginal_likelihood`).
* :func:`beta_mle_given_theta` — maximum likelihood of β with a reference reward vector fixed
  (``β̂ = argmax_β Σ_n log σ(β m_n)``, margins ``m_n = s_n ⟨x0_n − x1_n, θ_ref⟩``), by bisection on the
  derivative (the log-likelihood is concave in β); PSPL's estimate (``θ_ref`` from the data, or the true θ
  in the labelled oracle ablation).
* :func:`beta_entropy` — the entropy rule ``β̂ = c / H(ζ)``, ``ζ`` the empirical distribution of the
  *preferred* items (arms, or state–action visits of the preferred trajectories): a deliberate rater keeps
  picking the same few good items, so low entropy means high β. The thesis leaves ``c`` free.
* :func:`competence_model` / :func:`beta_bayes` — β as a ``LogNormal`` prior inside a Pyro model, fitted
  by SVI (posterior median); :func:`beta_posterior_mean` — the posterior mean of β under any
  :class:`~bayescrl.raters.rater.CompetencePrior`, by quadrature of the marginal likelihood on the grid.

λ is not estimated: the thesis argues it is not identifiable from one data set and shows robustness.
"""

from __future__ import annotations

import math

import pyro
import pyro.distributions as dist
import torch
import torch.nn.functional as F
from pyro.infer import SVI, Trace_ELBO
from pyro.infer.autoguide import AutoNormal
from pyro.optim import Adam

from bayescrl.raters.likelihood import check_prefs, signed_diff
from bayescrl.raters.rater import CompetencePrior
from bayescrl.utils.checks import number
from bayescrl.utils.errors import ConfigError, DataError


def _need_records(n: int) -> None:
    """Refuse an empty data set (β cannot be estimated from no comparisons)."""
    if n == 0:
        raise ConfigError("offline.N", 0, "cannot estimate beta from an empty offline dataset")


def _check_data(
    x0: torch.Tensor, x1: torch.Tensor, y: torch.Tensor, lam: float, *, empty_ok: bool = False
) -> None:
    """The data of every β estimator (the public functions check them once, then call the unchecked
    internals): ``x0, x1 [S, N, d]``, ``y [S, N]`` in {0, 1}, finite (:func:`check_prefs`), ``N > 0`` unless
    ``empty_ok``, ``lam > 0`` (``inf``: the rater knows θ)."""
    check_prefs(x0, x1, y, ("S", "N", "d"))
    if not empty_ok:
        _need_records(x0.shape[1])
    number(lam, "lam", 0.0, strict=True, allow_inf=True)


def log_marginal_likelihood(
    x0: torch.Tensor,
    x1: torch.Tensor,
    y: torch.Tensor,
    betas: torch.Tensor,
    mu0: torch.Tensor,
    cov0: torch.Tensor,
    lam: float,
    method: str = "laplace",
    num_mc: int = 512,
    generator: torch.Generator | None = None,
    newton_iters: int = 30,
    *,
    check: bool = True,
) -> torch.Tensor:
    """``log p(D0 | β)`` ``[S, G]`` for every seed and every ``β`` in ``betas [G]``.

    ``method="laplace"`` (default): Laplace approximation around the MAP of ``ϑ`` for each (seed, β),
    found by a batched damped Newton solve (step halving) of the ``[S·G]`` Bayesian logistic regressions —
    accurate for large ``N`` where the likelihood is peaked. ``method="mc"``: plain Monte Carlo over
    ``num_mc`` prior draws of ``ϑ`` (unbiased in ``p``, but degenerate for large ``N``; used to cross-check
    in the tests). ``check=False`` skips the data checks (:func:`_check_data`; callers that made them)."""
    if check:
        _check_data(x0, x1, y, lam, empty_ok=True)
    S, N, d = x0.shape
    cov = cov0 + torch.eye(d, dtype=cov0.dtype, device=cov0.device) / lam**2
    z = signed_diff(x0, x1, y)  # [S,N,d]
    if method == "mc":
        return _mc_evidence(z, betas, mu0, cov, num_mc, generator, x0.dtype, x0.device)
    if method != "laplace":
        raise ConfigError("method", method, "must be 'laplace' or 'mc'")
    prec = torch.cholesky_inverse(torch.linalg.cholesky(cov))
    bz = betas[None, :, None, None] * z[:, None]  # [S,G,N,d]
    v = _evidence_mode(bz, mu0, prec, newton_iters)
    return _laplace_at_mode(v, bz, mu0, cov, prec)


def _mc_evidence(
    z: torch.Tensor,
    betas: torch.Tensor,
    mu0: torch.Tensor,
    cov: torch.Tensor,
    num_mc: int,
    generator: torch.Generator | None,
    dtype: torch.dtype,
    device: torch.device,
) -> torch.Tensor:
    """``log (1/M Σ_m Π_n σ(β ⟨z_n, ϑ_m⟩))`` ``[S, G]`` over M prior draws ``ϑ_m ~ N(μ0, Σ0 + I/λ²)``."""
    d = z.shape[-1]
    eps = torch.randn(num_mc, d, generator=generator, dtype=dtype).to(device)
    vt = mu0 + eps @ torch.linalg.cholesky(cov).T  # [M, d]
    margin = torch.einsum("snd,md->smn", z, vt)  # [S, M, N]
    ll = F.logsigmoid(betas[None, :, None, None] * margin[:, None]).sum(-1)  # [S,G,M]
    return torch.logsumexp(ll, dim=-1) - math.log(num_mc)


def _log_joint(v: torch.Tensor, bz: torch.Tensor, mu0: torch.Tensor, prec: torch.Tensor) -> torch.Tensor:
    """Log-likelihood + log-prior of ``ϑ = v [S,G,d]`` up to a constant ``[S,G]``."""
    dv = v - mu0
    return F.logsigmoid((bz * v[:, :, None]).sum(-1)).sum(-1) - 0.5 * ((dv @ prec) * dv).sum(-1)


def _neg_hessian(s: torch.Tensor, bz: torch.Tensor, prec: torch.Tensor) -> torch.Tensor:
    """Minus the log joint's Hessian ``Σ_n s_n(1 − s_n) bz_n bz_nᵀ + Σ⁻¹`` ``[S,G,d,d]`` (``s = σ(−m)``)."""
    return torch.einsum("sgn,sgnd,sgne->sgde", s * (1 - s), bz, bz) + prec


def _evidence_mode(
    bz: torch.Tensor, mu0: torch.Tensor, prec: torch.Tensor, newton_iters: int
) -> torch.Tensor:
    """The MAP of ``ϑ`` ``[S,G,d]`` by damped Newton from the prior mean (strictly concave log joint)."""
    S, G, _, d = bz.shape
    v = mu0.expand(S, G, d).clone()
    f = _log_joint(v, bz, mu0, prec)
    for _ in range(newton_iters):
        m = (bz * v[:, :, None]).sum(-1)
        s = torch.sigmoid(-m)  # d/dm logσ(m)
        grad = (s[..., None] * bz).sum(2) - (v - mu0) @ prec
        step = torch.linalg.solve(_neg_hessian(s, bz, prec), grad.unsqueeze(-1)).squeeze(-1)
        v, f = _halving_step(v, f, grad, step, bz, mu0, prec)
    return v


def _halving_step(
    v: torch.Tensor,
    f: torch.Tensor,
    grad: torch.Tensor,
    step: torch.Tensor,
    bz: torch.Tensor,
    mu0: torch.Tensor,
    prec: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Take ``v + t·step`` with ``t`` halved until the log joint ``f`` does not decrease; returns (v, f).

    Plain Newton on a logistic likelihood can fall into a 2-cycle far from the mode (it did for β ≳ 1 with
    μ0 ≠ 0, giving log p ≈ -1600).
    """
    t = torch.ones_like(f)
    tiny = (grad * step).sum(-1) <= 1e-12 * (1 + f.abs())  # converged: round-off decides, accept
    for _ in range(40):
        f_new = _log_joint(v + t[..., None] * step, bz, mu0, prec)
        ok = (f_new >= f) | tiny
        if bool(ok.all()):
            break
        t = torch.where(ok, t, 0.5 * t)
    return torch.where(ok[..., None], v + t[..., None] * step, v), torch.where(ok, f_new, f)


def _laplace_at_mode(
    v: torch.Tensor, bz: torch.Tensor, mu0: torch.Tensor, cov: torch.Tensor, prec: torch.Tensor
) -> torch.Tensor:
    """Laplace's ``log p(D) ≈ log p(D | v) + log p(v) + d/2 log 2π − ½ log det H`` ``[S,G]`` at the mode v."""
    d = v.shape[-1]
    m = (bz * v[:, :, None]).sum(-1)
    s = torch.sigmoid(-m)
    H = _neg_hessian(s, bz, prec)
    log_prior = torch.distributions.MultivariateNormal(mu0, cov).log_prob(v)
    return F.logsigmoid(m).sum(-1) + log_prior + 0.5 * d * math.log(2 * math.pi) - 0.5 * torch.logdet(H)


def beta_mle(
    x0: torch.Tensor,
    x1: torch.Tensor,
    y: torch.Tensor,
    mu0: torch.Tensor,
    cov0: torch.Tensor,
    lam: float,
    grid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Marginal maximum-likelihood ``β̂ [S]`` over ``grid`` (default 121 values, log-spaced in [1e-2, 1e3]),
    with the Laplace evidence of :func:`log_marginal_likelihood`."""
    _check_data(x0, x1, y, lam)
    if grid is None:
        grid = torch.logspace(-2, 3, 121, dtype=x0.dtype, device=x0.device)
    ll = log_marginal_likelihood(x0, x1, y, grid, mu0, cov0, lam, check=False)
    return grid[ll.argmax(dim=1)]


def beta_entropy(
    items: torch.Tensor,
    n_items: int,
    c: float = 25.0,
    beta_max: float | None = 1e3,
    *,
    field: str = "entropy_c",
) -> torch.Tensor:
    """Entropy rule ``β̂ = c / H`` ``[S]`` from the preferred items ``items [S, M]`` (indices in
    ``[0, n_items)``: the winning arms, or the state–action visits of the preferred trajectories; natural
    log).

    With ``beta_max`` a number, ``H = 0`` (every record prefers the same item) gives ``beta_max`` and the
    estimate is capped there (documented cap, the rule itself is undefined there); with ``beta_max=None``
    it is ``c / max(H, 1e-12)``. ``field`` names ``c`` in the error.
    """
    if not isinstance(items, torch.Tensor) or items.dim() != 2:
        raise DataError(
            "items", tuple(getattr(items, "shape", ())) or items, "expected a tensor of shape [S, M]"
        )
    _need_records(items.shape[1])
    out_of_range = (items < 0) | (items >= n_items)
    if bool(out_of_range.any()):
        raise DataError("items", int(items[out_of_range][0]), f"must be an item index in [0, {n_items})")
    if not c > 0:
        raise ConfigError(field, c, "must be > 0")
    counts = torch.zeros(items.shape[0], n_items, dtype=torch.float64, device=items.device)
    counts.scatter_add_(1, items, torch.ones_like(items, dtype=torch.float64))
    p = counts / counts.sum(1, keepdim=True)
    H = -(p * torch.log(p.clamp_min(1e-300))).sum(1)
    if beta_max is None:
        return c / H.clamp_min(1e-12)
    return torch.where(H > 0, c / H.clamp_min(1e-300), torch.full_like(H, beta_max)).clamp_max(beta_max)


def competence_model(
    x0: torch.Tensor,
    x1: torch.Tensor,
    y: torch.Tensor | None,
    mu0: torch.Tensor,
    cov0: torch.Tensor,
    lam: float,
    beta_loc: float = math.log(5.0),
    beta_scale: float = 1.5,
) -> None:
    """Pyro model of ``D0`` with unknown deliberateness, one independent problem per seed.

    ``β ~ LogNormal(beta_loc, beta_scale)``, ``ϑ ~ N(μ0, Σ0 + I/λ²)`` (``θ`` integrated out),
    ``Y_n ~ Bernoulli(1 - σ(β⟨Ā⁽⁰⁾ - Ā⁽¹⁾, ϑ⟩))`` (Eq. `rater_preference_dist`, ``Y = 0``: ``Ā⁽⁰⁾``
    preferred).
    """
    S, N, d = x0.shape
    cov = cov0 + torch.eye(d, dtype=cov0.dtype, device=cov0.device) / lam**2
    loc = torch.as_tensor(beta_loc, dtype=x0.dtype, device=x0.device)
    with pyro.plate("seeds", S, dim=-2):
        beta = pyro.sample("beta", dist.LogNormal(loc, beta_scale))  # [S,1]
        vt = pyro.sample("vartheta", dist.MultivariateNormal(mu0, cov))  # [S,1,d]
        logit_y1 = -beta * ((x0 - x1) * vt).sum(-1)  # [S,N]
        with pyro.plate("pairs", N, dim=-1):
            pyro.sample("y", dist.Bernoulli(logits=logit_y1), obs=None if y is None else y.to(x0.dtype))


def beta_bayes(
    x0: torch.Tensor,
    x1: torch.Tensor,
    y: torch.Tensor,
    mu0: torch.Tensor,
    cov0: torch.Tensor,
    lam: float,
    beta_loc: float = math.log(5.0),
    beta_scale: float = 1.5,
    steps: int = 800,
    lr: float = 0.05,
    seed: int = 0,
) -> torch.Tensor:
    """Posterior median of ``β`` ``[S]`` under :func:`competence_model`, by SVI (``AutoNormal`` guide).

    One SVI per seed, seed ``s`` with Pyro seed ``seed + s`` (Pyro draws from one global stream, so a
    batched fit would make seed ``s``'s estimate depend on how many seeds share it)."""
    _check_data(x0, x1, y, lam)
    out = []
    for s in range(x0.shape[0]):
        pyro.clear_param_store()
        pyro.set_rng_seed(seed + s)
        args = (x0[s : s + 1], x1[s : s + 1], y[s : s + 1], mu0, cov0, lam, beta_loc, beta_scale)
        guide = AutoNormal(competence_model, init_scale=0.05)
        elbo = Trace_ELBO(num_particles=4, vectorize_particles=True)
        svi = SVI(competence_model, guide, Adam({"lr": lr}), elbo)
        for _ in range(steps):
            svi.step(*args)
        out.append(guide.median(*args)["beta"].reshape(-1).detach())
    pyro.clear_param_store()
    return torch.cat(out)


def beta_mle_given_theta(
    margins: torch.Tensor, *, beta_max: float = 1e3, iters: int = 100
) -> tuple[torch.Tensor, torch.Tensor]:
    """MLE of β per seed from margins ``m [B, N] = s_n ⟨x0_n − x1_n, θ_ref⟩``: ``(beta [B], at_bound [B])``.

    The root of ``d/dβ Σ_n log σ(β m_n) = Σ_n m_n σ(−β m_n)`` (decreasing in β) by ``iters`` bisections on
    ``[0, beta_max]``. When every comparison agrees with ``θ_ref`` the MLE is +∞: ``beta_max`` is returned
    and flagged in ``at_bound`` (nothing is clipped silently)."""
    m = margins
    if not isinstance(m, torch.Tensor) or m.dim() != 2:
        raise DataError("margins", tuple(getattr(m, "shape", ())) or m, "expected a tensor of shape [B, N]")
    _need_records(m.shape[1])
    if not bool(torch.isfinite(m).all()):
        raise DataError("margins", float(m[~torch.isfinite(m)][0]), "must be finite")

    def grad(beta: torch.Tensor) -> torch.Tensor:  # d/dβ Σ log σ(β m) = Σ m σ(−β m), decreasing in β
        return (m * torch.sigmoid(-beta.unsqueeze(-1) * m)).sum(-1)

    B = m.shape[0]
    lo = torch.zeros(B, dtype=m.dtype, device=m.device)
    hi = torch.full((B,), float(beta_max), dtype=m.dtype, device=m.device)
    at_bound = grad(hi) > 0
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        up = grad(mid) > 0
        lo, hi = torch.where(up, mid, lo), torch.where(up, hi, mid)
    beta = torch.where(at_bound, torch.full_like(lo, float(beta_max)), 0.5 * (lo + hi))
    return beta, at_bound


def beta_posterior_mean(
    x0: torch.Tensor,
    x1: torch.Tensor,
    y: torch.Tensor,
    mu0: torch.Tensor,
    cov0: torch.Tensor,
    lam: float,
    prior: CompetencePrior,
    grid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Posterior mean ``E[β | D] [S]`` under ``prior``: ``p(β | D) ∝ p(D | β) p(β)`` with the Laplace
    evidence of :func:`log_marginal_likelihood` on ``grid`` (default 121 log-spaced values in
    [1e-2, 1e3]), integrated in ``log β`` by the trapezoidal rule."""
    _check_data(x0, x1, y, lam)
    if grid is None:
        grid = torch.logspace(-2, 3, 121, dtype=x0.dtype, device=x0.device)
    ll = log_marginal_likelihood(x0, x1, y, grid, mu0, cov0, lam, check=False)  # [S, G]
    log_post = ll + prior.distribution(grid).log_prob(grid) + torch.log(grid)  # density in log β
    w = torch.exp(log_post - log_post.max(dim=1, keepdim=True).values)
    u = torch.log(grid)
    return torch.trapezoid(w * grid, u, dim=1) / torch.trapezoid(w, u, dim=1)

"""Conjugate closed forms: Gaussian–linear (rank-one updates) and Dirichlet–categorical (counts).

* :class:`GaussianLinearPosterior` — θ ~ N(μ, Σ), R = ⟨x, θ⟩ + N(0, σ²). One observation updates the
  posterior by the Sherman–Morrison rank-one formula (Eq. `posterior_update_theta` when the action term
  is dropped, as in vanilla PS):  k = Σx / (σ² + xᵀΣx),  μ ← μ + k (R − xᵀμ),  Σ ← Σ − k xᵀΣ  — O(d²).
* :class:`DirichletPosterior` — η(s, a) ~ Dir(α0) with categorical next-state observations
  (Eq. `eta_informed_prior`): the posterior is Dir(α0 + counts).

Both carry an optional leading batch shape (independent agents / seeds) and work on any device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from bayescrl.inference.arviz import draws_to_arviz, num_draws
from bayescrl.utils.checks import positive_int
from bayescrl.utils.errors import DataError
from bayescrl.utils.seeding import draw, per_run

if TYPE_CHECKING:
    from bayescrl.utils.seeding import Streams


class GaussianLinearPosterior:
    """Batched Gaussian posterior of a linear-Gaussian model, updated in O(d²) per observation.

    ``mean [*batch, d]``, ``cov [*batch, d, d]``; ``noise_sd`` is σ (scalar or ``[*batch]``).
    """

    def __init__(self, mean, cov, noise_sd: float | torch.Tensor = 1.0, *, device=None, dtype=torch.float64):
        self.mean = torch.as_tensor(mean, dtype=dtype, device=device).clone()
        self.cov = torch.as_tensor(cov, dtype=dtype, device=device).clone()
        d = self.mean.shape[-1]
        if self.cov.shape[-2:] != (d, d):
            raise DataError("prior.cov", tuple(self.cov.shape), f"expected [..., {d}, {d}]")
        self.cov = self.cov.expand(*self.mean.shape[:-1], d, d).clone()
        if (torch.linalg.cholesky_ex(self.cov)[1] != 0).any():
            raise DataError("prior.cov", self.cov.tolist(), "must be positive definite")
        sd = torch.as_tensor(noise_sd, dtype=dtype, device=self.mean.device)
        if not bool(((sd > 0) & torch.isfinite(sd)).all()):  # NaN-safe: NaN > 0 is False
            raise DataError("noise_sd", sd.tolist(), "must be finite and > 0")
        self.noise_var = sd**2
        self.count = torch.zeros(self.mean.shape[:-1], dtype=torch.long, device=self.mean.device)

    @property
    def dim(self) -> int:
        return int(self.mean.shape[-1])

    def update(self, x, r, mask=None) -> GaussianLinearPosterior:
        """Condition on one observation per batch element: ``x [*batch, d]``, ``r [*batch]``.

        ``mask [*batch]`` (bool) selects which batch elements observe; the others are unchanged.
        """
        x = torch.as_tensor(x, dtype=self.mean.dtype, device=self.mean.device).expand_as(self.mean)
        r = torch.as_tensor(r, dtype=self.mean.dtype, device=self.mean.device).expand(self.mean.shape[:-1])
        if not torch.isfinite(r).all():
            raise DataError("rewards.r", r.tolist(), "must be finite")
        sx = (self.cov @ x.unsqueeze(-1)).squeeze(-1)  # Σx
        denom = self.noise_var + (x * sx).sum(-1)
        k = sx / denom.unsqueeze(-1)
        innov = r - (x * self.mean).sum(-1)
        dmean = k * innov.unsqueeze(-1)
        dcov = k.unsqueeze(-1) * sx.unsqueeze(-2)
        if mask is not None:
            m = torch.as_tensor(mask, device=self.mean.device).bool()
            dmean = dmean * m.unsqueeze(-1)
            dcov = dcov * m[..., None, None]
            self.count += m.long()
        else:
            self.count += 1
        self.mean = self.mean + dmean
        self.cov = self.cov - dcov
        self.cov = 0.5 * (self.cov + self.cov.mT)  # keep exactly symmetric
        return self

    def update_many(self, X, R) -> GaussianLinearPosterior:
        """Condition on ``X [*batch, T, d]``, ``R [*batch, T]`` at once (precision form, one Cholesky)."""
        X = torch.as_tensor(X, dtype=self.mean.dtype, device=self.mean.device)
        R = torch.as_tensor(R, dtype=self.mean.dtype, device=self.mean.device)
        self._check_data(X, R)
        prec0 = torch.cholesky_inverse(torch.linalg.cholesky(self.cov))
        nv = self.noise_var
        nv_mat, nv_vec = (nv[..., None, None], nv[..., None]) if nv.dim() else (nv, nv)
        prec = prec0 + X.mT @ X / nv_mat
        rhs = (prec0 @ self.mean.unsqueeze(-1)).squeeze(-1) + (X.mT @ R.unsqueeze(-1)).squeeze(-1) / nv_vec
        chol = torch.linalg.cholesky(prec)
        self.cov = torch.cholesky_inverse(chol)
        self.mean = torch.cholesky_solve(rhs.unsqueeze(-1), chol).squeeze(-1)
        self.count += X.shape[-2]
        return self

    def _check_data(self, X: torch.Tensor, R: torch.Tensor) -> None:
        """Refuse ``X``, ``R`` of :meth:`update_many` that are not ``[*batch, T, d]``, ``[*batch, T]`` (the
        batch shapes broadcasting to the posterior's: one design ``X [T, d]`` may serve every run) or not
        finite."""
        batch, d = tuple(self.mean.shape[:-1]), self.dim
        if X.dim() < 2 or X.shape[-1] != d:
            raise DataError("rewards.x", tuple(X.shape), f"expected shape [..., T, {d}] (dim = {d})")
        if R.dim() < 1 or R.shape[-1] != X.shape[-2]:
            raise DataError("rewards.r", tuple(R.shape), f"expected shape [..., T], T = {X.shape[-2]} (of x)")
        try:
            ok = torch.broadcast_shapes(X.shape[:-2], R.shape[:-1], batch) == batch
        except RuntimeError:
            ok = False
        if not ok:
            shapes = {"x": tuple(X.shape), "r": tuple(R.shape)}
            raise DataError("rewards", shapes, f"batch shapes must broadcast to {list(batch)}")
        if not bool(torch.isfinite(X).all() & torch.isfinite(R).all()):
            name, bad = ("rewards.x", X) if not bool(torch.isfinite(X).all()) else ("rewards.r", R)
            raise DataError(name, float(bad[~torch.isfinite(bad)][0]), "must be finite")

    def sample(self, n: int, generator: Streams = None) -> torch.Tensor:
        """``n`` exact posterior draws: ``[*batch, n, d]`` (one generator per run: the runs are the first
        batch dimension)."""
        n = positive_int(n, "n", minimum=0)
        chol = torch.linalg.cholesky(self.cov)
        eps = draw(
            torch.randn,
            (*self.mean.shape[:-1], n, self.dim),
            generator,
            dtype=self.mean.dtype,
            device=self.mean.device,
        )
        return self.mean.unsqueeze(-2) + eps @ chol.mT

    def log_prob(self, theta: torch.Tensor) -> torch.Tensor:
        return torch.distributions.MultivariateNormal(self.mean, self.cov).log_prob(theta)

    def to_arviz(self, n: int = 1000, seed: int = 0, var_name: str = "theta"):
        """``arviz.InferenceData`` of ``n`` exact draws (4 chains, :mod:`bayescrl.inference.arviz`), dims
        ``(chain, draw, batch_dim_0.., <var_name>_dim)``."""
        x = self.sample(num_draws(n), torch.Generator(device=self.mean.device).manual_seed(int(seed)))
        x = x.movedim(-2, 0)  # [n, *batch, d]
        dims = [f"batch_dim_{i}" for i in range(x.dim() - 2)] + [f"{var_name}_dim"]
        return draws_to_arviz({var_name: x}, dims={var_name: dims}, attrs={"engine": "exact"})


class DirichletPosterior:
    """Batched Dirichlet–categorical posterior: ``alpha [*batch, K]`` = α0 + counts."""

    def __init__(self, alpha0, *, device=None, dtype=torch.float64):
        self.alpha0 = torch.as_tensor(alpha0, dtype=dtype, device=device).clone()
        if not (self.alpha0 > 0).all() or not torch.isfinite(self.alpha0).all():
            bad = self.alpha0[~((self.alpha0 > 0) & torch.isfinite(self.alpha0))]
            raise DataError(
                "transitions.alpha0", bad.tolist(), "Dirichlet concentrations must be finite and > 0"
            )
        self.counts = torch.zeros_like(self.alpha0)

    @property
    def alpha(self) -> torch.Tensor:
        return self.alpha0 + self.counts

    @property
    def mean(self) -> torch.Tensor:
        a = self.alpha
        return a / a.sum(-1, keepdim=True)

    def update(self, index, outcome, weight: float | torch.Tensor = 1.0) -> DirichletPosterior:
        """Add observed outcomes: ``index`` is a tuple of batch-index tensors (e.g. ``(s, a)``) and
        ``outcome`` the category (next state) of each observation; duplicates accumulate."""
        if not isinstance(index, tuple):
            index = (index,)
        outcome = torch.as_tensor(outcome, device=self.counts.device).long()
        k = self.counts.shape[-1]
        if ((outcome < 0) | (outcome >= k)).any():
            i = int(((outcome < 0) | (outcome >= k)).reshape(-1).nonzero()[0])
            raise DataError("transitions.next", int(outcome.reshape(-1)[i]), f"must be in [0, {k})", index=i)
        idx = tuple(torch.as_tensor(t, device=self.counts.device).long() for t in index) + (outcome,)
        w = torch.as_tensor(weight, dtype=self.counts.dtype, device=self.counts.device).expand(outcome.shape)
        self.counts.index_put_(idx, w, accumulate=True)
        return self

    def sample(self, n: int | None = None, generator: Streams = None) -> torch.Tensor:
        """Draws ``[n, *batch, K]`` (or ``[*batch, K]`` if ``n`` is None), via normalised Gammas.

        ``generator`` may be one generator per run (:func:`~bayescrl.utils.seeding.run_generators`): the
        runs are the first batch dimension, each drawn from its own stream."""
        shape = self.alpha.shape if n is None else (n, *self.alpha.shape)
        a = self.alpha.expand(shape)
        if generator is None:
            g = torch._standard_gamma(a)
        else:  # torch._standard_gamma takes no generator: use the Marsaglia–Tsang sampler below
            g = per_run(_gamma, a, generator, dim=0 if n is None else 1)
        return g / g.sum(-1, keepdim=True)

    def log_prob(self, eta: torch.Tensor) -> torch.Tensor:
        return torch.distributions.Dirichlet(self.alpha).log_prob(eta)

    def to_arviz(self, n: int = 1000, seed: int = 0, var_name: str = "eta"):
        """``arviz.InferenceData`` of ``n`` exact draws (4 chains, :mod:`bayescrl.inference.arviz`), dims
        ``(chain, draw, batch_dim_0.., category)``."""
        x = self.sample(num_draws(n), torch.Generator(device=self.alpha.device).manual_seed(int(seed)))
        dims = [f"batch_dim_{i}" for i in range(x.dim() - 2)] + ["category"]
        return draws_to_arviz({var_name: x}, dims={var_name: dims}, attrs={"engine": "exact"})


def _gamma(alpha: torch.Tensor, generator: torch.Generator, max_rounds: int = 64) -> torch.Tensor:
    """Gamma(α, 1) draws with an explicit generator (Marsaglia–Tsang, boosted for α < 1)."""
    small = alpha < 1
    a = torch.where(small, alpha + 1, alpha)
    d = a - 1.0 / 3.0
    c = 1.0 / torch.sqrt(9 * d)
    out = torch.zeros_like(a)
    done = torch.zeros_like(a, dtype=torch.bool)
    for _ in range(max_rounds):
        z = draw(torch.randn, a.shape, generator, dtype=a.dtype, device=a.device)
        u = draw(torch.rand, a.shape, generator, dtype=a.dtype, device=a.device)
        v = (1 + c * z) ** 3
        ok = (v > 0) & (
            torch.log(u.clamp_min(1e-300)) < 0.5 * z**2 + d - d * v + d * torch.log(v.clamp_min(1e-300))
        )
        new = ok & ~done
        out = torch.where(new, d * v, out)
        done = done | ok
        if bool(done.all()):
            break
    u = draw(torch.rand, a.shape, generator, dtype=a.dtype, device=a.device)
    return torch.where(small, out * u ** (1.0 / alpha), out)

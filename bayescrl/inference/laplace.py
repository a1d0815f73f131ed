"""Laplace approximation of the standard model's posterior (approximate; Gaussian at the MAP).

The MAP (θ̂, ϑ̂) of lemma `mapestimatelemma` is found by the batched Newton solver of
:mod:`bayescrl.inference.bootstrap`; the joint posterior of (θ, ϑ_1..ϑ_R) is approximated by
N((θ̂, ϑ̂), H⁻¹), H the Hessian of the surrogate loss at the MAP. The θ block of H⁻¹ is the Gaussian
approximation of the informed prior ν1(θ) of Eq. `informed_prior` / Eq. `theta_informed_prior`
(θ marginal after integrating ϑ out). With rewards only the loss is quadratic and the result is exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bayescrl.inference.bootstrap import MAPResult, map_estimate
from bayescrl.models.linear import BTLinearProblem
from bayescrl.utils.seeding import draw


@dataclass
class LaplaceResult:
    """``mean [B?,D]``, ``cov [B?,D,D]`` of the joint (θ, ϑ_1..ϑ_R); the MAP's convergence and steps."""

    mean: torch.Tensor
    cov: torch.Tensor
    dim: int
    num_raters: int
    converged: torch.Tensor
    grad_norm: torch.Tensor
    iters: int | None = None

    @property
    def theta_mean(self) -> torch.Tensor:
        return self.mean[..., : self.dim]

    @property
    def theta_cov(self) -> torch.Tensor:
        return self.cov[..., : self.dim, : self.dim]

    @property
    def vartheta_mean(self) -> torch.Tensor:
        return self.mean[..., self.dim :].reshape(*self.mean.shape[:-1], self.num_raters, self.dim)

    def sample(self, n: int, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(theta [B?,n,d], vartheta [B?,n,R,d])`` drawn from the joint Gaussian."""
        chol = torch.linalg.cholesky(self.cov)
        eps = draw(
            torch.randn,
            (*self.mean.shape[:-1], n, self.mean.shape[-1]),
            generator,
            dtype=self.mean.dtype,
            device=self.mean.device,
        )
        z = self.mean.unsqueeze(-2) + eps @ chol.mT
        return z[..., : self.dim], z[..., self.dim :].reshape(*z.shape[:-1], self.num_raters, self.dim)


def laplace(
    problem: BTLinearProblem,
    *,
    tol: float = 1e-8,
    max_iter: int = 100,
    init: LaplaceResult | MAPResult | tuple[torch.Tensor, torch.Tensor] | None = None,
) -> LaplaceResult:
    """Gaussian approximation N(MAP, H⁻¹) for every data set of ``problem`` (batched).

    ``init`` warm-starts the MAP's Newton iterations, e.g. after a few observations were appended: a
    previous :class:`LaplaceResult` (its mean), :class:`MAPResult` or ``(theta, vartheta)`` pair (see
    :func:`~bayescrl.inference.bootstrap.map_estimate`). The answer does not depend on it.
    """
    if isinstance(init, LaplaceResult):
        init = (init.theta_mean, init.vartheta_mean)
    res = map_estimate(problem, tol=tol, max_iter=max_iter, return_hessian=True, init=init)
    H = res.hessian[..., 0, :, :]
    chol = torch.linalg.cholesky(H)
    cov = torch.cholesky_inverse(chol)
    cov = 0.5 * (cov + cov.mT)
    mean = torch.cat([res.theta[..., 0, :], res.vartheta[..., 0, :, :].flatten(-2)], -1)
    return LaplaceResult(
        mean, cov, problem.dim, problem.num_raters, res.converged[..., 0], res.grad_norm[..., 0], res.iters
    )

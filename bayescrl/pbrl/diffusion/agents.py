"""Posteriors of the image experiment: θ (reward weights on φ) for PSPL and DPS, η (binned noise norm).

Both agents share the policy, the rollouts, the policy update, the η model and the query protocol; they
differ only in the θ-posterior that their two samples per episode come from:

* :class:`PSPLTheta` — the tabular PSPL's :class:`~bayescrl.pbrl.posterior.TrajectoryPreferenceModel`
  (Eq. `theta_informed_prior`: Bradley–Terry likelihood with the rater's β, ϑ ∼ N(θ, I/λ²) marginalised,
  D0 then online rows), Laplace approximation by the core's batched Newton (:func:`laplace_theta`);
  point estimate: the MAP of lemma `chapter4mapestimatelemma`.
* :class:`DPSTheta` — Dueling Posterior Sampling (Novoseller et al. 2020): Bayesian linear regression of
  the label ±½ on φ(τ0) − φ(τ1) (:class:`~bayescrl.inference.exact.GaussianLinearPosterior`), ignoring β
  and λ; point estimate: the posterior mean.
* :class:`NoiseNormModel` — appendix `pickapic`: the scheduler f_ρ is known, uncertainty remains in
  ‖ε_t‖, discretised into ``C`` bins with ``P(b | t) ∼ Dir(α0 1_C)`` per denoising step t, updated from
  D0 and the online trajectories (:class:`~bayescrl.inference.exact.DirichletPosterior`).

The prior is ``N(0, Σ0)``, ``Σ0 = diag(σ²_score, σ²_noise, 1/12)`` with σ² the empirical variances of the
per-step features over D0's chains, as in the appendix.
"""

from __future__ import annotations

import torch
from torch import Tensor

from bayescrl.inference.exact import DirichletPosterior, GaussianLinearPosterior
from bayescrl.pbrl.data import TrajectoryPairs
from bayescrl.pbrl.posterior import TrajectoryPreferenceModel, laplace_theta
from bayescrl.utils.seeding import draw


def _pairs(phi0: Tensor, phi1: Tensor, y: Tensor) -> TrajectoryPairs:
    """Trajectory pairs for the core problem: φ only (states/actions are placeholders — the η model of
    this MDP is :class:`NoiseNormModel`, not the tabular transition counts)."""
    B, N = y.shape
    z = torch.zeros(B, N, 2, 3, dtype=torch.long, device=y.device)
    return TrajectoryPairs(z, z[..., :2], torch.stack([phi0, phi1], 2).double(), y.long())


class PSPLTheta:
    """θ-posterior of PSPL for ``B`` seeds (see the module docstring)."""

    def __init__(self, phi0: Tensor, phi1: Tensor, y: Tensor, K: int, cov0: Tensor, beta: float, lam: float):
        pairs = _pairs(phi0, phi1, y)
        self.model = TrajectoryPreferenceModel(pairs, 1, 1, K, beta=beta, lam=lam, device=phi0.device)
        self.model.problem.cov0 = cov0.double().to(self.model.problem.mu0.device)
        self._res = None

    def _map(self):
        if self._res is None:
            self._res, _ = self.model.solve(1, perturbed=False, return_hessian=True, max_iter=100)
        return self._res

    def gaussian(self) -> tuple[Tensor, Tensor]:
        return laplace_theta(self._map(), self.model.d)

    def sample(self, n: int, generator: torch.Generator | list[torch.Generator]) -> Tensor:
        """``n`` draws ``[B, n, d]`` from the Laplace approximation."""
        mean, cov = self.gaussian()
        eps = draw(
            torch.randn, (mean.shape[0], n, mean.shape[1]), generator, dtype=torch.float64, device="cpu"
        ).to(mean.device)  # drawn on the CPU streams: the same numbers on every device
        return mean.unsqueeze(1) + eps @ torch.linalg.cholesky(cov).mT

    def point(self) -> Tensor:
        return self._map().theta[:, 0]

    def observe(self, phi0: Tensor, phi1: Tensor, y: Tensor) -> None:
        """One online comparison per seed: ``phi0, phi1 [B, d]``, ``y [B]`` (0 = τ0 preferred)."""
        self.model.append(_pairs(phi0[:, None], phi1[:, None], y[:, None]))
        self._res = None


class DPSTheta:
    """θ-posterior of DPS for ``B`` seeds (see the module docstring)."""

    def __init__(self, phi0: Tensor, phi1: Tensor, y: Tensor, cov0: Tensor, noise_sd: float = 1.0):
        B, d = phi0.shape[0], phi0.shape[-1]
        dev = phi0.device
        mu0 = torch.zeros(B, d, dtype=torch.float64, device=dev)
        self.post = GaussianLinearPosterior(mu0, cov0.double().to(dev), noise_sd, device=dev)
        if y.shape[1]:
            self.post.update_many((phi0 - phi1).double(), 0.5 - y.double())

    def sample(self, n: int, generator: torch.Generator | list[torch.Generator]) -> Tensor:
        return self.post.sample(n, generator=generator)

    def point(self) -> Tensor:
        return self.post.mean

    def observe(self, phi0: Tensor, phi1: Tensor, y: Tensor) -> None:
        self.post.update((phi0 - phi1).double(), 0.5 - y.double())


class NoiseNormModel:
    """Dirichlet posterior over the bin of ``‖ε_t‖/√D`` at each step: ``alpha [B, T, C]``.

    Bin edges: ``C − 1`` inner edges at equally spaced quantiles of D0's norms (outer bins open), so the
    behaviour policy fills every bin about equally.
    """

    def __init__(self, B: int, T: int, C: int, d0_norms: Tensor, alpha0: float = 1.0):
        dev = d0_norms.device
        q = torch.linspace(0, 1, C + 1, dtype=torch.float64, device=dev)[1:-1]
        self.edges = torch.quantile(d0_norms.double().reshape(-1), q)
        self.post = DirichletPosterior(torch.full((B, T, C), float(alpha0), device=dev), device=dev)
        self.B, self.T, self.C = B, T, C

    def bins(self, norms: Tensor) -> Tensor:
        """Bin index (long) of each norm."""
        return torch.bucketize(norms.double().contiguous(), self.edges)

    def update(self, norms: Tensor) -> None:
        """Add trajectories ``norms [B, n, T]`` (per seed) or ``[n, T]`` (the same for every seed)."""
        if norms.dim() == 2:
            norms = norms.expand(self.B, *norms.shape)
        b = self.bins(norms)
        B, n, T = b.shape
        seed = torch.arange(B, device=b.device).view(B, 1, 1).expand(B, n, T)
        step = torch.arange(T, device=b.device).view(1, 1, T).expand(B, n, T)
        self.post.update((seed.reshape(-1), step.reshape(-1)), b.reshape(-1))

    def sample(self, n: int, generator: torch.Generator | list[torch.Generator]) -> Tensor:
        """``n`` draws ``[n, B, T, C]``."""
        return self.post.sample(n, generator=generator)

    def log_lik(self, eta: Tensor, norms: Tensor) -> Tensor:
        """``Σ_t log η_t(b(‖ε_t‖))`` for ``eta [P, T, C]`` and ``norms [P, n, T]`` -> ``[P, n]``."""
        b = self.bins(norms)  # [P, n, T]
        e = eta.unsqueeze(1).expand(-1, b.shape[1], -1, -1)
        return torch.log(e.gather(-1, b.unsqueeze(-1)).squeeze(-1).clamp_min(1e-300)).sum(-1)

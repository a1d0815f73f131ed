"""K-armed linear bandit of chapter `warmPref-PS` (Section `sec:preliminaries`), batched over seeds.

Every seed ``s`` has its own arm set ``A_s ∈ R^{K×d}``, environment ``θ_s ~ N(μ0, Σ0)`` and reward noise
``η ~ N(0, σ²)``; the reward of arm ``a`` is ``R = ⟨a, θ⟩ + η``. The thesis does not say how arms are drawn;
we draw them from a Gaussian with a controllable pairwise correlation ``ρ`` between arms (the knob of
table `actionspaceregret`)::

    a_k = √ρ · z_0 + √(1-ρ) · z_k,   z_0, z_k ~ N(0, I_d / d)   ⇒   corr(a_k[j], a_l[j]) = ρ  (k ≠ l).

The ``1/d`` scaling keeps ``E‖a‖² = 1`` so that rewards have the same scale for every ``d``.

Regret is the *pseudo*-regret ``⟨A*, θ⟩ - ⟨A_t, θ⟩`` (the expectation of Eq. `bayesianregret` given
``A_t``); the reward noise is drawn once per seed and shared by all agents (common random numbers), so the
comparison between agents is not blurred by noise draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bayescrl.utils.errors import ConfigError


def make_arms(
    num_seeds: int,
    K: int,
    d: int,
    rho: float,
    generators: list[torch.Generator],
    *,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Arms ``[S, K, d]`` with pairwise correlation ``rho`` between arms (see the module docstring)."""
    if not 0.0 <= rho < 1.0:
        raise ConfigError("bandit.rho", rho, "must be in [0, 1)")
    out = torch.empty(num_seeds, K, d, dtype=dtype, device="cpu")
    for s, g in enumerate(generators):
        z = torch.randn(K + 1, d, generator=g, dtype=dtype) / d**0.5
        out[s] = rho**0.5 * z[:1] + (1.0 - rho) ** 0.5 * z[1:]
    return out.to(device)


@dataclass
class LinearBandit:
    """A batch of ``S`` independent linear bandits (one per seed).

    Attributes: ``arms [S,K,d]``, ``theta [S,d]``, ``noise [S,T]`` (pre-drawn ``η``), ``noise_sd``,
    ``mu0 [d]``, ``cov0 [d,d]`` (the prior ``ν0`` that ``θ`` was drawn from).
    """

    arms: torch.Tensor
    theta: torch.Tensor
    noise: torch.Tensor
    noise_sd: float
    mu0: torch.Tensor
    cov0: torch.Tensor

    @property
    def num_seeds(self) -> int:
        return self.arms.shape[0]

    @property
    def K(self) -> int:
        return self.arms.shape[1]

    @property
    def d(self) -> int:
        return self.arms.shape[2]

    @property
    def T(self) -> int:
        return self.noise.shape[1]

    @property
    def means(self) -> torch.Tensor:
        """Mean rewards ``⟨a_k, θ_s⟩`` ``[S, K]``."""
        return torch.einsum("skd,sd->sk", self.arms, self.theta)

    @property
    def best_mean(self) -> torch.Tensor:
        """``⟨A*, θ⟩`` per seed ``[S]``."""
        return self.means.max(dim=1).values

    def pull(self, arm: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Pull ``arm [S]`` at round ``t`` (0-based): returns (reward ``[S]``, pseudo-regret ``[S]``)."""
        mean = self.means.gather(1, arm[:, None]).squeeze(1)
        return mean + self.noise[:, t], self.best_mean - mean

    @classmethod
    def sample(
        cls,
        num_seeds: int,
        K: int,
        d: int,
        T: int,
        noise_sd: float,
        rho: float,
        generators: list[torch.Generator],
        *,
        mu0: torch.Tensor | None = None,
        cov0: torch.Tensor | None = None,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str = "cpu",
    ) -> LinearBandit:
        """Draw arms, ``θ ~ N(μ0, Σ0)`` (default ``N(0, I)``) and the reward noise, one generator per seed."""
        mu0 = torch.zeros(d, dtype=dtype, device="cpu") if mu0 is None else mu0.to(dtype).cpu()
        cov0 = torch.eye(d, dtype=dtype, device="cpu") if cov0 is None else cov0.to(dtype).cpu()
        arms = make_arms(num_seeds, K, d, rho, generators, dtype=dtype)
        chol = torch.linalg.cholesky(cov0)
        theta = torch.stack([mu0 + chol @ torch.randn(d, generator=g, dtype=dtype) for g in generators])
        noise = torch.stack([noise_sd * torch.randn(T, generator=g, dtype=dtype) for g in generators])
        return cls(
            arms.to(device), theta.to(device), noise.to(device), noise_sd, mu0.to(device), cov0.to(device)
        )

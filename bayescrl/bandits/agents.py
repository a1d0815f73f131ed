"""Agents of chapter `warmPref-PS`, all batched over the ``S`` seeds of a run.

Interface: ``act(t) -> (arm [S] long, cost [S])`` chooses one arm per seed at round ``t`` (0-based);
``update(arm, reward)`` feeds the observed rewards back. ``cost`` is the feedback cost ``c_t`` of
``warmtsof`` (zero for every other agent).

* :class:`BootstrapAgent` — ``warmpref-ps-bootstrap`` (Algorithm `practical_Prefwarm-PS`): at every round
  one perturbed MAP of Eq. `final_surrogate_perturbed_loss` per seed, all seeds in one batched
  :func:`~bayescrl.inference.bootstrap.perturbed_map` call warm-started at the previous round's solution;
  and ``naive-ps``: the same loss but ignoring the rater's competence (β = 1 and ϑ ≈ θ, i.e. λ large).
* :class:`GaussianPSAgent` — posterior sampling with a Gaussian prior and exact conjugate updates (Eq.
  `posterior_update_theta` with a Gaussian ``ν_t``): ``ps`` (prior ``ν0``, no ``D0``), ``warmpref-ps``
  (Algorithm `Prefwarm-PS` with the informed prior ``ν1`` of Eq. `informed_prior` approximated by a
  Gaussian from a core engine), and ``lints`` (Agrawal & Goyal: ridge-regression mean, covariance
  ``v²B⁻¹``).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from bayescrl.bandits.env import LinearBandit
from bayescrl.bandits.offline import OfflineData
from bayescrl.inference.bootstrap import MAPResult, perturbed_map
from bayescrl.inference.exact import GaussianLinearPosterior
from bayescrl.models.linear import BTLinearProblem


class Agent:
    """Base class: ``label``, ``act``, ``update``."""

    label: str = "agent"

    def act(self, t: int) -> tuple[torch.Tensor, torch.Tensor]:  # pragma: no cover - abstract
        raise NotImplementedError

    def update(self, arm: torch.Tensor, reward: torch.Tensor) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


def build_problem(
    env: LinearBandit,
    data: OfflineData | None,
    beta: torch.Tensor,
    lam: torch.Tensor,
    extra_pref_capacity: int = 0,
) -> BTLinearProblem:
    """The batched :class:`BTLinearProblem` holding ``D0`` for every seed, with capacity for ``T`` rewards.

    ``beta [S,R]`` and ``lam [S,R]`` are the competences the agent *assumes* (possibly misspecified or
    estimated per seed).
    """
    S, T = env.num_seeds, env.T
    N = 0 if data is None else data.N
    R = beta.shape[-1]
    prob = BTLinearProblem.empty(
        env.mu0,
        env.cov0,
        beta=[1.0] * R,
        lam=[1.0] * R,
        noise_sd=env.noise_sd,
        batch_size=S,
        pref_capacity=N + extra_pref_capacity,
        reward_capacity=T,
        device=env.arms.device,
        dtype=env.arms.dtype,
    )
    prob = replace(prob, beta=beta.to(prob.mu0), lam=lam.to(prob.mu0))
    if N:
        x0, x1 = data.features(env.arms)
        prob.x0[:, :N], prob.x1[:, :N] = x0, x1
        prob.y[:, :N] = data.y.to(prob.y.dtype)
        prob.rater[:, :N] = data.rater
        prob.pref_mask[:, :N] = True
    return prob


class BootstrapAgent(Agent):
    """Bootstrapped warmPref-PS (Algorithm `practical_Prefwarm-PS`), batched over seeds.

    Perturbations (Eq. `final_surrogate_perturbed_loss`): ``ζ_s ~ N(0, σ²)`` on online rewards,
    ``ω_n ~ Bern(p_offline)`` on offline comparisons, prior anchors ``θ'``, ``ϑ'``. One perturbed MAP
    per seed and round (``M = 1``), warm-started from the previous round; non-converged solves are
    counted in :attr:`not_converged` (reported in the results).
    """

    def __init__(
        self,
        env: LinearBandit,
        data: OfflineData | None,
        beta: torch.Tensor,
        lam: torch.Tensor,
        *,
        generator: torch.Generator,
        p_offline: float = 0.5,
        p_online: float = 1.0,
        online_noise: bool = True,
        anchor_prior: bool = True,
        tol: float = 1e-6,
        max_iter: int = 50,
        extra_pref_capacity: int = 0,
        label: str = "warmpref-ps-bootstrap",
    ):
        self.env, self.label, self.gen = env, label, generator
        self.problem = build_problem(env, data, beta, lam, extra_pref_capacity)
        self.kw = dict(
            p_offline=p_offline,
            p_online=p_online,
            online_reward_noise=online_noise,
            anchor_prior=anchor_prior,
            tol=tol,
            max_iter=max_iter,
        )
        self.prev: MAPResult | None = None
        self.not_converged = 0
        self.solves = 0

    def sample_theta(self) -> torch.Tensor:
        """One perturbed-MAP sample ``θ̂ [S,d]`` per seed (Algorithm `practical_Prefwarm-PS`, l. 3-4)."""
        res = perturbed_map(self.problem, 1, init=self.prev, generator=self.gen, **self.kw)
        self.prev = res
        self.solves += res.converged.numel()
        self.not_converged += int((~res.converged).sum())
        return res.theta[:, 0]

    def act(self, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        theta = self.sample_theta()
        arm = torch.einsum("skd,sd->sk", self.env.arms, theta).argmax(1)
        return arm, torch.zeros(self.env.num_seeds, dtype=theta.dtype, device=theta.device)

    def update(self, arm: torch.Tensor, reward: torch.Tensor) -> None:
        x = self.env.arms[torch.arange(self.env.num_seeds, device=arm.device), arm]
        self.problem.append_rewards(x, reward)


class GaussianPSAgent(Agent):
    """Posterior sampling with a batched Gaussian prior ``N(mean [S,d], cov [S,d,d])`` and exact
    Gaussian–linear updates (noise ``noise_sd``); samples are drawn with covariance ``scale² · Σ_t``.

    ``ps``: prior ``ν0``, ``scale = 1``. ``warmpref-ps``: Gaussian approximation of ``ν1``.
    ``lints``: prior ``N(0, I/ridge)``, unit noise, ``scale = v`` (Agrawal & Goyal's ``θ̃ ~ N(θ̂, v²B⁻¹)``).

    Uses the core's :class:`~bayescrl.inference.exact.GaussianLinearPosterior` (Sherman–Morrison, O(d²)
    per update).
    """

    def __init__(
        self,
        env: LinearBandit,
        mean: torch.Tensor,
        cov: torch.Tensor,
        noise_sd: float,
        *,
        generator: torch.Generator,
        scale: float = 1.0,
        label: str = "ps",
    ):
        self.env, self.label, self.gen, self.scale = env, label, generator, scale
        self.post = GaussianLinearPosterior(mean, cov, noise_sd, device=mean.device, dtype=mean.dtype)

    def act(self, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        theta = self.post.sample(1, self.gen)[..., 0, :] if self.scale == 1.0 else self._scaled()
        arm = torch.einsum("skd,sd->sk", self.env.arms, theta).argmax(1)
        return arm, torch.zeros(self.env.num_seeds, dtype=theta.dtype, device=theta.device)

    def _scaled(self) -> torch.Tensor:
        mean = self.post.mean
        return mean + self.scale * (self.post.sample(1, self.gen)[..., 0, :] - mean)

    def update(self, arm: torch.Tensor, reward: torch.Tensor) -> None:
        x = self.env.arms[torch.arange(self.env.num_seeds, device=arm.device), arm]
        self.post.update(x, reward)

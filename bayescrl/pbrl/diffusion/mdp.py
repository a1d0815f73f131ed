"""Denoising as a finite-horizon MDP (appendix `pickapic`, following Black et al.): ``s_t = (p, z_t)``,
``a_t = ε_t``, ``z_{t+1} = f_ρ(z_t, ε_t)`` (the frozen DDIM step, η = 0), horizon ``H = T``.

Trajectory embedding (Eq. `pref_logistic_trajectories` with the additive φ of the appendix):
``φ(τ) = Σ_{t=1}^{T} φ(s_t, a_t)``, ``φ(s_t, a_t) = [score(p, x), ‖ε_t‖₂/√D, t/T]`` with ``x`` the final
image (pixel space: ``Dec`` is the identity) and ``D`` the pixel count (the norm is divided by √D so it is
≈ 1 for a standard normal ε). The hidden reward of the simulated raters also sees an image statistic
``stat(x)`` (stroke mass or left–right symmetry): ``ψ(τ) = [φ(τ), T·stat(x)]``, so the agents' linear
model in φ is misspecified, as the thesis' CLIP-feature model is for human raters.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bayescrl.pbrl.diffusion.base import BaseModel
from bayescrl.pbrl.diffusion.policy import GaussianNoisePolicy
from bayescrl.utils.seeding import draw

STATS = ("mass", "symmetry")


def image_stat(x: Tensor, kind: str) -> Tensor:
    """``mass``: mean ink (x + 1)/2 ∈ [0, 1]; ``symmetry``: −mean |x − mirror(x)|/2 ∈ [−1, 0]."""
    if kind == "mass":
        return ((x + 1) / 2).flatten(-3).mean(-1)
    return -((x - x.flip(-1)).abs() / 2).flatten(-3).mean(-1)


@dataclass
class Rollouts:
    """``P`` policies × ``n`` trajectories: policy inputs ``[P, n, T, in]``, UNet predictions ε̂ and actions
    ε ``[P, n, T, D]``, ``logp [P, n, T]``, norms ``‖ε_t‖/√D [P, n, T]``, prompts ``[P, n]``, final images
    ``x [P, n, 1, S, S]``, ``score``, ``stat [P, n]``."""

    inputs: Tensor
    eps_hat: Tensor
    actions: Tensor
    logp: Tensor
    norms: Tensor
    prompts: Tensor
    x: Tensor
    score: Tensor
    stat: Tensor

    @property
    def T(self) -> int:
        return self.norms.shape[-1]

    def phi(self) -> Tensor:
        """Agents' embedding ``φ(τ) [P, n, 3]`` (float64)."""
        return embed(self.score, self.norms)

    def psi(self) -> Tensor:
        """Raters' embedding ``ψ(τ) = [φ(τ), T·stat] [P, n, 4]``."""
        return torch.cat([self.phi(), (self.T * self.stat.double()).unsqueeze(-1)], -1)

    def cat(self, other: Rollouts) -> Rollouts:
        """Concatenate along the policy axis."""
        return Rollouts(
            *(
                torch.cat([a, b], 0)
                for a, b in zip(self.__dict__.values(), other.__dict__.values(), strict=True)
            )
        )

    def drop_inputs(self) -> Rollouts:
        """A copy without the bulky per-step tensors (for data sets that only need φ, ψ, bins)."""
        e = self.inputs.new_zeros(0)
        return Rollouts(e, e, e, self.logp, self.norms, self.prompts, self.x, self.score, self.stat)


def embed(score: Tensor, norms: Tensor) -> Tensor:
    """``φ(τ) = Σ_{t=1}^T [score, ‖ε_t‖/√D, t/T] = [T·score, Σ_t norms_t, (T+1)/2]``, ``norms [..., T]``."""
    T = norms.shape[-1]
    time = torch.full_like(score, (T + 1) / 2, dtype=torch.float64)
    return torch.stack([T * score.double(), norms.double().sum(-1), time], -1)


def rollout(
    base: BaseModel,
    sched,
    policy: GaussianNoisePolicy,
    prompts: Tensor,
    z_T: Tensor,
    *,
    stat: str = "mass",
    generator: torch.Generator | list[torch.Generator] | None = None,
    keep_inputs: bool = True,
    deterministic: bool = False,
    grad: bool = False,
) -> Rollouts:
    """Roll out ``policy`` (``P`` policies) from ``z_T [P, n, 1, S, S]`` with prompts ``[P, n]``, batched:
    one UNet call of ``P·n`` images per denoising step. Noise is drawn on the CPU ``generator`` (one, or a
    list of ``P``: one stream per policy); ``deterministic`` takes the policy's mean action (the fine-tuned
    DDIM sampler itself).

    ``grad``: keep the autograd graph through the reparameterised actions ``ε_t = μ_t + σ_t ξ_t``, the
    frozen UNet and DDIM steps and the scorer, so ``score``, ``stat``, ``norms`` (hence φ, ψ) are
    differentiable in the policy's weights; the stored ``inputs``, ``eps_hat``, ``actions`` and ``logp``
    are detached (the score-function terms treat the states and actions as data)."""
    P, n = prompts.shape
    dev = policy.w1.device
    S = z_T.shape[-1]
    T = len(sched.timesteps)
    with torch.set_grad_enabled(grad):
        z = z_T.reshape(P * n, 1, S, S).to(dev)
        inputs, eps_hats, acts, logps, norms = [], [], [], [], []
        for i, t in enumerate(sched.timesteps):
            a, inp, eps_hat, logp = _act(base, policy, z, t, (i + 1) / T, prompts, generator, deterministic)
            logps.append(logp)
            norms.append(a.norm(dim=-1) / (S * S) ** 0.5)
            if keep_inputs:
                inputs.append(inp.detach())
                eps_hats.append(eps_hat.detach())
                acts.append(a.detach())
            z = sched.step(a.reshape(P * n, 1, S, S), t, z, eta=0.0).prev_sample
        return _finish(base, z, prompts, stat, inputs, eps_hats, acts, logps, norms)


def _finish(
    base: BaseModel,
    z: Tensor,
    prompts: Tensor,
    stat: str,
    inputs: list[Tensor],
    eps_hats: list[Tensor],
    acts: list[Tensor],
    logps: list[Tensor],
    norms: list[Tensor],
) -> Rollouts:
    """The :class:`Rollouts` of the final latents ``z`` (images clamped to [-1, 1], scored) and the per-step
    lists (stacked along dim 2; empty lists give empty tensors)."""
    P, n = prompts.shape
    S = z.shape[-1]
    x = z.clamp(-1, 1).reshape(P, n, 1, S, S)
    score = base.scorer.score(prompts.reshape(-1).to(z.device), x.reshape(P * n, 1, S, S)).reshape(P, n)
    stack = lambda xs: torch.stack(xs, 2) if xs else z.new_zeros(0)  # noqa: E731
    return Rollouts(
        stack(inputs),
        stack(eps_hats),
        stack(acts),
        torch.stack(logps, 2),
        torch.stack(norms, 2),
        prompts,
        x,
        score,
        image_stat(x, stat),
    )


def _act(
    base: BaseModel,
    policy: GaussianNoisePolicy,
    z: Tensor,
    t: Tensor,
    progress: float,
    prompts: Tensor,
    generator: torch.Generator | list[torch.Generator] | None,
    deterministic: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The policy's action ``ε_t = μ_t + σ_t ξ_t`` ``[P, n, D]`` (``deterministic``: ``μ_t``) at the
    latents ``z [P·n, 1, S, S]`` of step ``t`` (``progress`` = (i+1)/T), ξ drawn on the CPU ``generator``;
    returns it with the policy's inputs, the UNet's ε̂ and the action's log-probability (detached)."""
    P, n = prompts.shape
    dev = policy.w1.device
    D = z.shape[-1] * z.shape[-2]
    eps_hat = base.unet(z, t, class_labels=prompts.reshape(-1).to(dev)).sample.reshape(P, n, D)
    inp = policy.inputs(eps_hat, z.reshape(P, n, D), progress, prompts.to(dev))
    mean, log_sd = policy(inp.reshape(P, n, -1), eps_hat)
    xi = draw(torch.randn, (P, n, D), generator, dtype=torch.get_default_dtype(), device="cpu").to(dev)
    a = mean if deterministic else mean + torch.exp(log_sd) * xi
    return a, inp, eps_hat, policy.log_prob(a, mean, log_sd).detach()

"""The noise policy π_θ(ε_t | s_t) of appendix `pickapic` and its DDPO-style update (Black et al. 2024).

A 2-layer MLP (``hidden`` = 512 GELU units per layer) maps the state features
``[ε̂_t, z_t, t/T, onehot(p)]`` (ε̂_t the frozen UNet's noise prediction at (z_t, t, p)) to a residual
mean and a log-sd: ``μ_t = ε̂_t + Δ_t``, ``log σ_t`` (clamped to [log 1e-3, 0]); the action is
``ε_t ∼ N(μ_t, diag σ_t²)``. The last layer starts at zero, so the initial policy is the base sampler with
exploration noise of sd ``sd_init`` around its ε̂ (the behaviour policy of D0).

``P`` policies (seeds × posterior samples) are stored as one batched set of weights ``[P, ...]`` and
evaluated with ``baddbmm``; their losses are summed, so their gradients (and Adam's per-element updates)
do not interact — the same as ``P`` separate optimisers.

:func:`ddpo_update`: PPO-clipped importance-sampling policy gradient on stored rollouts
(DDPO_IS): ``L = −E_t[min(ρ_t A, clip(ρ_t, 1 ± c) A)]``, ``ρ_t = π_new(ε_t|s_t)/π_old(ε_t|s_t)``.
The UNet is frozen, so an update needs only the stored inputs, not new UNet passes.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

LOG_SD_MIN, LOG_SD_MAX = math.log(1e-3), 0.0
LOG_2PI = math.log(2 * math.pi)


class GaussianNoisePolicy(nn.Module):
    """``P`` batched Gaussian noise policies over ``D``-dimensional ε (see the module docstring)."""

    def __init__(
        self, P: int, D: int, n_prompts: int, *, hidden: int = 512, sd_init: float = 0.1, seed: int = 0
    ):
        super().__init__()
        self.P, self.D, self.n_prompts, self.hidden = P, D, n_prompts, hidden
        in_dim = 2 * D + 1 + n_prompts
        g = torch.Generator().manual_seed(seed)

        def lin(i: int, o: int) -> tuple[nn.Parameter, nn.Parameter]:
            bound = 1.0 / math.sqrt(i)  # nn.Linear's default range, the same for every copy
            w = (torch.rand(i, o, generator=g) * 2 - 1) * bound
            b = (torch.rand(1, o, generator=g) * 2 - 1) * bound
            return nn.Parameter(w.expand(P, i, o).clone()), nn.Parameter(b.expand(P, 1, o).clone())

        self.w1, self.b1 = lin(in_dim, hidden)
        self.w2, self.b2 = lin(hidden, hidden)
        self.w3 = nn.Parameter(torch.zeros(P, hidden, 2 * D))
        b3 = torch.cat([torch.zeros(D), torch.full((D,), math.log(sd_init))])
        self.b3 = nn.Parameter(b3.expand(P, 1, 2 * D).clone())

    def inputs(self, eps_hat: Tensor, z: Tensor, tau: float, prompts: Tensor) -> Tensor:
        """State features ``[P, n, 2D+1+C]``: ``eps_hat, z [P, n, D]``, ``tau = t/T``, one-hot prompts."""
        oh = nn.functional.one_hot(prompts, self.n_prompts).to(z.dtype)
        return torch.cat([eps_hat, z, torch.full_like(z[..., :1], tau), oh], -1)

    def forward(self, inp: Tensor, eps_hat: Tensor) -> tuple[Tensor, Tensor]:
        """Mean and log-sd ``[P, m, D]`` for inputs ``inp [P, m, in]`` and UNet predictions ``eps_hat``."""
        h = nn.functional.gelu(torch.baddbmm(self.b1, inp, self.w1))
        h = nn.functional.gelu(torch.baddbmm(self.b2, h, self.w2))
        out = torch.baddbmm(self.b3, h, self.w3)
        return eps_hat + out[..., : self.D], out[..., self.D :].clamp(LOG_SD_MIN, LOG_SD_MAX)

    @staticmethod
    def log_prob(a: Tensor, mean: Tensor, log_sd: Tensor) -> Tensor:
        """``log N(a; mean, diag exp(2 log_sd))`` summed over the last axis."""
        z = (a - mean) * torch.exp(-log_sd)
        return -(0.5 * z.pow(2) + log_sd + 0.5 * LOG_2PI).sum(-1)

    def select(self, idx: Tensor | list[int]) -> GaussianNoisePolicy:
        """A new policy holding copies of the policies ``idx`` (e.g. ``[0]*B`` or ``range(B)``)."""
        idx = torch.as_tensor(idx, dtype=torch.long)
        new = GaussianNoisePolicy.__new__(GaussianNoisePolicy)
        nn.Module.__init__(new)
        new.P, new.D, new.n_prompts, new.hidden = len(idx), self.D, self.n_prompts, self.hidden
        for name, p in self.named_parameters():
            setattr(new, name, nn.Parameter(p.detach()[idx.to(p.device)].clone()))
        return new


def ddpo_update(
    policy: GaussianNoisePolicy,
    opt: torch.optim.Optimizer,
    inputs: Tensor,
    eps_hat: Tensor,
    actions: Tensor,
    logp_old: Tensor,
    adv: Tensor,
    *,
    steps: int,
    clip: float = 0.2,
) -> dict:
    """``steps`` PPO-clip steps on rollouts stored as ``inputs [P, n, T, in]``, ``eps_hat / actions
    [P, n, T, D]``, ``logp_old [P, n, T]`` with per-trajectory advantages ``adv [P, n]``."""
    P, n, T = logp_old.shape
    A = adv.unsqueeze(-1)
    clipped = 0.0
    for _ in range(steps):
        mean, log_sd = policy(inputs.reshape(P, n * T, -1), eps_hat.reshape(P, n * T, -1))
        logp = policy.log_prob(actions.reshape(P, n * T, -1), mean, log_sd).reshape(P, n, T)
        ratio = torch.exp(logp - logp_old)
        obj = torch.minimum(ratio * A, ratio.clamp(1 - clip, 1 + clip) * A)
        loss = -obj.mean((1, 2)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        clipped = float(((ratio - 1).abs() > clip).float().mean())
    return {"clip_fraction": clipped}

"""The noise policy π_θ(ε_t | s_t) of appendix `pickapic` and its updates (reward gradient; DDPO).

A 2-layer MLP (``hidden`` = 512 GELU units per layer) maps the state features
``[ε̂_t, z_t, t/T, onehot(p)]`` (ε̂_t the frozen UNet's noise prediction at (z_t, t, p)) to a residual
mean and a log-sd: ``μ_t = ε̂_t + Δ_t``, ``log σ_t`` (clamped to [log 1e-3, 0]); the action is
``ε_t ∼ N(μ_t, diag σ_t²)``. The last layer starts at zero, so the initial policy is the base sampler with
exploration noise of sd ``sd_init`` around its ε̂ (the behaviour policy of D0).

``P`` policies (seeds × posterior samples) are stored as one batched set of weights ``[P, ...]`` and
evaluated with ``baddbmm``; their losses are summed, so their gradients (and Adam's per-element updates)
do not interact — the same as ``P`` separate optimisers.

:func:`reward_gradient_update` (the default, ``policy.update: reward_grad``): one Adam step on the
reward's gradient through the reparameterised rollout (DRaFT / AlignProp: Clark et al. 2024, Prabhudesai
et al. 2023): the agents' reward ⟨θ̃, φ(τ)⟩ (and the oracle's ⟨θ*, ψ(τ)⟩) is differentiable in the actions
ε_t = μ_t + σ_t ξ_t through the frozen DDIM steps and the scorer. Non-differentiable terms (the binned
noise-norm likelihood of a posterior η̃) enter through a score-function term ``A·log π(ε_t|s_t)``.

:func:`ddpo_update` (``policy.update: ddpo``): PPO-clipped importance-sampling policy gradient on stored
rollouts (DDPO_IS, Black et al.): ``L = −E_t[min(ρ_t A, clip(ρ_t, 1 ± c) A)]``,
``ρ_t = π_new(ε_t|s_t)/π_old(ε_t|s_t)``. The UNet is frozen, so an update needs only the stored inputs.
Zeroth-order: its gradient estimate in the 2 560-dimensional action sequence (T = 10 steps × 256
pixels) needs far more trajectories than a CPU budget allows (see the reproduction notes), which is why
the first-order update is the default.
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
        self.w3 = nn.Parameter(torch.zeros(P, hidden, 2 * D, device="cpu"))
        b3 = torch.cat([torch.zeros(D, device="cpu"), torch.full((D,), math.log(sd_init), device="cpu")])
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
        idx = torch.as_tensor(idx, dtype=torch.long, device="cpu")
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


def reward_gradient_update(
    policy: GaussianNoisePolicy,
    opt: torch.optim.Optimizer,
    reward: Tensor,
    *,
    inputs: Tensor | None = None,
    eps_hat: Tensor | None = None,
    actions: Tensor | None = None,
    sf_adv: Tensor | None = None,
) -> dict:
    """One ascent step on ``E[reward]`` for ``reward [P, n]`` with its graph (a ``grad=True`` rollout).

    Loss per policy: ``−mean_n reward / sd_n(reward)`` (the sd detached: the step does not depend on the
    reward's scale, as the standardised advantages of DDPO) minus, with ``sf_adv [P, n]``, the
    score-function term ``mean_{n,t} sf_adv · log π(ε_t | s_t)`` on the detached ``inputs``/``actions``
    ``[P, n, T, ·]`` (its gradient is DDPO's at ratio 1). The ``P`` losses are summed: their gradients and
    Adam's per-element steps do not interact."""
    r = reward.float()
    loss = -(r / (r.detach().std(1, keepdim=True) + 1e-8)).mean(1).sum()
    if sf_adv is not None:
        P, n, T = actions.shape[:3]
        mean, log_sd = policy(inputs.reshape(P, n * T, -1), eps_hat.reshape(P, n * T, -1))
        logp = policy.log_prob(actions.reshape(P, n * T, -1), mean, log_sd).reshape(P, n, T)
        loss = loss - (sf_adv.detach().unsqueeze(-1) * logp).mean((1, 2)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return {"loss": float(loss.detach())}


def select_adam(opt: torch.optim.Adam, new: GaussianNoisePolicy, idx: Tensor | list[int]) -> torch.optim.Adam:
    """An Adam optimiser over ``new = policy.select(idx)`` carrying the moment estimates of the selected
    copies, so a policy copied between episodes keeps its optimiser state (one optimiser per run)."""
    idx = torch.as_tensor(idx, dtype=torch.long, device="cpu")
    out = torch.optim.Adam(
        new.parameters(), **{k: v for k, v in opt.defaults.items() if k in ("lr", "betas", "eps")}
    )
    for p_old, p_new in zip(opt.param_groups[0]["params"], out.param_groups[0]["params"], strict=True):
        st = opt.state.get(p_old)
        if st:
            out.state[p_new] = {
                k: v[idx.to(v.device)].clone() if v.dim() and v.shape[0] == p_old.shape[0] else v.clone()
                for k, v in st.items()
            }
    return out

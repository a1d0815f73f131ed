"""Hybrid DPO / IPO baselines of appendix `appendix:dpoipo`, batched over seeds.

Offline phase: a softmax policy ``π_ψ(a_i) = softmax(ψ)_i``, ``ψ ∈ R^K``, reference ``π_ref`` uniform, is
trained on ``D0`` by the DPO loss ``-log σ(τ h)`` or the IPO loss ``(h - 1/(2τ))²``, with
``h = log π(y_w)/π(y_l) - log π_ref(y_w)/π_ref(y_l) = ψ_w - ψ_l``; Adam (lr 0.015), mini-batches of 12
drawn uniformly with replacement, 20k steps, ``τ = 0.1`` (the thesis' settings). All seeds are trained at
once (``ψ [S,K]``), with the gradient written out (it touches only the 2·12 sampled entries per seed) and
Adam applied to the whole ``[S,K]`` tensor: 20k steps take a few seconds on one CPU thread.

Reward model: the implicit reward ``r(a) = τ log π(a)/π_ref(a)``, shifted so that
``min_a r(a) = min_a r*(a)`` (the thesis gives the agent ``min_a r*(a)`` as an input).

Online phase (ε-greedy, ``ε = 0.16``): with probability ε a uniform arm, else ``argmax_a r(a)``. The thesis
says only "update the reward model r based on the received reward"; we treat the offline ``r(a)`` as one
pseudo-observation of weight ``w`` and keep ``r(a) = (w·r_0(a) + Σ R) / (w + n(a))`` (``r_0`` while
``n(a) = 0``). The default ``w = 0`` replaces ``r_0(a)`` by the empirical mean once ``a`` has been pulled:
the implicit DPO reward is unbounded (``ψ`` keeps growing over 20k steps; ``τ·Δψ`` spans ~20 reward units
at the default config), so any ``w > 0`` keeps badly over-estimated arms greedy for many rounds.
"""

from __future__ import annotations

import torch

from bayescrl.bandits.agents import Agent
from bayescrl.bandits.env import LinearBandit
from bayescrl.bandits.offline import OfflineData
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.seeding import draw, randint


def preference_loss(h: torch.Tensor, loss: str, tau: float) -> torch.Tensor:
    """Per-pair DPO loss ``-log σ(τh)`` or IPO loss ``(h - 1/(2τ))²``."""
    if loss == "dpo":
        return -torch.nn.functional.logsigmoid(tau * h)
    return (h - 0.5 / tau) ** 2


def preference_loss_grad(h: torch.Tensor, loss: str, tau: float) -> torch.Tensor:
    """``d preference_loss / dh`` (written out; checked against autograd in the tests)."""
    if loss == "dpo":
        return -tau * torch.sigmoid(-tau * h)
    return 2.0 * (h - 0.5 / tau)


def train_preference_policy(
    winners: torch.Tensor,
    losers: torch.Tensor,
    K: int,
    *,
    loss: str = "dpo",
    steps: int = 20000,
    lr: float = 0.015,
    batch: int = 12,
    tau: float = 0.1,
    generator: torch.Generator | list[torch.Generator] | None = None,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
) -> torch.Tensor:
    """Logits ``ψ [S,K]`` of the DPO / IPO policy trained on pairs ``winners, losers [S,N]``.

    With ``N = 0`` the policy stays uniform (``ψ = 0``).
    """
    if loss not in ("dpo", "ipo"):
        raise ConfigError("loss", loss, "must be 'dpo' or 'ipo'")
    S, N = winners.shape
    dt = torch.float64
    psi = torch.zeros(S, K, dtype=dt, device=winners.device)
    if N == 0:
        return psi
    m, v = torch.zeros_like(psi), torch.zeros_like(psi)
    rows = torch.arange(S, device=winners.device)[:, None].expand(S, batch)
    b1, b2 = betas
    for step in range(1, steps + 1):
        idx = randint(N, (S, batch), generator, device=winners.device)
        w, lo = winners.gather(1, idx), losers.gather(1, idx)
        h = psi[rows, w] - psi[rows, lo]
        gh = preference_loss_grad(h, loss, tau) / batch  # mean over the mini-batch
        g = torch.zeros_like(psi)
        g.index_put_((rows, w), gh, accumulate=True)
        g.index_put_((rows, lo), -gh, accumulate=True)
        m.mul_(b1).add_(g, alpha=1 - b1)
        v.mul_(b2).addcmul_(g, g, value=1 - b2)
        mhat = m / (1 - b1**step)
        vhat = v / (1 - b2**step)
        psi.sub_(lr * mhat / (vhat.sqrt() + eps))
    return psi


class HybridPreferenceAgent(Agent):
    """``hybrid-dpo`` / ``hybrid-ipo``: offline DPO/IPO policy → reward model → ε-greedy online."""

    def __init__(
        self,
        env: LinearBandit,
        data: OfflineData,
        *,
        loss: str,
        generator: torch.Generator,
        steps: int = 20000,
        lr: float = 0.015,
        batch: int = 12,
        tau: float = 0.1,
        epsilon: float = 0.16,
        prior_weight: float = 0.0,
        label: str | None = None,
    ):
        self.env, self.gen, self.epsilon = env, generator, epsilon
        self.label = label or f"hybrid-{loss}"
        winners = data.winners()
        losers = torch.where(data.y == 0, data.i1, data.i0)
        psi = train_preference_policy(
            winners, losers, env.K, loss=loss, steps=steps, lr=lr, batch=batch, tau=tau, generator=generator
        )
        r = tau * (torch.log_softmax(psi, dim=1) + torch.log(torch.tensor(float(env.K), device=psi.device)))
        r = r - r.min(1, keepdim=True).values + env.means.min(1, keepdim=True).values
        self.r0 = r.to(env.arms.dtype)
        self.w = prior_weight
        self.sum = prior_weight * self.r0
        self.count = torch.zeros_like(self.r0)

    @property
    def reward_model(self) -> torch.Tensor:
        """Current ``r(a)`` ``[S,K]``."""
        seen = self.count > 0
        return torch.where(seen, self.sum / (self.w + self.count).clamp_min(1e-12), self.r0)

    def act(self, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        S, K = self.r0.shape
        explore = (
            draw(torch.rand, (S,), self.gen, dtype=torch.get_default_dtype(), device=self.r0.device)
            < self.epsilon
        )
        rand_arm = randint(K, (S,), self.gen, device=self.r0.device)
        arm = torch.where(explore, rand_arm, self.reward_model.argmax(1))
        return arm, torch.zeros(S, dtype=self.r0.dtype, device=self.r0.device)

    def update(self, arm: torch.Tensor, reward: torch.Tensor) -> None:
        rows = torch.arange(self.r0.shape[0], device=arm.device)
        self.sum[rows, arm] += reward
        self.count[rows, arm] += 1

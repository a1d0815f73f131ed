"""Raters over trajectory pairs and offline preference data D0, batched over seeds.

The rater of competence (β, λ) holds ϑ ∼ N(θ, I/λ²) and answers Y ∈ {0, 1} (0 = τ0 preferred) with the
Bradley–Terry probability of Eq. `pref_logistic_trajectories`,
``P(Y=0 | τ0, τ1; ϑ) = σ(β⟨φ(τ0) − φ(τ1), ϑ⟩)``. The *flawed greedy expert* of the appendix section
`Ablation Studies` answers ``Y = argmax_i β⟨φ(τ_i), ϑ⟩`` deterministically (exact ties: a fair coin).

The samplers' ``generator`` is one stream or one per seed (:func:`~bayescrl.utils.seeding.run_generators`):
seed ``b``'s rater, trajectories and labels are then drawn from its own stream only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from bayescrl.pbrl.mdp import TabularMDP, embed, rollout, value_iteration
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.seeding import draw

EXPERTS = ("bt", "greedy")
BEHAVIOURS = ("uniform", "eps-optimal")


@dataclass
class Rater:
    """A batch of raters, one per seed: ``vartheta [B, d]``, deliberateness ``beta``, ``expert`` kind."""

    vartheta: Tensor
    beta: float
    lam: float
    expert: str = "bt"

    @classmethod
    def sample(
        cls, theta: Tensor, B: int, beta: float, lam: float, expert: str = "bt", *, generator=None
    ) -> Rater:
        """Draw ϑ_b ∼ N(θ, I/λ²) for b < B (``lam = inf`` gives ϑ = θ)."""
        check_competence(beta, lam)
        if expert not in EXPERTS:
            raise ConfigError("offline.expert", expert, f"choose one of {list(EXPERTS)}")
        noise = draw(torch.randn, (B, theta.shape[-1]), generator, dtype=theta.dtype, device=theta.device)
        sd = 0.0 if math.isinf(lam) else 1.0 / lam
        return cls(theta + sd * noise, float(beta), float(lam), expert)

    def prob_prefers_0(self, phi0: Tensor, phi1: Tensor) -> Tensor:
        """``P(Y = 0)`` for embeddings ``phi0, phi1 [B, ..., d]`` (Eq. `pref_logistic_trajectories`)."""
        vt = self.vartheta.reshape(self.vartheta.shape[0], *([1] * (phi0.dim() - 2)), -1)
        score = ((phi0 - phi1) * vt).sum(-1)
        if self.expert == "greedy":
            return torch.where(score > 0, 1.0, torch.where(score < 0, 0.0, 0.5)).to(phi0.dtype)
        return torch.sigmoid(self.beta * score)

    def label(self, phi0: Tensor, phi1: Tensor, *, generator=None) -> Tensor:
        """Sample labels ``Y [B, ...]`` (long, 0 = τ0 preferred)."""
        p0 = self.prob_prefers_0(phi0, phi1)
        u = draw(torch.rand, p0.shape, generator, dtype=p0.dtype, device=p0.device)
        return (u >= p0).long()


def check_competence(beta: float, lam: float, prefix: str = "offline") -> None:
    """Reject invalid rater competences with a message naming the field."""
    if not isinstance(beta, (int, float)) or isinstance(beta, bool) or not beta >= 0 or math.isnan(beta):
        raise ConfigError(f"{prefix}.beta", beta, "deliberateness β must be a number >= 0")
    if not isinstance(lam, (int, float)) or isinstance(lam, bool) or not lam > 0:
        raise ConfigError(f"{prefix}.lam", lam, "knowledgeability λ must be a number > 0 (or .inf)")


@dataclass
class TrajectoryPairs:
    """Pairs of trajectories with labels, batched over seeds: ``states [B, N, 2, H+1]``,
    ``actions [B, N, 2, H]``, embeddings ``phi [B, N, 2, d]``, labels ``y [B, N]`` (0 = τ0 preferred)."""

    states: Tensor
    actions: Tensor
    phi: Tensor
    y: Tensor

    @property
    def N(self) -> int:
        return self.y.shape[1]

    def winners(self) -> tuple[Tensor, Tensor]:
        """(states, actions) of the preferred trajectory of every pair: ``[B, N, H+1]``, ``[B, N, H]``."""
        idx = self.y.view(*self.y.shape, 1, 1)
        s = self.states.gather(2, idx.expand(-1, -1, 1, self.states.shape[-1])).squeeze(2)
        a = self.actions.gather(2, idx.expand(-1, -1, 1, self.actions.shape[-1])).squeeze(2)
        return s, a


def behaviour_policy(mdp: TabularMDP, kind: str = "uniform", epsilon: float = 0.5) -> Tensor:
    """The stochastic behaviour policy ``[H, S, A]`` that generates D0's trajectories.

    ``uniform``: uniformly random actions; ``eps-optimal``: the optimal action w.p. 1 − ε, else uniform.
    """
    if kind not in BEHAVIOURS:
        raise ConfigError("offline.behaviour", kind, f"choose one of {list(BEHAVIOURS)}")
    if not 0.0 <= epsilon <= 1.0:
        raise ConfigError("offline.epsilon", epsilon, "must lie in [0, 1]")
    uni = torch.full((mdp.H, mdp.S, mdp.A), 1.0 / mdp.A, dtype=torch.float64, device=mdp.P.device)
    if kind == "uniform":
        return uni
    _, _, pi = value_iteration(mdp.P, mdp.r, mdp.H)
    opt = torch.nn.functional.one_hot(pi, mdp.A).to(torch.float64)
    return (1 - epsilon) * opt + epsilon * uni


def sample_pairs(
    mdp: TabularMDP, pi0: Tensor, pi1: Tensor, rater: Rater, *, generator=None
) -> TrajectoryPairs:
    """Roll out τ0 ∼ pi0 and τ1 ∼ pi1 (policies ``[B, N, H, S(, A)]``) on the true MDP and label them."""
    B, N = pi0.shape[:2]
    s0, a0 = rollout(mdp.P, mdp.rho, pi0.reshape(B * N, *pi0.shape[2:]), generator=generator)
    s1, a1 = rollout(mdp.P, mdp.rho, pi1.reshape(B * N, *pi1.shape[2:]), generator=generator)
    states = torch.stack([s0, s1], 1).reshape(B, N, 2, -1)
    actions = torch.stack([a0, a1], 1).reshape(B, N, 2, -1)
    phi = embed(mdp.features, states, actions)
    y = rater.label(phi[:, :, 0], phi[:, :, 1], generator=generator)
    return TrajectoryPairs(states, actions, phi, y)


def offline_dataset(
    mdp: TabularMDP,
    rater: Rater,
    N: int,
    behaviour: str = "uniform",
    epsilon: float = 0.5,
    *,
    generator=None,
) -> TrajectoryPairs:
    """D0: ``N`` pairs per seed (B = ``rater.vartheta.shape[0]``) from the behaviour policy, labelled."""
    if not isinstance(N, int) or isinstance(N, bool) or N < 0:
        raise ConfigError("offline.N", N, "must be an integer >= 0")
    B = rater.vartheta.shape[0]
    pi = behaviour_policy(mdp, behaviour, epsilon)
    if N == 0:
        z = torch.zeros(B, 0, 2, mdp.H + 1, dtype=torch.long, device=mdp.P.device)
        return TrajectoryPairs(
            z, z[..., :-1], torch.zeros(B, 0, 2, mdp.d, dtype=mdp.features.dtype), torch.zeros(B, 0).long()
        )
    pib = pi.expand(B, N, *pi.shape)
    return sample_pairs(mdp, pib, pib, rater, generator=generator)

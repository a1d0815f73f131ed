"""Raters over trajectory pairs and offline preference data D0, batched over seeds.

The rater (:class:`bayescrl.raters.BeliefRater`, one belief per seed) of competence (β, λ) holds
ϑ ∼ N(θ, I/λ²) and answers Y ∈ {0, 1} (0 = τ0 preferred) with the Bradley–Terry probability of Eq.
`pref_logistic_trajectories`, ``P(Y=0 | τ0, τ1; ϑ) = σ(β⟨φ(τ0) − φ(τ1), ϑ⟩)``. The *flawed greedy expert*
of the appendix section `Ablation Studies` answers ``Y = argmax_i β⟨φ(τ_i), ϑ⟩`` deterministically (exact
ties: a fair coin).

The samplers' ``generator`` is one stream or one per seed (:func:`~bayescrl.utils.seeding.run_generators`):
seed ``b``'s rater, trajectories and labels are then drawn from its own stream only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bayescrl.pbrl.mdp import TabularMDP, embed, rollout, value_iteration
from bayescrl.raters import BeliefRater, Rater, parse_rater
from bayescrl.utils.errors import ConfigError

BEHAVIOURS = ("uniform", "eps-optimal")


def offline_rater(off: dict) -> Rater:
    """The rater of an ``offline`` section ``{beta, lam, expert, ...}``, checked with the raters' schema
    (β ≥ 0, λ > 0 or ``.inf``, expert ``bt`` | ``greedy``; errors name ``offline.<key>``); a number that
    YAML read as a string (``1e4``) is written back as a float."""
    rater = parse_rater({k: off[k] for k in ("beta", "lam", "expert")}, "offline", finite=False, priors=False)
    for k in ("beta", "lam"):
        if isinstance(off[k], str):
            off[k] = getattr(rater, k)
    return rater


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

    def margins(self, theta_ref: Tensor) -> Tensor:
        """``s_n ⟨φ(τ0_n) − φ(τ1_n), θ_ref⟩ [B, N]`` (``s_n = +1`` if τ0 preferred): the input of
        :func:`bayescrl.raters.competence.beta_mle_given_theta`; ``theta_ref`` is ``[d]`` or per seed
        ``[B, d]``."""
        ref = theta_ref.unsqueeze(-2) if theta_ref.dim() == 2 else theta_ref
        z = ((self.phi[:, :, 0] - self.phi[:, :, 1]) * ref).sum(-1)  # [B, N]
        return (1.0 - 2.0 * self.y.to(z.dtype)) * z

    def winner_visits(self, A: int) -> Tensor:
        """State–action indices ``s·A + a`` ``[B, N·H]`` visited by the preferred trajectories: the input
        of :func:`bayescrl.raters.competence.beta_entropy` (ζ of the entropy rule)."""
        s, a = self.winners()
        H = a.shape[-1]
        return (s[..., :H] * A + a).reshape(s.shape[0], -1)


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
    mdp: TabularMDP, pi0: Tensor, pi1: Tensor, rater: BeliefRater, *, generator=None
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
    rater: BeliefRater,
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
            z,
            z[..., :-1],
            torch.zeros(B, 0, 2, mdp.d, dtype=mdp.features.dtype, device=z.device),
            torch.zeros(B, 0, dtype=torch.long, device=z.device),
        )
    pib = pi.expand(B, N, *pi.shape)
    return sample_pairs(mdp, pib, pib, rater, generator=generator)

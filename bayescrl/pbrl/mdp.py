"""Tabular episodic MDPs (S, A, H, P, r, ρ): exact finite-horizon value iteration, exact policy
evaluation and trajectory roll-outs, all batched in torch over a leading batch of MDPs.

Shapes: ``P [..., S, A, S]``, ``r [..., S, A]``, ``rho [..., S]``; deterministic non-stationary policies
are ``long [..., H, S]``, stochastic ones ``float [..., H, S, A]``. The Bellman recursion is
Eq. `approx_bellman` of the thesis with ``V_{H+1} = 0``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from bayescrl.utils.errors import ConfigError
from bayescrl.utils.seeding import multinomial

if TYPE_CHECKING:
    from bayescrl.utils.seeding import Streams


@dataclass
class TabularMDP:
    """One episodic MDP with known dynamics ``P [S,A,S]``, reward ``r [S,A]`` in [0,1], start ``rho [S]``.

    ``features [S,A,d]`` is the state–action embedding φ(s,a) (one-hot by default) and ``theta [d]`` the
    true reward parameter, with ``r = features @ theta`` (so r_θ(s,a) = θ_{s,a} for one-hot features).
    """

    P: Tensor
    rho: Tensor
    H: int
    features: Tensor
    theta: Tensor
    name: str = "mdp"
    info: dict | None = None

    def __post_init__(self) -> None:
        S, A, S2 = self.P.shape
        if S != S2:
            raise ConfigError("env.P", tuple(self.P.shape), "must have shape [S, A, S]")
        if self.H < 1:
            raise ConfigError("env.H", self.H, "must be >= 1")
        if not torch.allclose(
            self.P.sum(-1), torch.ones(S, A, dtype=self.P.dtype, device=self.P.device), atol=1e-6
        ):
            bad = (self.P.sum(-1) - 1).abs().argmax().item()
            raise ConfigError("env.P", f"row (s,a)={divmod(bad, A)}", "transition rows must sum to 1")
        if self.features.shape[:2] != (S, A):
            raise ConfigError("env.features", tuple(self.features.shape), f"must have shape [{S}, {A}, d]")
        if self.theta.shape != self.features.shape[-1:]:
            raise ConfigError("env.theta", tuple(self.theta.shape), "must have shape [d]")

    @property
    def S(self) -> int:
        return self.P.shape[0]

    @property
    def A(self) -> int:
        return self.P.shape[1]

    @property
    def d(self) -> int:
        return self.features.shape[-1]

    @property
    def r(self) -> Tensor:
        """True reward ``r_θ(s,a) = ⟨φ(s,a), θ⟩``, shape ``[S, A]``."""
        return self.features @ self.theta

    def to(self, device: str | torch.device) -> TabularMDP:
        return TabularMDP(
            self.P.to(device),
            self.rho.to(device),
            self.H,
            self.features.to(device),
            self.theta.to(device),
            self.name,
            self.info,
        )


def one_hot_features(S: int, A: int, *, dtype=torch.float64, device=None) -> Tensor:
    """The default embedding φ(s,a) = e_{s·A+a} ∈ R^{S·A}, shape ``[S, A, S·A]``."""
    return torch.eye(S * A, dtype=dtype, device=device).reshape(S, A, S * A)


def value_iteration(P: Tensor, r: Tensor, H: int) -> tuple[Tensor, Tensor, Tensor]:
    """Exact finite-horizon dynamic programming (Eq. `approx_bellman` with the max over actions).

    ``P [..., S, A, S]``, ``r [..., S, A]`` (any common leading batch shape, broadcast).
    Returns ``(V [..., H+1, S], Q [..., H, S, A], policy long [..., H, S])`` with ``V[..., H, :] = 0``
    and ties broken towards the lowest action index.
    """
    batch = torch.broadcast_shapes(P.shape[:-3], r.shape[:-2])
    S, A = r.shape[-2:]
    V = torch.zeros(*batch, H + 1, S, dtype=r.dtype, device=r.device)
    Q = torch.zeros(*batch, H, S, A, dtype=r.dtype, device=r.device)
    for h in range(H - 1, -1, -1):
        q = r + (P @ V[..., None, h + 1, :, None]).squeeze(-1)
        Q[..., h, :, :] = q
        V[..., h, :] = q.max(-1).values
    return V, Q, Q.argmax(-1)


def as_stochastic(policy: Tensor, A: int) -> Tensor:
    """Deterministic ``long [..., H, S]`` policy -> one-hot ``[..., H, S, A]`` (stochastic passes through)."""
    if policy.is_floating_point():
        return policy
    return torch.nn.functional.one_hot(policy, A).to(torch.float64)


def policy_value(P: Tensor, r: Tensor, rho: Tensor, policy: Tensor) -> Tensor:
    """Exact expected return ``E_{s_1∼ρ}[V^π_1(s_1)]`` of a (batched) policy on (batched) MDPs.

    ``policy`` is ``long [..., H, S]`` or ``float [..., H, S, A]``; returns shape ``[...]``.
    """
    A = r.shape[-1]
    pi = as_stochastic(policy, A).to(r.dtype)
    H = pi.shape[-3]
    batch = torch.broadcast_shapes(P.shape[:-3], r.shape[:-2], pi.shape[:-3])
    V = torch.zeros(*batch, r.shape[-2], dtype=r.dtype, device=r.device)
    for h in range(H - 1, -1, -1):
        q = r + (P @ V[..., None, :, None]).squeeze(-1)
        V = (pi[..., h, :, :] * q).sum(-1)
    return (rho.to(r.dtype) * V).sum(-1)


def simple_regret(mdp: TabularMDP, policy: Tensor) -> Tensor:
    """Simple regret (Eq. `simple_regret_def`) ``V*(ρ) − V^π(ρ)`` on the true MDP, exact; shape ``[...]``."""
    V, _, _ = value_iteration(mdp.P, mdp.r, mdp.H)
    v_star = (mdp.rho * V[0]).sum(-1)
    return v_star - policy_value(mdp.P, mdp.r, mdp.rho, policy)


def rollout(P: Tensor, rho: Tensor, policy: Tensor, *, generator: Streams = None) -> tuple[Tensor, Tensor]:
    """Sample one trajectory per batch element: ``policy`` long ``[B, H, S]`` or float ``[B, H, S, A]``.

    ``P`` is ``[S, A, S]`` (one true MDP) or ``[B, S, A, S]``. Returns ``(states [B, H+1], actions [B, H])``
    where ``states[:, H]`` is the state reached after the last action (not part of τ, whose H−1 observed
    transitions are ``states[:, h] → states[:, h+1]`` for h < H−1, as in Eq. `eta_informed_prior`).
    ``generator`` may be one generator per run (:func:`~bayescrl.utils.seeding.run_generators`): the B rows
    are then the runs' equal blocks, in order, each drawn from its run's stream.
    """
    B, H, S = policy.shape[:3]
    Pb = P.expand(B, *P.shape[-3:]) if P.dim() == 3 else P
    ar = torch.arange(B, device=P.device)
    states = torch.empty(B, H + 1, dtype=torch.long, device=P.device)
    actions = torch.empty(B, H, dtype=torch.long, device=P.device)
    states[:, 0] = multinomial(rho.expand(B, S).float(), 1, generator).squeeze(-1)
    for h in range(H):
        s = states[:, h]
        if policy.is_floating_point():
            a = multinomial(policy[ar, h, s].float(), 1, generator).squeeze(-1)
        else:
            a = policy[ar, h, s]
        actions[:, h] = a
        states[:, h + 1] = multinomial(Pb[ar, s, a].float(), 1, generator).squeeze(-1)
    return states, actions


def embed(features: Tensor, states: Tensor, actions: Tensor) -> Tensor:
    """Trajectory embedding φ(τ) = Σ_h φ(s_h, a_h): ``features [S,A,d]``, ``states [..., ≥H]``,
    ``actions [..., H]`` -> ``[..., d]`` (visit counts for one-hot features)."""
    H = actions.shape[-1]
    return features[states[..., :H], actions].sum(-2)


def transition_counts(
    states: Tensor, actions: Tensor, S: int, A: int, weights: Tensor | None = None
) -> Tensor:
    """Visit counts ``n[..., s, a, s']`` of the H−1 in-trajectory transitions of Eq. `eta_informed_prior`.

    ``states [..., N, H+1]``, ``actions [..., N, H]``, optional ``weights [..., N]`` (bootstrap weights).
    Returns ``[..., S, A, S]`` (batch dims are those before N).
    """
    H = actions.shape[-1]
    s, a, s2 = states[..., : H - 1], actions[..., : H - 1], states[..., 1:H]
    idx = (s * A + a) * S + s2  # [..., N, H-1]
    w = torch.ones_like(idx, dtype=torch.float64)
    if weights is not None:
        w = w * weights.to(torch.float64).unsqueeze(-1)
    batch = idx.shape[:-2]
    out = torch.zeros(*batch, S * A * S, dtype=torch.float64, device=states.device)
    out.scatter_add_(-1, idx.reshape(*batch, -1), w.reshape(*batch, -1))
    return out.reshape(*batch, S, A, S)

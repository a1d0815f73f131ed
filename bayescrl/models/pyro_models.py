"""The standard model as a Pyro program with named sample sites.

Sites (vectorisable with ``max_plate_nesting = 1``: every batch dimension is a plate at dim -1, so the
model runs under an outer particle plate at dim -2, as Pyro's vectorised ELBO and our generic bootstrap
require):

``theta``      θ ~ N(μ0, Σ0), event shape [d]                                 (prior ν0)
``beta_<id>``  β_i ~ prior (only for raters with unknown deliberateness)
``lam_<id>``   λ_i ~ prior (only for raters with unknown knowledgeability)
``vartheta``   ϑ_i ~ N(θ, I/λ_i²) in plate ``raters`` (R), event shape [d]
``pref``       Y_n ~ Bernoulli(σ(β_i⟨x1_n − x0_n, ϑ_i⟩)), plate ``prefs`` (Eq. `rater_preference_dist`;
               Y = 0 means x0 preferred, i.e. P(Y = 0) = σ(β⟨x0 − x1, ϑ⟩), Eq. `pref_logistic_trajectories`)
``reward``     R_s ~ N(⟨x_s, θ⟩, σ²), plate ``rewards``
``eta``        η(s, a) ~ Dir(α0), plate ``state_actions`` (S·A), event shape [S]
``transition`` s' ~ Categorical(η(s, a)), plate ``transitions``
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyro
import pyro.distributions as dist
import torch

from bayescrl.raters.likelihood import bt_logit
from bayescrl.raters.rater import COMPETENCE_PRIORS, CompetencePrior

__all__ = ["COMPETENCE_PRIORS", "CompetencePrior", "TransitionData", "bt_linear_model"]


@dataclass
class TransitionData:
    """Dirichlet transition model: ``alpha0 [S·A, S]`` and observed ``(s, a, next)`` index tensors."""

    num_states: int
    num_actions: int
    alpha0: torch.Tensor
    s: torch.Tensor
    a: torch.Tensor
    next: torch.Tensor


def bt_linear_model(
    mu0: torch.Tensor,
    cov0: torch.Tensor,
    beta: torch.Tensor,
    lam: torch.Tensor,
    noise_sd: float,
    x0: torch.Tensor,
    x1: torch.Tensor,
    y: torch.Tensor | None,
    rater: torch.Tensor,
    x: torch.Tensor,
    r: torch.Tensor | None,
    *,
    rater_ids: tuple[str, ...] | None = None,
    beta_priors: Mapping[int, CompetencePrior] | None = None,
    lam_priors: Mapping[int, CompetencePrior] | None = None,
    transitions: TransitionData | None = None,
) -> dict[str, torch.Tensor]:
    """The joint model p(θ, β, λ, ϑ, η, Y, R, s'); pass ``y=None`` / ``r=None`` to simulate.

    Sites in this order: ``theta``, ``beta_<id>``, ``lam_<id>``, ``vartheta``, ``pref``, ``reward``,
    ``eta``, ``transition`` (see the module docstring).
    """
    R = beta.shape[-1]
    ids = rater_ids or tuple(f"r{i}" for i in range(R))
    theta = pyro.sample("theta", dist.MultivariateNormal(mu0, covariance_matrix=cov0))
    beta_v = _competence(beta, beta_priors, "beta", ids, R)  # [..., R] or [R]
    lam_v = _competence(lam, lam_priors, "lam", ids, R)
    with pyro.plate("raters", R, dim=-1):
        vartheta = pyro.sample(
            "vartheta", dist.Normal(theta, (1.0 / lam_v).unsqueeze(-1)).to_event(1)
        )  # [R, d] (or [P, R, d]: θ is [P, 1, d] under a particle plate at dim -2)
    out = {"theta": theta, "vartheta": vartheta}
    if x0.shape[0] > 0:
        out["pref"] = _preference_site(vartheta, beta_v, x0, x1, y, rater)
    if x.shape[0] > 0:
        out["reward"] = _reward_site(theta, noise_sd, x, r)
    if transitions is not None:
        out.update(_transition_sites(transitions))
    return out


def _competence(
    fixed: torch.Tensor,
    priors: Mapping[int, CompetencePrior] | None,
    name: str,
    ids: tuple[str, ...],
    R: int,
) -> torch.Tensor:
    """β (or λ) of R raters ``[R]`` (``[P, R]`` under a particle plate), a site ``<name>_<id>`` per prior."""
    if not priors:
        return fixed
    cols = []
    for i in range(R):
        if i in priors:  # scalar site: shape [] (or [P, 1] under a particle plate at dim -2)
            v = pyro.sample(f"{name}_{ids[i]}", priors[i].distribution(fixed))
            cols.append(v.reshape(v.shape[:-1] + (1,)) if v.dim() else v.reshape(1))
        else:
            cols.append(fixed[i].reshape(1))
    return torch.cat(torch.broadcast_tensors(*cols), -1)  # [R] or [P, R]


def _preference_site(
    vartheta: torch.Tensor,
    beta_v: torch.Tensor,
    x0: torch.Tensor,
    x1: torch.Tensor,
    y: torch.Tensor | None,
    rater: torch.Tensor,
) -> torch.Tensor:
    """``pref``: Y_n ~ Bernoulli(σ(β_i⟨x1_n − x0_n, ϑ_i⟩)) of Eq. `rater_preference_dist`, plate ``prefs``."""
    vt_n = vartheta[..., rater, :]  # [..., N, d]
    logits = bt_logit(x1, x0, vt_n, beta_v[..., rater])  # logit P(Y = 1) = β⟨x1 − x0, ϑ⟩
    with pyro.plate("prefs", x0.shape[0], dim=-1):
        return pyro.sample("pref", dist.Bernoulli(logits=logits), obs=y)


def _reward_site(
    theta: torch.Tensor, noise_sd: float, x: torch.Tensor, r: torch.Tensor | None
) -> torch.Tensor:
    """``reward``: R_s ~ N(⟨x_s, θ⟩, σ²), plate ``rewards``."""
    mean = (x * theta).sum(-1)  # [T] (or [P, T])
    with pyro.plate("rewards", x.shape[0], dim=-1):
        return pyro.sample("reward", dist.Normal(mean, noise_sd), obs=r)


def _transition_sites(td: TransitionData) -> dict[str, torch.Tensor]:
    """``eta``: η(s, a) ~ Dir(α0) per (s, a); then the observed ``transition`` s' ~ Categorical(η(s, a))."""
    with pyro.plate("state_actions", td.num_states * td.num_actions, dim=-1):
        eta = pyro.sample("eta", dist.Dirichlet(td.alpha0))  # [..., S·A, S]
    out = {"eta": eta}
    if td.s.shape[0] > 0:
        sa = td.s * td.num_actions + td.a
        with pyro.plate("transitions", td.s.shape[0], dim=-1):
            out["transition"] = pyro.sample(
                "transition", dist.Categorical(probs=eta[..., sa, :]), obs=td.next
            )
    return out

"""The bandit (best-arm identification) version of PSPL (appendix section `Results for Bandits`).

Arms ``arms [A, d]``; θ ∼ N(μ0, Σ0) drawn per seed (Bayesian simple regret); the rater of competence
(β, λ) labels N offline pairs of uniformly drawn arms (Eq. `pref_logistic_trajectories` with φ(τ) = the
arm's features). Each online round: two perturbed-MAP posterior samples (Eq. `surrogate_perturbed_loss`,
the core's batched Newton), the two arms that are optimal for them, one preference, posterior update.
Top-two rule: if both samples pick the same arm, the second arm is the best *other* arm under the second
sample (the "top-two" of Top-Two Thompson Sampling — a departure only in that the thesis leaves ties
unspecified; re-sampling until the arms differ can take unboundedly long). Output: the arm optimal for
the plain MAP. Simple regret ``r_θ(a*) − r_θ(â_{K+1})``, batched over seeds, one random stream per seed
(:func:`~bayescrl.utils.seeding.run_generators`: seed ``b`` is the single-seed run with ``seed + b``).
"""

from __future__ import annotations

from functools import partial

import torch
from torch import Tensor
from tqdm.auto import tqdm

from bayescrl.inference.bootstrap import map_estimate, perturbed_map
from bayescrl.models.linear import BTLinearProblem
from bayescrl.raters import label
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.seeding import draw, randint, run_generators


def _label(theta_r: Tensor, x0: Tensor, x1: Tensor, beta: float, gen) -> Tensor:
    """Bradley–Terry labels of the rater with belief ``theta_r`` (:func:`bayescrl.raters.label`), float."""
    return label(x0, x1, theta_r, beta, "bt", gen).to(torch.float64)


def _check_inputs(arms: Tensor, N: int, K: int, seeds: int) -> None:
    """Refuse fewer than 2 arms or a negative N, K or no seed."""
    if arms.dim() != 2 or arms.shape[0] < 2:
        raise ConfigError("arms", tuple(arms.shape), "need a [A, d] matrix with A >= 2 arms")
    if N < 0 or K < 0 or seeds < 1:
        raise ConfigError("bandit", (N, K, seeds), "need N >= 0, K >= 0, seeds >= 1")


def _world(
    arms: Tensor, B: int, N: int, K: int, sigma0: float, beta: float, lam: float, gen: list[torch.Generator]
) -> tuple[Tensor, Tensor, BTLinearProblem]:
    """Per seed: θ ∼ N(0, σ0² I), the rater's belief ϑ = θ + ε/λ and the problem with the prior
    N(0, σ0² I), D0's ``N`` labelled pairs and room for ``K`` online preferences."""
    d = arms.shape[1]
    kw = {"dtype": torch.float64, "device": "cpu"}
    theta = sigma0 * draw(torch.randn, (B, d), gen, **kw)
    vartheta = theta + draw(torch.randn, (B, d), gen, **kw) / lam
    prob = BTLinearProblem.empty(
        torch.zeros(d, **kw),
        sigma0**2 * torch.eye(d, **kw),
        beta,
        lam,
        batch_size=B,
        pref_capacity=max(N + K, 1),
    )
    _label_offline(prob, arms, vartheta, N, beta, gen)
    return theta, vartheta, prob


def _label_offline(
    prob: BTLinearProblem, arms: Tensor, vartheta: Tensor, N: int, beta: float, gen: list[torch.Generator]
) -> None:
    """Write D0 into ``prob``: ``N`` pairs of uniformly drawn arms per seed, labelled by the rater with
    belief ``vartheta [B, d]`` (Eq. `pref_logistic_trajectories` with φ(τ) = the arm's features)."""
    if not N:
        return
    B, A = vartheta.shape[0], arms.shape[0]
    i0 = randint(A, (B, N), gen)
    i1 = randint(A, (B, N), gen)
    x0, x1 = arms[i0], arms[i1]
    prob.x0[:, :N], prob.x1[:, :N] = x0, x1
    prob.y[:, :N] = _label(vartheta.unsqueeze(1), x0, x1, beta, gen)
    prob.pref_mask[:, :N] = True


def _top_two(scores: Tensor) -> tuple[Tensor, Tensor]:
    """The arms ``[B]`` optimal under two posterior samples (``scores [B, 2, A]``); when they coincide the
    second is the best *other* arm under the second sample (the top-two rule)."""
    ar = torch.arange(scores.shape[0], device="cpu")
    a0 = scores[:, 0].argmax(-1)
    s1 = scores[:, 1].clone()
    a1 = s1.argmax(-1)
    same = a1 == a0
    s1[ar, a0] = -torch.inf
    return a0, torch.where(same, s1.argmax(-1), a1)


def run_bandit_bai(
    arms: Tensor,
    *,
    seeds: int = 5,
    N: int = 100,
    K: int = 50,
    beta: float = 10.0,
    lam: float = 10.0,
    sigma0: float = 1.0,
    p_online: float = 0.75,
    p_offline: float = 0.6,
    seed: int = 0,
    progress: bool = False,
) -> dict:
    """Run bandit PSPL; returns ``{"simple_regret": [B, K+1], "theta": [B, d], ...}`` tensors."""
    _check_inputs(arms, N, K, seeds)
    arms = arms.to(torch.float64)
    B = seeds
    gen = run_generators(seed, B)
    theta, vartheta, prob = _world(arms, B, N, K, sigma0, beta, lam, gen)
    means = theta @ arms.T  # [B, A]
    best = means.max(-1).values
    ar = torch.arange(B, device="cpu")

    def output_regret() -> Tensor:
        th = map_estimate(prob, tol=1e-8, return_hessian=False).theta[:, 0]
        return best - means[ar, (th @ arms.T).argmax(-1)]

    sr = torch.zeros(B, K + 1, dtype=torch.float64, device="cpu")
    sr[:, 0] = output_regret()
    two_samples = partial(  # Eq. `surrogate_perturbed_loss`, the core's batched Newton
        perturbed_map,
        prob,
        2,
        p_offline=p_offline,
        p_online=p_online,
        online_reward_noise=False,
        generator=gen,
    )
    init = None
    for k in tqdm(range(K), disable=not progress, desc="bandit-pspl", leave=False):
        init = two_samples(init=init)
        a0, a1 = _top_two(init.theta @ arms.T)
        x0, x1 = arms[a0], arms[a1]
        y = _label(vartheta, x0, x1, beta, gen)
        prob.append_preferences(x0, x1, y, online=torch.ones(B, dtype=torch.bool, device="cpu"))
        sr[:, k + 1] = output_regret()
    return {"simple_regret": sr, "theta": theta, "best_mean": best}

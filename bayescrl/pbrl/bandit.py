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
    if arms.dim() != 2 or arms.shape[0] < 2:
        raise ConfigError("arms", tuple(arms.shape), "need a [A, d] matrix with A >= 2 arms")
    if N < 0 or K < 0 or seeds < 1:
        raise ConfigError("bandit", (N, K, seeds), "need N >= 0, K >= 0, seeds >= 1")
    arms = arms.to(torch.float64)
    A, d = arms.shape
    B = seeds
    gen = run_generators(seed, B)
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
    if N:
        i0 = randint(A, (B, N), gen)
        i1 = randint(A, (B, N), gen)
        x0, x1 = arms[i0], arms[i1]
        prob.x0[:, :N], prob.x1[:, :N] = x0, x1
        prob.y[:, :N] = _label(vartheta.unsqueeze(1), x0, x1, beta, gen)
        prob.pref_mask[:, :N] = True
    means = theta @ arms.T  # [B, A]
    best = means.max(-1).values
    ar = torch.arange(B, device="cpu")

    def output_regret() -> Tensor:
        th = map_estimate(prob, tol=1e-8, return_hessian=False).theta[:, 0]
        return best - means[ar, (th @ arms.T).argmax(-1)]

    sr = torch.zeros(B, K + 1, **kw)
    sr[:, 0] = output_regret()
    init = None
    for k in tqdm(range(K), disable=not progress, desc="bandit-pspl", leave=False):
        res = perturbed_map(
            prob,
            2,
            p_offline=p_offline,
            p_online=p_online,
            online_reward_noise=False,
            init=init,
            generator=gen,
        )
        init = res
        scores = res.theta @ arms.T  # [B, 2, A]
        a0 = scores[:, 0].argmax(-1)
        s1 = scores[:, 1].clone()
        a1 = s1.argmax(-1)
        same = a1 == a0
        s1[ar, a0] = -torch.inf
        a1 = torch.where(same, s1.argmax(-1), a1)
        x0, x1 = arms[a0], arms[a1]
        y = _label(vartheta, x0, x1, beta, gen)
        prob.append_preferences(x0, x1, y, online=torch.ones(B, dtype=torch.bool, device="cpu"))
        sr[:, k + 1] = output_regret()
    return {"simple_regret": sr, "theta": theta, "best_mean": best}

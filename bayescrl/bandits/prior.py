"""Informed prior ``ν1(θ) = P(θ | D0)`` of Eq. `informed_prior`, as a Gaussian, for Algorithm `Prefwarm-PS`.

Algorithm `Prefwarm-PS` needs ``ν1`` and exact posterior updates (Eq. `posterior_update_theta`). ``ν1``
is not conjugate, so a core engine approximates it by a Gaussian ``N(m_s, C_s)`` per seed, after which
the online updates are exact Gaussian–linear ones:

* ``laplace`` — the core's :func:`~bayescrl.inference.laplace.laplace`: MAP of lemma `mapestimatelemma`
  with no online data (batched Newton) and ``C = [H⁻¹]_{θθ}``, the θ-marginal of the Laplace
  approximation over ``(θ, ϑ)``;
* ``svi`` / ``nuts`` — the core's engines (:func:`bayescrl.inference.engines.fit`) on the Pyro model
  of the same likelihood, moment-matched to a Gaussian (mean and covariance of the θ draws).

The thesis' ``P(A_t | D_{t-1})`` term (the action-selection factor) does not depend on ``θ`` and is dropped,
as in the thesis' own lemma `mapestimatelemma`.
"""

from __future__ import annotations

from typing import Any

import torch

from bayescrl.bandits.agents import build_problem
from bayescrl.bandits.env import LinearBandit
from bayescrl.bandits.offline import OfflineData
from bayescrl.inference.engines import fit
from bayescrl.inference.laplace import laplace
from bayescrl.models.pyro_models import bt_linear_model
from bayescrl.utils.errors import ConfigError


def laplace_prior(
    env: LinearBandit, data: OfflineData, beta: torch.Tensor, lam: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Laplace approximation of ``ν1``: ``(mean [S,d], cov [S,d,d])``."""
    lap = laplace(build_problem(env, data, beta, lam))
    if not bool(lap.converged.all()):
        bad = int((~lap.converged).reshape(-1).nonzero()[0])
        why = f"MAP of the informed prior did not converge (seed {bad})"
        raise ConfigError("options.engine", "laplace", why)
    return lap.theta_mean, lap.theta_cov


def sampled_prior(
    env: LinearBandit,
    data: OfflineData,
    beta: torch.Tensor,
    lam: torch.Tensor,
    engine: str,
    num_samples: int = 2000,
    options: dict[str, Any] | None = None,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian moment-match of ``ν1`` by the core's ``svi`` or ``nuts`` engine on the Pyro model
    :func:`~bayescrl.models.pyro_models.bt_linear_model`. The Pyro model holds one data set, so seeds
    are fitted one after another (a documented exception to batching: these engines are the slow,
    reference paths; ``laplace`` is the batched default); seed ``s`` is fitted with seed ``seed + s``."""
    x0, x1 = data.features(env.arms)
    means, covs = [], []
    for s in range(env.num_seeds):
        kw = dict(
            mu0=env.mu0,
            cov0=env.cov0,
            beta=beta[s],
            lam=lam[s],
            noise_sd=env.noise_sd,
            x0=x0[s],
            x1=x1[s],
            y=data.y[s].to(env.arms.dtype),
            rater=data.rater[s],
            x=env.arms.new_zeros(0, env.d),
            r=env.arms.new_zeros(0),
        )
        post = fit(bt_linear_model, kw, engine=engine, seed=seed + s, **(options or {}))
        m, c = post.mean_cov("theta", n=num_samples, seed=seed + s)
        means.append(m)
        covs.append(c)
    return torch.stack(means).to(env.arms), torch.stack(covs).to(env.arms)


def informed_prior(
    env: LinearBandit,
    data: OfflineData,
    beta: torch.Tensor,
    lam: torch.Tensor,
    engine: str = "laplace",
    options: dict[str, Any] | None = None,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian approximation ``(mean [S,d], cov [S,d,d])`` of ``ν1`` by ``engine`` (``svi`` / ``nuts``:
    seed ``s`` fitted with seed ``seed + s``)."""
    if data.N == 0:
        S = env.num_seeds
        return env.mu0.expand(S, -1).clone(), env.cov0.expand(S, -1, -1).clone()
    if engine == "laplace":
        return laplace_prior(env, data, beta, lam)
    return sampled_prior(env, data, beta, lam, engine, options=options, seed=seed)

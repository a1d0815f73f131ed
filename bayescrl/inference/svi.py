"""Stochastic variational inference with Pyro autoguides and ELBO convergence detection."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyro
import pyro.infer.autoguide as ag
import torch
from pyro.infer import SVI, Trace_ELBO
from pyro.optim import ClippedAdam
from tqdm.auto import tqdm

from bayescrl.inference.sites import SiteInfo, from_particles
from bayescrl.utils.errors import ConfigError

GUIDES = {
    "normal": ag.AutoNormal,
    "mvn": ag.AutoMultivariateNormal,
    "lowrank": ag.AutoLowRankMultivariateNormal,
}


def fit_svi(
    model: Callable,
    infos: dict[str, SiteInfo],
    *,
    guide: str = "mvn",
    lr: float = 0.02,
    max_steps: int = 5000,
    min_steps: int = 300,
    window: int = 100,
    rtol: float = 2e-3,
    num_particles: int = 4,
    max_plate_nesting: int = 1,
    seed: int = 0,
    progress: bool = False,
    rank: int | None = None,
) -> tuple[Callable[[int, torch.Generator], dict[str, torch.Tensor]], dict[str, Any]]:
    """Fit ``guide`` ∈ {normal, mvn, lowrank} by maximising the ELBO (ClippedAdam, learning-rate decay).

    Convergence: every ``window`` steps the mean loss of the last window is compared with the previous
    window's; the run stops when the decrease is below ``rtol`` · |loss| + 2 standard errors of the
    window mean, i.e. indistinguishable from Monte-Carlo noise. Returns a sampler and diagnostics
    (``elbo`` trace, ``steps``, ``converged``).
    """
    if guide not in GUIDES:
        raise ConfigError("svi.guide", guide, f"must be one of {sorted(GUIDES)}")
    pyro.clear_param_store()
    pyro.set_rng_seed(seed)
    kw = {"rank": rank} if guide == "lowrank" and rank else {}
    g = GUIDES[guide](model, init_scale=0.05, **kw) if guide != "lowrank" else GUIDES[guide](model, **kw)
    optim = ClippedAdam({"lr": lr, "lrd": 0.1 ** (1 / max_steps)})
    elbo = Trace_ELBO(
        num_particles=num_particles, vectorize_particles=True, max_plate_nesting=max_plate_nesting
    )
    svi = SVI(model, g, optim, elbo)
    losses: list[float] = []
    converged = False
    bar = tqdm(range(max_steps), desc=f"svi[{guide}]", disable=not progress, leave=False)
    for step in bar:
        losses.append(float(svi.step()))
        if step + 1 >= max(min_steps, 2 * window) and (step + 1) % window == 0:
            last = torch.tensor(losses[-window:])
            prev = torch.tensor(losses[-2 * window : -window])
            change = float(prev.mean() - last.mean())
            noise = float(last.std()) / window**0.5
            if change < rtol * abs(float(last.mean())) + 2 * noise:
                converged = True
                break
            bar.set_postfix(loss=f"{float(last.mean()):.3f}")
    latents = [k for k, i in infos.items() if not i.observed]

    def sampler(n: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
        pyro.set_rng_seed(int(torch.randint(2**31 - 1, (1,), generator=gen)))
        with torch.no_grad(), pyro.plate("_particles", n, dim=-(max_plate_nesting + 1)):
            s = g()
        return {k: from_particles(s[k], infos[k], n).double() for k in latents}

    diag = {"elbo": [-v for v in losses], "steps": len(losses), "converged": converged, "guide": guide}
    return sampler, diag

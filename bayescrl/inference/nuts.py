"""NUTS (Pyro) with several chains run one after another, R-hat and ESS from ArviZ, the per-draw energy
for ``az.bfmi`` and one progress bar over every chain's warm-up and draws.

``reparam`` samples every latent Normal site whose parameters depend on other latents (e.g.
ϑ ~ N(θ, I/λ²)) in non-centred form (``LocScaleReparam``): with λ = 100 the centred posterior is a
narrow ridge on which NUTS hits its maximum tree depth; the original sites are recomputed from the
draws, so the returned samples are the same variables. The progress bar's ETA counts the warm-up
iterations, which are slower than draws.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pyro
import torch
from pyro.infer import MCMC, NUTS
from tqdm.auto import tqdm

from bayescrl.inference.posterior import import_arviz
from bayescrl.inference.sites import SiteInfo, noncentred, recover_sites
from bayescrl.utils.runlog import progress_enabled


class EnergyNUTS(NUTS):
    """Pyro's NUTS that records the Hamiltonian ``H = U(z) + K(r)`` at the start of every trajectory (the
    position of the previous draw with the freshly drawn momentum) in ``energies``: the ``energy`` sample
    statistic of Stan and ArviZ (``az.bfmi``). Along a trajectory ``H`` is conserved up to the integrator's
    error, so this is, to that error, the energy of the draw the trajectory selects."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.energies: list[float] = []
        self._energy: float | None = None  # of the current iteration; None outside sample()

    def sample(self, params):
        self._energy = float("nan")
        try:
            return super().sample(params)
        finally:
            self.energies.append(self._energy)
            self._energy = None

    def _sample_r(self, name):
        r, r_unscaled = super()._sample_r(name)
        # the first momentum of an iteration starts its trajectory; later ones (step-size searches of the
        # adaptation, and the setup's) are not draws
        if self._energy is not None and self._energy != self._energy:
            _, potential, _ = self._fetch_from_cache()  # cached by sample() just before drawing r
            self._energy = float(self._kinetic_energy(r_unscaled) + potential)
        return r, r_unscaled


def fit_nuts(
    model: Callable,
    infos: dict[str, SiteInfo],
    *,
    num_samples: int = 500,
    warmup: int = 300,
    num_chains: int = 2,
    max_plate_nesting: int = 1,
    target_accept: float = 0.8,
    jit: bool = False,
    reparam: bool = True,
    seed: int = 0,
    progress: bool = False,
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], dict[str, Any]]:
    """Run ``num_chains`` NUTS chains sequentially (seed, seed+1, ...).

    ``reparam``: non-centred latent Normal sites (module docstring); ``progress``: one bar over all chains'
    warm-up and draws, hidden when the ``bayescrl`` logger is quiet (``-q``).

    Returns ``chains {site: [C, D, *shape]}``, ``sample_stats {diverging, energy: [C, D]}`` and diagnostics
    (max R-hat and min bulk ESS over all scalar components of every latent site, divergences,
    ``converged`` and ``warnings``: R-hat > 1.01, bulk ESS < 100 per chain, any divergence; ``fit``
    raises each as a ``RuntimeWarning``). With one chain R-hat is not computed.
    """
    latents = [k for k, i in infos.items() if not i.observed]
    run_model, rinfos = noncentred(model, infos) if reparam else (model, infos)
    kernel_of = partial(
        EnergyNUTS,
        run_model,
        target_accept_prob=target_accept,
        max_plate_nesting=max_plate_nesting,
        jit_compile=jit,
        ignore_jit_warnings=True,
    )
    bar = _progress_bar(num_chains * (warmup + num_samples), progress)
    clock = {"warmup": 0.0, "sampling": 0.0}
    per_chain, diverging, energy = [], [], []  # per chain: draws {site: [D, *shape]}, [D], [D]
    for c in range(num_chains):
        mcmc, kernel = _run_chain(kernel_of, c, num_chains, num_samples, warmup, seed + c, bar, clock)
        s = mcmc.get_samples()
        if run_model is not model:
            s = recover_sites(run_model, s, rinfos, infos, max_plate_nesting)
        per_chain.append({k: s[k].double() for k in latents})
        diverging.append(_divergences(mcmc, num_samples))
        if len(kernel.energies) == warmup + num_samples:  # (a model without latents draws no momentum)
            energy.append(torch.tensor(kernel.energies[warmup:], dtype=torch.float64, device="cpu"))
    bar.close()
    chains, stats = _stack(per_chain, diverging, energy, latents)
    return chains, stats, _diagnostics(chains, stats, clock, num_chains, num_samples, warmup)


def _stack(
    per_chain: list[dict[str, torch.Tensor]],
    diverging: list[torch.Tensor],
    energy: list[torch.Tensor],
    latents: list[str],
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The chains ``{site: [C, D, *shape]}`` and sample stats ``{diverging, energy: [C, D]}`` (energy only
    when every chain recorded one)."""
    chains = {k: torch.stack([pc[k] for pc in per_chain]) for k in latents}
    stats = {"diverging": torch.stack(diverging).bool()}
    if len(energy) == len(per_chain):
        stats["energy"] = torch.stack(energy)
    return chains, stats


def _progress_bar(total: int, progress: bool) -> tqdm:
    """The one bar over every chain's warm-up and draws."""
    return tqdm(
        total=total,
        desc="nuts",
        unit="it",
        leave=False,
        smoothing=0.1,
        disable=not progress_enabled(progress),
    )


def _run_chain(
    kernel_of: Callable[[], EnergyNUTS],
    c: int,
    num_chains: int,
    num_samples: int,
    warmup: int,
    seed: int,
    bar: tqdm,
    clock: dict[str, float],
) -> tuple[MCMC, EnergyNUTS]:
    """Run chain ``c`` (Pyro seed ``seed``) on a fresh ``kernel_of()``, advancing ``bar`` and adding its
    warm-up and sampling wall-clock seconds to ``clock``."""
    marks = [time.perf_counter()]  # start, end of warmup (set by the hook), end of sampling

    def hook(_kernel, _params, stage, i):
        if stage.startswith("Warmup") and i == warmup - 1:
            marks.append(time.perf_counter())
        if i == 0:
            phase = "warm-up" if stage.startswith("Warmup") else "sampling"
            bar.set_description(f"nuts chain {c + 1}/{num_chains} {phase}", refresh=False)
        bar.update(1)

    pyro.set_rng_seed(seed)
    kernel = kernel_of()
    mcmc = MCMC(
        kernel,
        num_samples=num_samples,
        warmup_steps=warmup,
        num_chains=1,
        disable_progbar=True,  # our bar covers every chain (Pyro's restarts per chain)
        hook_fn=hook,
    )
    mcmc.run()
    end = time.perf_counter()
    warm_end = marks[1] if len(marks) > 1 else marks[0]
    clock["warmup"] += warm_end - marks[0]  # includes the JIT compilation (jit=True)
    clock["sampling"] += end - warm_end
    return mcmc, kernel


def _divergences(mcmc: MCMC, num_samples: int) -> torch.Tensor:
    """Boolean ``[num_samples]``: which draws of the (one-chain) ``mcmc`` ended in a divergence."""
    div = torch.zeros(num_samples, dtype=torch.bool, device="cpu")
    idx = mcmc.diagnostics().get("divergences", {}).get("chain 0", [])
    div[torch.as_tensor(list(idx), dtype=torch.long, device="cpu")] = True
    return div


def _diagnostics(
    chains: dict[str, torch.Tensor],
    stats: dict[str, torch.Tensor],
    clock: dict[str, float],
    num_chains: int,
    num_samples: int,
    warmup: int,
) -> dict[str, Any]:
    """Sizes, wall-clock split, R-hat / ESS, divergences, warnings and ``converged`` of the chains."""
    diag = {"num_chains": num_chains, "num_samples": num_samples, "warmup": warmup}
    # wall-clock split: warmup (with JIT compilation) and the post-warmup draws (steady-state speed)
    diag["warmup_seconds"], diag["sampling_seconds"] = clock["warmup"], clock["sampling"]
    diag.update(rhat_ess(chains))
    diag["divergences"] = int(stats["diverging"].sum())
    diag["warnings"] = nuts_warnings(diag)
    diag["converged"] = not diag["warnings"]
    return diag


RHAT_MAX = 1.01  # Vehtari et al. (2021), ArviZ's threshold
ESS_PER_CHAIN = 100  # bulk ESS below 100 per chain: summaries are unreliable


def nuts_warnings(diag: dict[str, Any]) -> list[str]:
    """Reasons not to trust the chains: R-hat > 1.01, bulk ESS < 100 per chain, any divergence."""
    out = []
    rhat, ess, chains = diag.get("rhat_max", np.nan), diag.get("ess_bulk_min", np.nan), diag["num_chains"]
    if rhat > RHAT_MAX:
        out.append(f"R-hat {rhat:.3f} > {RHAT_MAX} (chains disagree; run longer: num_samples, warmup)")
    if ess < ESS_PER_CHAIN * chains:
        out.append(f"bulk ESS {ess:.0f} < {ESS_PER_CHAIN} per chain ({ESS_PER_CHAIN * chains})")
    if diag.get("divergences", 0) > 0:
        out.append(f"{diag['divergences']} divergent transitions (raise target_accept or reparametrise)")
    return out


def rhat_ess(chains: dict[str, torch.Tensor]) -> dict[str, float]:
    """Max rank-normalised R-hat and min bulk ESS over all components (ArviZ)."""
    az = import_arviz()
    rhat, ess = [], []
    for v in chains.values():
        arr = v.reshape(v.shape[0], v.shape[1], -1).cpu().numpy()
        for j in range(arr.shape[-1]):
            x = arr[..., j]
            if arr.shape[0] > 1:
                rhat.append(float(az.rhat(x)))
            ess.append(float(az.ess(x)))
    return {
        "rhat_max": float(np.nanmax(rhat)) if rhat else float("nan"),
        "ess_bulk_min": float(np.nanmin(ess)) if ess else float("nan"),
    }

"""The engine-independent :class:`Posterior` and its ArviZ conversion."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from bayescrl.inference.arviz import import_arviz, num_draws, split_chains, to_inference_data
from bayescrl.inference.sites import SiteInfo, pointwise_log_lik
from bayescrl.utils.checks import check_seed, choice, positive_int
from bayescrl.utils.errors import DataError

__all__ = ["DIMS", "Posterior", "import_arviz"]

# ArviZ dimension names of the standard model's sites (others get <site>_dim_k)
DIMS = {
    "theta": ["theta_dim"],
    "vartheta": ["rater", "vartheta_dim"],
    "eta": ["state_action", "next_state"],
    "pref": ["pref_obs"],
    "reward": ["reward_obs"],
    "transition": ["transition_obs"],
}


@dataclass
class Posterior:
    """Posterior samples by site, produced by one engine.

    ``sample(n, seed)`` returns ``{site: tensor [n, *site_shape]}``; MCMC posteriors resample their
    stored draws (without replacement when ``n`` ≤ draws), the others draw fresh samples.
    ``diagnostics`` holds engine-specific convergence information (gradient norms, ELBO trace,
    R-hat / ESS, ...). ``approximate`` is False only for the exact engine (and NUTS in the limit).
    """

    engine: str
    sampler: Callable[[int, torch.Generator], dict[str, torch.Tensor]] | None
    model: Callable | None
    infos: dict[str, SiteInfo]
    observed: dict[str, torch.Tensor]
    approximate: bool = True
    max_plate_nesting: int = 1
    chains: dict[str, torch.Tensor] | None = None  # MCMC draws [C, D, *shape]
    sample_stats: dict[str, torch.Tensor] | None = None  # [C, D]
    diagnostics: dict[str, Any] = field(default_factory=dict)
    coords: dict[str, list] = field(default_factory=dict)

    @property
    def latent_sites(self) -> list[str]:
        return [k for k, i in self.infos.items() if not i.observed]

    def sample(self, n: int = 1000, seed: int | None = 0) -> dict[str, torch.Tensor]:
        """``n`` draws ``{site: [n, *shape]}``; ``seed`` in [0, 2**63 - 1], or None for a fresh random one."""
        n = positive_int(n, "n")
        gen = torch.Generator()
        if seed is None:
            gen.seed()
        else:
            gen.manual_seed(check_seed(seed))
        if self.chains is not None:
            flat = {k: v.reshape(-1, *v.shape[2:]) for k, v in self.chains.items()}
            total = next(iter(flat.values())).shape[0]
            idx = (
                torch.randperm(total, generator=gen)[:n]
                if n <= total
                else torch.randint(total, (n,), generator=gen)
            )
            return {k: v[idx] for k, v in flat.items()}
        return self.sampler(n, gen)

    def mean_cov(
        self, site: str = "theta", n: int = 4000, seed: int | None = 0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and covariance of ``site`` (flattened) from ``n`` draws."""
        n = positive_int(n, "n")
        draws = self.sample(n, seed)
        s = draws[choice(site, "site", list(draws))].reshape(n, -1).double()
        return s.mean(0), torch.cov(s.T).reshape(s.shape[1], s.shape[1])

    def to_arviz(self, n: int = 1000, seed: int = 0, log_likelihood: bool | str = True):
        """``arviz.InferenceData`` with posterior (chain, draw, named dims), observed data, sample stats
        (MCMC: ``diverging``, ``energy``) and a shape-checked pointwise log_likelihood group.

        MCMC posteriors keep their chains. The other engines' independent draws are split into 4 chains
        (:func:`bayescrl.inference.arviz.draws_to_arviz`), ``n`` rounded up to a multiple of 4, so that
        ``az.rhat`` and ``az.summary`` work without warnings.

        ``log_likelihood``: ``True`` / ``"joint"`` (default) gives ArviZ one variable, so that
        ``az.loo(idata)`` and ``az.compare`` work without ``var_name``: the observed site's own name when
        the model has one observed site, else ``joint`` — every observation of every site (``pref``,
        ``reward``, ``transition``, in site order) concatenated along dim ``observation``, whose coordinate
        labels them ``pref[0]``, ..., ``reward[0]``, ...; ``"sites"``: one variable per observed site
        (``az.loo(idata, var_name="pref")``); ``"both"``: all of them; ``False``: no group.
        """
        if log_likelihood not in (True, False, "joint", "sites", "both"):
            raise DataError(
                "log_likelihood", log_likelihood, "must be True, False, 'joint', 'sites' or 'both'"
            )
        post = self._draws_by_chain(positive_int(n, "n"), seed)
        dims = {k: _dims(k, v.dim() - 2) for k, v in post.items()}
        coords = dict(self.coords or {})
        ll = None
        if log_likelihood and self.model is not None and self.observed:
            mode = "joint" if log_likelihood is True else log_likelihood
            ll = _log_likelihood_group(self._pointwise_log_lik(post), mode, dims, coords)
        return to_inference_data(
            post,
            dims=dims,
            coords=coords,
            attrs={"engine": self.engine, "approximate": int(self.approximate)},
            observed_data=dict(self.observed),
            log_likelihood=ll,
            sample_stats=self.sample_stats,
        )

    def _draws_by_chain(self, n: int, seed: int) -> dict[str, torch.Tensor]:
        """Latent draws ``{site: [C, D, *shape]}``: the MCMC chains, else ``num_draws(n)`` independent draws
        split into 4 chains."""
        if self.chains is not None:
            post = {k: v for k, v in self.chains.items()}
        else:
            post = {
                k: torch.as_tensor(split_chains(v), device="cpu")
                for k, v in self.sample(num_draws(n), seed).items()
            }
        return {k: v for k, v in post.items() if k in self.infos and not self.infos[k].observed}

    def _pointwise_log_lik(self, post: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Pointwise log-likelihood ``{observed site: [C, D, *obs shape]}`` of the draws ``post``, each
        checked against the shape of its observations."""
        C, D = next(iter(post.values())).shape[:2]
        flat = {k: v.reshape(C * D, *v.shape[2:]) for k, v in post.items()}
        lik = pointwise_log_lik(self.model, flat, self.infos, self.max_plate_nesting)
        sites = {}
        for k, v in lik.items():
            want = (C * D, *self.observed[k].shape)
            if tuple(v.shape) != want:
                raise RuntimeError(f"log_likelihood[{k}] has shape {tuple(v.shape)}, expected {want}")
            sites[k] = v.reshape(C, D, *v.shape[1:])
        return sites


def _log_likelihood_group(
    sites: dict[str, torch.Tensor], mode: str, dims: dict[str, list[str]], coords: dict[str, list]
) -> dict[str, torch.Tensor]:
    """The log_likelihood variables of ``mode`` (``joint``, ``sites`` or ``both``; see
    :meth:`Posterior.to_arviz`); adds their dims and the ``observation`` coordinate to ``dims``/``coords``.
    """
    ll = {}
    if mode in ("sites", "both") or (mode == "joint" and len(sites) == 1):
        for k, v in sites.items():
            ll[k] = v
            dims[k] = _dims(k, v.dim() - 2)
    if mode == "both" or (mode == "joint" and len(sites) > 1):
        ll["joint"] = torch.cat([v.reshape(*v.shape[:2], -1) for v in sites.values()], -1)
        dims["joint"] = ["observation"]
        coords["observation"] = [f"{k}[{i}]" for k, v in sites.items() for i in range(v[0, 0].numel())]
    return ll


def _dims(site: str, ndim: int) -> list[str]:
    names = DIMS.get(site, [])
    if len(names) == ndim:
        return list(names)
    return [f"{site}_dim_{i}" for i in range(ndim)]

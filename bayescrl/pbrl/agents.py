"""Online agents for best-policy identification from trajectory preferences, batched over B seeds.

Every online agent implements ``policies() -> (π0, π1)`` (the two policies of the current episode, each
``long [B, H, S]`` or a stochastic ``float [B, H, S, A]``), ``observe(pairs)`` (one labelled pair per seed)
and ``output_policy()`` (the policy it would return if stopped now; scored by simple regret).

* :class:`PSPL` — Algorithm `main_algo_theoretical`: two posterior samples of (η, θ) per episode,
  η from the exact Dirichlet posterior (Eq. `eta_informed_prior`), θ from a Laplace (Gaussian)
  approximation of the posterior of Eq. `theta_informed_prior` (MAP of lemma `chapter4mapestimatelemma`
  and the inverse Hessian of its loss; the rater belief ϑ is marginalised within that Gaussian), or a
  Gaussian moment-matched to the core's svi / nuts draws, refitted every ``refit_every`` episodes;
  output: optimal policy of the MAP (θ_MAP, Dirichlet mode).
* :class:`PSPLBootstrap` — Algorithm `main_algo_empirical`: two perturbed MAPs of Eq.
  `surrogate_perturbed_loss` (online Bern(0.75) weights ζ_t, offline Bern(0.6) weights ω_n, prior
  anchoring θ', ϑ'); η̂ is the mode of the Dirichlet whose counts carry the same weights (the η part of
  the perturbed loss: offline transitions weighted by ω_n — a departure: L2 of the lemma has no transition
  term although Eq. `eta_informed_prior` uses offline transitions; we keep them, perturbed like their
  preferences); output π_{K+1} ≡ π^{(0)}_{K+1}, as the algorithm states.
* :class:`Uniform` — uniformly random exploration, same posterior as PSPL, output from its MAP.
* :class:`DPS` — Dueling Posterior Sampling (Novoseller et al. 2020): Bayesian linear regression of the
  label ±½ on φ(τ0) − φ(τ1) (exact Gaussian posterior, rank-one updates) and Dirichlet dynamics, both
  initialised with D0 as in the thesis; two independent posterior samples per episode; output from the
  posterior means. DPS ignores the rater's competence (β, λ) — the point of comparison.
* :class:`LPbRL` — a tractable version of Saha et al. (2023), without D0 (as in the thesis). The original
  maximises over pairs of policies in a confidence set, which needs an enumeration of exponentially many
  policies. We keep its ingredients — logistic MLE θ̂ of the online comparisons, elliptical confidence
  width ‖φ(s,a)‖_{V⁻¹} with V = κI + Σ_t Δ_tΔ_tᵀ, empirical dynamics with a 1/√n transition bonus — and
  replace the pair search by: π0 = optimal for the optimistic reward θ̂ + bonus, π1 = optimal for the bonus
  alone (the most uncertain partner); output: optimal for (θ̂, P̂).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from bayescrl.inference.exact import DirichletPosterior, GaussianLinearPosterior
from bayescrl.pbrl.data import TrajectoryPairs
from bayescrl.pbrl.mdp import TabularMDP, transition_counts, value_iteration
from bayescrl.pbrl.posterior import (
    TrajectoryPreferenceModel,
    dirichlet_mode,
    engine_theta,
    laplace_theta,
)
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.seeding import draw, randint

if TYPE_CHECKING:
    from bayescrl.utils.seeding import Streams


@dataclass
class Context:
    """What every agent may know: the MDP's sizes and features (not P, r), D0, priors, budget."""

    mdp: TabularMDP
    data: TrajectoryPairs
    K: int
    generator: Streams  # one stream, or one per seed (run_generators): seed b's draws from its own
    mu0: float = 0.0
    sigma0: float = 1.0
    alpha0: float = 1.0
    beta: Tensor | float = 1.0  # the agent's (possibly misspecified / estimated) rater competence
    lam: float = 1.0
    behaviour: Tensor | None = None  # D0's behaviour policy [H, S, A] (offline baselines' π_ref)
    params: dict = field(default_factory=dict)

    @property
    def B(self) -> int:
        return self.data.y.shape[0]

    @property
    def device(self) -> torch.device:
        """Where the MDP (and so every agent's posterior) lives."""
        return self.mdp.P.device

    def reward(self, theta: Tensor) -> Tensor:
        """r_θ(s, a) = ⟨φ(s,a), θ⟩ for ``theta [..., d]`` -> ``[..., S, A]``."""
        return torch.einsum("sad,...d->...sa", self.mdp.features, theta)


class OnlineAgent:
    """Base class: holds the context and the current pair of policies."""

    name = "agent"

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.S, self.A, self.H = ctx.mdp.S, ctx.mdp.A, ctx.mdp.H

    def policies(self) -> tuple[Tensor, Tensor]:
        raise NotImplementedError

    def observe(self, pairs: TrajectoryPairs) -> None:
        raise NotImplementedError

    def output_policy(self) -> Tensor:
        raise NotImplementedError


class _PrefPosteriorAgent(OnlineAgent):
    """Shared state: the core preference problem (D0 + online rows) and the Dirichlet dynamics counts."""

    def __init__(self, ctx: Context, *, use_offline: bool = True):
        super().__init__(ctx)
        self.model = TrajectoryPreferenceModel(
            ctx.data,
            self.S,
            self.A,
            ctx.K,
            mu0=ctx.mu0,
            sigma0=ctx.sigma0,
            beta=ctx.beta,
            lam=ctx.lam,
            use_offline=use_offline,
            device=ctx.mdp.P.device,
        )
        self.tol = float(ctx.params.get("tol", 1e-6))
        self.max_iter = int(ctx.params.get("max_iter", 50))
        self.map_init = None
        self._map_cache = None
        self.solver_iters: list[int] = []
        self.not_converged = 0

    def _track(self, res) -> None:
        self.solver_iters.append(int(res.iters))
        self.not_converged += int((~res.converged).sum())

    def plain_map(self, *, hessian: bool = False):
        """MAP of lemma `chapter4mapestimatelemma` on the current data (cached until the next observe)."""
        cached = self._map_cache
        if cached is not None and (cached.hessian is not None or not hessian):
            return cached
        res, _ = self.model.solve(
            1,
            perturbed=False,
            init=self.map_init,
            tol=self.tol,
            max_iter=self.max_iter,
            return_hessian=hessian,
        )
        self._track(res)
        self.map_init = self._map_cache = res
        return res

    def map_policy(self) -> Tensor:
        """Optimal policy of (θ_MAP, Dirichlet mode): the output rule of Algorithm `main_algo_theoretical`."""
        res = self.plain_map()
        eta = dirichlet_mode(self.ctx.alpha0 + self.model.counts())
        _, _, pi = value_iteration(eta, self.ctx.reward(res.theta[:, 0]), self.H)
        return pi

    def observe(self, pairs: TrajectoryPairs) -> None:
        self.model.append(pairs)
        self._map_cache = None


class PSPL(_PrefPosteriorAgent):
    """Top-two posterior sampling (Algorithm `main_algo_theoretical`); θ-posterior by a core engine.

    ``agent_params.pspl``:

    * ``engine`` — ``laplace`` (default: batched Newton MAP + θ-block of the inverse Hessian, refitted
      every episode), ``svi`` or ``nuts`` (the core's :func:`bayescrl.inference.engines.fit` on the Pyro
      model ``bt_linear_model`` of the same likelihood, one fit per seed, see
      :func:`~bayescrl.pbrl.posterior.engine_theta`);
    * ``refit_every`` (svi / nuts only, default 10) — refit θ's posterior after every ``refit_every``
      online episodes (and once on D0 before episode 1). *Departure*: between refits the top-two samples
      come from the last fit, i.e. a posterior that lags by up to ``refit_every − 1`` comparisons (a fit
      per episode costs seconds to minutes per seed); ``refit_every: 1`` is the algorithm as written;
    * ``samples`` (default 1000) — draws of the engine's ``Posterior`` used for the moment match;
    * ``options`` — engine options passed to ``fit`` (e.g. ``{max_steps: 500, guide: mvn}``).

    The svi / nuts posterior is moment-matched to a Gaussian N(m, C) (the warmPref-PS pattern of
    ``bayescrl.bandits.prior``) and the two θ samples per episode are drawn from it, so all engines feed
    the same batched sampler; for NUTS this keeps only the first two moments of its draws. η is always
    the exact Dirichlet posterior. Output π_{K+1}: the optimal policy of (θ_MAP, Dirichlet mode) — the
    MAP of lemma `chapter4mapestimatelemma` (batched Newton), whatever the engine, as the algorithm states.
    """

    name = "pspl"
    ENGINES = ("laplace", "svi", "nuts")

    def __init__(self, ctx: Context):
        super().__init__(ctx)
        prm = ctx.params
        self.engine = prm.get("engine", "laplace")
        if self.engine not in self.ENGINES:
            raise ConfigError(
                "agents.pspl.engine", self.engine, f"supported θ-posterior engines: {list(self.ENGINES)}"
            )
        self.refit_every = prm.get("refit_every", 10)
        if (
            isinstance(self.refit_every, bool)
            or not isinstance(self.refit_every, int)
            or self.refit_every < 1
        ):
            raise ConfigError("agent_params.pspl.refit_every", self.refit_every, "must be an integer >= 1")
        self.num_samples = prm.get("samples", 1000)
        if (
            isinstance(self.num_samples, bool)
            or not isinstance(self.num_samples, int)
            or self.num_samples < 2
        ):
            raise ConfigError("agent_params.pspl.samples", self.num_samples, "must be an integer >= 2")
        self.engine_options = prm.get("options", {}) or {}
        if not isinstance(self.engine_options, dict):
            raise ConfigError("agent_params.pspl.options", self.engine_options, "must be a mapping")
        self._gauss: tuple[Tensor, Tensor] | None = None
        self._since_fit = 0
        self.fits = 0
        self.eta = DirichletPosterior(
            torch.full(
                (ctx.B, self.S, self.A, self.S), float(ctx.alpha0), dtype=torch.float64, device=ctx.device
            ),
            device=ctx.device,
        )
        self.eta.counts += self.model.counts()

    def theta_posterior(self) -> tuple[Tensor, Tensor]:
        """Gaussian ``(mean [B, d], cov [B, d, d])`` of θ's posterior used for the top-two samples."""
        if self.engine == "laplace":
            return laplace_theta(self.plain_map(hessian=True), self.model.d)
        if self._gauss is None or self._since_fit >= self.refit_every:
            g = self.ctx.generator
            # one engine seed per seed's stream (one stream: seed + s for seed s, as engine_theta does)
            seed = (
                randint(2**31 - 1, (len(g),), g).tolist()
                if isinstance(g, list)
                else int(randint(2**31 - 1, (1,), g))
            )
            self._gauss = engine_theta(
                self.model, self.engine, num_samples=self.num_samples, seed=seed, options=self.engine_options
            )
            self._since_fit = 0
            self.fits += 1
        return self._gauss

    def policies(self) -> tuple[Tensor, Tensor]:
        g = self.ctx.generator
        mean, cov = self.theta_posterior()
        eps = draw(torch.randn, (self.ctx.B, 2, self.model.d), g, dtype=torch.float64, device=mean.device)
        theta = mean.unsqueeze(1) + eps @ torch.linalg.cholesky(cov).mT  # [B, 2, d]
        eta = self.eta.sample(2, generator=g).movedim(0, 1)  # [B, 2, S, A, S]
        _, _, pi = value_iteration(eta, self.ctx.reward(theta), self.H)
        return pi[:, 0], pi[:, 1]

    def observe(self, pairs: TrajectoryPairs) -> None:
        before = self.model.counts()
        super().observe(pairs)
        self.eta.counts += self.model.counts() - before
        self._since_fit += 1

    def output_policy(self) -> Tensor:
        # laplace: one solve (with Hessian) per episode serves the output and the next samples
        self.plain_map(hessian=self.engine == "laplace")
        return self.map_policy()


class PSPLBootstrap(_PrefPosteriorAgent):
    """Bootstrapped PSPL (Algorithm `main_algo_empirical`): perturbed-MAP posterior samples."""

    name = "pspl-bootstrap"

    def __init__(self, ctx: Context):
        super().__init__(ctx)
        self.p_online = float(ctx.params.get("p_online", 0.75))
        self.p_offline = float(ctx.params.get("p_offline", 0.6))
        if ctx.alpha0 < 1:
            raise ConfigError("prior.alpha0", ctx.alpha0, "pspl-bootstrap uses the Dirichlet mode: need >= 1")
        self._cache: tuple[Tensor, Tensor] | None = None
        self._init = None

    def _prepare(self) -> tuple[Tensor, Tensor]:
        if self._cache is None:
            res, w = self.model.solve(
                2,
                perturbed=True,
                p_offline=self.p_offline,
                p_online=self.p_online,
                init=self._init,
                generator=self.ctx.generator,
                tol=self.tol,
                max_iter=self.max_iter,
            )
            self._track(res)
            self._init = res
            eta = dirichlet_mode(self.ctx.alpha0 + self.model.counts(w))  # [B, 2, S, A, S]
            _, _, pi = value_iteration(eta, self.ctx.reward(res.theta), self.H)
            self._cache = (pi[:, 0], pi[:, 1])
        return self._cache

    def policies(self) -> tuple[Tensor, Tensor]:
        return self._prepare()

    def observe(self, pairs: TrajectoryPairs) -> None:
        super().observe(pairs)
        self._cache = None

    def output_policy(self) -> Tensor:
        if self.ctx.params.get("output", "sample") == "map":
            return self.map_policy()
        return self._prepare()[0]  # π_{K+1} ≡ π^{(0)}_{K+1}


class Uniform(_PrefPosteriorAgent):
    """Uniformly random exploration; output from the MAP of the same posterior as PSPL."""

    name = "uniform"

    def policies(self) -> tuple[Tensor, Tensor]:
        pi = torch.full(
            (self.ctx.B, self.H, self.S, self.A), 1.0 / self.A, dtype=torch.float64, device=self.ctx.device
        )
        return pi, pi

    def output_policy(self) -> Tensor:
        return self.map_policy()


class DPS(OnlineAgent):
    """Dueling Posterior Sampling (Novoseller et al. 2020), initialised from D0."""

    name = "dps"

    def __init__(self, ctx: Context):
        super().__init__(ctx)
        d, B = ctx.mdp.d, ctx.B
        sp = float(ctx.params.get("prior_sd", ctx.sigma0))
        sn = float(ctx.params.get("noise_sd", 1.0))
        dev = ctx.device
        mu0, cov0 = torch.zeros(B, d, device=dev), sp**2 * torch.eye(d, device=dev)
        self.theta = GaussianLinearPosterior(mu0, cov0, sn, device=dev)
        if ctx.data.N:
            x = ctx.data.phi[:, :, 0] - ctx.data.phi[:, :, 1]
            self.theta.update_many(x, 0.5 - ctx.data.y.to(torch.float64))  # +½ if τ0 preferred
        alpha0 = torch.full((B, self.S, self.A, self.S), float(ctx.alpha0), device=dev)
        self.eta = DirichletPosterior(alpha0, device=dev)
        if ctx.data.N:
            self.eta.counts += _counts(ctx.data, self.S, self.A)

    def policies(self) -> tuple[Tensor, Tensor]:
        g = self.ctx.generator
        theta = self.theta.sample(2, generator=g)  # [B, 2, d]
        eta = self.eta.sample(2, generator=g).movedim(0, 1)
        _, _, pi = value_iteration(eta, self.ctx.reward(theta), self.H)
        return pi[:, 0], pi[:, 1]

    def observe(self, pairs: TrajectoryPairs) -> None:
        self.theta.update(pairs.phi[:, 0, 0] - pairs.phi[:, 0, 1], 0.5 - pairs.y[:, 0].to(torch.float64))
        self.eta.counts += _counts(pairs, self.S, self.A)

    def output_policy(self) -> Tensor:
        _, _, pi = value_iteration(self.eta.mean, self.ctx.reward(self.theta.mean), self.H)
        return pi


class LPbRL(_PrefPosteriorAgent):
    """Tractable optimistic LPbRL (Saha et al. 2023); see the module docstring for the departure."""

    name = "lpbrl"

    def __init__(self, ctx: Context):
        reg = float(ctx.params.get("reg", 1.0))
        if not reg > 0:
            raise ConfigError("agents.lpbrl.reg", reg, "must be > 0")
        # logistic MLE with ridge κ: prior N(0, I/κ), β = 1 (the scale is learnt), ϑ ≈ θ (λ large)
        ctx = Context(
            **{**ctx.__dict__, "mu0": 0.0, "sigma0": 1.0 / math.sqrt(reg), "beta": 1.0, "lam": 100.0}
        )
        super().__init__(ctx, use_offline=False)
        self.reg = reg
        self.c_r = float(ctx.params.get("c_reward", 1.0))
        self.c_p = float(ctx.params.get("c_transition", 1.0))
        d = ctx.mdp.d
        kw = {"dtype": torch.float64, "device": ctx.device}
        self.V = reg * torch.eye(d, **kw).expand(ctx.B, d, d).clone()
        self.n = torch.zeros(ctx.B, self.S, self.A, self.S, **kw)
        self._theta = torch.zeros(ctx.B, d, **kw)

    def _p_hat(self) -> Tensor:
        tot = self.n.sum(-1, keepdim=True)
        return torch.where(tot > 0, self.n / tot.clamp_min(1), torch.full_like(self.n, 1.0 / self.S))

    def _bonus(self) -> Tensor:
        Vinv = torch.cholesky_inverse(torch.linalg.cholesky(self.V))
        f = self.ctx.mdp.features
        width = torch.einsum("sad,bde,sae->bsa", f, Vinv, f).clamp_min(0).sqrt()
        return self.c_r * width + self.c_p / (self.n.sum(-1) + 1).sqrt()

    def policies(self) -> tuple[Tensor, Tensor]:
        P, b = self._p_hat(), self._bonus()
        r = self.ctx.reward(self._theta)
        _, _, pi0 = value_iteration(P, r + b, self.H)
        _, _, pi1 = value_iteration(P, b, self.H)
        return pi0, pi1

    def observe(self, pairs: TrajectoryPairs) -> None:
        super().observe(pairs)
        delta = pairs.phi[:, 0, 0] - pairs.phi[:, 0, 1]
        self.V += delta.unsqueeze(-1) * delta.unsqueeze(-2)
        self.n += _counts(pairs, self.S, self.A)
        self._theta = self.plain_map().theta[:, 0]

    def output_policy(self) -> Tensor:
        _, _, pi = value_iteration(self._p_hat(), self.ctx.reward(self._theta), self.H)
        return pi


def _counts(pairs: TrajectoryPairs, S: int, A: int) -> Tensor:
    B = pairs.y.shape[0]
    H = pairs.actions.shape[-1]
    return transition_counts(pairs.states.reshape(B, -1, H + 1), pairs.actions.reshape(B, -1, H), S, A)


ONLINE_AGENTS: dict[str, type[OnlineAgent]] = {
    "pspl": PSPL,
    "pspl-bootstrap": PSPLBootstrap,
    "uniform": Uniform,
    "dps": DPS,
    "lpbrl": LPbRL,
}
OFFLINE_AGENTS = ("dpo", "ipo")
AGENTS = (*ONLINE_AGENTS, *OFFLINE_AGENTS)

"""Runner of the scaled-down image experiment (appendix `pickapic`): ``bayescrl pspl CONFIG.yaml`` with
``task: diffusion``.

Protocol, per config (``B`` seeds batched: one policy per seed in one batched MLP, one UNet call per step):

1. Base model (cached): DDPM + scorer (:mod:`~bayescrl.pbrl.diffusion.base`); sampler: DDIM with T steps.
2. Pools from the behaviour policy π0 (base sampler, exploration sd ``policy.sd_init``): D0 = ``offline.N``
   pairs (same prompt) labelled per seed by a rater of competence (β, λ) on the hidden reward ψ·θ*
   (:class:`~bayescrl.raters.BeliefRater`); a validation pool of ``pools.val`` pairs (held-out ranking
   accuracy of the final reward estimate against θ*); an exploration pool of ``pools.explore`` unseen
   (prompt, z_T) starts for the online queries.
3. K episodes: two posterior samples (θ̃_j, η̃_j), j = 0, 1; two copies of the current policy π_k each take
   one policy epoch on the reward ``⟨θ̃_j, φ(τ)⟩`` plus ``κ·z(Σ_t log η̃_j(b_t | t))`` (κ =
   ``policy.eta_weight``, z = standardised within prompts): ``policy.update: reward_grad`` (default) takes
   ``policy.updates`` Adam steps on the reward's gradient through reparameterised rollouts (the η term by
   its score function), ``ddpo`` takes ``policy.updates`` PPO-clip steps on standardised advantages; each
   copy generates one query trajectory for the exploration start's prompt, from its own z_T
   (``pools.query_starts: independent``, like D0's pairs) or from the entry's one z_T (``shared``: the two
   images then differ so little that the rater's labels are nearly coin flips); the rater labels the pair;
   both posteriors are updated; π_{k+1} = copy 0 (π^{(0)}, as Algorithm `main_algo_empirical` outputs).
   Each run keeps one Adam optimiser across episodes (its moments follow the copy that is kept).
4. Output: ``final.epochs`` policy epochs on the point estimate (PSPL: MAP; DPS: posterior mean; η:
   posterior mean), then the final-episode reward: the hidden true reward ⟨θ*, ψ(τ)⟩ averaged over
   ``final.L`` rollouts per prompt from fixed starts shared by every agent. Simple regret per seed = best
   reachable reward − final reward, the best reachable reward of seed b estimated (from below) as
   max(base sampler, oracle_b): the oracle runs the same policy-update budget (K + final.epochs epochs) on
   the hidden true reward. It depends only on the config and b (its own random streams), not on which
   other agents ran or in what order; without ``oracle: true`` no simple regret is reported.

Random streams: pools, D0, the initial policy and evaluation starts from ``seed`` (independent of the
number of seeds and of the agents); run b's rater from a stream keyed by (seed, b); starts and exploration
noise of run b from a stream keyed by (seed, b), shared by the agents (paired comparison, and one agent's
draws never move another's); run b's posterior samples and online labels from a stream keyed by (seed,
agent name, b); run b's k-th query starts from exploration-pool entry ``b·K + k`` (the second image's z_T
from a stream keyed by (seed, "explore", 1)). So run b's result does not depend on how many seeds share the
batch (up to the rounding of batched UNet calls). Unlike the tabular runner, run b is not the single run
with seed ``seed + b``: the seeds of a batch share the pools and the initial policy drawn from ``seed``.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import resource
import sys
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from tqdm.auto import tqdm

from bayescrl.pbrl.data import offline_rater
from bayescrl.pbrl.diffusion import base as diffusion_base
from bayescrl.pbrl.diffusion import require
from bayescrl.pbrl.diffusion.agents import DPSTheta, NoiseNormModel, PSPLTheta
from bayescrl.pbrl.diffusion.mdp import STATS, Rollouts, rollout
from bayescrl.pbrl.diffusion.policy import (
    GaussianNoisePolicy,
    ddpo_update,
    reward_gradient_update,
    select_adam,
)
from bayescrl.raters import BeliefRater
from bayescrl.utils.checks import boolean, check_no_nan, choice, number, positive_int
from bayescrl.utils.config import Config
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import apply_overrides, validate_sweep_block, write_json
from bayescrl.utils.plotting import plot_mean_sd, plt

log = logging.getLogger(__name__)
AGENTS = ("pspl", "dps")
UPDATES = ("reward_grad", "ddpo")
QUERY_STARTS = ("independent", "shared")


def _ints(cfg: Config, **minimum: int) -> None:
    """Each named field of ``cfg`` as an integer >= its minimum (written back as an int)."""
    for name, lo in minimum.items():
        setattr(cfg, name, positive_int(getattr(cfg, name), cfg.key(name), lo))


@dataclass
class BaseModel(Config):
    """``base:`` the base model (DDPM + scorer), trained once and cached."""

    SECTION: ClassVar[str] = "base"
    size: int = 16
    """image side in pixels (a multiple of 4: two UNet resolutions)"""
    channels: list = field(default_factory=lambda: [16, 32])
    """the UNet's two channel counts (multiples of 8)"""
    layers_per_block: int = 1
    """UNet layers per block"""
    train_timesteps: int = 1000
    """the DDPM scheduler's training steps"""
    steps: int = 500
    """DDPM training steps"""
    batch: int = 64
    """DDPM training batch"""
    lr: float = 2e-3
    """DDPM learning rate"""
    scorer_steps: int = 300
    """training steps of the scorer"""
    cache: str | None = None
    """folder of the cached base model (null: OUT/base_model)"""

    def validate(self) -> None:
        _ints(self, size=8)
        if self.size % 4:
            raise ConfigError("base.size", self.size, "must be a multiple of 4 (two UNet resolutions)")
        ch = self.channels
        if (
            not isinstance(ch, list)
            or len(ch) != 2
            or any(positive_int(c, "base.channels", 8) % 8 for c in ch)
        ):
            raise ConfigError("base.channels", ch, "two channel counts, multiples of 8, e.g. [16, 32]")
        _ints(self, layers_per_block=1, train_timesteps=2, steps=1, batch=1)
        number(self.lr, "base.lr", 0, strict=True)
        _ints(self, scorer_steps=1)
        if self.cache is not None and not isinstance(self.cache, str):
            raise ConfigError("base.cache", self.cache, "must be a folder path or null (OUT/base_model)")


@dataclass
class Reward(Config):
    """``reward:`` the hidden reward psi . theta*: weights of its features."""

    SECTION: ClassVar[str] = "reward"
    score: float = 1.0
    """weight of the scorer's class score"""
    noise: float = -1.0
    """weight of the noise norm"""
    time: float = 0.0
    """weight of the time feature"""
    stat: float = 2.0
    """weight of the image statistic"""
    stat_kind: str = "mass"
    """which image statistic (see bayescrl.pbrl.diffusion.mdp.STATS)"""

    def validate(self) -> None:
        for k in ("score", "noise", "time", "stat"):
            number(getattr(self, k), f"reward.{k}")
        choice(self.stat_kind, "reward.stat_kind", STATS, f"choose one of {list(STATS)}")


@dataclass
class OfflinePairs(Config):
    """``offline:`` the offline pairs D0 and their rater."""

    SECTION: ClassVar[str] = "offline"
    N: int = 256
    """offline pairs (same prompt)"""
    beta: float = 0.05
    """the rater's deliberateness beta"""
    lam: float = 10.0
    """the rater's knowledgeability lambda"""
    expert: str = "bt"
    """how the rater labels: bt or greedy"""

    def validate(self) -> None:
        _ints(self, N=1)
        offline_rater(vars(self))


@dataclass
class Pools(Config):
    """``pools:`` held-out pools."""

    SECTION: ClassVar[str] = "pools"
    val: int = 64
    """validation pairs (held-out ranking accuracy)"""
    explore: int = 128
    """unseen (prompt, z_T) starts of the online queries"""
    query_starts: str = "independent"
    """the two query images of an episode: independent (same prompt, each its own z_T) or shared
    (one z_T)"""

    def validate(self) -> None:
        _ints(self, val=1, explore=1)
        choice(self.query_starts, "pools.query_starts", QUERY_STARTS, f"choose one of {list(QUERY_STARTS)}")


@dataclass
class DiffusionPrior(Config):
    """``prior:`` the agents' priors."""

    SECTION: ClassVar[str] = "prior"
    alpha0: float = 1.0
    """Dirichlet concentration of the eta prior"""
    bins: int = 10
    """bins of the eta model"""
    dps_noise_sd: float = 1.0
    """DPS: noise sd of its Gaussian reward model"""

    def validate(self) -> None:
        number(self.alpha0, "prior.alpha0", 0, strict=True)
        _ints(self, bins=2)
        number(self.dps_noise_sd, "prior.dps_noise_sd", 0, strict=True)


@dataclass
class NoisePolicy(Config):
    """``policy:`` the Gaussian noise policy and its updates."""

    SECTION: ClassVar[str] = "policy"
    hidden: int = 512
    """hidden units of the policy MLP"""
    sd_init: float = 0.03
    """exploration sd of the behaviour policy, in [1e-3, 1]"""
    update: str = "reward_grad"
    """reward_grad (Adam on the reward's gradient) or ddpo (PPO-clip)"""
    lr: float = 3e-4
    """policy learning rate"""
    clip: float = 0.2
    """ddpo: PPO clip"""
    rollouts: int = 20
    """rollouts per policy epoch"""
    updates: int = 1
    """update steps per policy epoch"""
    eta_weight: float = 0.2
    """kappa: weight of the standardised eta term"""

    def validate(self) -> None:
        _ints(self, hidden=1)
        sd = number(self.sd_init, "policy.sd_init", 0, strict=True)
        if not 1e-3 <= sd <= 1:
            raise ConfigError("policy.sd_init", sd, "must lie in [1e-3, 1] (the log-sd clamp)")
        choice(self.update, "policy.update", UPDATES, f"choose one of {list(UPDATES)}")
        number(self.lr, "policy.lr", 0, strict=True)
        number(self.clip, "policy.clip", 0, strict=True)
        _ints(self, rollouts=2, updates=1)
        number(self.eta_weight, "policy.eta_weight", 0)


@dataclass
class FinalEpisode(Config):
    """``final:`` the output policy and its evaluation."""

    SECTION: ClassVar[str] = "final"
    epochs: int = 5
    """policy epochs on the point estimate"""
    L: int = 10
    """evaluation rollouts per prompt"""
    deterministic: bool = True
    """evaluate the policy's mean"""

    def validate(self) -> None:
        _ints(self, epochs=0, L=1)
        boolean(self.deterministic, "final.deterministic")


@dataclass
class DiffusionExperiment(Config):
    """A ``pspl`` experiment with ``task: diffusion`` (appendix `pickapic`)."""

    task: str = "diffusion"
    """must be diffusion"""
    base: BaseModel = field(default_factory=BaseModel)
    """the base model"""
    T: int = 10
    """DDIM sampler steps"""
    prompts: list = field(default_factory=lambda: list(range(10)))
    """prompt classes (distinct digits 0-9)"""
    reward: Reward = field(default_factory=Reward)
    """the hidden reward"""
    offline: OfflinePairs = field(default_factory=OfflinePairs)
    """the offline data and its rater"""
    pools: Pools = field(default_factory=Pools)
    """held-out pools"""
    prior: DiffusionPrior = field(default_factory=DiffusionPrior)
    """the agents' priors"""
    policy: NoisePolicy = field(default_factory=NoisePolicy)
    """the policy"""
    K: int = 20
    """online episodes"""
    final: FinalEpisode = field(default_factory=FinalEpisode)
    """the output policy"""
    seed: int = 0
    """seed of the pools, D0, the initial policy and the evaluation starts"""
    agents: list = field(default_factory=lambda: ["pspl", "dps"])
    """agents: pspl, dps"""
    oracle: bool = True
    """run the oracle (needed for the simple regret)"""
    sweep: dict | None = None
    """one run per value: {key, values}"""

    def validate(self) -> None:
        if self.task != "diffusion":
            raise ConfigError("task", self.task, "this runner handles task: diffusion")
        T = self.T = positive_int(self.T, "T", 1)
        if T > self.base.train_timesteps:
            raise ConfigError(
                "T", T, f"larger than the scheduler's {self.base.train_timesteps} training steps"
            )
        pr = self.prompts
        if not isinstance(pr, list) or not pr:
            raise ConfigError("prompts", pr, "must be a non-empty list of digit classes 0-9")
        for i, p in enumerate(pr):
            if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p <= 9:
                raise ConfigError(
                    "prompts", p, "unknown prompt class; the prompts are the digits 0-9", index=i
                )
        if len(set(pr)) != len(pr):
            raise ConfigError("prompts", pr, "prompts must be distinct")
        self.K = positive_int(self.K, "K", 0)
        self.seed = positive_int(self.seed, "seed", 0)
        ag = self.agents
        if isinstance(ag, str):
            ag = self.agents = [ag]
        if not isinstance(ag, list) or not ag or len(set(ag)) != len(ag):
            raise ConfigError("agents", ag, f"a non-empty list of distinct agents from {list(AGENTS)}")
        for i, a in enumerate(ag):
            if a not in AGENTS:
                raise ConfigError("agents", a, f"unknown agent; choose from {list(AGENTS)}", index=i)
        boolean(self.oracle, "oracle")


#: an experiment's settings at their defaults
DEFAULTS: dict[str, Any] = DiffusionExperiment.defaults()
#: top-level keys a config may hold besides the settings (kept in the resolved config)
EXTRA_KEYS = ("name", "description")


def validate_config(cfg: Mapping[str, Any]) -> dict:
    """:class:`DiffusionExperiment` of ``cfg`` (every field checked before any work; ``name`` and
    ``description`` kept) as a plain mapping; raises :class:`ConfigError`."""
    if not isinstance(cfg, Mapping):
        raise ConfigError("config", cfg, "must be a mapping")
    out = DiffusionExperiment.from_dict(cfg, extra=dict.fromkeys(EXTRA_KEYS)).to_dict()
    out.update({k: copy.deepcopy(cfg[k]) for k in cfg if k in EXTRA_KEYS})
    validate_sweep_block(out, validate_config)
    return out


def stream(*key: Any) -> torch.Generator:
    """A CPU generator seeded by a stable hash of ``key`` (e.g. ``(seed, "posterior", "pspl")``)."""
    return torch.Generator().manual_seed(zlib.crc32(repr(key).encode()))


class _Setup:
    """Everything shared by the agents of one config: base model, sampler, pools, raters, prior."""

    def __init__(self, cfg: dict, seeds: int, base, device: str):
        self.cfg, self.B, self.base, self.device = cfg, seeds, base, device
        self.sched = base.ddim(cfg["T"])
        self.S = base.size
        self.D = self.S * self.S
        self.prompts = torch.tensor(cfg["prompts"], device="cpu")
        r = cfg["reward"]
        self.theta_star = torch.tensor(
            [r["score"], r["noise"], r["time"], r["stat"]], dtype=torch.float64, device=device
        )
        self.gen = torch.Generator().manual_seed(cfg["seed"])
        po = cfg["policy"]
        self.pi0 = GaussianNoisePolicy(
            1, self.D, 10, hidden=po["hidden"], sd_init=po["sd_init"], seed=cfg["seed"]
        ).to(device)
        self._rollout = rollout
        off, N, Nv = cfg["offline"], cfg["offline"]["N"], cfg["pools"]["val"]
        d0, val = self._draw_pools(N, Nv)
        self._draw_starts()
        psi = d0.psi()[0].view(N, 2, 4)
        self._label_d0(psi)
        self.phi0 = psi[..., :3]  # [N, 2, 3]
        self.cov0 = _prior_cov(d0)
        self.d0_norms = d0.norms[0]  # [2N, T]
        self.noise_factory = lambda: self._noise(NoiseNormModel)
        vpsi = val.psi()[0].view(Nv, 2, 4)
        self.val_phi = vpsi[..., :3]
        self.val_true = vpsi @ self.theta_star  # [Nv, 2]
        self.d0_signal_sd = float(((psi[:, 0] - psi[:, 1]) @ self.theta_star).std())
        lam_agent = 1e4 if math.isinf(off["lam"]) else float(off["lam"])
        self.beta, self.lam = float(off["beta"]), lam_agent

    def _draw_pools(self, N: int, Nv: int) -> tuple[Rollouts, Rollouts]:
        """D0's ``2N`` and the validation set's ``2Nv`` base-policy rollouts (pairs share a prompt), timed."""
        t0 = time.perf_counter()
        d0 = self.chunked(self.pi0, 2 * N)
        val = self.chunked(self.pi0, 2 * Nv)
        self.pool_time = time.perf_counter() - t0
        self.pool_images = 2 * (N + Nv)
        return d0, val

    def _draw_starts(self) -> None:
        """The exploration pool's (prompt, z_T) starts and the evaluation's L starts per prompt, shared by
        the agents (drawn before anything that depends on the number of seeds)."""
        cfg, S = self.cfg, self.S
        Ne = cfg["pools"]["explore"]
        self.explore_p = self.prompts[torch.randint(len(self.prompts), (Ne,), generator=self.gen)]
        self.explore_z = torch.randn(Ne, 1, S, S, generator=self.gen)
        # the second query image's own z_T (pools.query_starts: independent), from its own stream
        self.explore_z1 = torch.randn(Ne, 1, S, S, generator=stream(cfg["seed"], "explore", 1))
        self.eval_p = self.prompts.repeat_interleave(cfg["final"]["L"])
        self.eval_z = torch.randn(len(self.eval_p), 1, S, S, generator=self.gen)

    def _label_d0(self, psi: torch.Tensor) -> None:
        """Draw each seed's rater (``offline`` β, λ, expert; stream (seed, "rater", b)) and its labels
        ``y0 [B, N]`` of D0's pairs (features ``psi [N, 2, 4]``)."""
        off, seeds = self.cfg["offline"], self.B
        rgen = [stream(self.cfg["seed"], "rater", b) for b in range(seeds)]
        self.rater = BeliefRater.sample(
            self.theta_star, seeds, off["beta"], off["lam"], off["expert"], generator=rgen
        )
        self.y0 = self.rater.label(
            psi[None, :, 0].expand(seeds, -1, -1), psi[None, :, 1].expand(seeds, -1, -1), generator=rgen
        )

    def _noise(self, cls):
        m = cls(self.B, self.cfg["T"], self.cfg["prior"]["bins"], self.d0_norms, self.cfg["prior"]["alpha0"])
        m.update(self.d0_norms.unsqueeze(0).expand(1, -1, -1)[0])
        return m

    def chunked(self, policy, n: int, chunk: int = 256):
        """``n`` behaviour rollouts (pairs share a prompt) without the per-step inputs, in chunks."""
        outs = []
        for s in range(0, n, chunk):
            m = min(chunk, n - s)
            p = self.prompts[
                torch.randint(len(self.prompts), ((m + 1) // 2,), generator=self.gen)
            ].repeat_interleave(2)[:m]
            z = torch.randn(1, m, 1, self.S, self.S, generator=self.gen)
            outs.append(self.rollout(policy, p[None], z, self.gen, keep_inputs=False).drop_inputs())
        return outs[0] if len(outs) == 1 else _cat_n(outs)

    def rollout(self, policy, prompts, z, generator, keep_inputs=True, deterministic=False, grad=False):
        return self._rollout(
            self.base,
            self.sched,
            policy,
            prompts,
            z,
            stat=self.cfg["reward"]["stat_kind"],
            generator=generator,
            keep_inputs=keep_inputs,
            deterministic=deterministic,
            grad=grad,
        )

    def random_starts(self, gens: list[torch.Generator], n: int):
        """``n`` starts for each policy ``p`` from its stream ``gens[p]``; prompts stratified (each about
        n/len(prompts) times, random order)."""
        k = len(self.prompts)
        idx = torch.stack([torch.randperm(n, generator=g) % k for g in gens])
        z = torch.stack([torch.randn(n, 1, self.S, self.S, generator=g) for g in gens])
        return self.prompts[idx], z

    def true_reward(self, ro) -> torch.Tensor:
        return ro.psi() @ self.theta_star  # [P, n]

    def evaluate(self, policy) -> dict:
        """Final-episode reward: L rollouts per prompt from the shared evaluation starts (with
        ``final.deterministic`` the policy's mean action: a paired comparison of the samplers)."""
        P = policy.P
        p, z = self.eval_p.expand(P, -1), self.eval_z.expand(P, -1, -1, -1, -1)
        gens = [stream(self.cfg["seed"], "evaluation") for _ in range(P)]  # the same noise for every policy
        ro = self.rollout(
            policy, p, z, gens, keep_inputs=False, deterministic=self.cfg["final"]["deterministic"]
        )
        r = self.true_reward(ro)
        return {
            "reward": r.mean(1),  # [P]
            "score": ro.score.mean(1),
            "stat": ro.stat.mean(1),
            "noise_norm": ro.norms.mean((1, 2)),
            "images": ro.x.cpu(),
        }


def _prior_cov(d0: Rollouts) -> torch.Tensor:
    """Σ0 = diag(Var score, Var ‖ε_t‖/√D, 1/12) over D0's chains (appendix `pickapic`)."""
    return torch.diag(
        torch.stack(
            [
                d0.score.double().var(),
                d0.norms.double().var(),
                torch.tensor(1 / 12, dtype=torch.float64, device=d0.score.device),
            ]
        )
    )


def _cat_n(outs):
    return Rollouts(
        *(
            torch.cat(xs, 1) if xs[0].numel() else xs[0]
            for xs in zip(*(o.__dict__.values() for o in outs), strict=True)
        )
    )


def _z(x: torch.Tensor, prompts: torch.Tensor | None = None) -> torch.Tensor:
    """Standardise ``x [P, n]`` per policy; with ``prompts [P, n]``, centre within each prompt first
    (DDPO's per-prompt baseline: prompts differ in reward level, which is not the policy's doing)."""
    if prompts is not None:
        oh = torch.nn.functional.one_hot(prompts.to(x.device), 10).to(x.dtype)  # [P, n, 10]
        mean_c = (oh * x.unsqueeze(-1)).sum(1) / oh.sum(1).clamp_min(1)  # [P, 10]
        x = x - (oh * mean_c.unsqueeze(1)).sum(-1)
        return x / (x.std(-1, keepdim=True) + 1e-8)
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-8)


def _epoch(st: _Setup, policy, opt, gens, reward_fn, eta=None, noise=None) -> dict:
    """One policy epoch of ``policy`` (P policies, run p drawing from ``gens[p]``) on ``reward_fn``
    (``Rollouts -> [P, n]``) plus, with a posterior ``eta``, κ·z(Σ_t log η̃(b_t | t)).

    ``reward_grad``: ``policy.updates`` differentiable rollouts from the epoch's starts, one Adam step on
    each (:func:`~bayescrl.pbrl.diffusion.policy.reward_gradient_update`); ``ddpo``: one rollout and
    ``policy.updates`` PPO-clip steps on the standardised advantages (per-prompt baseline)."""
    po = st.cfg["policy"]
    P, n = policy.P, po["rollouts"]
    p, z = st.random_starts(gens, n)
    use_eta = eta is not None and po["eta_weight"] > 0
    if po["update"] == "ddpo":
        ro = st.rollout(policy, p, z, gens)
        adv = _z(reward_fn(ro).float(), p)
        if use_eta:
            adv = adv + po["eta_weight"] * _z(noise.log_lik(eta, ro.norms).float(), p)
        info = ddpo_update(
            policy,
            opt,
            ro.inputs,
            ro.eps_hat,
            ro.actions,
            ro.logp,
            adv.to(ro.logp.device),
            steps=po["updates"],
            clip=po["clip"],
        )
        info["images"] = P * n
        return info
    for _ in range(po["updates"]):
        ro = st.rollout(policy, p, z, gens, grad=True)
        sf = (
            po["eta_weight"] * _z(noise.log_lik(eta, ro.norms.detach()).float(), p).to(ro.logp.device)
            if use_eta
            else None
        )
        info = reward_gradient_update(
            policy, opt, reward_fn(ro), inputs=ro.inputs, eps_hat=ro.eps_hat, actions=ro.actions, sf_adv=sf
        )
    info["images"] = P * n * po["updates"]
    return info


def run_agent(st: _Setup, name: str, *, progress: bool = True) -> dict:
    """Run one agent (``pspl``, ``dps`` or ``oracle``) on all seeds; returns metrics and final images."""
    cfg, B = st.cfg, st.B
    K, E = cfg["K"], cfg["final"]["epochs"]
    t0 = time.perf_counter()
    images = 0
    policy = st.pi0.select([0] * B)
    opt = torch.optim.Adam(policy.parameters(), lr=cfg["policy"]["lr"])
    # run b's starts and noise: stream (seed, b), the same for every agent; posterior samples and online
    # labels: stream (seed, agent, b)
    gens = [stream(cfg["seed"], "rollouts", b) for b in range(B)]
    agen = [stream(cfg["seed"], "posterior", name, b) for b in range(B)]
    noise = st.noise_factory()
    theta = _reward_posterior(st, name)
    Kq = 0 if name == "oracle" else K  # the oracle queries nobody
    query_true = torch.zeros(B, Kq, dtype=torch.float64, device="cpu")
    agree = torch.zeros(B, Kq, device="cpu")
    it = tqdm(range(K + E), desc=f"diffusion:{name}", disable=not progress, leave=False)
    for k in it:
        if name == "oracle":
            images += _epoch(st, policy, opt, gens, st.true_reward)["images"]
            continue
        if k >= K:  # final epochs on the point estimate
            th = theta.point().float()
            eta = noise.post.mean.float()
            images += _epoch(
                st, policy, opt, gens, lambda ro, th=th: (ro.phi().float() * th[:, None]).sum(-1), eta, noise
            )["images"]
            continue
        policy, opt, n_images, tr, agreed = _query_episode(st, k, policy, opt, gens, agen, theta, noise)
        images += n_images
        agree[:, k] = agreed
        query_true[:, k] = tr.mean(0).cpu()
        it.set_postfix(query_reward=f"{float(tr.mean()):.2f}")
    wall = time.perf_counter() - t0
    return _agent_result(st, name, policy, theta, wall, images, query_true, agree)


def _reward_posterior(st: _Setup, name: str) -> PSPLTheta | DPSTheta | None:
    """The agent's posterior over the reward weights θ from D0: PSPL's (Eq. `theta_informed_prior`, with the
    rater's β, λ) or DPS's (Bayesian linear regression, ignoring β and λ); none for the oracle."""
    B = st.B
    phi0 = st.phi0[None, :, 0].expand(B, -1, -1)
    phi1 = st.phi0[None, :, 1].expand(B, -1, -1)
    if name == "pspl":
        return PSPLTheta(phi0, phi1, st.y0, st.cfg["K"], st.cov0, st.beta, st.lam)
    if name == "dps":
        return DPSTheta(phi0, phi1, st.y0, st.cov0, st.cfg["prior"]["dps_noise_sd"])
    return None


def _query_episode(
    st: _Setup,
    k: int,
    policy: GaussianNoisePolicy,
    opt: torch.optim.Adam,
    gens: list[torch.Generator],
    agen: list[torch.Generator],
    theta: PSPLTheta | DPSTheta,
    noise: NoiseNormModel,
) -> tuple[GaussianNoisePolicy, torch.optim.Adam, int, torch.Tensor, torch.Tensor]:
    """Online episode ``k``: two posterior samples (θ, η) per seed, one policy epoch for each copy, one
    query pair from run b's k-th exploration start labelled by the rater, posterior updates. Returns the
    first copy's policy and optimiser, the images generated, the pair's true rewards ``[2, B]`` and whether
    the label agrees with them ``[B]``."""
    B = st.B
    th = theta.sample(2, agen).float()  # [B, 2, d]
    eta = noise.sample(2, agen).float()  # [2, B, T, C]
    th2 = th.transpose(0, 1).reshape(2 * B, -1)  # copy j*B + b
    eta2 = eta.reshape(2 * B, *eta.shape[2:])
    idx2 = list(range(B)) * 2
    pol2 = policy.select(idx2)
    opt2 = select_adam(opt, pol2, idx2)
    gens2 = gens + gens
    images = _epoch(
        st, pol2, opt2, gens2, lambda ro, th2=th2: (ro.phi().float() * th2[:, None]).sum(-1), eta2, noise
    )["images"]
    # run b's k-th start, whatever B is
    j = (torch.arange(B, device="cpu") * st.cfg["K"] + k) % len(st.explore_p)
    p = st.explore_p[j].repeat(2)[:, None]
    z1 = st.explore_z1 if st.cfg["pools"]["query_starts"] == "independent" else st.explore_z
    z = torch.cat([st.explore_z[j], z1[j]])[:, None]
    q = st.rollout(pol2, p, z, gens2, keep_inputs=False)
    images += 2 * B
    psi = q.psi()[:, 0].view(2, B, 4)
    y = st.rater.label(psi[0], psi[1], generator=agen)
    theta.observe(psi[0, :, :3], psi[1, :, :3], y)
    noise.update(q.norms.view(2, B, -1).transpose(0, 1))
    tr = psi @ st.theta_star  # [2, B]
    agree = ((tr[0] < tr[1]).long() == y).float().cpu()
    policy = pol2.select(list(range(B)))
    return policy, select_adam(opt2, policy, list(range(B))), images, tr, agree


def _agent_result(
    st: _Setup,
    name: str,
    policy: GaussianNoisePolicy,
    theta: PSPLTheta | DPSTheta | None,
    wall: float,
    images: int,
    query_true: torch.Tensor,
    agree: torch.Tensor,
) -> dict:
    """The final policy's evaluation and the run's statistics; for the learning agents also θ's point
    estimate and its accuracy on the validation pairs."""
    ev = st.evaluate(policy)
    out = {
        "final_reward": ev["reward"].double(),
        "score": ev["score"],
        "stat": ev["stat"],
        "noise_norm": ev["noise_norm"],
        "images": ev["images"],
        "wall_time_s": wall,
        "train_images": images,
        "query_true_reward": query_true,
        "label_agreement": agree,
    }
    if name != "oracle":
        th = theta.point()  # [B, 3]
        v = st.val_phi.double() @ th.T  # [Nv, 2, B]
        out["val_accuracy"] = (
            ((v[:, 0] > v[:, 1]) == (st.val_true[:, 0] > st.val_true[:, 1])[:, None]).double().mean(0)
        )
        out["theta_point"] = th
    return out


def run_agents(cfg: dict, seeds: int, base, *, device: str = "cpu", progress: bool = True) -> dict:
    """All agents (+ oracle, + the base policy) of one validated config; metrics and images."""
    t0 = time.perf_counter()
    st = _Setup(cfg, seeds, base, device)
    log.info("pools: %d behaviour images in %.1f s", st.pool_images, st.pool_time)
    before = st.evaluate(st.pi0.select([0]))
    runs = {}
    for a in cfg["agents"] + (["oracle"] if cfg["oracle"] else []):
        runs[a] = run_agent(st, a, progress=progress)
        log.info(
            "%s: final reward %.3f (%.1f s)", a, float(runs[a]["final_reward"].mean()), runs[a]["wall_time_s"]
        )
    base_reward = float(before["reward"].mean())
    # best reachable reward of seed b (from below): max(base sampler, oracle_b) — fixed by (config, b)
    best = runs["oracle"]["final_reward"].clamp_min(base_reward) if "oracle" in runs else None
    res: dict[str, Any] = {
        "best_reachable_reward": None if best is None else float(best.mean()),
        "best_reachable_reward_per_seed": None if best is None else best.tolist(),
        "best_reachable_from": None
        if best is None
        else "per seed: max(base sampler, oracle fine-tuned on the hidden reward with the same budget)",
        "base_reward": base_reward,
        "base_score": float(before["score"].mean()),
        "base_stat": float(before["stat"].mean()),
        "d0_true_reward_difference_sd": st.d0_signal_sd,
        "prior_cov_diag": torch.diagonal(st.cov0).tolist(),
        "noise_bin_edges": st.noise_factory().edges.tolist(),
        "pool_images": st.pool_images,
        "pool_seconds": st.pool_time,
        "agents": {a: _agent_summary(r, best, seeds) for a, r in runs.items()},
    }
    res["wall_time_s"] = time.perf_counter() - t0
    res["_images"] = {"base": before["images"][0], **{a: r["images"][0] for a, r in runs.items()}}
    return res


def _sd(t: torch.Tensor) -> float:
    """Sample sd over seeds (0 for one seed)."""
    return float(t.std(unbiased=True)) if t.numel() > 1 else 0.0


def _agent_summary(r: dict, best: torch.Tensor | None, seeds: int) -> dict[str, Any]:
    """results.json entry of one agent: final reward (and simple regret against the best reachable reward,
    when there is an oracle), features, query rewards, label agreement, speed, θ's validation accuracy."""
    fr = r["final_reward"]
    out = {
        "final_reward_mean": float(fr.mean()),
        "final_reward_std": _sd(fr),
        "final_reward_per_seed": fr.tolist(),
        "simple_regret_mean": None if best is None else float((best - fr).mean()),
        "simple_regret_std": None if best is None else _sd(best - fr),
        "simple_regret_per_seed": None if best is None else (best - fr).tolist(),
        "final_score_mean": float(r["score"].mean()),
        "final_stat_mean": float(r["stat"].mean()),
        "final_noise_norm_mean": float(r["noise_norm"].mean()),
        "query_true_reward_curve_mean": r["query_true_reward"].mean(0).tolist(),
        "label_agreement_with_true_reward": float(r["label_agreement"].mean())
        if r["label_agreement"].numel()
        else None,
        "wall_time_s": r["wall_time_s"],
        "wall_time_per_seed_s": r["wall_time_s"] / seeds,
        "train_images": r["train_images"],
        "images_per_s": r["train_images"] / max(r["wall_time_s"], 1e-9),
    }
    if "val_accuracy" in r:
        out["val_accuracy_mean"] = float(r["val_accuracy"].mean())
        out["theta_point_mean"] = r["theta_point"].mean(0).tolist()
    return out


def run_experiment(
    config: Mapping[str, Any],
    seeds: int = 5,
    out: str | Path | None = None,
    *,
    device: str = "cpu",
    progress: bool = True,
    plots: bool = True,
    no_train: bool = False,
) -> dict:
    """Validate, load/train the base model, run (every sweep value), write results.json, grids, plots."""
    cfg = validate_config(config)
    require()
    t0 = time.perf_counter()
    if torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    cache = cfg["base"]["cache"] or str(Path(out or "runs/pspl") / "base_model")
    bcfg = {k: v for k, v in cfg["base"].items() if k != "cache"}
    base = diffusion_base.load_or_train(bcfg, cache, no_train=no_train, device=device, progress=progress)
    result: dict[str, Any] = {"config": cfg, "seeds": seeds, "device": device, "base_model": base.info}
    images = {}
    if cfg["sweep"] is None:
        r = run_agents(cfg, seeds, base, device=device, progress=progress)
        images[""] = r.pop("_images")
        result.update(r)
    else:
        key, runs = cfg["sweep"]["key"], []
        rest = {k: v for k, v in cfg.items() if k != "sweep"}
        for v in cfg["sweep"]["values"]:
            sub = validate_config(apply_overrides(rest, [f"{key}={json.dumps(v)}"]))
            r = run_agents(sub, seeds, base, device=device, progress=progress)
            images[f"{key}={v}_"] = r.pop("_images")
            runs.append({"value": v, **r})
        result["sweep"] = {"key": key, "values": cfg["sweep"]["values"], "runs": runs}
    result["peak_gpu_memory_bytes"] = (
        torch.cuda.max_memory_allocated() if torch.device(device).type == "cuda" else None
    )
    result["memory_estimate_bytes"] = memory_estimate(cfg, seeds, base)
    result["peak_rss_bytes"] = peak_rss_bytes()
    result["total_wall_time_s"] = time.perf_counter() - t0

    check_no_nan(result, str(out or "results"))  # before anything is written: never a NaN results.json
    if out is not None:
        out = Path(out)
        write_json(out / "results.json", result)
        (out / "runtime.md").write_text(runtime_table(result))
        if plots:
            plot_results(result, images, out)
    return result


def peak_rss_bytes() -> int:
    """Peak resident memory of this process (``getrusage``; kilobytes on Linux, bytes on macOS)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r if sys.platform == "darwin" else r * 1024)


def memory_estimate(cfg: dict, seeds: int, base) -> dict:
    """Bytes of the largest live tensors: UNet weights, 2B policies with Adam state, stored rollouts
    (``reward_grad`` also keeps the UNet's activations of one epoch for the backward pass: see the
    measured ``peak_rss_bytes`` / ``peak_gpu_memory_bytes``)."""
    D = base.size**2
    h = cfg["policy"]["hidden"]
    n_pol = (2 * D + 11) * h + h * h + h * 2 * D + 2 * h + 2 * D
    P = 2 * seeds
    T, n = cfg["T"], cfg["policy"]["rollouts"]
    unet = sum(p.numel() for p in base.unet.parameters()) * 4
    policies = P * n_pol * 4 * 4  # weights, grads, Adam m and v
    rollouts = P * n * T * ((2 * D + 11) + 2 * D + 2) * 4
    acts = P * n * T * (2 * h + 2 * D) * 4 * 3  # MLP activations kept for backward
    return {
        "unet": unet,
        "policies": policies,
        "rollouts": rollouts,
        "mlp_activations": acts,
        "total": unet + policies + rollouts + acts,
    }


def _mean_sd(mean: float, sd: float | None, n: int | None) -> str:
    """``mean ± sd`` (sample sd over ``n`` seeds); one seed shows no ``±`` (bayescrl.utils.spread)."""
    return f"{mean:.3f}" if sd is None or (n is not None and n < 2) else f"{mean:.3f} ± {sd:.3f}"


def runtime_table(result: dict) -> str:
    """Markdown table of the training times, like the appendix's Table `tab:training_times`."""
    runs = (
        [("", result)]
        if "sweep" not in result
        else [(f"{result['sweep']['key']}={r['value']} ", r) for r in result["sweep"]["runs"]]
    )
    lines = [
        "| run | agent | wall time (s, all seeds) | per seed (s) | images/s | final reward | simple regret |",
        "|---|---|---|---|---|---|---|",
    ]
    for pre, r in runs:
        seeds = r.get("seeds", result.get("seeds"))
        for a, m in r["agents"].items():
            reward = _mean_sd(m["final_reward_mean"], m["final_reward_std"], seeds)
            lines.append(
                f"| {pre or '-'} | {a} | {m['wall_time_s']:.1f} | {m['wall_time_per_seed_s']:.1f} "
                f"| {m['images_per_s']:.1f} | {reward} "
                f"| {'-' if m['simple_regret_mean'] is None else format(m['simple_regret_mean'], '.3f')} |"
            )
    return "\n".join(lines) + "\n"


def plot_results(result: dict, images: dict, out: Path) -> list[Path]:
    """Image grids (rows: prompts; columns: rollouts) before / after per agent, and query-reward curves."""
    L = result["config"]["final"]["L"]
    prompts = result["config"]["prompts"]
    paths = [_image_grid(imgs, prompts, L, out / f"{pre}grid.png") for pre, imgs in images.items()]
    runs = (
        [("", result)]
        if "sweep" not in result
        else [(f"{result['sweep']['key']}={r['value']}_", r) for r in result["sweep"]["runs"]]
    )
    for pre, r in runs:
        curves = {
            a: (m["query_true_reward_curve_mean"], [0.0] * len(m["query_true_reward_curve_mean"]))
            for a, m in r["agents"].items()
            if m["query_true_reward_curve_mean"]
        }
        if curves:
            paths.append(
                plot_mean_sd(
                    curves,
                    out / f"{pre}query_reward.png",
                    "online episode k",
                    "true reward of the queried pair (mean)",
                    title="diffusion digits: queried trajectories",
                )
            )
    return paths


def _image_grid(imgs: dict[str, torch.Tensor], prompts: list[int], L: int, path: Path) -> Path:
    """One PNG: a row per prompt, for each policy of ``imgs`` (before / after per agent) its first
    ``min(L, 5)`` final rollouts."""
    names = list(imgs)
    cols = min(L, 5)
    fig, axes = plt().subplots(
        len(prompts),
        cols * len(names),
        figsize=(0.6 * cols * len(names), 0.6 * len(prompts)),
        squeeze=False,
    )
    for ci, nm in enumerate(names):
        x = imgs[nm].view(len(prompts), L, *imgs[nm].shape[-2:])
        for ri in range(len(prompts)):
            for c in range(cols):
                ax = axes[ri, ci * cols + c]
                ax.imshow(x[ri, c].numpy(), cmap="gray_r", vmin=-1, vmax=1)
                ax.set_xticks([])
                ax.set_yticks([])
                if ri == 0 and c == 0:
                    ax.set_title(nm, fontsize=7, loc="left")
                if ci == 0 and c == 0:
                    ax.set_ylabel(str(prompts[ri]), fontsize=7)
    fig.tight_layout(pad=0.1)
    fig.savefig(path, dpi=120)
    plt().close(fig)
    return path

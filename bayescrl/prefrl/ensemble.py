"""A non-linear reward posterior: an ensemble of small MLPs fitted by the perturbed-MAP bootstrap.

Member m's reward is r_m(s, a) = f_m(φ) + s_p · g_m(φ), φ = φ(s, a): a trainable MLP f_m plus a fixed random
*prior function* g_m of the same shape (randomized prior functions, Osband et al., 2018), and a segment's
return is R_m(σ) = Σ_t r_m(s_t, a_t). Each member is the MAP of its own perturbed problem — the recipe of
the thesis' perturbed-MAP bootstrap (Eq. `final_surrogate_perturbed_loss`) carried over to networks:

    L_m(ψ) = Σ_n w_mn ℓ(β_{i_n} (R_m(σ1_n) − R_m(σ0_n)), y_n) + (κ/2) ‖ψ − ψ'_m‖²,

with ℓ(z, y) = softplus(z) − y z the Bradley–Terry negative log-likelihood of rater i_n (competence β),
w_mn ~ Bernoulli(1/2) the bootstrap weights (drawn once per label and member, so refits are incremental)
and ψ'_m the member's random initial weights (the prior anchor). The spread of the members is the
posterior spread; Thompson sampling picks one member.

With ``competence: ignore`` (every label from one rater with β = 1) this is the reward ensemble of the
`imitation` library's preference comparisons plus the prior functions; ``known`` uses the raters' β;
``infer`` (and ``infer-beta``: the ensemble has no linear belief ϑ_i, so no λ_i) estimates β_i by marginal
likelihood in the linear model on Φ (a proxy: the network's own β is not identified separately from its
scale).

All members train together: the weights are stacked (M, ...) and every forward pass is one batched matmul.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
import torch.nn.functional as F

from bayescrl.inference.arviz import draws_to_arviz
from bayescrl.raters.competence import beta_mle
from bayescrl.utils.errors import ConfigError


class BatchedMLP(torch.nn.Module):
    """M independent MLPs ``d -> hidden -> 1`` evaluated together: input (M, N, d) -> output (M, N)."""

    def __init__(self, members: int, dim: int, hidden: tuple[int, ...], gen: torch.Generator):
        super().__init__()
        sizes = [dim, *hidden, 1]
        self.weights = torch.nn.ParameterList()
        self.biases = torch.nn.ParameterList()
        for a, b in zip(sizes[:-1], sizes[1:], strict=True):
            bound = 1.0 / math.sqrt(a)  # torch.nn.Linear's default initialisation
            w = (torch.rand(members, a, b, generator=gen, dtype=torch.float32) * 2 - 1) * bound
            c = (torch.rand(members, 1, b, generator=gen, dtype=torch.float32) * 2 - 1) * bound
            self.weights.append(torch.nn.Parameter(w))
            self.biases.append(torch.nn.Parameter(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for k, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            x = torch.baddbmm(b, x, w)
            if k < len(self.weights) - 1:
                x = torch.relu(x)
        return x.squeeze(-1)


class EnsembleRewardPosterior:
    """Bootstrap ensemble of MLP rewards on per-step features; same interface as the linear posterior."""

    needs_steps = True  # members need every step's φ, so the buffer keeps the per-step features

    def __init__(
        self,
        dim: int,
        rater_ids: list[str],
        *,
        beta: list[float],
        lam: list[float],
        competence: str = "known",
        members: int = 5,
        hidden: tuple[int, ...] = (64, 64),
        prior_scale: float = 1.0,
        weight_decay: float = 1e-3,
        steps: int = 100,
        batch_pairs: int = 64,
        lr: float = 3e-3,
        learner_lam: float = 1000.0,
        seed: int = 0,
    ):
        if competence not in ("known", "infer", "infer-beta", "ignore"):
            raise ConfigError("competence", competence, "must be known, infer, infer-beta or ignore")
        if competence == "infer-beta":  # the ensemble has no linear belief ϑ_i: infer estimates β_i only
            competence = "infer"
        self.dim, self.competence, self.rater_ids = int(dim), competence, list(rater_ids)
        self.M, self.steps, self.lr, self.kappa = int(members), int(steps), float(lr), float(weight_decay)
        self.batch_pairs = int(batch_pairs)
        self.prior_scale, self.learner_lam = float(prior_scale), float(learner_lam)
        self.gen = torch.Generator().manual_seed(int(seed))
        self.net = BatchedMLP(self.M, self.dim, tuple(hidden), self.gen)
        self.prior = BatchedMLP(self.M, self.dim, tuple(hidden), self.gen).requires_grad_(False)
        self.anchor = [p.detach().clone() for p in self.net.parameters()]
        R = len(rater_ids)
        self._beta = torch.tensor(
            list(beta) if competence == "known" else [1.0] * R, dtype=torch.float64, device="cpu"
        )
        self.opt = torch.optim.Adam(self.net.parameters(), lr=self.lr)
        # labels: per-step features of both segments, answers, raters, bootstrap weights
        self.s0 = self.s1 = None  # (N, L, d) float32
        self.phi0 = self.phi1 = None  # (N, d) Φ, for competence inference
        self.y = torch.zeros(0, device="cpu")
        self.rater = torch.zeros(0, dtype=torch.long, device="cpu")
        self.w = torch.zeros(self.M, 0, device="cpu")
        self.diagnostics: dict = {"converged": True, "fits": 0, "loss": None}

    # ------------------------------------------------------------------ data
    @property
    def num_labels(self) -> int:
        return int(self.y.shape[0])

    @property
    def beta(self) -> list[float]:
        return self._beta.tolist()

    def add_segments(self, s0, s1, y, rater) -> None:
        y = torch.as_tensor(np.asarray(y), dtype=torch.float32, device="cpu")
        if y.numel() == 0:
            return
        a = torch.as_tensor(s0.phi_steps, dtype=torch.float32, device="cpu")
        b = torch.as_tensor(s1.phi_steps, dtype=torch.float32, device="cpu")
        p0 = torch.as_tensor(s0.phi, dtype=torch.float64, device="cpu")
        p1 = torch.as_tensor(s1.phi, dtype=torch.float64, device="cpu")
        cat = lambda old, new: new if old is None else torch.cat([old, new])
        self.s0, self.s1 = cat(self.s0, a), cat(self.s1, b)
        self.phi0, self.phi1 = cat(self.phi0, p0), cat(self.phi1, p1)
        r = torch.as_tensor(np.asarray(rater), dtype=torch.long, device="cpu")
        self.y, self.rater = torch.cat([self.y, y]), torch.cat([self.rater, r])
        w = torch.bernoulli(torch.full((self.M, len(y)), 0.5, device="cpu"), generator=self.gen)
        self.w = torch.cat([self.w, w], 1)

    # ------------------------------------------------------------------ fitting
    def member_rewards(self, phi: torch.Tensor) -> torch.Tensor:
        """r_m(φ) for every member: ``phi (N, d)`` -> (M, N)."""
        x = phi.to(torch.float32).unsqueeze(0).expand(self.M, -1, -1)
        return (self.net(x) + self.prior_scale * self.prior(x)).double()

    def _segment_returns(self, steps: torch.Tensor) -> torch.Tensor:
        N, L, d = steps.shape
        x = steps.reshape(N * L, d).to(torch.float32).unsqueeze(0).expand(self.M, -1, -1)
        return (self.net(x) + self.prior_scale * self.prior(x)).reshape(self.M, N, L).sum(-1)

    def update(self) -> None:
        """Warm-started refit: ``steps`` Adam steps on every member's perturbed loss, each on a minibatch
        of ``batch_pairs`` labels (the NLL term rescaled to the whole data set)."""
        if self.competence == "infer":
            self._infer_beta()
        N = self.num_labels
        if N == 0:
            return
        beta = (
            self._beta[self.rater] if self.competence != "ignore" else torch.ones(N, device="cpu")
        ).float()
        last = math.nan
        for _ in range(self.steps):
            idx = torch.randint(N, (min(self.batch_pairs, N),), generator=self.gen)
            self.opt.zero_grad()
            r1 = self._segment_returns(self.s1[idx]).float()
            r0 = self._segment_returns(self.s0[idx]).float()
            z = beta[idx] * (r1 - r0)  # (M, b)
            nll = (self.w[:, idx] * (F.softplus(z) - self.y[idx] * z)).sum(1) * (N / len(idx))
            params = zip(self.net.parameters(), self.anchor, strict=True)
            reg = sum(((p - a) ** 2).flatten(1).sum(1) for p, a in params)
            loss = (nll + 0.5 * self.kappa * reg).sum()
            loss.backward()
            self.opt.step()
            last = loss.item() / self.M
        self.diagnostics["fits"] += 1
        self.diagnostics["loss"] = last
        conv = math.isfinite(last)
        self.diagnostics["converged"] = conv
        if not conv:
            warnings.warn("reward ensemble: the loss is not finite", RuntimeWarning, stacklevel=2)

    def _infer_beta(self) -> None:
        grid = torch.logspace(-2, 2.5, 28, dtype=torch.float64, device="cpu")
        d = self.dim
        for i in range(len(self.rater_ids)):
            rows = self.rater == i
            if int(rows.sum()) < 5:
                continue
            est = beta_mle(
                self.phi0[rows][None],
                self.phi1[rows][None],
                self.y[rows].double()[None],
                torch.zeros(d, dtype=torch.float64, device="cpu"),
                torch.eye(d, dtype=torch.float64, device="cpu"),
                self.learner_lam,
                grid,
            )
            self._beta[i] = est[0]

    # ------------------------------------------------------------------ draws
    def draw(self) -> int:
        """A member index (Thompson sampling picks one member)."""
        return int(torch.randint(self.M, (1,), generator=self.gen))

    def mean_draw(self) -> str:
        return "mean"

    @torch.no_grad()
    def reward(self, phi: torch.Tensor, draw) -> torch.Tensor:
        r = self.member_rewards(phi)
        return r.mean(0) if draw == "mean" else r[int(draw)]

    @torch.no_grad()
    def quantile_reward(self, phi: torch.Tensor, quantile: float) -> torch.Tensor:
        """mean − z_q · sd over members (a Gaussian reading of the ensemble)."""
        r = self.member_rewards(phi)
        z = math.sqrt(2.0) * float(torch.erfinv(torch.tensor(2.0 * quantile - 1.0, device="cpu")))
        return r.mean(0) + z * r.std(0)

    @torch.no_grad()
    def returns(self, segs, n: int) -> torch.Tensor:
        """The members' returns of the segments: (M, K) (``n`` is ignored: every member is a draw)."""
        return self._segment_returns(torch.as_tensor(segs.phi_steps, device="cpu")).double()

    @torch.no_grad()
    def to_arviz(self, phi: torch.Tensor):
        """``arviz.InferenceData`` of the members' rewards at features ``phi (N, d)`` (variable ``reward``,
        dims ``(chain, draw, point)``): every member is one draw, split into up to 4 chains of equal length
        (:func:`bayescrl.inference.arviz.split_chains`; one chain when no 2..4 divides the member count)."""
        r = self.member_rewards(torch.as_tensor(phi, device="cpu")).double()
        return draws_to_arviz({"reward": r}, dims={"reward": ["point"]}, attrs={"engine": "ensemble"})

    def summary(self, k: int = 8) -> dict:
        return {
            "num_labels": self.num_labels,
            "beta": self.beta,
            "loss": self.diagnostics["loss"],
            "converged": self.diagnostics["converged"],
        }

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict:
        return {
            "net": self.net.state_dict(),
            "opt_state": self.opt.state_dict(),
            "labels": {k: getattr(self, k) for k in ("s0", "s1", "phi0", "phi1", "y", "rater", "w")},
            "beta": self._beta.clone(),
            "gen": self.gen.get_state(),
        }

    def load_state_dict(self, st: dict) -> None:
        self.net.load_state_dict(st["net"])
        self.opt.load_state_dict(st["opt_state"])
        for k, v in st["labels"].items():
            setattr(self, k, v)
        self._beta = st["beta"].clone()
        self.gen.set_state(st["gen"])

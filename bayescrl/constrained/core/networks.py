"""Policies and critics: Gaussian MLP (Box actions), categorical (Discrete actions), ensemble critics.

The critic for the reward and each of the m costs are *independent* MLPs (no shared parameters),
evaluated together by batched matrix products (:class:`EnsembleMLP`) so that m > 1 costs nothing in
Python overhead.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical, Normal

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU}


def mlp(
    in_dim: int, hidden: tuple[int, ...], out_dim: int, activation: str = "tanh", out_gain: float = 1.0
) -> nn.Sequential:
    layers: list[nn.Module] = []
    d = in_dim
    for h in hidden:
        lin = nn.Linear(d, h)
        nn.init.orthogonal_(lin.weight, math.sqrt(2))
        nn.init.zeros_(lin.bias)
        layers += [lin, ACTIVATIONS[activation]()]
        d = h
    out = nn.Linear(d, out_dim)
    nn.init.orthogonal_(out.weight, out_gain)
    nn.init.zeros_(out.bias)
    layers.append(out)
    return nn.Sequential(*layers)


class NumpyActor:
    """A frozen numpy copy of a policy network for fast single-step acting during rollouts.

    Torch's per-op overhead (~10 us) dominates a 64x64 MLP on one observation; numpy runs the same
    forward pass several times faster. Weights are copied once per rollout (they do not change during
    it). Sampling uses the given ``numpy.random.Generator`` (checkpointed by the training loop).
    """

    def __init__(self, net: nn.Sequential, activation: str, log_std: torch.Tensor | None):
        self.layers = [
            (m.weight.detach().cpu().numpy().T.astype(np.float64), m.bias.detach().cpu().numpy())
            for m in net
            if isinstance(m, nn.Linear)
        ]
        self.act_fn = {
            "tanh": np.tanh,
            "relu": lambda x: np.maximum(x, 0.0),
            "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
        }[activation]
        self.log_std = None if log_std is None else log_std.detach().cpu().numpy().astype(np.float64)

    def forward(self, x: np.ndarray) -> np.ndarray:
        h = np.asarray(x, np.float64)
        n = len(self.layers)
        for i, (w, b) in enumerate(self.layers):
            h = h @ w + b
            if i < n - 1:
                h = self.act_fn(h)
        return h

    def act(self, x: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        out = self.forward(x)
        if self.log_std is not None:  # Gaussian
            std = np.exp(self.log_std)
            eps = rng.standard_normal(out.shape)
            a = out + std * eps
            logp = (-0.5 * eps**2 - self.log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
            return a.astype(np.float32), logp.astype(np.float32)
        z = out - out.max(-1, keepdims=True)
        logp_all = z - np.log(np.exp(z).sum(-1, keepdims=True))
        u = rng.random((out.shape[0], 1))
        a = (np.cumsum(np.exp(logp_all), -1) < u).sum(-1).clip(max=out.shape[1] - 1)
        return a.astype(np.int64), logp_all[np.arange(out.shape[0]), a].astype(np.float32)


class Policy(nn.Module):
    """Common interface: ``distribution(obs)``, ``log_prob(obs, act)``, ``act(obs, deterministic)``,
    ``numpy_actor()`` (fast rollout copy)."""

    activation: str = "tanh"

    def distribution(self, obs: torch.Tensor):  # pragma: no cover - abstract
        raise NotImplementedError

    def log_prob(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        return self.log_prob_from(self.distribution(obs), act)

    def log_prob_from(self, dist, act: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def kl(self, old, new) -> torch.Tensor:
        """Per-state KL(old || new) between two distributions returned by :meth:`distribution`."""
        raise NotImplementedError  # pragma: no cover


class GaussianPolicy(Policy):
    """Diagonal Gaussian: state-dependent mean from an MLP, learned state-independent log-std."""

    def __init__(self, obs_dim: int, act_dim: int, hidden=(32, 32), activation="tanh", log_std_init=-0.5):
        super().__init__()
        self.mean = mlp(obs_dim, hidden, act_dim, activation, out_gain=0.01)
        self.log_std = nn.Parameter(torch.full((act_dim,), float(log_std_init)))
        self.activation = activation

    def numpy_actor(self) -> NumpyActor:
        return NumpyActor(self.mean, self.activation, self.log_std)

    def distribution(self, obs: torch.Tensor) -> Normal:
        mu = self.mean(obs)
        return Normal(mu, self.log_std.exp().expand_as(mu), validate_args=False)

    def log_prob_from(self, dist: Normal, act: torch.Tensor) -> torch.Tensor:
        return dist.log_prob(act).sum(-1)

    def log_prob(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        """``sum_j [-((a_j - mu_j) / sigma_j)^2 / 2 - log sigma_j - log(2 pi) / 2]`` written out: the
        same density as ``Normal(mu, sigma).log_prob(a).sum(-1)`` (equal up to float rounding) in fewer
        tensor ops (the minibatch update calls it hundreds of times per iteration)."""
        mu = self.mean(obs)
        z = (act - mu) * torch.exp(-self.log_std)
        const = self.log_std.sum() + 0.5 * mu.shape[-1] * math.log(2 * math.pi)
        return -0.5 * (z * z).sum(-1) - const

    def kl(self, old: Normal, new: Normal) -> torch.Tensor:
        return torch.distributions.kl_divergence(old, new).sum(-1)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        mu = self.mean(obs)
        std = self.log_std.exp()
        a = mu if deterministic else mu + std * torch.randn_like(mu)
        logp = (-((a - mu) ** 2) / (2 * std**2) - self.log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        return a, logp


class CategoricalPolicy(Policy):
    """Softmax policy over ``n`` actions (Discrete action spaces)."""

    def __init__(self, obs_dim: int, n_actions: int, hidden=(32, 32), activation="tanh"):
        super().__init__()
        self.logits = mlp(obs_dim, hidden, n_actions, activation, out_gain=0.01)
        self.activation = activation

    def numpy_actor(self) -> NumpyActor:
        return NumpyActor(self.logits, self.activation, None)

    def distribution(self, obs: torch.Tensor) -> Categorical:
        return Categorical(logits=self.logits(obs), validate_args=False)

    def log_prob_from(self, dist: Categorical, act: torch.Tensor) -> torch.Tensor:
        return dist.log_prob(act.long().reshape(dist.logits.shape[:-1]))

    def kl(self, old: Categorical, new: Categorical) -> torch.Tensor:
        return torch.distributions.kl_divergence(old, new)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.logits(obs)
        logp_all = torch.log_softmax(logits, -1)
        a = logits.argmax(-1) if deterministic else torch.multinomial(logp_all.exp(), 1).squeeze(-1)
        return a, logp_all.gather(-1, a.unsqueeze(-1)).squeeze(-1)


class EnsembleMLP(nn.Module):
    """``k`` independent MLPs ``R^d -> R`` evaluated in one batched pass: output shape ``(B, k)``.

    Member 0 is the reward critic, member ``1 + i`` the critic of cost ``i``.
    """

    def __init__(self, k: int, in_dim: int, hidden=(32, 32), activation="tanh"):
        super().__init__()
        dims = [in_dim, *hidden, 1]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for j, (a, b) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
            w = torch.empty(k, a, b)
            gain = 1.0 if j == len(dims) - 2 else math.sqrt(2)
            for i in range(k):
                nn.init.orthogonal_(w[i].T, gain)
            self.weights.append(nn.Parameter(w))
            self.biases.append(nn.Parameter(torch.zeros(k, 1, b)))
        self.act = ACTIVATIONS[activation]()
        self.k = k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.unsqueeze(0).expand(self.k, *x.shape)
        n = len(self.weights)
        for j, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = torch.baddbmm(b, h, w)
            if j < n - 1:
                h = self.act(h)
        return h.squeeze(-1).T

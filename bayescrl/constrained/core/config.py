"""Training configuration shared by every constrained on-policy algorithm (and by ACPO).

Defaults follow the thesis' baseline table ``table:hyperparams`` (chapter ``ecop``): actor and critic
(32, 32) tanh MLPs, policy lr 3e-4, critic lr 1e-3, target KL 0.01 with early stop for the PPO family,
25 line-search steps with decay 0.8 for the trust-region family, proximal clip 0.2, horizon 200.

Departure: the table's "Initial log std 0.5" is read as ``-0.5`` (std 0.61), the value used by the
code bases the thesis cites (safety-starter-agents, FOCOPS); ``log_std_init=0.5`` can still be set.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from bayescrl.utils.checks import finite_float, mapping, number, positive_int
from bayescrl.utils.config import Config
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import check_keys

ADVANTAGE_MODES = ("discounted", "average", "finite_horizon")
ENV_BACKENDS = ("gym", "mjx")
# annotations of the numeric fields the generic check reads (``| None``: null allowed)
_NUMERIC = {"int": "int", "int | None": "int", "float": "float", "float | None": "float"}
# ranges shared by the trust-region algorithms' own fields (their configs' RANGES)
CG_RANGES: dict[str, dict[str, Any]] = {"cg_iters": {"low": 1}, "cg_damping": {"low": 0.0}}
LINE_SEARCH_RANGES: dict[str, dict[str, Any]] = {
    "line_search_steps": {"low": 1},
    "line_search_decay": {"low": 0.0, "high": 1.0, "strict": True},
}


@dataclass
class TrainConfig(Config):
    """Hyperparameters of the common training loop. Algorithms subclass it to add their own fields."""

    # rollouts
    n_envs: int = 4
    rollout_steps: int = 250  # steps per env per iteration (batch = n_envs * rollout_steps)
    async_envs: bool = False
    # "gym": gymnasium vector env on the CPU; "mjx": MuJoCo MJX copies stepped together on the device
    # (JAX; the point tasks Circle and Reach), rollouts stay torch tensors there (docs/envs.md)
    env_backend: str = "gym"
    horizon: int | None = None  # episode horizon H (default: the env spec's max_episode_steps)
    # advantages
    advantage: str = "discounted"  # discounted | average | finite_horizon
    gamma: float = 0.99
    gae_lambda: float = 0.95
    cost_gamma: float | None = None  # defaults to gamma
    normalize_advantages: bool = True
    # networks
    actor_hidden: tuple[int, ...] = (32, 32)
    critic_hidden: tuple[int, ...] = (32, 32)
    activation: str = "tanh"
    log_std_init: float = -0.5
    time_feature: bool = False  # append h/H to the policy input (critics get it in finite_horizon mode)
    # optimisation
    pi_lr: float = 3e-4
    vf_lr: float = 1e-3
    update_epochs: int = 10
    minibatch_size: int = 64
    vf_epochs: int | None = None  # defaults to update_epochs
    clip: float = 0.2
    target_kl: float | None = 0.01
    max_grad_norm: float | None = 0.5
    anneal_lr: bool = False  # linear decay of both learning rates to 0 over total_steps
    # torch.compile the minibatch step of the first-order (PPO-family) update: ~2x less update CPU on (64, 64)
    # networks after a one-off compile (3-4 s CPU with inductor's disk cache, ~20 s from scratch); eager
    # where torch.compile is unavailable
    compile_update: bool = False
    # observation normalisation
    normalize_obs: bool = True
    obs_clip: float | None = 10.0
    # Lagrange multipliers (used by Lagrangian algorithms)
    lagrange_init: float = 0.0
    lagrange_lr: float = 0.05
    # evaluation / bookkeeping
    eval_episodes: int = 5
    eval_every: int = 0  # iterations between evaluations (0: only at the end)
    checkpoint_every: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    #: ranges of numeric fields beyond their annotation: name -> keyword arguments of
    #: :func:`bayescrl.utils.checks.number` (``low``, ``high``, ``strict``); an ``int`` field without an
    #: entry must be >= 0. An algorithm adds its own: ``RANGES = {**TrainConfig.RANGES, "t": {...}}``.
    RANGES: ClassVar[dict[str, dict[str, Any]]] = {"vf_epochs": {"low": 1}}

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Check every field (a :class:`~bayescrl.utils.errors.ConfigError` names the first bad one)."""
        self._validate_types()
        self._validate_counts()
        self._validate_modes()
        self._validate_numbers()
        self._validate_networks()

    def _validate_types(self) -> None:
        """Every field annotated ``int`` / ``float`` (``| None``: or null) by its annotation and its
        :attr:`RANGES` entry, so a field an algorithm adds cannot reach the update as a string or NaN;
        whole floats become ints (``1e5``)."""
        for f in dataclasses.fields(self):
            kind, value = _NUMERIC.get(f.type), getattr(self, f.name)
            if kind is None or (value is None and f.type.endswith("| None")):
                continue
            bounds = self.RANGES.get(f.name, {})
            if kind == "int":
                setattr(self, f.name, positive_int(value, f.name, int(bounds.get("low", 0))))
            else:
                setattr(self, f.name, number(value, f.name, **bounds))
        mapping(self.extra, "extra")

    def _validate_counts(self) -> None:
        """Sizes (``>= 1``), bookkeeping intervals (``>= 0``) and the optional horizon."""
        for name in ("n_envs", "rollout_steps", "update_epochs", "minibatch_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ConfigError(name, v, "must be an integer >= 1")
        for name in ("eval_episodes", "eval_every", "checkpoint_every"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ConfigError(name, v, "must be an integer >= 0")
        if self.horizon is not None and (not isinstance(self.horizon, int) or self.horizon < 1):
            raise ConfigError("horizon", self.horizon, "must be an integer >= 1 (or null)")

    def _validate_modes(self) -> None:
        """The env backend and the advantage estimator."""
        if self.env_backend not in ENV_BACKENDS:
            raise ConfigError("env_backend", self.env_backend, f"must be one of {ENV_BACKENDS}")
        if self.env_backend == "mjx" and self.async_envs is True:
            raise ConfigError("async_envs", True, "the mjx backend steps every copy in one process")
        if self.advantage not in ADVANTAGE_MODES:
            raise ConfigError("advantage", self.advantage, f"must be one of {ADVANTAGE_MODES}")

    def _validate_numbers(self) -> None:
        """Discounts, learning rates, clipping and KL targets and multipliers (the switches: ``Config``)."""
        for name in ("gamma", "gae_lambda"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
                raise ConfigError(name, v, "must be in [0, 1]")
        if self.cost_gamma is not None:
            finite_float(self.cost_gamma, "cost_gamma", 0.0, 1.0)
        for name in ("pi_lr", "vf_lr", "clip"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ConfigError(name, v, "must be a finite number > 0")
        if self.target_kl is not None and finite_float(self.target_kl, "target_kl") <= 0:
            raise ConfigError("target_kl", self.target_kl, "must be > 0 (or null to disable)")
        for name in ("max_grad_norm", "obs_clip"):  # optional: null (max_grad_norm: also 0) disables them
            if getattr(self, name) is not None:
                finite_float(getattr(self, name), name, low=0.0)
        finite_float(self.lagrange_lr, "lagrange_lr", low=0.0)
        finite_float(self.log_std_init, "log_std_init")
        finite_float(self.lagrange_init, "lagrange_init", low=0.0)

    def _validate_networks(self) -> None:
        """The activation and the hidden layer sizes (stored as tuples of ints)."""
        if self.activation not in ("tanh", "relu", "elu"):
            raise ConfigError("activation", self.activation, "must be tanh, relu or elu")
        for name in ("actor_hidden", "critic_hidden"):
            sizes = getattr(self, name)
            if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__iter__"):
                raise ConfigError(name, sizes, "must be a list of layer sizes, e.g. [64, 64]")
            sizes = list(sizes)
            for i, h in enumerate(sizes):
                ok = isinstance(h, (int, float)) and not isinstance(h, bool) and math.isfinite(h)
                if not ok or h != int(h) or h < 1:
                    raise ConfigError(name, h, "layer sizes must be integers >= 1", index=i)
            setattr(self, name, tuple(int(h) for h in sizes))

    # ------------------------------------------------------------------ helpers
    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> TrainConfig:
        """Build from a plain mapping; unknown keys are an error naming the key."""
        data = dict(data or {})
        check_keys(data, [f.name for f in dataclasses.fields(cls)], "config")
        return cls(**data)

    @property
    def batch_size(self) -> int:
        return self.n_envs * self.rollout_steps

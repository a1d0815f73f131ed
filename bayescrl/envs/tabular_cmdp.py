"""Tabular constrained MDPs with exact optima by linear programming over occupancy measures.

A CMDP is the tuple of the thesis' chapters `ecop` (Preliminaries, Eq. `cmdp_problem`) and `acpo`
(Sec. `sec:prelims`, "Constrained MDPs"): states ``S``, actions ``A``, transitions ``P[s, a, s']``, a reward
``r`` and ``m`` cost functions ``c_i`` (each either ``[s, a]`` or, as in the thesis, ``[s, a, s']``), limits
``d_i`` and an initial distribution ``rho`` (the thesis' ``mu``). Three criteria are supported:

``"finite"``     episodic, horizon ``H``: ``J = E[sum_{h=1}^H r(s_h, a_h, s_{h+1})]`` (chapter `ecop`). The
                 LP is over time-indexed occupancies ``q_h(s, a)`` and its optimum is in general a
                 *non-stationary* policy ``pi_h``.
``"discounted"`` ``J_gamma = E[sum_{t>=0} gamma^t r_t]`` (chapter `acpo`, "Discounted criterion"). The LP is
                 over the *unnormalised* discounted occupancy ``q(s, a) = sum_t gamma^t P(s_t=s, a_t=a)``
                 (it sums to ``1/(1-gamma)``), so values and costs are on the thesis' unnormalised scale.
``"average"``    ``J = lim (1/N) E[sum_t r_t]`` (Eq. `AvgR_obj`) for unichain / ergodic CMDPs: stationary
                 occupancies with flow constraints ``sum_a q(s', a) = sum_{s,a} P(s'|s,a) q(s, a)`` and
                 ``sum q = 1``.

These are the classical occupancy-measure LPs (Altman, *Constrained Markov Decision Processes*, 1999,
Ch. 3-4). A transition-dependent reward ``r(s, a, s')`` is reduced to its expectation
``sum_{s'} P(s'|s, a) r(s, a, s')``, which leaves every criterion unchanged.

:class:`TabularCMDPEnv` exposes a CMDP as a gymnasium environment (``Discrete`` observations and actions, the
cost vector in ``info["cost"]``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from bayescrl.utils.errors import BayesCRLError, ConfigError

Criterion = Literal["finite", "discounted", "average"]
CRITERIA: tuple[str, ...] = ("finite", "discounted", "average")
_TOL = 1e-8


class InfeasibleCMDPError(BayesCRLError, ValueError):
    """No policy satisfies every cost limit (the LP is infeasible)."""


@dataclass(frozen=True)
class LPSolution:
    """Exact optimum of a CMDP.

    ``occupancy`` and ``policy`` have shape ``(H, S, A)`` for the finite criterion and ``(S, A)`` otherwise.
    ``multipliers`` are the optimal Lagrange multipliers ``lambda_i >= 0`` of the cost constraints (the LP
    duals), empty for an unconstrained solve. In states the optimal occupancy never visits, ``policy`` is
    uniform (any action is optimal there).
    """

    value: float
    costs: np.ndarray
    occupancy: np.ndarray
    policy: np.ndarray
    multipliers: np.ndarray
    criterion: str


@dataclass(frozen=True)
class PolicyEvaluation:
    """Exact evaluation of a (possibly non-stationary) stochastic policy.

    * ``value``/``costs``: ``J(pi)`` and ``J_{C_i}(pi)`` under the CMDP's criterion.
    * ``occupancy``: ``q_h(s, a)`` ``(H, S, A)`` (finite), the unnormalised discounted occupancy (discounted)
      or the stationary state-action distribution (average).
    * ``state_distribution``: ``P(s_h = s)`` ``(H, S)``, the *normalised* discounted occupation
      ``d_{pi, gamma}`` of chapter `acpo` ``(S,)``, or the stationary distribution ``d_pi`` ``(S,)``.
    * ``state_values``: ``V_h(s)`` ``(H, S)``, ``V(s)`` ``(S,)`` or the average-reward bias function
      ``V(s)`` normalised by ``sum_s d_pi(s) V(s) = 0``; ``cost_values`` the same for each cost ``(m, ...)``.
    """

    value: float
    costs: np.ndarray
    occupancy: np.ndarray
    state_distribution: np.ndarray
    state_values: np.ndarray
    cost_values: np.ndarray


@dataclass(frozen=True)
class TabularCMDP:
    """A finite CMDP ``(S, A, P, r, c_{1:m}, d_{1:m}, rho)`` together with its optimality criterion.

    Shapes: ``transitions (S, A, S)``; ``rewards (S, A)`` or ``(S, A, S)``; ``costs (m, S, A)`` or
    ``(m, S, A, S)`` (a 2-D ``(S, A)`` array means ``m = 1``); ``limits (m,)``; ``initial (S,)``. A limit of 0
    is allowed. Arrays are validated and copied (read-only) on construction; invalid input raises
    :class:`~bayescrl.utils.ConfigError` naming the field.
    """

    transitions: np.ndarray
    rewards: np.ndarray
    costs: np.ndarray
    limits: np.ndarray
    initial: np.ndarray
    criterion: str = "finite"
    horizon: int | None = 10
    gamma: float | None = None
    name: str = "cmdp"
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        P = _checked_transitions(self.transitions)
        S, A, _ = P.shape
        r = _float_array("rewards", self.rewards, ndim=(2, 3))
        if r.shape not in ((S, A), (S, A, S)):
            raise ConfigError("rewards", r.shape, f"must have shape (S, A)=({S}, {A}) or (S, A, S)")
        c = _checked_costs(self.costs, S, A)
        m = c.shape[0]
        d = _float_array("limits", np.atleast_1d(np.asarray(self.limits, dtype=float)), ndim=(1,))
        if d.shape != (m,):
            raise ConfigError("limits", d.tolist(), f"must give one limit per cost function (m = {m})")
        rho = _checked_initial(self.initial, S)
        self._check_criterion()
        for name, arr in (("transitions", P), ("rewards", r), ("costs", c), ("limits", d), ("initial", rho)):
            arr = arr.copy()
            arr.flags.writeable = False
            object.__setattr__(self, name, arr)

    def _check_criterion(self) -> None:
        """A known criterion, with an integer horizon ``H >= 1`` (finite) or ``0 < gamma < 1``
        (discounted)."""
        if self.criterion not in CRITERIA:
            raise ConfigError("criterion", self.criterion, f"must be one of {list(CRITERIA)}")
        if self.criterion == "finite":
            if not isinstance(self.horizon, (int, np.integer)) or isinstance(self.horizon, bool):
                raise ConfigError("horizon", self.horizon, "finite criterion needs an integer horizon >= 1")
            if self.horizon < 1:
                raise ConfigError("horizon", self.horizon, "must be >= 1")
        if self.criterion == "discounted":
            if self.gamma is None or not (0.0 < float(self.gamma) < 1.0):
                raise ConfigError("gamma", self.gamma, "discounted criterion needs 0 < gamma < 1")

    # ------------------------------------------------------------------ basic quantities
    @property
    def num_states(self) -> int:
        return self.transitions.shape[0]

    @property
    def num_actions(self) -> int:
        return self.transitions.shape[1]

    @property
    def num_costs(self) -> int:
        return self.costs.shape[0]

    @property
    def expected_rewards(self) -> np.ndarray:
        """``r(s, a) = sum_{s'} P(s'|s, a) r(s, a, s')`` (or ``r`` itself when 2-D), shape ``(S, A)``."""
        return _expect(self.rewards, self.transitions)

    @property
    def expected_costs(self) -> np.ndarray:
        """Expected one-step costs ``c_i(s, a)``, shape ``(m, S, A)``."""
        return np.stack([_expect(ci, self.transitions) for ci in self.costs])

    def with_criterion(
        self, criterion: str, horizon: int | None = None, gamma: float | None = None, limits: Any = None
    ) -> TabularCMDP:
        """A copy under another criterion (and optionally other limits, which are criterion-dependent)."""
        return dataclasses.replace(
            self,
            criterion=criterion,
            horizon=self.horizon if horizon is None else horizon,
            gamma=self.gamma if gamma is None else gamma,
            limits=self.limits if limits is None else limits,
        )

    # ------------------------------------------------------------------ exact optimum
    def solve(self, constrained: bool = True) -> LPSolution:
        """Exact optimum by the occupancy-measure LP (scipy ``linprog``, HiGHS).

        With ``constrained=False`` the cost limits are dropped (the unconstrained MDP optimum). Raises
        :class:`InfeasibleCMDPError` when no policy meets the limits.
        """
        S, A, m = self.num_states, self.num_actions, self.num_costs
        rbar, cbar = self.expected_rewards.reshape(-1), self.expected_costs.reshape(m, -1)
        Pflat_T = sp.csr_matrix(self.transitions.reshape(S * A, S).T)  # (S, SA): sum_{s,a} P(s'|s,a) q(s,a)
        M = sp.kron(sp.identity(S), np.ones((1, A)), format="csr")  # (S, SA): sum_a q(s, a)
        if self.criterion == "finite":
            H = int(self.horizon)
            sub = sp.diags([np.ones(H - 1)], [-1], shape=(H, H))
            A_eq = sp.kron(sp.identity(H), M) - sp.kron(sub, Pflat_T)
            b_eq = np.concatenate([self.initial, np.zeros((H - 1) * S)])
            obj, cons = np.tile(rbar, H), np.tile(cbar, (1, H))
            shape: tuple[int, ...] = (H, S, A)
        elif self.criterion == "discounted":
            A_eq = M - float(self.gamma) * Pflat_T
            b_eq = self.initial.copy()
            obj, cons, shape = rbar, cbar, (S, A)
        else:
            A_eq = sp.vstack([M - Pflat_T, sp.csr_matrix(np.ones((1, S * A)))])
            b_eq = np.concatenate([np.zeros(S), [1.0]])
            obj, cons, shape = rbar, cbar, (S, A)
        kwargs: dict[str, Any] = {}
        if constrained:
            kwargs = {"A_ub": sp.csr_matrix(cons), "b_ub": np.asarray(self.limits)}
        res = linprog(-obj, A_eq=sp.csr_matrix(A_eq), b_eq=b_eq, bounds=(0, None), method="highs", **kwargs)
        if res.status == 2:
            lo = self.solve_min_costs()
            raise InfeasibleCMDPError(
                f"limits = {self.limits.tolist()}: infeasible; the smallest achievable cost of each "
                f"constraint on its own is {lo.tolist()}"
            )
        if res.status != 0:
            raise BayesCRLError(f"LP solver failed for CMDP '{self.name}': {res.message}")
        q = np.clip(res.x, 0.0, None).reshape(shape)
        lam = -np.asarray(res.ineqlin.marginals) if constrained else np.zeros(0)
        return LPSolution(
            value=float(obj @ res.x),
            costs=np.asarray(cons @ res.x, dtype=float),
            occupancy=q,
            policy=policy_from_occupancy(q),
            multipliers=np.clip(lam, 0.0, None),
            criterion=self.criterion,
        )

    def solve_min_costs(self) -> np.ndarray:
        """For each cost ``i`` separately, the smallest achievable ``J_{C_i}`` (ignoring the other limits)."""
        out = []
        for i in range(self.num_costs):
            neg = dataclasses.replace(
                self, rewards=-self.expected_costs[i], costs=self.costs[:1] * 0.0, limits=np.zeros(1)
            )
            out.append(-neg.solve(constrained=False).value)
        return np.asarray(out)

    # ------------------------------------------------------------------ exact policy evaluation
    def evaluate(self, policy: np.ndarray) -> PolicyEvaluation:
        """Exact value, costs, occupancy and state distribution of a stochastic policy.

        ``policy`` is ``(S, A)`` (stationary) or, for the finite criterion, ``(H, S, A)`` (non-stationary);
        each row must be a probability vector.
        """
        pi = self._check_policy(policy)
        S, m = self.num_states, self.num_costs
        P = self.transitions
        signals = np.concatenate([self.expected_rewards[None], self.expected_costs])  # (1+m, S, A)
        if self.criterion == "finite":
            H = int(self.horizon)
            pis = np.broadcast_to(pi, (H, *pi.shape[-2:]))
            dist = np.zeros((H, S))
            dist[0] = self.initial
            for h in range(H - 1):
                dist[h + 1] = np.einsum("s,sa,sat->t", dist[h], pis[h], P)
            occ = dist[:, :, None] * pis
            V = np.zeros((1 + m, H + 1, S))
            for h in range(H - 1, -1, -1):
                Q = signals + np.einsum("sat,kt->ksa", P, V[:, h + 1])
                V[:, h] = np.einsum("ksa,sa->ks", Q, pis[h])
            V = V[:, :H]
            J = V[:, 0] @ self.initial
            return PolicyEvaluation(float(J[0]), J[1:], occ, dist, V[0], V[1:])
        P_pi = np.einsum("sa,sat->st", pi, P)
        g_pi = np.einsum("ksa,sa->ks", signals, pi)  # (1+m, S)
        if self.criterion == "discounted":
            gamma = float(self.gamma)
            eye = np.eye(S)
            V = np.linalg.solve(eye - gamma * P_pi, g_pi.T).T  # (1+m, S)
            occ_s = np.linalg.solve((eye - gamma * P_pi).T, self.initial)  # unnormalised occupation
            J = V @ self.initial
            return PolicyEvaluation(
                float(J[0]), J[1:], occ_s[:, None] * pi, occ_s * (1.0 - gamma), V[0], V[1:]
            )
        d = stationary_distribution(P_pi)
        J = g_pi @ d
        # bias h: (I - P_pi + 1 d^T) h = g - J 1, which also gives d^T h = 0 (unichain: matrix invertible)
        Mbias = np.eye(S) - P_pi + np.outer(np.ones(S), d)
        V = np.linalg.solve(Mbias, (g_pi - J[:, None]).T).T
        return PolicyEvaluation(float(J[0]), J[1:], d[:, None] * pi, d, V[0], V[1:])

    def _check_policy(self, policy: np.ndarray) -> np.ndarray:
        pi = _float_array("policy", policy, ndim=(2, 3))
        S, A = self.num_states, self.num_actions
        ok = pi.shape == (S, A) or (self.criterion == "finite" and pi.shape == (int(self.horizon), S, A))
        if not ok:
            want = f"({S}, {A})" + (f" or ({self.horizon}, {S}, {A})" if self.criterion == "finite" else "")
            raise ConfigError("policy", pi.shape, f"must have shape {want}")
        if (pi < -_TOL).any() or (np.abs(pi.sum(-1) - 1.0) > 1e-6).any():
            raise ConfigError("policy", pi.shape, "every row pi(.|s) must be a probability vector")
        return np.clip(pi, 0.0, None) / np.clip(pi, 0.0, None).sum(-1, keepdims=True)

    def make_env(self, max_episode_steps: int | None = None, observe_time: bool = False) -> TabularCMDPEnv:
        """This CMDP as a gymnasium environment (see :class:`TabularCMDPEnv`)."""
        return TabularCMDPEnv(self, max_episode_steps=max_episode_steps, observe_time=observe_time)


# ---------------------------------------------------------------------- helpers
def policy_from_occupancy(q: np.ndarray, tol: float = 1e-12) -> np.ndarray:
    """``pi(a|s) = q(s, a) / sum_a q(s, a)``; uniform where ``s`` has (numerically) zero occupancy."""
    tot = q.sum(-1, keepdims=True)
    uniform = np.full_like(q, 1.0 / q.shape[-1])
    return np.where(tot > tol, q / np.where(tot > tol, tot, 1.0), uniform)


def stationary_distribution(P_pi: np.ndarray) -> np.ndarray:
    """The stationary distribution ``d = d P_pi`` (``sum d = 1``) of a unichain transition matrix."""
    S = P_pi.shape[0]
    lhs = np.vstack([P_pi.T - np.eye(S), np.ones((1, S))])
    rhs = np.concatenate([np.zeros(S), [1.0]])
    d, *_ = np.linalg.lstsq(lhs, rhs, rcond=None)
    resid = np.abs(d @ P_pi - d).max()
    if resid > 1e-7:
        raise BayesCRLError(
            f"no unique stationary distribution (residual {resid:.2e}): chain is not unichain"
        )
    d = np.clip(d, 0.0, None)
    return d / d.sum()


def _expect(x: np.ndarray, P: np.ndarray) -> np.ndarray:
    return x if x.ndim == 2 else np.einsum("sat,sat->sa", P, x)


def _checked_transitions(value: Any) -> np.ndarray:
    """``P (S, A, S)``: non-negative rows summing to 1 (to 1e-6), clipped at 0 and renormalised."""
    P = _float_array("transitions", value, ndim=(3,))
    S, A, S2 = P.shape
    if S2 != S or S < 1 or A < 1:
        raise ConfigError("transitions", P.shape, "must have shape (S, A, S) with S, A >= 1")
    if (P < -_TOL).any():
        idx = np.argwhere(P < -_TOL)[0]
        raise ConfigError("transitions", float(P[tuple(idx)]), f"negative probability at {tuple(idx)}")
    sums = P.sum(-1)
    bad = np.argwhere(np.abs(sums - 1.0) > 1e-6)
    if len(bad):
        s, a = bad[0]
        raise ConfigError("transitions", float(sums[s, a]), f"P[{s}, {a}, :] must sum to 1")
    P = np.clip(P, 0.0, None)
    return P / P.sum(-1, keepdims=True)


def _checked_costs(value: Any, S: int, A: int) -> np.ndarray:
    """``c (m, S, A)`` or ``(m, S, A, S)``; a 2-D ``(S, A)`` array is one cost (``m = 1``)."""
    c = _float_array("costs", value, ndim=(2, 3, 4))
    if c.ndim == 2:
        c = c[None]
    if c.shape[1:] not in ((S, A), (S, A, S)):
        raise ConfigError("costs", c.shape, f"must have shape (m, {S}, {A}) or (m, {S}, {A}, {S})")
    return c


def _checked_initial(value: Any, S: int) -> np.ndarray:
    """``rho (S,)``: a probability vector (to 1e-6), clipped at 0 and renormalised."""
    rho = _float_array("initial", value, ndim=(1,))
    if rho.shape != (S,):
        raise ConfigError("initial", rho.shape, f"must have shape ({S},)")
    if (rho < -_TOL).any() or abs(rho.sum() - 1.0) > 1e-6:
        raise ConfigError("initial", rho.tolist(), "must be a probability vector (>= 0, sums to 1)")
    rho = np.clip(rho, 0.0, None)
    return rho / rho.sum()


def _float_array(name: str, value: Any, ndim: tuple[int, ...]) -> np.ndarray:
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ConfigError(name, value, f"not a numeric array ({exc})") from exc
    if arr.ndim not in ndim:
        raise ConfigError(name, arr.shape, f"must be a {' or '.join(map(str, ndim))}-D array")
    if not np.isfinite(arr).all():
        idx = tuple(int(i) for i in np.argwhere(~np.isfinite(arr))[0])
        raise ConfigError(name, float(arr[idx]), f"non-finite entry at {idx}")
    return arr


# ---------------------------------------------------------------------- gymnasium environment
class TabularCMDPEnv(gym.Env):
    """A :class:`TabularCMDP` as a gymnasium env: ``Discrete(S)`` observations, ``Discrete(A)`` actions.

    ``step`` samples ``s' ~ P(.|s, a)`` and returns ``r(s, a[, s'])``; the costs ``c_i(s, a[, s'])`` are in
    ``info["cost"]`` (a float when ``m = 1``, an array of length ``m`` otherwise) and ``info["costs"]``
    (``{"cost_0": ..., ...}``); ``info["t"]`` is the time index (0-based) of the action just taken.
    With ``observe_time=True`` (finite criterion) the observation is ``h * S + s`` in ``Discrete(H * S)``,
    so that a policy of the observation can represent the thesis' non-stationary ``pi_h``.

    Episodes: under the finite criterion the episode *terminates* after ``H`` steps (the thesis' terminal
    state ``s_H``: nothing follows, so a learner must not bootstrap). Under the discounted and average
    criteria the process never terminates; it is *truncated* after ``max_episode_steps`` (default 1000).
    Discounting is left to the learner. ``cost_limits`` holds ``d`` (on the criterion's scale).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        cmdp: TabularCMDP,
        max_episode_steps: int | None = None,
        render_mode: str | None = None,
        observe_time: bool = False,
    ):
        if not isinstance(cmdp, TabularCMDP):
            raise ConfigError("cmdp", type(cmdp).__name__, "must be a TabularCMDP")
        if render_mode not in (None, "ansi"):
            raise ConfigError("render_mode", render_mode, "must be None or 'ansi'")
        if cmdp.criterion == "finite":
            if max_episode_steps is not None and max_episode_steps != cmdp.horizon:
                raise ConfigError(
                    "max_episode_steps", max_episode_steps, "finite criterion: episodes last H steps"
                )
            max_episode_steps = int(cmdp.horizon)
        elif max_episode_steps is None:
            max_episode_steps = 1000
        if int(max_episode_steps) < 1:
            raise ConfigError("max_episode_steps", max_episode_steps, "must be >= 1")
        self.cmdp = cmdp
        self.max_episode_steps = int(max_episode_steps)
        self.render_mode = render_mode
        if observe_time and cmdp.criterion != "finite":
            raise ConfigError("observe_time", observe_time, "only meaningful for the finite criterion")
        self.observe_time = bool(observe_time)
        n_obs = cmdp.num_states * (int(cmdp.horizon) if self.observe_time else 1)
        self.observation_space = gym.spaces.Discrete(n_obs)
        self.action_space = gym.spaces.Discrete(cmdp.num_actions)
        self.num_costs = cmdp.num_costs
        self.cost_limits = np.asarray(cmdp.limits, dtype=float)
        self._cum_P = np.cumsum(cmdp.transitions, axis=-1)
        self._cum_rho = np.cumsum(cmdp.initial)
        self._s = 0
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._s = int(
            min(
                np.searchsorted(self._cum_rho, self.np_random.random(), side="right"),
                self.cmdp.num_states - 1,
            )
        )
        self._t = 0
        return self._obs(), {"t": 0}

    def _obs(self) -> int:
        """``s``, or ``h * S + s`` with ``observe_time`` (so a stationary learner can be non-stationary)."""
        if self.observe_time and self._t < self.max_episode_steps:
            return self._t * self.cmdp.num_states + self._s
        return self._s

    def step(self, action):
        if not self.action_space.contains(action):
            raise ConfigError("action", action, f"must be in {self.action_space}")
        s, a = self._s, int(action)
        s2 = int(
            min(
                np.searchsorted(self._cum_P[s, a], self.np_random.random(), side="right"),
                self.cmdp.num_states - 1,
            )
        )
        r = self.cmdp.rewards[s, a] if self.cmdp.rewards.ndim == 2 else self.cmdp.rewards[s, a, s2]
        c = self.cmdp.costs[:, s, a] if self.cmdp.costs.ndim == 3 else self.cmdp.costs[:, s, a, s2]
        c = np.asarray(c, dtype=float)
        info = {
            "t": self._t,
            "cost": float(c[0]) if self.num_costs == 1 else c.copy(),
            "costs": {f"cost_{i}": float(ci) for i, ci in enumerate(c)},
        }
        self._s, self._t = s2, self._t + 1
        done = self._t >= self.max_episode_steps
        terminated = done and self.cmdp.criterion == "finite"
        truncated = done and self.cmdp.criterion != "finite"
        return self._obs(), float(r), terminated, truncated, info

    def render(self):
        if self.render_mode == "ansi":
            return f"t={self._t} s={self._s}"
        return None


# ---------------------------------------------------------------------- canonical instances
def make_small_cmdp(
    criterion: str = "finite",
    horizon: int = 10,
    gamma: float = 0.9,
    limit: float | None = None,
    bonus: float = 0.5,
) -> TabularCMDP:
    """A two-state "safe zone / hazard zone" CMDP whose optimum is known in closed form.

    State 0 is safe, state 1 is a hazard; action ``a`` moves deterministically to state ``a``. Being in the
    safe zone pays ``1 - bonus``, in the hazard zone ``1`` and costs ``1`` (``r(s, a) = 1 - bonus + bonus*s``,
    ``c(s, a) = s``); the episode starts in state 0. Every unit of cost therefore buys exactly ``bonus``
    reward, and the hazard can be entered at most ``n_max`` times (``H - 1``; ``gamma/(1-gamma)`` discounted;
    a fraction 1 under the average criterion). Hence, with ``R0 = (1 - bonus) * {H, 1/(1-gamma), 1}``,

    ``J* = R0 + bonus * min(d, n_max)``  and, unconstrained, ``R0 + bonus * n_max``,

    and the optimal multiplier of the constraint is ``bonus`` when ``0 < d < n_max``. Default limits:
    ``d = 3`` (finite), ``d = 3`` (discounted) and ``d = 0.3`` (average), all binding.
    """
    if not 0.0 < bonus <= 1.0:
        raise ConfigError("bonus", bonus, "must be in (0, 1]")
    if limit is None:
        limit = {"finite": 3.0, "discounted": 3.0, "average": 0.3}.get(criterion, 3.0)
    P = np.zeros((2, 2, 2))
    P[:, 0, 0] = 1.0
    P[:, 1, 1] = 1.0
    r = np.array([[1.0 - bonus] * 2, [1.0, 1.0]])
    c = np.array([[[0.0, 0.0], [1.0, 1.0]]])
    return TabularCMDP(
        P,
        r,
        c,
        [limit],
        np.array([1.0, 0.0]),
        criterion=criterion,
        horizon=horizon,
        gamma=gamma,
        name="small-safe-hazard",
        meta={"bonus": bonus},
    )


def make_ergodic_cmdp(
    num_states: int = 5,
    num_actions: int = 3,
    num_costs: int = 1,
    seed: int = 0,
    tightness: float = 0.5,
    criterion: str = "average",
    horizon: int = 20,
    gamma: float = 0.95,
    min_prob: float = 0.02,
) -> TabularCMDP:
    """A random CMDP with every transition probability ``>= min_prob`` (ergodic under every policy).

    Rewards are uniform on [0, 1]; each cost is positively correlated with the reward
    (``c_i = 0.5 * r + 0.5 * u_i``, ``u_i`` uniform) so that being safe costs reward. The limits are
    ``d = (1 - tightness) * C(q_safe) + tightness * C(q_opt)``, where ``q_opt`` is the unconstrained optimum
    and ``q_safe`` minimises the summed costs; a mixture of two occupancies is an occupancy, so the CMDP is
    feasible, and for ``tightness < 1`` the constraint binds (checked: the draw is repeated from the same
    generator until the constrained optimum is strictly below the unconstrained one). Deterministic in
    ``seed``.
    """
    _check_ergodic_args(num_states, num_actions, num_costs, tightness, min_prob)
    S, A, m = int(num_states), int(num_actions), int(num_costs)
    rng = np.random.default_rng(seed)
    for _ in range(100):
        raw = rng.dirichlet(np.full(S, 0.5), size=(S, A))
        P = min_prob + (1.0 - S * min_prob) * raw
        r = rng.uniform(size=(S, A))
        c = 0.5 * r[None] + 0.5 * rng.uniform(size=(m, S, A))
        rho = np.full(S, 1.0 / S)
        base = TabularCMDP(
            P,
            r,
            c,
            np.zeros(m),
            rho,
            criterion=criterion,
            horizon=horizon,
            gamma=gamma,
            name=f"ergodic-S{S}-A{A}-m{m}-seed{seed}",
        )
        cmdp, binding = _with_mixed_limits(base, tightness, {"seed": seed, "tightness": tightness})
        if binding:
            return cmdp
    raise BayesCRLError(f"could not draw a CMDP with a binding constraint (seed={seed})")  # pragma: no cover


def _check_ergodic_args(num_states, num_actions, num_costs, tightness: float, min_prob: float) -> None:
    """The arguments of :func:`make_ergodic_cmdp`: ``S >= 1``, ``A >= 2``, ``m >= 1``, ``tightness`` in
    ``[0, 1)`` and ``min_prob`` in ``(0, 1/S]``."""
    if int(num_states) < 1 or int(num_actions) < 2:
        raise ConfigError("num_states/num_actions", (num_states, num_actions), "need S >= 1 and A >= 2")
    if int(num_costs) < 1:
        raise ConfigError("num_costs", num_costs, "must be >= 1")
    if not 0.0 <= tightness < 1.0:
        raise ConfigError("tightness", tightness, "must be in [0, 1)")
    if not 0.0 < min_prob <= 1.0 / num_states:
        raise ConfigError("min_prob", min_prob, f"must be in (0, 1/S] = (0, {1.0 / num_states}]")


def _with_mixed_limits(base: TabularCMDP, tightness: float, meta: dict) -> tuple[TabularCMDP, bool]:
    """``base`` with limits ``(1 - tightness) C(q_safe) + tightness C(q_opt)`` (``q_opt``: the unconstrained
    optimum, ``q_safe``: the minimiser of the summed costs), and whether the constraint binds (the
    constrained optimum strictly below the unconstrained one)."""
    opt = base.solve(constrained=False)
    safe = dataclasses.replace(base, rewards=-base.costs.sum(0)).solve(constrained=False)
    limits = (1.0 - tightness) * safe.costs + tightness * opt.costs
    cmdp = dataclasses.replace(base, limits=limits, meta=meta)
    return cmdp, cmdp.solve().value < opt.value - 1e-6 * max(1.0, abs(opt.value))

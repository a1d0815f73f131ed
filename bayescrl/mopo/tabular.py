r"""Tabular (context-free, finite action set) MOPO: data parsing, the exact solver and Algorithm `mopo`.

The empirical problem Eq. `empirical-cop` over a finite action set reduces to per-action estimates

    p_hat(a) = sum_{i: y_i = a} I_p(y_i, y'_i) / (N pi_ref(a)),   q_hat(a) likewise with I_q,

(over the symmetrically augmented records), because ``(1/N) sum_i rho(y_i) I(y_i, y'_i) = sum_a pi_ref(a)
rho(a) I_hat(a)``. The KL term is computed exactly under the given ``pi_ref`` (the text's empirical
``(1/N) sum_i rho(y_i) ln rho(y_i)`` estimates it; the two agree when the data's action frequencies equal
``pi_ref``, e.g. D1 and D2 of the sanity check). This keeps an action that never appears in the data well
defined: it gets ``p_hat = q_hat = 0`` and is down-weighted as ``tau`` decreases (data set D3).

Solvers:

* :func:`solve_exact` -- ``solver: exact``: ``lam*`` minimises the convex dual ``D(lam)`` (Eq. `dual`,
  normalised, see :mod:`bayescrl.mopo.objective`) with L-BFGS-B, then ``pi* = pi_ref rho*_{lam*}``; the KKT
  residuals are returned. ``eps = 0`` (no lower bound) and fixed ``b``.
* :func:`run_mopo` -- ``solver: mopo``: Algorithm `mopo` with Adam, mini-batches of records, the ``chi``
  lower-bound step (``eps > 0``), the projected ``lam`` step, ``rho`` retrieval and policy extraction, the
  lagged reference every ``t0`` steps and the adaptive thresholds ``b = beta G(rho^(t - t0))``.
* :func:`run_mopo_lb` -- ``solver: mopo-lb``: single stochastic ascent steps on the relaxed log-barrier
  Lagrangian Eq. `logbarrier` with ``sigma^(t) = gamma^t sigma0`` (appendix `logbarrier`).

Both stochastic solvers are vectorised over ``runs`` independent seeds (leading tensor dimension); each
run draws its mini-batches from its own stream (run ``r`` from ``seed + r``, by
:func:`~bayescrl.utils.seeding.run_generators`), so a run's result does not depend on how many runs share
the call.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from bayescrl.mopo import objective as O
from bayescrl.mopo.preferences import (
    ESTIMATORS,
    action_frequency,
    empirical_scores,
    parse_raters,
)
from bayescrl.raters import check_rater_ids
from bayescrl.utils import ConfigError, DataError
from bayescrl.utils.checks import boolean, check_device, number, positive_int
from bayescrl.utils.io import check_keys
from bayescrl.utils.seeding import randint, run_generators


@dataclass
class TabularProblem:
    """A context-free preference data set over named actions.

    ``y``/``y_prime`` are action indices of the *raw* records, ``ind[N, K]`` their 0/1 indicators
    ``I_k(y > y')``; ``primary`` is the column of the primary objective; ``ref`` is ``pi_ref`` over actions.
    ``rater[N]`` indexes ``raters`` (records without a rater: the first). ``estimator`` picks the empirical
    per-action estimate (:func:`~bayescrl.mopo.preferences.empirical_scores`); ``scores`` (``p[A]``,
    ``q[A, K-1]``), when set, replaces it (the Bradley–Terry posterior summaries of
    :func:`~bayescrl.mopo.tabular_run.apply_preference_model`).
    """

    actions: list[str]
    y: Tensor
    y_prime: Tensor
    ind: Tensor
    primary: int
    ref: Tensor
    rater: Tensor | None = None
    raters: list = field(default_factory=list)
    estimator: str = "win_rate"
    scores: tuple[Tensor, Tensor] | None = None

    @property
    def n_objectives(self) -> int:
        return int(self.ind.shape[-1])

    def records(self, augment: bool = True) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(y, y', p, q)`` per record, symmetrically augmented (appendix `samplingbasedcop`) by default.

        With ``estimator: win_rate`` record ``i`` carries the weight ``N pi_ref(y_i) / #{j: y_j = y_i}``
        (1 when ``pi_ref`` is the data's frequency), so that the record mean ``(1/N) sum_i rho(y_i) I(y_i,
        y'_i)`` of the stochastic solvers equals ``E_ref[rho p_hat]`` with the win rates ``p_hat`` (the exact
        solver's problem). With ``scores`` set the records are the ``A`` actions themselves, each carrying ``A
        pi_ref(a)`` times its estimate, so that a uniform mini-batch mean is unbiased for the same quantity.
        """
        if self.scores is not None:
            p_s, q_s = self.scores
            a = torch.arange(len(self.actions), device=self.ref.device)
            w = len(self.actions) * self.ref.to(p_s)
            return a, a, w * p_s, w[:, None] * q_s
        y, yp, p, q = self._raw_records(augment)
        if self.estimator == "win_rate":  # weight N pi_ref(y_i) / #{j: y_j = y_i}: mean = E_ref[rho win rate]
            counts = torch.zeros_like(self.ref).index_add_(0, y, torch.ones_like(p))
            w = (y.shape[0] * self.ref / counts.clamp_min(1.0))[y]
            p, q = p * w, q * w[:, None]
        return y, yp, p, q

    def _raw_records(self, augment: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        y, yp, ind = (self.y, self.y_prime, self.ind)
        if augment:
            y, yp, ind = O.augment_symmetric(y, yp, ind)
        p, q = O.split_objectives(ind, self.primary)
        return y, yp, p, q

    def action_scores(self, augment: bool = True) -> tuple[Tensor, Tensor]:
        """Per-action estimates ``(p_hat[A], q_hat[A, K-1])`` (module docstring)."""
        if self.scores is not None:
            return self.scores

        y, _, p, q = self._raw_records(augment)
        return empirical_scores(y, p, q, self.ref, self.estimator)


#: the fields of one preference record of ``data:``
RECORD_KEYS = ("y", "y_prime", "prefs", "rater")


def parse_tabular(config: Mapping[str, Any], device: str | torch.device = "cpu") -> TabularProblem:
    """Build a :class:`TabularProblem` from the inline config of the ``mopo`` command.

    ``actions: [names]``, ``data: [{"y": name, "y_prime": name, "prefs": [0/1 per objective], "rater": id}]``
    (``rater`` optional, one of ``raters: [{id, beta?, lam?}]``), ``primary`` (index, default the last
    objective, as in the text), optional ``reference``: ``data`` (the default: the frequency of each action
    among the records' ``y`` -- of ``y`` and ``y'`` with the symmetric augmentation -- since the records'
    responses are draws from ``pi_ref`` in the thesis' set-up), ``uniform``, or probabilities (a list
    aligned with ``actions`` or a mapping name -> probability); ``estimator``: ``win_rate`` (default) or
    ``score`` (:func:`~bayescrl.mopo.preferences.empirical_scores`). Every malformed record raises
    :class:`DataError` naming the field, the record index and the value.
    """
    names = _parse_actions(config.get("actions"))
    data = config.get("data")
    if not isinstance(data, list) or not data:
        raise ConfigError("data", data, "must be a non-empty list of {y, y_prime, prefs} records")
    raters = parse_raters(config.get("raters"))
    check_rater_ids([rec.get("rater") if isinstance(rec, Mapping) else None for rec in data], raters)
    ys, yps, rows, rts = _parse_records(data, names, {r.id: i for i, r in enumerate(raters)})
    k = len(rows[0])
    primary = config.get("primary", k - 1)
    if isinstance(primary, bool) or not isinstance(primary, int) or not -k <= primary < k:
        raise ConfigError("primary", primary, f"must be an objective index in [0, {k - 1}]")
    estimator = config.get("estimator", "win_rate")
    if estimator not in ESTIMATORS:
        raise ConfigError("estimator", estimator, f"must be one of {list(ESTIMATORS)}")
    ref = _reference(config, ys + yps if config.get("augment", True) else ys, names)
    dt = torch.float64
    return TabularProblem(
        actions=names,
        y=torch.tensor(ys, device=device),
        y_prime=torch.tensor(yps, device=device),
        ind=torch.tensor(rows, dtype=dt, device=device),
        primary=primary % k,
        ref=ref.to(device),
        rater=torch.tensor(rts, device=device),
        raters=raters,
        estimator=estimator,
    )


def _parse_actions(actions: Any) -> list[str]:
    """The action names: a list of at least two distinct names."""
    if not isinstance(actions, list) or len(actions) < 2:
        raise ConfigError("actions", actions, "must be a list of at least two action names")
    names = [str(a) for a in actions]
    if len(set(names)) != len(names):
        raise ConfigError("actions", actions, "action names must be unique")
    return names


def _parse_records(
    data: list, names: list[str], rater_index: dict[str, int]
) -> tuple[list[int], list[int], list[list[float]], list[int]]:
    """``(y, y', prefs, rater)`` per record (action and rater indices, float indicators), every record
    checked (:func:`_check_record`; the number of objectives ``K`` is the first record's)."""
    index = {a: i for i, a in enumerate(names)}
    k = None
    ys, yps, rows, rts = [], [], [], []
    for i, rec in enumerate(data):
        k = _check_record(rec, i, index, names, k)
        rts.append(rater_index[str(rec["rater"])] if "rater" in rec else 0)
        ys.append(index[str(rec["y"])])
        yps.append(index[str(rec["y_prime"])])
        rows.append([float(v) for v in rec["prefs"]])
    return ys, yps, rows, rts


def _check_record(rec: Any, i: int, index: dict[str, int], names: list[str], k: int | None) -> int:
    """Refuse a malformed record ``i`` (:class:`DataError` naming the field, the index and the value);
    returns ``K``, its number of indicators (which must equal ``k`` unless ``k`` is None)."""
    if not isinstance(rec, Mapping):
        raise DataError("data", rec, "record must be a mapping with y, y_prime, prefs", index=i)
    check_keys(rec, RECORD_KEYS, f"data[{i}]")  # a misspelt 'rater' would silently pool the raters
    for key in ("y", "y_prime", "prefs"):
        if key not in rec:
            raise DataError(f"data.{key}", dict(rec), f"missing field '{key}'", index=i)
    for key in ("y", "y_prime"):
        if str(rec[key]) not in index:
            raise DataError(f"data.{key}", rec[key], f"unknown action (known: {names})", index=i)
    prefs = rec["prefs"]
    if not isinstance(prefs, (list, tuple)) or not prefs:
        raise DataError("data.prefs", prefs, "must be a non-empty list of 0/1 indicators", index=i)
    if k is None:
        k = len(prefs)
        if k < 2:
            why = "need at least two objectives (primary + constraint)"
            raise DataError("data.prefs", prefs, why, index=i)
    if len(prefs) != k:
        raise DataError("data.prefs", prefs, f"has {len(prefs)} indicators, expected K = {k}", index=i)
    for v in prefs:
        if isinstance(v, bool) or v not in (0, 1):
            raise DataError("data.prefs", prefs, "indicators must be 0 or 1", index=i)
    if str(rec["y"]) == str(rec["y_prime"]):
        why = "a record must compare two different actions"
        raise DataError("data.y_prime", rec["y_prime"], why, index=i)
    return k


def _reference(config: Mapping[str, Any], seen: list[int], names: list[str]) -> Tensor:
    """``pi_ref``: ``reference: data`` (the default), the frequency of the actions ``seen`` in the records
    (each must appear); else :func:`_parse_reference`."""
    ref_cfg = config.get("reference", "data")
    if ref_cfg != "data":
        return _parse_reference(ref_cfg, names)
    ref = action_frequency(torch.tensor(seen, device="cpu"), len(names))
    if bool((ref == 0).any()):
        missing = names[int(torch.nonzero(ref == 0)[0, 0])]
        raise ConfigError(
            "reference",
            "data",
            f"action {missing!r} never appears in the records, so its empirical frequency is 0 "
            "(Supp(pi) = Supp(pi_ref)); give reference: uniform or probabilities",
        )
    return ref


def _parse_reference(ref: Any, names: list[str]) -> Tensor:
    n = len(names)
    if ref is None or ref == "uniform":
        return torch.full((n,), 1.0 / n, dtype=torch.float64, device="cpu")
    if isinstance(ref, Mapping):
        unknown = [k for k in ref if str(k) not in names]
        if unknown:
            raise ConfigError("reference", unknown[0], f"unknown action (known: {names})")
        vals = [float(ref.get(a, 0.0)) for a in names]
    elif isinstance(ref, list) and len(ref) == n:
        vals = [float(v) for v in ref]
    else:
        raise ConfigError(
            "reference", ref, f"must be 'data', 'uniform', a list of {n} probabilities or a mapping"
        )
    for i, v in enumerate(vals):
        if not v > 0:
            raise ConfigError("reference", v, "probabilities must be > 0 (Supp(pi) = Supp(pi_ref))", index=i)
    if abs(sum(vals) - 1.0) > 1e-6:
        raise ConfigError("reference", vals, f"must sum to 1 (sums to {sum(vals):.6g})")
    return torch.tensor(vals, dtype=torch.float64, device="cpu")


def as_threshold(b: Any, n_constraints: int, field_name: str = "b") -> Tensor:
    """Threshold vector ``b[K-1]`` from a scalar or a list (checked to lie in [0, 1])."""
    vals = [b] * n_constraints if isinstance(b, (int, float)) and not isinstance(b, bool) else b
    if not isinstance(vals, (list, tuple)) or len(vals) != n_constraints:
        raise ConfigError(field_name, b, f"must be a number or a list of {n_constraints} numbers (K - 1)")
    for i, v in enumerate(vals):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= float(v) <= 1.0:
            raise ConfigError(field_name, v, "thresholds are preference probabilities in [0, 1]", index=i)
    return torch.tensor([float(v) for v in vals], dtype=torch.float64, device="cpu")


def check_threshold(b: Any, n_constraints: int, batched: bool = False) -> Tensor:
    """The solvers' thresholds ``b[K-1]`` (with ``batched`` also one row per run, ``[runs, K-1]``): a tensor,
    array, list or number (every constraint), as a finite float64 tensor (a tensor keeps its device).
    Unlike a config's :func:`as_threshold` it allows values outside [0, 1] (``estimator: score`` estimates
    are not probabilities)."""
    rows = " (or [runs, K - 1])" if batched else ""
    why = f"must be a finite tensor (or list) of K - 1 = {n_constraints} thresholds{rows}"
    if isinstance(b, (bool, str)):
        raise ConfigError("b", b, why)
    try:
        t = torch.as_tensor(b, dtype=torch.float64, device=b.device if isinstance(b, Tensor) else "cpu")
    except (TypeError, ValueError, RuntimeError):
        raise ConfigError("b", b, why) from None
    t = t.expand(n_constraints) if t.dim() == 0 else t
    if t.dim() > (2 if batched else 1) or t.shape[-1] != n_constraints:
        raise ConfigError("b", b, f"{why} (got shape {tuple(t.shape)})")
    if not bool(torch.isfinite(t).all()):
        raise ConfigError("b", b, why)
    return t


def check_tau(tau: Any, index: int | None = None) -> float:
    """``tau`` as a finite float > 0 (0 divides by zero in ``rho*``; inf returns ``pi_ref``)."""
    return number(tau, "tau", 0.0, strict=True, index=index)


# --------------------------------------------------------------------------------------------- exact


@dataclass
class ExactSolution:
    """Output of :func:`solve_exact`: policy, multipliers, constraint values and KKT residuals."""

    policy: Tensor
    lam: Tensor
    G: Tensor
    b: Tensor
    F: float
    kkt: dict[str, float] = field(default_factory=dict)


def kkt_residuals(
    policy: Tensor, lam: Tensor, p_hat: Tensor, q_hat: Tensor, ref: Tensor, tau: float, b: Tensor
) -> dict[str, float]:
    """KKT residuals of the normalised empirical problem (variables ``pi = pi_ref rho`` on the simplex).

    stationarity: spread of ``p_hat + lam.q_hat - tau ln rho`` over actions (must be a constant, the
    normalisation multiplier); primal/dual feasibility; complementary slackness ``|lam_k (G_k - b_k)|``.
    """
    rho = policy / ref
    v = p_hat + q_hat @ lam - tau * torch.log(rho)
    g = policy @ q_hat
    return {
        "stationarity": float((v - (ref * v).sum()).abs().max()),
        "primal_feasibility": float(torch.clamp(b - g, min=0).max()),
        "dual_feasibility": float(torch.clamp(-lam, min=0).max()),
        "complementary_slackness": float((lam * (g - b)).abs().max()),
        "normalisation": float((policy.sum() - 1).abs()),
    }


def _check_feasible(q_hat: Tensor, b: Tensor) -> None:
    """Slater check by LP: ``max t`` s.t. ``sum_a pi_a q_hat[a, k] >= b_k + t`` over the simplex."""
    from scipy.optimize import linprog

    a_n, c_n = q_hat.shape
    qn = q_hat.cpu().numpy()
    c = np.zeros(a_n + 1)
    c[-1] = -1.0
    a_ub = np.hstack([-qn.T, np.ones((c_n, 1))])
    b_ub = -b.cpu().numpy()
    a_eq = np.hstack([np.ones((1, a_n)), np.zeros((1, 1))])
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=[1.0], bounds=[(0, None)] * a_n + [(None, 1.0)])
    if not res.success or -res.fun <= 1e-9:
        best = qn.max(0)
        raise ConfigError(
            "b",
            b.tolist(),
            f"no policy has G(pi) > b strictly (Slater); per-constraint maxima of G: {best.tolist()}",
        )


def solve_exact(
    problem: TabularProblem, tau: float, b: Tensor | Sequence[float], augment: bool = True, tol: float = 1e-12
) -> ExactSolution:
    """Exact optimum of Eq. `empirical-cop` (normalised, ``eps = 0``): ``lam* = argmin_{lam >= 0} D(lam)``.

    D is convex (log-sum-exp of affine maps); L-BFGS-B in float64 with the analytic gradient
    ``G(rho*_lam) - b`` (:func:`~bayescrl.mopo.objective.dual_gradient`). Raises :class:`ConfigError` when
    ``b`` admits no strictly feasible policy (then ``lam*`` does not exist), and for a ``tau`` or ``b`` that
    :func:`check_tau` / :func:`check_threshold` refuse.
    """
    from scipy.optimize import minimize

    tau, b = check_tau(tau), check_threshold(b, problem.n_objectives - 1).cpu()
    boolean(augment, "augment")
    p_hat, q_hat = problem.action_scores(augment)
    p_hat, q_hat = p_hat.double().cpu(), q_hat.double().cpu()
    ref = problem.ref.double().cpu()
    _check_feasible(q_hat, b)

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        lam = torch.as_tensor(x, device="cpu")
        val = O.dual_value(lam, p_hat, q_hat, b, tau, ref)
        grad = O.dual_gradient(lam, p_hat, q_hat, b, tau, ref)
        return float(val), grad.numpy()

    c_n = q_hat.shape[-1]
    res = minimize(
        fun,
        np.zeros(c_n),
        jac=True,
        method="L-BFGS-B",
        bounds=[(0, None)] * c_n,
        options={"ftol": tol, "gtol": 1e-12, "maxiter": 10_000},
    )
    lam = torch.as_tensor(res.x, dtype=torch.float64, device="cpu")
    rho = O.rho_star(p_hat, q_hat, lam, tau, ref)
    policy = ref * rho
    f, g = O.primal_values(rho, p_hat, q_hat, tau, ref)
    kkt = kkt_residuals(policy, lam, p_hat, q_hat, ref, tau, b)
    dev = problem.ref.device
    return ExactSolution(policy.to(dev), lam.to(dev), g.to(dev), b.to(dev), float(f), kkt)


# ---------------------------------------------------------------------------------------- stochastic


@dataclass
class MopoRun:
    """Output of the stochastic solvers: final and logged policies / multipliers / thresholds per run."""

    policy: Tensor  # [R, A]
    lam: Tensor  # [R, C]
    b: Tensor  # [R, C]
    G: Tensor  # [R, C] constraint value of the final policy, E_pi[q_hat]
    steps: list[int]
    history: dict[str, Tensor]  # name -> [T_log, R, ...]


def _snapshot(history: dict[str, list[Tensor]], **vals: Tensor) -> None:
    for k, v in vals.items():
        history.setdefault(k, []).append(v.detach().clone())


class Adam:
    """``torch.optim.Adam`` fed explicit gradients, on one tensor or a list of them, with a geometric lr decay
    ``lr_t = lr * (lr_final / lr)^((t - 1) / (steps - 1))`` (constant when ``lr_final`` is None).

    The solvers compute their gradients by hand (Danskin for ``lam``, the closed-form policy-extraction
    gradient for ``psi``) and project after the step (``lam >= 0``, ``chi >= chi_min``), so this only hands
    them to ``torch.optim.Adam`` as ``.grad``; tensors of any leading batch of runs work (Adam is
    element-wise). The update is torch's (``m.lerp_``, ``sqrt(v) / sqrt(1 - beta2^t)``); the hand-written
    Adam it replaced computed the same formula in another order, so results agree to float rounding
    (``tests/test_mopo_tabular.py``). Constructing the first ``torch.optim`` optimiser imports
    ``torch._dynamo`` (about 2 s once per process).
    """

    def __init__(
        self,
        x: Tensor | list[Tensor],
        lr: float,
        lr_final: float | None = None,
        steps: int = 1,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ):
        self.params = [x] if isinstance(x, Tensor) else list(x)
        self.opt = torch.optim.Adam(self.params, lr=lr, betas=betas, eps=eps, foreach=len(self.params) > 1)
        self.lr0 = lr
        self.decay = 1.0 if lr_final is None else (lr_final / lr) ** (1.0 / max(steps - 1, 1))
        self.t = 0

    def step(self, grad: Tensor | list[Tensor] | tuple[Tensor, ...]) -> None:
        grads = [grad] if isinstance(grad, Tensor) else grad
        self.t += 1
        self.opt.param_groups[0]["lr"] = self.lr0 * self.decay ** (self.t - 1)
        for p, g in zip(self.params, grads, strict=True):
            p.grad = g
        self.opt.step()
        for p in self.params:
            p.grad = None


def _batch(gens: Sequence[torch.Generator], n_rec: int, batch: int | None, device) -> Tensor:
    """Record indices ``[R, M]`` drawn uniformly with replacement, row ``r`` from ``gens[r]`` (all records
    when ``batch`` is None)."""
    if batch is None:
        return torch.arange(n_rec, device=device).expand(len(gens), n_rec)
    return randint(n_rec, (len(gens), batch), gens, device=device)


def _check_run_args(
    tau: Any, steps: Any, lr: Any, batch: Any, runs: Any, log_every: Any, lr_final: Any, augment: Any,
    device: Any,
) -> tuple[float, int, float, int | None, int, int, float | None]:  # fmt: skip
    """The arguments both stochastic solvers share, checked before any tensor is built: ``tau``
    (:func:`check_tau`), counts >= 1 (``batch`` None: all records), learning rates finite and > 0,
    ``augment`` a bool, ``device`` one this machine has. Returns ``(tau, steps, lr, batch, runs, log_every,
    lr_final)`` as numbers."""
    check_device(device)
    boolean(augment, "augment")
    return (
        check_tau(tau),
        positive_int(steps, "steps"),
        number(lr, "lr", 0.0, strict=True),
        None if batch is None else positive_int(batch, "batch"),
        positive_int(runs, "runs"),
        positive_int(log_every, "log_every"),
        None if lr_final is None else number(lr_final, "lr_final", 0.0, strict=True),
    )


def run_mopo(
    problem: TabularProblem,
    tau: float,
    steps: int = 20_000,
    lr: float = 0.015,
    batch: int | None = 12,
    b: Tensor | Sequence[float] | None = None,
    beta: Tensor | float | None = None,
    t0: int | None = None,
    eps: float = 0.0,
    runs: int = 1,
    seed: int = 0,
    augment: bool = True,
    log_every: int = 100,
    lr_final: float | None = None,
    chi_min: float = 1e-4,
    device: str | torch.device = "cpu",
) -> MopoRun:
    """Algorithm `mopo` on a tabular problem, ``runs`` seeds in parallel.

    Per step: a mini-batch of ``batch`` augmented records (uniform, with replacement; ``None`` = all
    records); the ``chi`` step on Eq. `chi_update` (sign-fixed, only when ``eps > 0``; with ``eps = 0`` the
    lower bound equals the batch estimate of ``G``, its ``chi -> inf`` limit); the projected ``lam`` step with
    gradient ``LB - b``; ``rho`` from the closed form Eq. `dual` with the per-action estimates; the policy
    step on Eq. `policy-extraction`. Adam (learning rate ``lr``, optionally decayed geometrically to
    ``lr_final``) for all three, as in the sanity check.

    Departure: for a tabular softmax policy the behaviour-cloning expectation ``E_{y~pi_ref}[rho log pi]``
    is taken exactly over the finite action set instead of over the mini-batch (the data need not cover every
    action: D3). Thresholds: fixed ``b``, or adaptive ``b = beta * G(rho^(t-t0))`` when ``beta`` is given
    (initialised at ``beta * G(pi_ref)``). Lagged reference: every ``t0`` steps ``pi_ref <- pi_psi^(t-t0)``
    (the policy saved at the previous multiple of ``t0``); ``t0 = None`` keeps ``pi_ref`` fixed (then, with a
    fixed ``b`` and ``eps = 0``, the fixed point is :func:`solve_exact`'s solution).
    """
    args = _check_run_args(tau, steps, lr, batch, runs, log_every, lr_final, augment, device)
    tau, steps, lr, batch, runs, log_every, lr_final = args
    b = None if b is None else check_threshold(b, problem.n_objectives - 1, batched=True)
    eps = number(eps, "eps", 0.0)  # >= 0 (0: no lower bound)
    y, _, q_rec, p_hat, q_hat, ref0 = _solver_tensors(problem, augment, device)
    gens = run_generators(seed, runs)
    beta_t, it = _mopo_start(b, beta, t0, ref0, q_hat, runs, lr, lr_final, steps)
    hist = _History()
    for t in range(1, steps + 1):
        idx = _batch(gens, len(y), batch, device)
        x = _weighted_constraints(it, y[idx], q_rec[idx], p_hat, q_hat, tau, ref0)
        _mopo_step(it, x, p_hat, q_hat, tau, eps, chi_min)
        if t0 and t % t0 == 0:  # lines 9-11
            _lag(it, beta_t, q_hat)
        if t % log_every == 0 or t == steps:
            hist.record(t, torch.softmax(it.psi, -1), q_hat, it.lam, it.b)
    pol = torch.softmax(it.psi, -1)
    return MopoRun(pol, it.lam, it.b, pol @ q_hat, hist.steps, hist.stacked())


def _solver_tensors(
    problem: TabularProblem, augment: bool, device: str | torch.device
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """``(y, p, q)`` of the records (:meth:`TabularProblem.records`), the per-action ``(p_hat, q_hat)`` and
    ``pi_ref`` (float64) on ``device``."""
    dt = torch.float64
    y, _, p_rec, q_rec = (t.to(device) for t in problem.records(augment))
    p_hat, q_hat = (t.to(device, dt) for t in problem.action_scores(augment))
    return y, p_rec, q_rec, p_hat, q_hat, problem.ref.to(device, dt)


class _History:
    """The logged steps of a stochastic solver and, per step, the policy, ``lam``, ``b`` and ``G``."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.values: dict[str, list[Tensor]] = {}

    def record(self, t: int, policy: Tensor, q_hat: Tensor, lam: Tensor, b: Tensor) -> None:
        """Log step ``t`` (``G = policy @ q_hat``)."""
        self.steps.append(t)
        _snapshot(self.values, policy=policy, lam=lam, b=b, G=policy @ q_hat)

    def stacked(self) -> dict[str, Tensor]:
        """``{name: [T_log, R, ...]}``."""
        return {k: torch.stack(v) for k, v in self.values.items()}


@dataclass
class _Iterates:
    """The iterates of :func:`run_mopo`, one row per run: policy logits ``psi``, multipliers ``lam`` and
    lower-bound variables ``chi`` (their Adams in ``opts``), thresholds ``b``, the current reference ``ref``
    and ``saved``, the policy at the last multiple of ``t0`` (the next reference)."""

    psi: Tensor
    lam: Tensor
    chi: Tensor
    b: Tensor
    ref: Tensor
    saved: Tensor
    opts: tuple[Adam, Adam, Adam]


def _mopo_start(
    b: Tensor | None, beta: Tensor | float | None, t0: int | None, ref0: Tensor, q_hat: Tensor, runs: int,
    lr: float, lr_final: float | None, steps: int,
) -> tuple[Tensor | None, _Iterates]:  # fmt: skip
    """The thresholds' factor ``beta`` per constraint (None: fixed ``b``) and the initial iterates: ``psi =
    log pi_ref``, ``lam = 0``, ``chi = 1``, ``b`` fixed or ``beta G(pi_ref)``."""
    dt, device, c_n = torch.float64, ref0.device, q_hat.shape[-1]
    if beta is None and b is None:
        raise ConfigError("b", None, "give a fixed threshold b or an adaptive factor beta")
    if t0 is not None and (isinstance(t0, bool) or not isinstance(t0, int) or t0 < 1):
        raise ConfigError("t0", t0, "must be a positive integer or null")
    beta_t = None if beta is None else torch.as_tensor(beta, dtype=dt, device=device).expand(c_n)
    if b is not None:
        b_cur = b.to(device, dt).expand(runs, c_n).clone()
    else:
        b_cur = (beta_t * (ref0 @ q_hat)).expand(runs, c_n).clone()
    psi = torch.log(ref0).expand(runs, -1).clone()
    lam = torch.zeros(runs, c_n, dtype=dt, device=device)
    chi = torch.ones(runs, c_n, dtype=dt, device=device)
    opts = tuple(Adam(v, lr, lr_final, steps) for v in (psi, lam, chi))
    ref_cur = ref0.expand(runs, -1).clone()
    return beta_t, _Iterates(psi, lam, chi, b_cur, ref_cur, ref_cur.clone(), opts)


def _weighted_constraints(
    it: _Iterates, y: Tensor, q: Tensor, p_hat: Tensor, q_hat: Tensor, tau: float, ref0: Tensor
) -> Tensor:
    """``rho(y_i) q_i`` per record of the batch ``[R, M, C]``, ``rho`` relative to the data's reference."""
    log_rho_lag = torch.log(it.ref) - torch.log(ref0)  # [R, A]
    log_rho = O.log_rho_star(p_hat, q_hat, it.lam, tau, it.ref)  # [R, A]
    ratio = torch.exp(torch.gather(log_rho + log_rho_lag, 1, y))  # rho relative to the data's ref
    return ratio.unsqueeze(-1) * q  # [R, M, C]


def _mopo_step(
    it: _Iterates, x: Tensor, p_hat: Tensor, q_hat: Tensor, tau: float, eps: float, chi_min: float
) -> None:
    """One step of Algorithm `mopo` on the batch's ``x = rho q``: the ``chi`` step and the lower bound
    (line 5; the batch mean for ``eps = 0``), the projected ``lam`` step (line 6), the policy step towards
    ``pi_ref rho*_lam`` (line 7)."""
    opt_psi, opt_lam, opt_chi = it.opts
    if eps > 0:  # lower-bound estimation (Algorithm `mopo`, line 5)
        chi_v = it.chi.clone().requires_grad_(True)
        (g_chi,) = torch.autograd.grad(O.chi_loss(x, chi_v, eps).sum(), chi_v)
        opt_chi.step(g_chi)
        it.chi.clamp_(min=chi_min)
        lb = O.lower_bound(x, it.chi, eps)
    else:
        lb = x.mean(-2)
    opt_lam.step(lb - it.b)  # grad of J(lam; chi) at fixed rho (Danskin), line 6
    it.lam.clamp_(min=0.0)
    target = it.ref * O.rho_star(p_hat, q_hat, it.lam, tau, it.ref)  # pi_ref rho*_lam, line 7
    opt_psi.step(torch.softmax(it.psi, -1) * target.sum(-1, keepdim=True) - target)  # grad of -E[rho log pi]


def _lag(it: _Iterates, beta_t: Tensor | None, q_hat: Tensor) -> None:
    """Lines 9-11 of Algorithm `mopo`: ``b = beta G(rho^(t - t0))`` (adaptive thresholds), then the
    reference moves to the policy saved ``t0`` steps ago and the current policy is saved."""
    if beta_t is not None:
        it.b = beta_t * (it.saved @ q_hat)  # b = beta * G(rho^(t - t0)) = beta E_{pi^(t-t0)}[q_hat]
    it.ref = it.saved
    it.saved = torch.softmax(it.psi, -1)


def run_mopo_lb(
    problem: TabularProblem,
    tau: float,
    b: Tensor | Sequence[float],
    steps: int = 20_000,
    lr: float = 0.015,
    batch: int | None = 12,
    sigma0: float = 1.0,
    gamma: float = 0.999,
    sigma_min: float = 1e-3,
    runs: int = 1,
    seed: int = 0,
    augment: bool = True,
    log_every: int = 100,
    lr_final: float | None = None,
    device: str | torch.device = "cpu",
) -> MopoRun:
    """``mopo-lb``: stochastic ascent on the relaxed log-barrier Lagrangian Eq. `logbarrier`.

    One Adam step per iteration on
    ``L_LB(rho, sigma) = F(rho) - sum_k B_{sigma_k, sigma_k^2}(b_k - G_k(rho))`` (remark `logbarrier`) with
    ``rho = softmax(psi) / pi_ref``: the preference terms of ``F`` and ``G`` are mini-batch estimates of
    Eq. `empirical-cop` (``batch = None``: all records), the KL term is exact. ``sigma^(t) = max(gamma^t
    sigma0, sigma_min)``: the text lets ``sigma -> 0``; the floor keeps the barrier's ``1/sigma`` slope finite
    for a finite step size. With mini-batches the barrier is applied to a noisy ``G`` and, being convex,
    over-penalises (Jensen): the iterate settles inside the feasible set, the instability the text reports
    for this variant. The reported ``lam`` are the implied multipliers ``sigma / max(G - b, sigma^2)``.
    """
    args = _check_run_args(tau, steps, lr, batch, runs, log_every, lr_final, augment, device)
    tau, steps, lr, batch, runs, log_every, lr_final = args
    b = check_threshold(b, problem.n_objectives - 1, batched=True)
    sigma0, sigma_min = number(sigma0, "sigma0", 0.0, strict=True), number(sigma_min, "sigma_min", 0.0)
    gamma = number(gamma, "gamma", 0.0, 1.0, strict=True)
    y, p_rec, q_rec, _, q_hat, ref0 = _solver_tensors(problem, augment, device)
    gens = run_generators(seed, runs)
    b_t = b.to(device, torch.float64).expand(runs, q_rec.shape[1])
    psi = torch.log(ref0).expand(runs, -1).clone()
    opt = Adam(psi, lr, lr_final, steps)
    hist = _History()
    sigma = torch.tensor(sigma0, dtype=torch.float64, device="cpu")
    for t in range(1, steps + 1):
        sigma = torch.clamp(O.sigma_schedule(sigma0, gamma, t).to(torch.float64), min=sigma_min)
        idx = _batch(gens, len(y), batch, device)
        opt.step(_barrier_gradient(psi, ref0, y[idx], p_rec[idx], q_rec[idx], b_t, sigma, tau))
        if t % log_every == 0 or t == steps:
            pol = torch.softmax(psi, -1)
            hist.record(t, pol, q_hat, O.barrier_multipliers(pol @ q_hat, b_t, sigma), b_t)
    pol = torch.softmax(psi, -1)
    g_ex = pol @ q_hat
    lam = O.barrier_multipliers(g_ex, b_t, sigma)
    return MopoRun(pol, lam, b_t.clone(), g_ex, hist.steps, hist.stacked())


def _barrier_gradient(
    psi: Tensor, ref0: Tensor, y: Tensor, p: Tensor, q: Tensor, b: Tensor, sigma: Tensor, tau: float
) -> Tensor:
    """Gradient in ``psi`` of ``-L_LB(rho, sigma)`` (Eq. `logbarrier`) on the batch ``(y, p, q)``: preference
    terms of ``F`` and ``G`` as batch means, the KL term exact."""
    psi_v = psi.clone().requires_grad_(True)
    logp = torch.log_softmax(psi_v, -1)
    rho = torch.exp(logp - torch.log(ref0))  # [R, A]
    ratio = torch.gather(rho, 1, y)  # [R, M]
    kl = (torch.exp(logp) * (logp - torch.log(ref0))).sum(-1)
    f = (ratio * p).mean(-1) - tau * kl
    g = (ratio.unsqueeze(-1) * q).mean(-2)
    (grad,) = torch.autograd.grad(-O.barrier_objective(f, g, b, sigma.expand(b.shape[-1])).sum(), psi_v)
    return grad


def barrier_fixed_point(
    problem: TabularProblem, tau: float, b: Tensor, sigma: float, augment: bool = True, iters: int = 200
) -> tuple[Tensor, Tensor]:
    """Tabular reference of the *barrier-multiplier fixed point* of ``mopo-lb`` at a fixed ``sigma``:
    ``(policy[A], lam[1])``, one constraint.

    The fixed point ``lam = sigma / max(G(pi_lam) - b, sigma^2)`` with ``pi_lam = pi_ref rho*_lam`` (the
    implied multipliers of appendix `logbarrier` and Eq. `dual`) is the maximiser of ``L_LB(., sigma)``
    (Eq. `logbarrier`): stationarity of ``L_LB`` in ``rho`` is that of the Lagrangian at exactly these
    multipliers. ``G(pi_lam)`` increases with ``lam``, so ``lam - sigma / max(G - b, sigma^2)`` increases and
    the root is found by bisection in ``log lam``. Iterating the map instead (``lam <- sigma / max(G - b,
    sigma^2)``) is unstable as ``sigma -> 0`` (its slope grows like ``1/sigma``), which is why ``mopo-lb``
    takes ascent steps on ``L_LB`` (:func:`run_mopo_lb`); the test checks that both reach the same policy.
    """
    p_hat, q_hat = (t.double().cpu() for t in problem.action_scores(augment))
    ref, b = problem.ref.double().cpu(), b.double().cpu()
    if q_hat.shape[-1] != 1:
        raise ConfigError("b", b.tolist(), "the fixed-point reference handles one constraint")
    sig = torch.tensor(float(sigma), dtype=torch.float64, device="cpu")

    def h(log_lam: Tensor) -> Tensor:
        lam = torch.exp(log_lam).reshape(1)
        pol = ref * O.rho_star(p_hat, q_hat, lam, tau, ref)
        return lam - O.barrier_multipliers(pol @ q_hat, b, sig)

    lo, hi = (
        torch.tensor(math.log(sigma) - 30.0, device="cpu"),
        torch.tensor(30.0, dtype=torch.float64, device="cpu"),
    )
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if float(h(mid)[0]) > 0:
            hi = mid
        else:
            lo = mid
    lam = torch.exp(0.5 * (lo + hi)).reshape(1).double()
    return ref * O.rho_star(p_hat, q_hat, lam, tau, ref), lam


def total_variation(p: Tensor, q: Tensor) -> Tensor:
    """``TV(p, q) = 0.5 sum |p - q|`` over the last dimension."""
    return 0.5 * (p - q.to(p.device)).abs().sum(-1)

r"""Synthetic MOPO experiments: the sanity check and the motivating example (chapter `mopo`).

**Sanity check** (section `Synthetic Sanity Check`): three actions, uniform ``pi_ref``, the canonical data
sets D1 (total order), D2 (partial order), D3 (unobserved preferences), softmax policy, Algorithm `mopo`
with Adam (lr 0.015), batch 12, 20k steps, ``tau in {0.1, 1}``. The text gives neither the primary
objective nor ``b``; we take objective 2 as primary (the text's convention: the last objective) and fixed
thresholds ``b`` per data set (config ``b``; defaults D1 0.5, D2 0.75 = the midpoint of D2's Pareto front in
``G``, D3 0.5) with a fixed reference (no lag: the text's remark that ``tau`` interpolates between
``pi_ref`` and the optimum only holds for a fixed reference).

**Motivating example** (appendix `motivating_example`, figure `appendix_dpo_comparison`): contexts and
responses in ``[0, 1]``, reward sets A and B (Eq. `appendix_reward_models`), Bradley-Terry labels with
``P(z = y) = sigmoid(r(x, y) - r(x, y'))`` (the main text's form; Eq. `appendix_bt_model`'s ratio
``r / (r + r')`` is undefined for the negative rewards of set A). Departure: responses are discretised on a
grid of ``n_y`` points so that neural policies are softmax networks ``pi_psi(y | x)`` (context fed as
scalar), with ``pi_ref = mu`` uniform on the grid; the data draw ``x ~ U[0, 1]`` and ``y, y' ~ mu``.
Methods: DPO on D1, D2, D_J, D_C(w) for each ``w``; the COP oracle ``argmax_y r1(x, y) s.t. r2(x, y) >= b``
(fine grid) over a sweep of ``b``; MOPO (primary ``r1``, constraint on the preference for ``r2``) over a
sweep of thresholds, by default with pooled scores (Eq. `empirical-dual`: win rates inside the exponential,
from a Bradley-Terry model of the records, :func:`fit_win_rates`, :func:`train_mopo_pooled`). Each policy is
one point ``(E_x E_{y~pi} r1, E_x E_{y~pi} r2)``. The true Pareto front of such points is computed on a fine
``(x, y)`` grid by scalarisation (every front point of the convex achievable set is supported) and densified
linearly (mixtures). Hypervolumes use moocore with the reference point = the component-wise minimum over all
methods' points and the true front, minus 1% of the range (stated in the results), so that every method's
points count. Policies are evaluated by their expected rewards under sampling (``methods``) and at their
mode (``methods_greedy``, like the deterministic COP oracle).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from bayescrl.mopo import objective as O
from bayescrl.mopo import pareto
from bayescrl.mopo.tabular import Adam, parse_tabular, run_mopo, solve_exact, total_variation
from bayescrl.utils import ConfigError
from bayescrl.utils.plotting import plt

# ----------------------------------------------------------------------------------------- sanity check

SANITY_DATASETS: dict[str, list[tuple[str, str, list[int]]]] = {
    "D1": [("y1", "y2", [1, 1]), ("y2", "y3", [1, 1]), ("y1", "y3", [1, 1])],
    "D2": [("y1", "y2", [1, 1]), ("y1", "y3", [1, 0]), ("y2", "y3", [0, 0])],
    "D3": [("y1", "y2", [1, 1]), ("y2", "y1", [0, 1])],
}
SANITY_B = {"D1": 0.5, "D2": 0.75, "D3": 0.5}


def sanity_problem(name: str, primary: int = 1, estimator: str = "win_rate"):
    """The canonical data set ``name`` (D1, D2, D3) as a :class:`~bayescrl.mopo.tabular.TabularProblem`
    with the section's uniform ``pi_ref``; ``estimator`` as in :func:`~bayescrl.mopo.tabular.parse_tabular`
    (win rates and scores coincide on D1 and D2, whose action frequencies are uniform; on D3 the scores of
    y1 and y2 are 1.5 times their win rates)."""
    if name not in SANITY_DATASETS:
        raise ConfigError("datasets", name, f"unknown sanity data set (known: {list(SANITY_DATASETS)})")
    recs = [{"y": a, "y_prime": b, "prefs": p} for a, b, p in SANITY_DATASETS[name]]
    cfg = {"actions": ["y1", "y2", "y3"], "data": recs, "primary": primary, "reference": "uniform"}
    return parse_tabular({**cfg, "estimator": estimator})


def run_sanity(config: Mapping[str, Any], out: Path | None = None, device: str = "cpu") -> dict:
    """Sanity check of section `Synthetic Sanity Check`; returns per data set and ``tau`` the final policies.

    Config keys: ``datasets`` (default D1, D2, D3), ``tau`` (list, default [0.1, 1]), ``b`` (mapping data
    set -> threshold), ``primary`` (default 1), ``estimator`` (``win_rate`` or ``score``),
    ``mopo: {steps, lr, batch, runs, seed, t0, beta, eps}``.
    """
    names, taus, b_cfg, beta, kw = _sanity_settings(config)
    primary = int(config.get("primary", 1))
    estimator = config.get("estimator", "win_rate")
    results: dict[str, Any] = {
        "experiment": "sanity",
        "primary": primary,
        "estimator": estimator,
        "settings": kw,
        "runs": {},
    }
    histories = {}
    for name in names:
        prob = sanity_problem(name, primary, estimator)
        b = torch.tensor([float(b_cfg[name])], dtype=torch.float64, device="cpu")
        for tau in taus:
            key = f"{name}/tau={tau:g}"
            results["runs"][key], histories[(name, tau)] = _sanity_run(prob, tau, b, beta, kw, device)
    if out is not None:
        _plot_sanity(histories, names, taus, out / "sanity_action_probs.png")
    return results


def _sanity_settings(config: Mapping[str, Any]) -> tuple[list[str], list[float], dict, Any, dict[str, Any]]:
    """The data sets, the ``tau`` values, the threshold per data set, ``mopo.beta`` (None: fixed ``b``) and
    the keyword settings of :func:`~bayescrl.mopo.tabular.run_mopo`, with their defaults."""
    names = list(config.get("datasets", list(SANITY_DATASETS)))
    taus = [float(t) for t in config.get("tau", [0.1, 1.0])]
    b_cfg = {**SANITY_B, **dict(config.get("b", {}) or {})}
    opts = dict(config.get("mopo", {}) or {})
    kw = dict(
        steps=int(opts.get("steps", 20_000)),
        lr=float(opts.get("lr", 0.015)),
        batch=opts.get("batch", 12),
        runs=int(opts.get("runs", 3)),
        seed=int(opts.get("seed", 0)),
        t0=opts.get("t0"),
        eps=float(opts.get("eps", 0.0)),
        log_every=int(opts.get("log_every", 100)),
        lr_final=opts.get("lr_final"),
    )
    return names, taus, b_cfg, opts.get("beta"), kw


def _sanity_run(
    prob, tau: float, b: Tensor, beta: Any, kw: dict[str, Any], device: str
) -> tuple[dict[str, Any], tuple[Any, list[float]]]:
    """MOPO on one data set and ``tau``: its record (mean and sd of the policy over runs, ``lambda``, the
    exact solution and the total-variation distance to it) and, for the plot, the run and the exact policy."""
    run = run_mopo(prob, tau, b=None if beta is not None else b, beta=beta, device=device, **kw)
    ex = solve_exact(prob, tau, b)
    rec = {
        "policy_mean": dict(zip(prob.actions, run.policy.mean(0).tolist(), strict=True)),
        # sample sd over runs (ddof = 1, bayescrl.utils.spread); none for one run
        "policy_sd": None
        if run.policy.shape[0] < 2
        else dict(zip(prob.actions, run.policy.std(0).tolist(), strict=True)),
        "lambda": run.lam.mean(0).tolist(),
        "b": b.tolist(),
        "exact_policy": dict(zip(prob.actions, ex.policy.tolist(), strict=True)),
        "exact_lambda": ex.lam.tolist(),
        "tv_to_exact": total_variation(run.policy, ex.policy).tolist(),
    }
    return rec, (run, ex.policy.tolist())


def _plot_sanity(histories, names, taus, path: Path) -> None:
    """Grid of learning curves like figure `mopo_action_probs` (rows: tau, columns: data sets): mean with a
    shaded ±1 sd band over runs, and the exact solution (:func:`solve_exact`) dashed in the same colour."""
    p = plt()
    fig, axes = p.subplots(len(taus), len(names), figsize=(3.4 * len(names), 2.6 * len(taus)), squeeze=False)
    for i, tau in enumerate(taus):
        for j, name in enumerate(names):
            run, exact = histories[(name, tau)]
            ax = axes[i, j]
            pol = run.history["policy"].cpu().numpy()  # [T, R, A]
            for a in range(pol.shape[-1]):
                m = pol[:, :, a].mean(1)  # band: sample sd over runs, none for one run
                s = pol[:, :, a].std(1, ddof=1) if pol.shape[1] > 1 else np.zeros_like(m)
                (line,) = ax.plot(run.steps, m, label=f"y{a + 1}")
                ax.fill_between(run.steps, m - s, m + s, alpha=0.2, color=line.get_color(), lw=0)
                ax.axhline(exact[a], ls="--", lw=1, color=line.get_color(), label="exact" if a == 0 else None)
            ax.set_ylim(-0.02, 1.02)
            ax.set_title(f"{name}, tau = {tau:g}", fontsize=9)
            ax.grid(alpha=0.3)
            ax.set_xlabel("solver step")
            ax.set_ylabel("action probability π(y)")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    p.close(fig)


# ------------------------------------------------------------------------------------ motivating example


def rewards(reward_set: str, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """Reward pair of Eq. `appendix_reward_models` (broadcasting ``x`` against ``y``)."""
    if reward_set == "A":
        return torch.exp(x) + torch.sqrt(y) - y, -torch.sin(x) - y**2
    if reward_set == "B":
        return (x + y) ** 2, torch.log((1 + x) / (1 + y))
    raise ConfigError("reward_set", reward_set, "must be 'A' or 'B'")


def make_data(reward_set: str, n: int, n_y: int, gen: torch.Generator, w: list[float]) -> dict[str, Tensor]:
    """``n`` triplets ``(x, y, y')`` with BT labels for ``r1``, ``r2`` and each ``w r1 + (1 - w) r2``.

    Returns tensors ``x[n]``, ``iy[n]``, ``iyp[n]`` (grid indices of y, y'), ``z1[n]``, ``z2[n]``
    (1 if ``y`` wins), ``zc[len(w), n]``.
    """
    grid = torch.linspace(0, 1, n_y, dtype=torch.float64, device="cpu")
    x = torch.rand(n, generator=gen, dtype=torch.float64)
    iy = torch.randint(n_y, (n,), generator=gen)
    iyp = (iy + torch.randint(1, n_y, (n,), generator=gen)) % n_y  # y' != y
    r1y, r2y = rewards(reward_set, x, grid[iy])
    r1p, r2p = rewards(reward_set, x, grid[iyp])

    def bt(d: Tensor) -> Tensor:
        return (torch.rand(d.shape, generator=gen, dtype=torch.float64) < torch.sigmoid(d)).double()

    z1, z2 = bt(r1y - r1p), bt(r2y - r2p)
    wt = torch.tensor(w, dtype=torch.float64, device="cpu")[:, None]
    zc = bt(wt * (r1y - r1p) + (1 - wt) * (r2y - r2p))
    return {"x": x, "iy": iy, "iyp": iyp, "z1": z1, "z2": z2, "zc": zc}


class BatchedMLP:
    """``R`` independent MLP policies ``x -> logits[n_y]`` evaluated in one batched matmul chain."""

    def __init__(self, runs: int, n_out: int, hidden: int, gen: torch.Generator, device="cpu"):
        def init(fan_in: int, fan_out: int) -> Tensor:
            bound = 1.0 / math.sqrt(fan_in)
            w = (torch.rand(runs, fan_in, fan_out, generator=gen) * 2 - 1) * bound
            return w.to(device).requires_grad_(True)

        self.params = [init(3, hidden), init(hidden, hidden), init(hidden, n_out)]
        self.biases = [
            torch.zeros(runs, 1, hidden, device=device, requires_grad=True),
            torch.zeros(runs, 1, hidden, device=device, requires_grad=True),
            torch.zeros(runs, 1, n_out, device=device, requires_grad=True),
        ]
        with torch.no_grad():
            self.params[-1].mul_(0.01)  # start close to the uniform reference

    def all(self) -> list[Tensor]:
        return self.params + self.biases

    @staticmethod
    def features(x: Tensor) -> Tensor:
        return torch.stack([x, torch.sin(math.pi * x), torch.cos(math.pi * x)], -1)

    def logits(self, x: Tensor, weights: list[Tensor] | None = None) -> Tensor:
        """Output layer ``[R, B, n_out]`` for contexts ``x[B]`` (or ``x[R, B]``)."""
        ws = self.all() if weights is None else weights
        w1, w2, w3, b1, b2, b3 = ws
        h = self.features(x.float())
        if h.ndim == 2:
            h = h.expand(w1.shape[0], -1, -1)
        h = torch.tanh(h @ w1 + b1)
        h = torch.tanh(h @ w2 + b2)
        return h @ w3 + b3

    def logp(self, x: Tensor, weights: list[Tensor] | None = None) -> Tensor:
        """Log-probabilities ``[R, B, n_y]`` for contexts ``x[B]`` (or ``x[R, B]``)."""
        return torch.log_softmax(self.logits(x, weights), -1)

    def snapshot(self) -> list[Tensor]:
        return [p.detach().clone() for p in self.all()]


class PairMLP:
    """``R`` independent MLPs ``(x, y) -> scalar`` (response as an input, so smooth in ``y``)."""

    def __init__(self, runs: int, hidden: int, gen: torch.Generator, device="cpu"):
        def init(fan_in: int, fan_out: int) -> Tensor:
            bound = 1.0 / math.sqrt(fan_in)
            w = (torch.rand(runs, fan_in, fan_out, generator=gen) * 2 - 1) * bound
            return w.to(device).requires_grad_(True)

        self.params = [init(6, hidden), init(hidden, hidden), init(hidden, 1)]
        self.biases = [
            torch.zeros(runs, 1, d, device=device, requires_grad=True) for d in (hidden, hidden, 1)
        ]

    def all(self) -> list[Tensor]:
        return self.params + self.biases

    def __call__(self, x: Tensor, y: Tensor, weights: list[Tensor] | None = None) -> Tensor:
        """Outputs ``[R, *shape]`` for ``x``, ``y`` of one shape."""
        w1, w2, w3, b1, b2, b3 = self.all() if weights is None else weights
        h = torch.cat([BatchedMLP.features(x.float()), BatchedMLP.features(y.float())], -1)
        shape = h.shape[:-1]
        h = h.reshape(1, -1, 6)
        h = torch.tanh(h @ w1 + b1)
        h = torch.tanh(h @ w2 + b2)
        return (h @ w3 + b3)[..., 0].reshape(-1, *shape)

    def snapshot(self) -> list[Tensor]:
        return [p.detach().clone() for p in self.all()]


def _optimizer(params: list[Tensor], lr: float, steps: int, lr_final: float | None) -> Adam:
    """One ``torch.optim.Adam`` (foreach) over all parameters of a batched network."""
    return Adam(params, lr, lr_final, steps)


def _step(opt: Adam, params: list[Tensor], loss: Tensor) -> None:
    opt.step(list(torch.autograd.grad(loss, params)))


def train_dpo(
    datasets: list[dict[str, Tensor]], n_y: int, cfg: Mapping[str, Any], gen: torch.Generator, device="cpu"
) -> BatchedMLP:
    """DPO (Rafailov et al.) on each data set in parallel: ``-log sigmoid(beta (log pi(y_w) - log pi(y_l)))``.

    The reference is uniform, so its log-ratio terms cancel. ``datasets[r]`` has ``x``, ``yw``, ``yl``.
    """
    runs = len(datasets)
    steps, batch = int(cfg.get("steps", 1500)), int(cfg.get("batch", 256))
    beta = float(cfg.get("beta", 0.1))
    net = BatchedMLP(runs, n_y, int(cfg.get("hidden", 64)), gen, device)
    opts = _optimizer(net.all(), float(cfg.get("lr", 0.01)), steps, cfg.get("lr_final"))
    sizes = torch.tensor([len(d["x"]) for d in datasets], device="cpu")
    nmax = int(sizes.max())
    pad = lambda t: torch.cat([t, t[: nmax - len(t)].repeat(nmax // max(len(t), 1) + 1)[: nmax - len(t)]])  # noqa
    xs = torch.stack([pad(d["x"]) for d in datasets]).to(device)
    yw = torch.stack([pad(d["yw"]) for d in datasets]).to(device)
    yl = torch.stack([pad(d["yl"]) for d in datasets]).to(device)
    for _ in range(steps):
        idx = (torch.rand(runs, batch, generator=gen) * sizes[:, None]).long().to(device)
        xb = torch.gather(xs, 1, idx)
        lp = net.logp(xb)
        lw = torch.gather(lp, 2, torch.gather(yw, 1, idx)[..., None])[..., 0]
        ll = torch.gather(lp, 2, torch.gather(yl, 1, idx)[..., None])[..., 0]
        loss = -torch.nn.functional.logsigmoid(beta * (lw - ll)).mean(-1).sum()
        _step(opts, net.all(), loss)
    return net


class _MopoRun:
    """Settings and state shared by :func:`train_mopo` and :func:`train_mopo_pooled` (a run per threshold)."""

    def __init__(self, thresholds, n_y: int, cfg: Mapping[str, Any], gen, device, constraint_default: str):
        self.runs = len(thresholds)
        self.steps, self.batch = int(cfg.get("steps", 3000)), int(cfg.get("batch", 256))
        self.tau, self.t0 = float(cfg.get("tau", 1.0)), cfg.get("t0", 200)
        self.eps = float(cfg.get("eps", 0.0))
        lr = float(cfg.get("lr", 0.01))
        self.use_policy_g = str(cfg.get("constraint_on", constraint_default)) == "policy"
        self.ref_update = str(cfg.get("reference_update", "lagged"))
        if self.ref_update not in ("lagged", "current"):
            raise ConfigError("mopo.reference_update", self.ref_update, "must be 'lagged' or 'current'")
        self.net = BatchedMLP(self.runs, n_y, int(cfg.get("hidden", 64)), gen, device)
        self.opts = _optimizer(self.net.all(), lr, self.steps, cfg.get("lr_final"))
        self.lam = torch.zeros(self.runs, 1, device=device)
        self.chi = torch.ones(self.runs, 1, device=device)
        self.opt_lam = Adam(self.lam, float(cfg.get("lr_lambda", lr)), None, self.steps)
        self.opt_chi = Adam(self.chi, lr, None, self.steps)
        self.b = torch.tensor(thresholds, dtype=torch.float32, device=device)[:, None]
        self.device = device
        self.lag: list[Tensor] | None = None  # None = the uniform pi_ref
        self.saved = self.net.snapshot()

    def chi_lower_bound(self, x: Tensor, weights: Tensor) -> Tensor:
        """The ``chi`` step on Eq. `chi_update` for the atoms ``x = rho q`` of measure ``weights``, then the
        lower bound of ``G`` at the new ``chi`` (``eps > 0``)."""
        chi_v = self.chi.clone().requires_grad_(True)
        with torch.enable_grad():
            (g_chi,) = torch.autograd.grad(O.chi_loss(x, chi_v, self.eps, weights).sum(), chi_v)
        self.opt_chi.step(g_chi)
        self.chi.clamp_(min=1e-4)
        return O.lower_bound(x, self.chi, self.eps, weights)

    def update_reference(self, t: int) -> None:
        """Every ``t0`` steps: ``pi_ref <- pi_psi^(t - t0)`` (``reference_update: lagged``, the snapshot saved
        ``t0`` steps ago) or ``pi_psi^(t)`` (``current``)."""
        if self.t0 and t % int(self.t0) == 0:
            if self.ref_update == "current":
                self.lag = self.net.snapshot()
            else:
                self.lag, self.saved = self.saved, self.net.snapshot()


SCORES = ("pooled", "per_example")


SCORE_MODELS = ("bt", "direct")


def fit_win_rates(
    data: Mapping[str, Tensor], n_y: int, cfg: Mapping[str, Any], gen: torch.Generator, device="cpu"
):
    """Preference-probability model ``s_k(x, y) ≈ E_{y' ~ mu}[I_k(y > y') | x, y]`` for the two objectives.

    The inner sum of Eq. `empirical-dual`, ``(1/N) sum_i I_k(y, y')`` over the records of response ``y``,
    is the empirical win rate of ``y``; with a continuous context it needs smoothing across ``x``.  Two
    estimators (``mopo.score_model.kind``), one small MLP per objective, Bernoulli log-likelihood, Adam.

    The network takes the response as an input (:class:`PairMLP`), so the estimate is smooth in ``y``
    as well as in ``x``.

    * ``bt`` (default): a Bradley-Terry model ``P(I_k = 1) = sigmoid(r_k(x, y) - r_k(x, y'))`` of each record
      -- the generative model of the data (appendix `motivating_example`; DPO's implicit reward is the same
      model) -- then ``s_k(x, y) = mean_{y' != y} sigmoid(r_k(x, y) - r_k(x, y'))`` exactly on the grid
      (``y' ~ mu`` uniform over the other responses, as the data are drawn);
    * ``direct``: logistic regression of the indicators on ``(x, y)`` alone (``y'`` marginalised), which
      assumes nothing about the labels but learns from each record only whether ``y`` won.

    Config (``mopo.score_model``): ``kind``, ``steps`` (2000), ``batch`` (1024), ``lr`` (0.01, decayed to
    ``lr_final`` 1e-3), ``hidden`` (64).  Returns ``win(x[B]) -> [B, n_y, 2]`` (objective last).
    """
    kind, steps, batch, lr, lr_final, hidden = _score_model_settings(cfg)
    ys, yps, ind = O.augment_symmetric(
        data["iy"], data["iyp"], torch.stack([data["z1"], data["z2"]], -1).float()
    )
    grid = torch.linspace(0, 1, n_y, device=device)
    xs = torch.cat([data["x"], data["x"]]).float().to(device)
    ys, yps, ind = ys.to(device), yps.to(device), ind.to(device)
    net = PairMLP(2, hidden, gen, device)
    opts = _optimizer(net.all(), lr, steps, lr_final)
    for _ in range(steps):
        idx = torch.randint(len(xs), (batch,), generator=gen).to(device)
        z = net(xs[idx], grid[ys[idx]])  # [2, B]
        if kind == "bt":
            z = z - net(xs[idx], grid[yps[idx]])
        loss = torch.nn.functional.binary_cross_entropy_with_logits(z, ind[idx].T, reduction="none")
        _step(opts, net.all(), loss.mean(-1).sum())
    return _win_rates(net, kind, grid)


def _score_model_settings(cfg: Mapping[str, Any]) -> tuple[str, int, int, float, float | None, int]:
    """``mopo.score_model``'s kind, steps, batch, lr, lr_final and hidden units, with their defaults."""
    sm = dict(cfg.get("score_model", {}) or {})
    kind = str(sm.get("kind", "bt"))
    if kind not in SCORE_MODELS:
        raise ConfigError("mopo.score_model.kind", kind, f"must be one of {list(SCORE_MODELS)}")
    steps, batch = int(sm.get("steps", 2000)), int(sm.get("batch", 1024))
    lr, lr_final = float(sm.get("lr", 0.01)), sm.get("lr_final", 1e-3)
    return kind, steps, batch, lr, None if lr_final is None else float(lr_final), int(sm.get("hidden", 64))


def _win_rates(net: PairMLP, kind: str, grid: Tensor):
    """``win(x[B]) -> [B, n_y, 2]``: the fitted net's preference probabilities on the response ``grid``
    (``bt``: the mean Bradley-Terry probability against the other grid responses)."""
    n_y = len(grid)
    snap = net.snapshot()
    off_diag = 1.0 - torch.eye(n_y, device=grid.device)

    def win(x: Tensor) -> Tensor:
        with torch.no_grad():
            out = net(x[:, None].expand(-1, n_y), grid.expand(len(x), -1), snap)  # [2, B, n_y]
            if kind == "direct":
                return torch.sigmoid(out).permute(1, 2, 0)
            p = torch.sigmoid(out[..., :, None] - out[..., None, :])  # [2, B, y, y']
            return ((p * off_diag).sum(-1) / (n_y - 1)).permute(1, 2, 0)

    return win


def pooled_thresholds(win, n: int, n_x: int = 101, device="cpu") -> list[float]:
    """Threshold sweep for pooled scores: ``n`` values of ``G`` from the primary optimum's constraint win
    rate ``E_x s_2(x, argmax_y s_1(x, y))`` (below it the constraint is slack, ``lam = 0``) to the best
    achievable ``E_x max_y s_2(x, y)``, both under the fitted model of :func:`fit_win_rates`."""
    s = win(torch.linspace(0, 1, n_x, device=device))
    lo = s[..., 1].gather(1, s[..., 0].argmax(1, keepdim=True)).mean()
    hi = s[..., 1].amax(1).mean()
    return np.linspace(float(lo), float(hi), n).tolist()


def train_mopo_pooled(
    data: dict[str, Tensor],
    n_y: int,
    thresholds: list[float],
    cfg: Mapping[str, Any],
    gen: torch.Generator,
    device="cpu",
    win=None,
) -> tuple[BatchedMLP, Tensor]:
    """Algorithm `mopo` with pooled scores (``mopo.scores: pooled``), one run per threshold (vectorised).

    Eq. `empirical-dual` writes ``rho*_lam(y) = exp((tau N)^{-1} sum_i [I_p(y, y') + lam^T I_q(y, y')] - 1)``:
    the indicators are averaged over the data *inside* the exponential, i.e. ``rho*`` tilts by the
    empirical win rates.  Exponentiating each record's own indicators and averaging afterwards
    (``scores: per_example``, :func:`train_mopo`) gives, in expectation over the labels, the tilt
    ``E[(1 + (e^{1/tau} - 1) I_p)(1 + (e^{lam/tau} - 1) I_q)]`` instead (Jensen), in which no ``lam`` removes
    the primary's factor (:func:`ideal_mopo_points`).  Here the win rates ``s(x, y)`` come from
    :func:`fit_win_rates` and, per mini-batch of contexts, everything is exact on the response grid:

    * ``pi*(y | x) ∝ pi_lag(y | x) exp((s_p(x, y) + lam s_q(x, y)) / tau)`` (Prop. `main_dual`, normalised
      per context as in the tabular extraction of section `Policy Extraction`);
    * ``lam`` step with ``G(rho*) - b``, ``G = E_x sum_y pi*(y | x) s_q(x, y)`` (``constraint_on: rho``, the
      default here; ``policy`` uses ``pi_psi`` instead), or with the ``chi`` lower bound when ``eps > 0``
      (atoms = batch contexts × grid responses under ``pi_lag``);
    * Eq. `policy-extraction` ``max E_{y ~ pi_ref}[rho* log pi_psi]`` with the expectation over the grid
      taken exactly (cross-entropy to ``pi*``) instead of over the sampled records;
    * lagged reference every ``t0`` steps exactly as :func:`train_mopo`.
    """
    if win is None:
        win = fit_win_rates(data, n_y, cfg, gen, device)
    st = _MopoRun(thresholds, n_y, cfg, gen, device, constraint_default="rho")
    xs = data["x"].float().to(device)
    s_all = torch.cat([win(c) for c in xs.split(4096)])  # win rates of every data context [N, n_y, 2]
    for t in range(1, st.steps + 1):
        idx = torch.randint(len(xs), (st.batch,), generator=gen).to(device)
        xb = xs[idx]
        with torch.no_grad():
            tgt = _pooled_dual_step(st, xb, s_all[idx, :, 0], s_all[idx, :, 1], n_y)
        loss = -(tgt * st.net.logp(xb)).sum(-1).mean(-1).sum()
        _step(st.opts, st.net.all(), loss)
        st.update_reference(t)
    return st.net, st.lam


def _pooled_dual_step(st: _MopoRun, xb: Tensor, sp: Tensor, sq: Tensor, n_y: int) -> Tensor:
    """The ``lam`` step of :func:`train_mopo_pooled` on the batch contexts ``xb`` (win rates ``sp``, ``sq``
    on the grid); returns the new target ``pi*(y | x)`` of the policy step."""
    if st.lag is None:
        log_lag = torch.full((st.runs, st.batch, n_y), -math.log(n_y), device=st.device)
    else:
        log_lag = st.net.logp(xb, st.lag)

    def target(lam_: Tensor) -> Tensor:
        return torch.log_softmax(log_lag + (sp + lam_[:, :, None] * sq) / st.tau, -1)

    log_t = target(st.lam)
    if st.use_policy_g:
        g = (torch.exp(st.net.logp(xb)) * sq).sum(-1).mean(-1, keepdim=True)
    elif st.eps > 0:
        w_atoms = (torch.exp(log_lag) / st.batch).reshape(st.runs, -1)
        x_lb = (torch.exp(log_t - log_lag) * sq).reshape(st.runs, -1, 1)  # rho q per atom
        g = st.chi_lower_bound(x_lb, w_atoms)
    else:
        g = (torch.exp(log_t) * sq).sum(-1).mean(-1, keepdim=True)
    st.opt_lam.step(g - st.b)
    st.lam.clamp_(min=0.0)
    return torch.exp(target(st.lam))


def train_mopo(
    data: dict[str, Tensor],
    n_y: int,
    thresholds: list[float],
    cfg: Mapping[str, Any],
    gen: torch.Generator,
    device="cpu",
) -> tuple[BatchedMLP, Tensor]:
    """Algorithm `mopo` with per-example scores (``mopo.scores: per_example``), one run per threshold ``b``.

    Each record's own indicators are exponentiated; :func:`train_mopo_pooled` (the default) averages them
    inside the exponential as Eq. `empirical-dual` writes it -- see there for why that matters.  Per step, on
    a mini-batch of the symmetrically augmented data (atoms = examples): ``rho*_lam`` from the per-example
    scores ``I_1 + lam I_2`` (Eq. `empirical-dual`, normalised over the batch under the lagged reference), the
    projected ``lam`` step with ``G - b`` (``eps = 0``) or the ``chi`` lower bound (``eps > 0``), and the
    weighted BC step of Eq. `policy-extraction` with the lag importance ratios. Every ``t0`` steps ``pi_ref <-
    pi_psi^(t - t0)`` (parameter snapshot; ``reference_update: current`` takes ``pi_psi^(t)`` instead, target-
    network style, so each update sharpens the reference once rather than every other time). Returns the net
    and ``lam``.

    Departure (``constraint_on: policy``, the default): the ``lam`` step uses ``G`` of the *extracted* policy,
    ``E_{y ~ pi_psi}[I_2]`` estimated on the batch with self-normalised ratios ``pi_psi / mu``, instead of
    ``G(rho*_lam)`` on the batch atoms. With one label per example, ``rho*_lam`` reweights the *labels*
    (at small ``tau`` it puts all mass on the examples with ``I_1 = I_2 = 1``), so its in-sample ``G`` is
    close to 1 whatever ``b`` is and ``lam`` never moves; the policy, a function of ``(x, y)`` only, cannot
    realise that ``G``. In the tabular case both coincide at the fixed point. ``constraint_on: rho`` gives
    the literal update.
    """
    st = _MopoRun(thresholds, n_y, cfg, gen, device, constraint_default="policy")
    ys, yps, ind = O.augment_symmetric(
        data["iy"], data["iyp"], torch.stack([data["z1"], data["z2"]], -1).float()
    )
    xs = torch.cat([data["x"], data["x"]]).float().to(device)
    ys, ind = ys.to(device), ind.to(device)
    p_all, q_all = O.split_objectives(ind, primary=0)  # r1 primary, r2 constrained
    for t in range(1, st.steps + 1):
        idx = torch.randint(len(xs), (st.batch,), generator=gen).to(device)
        xb, yb = xs[idx], ys[idx]
        with torch.no_grad():
            wbc = _per_example_dual_step(st, xb, yb, p_all[idx], q_all[idx], n_y)
        lp = torch.gather(st.net.logp(xb), 2, yb.expand(st.runs, -1)[..., None])[..., 0]
        _step(st.opts, st.net.all(), O.bc_loss(lp, wbc).sum())
        st.update_reference(t)
    return st.net, st.lam


def _per_example_dual_step(st: _MopoRun, xb: Tensor, yb: Tensor, pb: Tensor, qb: Tensor, n_y: int) -> Tensor:
    """The ``lam`` step of :func:`train_mopo` on the batch atoms ``(xb, yb)`` with indicators ``pb``, ``qb``;
    returns the weights of the behaviour-cloning step."""
    runs = st.runs
    if st.lag is None:
        log_lag = torch.zeros(runs, st.batch, device=st.device)
    else:
        lp_lag = torch.gather(st.net.logp(xb, st.lag), 2, yb.expand(runs, -1)[..., None])[..., 0]
        log_lag = lp_lag + math.log(n_y)
    wref = O.normalized_ratio(log_lag) / st.batch  # lagged reference measure on the batch atoms
    log_rho = O.log_rho_star(pb, qb, st.lam, st.tau, wref)
    x_lb = torch.exp(log_rho)[..., None] * qb  # rho q per atom [R, B, 1]
    if st.eps > 0:
        lb = st.chi_lower_bound(x_lb, wref)
    else:
        lb = (wref[..., None] * x_lb).sum(-2)
    if st.use_policy_g:  # G of the extracted policy pi_psi (ratio to the data's uniform reference)
        log_pol = torch.gather(st.net.logp(xb), 2, yb.expand(runs, -1)[..., None])[..., 0]
        lb = (O.normalized_ratio(log_pol)[..., None] * qb).mean(-2)
    st.opt_lam.step(lb - st.b)
    st.lam.clamp_(min=0.0)
    log_rho = O.log_rho_star(pb, qb, st.lam, st.tau, wref)
    return O.bc_weights(log_rho, log_lag)


def evaluate(net: BatchedMLP, reward_set: str, n_y: int, n_x: int = 101, greedy: bool = False) -> np.ndarray:
    """Expected rewards ``[R, 2]`` of each policy: ``E_{x ~ grid} E_{y ~ pi(.|x)} (r1, r2)``.

    ``greedy=True`` evaluates the deterministic mode ``argmax_y pi(y | x)`` instead (like the COP oracle).
    """
    x = torch.linspace(0, 1, n_x, dtype=torch.float64, device="cpu")
    grid = torch.linspace(0, 1, n_y, dtype=torch.float64, device="cpu")
    with torch.no_grad():
        pi = torch.exp(net.logp(x)).double()  # [R, n_x, n_y]
    if greedy:
        pi = torch.nn.functional.one_hot(pi.argmax(-1), n_y).double()
    r1, r2 = rewards(reward_set, x[:, None], grid[None, :])
    return torch.stack([(pi * r1).sum(-1).mean(-1), (pi * r2).sum(-1).mean(-1)], -1).numpy()


def ideal_mopo_points(
    reward_set: str,
    tau: float,
    phases: int,
    lams: np.ndarray | None = None,
    primary: int = 0,
    n_x: int = 101,
    n_y: int = 41,
    scores: str = "per_example",
) -> np.ndarray:
    """Expected rewards ``[len(lams), 2]`` of MOPO's idealised iterates: infinite data, exact extraction.

    With the exact BT win probabilities ``p_k(x, y, y')`` and independent labels, ``rho*_lam`` averaged
    over the atoms of response ``y`` is ``m(x, y) = E_{y' ~ mu}[(1 + (e^{1/tau} - 1) p_p)(1 + (e^{lam/tau}
    - 1) p_c)]`` up to a constant (primary ``p``, constraint ``c``), and each lagged-reference phase
    multiplies the policy by ``m``: after ``phases`` phases ``pi(y | x) ∝ mu(y) m(x, y)^phases``. An upper
    bound on what the neural runs of :func:`train_mopo` can reach with ``steps / t0`` phases, for every
    threshold at once (``lam`` sweeps them; ``lam -> inf`` is the hardest constraint). Note the primary's
    factor stays ``e^{1/tau}`` whatever ``lam``: a large ``lam`` cannot undo the tilt towards the primary.

    ``scores="pooled"`` (:func:`train_mopo_pooled`, Eq. `empirical-dual` with the win rates inside the
    exponential): ``m(x, y) = exp((E_{y'}[p_p] + lam E_{y'}[p_c]) / tau)``, which tends to ``argmax_y
    E_{y'}[p_c]`` as ``lam -> inf``.
    """
    if scores not in SCORES:
        raise ConfigError("scores", scores, f"must be one of {list(SCORES)}")
    lam_v = np.concatenate([[0.0], np.geomspace(1e-2, 1e3, 40)]) if lams is None else np.asarray(lams)
    x = torch.linspace(0, 1, n_x, dtype=torch.float64, device="cpu")
    g = torch.linspace(0, 1, n_y, dtype=torch.float64, device="cpu")
    r = rewards(reward_set, x[:, None], g[None, :])
    rp, rc = r[primary], r[1 - primary]
    pp = torch.sigmoid(rp[:, :, None] - rp[:, None, :])  # [x, y, y']
    pc = torch.sigmoid(rc[:, :, None] - rc[:, None, :])
    lp = torch.logaddexp(torch.log1p(-pp), torch.log(pp) + 1.0 / tau)
    out = []
    for lam in lam_v:
        if scores == "pooled":
            log_m = (pp.mean(-1) + float(lam) * pc.mean(-1)) / tau
        else:
            lc = torch.logaddexp(torch.log1p(-pc), torch.log(pc) + float(lam) / tau)
            log_m = torch.logsumexp(lp + lc, -1)
        pi = torch.softmax(phases * (log_m - log_m.amax(-1, keepdim=True)), -1)
        out.append([float((pi * r[0]).sum(-1).mean()), float((pi * r[1]).sum(-1).mean())])
    return np.asarray(out)


def true_front(reward_set: str, n_x: int = 101, n_y: int = 1001, n_w: int = 401) -> np.ndarray:
    """Supported Pareto front of expected rewards over all policies, by scalarisation on a fine grid."""
    x = torch.linspace(0, 1, n_x, dtype=torch.float64, device="cpu")
    y = torch.linspace(0, 1, n_y, dtype=torch.float64, device="cpu")
    r1, r2 = rewards(reward_set, x[:, None], y[None, :])
    pts = []
    for w in torch.linspace(0, 1, n_w, dtype=torch.float64, device="cpu"):
        best = (w * r1 + (1 - w) * r2).argmax(-1, keepdim=True)  # [n_x, 1]
        pts.append([float(r1.gather(1, best).mean()), float(r2.gather(1, best).mean())])
    arr = np.unique(np.round(np.asarray(pts), 12), axis=0)
    return arr[pareto.non_dominated(arr)]


def cop_oracle(reward_set: str, thresholds: np.ndarray, n_x: int = 101, n_y: int = 1001) -> np.ndarray:
    """COP oracle ``pi(x) = argmax_y r1(x, y) s.t. r2(x, y) >= b`` (argmax r2 where infeasible), per ``b``."""
    x = torch.linspace(0, 1, n_x, dtype=torch.float64, device="cpu")
    y = torch.linspace(0, 1, n_y, dtype=torch.float64, device="cpu")
    r1, r2 = rewards(reward_set, x[:, None], y[None, :])
    out = []
    for b in thresholds:
        feas = r2 >= b
        score = torch.where(feas, r1, torch.full_like(r1, -torch.inf))
        pick = torch.where(feas.any(-1), score.argmax(-1), r2.argmax(-1))
        out.append([float(r1.gather(1, pick[:, None]).mean()), float(r2.gather(1, pick[:, None]).mean())])
    return np.asarray(out)


def auto_thresholds(data: Mapping[str, Tensor], n_y: int, n: int) -> list[float]:
    """MOPO threshold sweep from the data alone: ``n`` values between the worst and the best per-response
    empirical win rate on objective 2.

    ``q_hat(y) = mean of I_2 over augmented records with response y`` is the tabular estimate of
    ``E_{x, y'}[p_2(y > y')]``; ``[min_y q_hat, max_y q_hat]`` brackets the ``G`` of context-free policies
    (the uniform reference has ``G = 0.5`` exactly under the symmetric augmentation).
    """
    ys = torch.cat([data["iy"], data["iyp"]])
    z2 = torch.cat([data["z2"], 1 - data["z2"]])
    cnt = torch.bincount(ys, minlength=n_y).clamp(min=1)
    q_hat = torch.bincount(ys, weights=z2, minlength=n_y) / cnt
    return np.linspace(float(q_hat.min()), float(q_hat.max()), n).tolist()


def cop_thresholds(reward_set: str, n: int, n_x: int = 101, n_y: int = 1001) -> np.ndarray:
    """``n`` thresholds ``b`` spanning the range of ``r2(x, y)`` on the grid (quantiles)."""
    x = torch.linspace(0, 1, n_x, dtype=torch.float64, device="cpu")
    y = torch.linspace(0, 1, n_y, dtype=torch.float64, device="cpu")
    _, r2 = rewards(reward_set, x[:, None], y[None, :])
    return np.quantile(r2.numpy().ravel(), np.linspace(0.0, 1.0, n))


def reference_point(point_sets: list[np.ndarray], margin: float = 0.01) -> np.ndarray:
    """Hypervolume reference: the component-wise minimum over all point sets minus ``margin`` x range."""
    allp = np.concatenate([np.asarray(p, float).reshape(-1, 2) for p in point_sets])
    lo, hi = allp.min(0), allp.max(0)
    return lo - margin * (hi - lo)


def _train_head(d, thr, swap: bool, mcfg, n_y: int, n_thr: int, gen, device, win):
    """One MOPO head over a threshold sweep (``thr``: list or ``"auto"``); ``swap``: objectives swapped."""
    if win is None:  # per-example scores
        thr = auto_thresholds(d, n_y, n_thr) if thr == "auto" else thr
        net, lam = train_mopo(d, n_y, [float(t) for t in thr], mcfg, gen, device)
        return net, lam, thr
    head_win = (lambda xb: win(xb).flip(-1)) if swap else win
    thr = pooled_thresholds(head_win, n_thr, device=device) if thr == "auto" else thr
    net, lam = train_mopo_pooled(d, n_y, [float(t) for t in thr], mcfg, gen, device, head_win)
    return net, lam, thr


def _check_mopo_config(mcfg: Mapping[str, Any]) -> None:
    """Reject bad ``mopo`` options of the motivating example before anything is trained."""
    primaries = [int(k) for k in mcfg.get("primaries", [0])]
    if not set(primaries) <= {0, 1} or 0 not in primaries:
        raise ConfigError("mopo.primaries", primaries, "must be [0] or [0, 1] (0 = r1 primary)")
    checks = [
        ("scores", "pooled", SCORES),
        ("reference_update", "lagged", ("lagged", "current")),
        ("constraint_on", "rho", ("rho", "policy")),
    ]
    for key, default, allowed in checks:
        if str(mcfg.get(key, default)) not in allowed:
            raise ConfigError(f"mopo.{key}", mcfg.get(key), f"must be one of {list(allowed)}")
    kind = str(dict(mcfg.get("score_model", {}) or {}).get("kind", "bt"))
    if kind not in SCORE_MODELS:
        raise ConfigError("mopo.score_model.kind", kind, f"must be one of {list(SCORE_MODELS)}")


def _preference_pairs(data: Mapping[str, Tensor], z: Tensor, mask: Tensor | None = None) -> dict[str, Tensor]:
    """The records (``mask``: those kept) as DPO pairs ``(x, y_w, y_l)`` under the labels ``z``."""
    x, iy, iyp = data["x"], data["iy"], data["iyp"]
    yw, yl = torch.where(z > 0.5, iy, iyp), torch.where(z > 0.5, iyp, iy)
    m = torch.ones_like(z, dtype=torch.bool) if mask is None else mask
    return {"x": x[m], "yw": yw[m], "yl": yl[m]}


def _dpo_datasets(data: Mapping[str, Tensor], ws: list[float]) -> dict[str, dict[str, Tensor]]:
    """DPO's data sets: D1, D2, D_J (the records both labels agree on) and D_C(w) per scalarisation ``w``."""
    dsets = {
        "DPO D1": _preference_pairs(data, data["z1"]),
        "DPO D2": _preference_pairs(data, data["z2"]),
        "DPO DJ": _preference_pairs(data, data["z1"], data["z1"] == data["z2"]),
    }
    for i, w in enumerate(ws):
        dsets[f"DPO DC(w={w:g})"] = _preference_pairs(data, data["zc"][i])
    return dsets


def _mopo_heads(
    data: Mapping[str, Tensor], n_y: int, mcfg: Mapping[str, Any], gen: torch.Generator, device: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """MOPO's r1-primary head over its threshold sweep and, with ``primaries: [0, 1]``, the r2-primary head
    (constraint on the r1 win rate); returns the policies (``r1``, ``r2``: None without it) and the
    record of their thresholds and multipliers."""
    primaries = [int(k) for k in mcfg.get("primaries", [0])]
    scores = str(mcfg.get("scores", "pooled"))
    n_thr = int(mcfg.get("n_thresholds", 9))
    data2 = {**data, "z1": data["z2"], "z2": data["z1"]}  # r2 primary: swap the labels

    win = fit_win_rates(data, n_y, mcfg, gen, device) if scores == "pooled" else None
    head = {"mcfg": mcfg, "n_y": n_y, "n_thr": n_thr, "gen": gen, "device": device, "win": win}
    mopo, lam, thresholds = _train_head(data, mcfg.get("thresholds", "auto"), swap=False, **head)
    res = {"mopo_scores": scores, "mopo_thresholds": list(thresholds), "mopo_lambda": lam[:, 0].tolist()}
    mopo2 = None
    if 1 in primaries:  # second head: r2 primary, constraint on the r1 win rate
        mopo2, lam2, thr2 = _train_head(data2, mcfg.get("thresholds_r1", "auto"), swap=True, **head)
        res |= {"mopo_r2_primary_thresholds": list(thr2), "mopo_r2_primary_lambda": lam2[:, 0].tolist()}
    return {"r1": mopo, "r2": mopo2}, res


def _method_points(
    rs: str, n_y: int, dpo: BatchedMLP, mopo: dict[str, Any], dsets: Mapping[str, Any], cop_pts: np.ndarray,
    greedy: bool,
) -> dict[str, np.ndarray]:  # fmt: skip
    """Expected rewards of every method's policies (the COP oracle's given), by name."""
    dpo_pts, mopo_pts = evaluate(dpo, rs, n_y, greedy=greedy), evaluate(mopo["r1"], rs, n_y, greedy=greedy)
    methods: dict[str, np.ndarray] = {k: dpo_pts[i : i + 1] for i, k in enumerate(dsets)}
    methods["DPO DC (all w)"] = dpo_pts[3:]
    methods["COP oracle"] = cop_pts
    methods["MOPO"] = mopo_pts
    if mopo["r2"] is not None:
        methods["MOPO r2 primary"] = evaluate(mopo["r2"], rs, n_y, greedy=greedy)
        methods["MOPO both primaries"] = np.concatenate([mopo_pts, methods["MOPO r2 primary"]])
    return methods


def _front_scores(
    front: np.ndarray, dense: np.ndarray, methods: Mapping[str, np.ndarray], tag: str
) -> tuple[dict[str, Any], np.ndarray]:
    """Hypervolume (two reference points) and mean distance to the true front per method; returns the
    record (keys suffixed ``tag``) and the reference point of the figure."""
    ref = reference_point([front, *methods.values()])
    # second reference point: the true front's nadir minus 1% of its range (points outside the
    # front's box count for nothing), to show how much the ratios depend on the reference
    ref_f = reference_point([front])
    res = {
        f"reference_point{tag}": ref.tolist(),
        f"true_front_hypervolume{tag}": pareto.hypervolume(front, ref),
        f"reference_point_front_nadir{tag}": ref_f.tolist(),
        f"methods{tag}": {
            k: {
                "points": v.tolist(),
                "hypervolume": pareto.hypervolume(v, ref),
                "hypervolume_front_nadir_ref": pareto.hypervolume(v, ref_f),
                "mean_distance_to_front": pareto.mean_distance(v, dense),
            }
            for k, v in methods.items()
        },
    }
    return res, ref


def _run_reward_set(rs: str, config: Mapping[str, Any], out: Path | None, device: str) -> dict[str, Any]:
    """One reward set of the motivating example: data, DPO on each data set, the true front, MOPO's heads,
    the COP oracle; their points scored against the front, sampled and greedy (``_greedy``)."""
    n, n_y, seed = int(config.get("n", 4000)), int(config.get("n_y", 41)), int(config.get("seed", 0))
    dcfg = dict(config.get("dpo", {}) or {})
    mcfg = dict(config.get("mopo", {}) or {})
    ws = [float(w) for w in dcfg.get("w", [0.25, 0.5, 0.75])]
    grid = dict(config.get("grid", {}) or {})
    gen = torch.Generator().manual_seed(seed)
    data = make_data(rs, n, n_y, gen, ws)
    dsets = _dpo_datasets(data, ws)
    dpo = train_dpo(list(dsets.values()), n_y, dcfg, gen, device)
    gx, gy = int(grid.get("n_x", 101)), int(grid.get("n_y", 1001))
    front = true_front(rs, gx, gy, int(grid.get("n_w", 401)))
    mopo, res = _mopo_heads(data, n_y, mcfg, gen, device)
    cop_pts = cop_oracle(
        rs, cop_thresholds(rs, int(dict(config.get("cop", {}) or {}).get("n", 25)), gx, gy), gx, gy
    )
    dense = pareto.densify_front(front)
    for tag, greedy in (("", False), ("_greedy", True)):
        methods = _method_points(rs, n_y, dpo, mopo, dsets, cop_pts, greedy)
        scored, ref = _front_scores(front, dense, methods, tag)
        res |= scored
        if out is not None:
            _plot_front(rs, front, methods, ref, out / f"motivating_set_{rs}{tag}.png")
    return res


def run_motivating(config: Mapping[str, Any], out: Path | None = None, device: str = "cpu") -> dict:
    """The motivating example on one or more reward sets; returns Pareto points, hypervolume, distance.

    Config keys: ``reward_sets`` (default [A, B]), ``n`` (data size), ``n_y`` (response grid), ``seed``,
    ``dpo: {beta, steps, lr, batch, hidden, w: [..]}``, ``mopo: {tau, t0, steps, lr, batch, hidden, eps,
    thresholds: [..] | auto, n_thresholds, primaries: [0] | [0, 1], thresholds_r1, reference_update}``
    (see :func:`auto_thresholds`; ``primaries: [0, 1]`` adds an r2-primary policy constrained on the r1 win
    rate, reported as ``MOPO r2 primary`` and, with the r1-primary ones, ``MOPO both primaries``),
    ``cop: {n}``, ``grid: {n_x, n_y, n_w}`` (evaluation grids). ``mopo.scores``: ``pooled`` (default,
    :func:`train_mopo_pooled` with the win-rate model of :func:`fit_win_rates`, options under
    ``mopo.score_model``; automatic thresholds from :func:`pooled_thresholds`) or ``per_example``
    (:func:`train_mopo`, automatic thresholds from :func:`auto_thresholds`).
    """
    sets = list(config.get("reward_sets", ["A", "B"]))
    results: dict[str, Any] = {
        "experiment": "motivating",
        "n": int(config.get("n", 4000)),
        "n_y": int(config.get("n_y", 41)),
        "seed": int(config.get("seed", 0)),
        "config": dict(config),
        "sets": {},
    }
    _check_mopo_config(dict(config.get("mopo", {}) or {}))
    for rs in sets:
        results["sets"][rs] = _run_reward_set(rs, config, out, device)
    return results


def _plot_front(rs: str, front: np.ndarray, methods: Mapping[str, np.ndarray], ref, path: Path) -> None:
    """Reward-space plot like figure `appendix_dpo_comparison`."""
    p = plt()
    fig, ax = p.subplots(figsize=(5.2, 4.2))
    f = front[np.argsort(front[:, 0])]
    ax.plot(f[:, 0], f[:, 1], "k-", lw=1.5, label="true Pareto front")
    markers = {"COP oracle": ("x", "gray"), "MOPO": ("*", "k"), "MOPO r2 primary": ("*", "tab:red")}
    palette = iter(
        ["tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive"]
    )
    for k, v in methods.items():
        if k in ("DPO DC (all w)", "MOPO both primaries"):
            continue
        m, c = markers.get(k) or ("s", next(palette, None))
        ax.scatter(
            v[:, 0], v[:, 1], marker=m, color=c, s=60 if k.startswith("MOPO") else 28, label=k, zorder=3
        )
    ax.scatter([ref[0]], [ref[1]], marker="+", color="k", s=60, label="HV reference")
    ax.set_xlabel("expected reward E_π[r1]")
    ax.set_ylabel("expected reward E_π[r2]")
    ax.set_title(f"reward set {rs}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    p.close(fig)


def run_synthetic(config: Mapping[str, Any], out: Path | None = None, device: str = "cpu") -> dict:
    """``mode: synthetic`` entry point: ``experiment: sanity | motivating``."""
    exp = config.get("experiment", "sanity")
    if exp == "sanity":
        return run_sanity(config, out, device)
    if exp == "motivating":
        return run_motivating(config, out, device)
    raise ConfigError("experiment", exp, "must be 'sanity' or 'motivating'")

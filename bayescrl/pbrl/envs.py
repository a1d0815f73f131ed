"""The two benchmark environments of the thesis' chapter `PSPL`, as exact tabular episodic MDPs.

* ``riverswim`` — RiverSwim (Strehl & Littman 2008) in the common parameterisation of Osband et al. (2013):
  ``S`` states in a row (default 6), actions 0 = left (deterministic move left) and 1 = right (swim against
  the current: from the leftmost state move right w.p. 0.6 else stay; in the middle move right w.p. 0.35,
  stay w.p. 0.6, drift left w.p. 0.05; in the rightmost state stay w.p. 0.6 else drift left). Rewards are
  scaled into [0, 1] as the chapter requires: r(0, left) = 0.005, r(S−1, right) = 1, else 0. ρ = δ_0.
* ``mountaincar`` — a discretisation of gymnasium's MountainCar-v0 physics (Moore 1990): the continuous
  state (position ∈ [−1.2, 0.6], velocity ∈ [−0.07, 0.07]) is cut into ``n_pos × n_vel`` equal bins plus
  one absorbing goal state (position ≥ 0.5); actions {push left, none, push right}; one MDP step is
  ``repeat`` physics steps. P(·|s,a) is the empirical distribution of the destination cell over an
  ``m × m`` grid of points inside cell s (exact for the discretised model, deterministic physics). The
  reward is 1 per step spent in the goal state, 0 elsewhere (the thesis' r ∈ [0,1]; reaching the goal
  earlier is worth more). ρ is the distribution of cells of gymnasium's start state (x ∼ U[−0.6, −0.4],
  v = 0).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from typing import Any

import torch

from bayescrl.pbrl.mdp import TabularMDP, one_hot_features, value_iteration
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import check_keys

ENVS = ("riverswim", "mountaincar")


def riverswim(S: int = 6, H: int = 20, *, device=None) -> TabularMDP:
    """RiverSwim with ``S`` states and horizon ``H`` (see module docstring)."""
    if S < 2:
        raise ConfigError("env.S", S, "RiverSwim needs at least 2 states")
    P = torch.zeros(S, 2, S, dtype=torch.float64, device="cpu")
    for s in range(S):
        P[s, 0, max(s - 1, 0)] = 1.0
        if s == 0:
            P[s, 1, 0], P[s, 1, 1] = 0.4, 0.6
        elif s == S - 1:
            P[s, 1, s], P[s, 1, s - 1] = 0.6, 0.4
        else:
            P[s, 1, s + 1], P[s, 1, s], P[s, 1, s - 1] = 0.35, 0.6, 0.05
    r = torch.zeros(S, 2, dtype=torch.float64, device="cpu")
    r[0, 0], r[S - 1, 1] = 0.005, 1.0
    rho = torch.zeros(S, dtype=torch.float64, device="cpu")
    rho[0] = 1.0
    feats = one_hot_features(S, 2)
    mdp = TabularMDP(P, rho, H, feats, r.reshape(-1), name="riverswim", info={"S": S})
    return mdp.to(device) if device is not None else mdp


def _mc_step(x: torch.Tensor, v: torch.Tensor, a: int, repeat: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``repeat`` steps of gymnasium MountainCar-v0 physics (force 0.001, gravity 0.0025)."""
    for _ in range(repeat):
        v = (v + (a - 1) * 0.001 - 0.0025 * torch.cos(3 * x)).clamp(-0.07, 0.07)
        x = (x + v).clamp(-1.2, 0.6)
        v = torch.where((x <= -1.2) & (v < 0), torch.zeros_like(v), v)
    return x, v


def mountaincar(
    n_pos: int = 6, n_vel: int = 6, H: int = 25, repeat: int = 6, m: int = 12, *, device=None
) -> TabularMDP:
    """Discretised MountainCar (see module docstring): ``S = n_pos·n_vel + 1``, ``A = 3``."""
    for name, val in (("n_pos", n_pos), ("n_vel", n_vel), ("repeat", repeat), ("m", m)):
        if val < 1:
            raise ConfigError(f"env.{name}", val, "must be >= 1")
    xlo, xhi, vlo, vhi, goal = -1.2, 0.6, -0.07, 0.07, 0.5
    S = n_pos * n_vel + 1
    G = S - 1
    dx, dv = (xhi - xlo) / n_pos, (vhi - vlo) / n_vel

    def cell(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        i = ((x - xlo) / dx).floor().long().clamp(0, n_pos - 1)
        j = ((v - vlo) / dv).floor().long().clamp(0, n_vel - 1)
        return torch.where(x >= goal, torch.full_like(i, G), i * n_vel + j)

    # m x m sub-grid of points in every cell, shape [n_pos*n_vel, m*m]
    u = (torch.arange(m, dtype=torch.float64, device="cpu") + 0.5) / m
    ci, cj = torch.meshgrid(
        torch.arange(n_pos, device="cpu"), torch.arange(n_vel, device="cpu"), indexing="ij"
    )
    ui, uj = torch.meshgrid(u, u, indexing="ij")
    x0 = xlo + (ci.reshape(-1, 1) + ui.reshape(1, -1)) * dx
    v0 = vlo + (cj.reshape(-1, 1) + uj.reshape(1, -1)) * dv
    P = torch.zeros(S, 3, S, dtype=torch.float64, device="cpu")
    for a in range(3):
        x1, v1 = _mc_step(x0, v0, a, repeat)
        dest = cell(x1, v1)  # [n_cells, m*m]
        P[:G, a].scatter_add_(
            1, dest, torch.full(dest.shape, 1.0 / (m * m), dtype=torch.float64, device="cpu")
        )
    # cells whose points already lie in the goal region (x >= 0.5) behave like the goal
    start_in_goal = (x0 >= goal).all(1)
    P[:G][start_in_goal] = 0.0
    P[:G][start_in_goal, :, G] = 1.0
    P[G, :, G] = 1.0
    r = torch.zeros(S, 3, dtype=torch.float64, device="cpu")
    r[G] = 1.0
    xs = torch.linspace(-0.6, -0.4, 201, dtype=torch.float64, device="cpu")
    rho = torch.bincount(cell(xs, torch.zeros_like(xs)), minlength=S).to(torch.float64)
    rho = rho / rho.sum()
    info = {"n_pos": n_pos, "n_vel": n_vel, "repeat": repeat, "goal_state": G}
    mdp = TabularMDP(P, rho, H, one_hot_features(S, 3), r.reshape(-1), name="mountaincar", info=info)
    return mdp.to(device) if device is not None else mdp


def make_env(cfg: Mapping[str, Any], *, device=None) -> TabularMDP:
    """Build an environment from the ``env:`` config block (``name`` plus that environment's keys)."""
    name, kwargs = _env_args(cfg)
    builder = riverswim if name == "riverswim" else mountaincar
    return builder(**kwargs, device=device)


def env_sizes(cfg: Mapping[str, Any]) -> dict[str, int]:
    """``S, A, H`` and ``grid`` (physics points simulated to build P) of the ``env:`` block, without
    building it (so a size too large for memory is refused before any allocation)."""
    name, kwargs = _env_args(cfg)
    builder = riverswim if name == "riverswim" else mountaincar
    defaults = {k: p.default for k, p in inspect.signature(builder).parameters.items() if k != "device"}
    a = {**defaults, **kwargs}
    if name == "riverswim":
        return {"S": a["S"], "A": 2, "H": a["H"], "grid": 0}
    cells = a["n_pos"] * a["n_vel"]
    return {"S": cells + 1, "A": 3, "H": a["H"], "grid": cells * a["m"] ** 2}


def _env_args(cfg: Mapping[str, Any]) -> tuple[str, dict[str, int]]:
    """The ``env:`` block checked: its name and the builder's keyword arguments."""
    if not isinstance(cfg, Mapping):
        raise ConfigError("env", cfg, "must be a mapping with at least 'name'")
    cfg = dict(cfg)
    name = cfg.pop("name", None)
    if name not in ENVS:
        raise ConfigError("env.name", name, f"unknown environment; choose one of {list(ENVS)}")
    allowed = {"riverswim": {"S", "H"}, "mountaincar": {"n_pos", "n_vel", "H", "repeat", "m"}}[name]
    check_keys(cfg, sorted(allowed), "env")
    for key, val in cfg.items():
        if not isinstance(val, int) or isinstance(val, bool) or val < 1:
            raise ConfigError(f"env.{key}", val, "must be a positive integer")
    return name, cfg


def describe(mdp: TabularMDP) -> dict:
    """Small JSON-able description (sizes, optimal value) of an environment."""
    V, _, _ = value_iteration(mdp.P, mdp.r, mdp.H)
    return {
        "name": mdp.name,
        "S": mdp.S,
        "A": mdp.A,
        "H": mdp.H,
        "d": mdp.d,
        "optimal_value": float((mdp.rho * V[0]).sum()),
        **(mdp.info or {}),
        "log10_num_deterministic_policies": mdp.H * mdp.S * math.log10(mdp.A),
    }

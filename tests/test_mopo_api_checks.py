"""The Python API of the tabular MOPO solver refuses what the CLI refuses, by name, before any work."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from bayescrl.mopo.config import check_config
from bayescrl.mopo.tabular import (
    TabularProblem,
    parse_tabular,
    run_mopo,
    run_mopo_lb,
    solve_exact,
)
from bayescrl.mopo.tabular_run import solve_config
from bayescrl.utils import ConfigError

DATA = [
    {"y": "y1", "y_prime": "y2", "prefs": [1, 1]},
    {"y": "y1", "y_prime": "y3", "prefs": [1, 0]},
    {"y": "y2", "y_prime": "y3", "prefs": [0, 0]},
]
BASE: dict[str, Any] = {
    "mode": "tabular",
    "solver": "exact",
    "actions": ["y1", "y2", "y3"],
    "primary": 1,
    "tau": 1.0,
    "b": [0.3],
    "data": DATA,
}
B = torch.tensor([0.3], dtype=torch.float64)
FAST = {"steps": 20, "lr": 0.05}


@pytest.fixture(scope="module")
def problem() -> TabularProblem:
    return parse_tabular(BASE)


@pytest.mark.parametrize(
    "change, field",
    [
        ({"tua": 2.0}, "tua"),  # misspelt key: was ignored
        ({"tau": float("inf")}, "tau"),  # was a uniform policy
        ({"solver": "mopo", "mopo": {"steps": 0}}, r"mopo\.steps"),  # was a uniform policy
        ({"solver": "mopo", "mopo": {"steps": 20, "lr": float("nan")}}, r"mopo\.lr"),  # was torch's error
        ({"augment": "false"}, "augment"),  # was run as True
        ({"mode": "synthetic"}, "mode"),
    ],
)
def test_solve_config_refuses_what_check_config_refuses(change: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=f"^{field}"):
        solve_config({**BASE, **change})


def test_check_config_refuses_a_string_switch() -> None:
    with pytest.raises(ConfigError, match="^augment = 'false': must be true or false"):
        check_config({**BASE, "augment": "false"})


def test_solve_config_refuses_an_unknown_device() -> None:
    with pytest.raises(ConfigError, match="^device = 'gpu'"):
        solve_config(BASE, device="gpu")


@pytest.mark.parametrize("tau", [0.0, -1.0, float("inf"), float("nan"), True])
@pytest.mark.parametrize("solver", ["exact", "mopo", "mopo-lb"])
def test_every_solver_refuses_a_degenerate_tau(problem: TabularProblem, solver: str, tau: float) -> None:
    # tau = 0 made run_mopo return a NaN policy, tau = inf pi_ref
    with pytest.raises(ConfigError, match="^tau = "):
        if solver == "exact":
            solve_exact(problem, tau, B)
        elif solver == "mopo":
            run_mopo(problem, tau, b=B, **FAST)
        else:
            run_mopo_lb(problem, tau, B, **FAST)


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"steps": 0}, "steps"),
        ({"batch": 0}, "batch"),  # was accepted
        ({"runs": 0}, "runs"),
        ({"log_every": 0}, "log_every"),
        ({"lr": -1.0}, "lr"),
        ({"lr": float("nan")}, "lr"),
        ({"lr_final": 0.0}, "lr_final"),
        ({"augment": "false"}, "augment"),
        ({"device": "gpu"}, "device"),
    ],
)
@pytest.mark.parametrize("solver", [run_mopo, run_mopo_lb])
def test_stochastic_solvers_refuse_bad_settings_by_name(problem, solver, kw: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=f"^{field} = "):
        solver(problem, 1.0, b=B, **{**FAST, **kw})


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"eps": -0.1}, "eps"),
        ({"sigma0": 0.0}, "sigma0"),
        ({"gamma": 1.5}, "gamma"),
        ({"sigma_min": -1}, "sigma_min"),
    ],
)
def test_solver_specific_settings_are_checked(problem: TabularProblem, kw: dict, field: str) -> None:
    solver = run_mopo if field == "eps" else run_mopo_lb
    with pytest.raises(ConfigError, match=f"^{field} = "):
        solver(problem, 1.0, b=B, **FAST, **kw)


@pytest.mark.parametrize(
    "b", [torch.tensor([0.3, 0.3]), [0.3, 0.3], torch.tensor([[[0.3]]]), [float("nan")], "0.3", None]
)
@pytest.mark.parametrize("solver", ["exact", "mopo", "mopo-lb"])
def test_thresholds_must_be_finite_with_one_per_constraint(problem, solver: str, b: Any) -> None:
    if b is None and solver == "mopo":
        return  # run_mopo's b = None means adaptive thresholds (beta)
    with pytest.raises(ConfigError, match="^b = "):
        if solver == "exact":
            solve_exact(problem, 1.0, b)
        elif solver == "mopo":
            run_mopo(problem, 1.0, b=b, **FAST)
        else:
            run_mopo_lb(problem, 1.0, b, **FAST)


def test_valid_calls_still_work_and_a_list_or_array_b_is_a_tensor_b(problem: TabularProblem) -> None:
    res, run = solve_config(BASE)
    assert run is None and sum(res["policy"].values()) == pytest.approx(1.0)
    exact = solve_exact(problem, 1.0, B)
    for b in ([0.3], np.array([0.3]), 0.3):  # a list gave AttributeError: 'list' object has no 'double'
        torch.testing.assert_close(solve_exact(problem, 1.0, b).policy, exact.policy, rtol=0, atol=0)
    want = run_mopo(problem, 1, b=B, steps=20.0, lr=0.05, batch=None)  # whole floats are counts
    got = run_mopo(problem, 1.0, b=[0.3], steps=20, lr=0.05, batch=None)
    torch.testing.assert_close(got.policy, want.policy, rtol=0, atol=0)
    per_run = run_mopo(problem, 1.0, b=torch.tensor([[0.3]]), steps=20, lr=0.05, batch=None)  # [runs, K-1]
    torch.testing.assert_close(per_run.policy, want.policy, rtol=0, atol=0)
    with pytest.raises(ConfigError, match="^b = "):  # the exact solver takes one threshold per constraint
        solve_exact(problem, 1.0, torch.tensor([[0.3]]))
    assert bool(torch.isfinite(want.policy).all())
    lb = run_mopo_lb(problem, 1.0, [0.3], **FAST, batch=None)
    assert lb.policy.sum().item() == pytest.approx(1.0)


def test_a_tabular_run_parses_its_records_once(monkeypatch, tmp_path):
    """The command checks the config before its output folder is made and then runs the parsed problem:
    the records are parsed once (``check_tabular``), by the CLI and by ``solve_config`` alike."""
    import bayescrl.mopo.config as mopo_config
    from bayescrl.cli import main

    calls = []
    real = mopo_config.parse_tabular
    monkeypatch.setattr(mopo_config, "parse_tabular", lambda *a, **k: calls.append(1) or real(*a, **k))
    try:
        out = str(tmp_path / "o")
        main(["mopo", "examples/mopo/tabular_mopo.yaml", "--out", out, "--set", "mopo.steps=5"])
    except SystemExit as exc:
        assert exc.code == 0
    assert (tmp_path / "o" / "results.json").exists() and len(calls) == 1
    solve_config(BASE)
    assert len(calls) == 2

"""``benchmarks/gpu_tables.py``, the e-COP table rows on the MJX backend within a time budget: the order of
its runs, its table cells, and (slow) one run end to end on CPU JAX, as the GPU session runs it."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from bayescrl.envs.mjx import MJX_ENV_IDS, mjx_available

ROOT = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("gpu_tables", ROOT / "benchmarks" / "gpu_tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_runs_are_seed_major_with_ecop_first_and_every_task_has_an_mjx_port():
    gt = _module()
    for plan in gt.PLANS.values():
        assert all(env in MJX_ENV_IDS for _, env, _, _ in plan["tasks"])
        assert plan["algos"][0] == "ecop" and len(set(plan["algos"])) == 8
    runs = gt.plan_runs(gt.PLANS["ant1e6"], ["ecop", "focops"], None, [0, 1])
    assert [r["key"] for r in runs] == [
        "AntCircle/ecop/seed0", "AntCircle/focops/seed0", "AntReach/ecop/seed0", "AntReach/focops/seed0",
        "AntCircle/ecop/seed1", "AntCircle/focops/seed1", "AntReach/ecop/seed1", "AntReach/focops/seed1",
    ]  # fmt: skip
    argv = gt.run_argv(runs[0], gt.PLANS["ant1e6"]["set"], "cuda", Path("x"))
    assert argv[argv.index("--env") + 1] == "bayescrl/AntCircleElliptic-v0"
    assert "config.env_backend=mjx" in argv and "config.n_envs=1024" in argv
    assert argv[argv.index("--total-steps") + 1] == "1000000"


def test_cells_summarise_finished_seeds_and_later_runs_are_expected_without_the_compile():
    gt = _module()
    runs = gt.plan_runs(gt.PLANS["ant1e6"], ["ecop"], ["AntCircle"], [0, 1, 2])
    results = {
        "AntCircle/ecop/seed0": {"rc": 0, "train_final_return": 10.0, "train_final_costs": [8.0]},
        "AntCircle/ecop/seed1": {"rc": 0, "train_final_return": 20.0, "train_final_costs": [12.0]},
        "AntCircle/ecop/seed2": {
            "rc": 124,
            "partial": True,
            "train_final_return": 99.0,
            "train_final_costs": [0],
        },
    }
    (cell,) = gt.cells(runs, results)
    assert cell["seeds"] == 2 and cell["seeds_within_limit"] == 1
    assert cell["train_final_return"] == {"n": 2, "mean": 15.0, "sd": pytest.approx(7.0710678)}
    # the next run of a task is expected to take the finished one's time without its compile
    rec = {
        "first_iter_s": 100.0,
        "env_steps_per_s_after_first": 1000.0,
        "env_steps": 20_000,
        "iterations_done": 4,
    }
    assert gt.expected_wall(160.0, rec) == pytest.approx(160.0 - 100.0 + 5.0 + 15.0)
    assert gt.expected_wall(160.0, {}) == 160.0


@pytest.mark.long
@pytest.mark.timeout(600)
@pytest.mark.skipif(not mjx_available(), reason="needs jax and mujoco-mjx (the mjx extra)")
def test_one_point_circle_run_end_to_end_on_cpu_jax(tmp_path):
    """The script as the GPU session runs it, on CPU JAX: one e-COP run of one iteration; a second call
    finds it finished and does not run it again; the summary holds its cell."""
    import subprocess

    cmd = [
        sys.executable, str(ROOT / "benchmarks" / "gpu_tables.py"), "--plan", "thesis",
        "--tasks", "PointCircle", "--algos", "ecop", "--seeds", "1", "--steps", "1600",
        "--device", "cpu", "--workers", "1",
        "--budget", "500", "--set", "config.eval_episodes=1", "--work", str(tmp_path / "work"),
        "--out", str(tmp_path / "out"),
    ]  # fmt: skip
    for call in range(2):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=560, cwd=ROOT)
        assert r.returncode == 0, r.stderr[-3000:]
        summary = json.loads((tmp_path / "out" / "summary.json").read_text())
        run = summary["runs"]["PointCircle/ecop/seed0"]
        assert run["rc"] == 0 and run.get("resumed", False) == (call == 1), run
    (cell,) = summary["cells"]
    assert cell["seeds"] == 1 and cell["train_final_cost"]["n"] == 1
    kept = tmp_path / "out" / "runs" / "PointCircle" / "ecop" / "seed0" / "metrics.json"
    metrics = json.loads(kept.read_text())
    assert metrics["config"]["env_backend"] == "mjx" and metrics["env_steps"] == 1600

"""Traffic tasks on SUMO (bayescrl/Grid-v0, bayescrl/Bottleneck-v0): API, hand-computed costs, seeding,
no leaked SUMO processes, one-line errors. Tiny horizons and warm-ups keep every test well under 3 s."""

from __future__ import annotations

import gc
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np
import psutil
import pytest

pytest.importorskip("sumo", reason="needs the traffic extra")
pytest.importorskip("sumo_rl", reason="needs the traffic extra")

import bayescrl.envs  # noqa: E402,F401  (registers the ids)
from bayescrl.envs.traffic.bottleneck import BottleneckEnv  # noqa: E402
from bayescrl.envs.traffic.grid import GridEnv  # noqa: E402
from bayescrl.envs.traffic.sim import OverTimeCounter, SumoSim, _import_libsumo  # noqa: E402

needs_libsumo = pytest.mark.skipif(_import_libsumo() is None, reason="libsumo not installed")
from bayescrl.utils.errors import ConfigError  # noqa: E402


def sumo_children() -> list[psutil.Process]:
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if "sumo" in p.name():
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def no_sumo_children(timeout: float = 3.0) -> bool:
    procs = sumo_children()
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    return not alive


# ---------------------------------------------------------------------------------------- cost definition
def test_envs_traffic_overtime_counter_hand_values():
    c = OverTimeCounter(5.0)
    # held 6 s in 1 s steps: the 6th second is the only one beyond 5 s
    assert [c.update(["a"], 1.0) for _ in range(6)] == [0, 0, 0, 0, 0, 1.0]
    c.reset()
    assert sum(c.update(["a"], 1.0) for _ in range(5)) == 0.0  # exactly the limit is allowed
    c.reset()
    # 0.5 s sub-steps: 11 s held costs 1 s (two sub-steps of 0.5 beyond 10 s)
    c10 = OverTimeCounter(10.0)
    assert sum(c10.update(["h"], 0.5) for _ in range(22)) == pytest.approx(1.0)
    # an interruption restarts the run; two keys add up
    c.reset()
    for _ in range(4):
        c.update(["a", "b"], 1.0)
    c.update(["b"], 1.0)  # a interrupted
    assert c.run("a") == 0.0 and c.run("b") == 5.0
    assert c.update(["a", "b"], 1.0) == 1.0  # b at 6 s, a at 1 s


def test_envs_traffic_grid_red_six_seconds_costs_one_per_approach():
    env = GridEnv(horizon=8, warm_up=0.0)
    env.reset(seed=0)
    # lights never switch: each light's initial green stays, its two cross approaches stay red.
    # 9 lights x 2 red approaches; a red held 6 s costs 1 (second 6), then 1 per further second.
    costs = [env.step(-np.ones(9))[4]["cost"] for _ in range(7)]
    env.close()
    assert costs == [0, 0, 0, 0, 0, 18.0, 18.0]


def test_envs_traffic_grid_cycling_at_min_green_costs_nothing():
    # always ask to switch: 3 s green + 2 s yellow keeps every red at 5 s, the limit: cost exactly 0;
    # with 4 s greens (min_green=4) every red lasts 6 s: 1 per approach per cycle
    env = GridEnv(horizon=40, warm_up=0.0)
    env.reset(seed=1)
    assert sum(env.step(np.ones(9))[4]["cost"] for _ in range(40)) == 0.0
    env.close()
    env = GridEnv(horizon=40, warm_up=0.0, min_green=4.0)
    env.reset(seed=1)
    assert sum(env.step(np.ones(9))[4]["cost"] for _ in range(40)) > 0.0
    env.close()


def test_envs_traffic_bottleneck_slow_human_eleven_seconds_costs_one():
    env = BottleneckEnv(inflow=0.0, warm_up=0.0, horizon=20)
    env.reset(seed=0)
    v = env.sim.api.vehicle
    v.add("h", "r", typeID="human", departSpeed="1", departLane="0")
    v.setSpeedMode("h", 0)  # speed changes instantly (no acceleration limits)
    v.setSpeed("h", 1.0)  # < 5 m/s: "low"
    costs = []
    for k in range(16):
        costs.append(env.step(np.zeros(16))[4]["cost"])
        if k + 1 == 11:  # 11 s slow, then fast
            v.setSpeed("h", 20.0)
    env.close()
    assert costs[:10] == [0.0] * 10
    assert sum(costs) == pytest.approx(1.0)


def test_envs_traffic_bottleneck_reward_counts_vehicles_leaving():
    env = BottleneckEnv(inflow=0.0, warm_up=0.0, horizon=200)
    env.reset(seed=0)
    for k in range(3):
        env.sim.api.vehicle.add(f"v{k}", "r", typeID="human", departSpeed="max", departLane=str(k))
    rewards = [env.step(np.ones(16))[1] for _ in range(120)]
    env.close()
    assert sum(rewards[:40]) == 0.0  # 1 km at <= 23 m/s takes more than 43 s
    assert sum(rewards) == 3.0  # all three out


# ---------------------------------------------------------------------------------------- API
@pytest.mark.parametrize(
    "env_id,obs_dim,act_dim", [("bayescrl/Grid-v0", 171, 9), ("bayescrl/Bottleneck-v0", 71, 16)]
)
def test_envs_traffic_env_checker_and_dims(env_id, obs_dim, act_dim):
    from gymnasium.utils.env_checker import check_env

    env = gym.make(env_id, horizon=10, warm_up=5.0, render_mode="rgb_array")
    assert env.observation_space.shape == (obs_dim,) and env.action_space.shape == (act_dim,)
    check_env(env.unwrapped)  # includes the render check (rgb_array)
    env.reset(seed=0)
    _, _, term, trunc, info = env.step(env.action_space.sample())
    assert isinstance(info["cost"], float) and not term
    img = env.render()
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
    for _ in range(9):
        *_, trunc, _ = env.step(env.action_space.sample())
    assert trunc  # horizon 10
    assert (env.render() != img).any()  # the top view follows the simulation (vehicles, lights)
    env.close()


def test_envs_traffic_grid_2x2_has_the_thesis_action_dimension():
    env = GridEnv(network="2x2", horizon=5, warm_up=0.0)
    assert env.action_space.shape == (4,)  # the thesis' A in R^4
    env.close()


@pytest.mark.parametrize("cls", [GridEnv, BottleneckEnv])
def test_envs_traffic_seeded_determinism(cls):
    env = cls(horizon=15, warm_up=10.0)

    def rollout(seed):
        obs, _ = env.reset(seed=seed)
        rng = np.random.default_rng(0)
        out = [obs]
        for _ in range(15):
            a = rng.uniform(-1, 1, env.action_space.shape)
            obs, r, _, _, info = env.step(a)
            out.append(np.r_[obs, r, info["cost"]])
        return np.concatenate(out)

    a, b, c = rollout(3), rollout(3), rollout(4)
    env.close()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@needs_libsumo
def test_envs_traffic_libsumo_and_traci_agree():
    envs = [GridEnv(horizon=10, warm_up=5.0, backend=b) for b in ("libsumo", "traci")]
    try:
        obs = [e.reset(seed=2)[0] for e in envs]
        assert [e.sim.backend for e in envs] == ["libsumo", "traci"]
        for _ in range(10):
            steps = [e.step(np.ones(9)) for e in envs]
            obs = [s[0] for s in steps]
            np.testing.assert_array_equal(obs[0], obs[1])
            assert steps[0][1:2] == steps[1][1:2] and steps[0][4]["cost"] == steps[1][4]["cost"]
    finally:
        for e in envs:
            e.close()


# ---------------------------------------------------------------------------------------- processes
def test_envs_traffic_no_leaked_sumo_processes():
    assert no_sumo_children()
    # a traci simulation is a child process; close() ends it
    env = GridEnv(horizon=5, warm_up=0.0, backend="traci")
    env.reset(seed=0)
    assert len(sumo_children()) == 1
    env.close()
    assert no_sumo_children()
    # an exception inside `with` closes it too
    with pytest.raises(RuntimeError), GridEnv(horizon=5, warm_up=0.0, backend="traci") as env:
        env.reset(seed=0)
        raise RuntimeError("boom")
    assert no_sumo_children()
    # a failing simulation call closes the simulation before the error propagates
    env = GridEnv(horizon=5, warm_up=0.0, backend="traci")
    env.reset(seed=0)
    env.sim.api.trafficlight.setRedYellowGreenState = None  # sabotage: the next switch raises
    with pytest.raises(TypeError):
        for _ in range(5):
            env.step(np.ones(9))
    assert not env.sim.running and no_sumo_children()
    # vector envs: every copy of the sync one runs on traci (one backend); both tear down cleanly
    venv = gym.vector.SyncVectorEnv([lambda: GridEnv(horizon=5, warm_up=0.0)] * 3)
    venv.reset(seed=0)
    assert len(sumo_children()) == 3
    venv.close()
    assert no_sumo_children()
    venv = gym.vector.AsyncVectorEnv([lambda: BottleneckEnv(horizon=5, warm_up=0.0)] * 2)
    venv.reset(seed=0)
    venv.step(np.zeros((2, 16)))
    venv.close()
    assert no_sumo_children()


class _FailingStep(GridEnv):
    """A Grid env whose step raises outside the simulation (the env itself stays open)."""

    def step(self, action):
        raise RuntimeError("boom")


def test_envs_traffic_no_leak_after_gc_or_a_failing_async_worker():
    # an env dropped without close(): garbage collection ends its simulation
    env = GridEnv(horizon=5, warm_up=0.0, backend="traci")
    env.reset(seed=0)
    assert len(sumo_children()) == 1
    del env
    gc.collect()
    assert no_sumo_children()
    # an async vector env whose worker raises: tearing it down ends every worker's simulation
    venv = gym.vector.AsyncVectorEnv([lambda: _FailingStep(horizon=5, warm_up=0.0, backend="traci")] * 2)
    venv.reset(seed=0)
    assert len(sumo_children()) == 2  # one sumo per worker (traci)
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="boom"):
        venv.step(np.zeros((2, 9)))
    venv.close()
    assert no_sumo_children()


def test_envs_traffic_killed_python_leaves_no_sumo():
    # SIGKILL skips every finaliser; the sumo child still ends (its TraCI connection closes)
    code = (
        "import os, signal, psutil\n"
        "from bayescrl.envs.traffic.grid import GridEnv\n"
        "e = GridEnv(horizon=5, warm_up=0.0, backend='traci'); e.reset(seed=0)\n"
        "print([p.pid for p in psutil.Process().children() if 'sumo' in p.name()][0], flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == -9, out.stderr
    pid = int(out.stdout.split()[-1])
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    else:
        psutil.Process(pid).kill()
        pytest.fail(f"sumo {pid} outlived its killed Python process")


@needs_libsumo
def test_envs_traffic_libsumo_slot_is_released():
    a = SumoSim()  # open: a second simulation of the process runs on traci
    b = GridEnv(horizon=5, warm_up=0.0)
    b.reset(seed=0)
    assert b.sim.backend == "traci"
    b.close()
    a.close()
    c = GridEnv(horizon=5, warm_up=0.0)  # alone now: libsumo
    c.reset(seed=0)
    assert c.sim.backend == "libsumo"
    c.close()
    d = GridEnv(horizon=5, warm_up=0.0)
    d.reset(seed=0)
    assert d.sim.backend == "libsumo"  # the slot came back
    d.close()


# ---------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "make,field",
    [
        (lambda: GridEnv(network="/no/such/grid.net.xml"), "network"),
        (lambda: GridEnv(horizon=10, warm_up=60.0), "horizon"),
        (lambda: BottleneckEnv(horizon=10, warm_up=60.0), "horizon"),
        (lambda: GridEnv(inflow=-1.0), "inflow"),
        (lambda: BottleneckEnv(inflow=-5.0), "inflow"),
        (lambda: BottleneckEnv(av_fraction=1.5), "av_fraction"),
        (lambda: GridEnv(backend="gpu"), "backend"),
    ],
)
def test_envs_traffic_bad_input_one_line(make, field):
    with pytest.raises(ConfigError) as exc:
        make()
    assert exc.value.field == field and "\n" not in str(exc.value)


def test_envs_traffic_cli_bad_input_exit_2(tmp_path, capsys):
    from bayescrl.cli import main

    argv = ["train", "--algo", "ppo-lag", "--env", "bayescrl/Bottleneck-v0", "--set", "env_kwargs.inflow=-1",
            "--set", "total_steps=10", "--out", str(tmp_path / "run")]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "inflow" in err[0], err


def test_envs_traffic_missing_sumo_names_the_extra(monkeypatch):
    monkeypatch.delenv("SUMO_HOME", raising=False)
    monkeypatch.setitem(sys.modules, "sumo", None)  # import sumo -> ImportError
    with pytest.raises(ConfigError, match=r"bayescrl\[traffic\]"):
        GridEnv()

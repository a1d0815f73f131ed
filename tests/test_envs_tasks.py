"""MuJoCo task suite: check_env on every id, analytic rewards/costs at chosen states, seeding, bad input."""

import os
import subprocess
import sys
import types

import gymnasium as gym
import mujoco
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import bayescrl.envs  # noqa: F401  (registers the ids)
from bayescrl.envs import ENV_IDS, TRAFFIC_IDS, SafetyGymnasiumStepWrapper, cost_vector
from bayescrl.envs.ant import AntCircleEnv, quat_to_yaw
from bayescrl.envs.point import PointCircleEnv, PointGatherEnv, PointNavigationEnv, PointReachEnv
from bayescrl.envs.run import AntRunEnv, velocity_cost
from bayescrl.envs.safety_gym_adapter import make_safety_gymnasium
from bayescrl.envs.tasks import (
    CircleTask,
    GatherTask,
    NavigationTask,
    ReachTask,
    circle_cost,
    circle_reward,
    lidar,
)
from bayescrl.utils import ConfigError

SUITE_IDS = [i for i in ENV_IDS if i not in TRAFFIC_IDS]  # SUMO tasks: tests/test_envs_traffic.py
MUJOCO_IDS = [i for i in SUITE_IDS if "CMDP" not in i]
pytestmark = pytest.mark.filterwarnings("ignore:.*Box observation space.*:UserWarning")


@pytest.mark.parametrize("env_id", SUITE_IDS)
def test_check_env_and_cost_conventions(env_id):
    env = gym.make(env_id)
    check_env(env.unwrapped, skip_render_check=True)
    u = env.unwrapped
    assert len(u.cost_limits) == u.num_costs
    env.reset(seed=1)
    _, _, _, _, info = env.step(env.action_space.sample())
    if u.num_costs == 1:
        assert isinstance(info["cost"], float)
    else:
        assert info["cost"].shape == (u.num_costs,)
    assert len(info["costs"]) == u.num_costs
    np.testing.assert_allclose(cost_vector(info, u.num_costs), list(info["costs"].values()))
    if env_id in MUJOCO_IDS:
        assert env.spec.max_episode_steps == (500 if "AntGather" in env_id else 200)


def test_registered_limits_follow_the_seed():
    limits = {i: gym.make(i).unwrapped.cost_limits.tolist() for i in MUJOCO_IDS}
    assert limits["bayescrl/PointCircle-v0"] == [10.0] and limits["bayescrl/AntCircle-v0"] == [10.0]
    assert limits["bayescrl/PointReach-v0"] == [25.0] and limits["bayescrl/AntReach-v0"] == [25.0]
    assert limits["bayescrl/PointNavigation-v0"] == [10.0, 25.0]
    assert limits["bayescrl/HumanoidRun-v0"] == [20.0]


def test_analytic_functions():
    assert circle_reward(3.0, 0.0, 0.0, 2.0, radius=3.0) == pytest.approx(6.0)
    assert circle_reward(0.0, 1.0, 1.0, 0.0, radius=3.0) == pytest.approx(-1.0 / 3.0)
    assert circle_cost(-0.95, 0.9) == 1.0 and circle_cost(0.5, 0.9) == 0.0
    assert velocity_cost(3.0, 4.0) == pytest.approx(5.0)
    assert velocity_cost(-3.0, 4.0, axis="x") == pytest.approx(3.0)
    assert velocity_cost(3.0, 4.0, "indicator", threshold=4.9) == 1.0
    assert velocity_cost(3.0, 4.0, "indicator", threshold=5.1) == 0.0
    # object 2 m straight ahead of a robot facing +y lands in the first bin (heading sector 0)
    out = lidar(np.array([[0.0, 2.0]]), yaw=np.pi / 2, num_bins=8)
    assert out[0] == pytest.approx(np.exp(-2.0)) and out[1:].sum() == 0
    out = lidar(np.array([[-1.0, 0.0]]), yaw=0.0, num_bins=4, max_dist=4.0)  # behind: sector 2
    np.testing.assert_allclose(out, [0, 0, 0.75, 0])
    assert quat_to_yaw(np.array([np.cos(0.3), 0, 0, np.sin(0.3)])) == pytest.approx(0.6)


def _set_point(env, x, y, yaw=0.0, vx=0.0, vy=0.0):
    qpos = np.array([x, y, yaw])
    env.set_state(qpos, np.array([vx, vy, 0.0]))


def test_point_circle_reward_and_cost_at_chosen_states():
    env = PointCircleEnv()
    env.reset(seed=0)
    # on the circle (3, 0) moving tangentially at 2 m/s: R ~ 6 (damping slows it by ~2.5% over one step)
    _set_point(env, 3.0, 0.0, yaw=np.pi / 2, vy=2.0)
    _, r, _, _, info = env.step(np.zeros(2))
    assert r == pytest.approx(
        circle_reward(info["x_position"], info["y_position"], info["x_velocity"], info["y_velocity"], 3.0)
    )
    assert 5.5 < r < 6.0 and info["cost"] == 1.0  # |x| = 3 > x_lim = 0.9
    _set_point(env, 0.0, -3.0, yaw=0.0, vx=1.0)  # bottom of circle, counter-clockwise
    _, r, _, _, info = env.step(np.zeros(2))
    assert 2.85 < r < 3.0 and info["cost"] == 0.0  # v^T[-y, x] = 3, distance ~ d
    _set_point(env, 0.0, 0.0, vx=-1.0)
    _, r, _, _, _ = env.step(np.zeros(2))
    assert r == pytest.approx(0.0, abs=1e-9)  # at the centre the tangential term vanishes


def test_point_reach_goal_unreachable_and_hazard_cost():
    env = PointReachEnv()
    obs, _ = env.reset(seed=3)
    task = env.task
    assert np.hypot(*(task.goal - env.xy)) == pytest.approx(25.0)
    # steer greedily at the goal for a whole episode: it is never reached and total reward = distance gained
    d0, total = np.hypot(*(task.goal - env.xy)), 0.0
    for _ in range(200):
        heading_err = np.arctan2(obs[10], obs[9])  # egocentric goal direction
        obs, r, term, _, _ = env.step(np.array([1.0, np.clip(3 * heading_err, -1, 1)]))
        total += r
    d1 = np.hypot(*(task.goal - env.xy))
    assert d1 > 3.0 and not term
    assert total == pytest.approx(d0 - d1, abs=1e-9)
    # standing still on a hazard costs 1 per step
    h = task.hazards[0]
    _set_point(env, *h)
    _, r, _, _, info = env.step(np.zeros(2))
    assert info["cost"] == 1.0 and r == pytest.approx(0.0, abs=1e-12)


def test_navigation_two_costs_and_solid_pillars():
    env = PointNavigationEnv()
    env.reset(seed=0)
    task = env.task
    _set_point(env, *task.hazards[0])
    _, _, _, _, info = env.step(np.zeros(2))
    np.testing.assert_array_equal(info["cost"], [1.0, 0.0])
    # drive into a pillar: blocked by the physics and charged on the pillar channel only
    p = task.pillars[0]
    _set_point(env, p[0] - 0.6, p[1], yaw=0.0)
    task.hazards = task.hazards[:0]
    costs = []
    for _ in range(30):
        _, _, _, _, info = env.step(np.array([1.0, 0.0]))
        costs.append(info["cost"].copy())
    assert env.xy[0] < p[0] - 0.25  # stopped at the pillar's surface (radius 0.2 + robot 0.1)
    assert costs[-1].tolist() == [0.0, 1.0]
    # reaching the goal pays the bonus and draws a new goal
    g = task.goal.copy()
    _set_point(env, g[0] - 0.05, g[1], vx=1.0)
    _, r, _, _, info = env.step(np.zeros(2))
    assert info["goal_reached"] and r > 1.0 and not np.allclose(task.goal, g)


def test_gather_collects_apples_and_bombs():
    env = PointGatherEnv()
    env.reset(seed=0)
    task = env.task
    a = task.apples[0]
    n_a, n_b = len(task.apples), len(task.bombs)
    _set_point(env, a[0] + 0.5, a[1])
    _, r, _, _, info = env.step(np.zeros(2))
    assert r >= 1.0 and len(task.apples) < n_a
    b = task.bombs[0]
    _set_point(env, b[0] - 0.5, b[1])
    _, _, _, _, info = env.step(np.zeros(2))
    assert info["cost"] >= 1.0 and len(task.bombs) < n_b
    # sensors: a single apple 3 m straight ahead -> middle bin (span pi, 10 bins) reads 1 - 3/6
    g = GatherTask(num_apples=1, num_bombs=0)
    g.apples, g.bombs = np.array([[3.0, 0.0]]), np.zeros((0, 2))
    obs = g.observe(np.zeros(2), 0.0)
    assert obs[5] == pytest.approx(0.5) and obs.sum() == pytest.approx(0.5)
    assert g.observe(np.zeros(2), np.pi).sum() == 0.0  # behind the robot: outside the sensor span


def test_ant_circle_cost_and_run_cost_at_chosen_states():
    env = AntCircleEnv()
    env.reset(seed=0)
    qpos, qvel = env.data.qpos.copy(), env.data.qvel.copy()
    qpos[:2] = [5.0, 0.0]
    env.set_state(qpos, qvel * 0)
    _, _, _, _, info = env.step(np.zeros(8))
    assert info["cost"] == 1.0 and info["x_position"] == pytest.approx(5.0, abs=0.05)
    qpos[:2] = [1.0, 9.0]
    env.set_state(qpos, qvel * 0)
    _, _, _, _, info = env.step(np.zeros(8))
    assert info["cost"] == 0.0
    run = AntRunEnv()
    run.reset(seed=0)
    _, _, _, _, info = run.step(np.zeros(8))
    assert info["cost"] == pytest.approx(np.hypot(info["x_velocity"], info["y_velocity"]))
    run = AntRunEnv(cost_type="indicator", velocity_threshold=0.0)
    run.reset(seed=0)
    assert run.step(np.zeros(8))[4]["cost"] == 1.0


@pytest.mark.parametrize(
    "env_id", ["bayescrl/PointNavigation-v0", "bayescrl/PointGather-v0", "bayescrl/AntReach-v0"]
)
def test_seeding_is_deterministic(env_id):
    def rollout(seed):
        env = gym.make(env_id)
        env.action_space.seed(seed)
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for _ in range(10):
            obs, r, *_ = env.step(env.action_space.sample())
            out.append(np.append(obs, r))
        return np.concatenate(out)

    np.testing.assert_array_equal(rollout(7), rollout(7))
    assert not np.allclose(rollout(7), rollout(8))


def test_safety_gymnasium_step_wrapper():
    env = SafetyGymnasiumStepWrapper(gym.make("bayescrl/PointNavigation-v0"))
    env.reset(seed=0)
    out = env.step(env.action_space.sample())
    assert len(out) == 6 and out[2].shape == (2,)
    np.testing.assert_array_equal(out[2], out[5]["cost"])


def test_safety_gymnasium_adapter(monkeypatch):
    monkeypatch.setitem(sys.modules, "safety_gymnasium", None)  # import fails
    with pytest.raises(ConfigError, match="safety-gymnasium is not importable"):
        make_safety_gymnasium("SafetyPointGoal1-v0")

    class Fake(gym.Env):
        observation_space = gym.spaces.Box(-1, 1, (3,))
        action_space = gym.spaces.Box(-1, 1, (2,))

        def reset(self, *, seed=None, options=None):
            return np.zeros(3, np.float32), {}

        def step(self, action):
            return np.zeros(3, np.float32), 1.0, 0.5, False, False, {}

    monkeypatch.setitem(sys.modules, "safety_gymnasium", types.SimpleNamespace(make=lambda i, **k: Fake()))
    env = make_safety_gymnasium("SafetyPointGoal1-v0", cost_limit=25.0)
    env.reset(seed=0)
    obs, r, term, trunc, info = env.step(np.zeros(2))
    assert info["cost"] == 0.5 and env.num_costs == 1 and env.cost_limits.tolist() == [25.0]


def test_bad_arguments_rejected():
    with pytest.raises(ConfigError, match="x_lim"):
        CircleTask(radius=1.0, x_lim=2.0)
    with pytest.raises(ConfigError, match="num_hazards"):
        ReachTask(goal_distance=10.0, num_hazards=-1)
    with pytest.raises(ConfigError, match="num_pillars"):
        NavigationTask(half=0.5, num_pillars=50)
    with pytest.raises(ConfigError, match="cost_limits"):
        NavigationTask(cost_limits=(1.0,))
    with pytest.raises(ConfigError, match="cost_type"):
        gym.make("bayescrl/AntRun-v0", cost_type="energy")
    with pytest.raises(ConfigError, match="frame_skip"):
        PointCircleEnv(frame_skip=0)
    env = PointCircleEnv()
    env.reset(seed=0)
    with pytest.raises(ConfigError, match="action"):
        env.step(np.array([np.nan, 0.0]))
    with pytest.raises(ConfigError, match="action"):
        env.step(np.zeros(3))


def test_rgb_array_rendering():
    code = (
        "import gymnasium as gym, bayescrl.envs, numpy as np\n"
        "e = gym.make('bayescrl/PointNavigation-v0', render_mode='rgb_array', width=64, height=64)\n"
        "e.reset(seed=0); im = e.render(); assert im.shape == (64, 64, 3) and im.std() > 0; print('ok')\n"
    )
    env = dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    if res.returncode != 0 and ("GL" in res.stderr or "EGL" in res.stderr or "display" in res.stderr.lower()):
        pytest.skip(f"no OpenGL backend for offscreen rendering: {res.stderr.strip().splitlines()[-1]}")
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr
    assert mujoco.__version__  # the rendering path uses the same mujoco build


def test_vector_env_stacks_cost_vectors():
    envs = gym.make_vec("bayescrl/PointNavigation-v0", num_envs=3, vectorization_mode="sync")
    envs.reset(seed=0)
    _, _, _, _, info = envs.step(envs.action_space.sample())
    assert np.asarray(info["cost"]).shape == (3, 2)
    envs.close()


def test_point_circle_constraint_binds_for_a_circle_follower():
    # A hand-written controller that tracks the circle earns a large return but violates the limit many
    # times over, while standing still is safe: the constrained optimum differs from the unconstrained one.
    env = gym.make("bayescrl/PointCircle-v0")
    obs, _ = env.reset(seed=0)
    ret = cost = 0.0
    done = False
    while not done:
        x, y, c, s = obs[:4]
        r = np.hypot(x, y) + 1e-9
        want = np.array([-y, x]) / r + (3.0 - r) * np.array([x, y]) / r
        err = (np.arctan2(want[1], want[0]) - np.arctan2(s, c) + np.pi) % (2 * np.pi) - np.pi
        obs, rew, term, trunc, info = env.step(np.array([1.0, np.clip(3 * err, -1, 1)]))
        ret, cost, done = ret + rew, cost + info["cost"], term or trunc
    assert ret > 400 and cost > 5 * env.unwrapped.cost_limits[0]

"""Every registered env can be deep-copied and pickled (as gymnasium's Ant-v5), the copy keeps its
constructor options and replays the original from the same seed; copies of a traffic env in a vector env
share one SUMO backend and agree bit for bit with a single env."""

from __future__ import annotations

import copy
import importlib.util
import pickle

import gymnasium as gym
import numpy as np
import pytest

import bayescrl.envs  # noqa: F401  (registers the ids)
from bayescrl.envs.registration import ENV_IDS, TRAFFIC_IDS

HAS_SUMO = importlib.util.find_spec("sumo") is not None and importlib.util.find_spec("traci") is not None
TINY_TRAFFIC = {"horizon": 8, "warm_up": 2.0}


def _rollout(env: gym.Env, seed: int, steps: int = 8) -> np.ndarray:
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = [np.ravel(obs).astype(float)]
    space = env.action_space
    for _ in range(steps):
        a = (
            rng.integers(space.n)
            if isinstance(space, gym.spaces.Discrete)
            else rng.uniform(-1, 1, space.shape)
        )
        obs, r, term, trunc, info = env.step(a)
        out.append(np.r_[np.ravel(obs), r, np.ravel(info["cost"])].astype(float))
        if term or trunc:
            break
    return np.concatenate(out)


def _pickled(env: gym.Env) -> gym.Env:
    return pickle.loads(pickle.dumps(env))


@pytest.mark.parametrize("how", [copy.deepcopy, _pickled], ids=["deepcopy", "pickle"])
@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_envs_copy_every_registered_env_copies_and_replays(env_id, how):
    if env_id in TRAFFIC_IDS and not HAS_SUMO:
        pytest.skip("needs SUMO (the traffic extra)")
    env = gym.make(env_id, **(TINY_TRAFFIC if env_id in TRAFFIC_IDS else {}))
    try:
        env.reset(seed=0)
        env.step(env.action_space.sample())  # mid-episode: a running simulation must copy too
        twin = how(env)
        try:
            assert type(twin.unwrapped) is type(env.unwrapped)
            np.testing.assert_array_equal(_rollout(twin, 5), _rollout(env, 5))
        finally:
            twin.close()
    finally:
        env.close()


@pytest.mark.parametrize(
    "env_id,kwargs,attr,value",
    [
        ("bayescrl/PointCircle-v0", {"radius": 2.0, "x_lim": 0.5}, "task.radius", 2.0),
        ("bayescrl/AntGather-v0", {"cost_limit": 0.5}, "cost_limits", [0.5]),
        ("bayescrl/AntRun-v0", {"cost_type": "indicator"}, "cost_type", "indicator"),
        ("bayescrl/HumanoidRun-v0", {"cost_limit": 7.0}, "cost_limits", [7.0]),
    ],
)
def test_envs_copy_keeps_constructor_options(env_id, kwargs, attr, value):
    env = gym.make(env_id, **kwargs)
    twin = pickle.loads(pickle.dumps(env))
    got = twin.unwrapped
    for part in attr.split("."):
        got = getattr(got, part)
    np.testing.assert_array_equal(got, value)
    env.close()
    twin.close()


@pytest.mark.skipif(not HAS_SUMO, reason="needs SUMO (the traffic extra)")
def test_envs_copy_bottleneck_vector_copies_share_a_backend_and_match_a_single_env():
    # 64 steps without warm-up: libsumo's and traci's vehicle dicts come in different orders by then
    kw = {"horizon": 64, "warm_up": 0.0}
    actions = np.random.default_rng(0).uniform(-1, 1, (64, 2, 16))
    singles = []
    for i in range(2):  # each alone in the process: libsumo where installed
        env = gym.make("bayescrl/Bottleneck-v0", **kw)
        obs = [env.reset(seed=10 + i)[0]] + [env.step(a[i])[0] for a in actions]
        singles.append(np.array(obs))
        env.close()
    venv = gym.vector.SyncVectorEnv([lambda: gym.make("bayescrl/Bottleneck-v0", **kw)] * 2)
    try:
        obs = [venv.reset(seed=10)[0]] + [venv.step(a)[0] for a in actions[:-1]]
        backends = {e.unwrapped.sim.backend for e in venv.envs}
        assert backends == {"traci"}  # one backend for every copy
        obs = np.array(obs)
        for i in range(2):
            np.testing.assert_array_equal(obs[:, i], singles[i][:-1])
    finally:
        venv.close()

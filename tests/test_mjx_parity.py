"""The MJX backend (``bayescrl.envs.mjx``) against the CPU tasks: whole episodes in float64.

Each MJX copy starts from the state and layout of a CPU env after its ``reset(seed)`` and gets the same
actions for a full episode (H = 200 steps); joint positions, observations, rewards and costs must agree
to ``TOL`` at every step (measured: ~1e-14), so a changed formula in the JAX mirror (a reward sign, a cost
radius, a lidar bin, a frame of the observation) fails here. The episodes are chosen so that the costs
switch on and off (Circle leaves the safe strip, Reach drives through hazards). Skipped without jax/mjx.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from mjx_utils import run_isolated

from bayescrl.envs.mjx import mjx_available

pytestmark = pytest.mark.skipif(not mjx_available(), reason="needs jax and mujoco-mjx (the mjx extra)")

TOL = 1e-9  # float64; float32 (the default precision) follows to ~1e-5 over an episode
H = 200


def _x64() -> None:
    import jax

    jax.config.update("jax_enable_x64", True)


def circle_actions(obs: np.ndarray, t: int, rng: np.random.Generator) -> np.ndarray:
    """Full thrust with a slowly varying turn: loops of ~2 m radius that cross |x| = 0.9 both ways."""
    return np.array([1.0, 0.4 * np.sin(0.03 * t) + 0.1 * rng.normal()])


def reach_actions(obs: np.ndarray, t: int, rng: np.random.Generator) -> np.ndarray:
    """Steer at the goal (egocentric unit vector at obs[9:11]) through the hazard band in front of it;
    out-of-range actions exercise the control clipping."""
    return np.array([1.2, 3.0 * obs[10] + 0.2 * rng.normal()])


def replay(env_id: str, policy, seeds: list[int]) -> dict[str, float]:
    from bayescrl.envs.mjx import MJXVectorEnv

    mj = MJXVectorEnv(env_id, len(seeds), device="cpu")
    cpus = [gym.make(env_id) for _ in seeds]
    first = [c.reset(seed=s)[0] for c, s in zip(cpus, seeds, strict=True)]
    us = [c.unwrapped for c in cpus]
    states = [mj.task.state_of(u.task) for u in us]
    layout = {k: np.stack([st[k] for st in states]) for k in states[0]}
    obs0 = mj.set_state(np.stack([u.data.qpos for u in us]), np.stack([u.data.qvel for u in us]), layout)
    err = {
        "obs": float(np.abs(obs0.numpy() - np.stack(first)).max()),
        "qpos": 0.0,
        "reward": 0.0,
        "cost": 0.0,
    }
    rngs = [np.random.default_rng(s) for s in seeds]
    obs, costs = first, np.zeros((H, len(seeds)))
    for t in range(H):
        acts = np.stack([policy(o, t, r) for o, r in zip(obs, rngs, strict=True)])
        out = mj.step(torch.from_numpy(acts))
        steps = [c.step(a) for c, a in zip(cpus, acts, strict=True)]
        obs = [s[0] for s in steps]
        err["obs"] = max(err["obs"], float(np.abs(out.final_obs.numpy() - np.stack(obs)).max()))
        rew = np.array([s[1] for s in steps])
        err["reward"] = max(err["reward"], float(np.abs(out.reward.numpy() - rew).max()))
        costs[t] = [s[4]["cost"] for s in steps]
        err["cost"] = max(err["cost"], float(np.abs(out.cost.numpy()[:, 0] - costs[t]).max()))
        if t < H - 1:  # after the last step the copies have been reset (auto-reset at the horizon)
            qpos = np.stack([u.data.qpos for u in us])
            err["qpos"] = max(err["qpos"], float(np.abs(mj.qpos.numpy() - qpos).max()))
        assert out.truncated.tolist() == [s[3] for s in steps] == [t == H - 1] * len(seeds)
        assert not out.terminated.any()
    assert not np.array_equal(out.obs.numpy(), out.final_obs.numpy())  # the reset's first observation
    err["cost_steps"] = costs.sum(0).tolist()
    return err


def circle_errors() -> dict:
    from bayescrl.envs.mjx import MJXVectorEnv

    _x64()
    assert MJXVectorEnv("bayescrl/PointCircle-v0", 1, device="cpu").dtype == np.float64
    return replay("bayescrl/PointCircle-v0", circle_actions, [0, 1])


def reach_errors() -> dict:
    _x64()
    reach_layouts()  # in the same child: one interpreter start less
    return replay("bayescrl/PointReach-v0", reach_actions, [0, 3])


def reach_layouts() -> str:
    """MJX's own resets: heading in [-pi, pi), goal at goal_distance, hazards placed by _place's rules
    (in the band ahead, clear of the start and of each other), different layouts per copy."""
    import jax

    from bayescrl.envs.mjx import MJXVectorEnv

    _x64()
    mj = MJXVectorEnv("bayescrl/PointReach-v0", 64, seed=5, device="cpu")
    mj.reset()
    d, ts, _, _ = mj._state
    qpos, goal, haz = (np.asarray(jax.device_get(x)) for x in (d.qpos, ts["goal"], ts["hazards"]))
    assert np.all(np.abs(qpos[:, 2]) <= np.pi) and qpos[:, 2].std() > 1.0
    assert np.allclose(np.hypot(*(goal - qpos[:, :2]).T), 25.0)
    rel = haz - qpos[:, None, :2]
    assert np.all(np.hypot(rel[..., 0], rel[..., 1]) > 0.5 + 0.5)
    u = (goal - qpos[:, :2]) / 25.0
    along = (rel * u[:, None]).sum(-1)
    across = rel[..., 0] * -u[:, None, 1] + rel[..., 1] * u[:, None, 0]
    assert np.all((along >= 1.5) & (along <= 12.0)) and np.all(np.abs(across) <= 3.0)
    gaps = np.hypot(*(haz[:, :, None] - haz[:, None, :]).transpose(3, 0, 1, 2))
    gaps[:, np.arange(8), np.arange(8)] = np.inf
    assert gaps.min() > 1.0
    assert len(np.unique(goal.round(6), axis=0)) == 64
    return "ok"


# each check runs in a child process (tests/mjx_utils.py says why); the first step of each env kind
# compiles there (XLA on CPU: 10-30 s)
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_point_circle_episode_matches_cpu():
    err = run_isolated("test_mjx_parity", "circle_errors")
    assert all(0 < c < H for c in err.pop("cost_steps")), "the episodes must enter and leave the strip"
    assert max(err.values()) < TOL, err


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_point_reach_episode_matches_cpu_and_layouts_follow_its_rules():
    err = run_isolated("test_mjx_parity", "reach_errors")  # reach_layouts' checks first
    assert sum(err.pop("cost_steps")) > 0, "the episodes must cross a hazard"
    assert max(err.values()) < TOL, err

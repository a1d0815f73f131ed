"""Gymnasium ids of the task suite (registered on ``import bayescrl.envs``).

Episode lengths: 200 steps (the thesis' "Max horizon", Table `table:hyperparams`, chapter `ecop`), except
Ant-Gather (500, CPO's rollout length for the task used by chapter `acpo`). Cost limits live on each env as
``env.unwrapped.cost_limits``.
"""

from __future__ import annotations

import gymnasium as gym

from bayescrl.envs.tabular_cmdp import TabularCMDPEnv, make_ergodic_cmdp, make_small_cmdp

# id -> (entry point, max_episode_steps)
ENV_IDS: dict[str, tuple[str, int | None]] = {
    "bayescrl/PointCircle-v0": ("bayescrl.envs.point:PointCircleEnv", 200),
    "bayescrl/PointReach-v0": ("bayescrl.envs.point:PointReachEnv", 200),
    "bayescrl/PointNavigation-v0": ("bayescrl.envs.point:PointNavigationEnv", 200),
    "bayescrl/PointGather-v0": ("bayescrl.envs.point:PointGatherEnv", 200),
    "bayescrl/AntCircle-v0": ("bayescrl.envs.ant:AntCircleEnv", 200),
    "bayescrl/AntReach-v0": ("bayescrl.envs.ant:AntReachEnv", 200),
    "bayescrl/AntGather-v0": ("bayescrl.envs.ant:AntGatherEnv", 500),
    "bayescrl/AntRun-v0": ("bayescrl.envs.run:AntRunEnv", 200),
    "bayescrl/HumanoidRun-v0": ("bayescrl.envs.run:HumanoidRunEnv", 200),
    # traffic on SUMO (the `traffic` extra; horizon, warm-up and truncation handled by the env itself)
    "bayescrl/Grid-v0": ("bayescrl.envs.traffic.grid:GridEnv", None),
    "bayescrl/Bottleneck-v0": ("bayescrl.envs.traffic.bottleneck:BottleneckEnv", None),
    # tabular CMDPs (episode length set by the CMDP: H for the finite criterion, else 1000)
    "bayescrl/SmallCMDP-v0": ("bayescrl.envs.registration:small_cmdp_env", None),
    "bayescrl/ErgodicCMDP-v0": ("bayescrl.envs.registration:ergodic_cmdp_env", None),
}

#: declared variants: id -> (entry point, max_episode_steps, constructor keywords). The Ant tasks with
#: MuJoCo's elliptic friction cone, the contact model the MJX backend reproduces (docs/envs.md)
VARIANT_IDS: dict[str, tuple[str, int, dict]] = {
    "bayescrl/AntCircleElliptic-v0": ("bayescrl.envs.ant:AntCircleEnv", 200, {"cone": "elliptic"}),
    "bayescrl/AntReachElliptic-v0": ("bayescrl.envs.ant:AntReachEnv", 200, {"cone": "elliptic"}),
}

#: the SUMO tasks (the `traffic` extra); tested in tests/test_envs_traffic.py
TRAFFIC_IDS: tuple[str, ...] = ("bayescrl/Grid-v0", "bayescrl/Bottleneck-v0")


def small_cmdp_env(
    render_mode: str | None = None,
    max_episode_steps: int | None = None,
    observe_time: bool = False,
    **kwargs,
) -> TabularCMDPEnv:
    """``make_small_cmdp(**kwargs)`` as an env (kwargs: criterion, horizon, gamma, limit, bonus)."""
    cmdp = make_small_cmdp(**kwargs)
    return TabularCMDPEnv(cmdp, max_episode_steps, render_mode=render_mode, observe_time=observe_time)


def ergodic_cmdp_env(
    render_mode: str | None = None,
    max_episode_steps: int | None = None,
    observe_time: bool = False,
    **kwargs,
) -> TabularCMDPEnv:
    """``make_ergodic_cmdp(**kwargs)`` as an env (kwargs: num_states, num_actions, num_costs, seed, ...)."""
    cmdp = make_ergodic_cmdp(**kwargs)
    return TabularCMDPEnv(cmdp, max_episode_steps, render_mode=render_mode, observe_time=observe_time)


def register_envs() -> list[str]:
    """Register every id and declared variant (idempotent); returns the ids."""
    for env_id, (entry, steps) in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry, max_episode_steps=steps)
    for env_id, (entry, steps, kwargs) in VARIANT_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry, max_episode_steps=steps, kwargs=dict(kwargs))
    return list(ENV_IDS) + list(VARIANT_IDS)

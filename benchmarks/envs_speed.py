"""Raw stepping speed (env steps per second, random actions, one process) of every registered task.

Usage: ``python benchmarks/envs_speed.py [--steps N] [--out benchmarks/results/envs/speed.json]``.
Each env is built with ``gymnasium.make`` (so the TimeLimit/order-enforcing wrappers are included), actions
are pre-sampled so that sampling is not timed, and episodes are reset when they end. gymnasium's own
``Ant-v5`` and ``Humanoid-v5`` are timed in the same run as references: compare ratios, not absolute
numbers, between machines (the load average at the start is recorded).
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import gymnasium as gym
import numpy as np

import bayescrl.envs
from bayescrl.utils import write_json


def steps_per_second(env_id: str, steps: int, seed: int = 0) -> float:
    env = gym.make(env_id)
    env.action_space.seed(seed)
    actions = [env.action_space.sample() for _ in range(steps)]
    env.reset(seed=seed)
    start = time.perf_counter()
    for a in actions:
        _, _, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            env.reset()
    elapsed = time.perf_counter() - start
    env.close()
    return steps / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--out", default="benchmarks/results/envs/speed.json")
    args = parser.parse_args()
    ids = list(bayescrl.envs.ENV_IDS) + ["Ant-v5", "Humanoid-v5"]
    load = os.getloadavg()[0]
    results = {}
    for env_id in ids:
        sps = steps_per_second(env_id, args.steps)
        results[env_id] = round(sps, 1)
        print(f"{env_id:32s} {sps:10.0f} steps/s", flush=True)
    out = {
        "steps_per_s": results,
        "ratio_to_gymnasium": {
            "bayescrl/AntCircle-v0": results["bayescrl/AntCircle-v0"] / results["Ant-v5"],
            "bayescrl/AntRun-v0": results["bayescrl/AntRun-v0"] / results["Ant-v5"],
            "bayescrl/HumanoidRun-v0": results["bayescrl/HumanoidRun-v0"] / results["Humanoid-v5"],
        },
        "steps_per_env": args.steps,
        "load_average_1min_at_start": load,
        "cpu_count": os.cpu_count(),
        "machine": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "gymnasium": gym.__version__,
    }
    write_json(args.out, out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

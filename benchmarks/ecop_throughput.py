"""Throughput: env steps/s of our ``ppo-lag`` and ``ecop`` vs Stable-Baselines3 PPO on Ant-v5, one run.

Same network sizes (64, 64 tanh actor and critic), rollout length (2048 steps, one env), epochs (10),
minibatch size (64), one torch thread each, no KL early stop (SB3's default). Our agents also carry a cost
critic (cost ``|x_velocity|``, the Run task's cost) and observation normalisation -- extra work SB3 does
not do. Runs alternate (SB3, ppo-lag, ecop, SB3, ...) so machine load affects all alike; the result is
the ratio of medians. Each round also times raw Ant-v5 stepping (random actions, the same gymnasium env)
and splits every training run's wall time into rollout collection (env steps + policy inference + buffers)
and the update (SB3: ``collect_rollouts`` / ``train``), so the output says where the time goes:
``profile`` (seconds per run, median over rounds) and each run's overhead over raw stepping. Every time
is also taken in CPU seconds of the process (``*_cpu``, ``cpu_ratio_*``): on a shared machine the wall
clock also counts other jobs' time slices, the CPU time only this run's work. Writes
``benchmarks/results/ecop/throughput.json`` and ``.png``; ``--out`` another folder.

``--compile`` adds ``ppo-lag-compiled`` and ``ecop-compiled`` (``compile_update=True``: the minibatch
step compiled by ``torch.compile``) to every round. Compilation is a one-off cost per process: it is
paid in a warm-up run of one iteration per algorithm before the rounds and reported separately
(``compile_warmup_s``: that first update's wall and CPU seconds, compilation included;
``compile_payback_steps``: env steps after which the compiled run has caught up: that update's CPU time
beyond a compiled update's, over the CPU saved per env step in the rounds).

    .venv/bin/python benchmarks/ecop_throughput.py --steps 4096 --rounds 2
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from bayescrl.utils.io import write_json
from bayescrl.utils.plotting import plt

OUT = Path(__file__).parent / "results" / "ecop"


def _timed(obj, name: str, acc: dict, key: str) -> None:
    """Accumulate the wall time of ``obj.name(...)`` calls into ``acc[key]`` and their CPU time (this
    process) into ``acc[key + "_cpu"]`` (instance attribute)."""
    fn = getattr(obj, name)
    acc.setdefault(key + "_cpu", 0.0)

    def wrapper(*a, **k):
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return fn(*a, **k)
        finally:
            acc[key] += time.perf_counter() - t0
            acc[key + "_cpu"] += time.process_time() - c0

    setattr(obj, name, wrapper)


def run_raw(steps: int, seed: int) -> float:
    """Seconds for ``steps`` raw Ant-v5 steps with random actions (resets included)."""
    import gymnasium as gym

    env = gym.make("Ant-v5")
    env.reset(seed=seed)
    env.action_space.seed(seed)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        _obs, _r, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    dt = time.perf_counter() - t0
    RAW_CPU.append(time.process_time() - c0)
    env.close()
    return dt


PROFILE: dict[str, dict[str, list[float]]] = {}
RAW_CPU: list[float] = []


def _record(name: str, total: float, parts: dict) -> None:
    total_cpu = parts.pop("_total_cpu")
    rec = PROFILE.setdefault(name, {"total_s": [], "total_cpu_s": [], **{k: [] for k in parts}})
    rec["total_s"].append(total)
    rec["total_cpu_s"].append(total_cpu)
    for k, v in parts.items():
        rec[k].append(v)


def run_sb3(steps: int, seed: int) -> float:
    import gymnasium as gym
    from stable_baselines3 import PPO

    env = gym.make("Ant-v5")
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=2048,
        batch_size=64,
        n_epochs=10,
        seed=seed,
        device="cpu",
        policy_kwargs={"net_arch": {"pi": [64, 64], "vf": [64, 64]}},
        verbose=0,
    )
    parts = {"collect_s": 0.0, "update_s": 0.0}
    _timed(model, "collect_rollouts", parts, "collect_s")
    _timed(model, "train", parts, "update_s")
    t0, c0 = time.perf_counter(), time.process_time()
    model.learn(steps)
    dt = time.perf_counter() - t0
    parts["_total_cpu"] = time.process_time() - c0
    env.close()
    _record("sb3-ppo", dt, parts)
    return steps / dt


def _our_agent(algo: str, seed: int, compile_update: bool = False):
    from bayescrl.constrained.registry import get_algorithm

    cfg = dict(
        n_envs=1,
        rollout_steps=2048,
        minibatch_size=64,
        update_epochs=10,
        actor_hidden=(64, 64),
        critic_hidden=(64, 64),
        target_kl=None,
        eval_episodes=1,
        compile_update=compile_update,
    )
    if algo == "ecop":
        cfg["horizon"] = 1000
    return get_algorithm(algo)(
        "Ant-v5", [50.0], seed=seed, config=cfg, cost_fn=lambda o, a, o2, info: abs(info["x_velocity"])
    )


def warm_up_compile(algo: str) -> dict:
    """One iteration with ``compile_update``: the first update's seconds, compilation included."""
    agent = _our_agent(algo, 1000, compile_update=True)
    parts = {"update_s": 0.0}
    _timed(agent, "update", parts, "update_s")
    agent.learn(2048, progress=False)
    agent.close()
    return {"wall_s": parts["update_s"], "cpu_s": parts["update_s_cpu"]}


def run_ours(algo: str, steps: int, seed: int) -> float:
    name = algo
    compiled = algo.endswith("-compiled")
    algo = algo.removesuffix("-compiled")
    agent = _our_agent(algo, seed, compile_update=compiled)
    parts = {"collect_s": 0.0, "update_s": 0.0}
    _timed(agent.collector, "collect", parts, "collect_s")
    _timed(agent, "update", parts, "update_s")
    t0, c0 = time.perf_counter(), time.process_time()
    agent.learn(steps, progress=False)
    dt = time.perf_counter() - t0
    parts["_total_cpu"] = time.process_time() - c0
    agent.close()
    _record(name, dt, parts)
    return steps / dt


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4096)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--compile", action="store_true", help="also ppo-lag and ecop with compile_update")
    args = p.parse_args()
    import os

    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    ours = ["ppo-lag", "ecop"] + (["ppo-lag-compiled", "ecop-compiled"] if args.compile else [])
    res: dict[str, list[float]] = {"sb3-ppo": [], **{k: [] for k in ours}}
    warmup = {a: warm_up_compile(a) for a in ("ppo-lag", "ecop")} if args.compile else {}
    raw: list[float] = []
    for r in range(args.rounds):
        raw.append(run_raw(args.steps, r))
        res["sb3-ppo"].append(run_sb3(args.steps, r))
        for algo in ours:
            res[algo].append(run_ours(algo, args.steps, r))
        print({k: round(v[-1], 1) for k, v in res.items()}, flush=True)
    med = {k: float(np.median(v)) for k, v in res.items()}
    raw_s = float(np.median(raw))
    raw_cpu = float(np.median(RAW_CPU))
    cpu = {k: float(np.median(v["total_cpu_s"])) for k, v in PROFILE.items()}
    profile = {
        name: {
            **{k: float(np.median(v)) for k, v in parts.items()},
            "overhead_over_raw_stepping": float(np.median(parts["total_s"])) / raw_s - 1.0,
            "cpu_overhead_over_raw_stepping": float(np.median(parts["total_cpu_s"])) / raw_cpu - 1.0,
        }
        for name, parts in PROFILE.items()
    }
    out = {
        "task": "Ant-v5 (cost |x_velocity| for ours)",
        "steps_per_run": args.steps,
        "rounds": args.rounds,
        "settings": "n_steps 2048, 1 env, 10 epochs, minibatch 64, (64,64) tanh, 1 torch thread, no KL stop",
        "steps_per_s": res,
        "median_steps_per_s": med,
        "ratio_ppo_lag_vs_sb3": med["ppo-lag"] / med["sb3-ppo"],
        "ratio_ecop_vs_sb3": med["ecop"] / med["sb3-ppo"],
        "raw_ant_steps_per_s": args.steps / raw_s,
        # the same ratios in CPU time of the process (less sensitive to other jobs on a shared machine)
        "cpu_ratio_ppo_lag_vs_sb3": cpu["sb3-ppo"] / cpu["ppo-lag"],
        "cpu_ratio_ecop_vs_sb3": cpu["sb3-ppo"] / cpu["ecop"],
        **{f"ratio_{a.replace('-', '_')}_vs_sb3": med[a] / med["sb3-ppo"] for a in ours[2:]},
        **{f"cpu_ratio_{a.replace('-', '_')}_vs_sb3": cpu["sb3-ppo"] / cpu[a] for a in ours[2:]},
        "raw_ant_cpu_s": raw_cpu,
        "profile": profile,
        "compile_warmup_s": warmup,
        # env steps after which the one-off compilation is paid back by the CPU saved per step
        "compile_payback_steps": {
            a: (w["cpu_s"] - profile[f"{a}-compiled"]["update_s_cpu"] * 2048 / args.steps)
            / max((cpu[a] - cpu[f"{a}-compiled"]) / args.steps, 1e-12)
            for a, w in warmup.items()
        },
        "profile_note": "seconds per run of steps_per_run env steps (median over rounds): total, rollout "
        "collection (env steps, policy inference, buffers, value estimates) and updates; overhead = total / "
        "raw stepping time - 1; *_cpu: the same in CPU seconds of the process (time.process_time)",
        "machine": "shared 2-core machine, other engineers' jobs running",
        "load_average_1min_at_start": load,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "throughput.json", out)
    pl = plt()
    fig, ax = pl.subplots(figsize=(5, 3.2))
    ax.bar(list(med), list(med.values()), color=["grey", "C0", "C1", "C2", "C3"][: len(med)])
    ax.tick_params(axis="x", labelsize=7)
    ax.set_ylabel("env steps / s (median)")
    ax.set_title("Ant-v5 training throughput, 1 thread")
    fig.tight_layout()
    fig.savefig(args.out / "throughput.png", dpi=90)
    print(out)


if __name__ == "__main__":
    main()

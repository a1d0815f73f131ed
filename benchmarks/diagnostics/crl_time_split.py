"""Where a PPO-family iteration's CPU time goes on Ant-v5 (the throughput benchmark's matched settings),
with the eager and the compiled (``compile_update``) minibatch step.

Splits the CPU seconds (``time.process_time``) of 3 iterations of 2,048 steps, after a warm-up iteration
(which compiles), into env stepping (``SyncVectorEnv.step``: MuJoCo, gymnasium's wrappers and info merging,
the cost wrapper), policy inference (the numpy actor's ``act``), the rest of collection (normalisation,
buffers, checks, the batched value pass), advantages and the update; and counts the top-level aten ops
of one update (``torch.profiler``). Writes ``benchmarks/results/ecop/time_split.json``.

    .venv/bin/python benchmarks/diagnostics/crl_time_split.py --algo ppo-lag
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

from bayescrl.utils.io import write_json

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ecop_throughput.py
from ecop_throughput import _our_agent  # noqa: E402 - the throughput benchmark's matched agent

OUT = Path(__file__).resolve().parents[1] / "results" / "ecop" / "time_split.json"


def _timed(obj, name: str, acc: dict, key: str) -> None:
    fn = getattr(obj, name)

    def wrapper(*a, **k):
        c0 = time.process_time()
        try:
            return fn(*a, **k)
        finally:
            acc[key] += time.process_time() - c0

    setattr(obj, name, wrapper)


def split(algo: str, compiled: bool, iterations: int = 3) -> dict:
    agent = _our_agent(algo, seed=0, compile_update=compiled)
    acc = dict.fromkeys(("env_step", "policy_inference", "collect", "advantages", "update"), 0.0)
    _timed(agent.envs, "step", acc, "env_step")
    _timed(agent.collector, "collect", acc, "collect")
    _timed(agent, "compute_advantages", acc, "advantages")
    _timed(agent, "update", acc, "update")
    numpy_actor = agent.policy.numpy_actor

    def timed_actor():
        actor = numpy_actor()
        _timed(actor, "act", acc, "policy_inference")
        return actor

    agent.policy.numpy_actor = timed_actor
    agent.learn(2048, progress=False)  # warm-up: compiles the step where compiled
    for k in acc:
        acc[k] = 0.0
    agent.learn(2048 * (1 + iterations), progress=False)
    out = {k: v * 2 / iterations for k, v in acc.items()}  # CPU seconds per 4,096 env steps
    out["collect_other"] = out["collect"] - out["env_step"] - out["policy_inference"]
    roll = agent.collector.collect(agent.policy, agent.critic_value, 2048, agent.rng)
    batch = agent.compute_advantages(roll)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        agent.update(batch)
    top = [
        e
        for e in prof.events()
        if e.name.startswith("aten::")
        and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))
    ]
    cfg = agent.config
    out["aten_ops_per_minibatch_step"] = len(top) / (cfg.update_epochs * 2048 // cfg.minibatch_size)
    total = out["collect"] + out["advantages"] + out["update"]
    out["fractions"] = {
        k: out[k] / total for k in ("env_step", "policy_inference", "collect_other", "advantages", "update")
    }
    agent.close()
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--algo", default="ppo-lag")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args()
    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    res = {
        "algo": args.algo,
        "note": "CPU seconds per 4,096 Ant-v5 env steps (3 iterations after a warm-up), matched settings of "
        "benchmarks/ecop_throughput.py; aten ops: top-level ops of one update / 320 minibatch steps",
        "eager": split(args.algo, False),
        "compiled": split(args.algo, True),
        "load_average_1min_at_start": load,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, res)
    print(res)


if __name__ == "__main__":
    main()

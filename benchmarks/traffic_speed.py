"""Speed of the SUMO traffic tasks: env steps/s and simulated seconds per wall-clock second, one core,
against sumo-rl's own ``SumoEnvironment`` on the same 3x3 grid with the same demand, in one run.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/traffic_speed.py --seconds 600 --rounds 3

Every measurement runs in a fresh process (libsumo allows one simulation per process; sumo-rl reads
``LIBSUMO_AS_TRACI`` at import). Random actions; reset time excluded. Parts:

* ``grid`` / ``grid5`` -- ``bayescrl/Grid-v0`` (libsumo) with 1 s and 5 s per env step;
* ``grid_traci`` -- the same through traci (the fallback of a second env in one process);
* ``sumo_rl`` / ``sumo_rl_libsumo`` -- sumo-rl's multi-agent env (``delta_time`` 5 s, its default), traci
  (its default) and libsumo; same network, route file and SUMO step (1 s);
* ``bottleneck`` -- ``bayescrl/Bottleneck-v0`` (libsumo);
* ``grid_async8`` / ``bottleneck_async8`` -- 8 envs in a gymnasium ``AsyncVectorEnv`` (8 processes).

Rates per CPU second (this process + its sumo children / workers) and per wall second; the median of
``--rounds`` round-robin measurements. Writes ``benchmarks/results/envs/traffic_speed.json``; the headline
is ``ratio_vs_sumo_rl_cpu``: our simulated seconds per CPU second over sumo-rl's at the same 5 s
decision interval.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).parent / "results" / "envs" / "traffic_speed.json"


def cpu_now() -> float:
    """CPU seconds of this process and its live children (traci's sumo, async workers): on a loaded
    machine wall time favours processes that sleep (a traci client waiting on its socket) over in-process
    work, so CPU time is the fair one-core measure."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for ch in me.children(recursive=True):
        try:
            total += sum(ch.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


def rates(steps: int, step_seconds: float, wall: float, cpu: float) -> dict:
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "steps_per_s": steps / wall,
        "sim_s_per_wall_s": steps * step_seconds / wall,
        "steps_per_cpu_s": steps / cpu,
        "sim_s_per_cpu_s": steps * step_seconds / cpu,
    }


def _ours(kind: str, sim_seconds: float, step_seconds: float, backend: str = "auto") -> dict:
    import numpy as np

    from bayescrl.envs.traffic.bottleneck import BottleneckEnv
    from bayescrl.envs.traffic.grid import GridEnv

    cls = GridEnv if kind == "grid" else BottleneckEnv
    steps = int(sim_seconds / step_seconds)
    env = cls(horizon=steps, warm_up=60.0, step_seconds=step_seconds, backend=backend)
    t0 = time.perf_counter()
    env.reset(seed=0)
    reset_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    t0, c0 = time.perf_counter(), cpu_now()
    for _ in range(steps):
        env.step(rng.uniform(-1, 1, env.action_space.shape))
    wall, cpu = time.perf_counter() - t0, cpu_now() - c0
    out = {"backend": env.sim.backend, "steps": steps, "step_seconds": step_seconds, "reset_s": reset_s}
    env.close()
    return {**out, **rates(steps, step_seconds, wall, cpu)}


def _async(kind: str, sim_seconds: float, n: int = 8) -> dict:
    import gymnasium as gym
    import numpy as np

    import bayescrl.envs  # noqa: F401

    env_id = "bayescrl/Grid-v0" if kind == "grid" else "bayescrl/Bottleneck-v0"
    steps = int(sim_seconds)
    venv = gym.vector.AsyncVectorEnv([lambda: gym.make(env_id, horizon=steps + 1, warm_up=60.0)] * n)
    venv.reset(seed=0)
    rng = np.random.default_rng(0)
    t0, c0 = time.perf_counter(), cpu_now()
    for _ in range(steps):
        venv.step(rng.uniform(-1, 1, venv.action_space.shape))
    wall, cpu = time.perf_counter() - t0, cpu_now() - c0
    venv.close()
    return {"envs": n, "steps": steps * n, "step_seconds": 1.0, **rates(steps * n, 1.0, wall, cpu)}


def _sumo_rl(sim_seconds: float, libsumo: bool) -> dict:
    if libsumo:
        os.environ["LIBSUMO_AS_TRACI"] = "1"
    import numpy as np

    from bayescrl.envs.traffic.grid import GridEnv

    probe = GridEnv()  # same network and route file (our flows) for both
    net, routes = probe.net_file, str(probe._route_file)
    probe.close()
    import sumo_rl

    delta = 5
    steps = int(sim_seconds / delta)
    env = sumo_rl.SumoEnvironment(
        net_file=net,
        route_file=routes,
        use_gui=False,
        num_seconds=int(60 + sim_seconds + 10),
        delta_time=delta,
        yellow_time=2,
        min_green=3,
        single_agent=False,
        sumo_seed=0,
        sumo_warnings=False,
    )
    t0 = time.perf_counter()
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(60 // delta):  # the same 60 s warm-up as ours (untimed)
        env.step({ts: int(rng.integers(env.action_spaces(ts).n)) for ts in env.ts_ids})
    reset_s = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), cpu_now()
    for _ in range(steps):
        env.step({ts: int(rng.integers(env.action_spaces(ts).n)) for ts in env.ts_ids})
    wall, cpu = time.perf_counter() - t0, cpu_now() - c0
    env.close()
    out = {"backend": "libsumo" if libsumo else "traci", "steps": steps, "step_seconds": delta}
    return {**out, "reset_s": reset_s, **rates(steps, delta, wall, cpu)}


PARTS = {
    "grid": lambda s: _ours("grid", s, 1.0),
    "grid5": lambda s: _ours("grid", s, 5.0),
    "grid_traci": lambda s: _ours("grid", s, 1.0, "traci"),
    "sumo_rl": lambda s: _sumo_rl(s, libsumo=False),
    "sumo_rl_libsumo": lambda s: _sumo_rl(s, libsumo=True),
    "bottleneck": lambda s: _ours("bottleneck", s, 1.0),
    "grid_async8": lambda s: _async("grid", s),
    "bottleneck_async8": lambda s: _async("bottleneck", s),
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=600.0, help="simulated seconds per measurement")
    p.add_argument("--part", choices=list(PARTS), help=argparse.SUPPRESS)
    p.add_argument("--parts", nargs="+", default=list(PARTS), choices=list(PARTS))
    p.add_argument("--rounds", type=int, default=3, help="measurements per part (median reported)")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args()
    if args.part:  # child process: one measurement, JSON on the last stdout line
        print(json.dumps(PARTS[args.part](args.seconds)))
        return
    runs: dict[str, list[dict]] = {part: [] for part in args.parts}
    load = [os.getloadavg()[0]]
    for r in range(args.rounds):  # round-robin: load changes hit every part alike
        for part in args.parts:
            cmd = [sys.executable, __file__, "--part", part, "--seconds", str(args.seconds)]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs[part].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(r, part, json.dumps(runs[part][-1]), flush=True)
    load.append(os.getloadavg()[0])
    res = {}
    for part, rs in runs.items():  # the median round of each part
        rs = sorted(rs, key=lambda x: x["sim_s_per_cpu_s"])
        res[part] = {**rs[len(rs) // 2], "sim_s_per_cpu_s_all": [x["sim_s_per_cpu_s"] for x in rs]}
    out = {
        "simulated_seconds": args.seconds,
        "rounds": args.rounds,
        "results": res,
        "machine": f"shared 2-core machine under load (1-min load average {load[0]:.1f} at the start, "
        f"{load[1]:.1f} at the end)",
        "protocol": "random actions, one process per measurement, reset excluded, median round by CPU rate",
    }
    for peer in ("sumo_rl", "sumo_rl_libsumo"):
        if "grid5" in res and peer in res:
            for unit in ("cpu", "wall"):
                key = f"sim_s_per_{unit}_s"
                out[f"ratio_vs_{peer}_{unit}"] = res["grid5"][key] / res[peer][key]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    print(json.dumps({k: v for k, v in out.items() if k.startswith("ratio")}))


if __name__ == "__main__":
    main()

"""Env-steps per second of the MJX backend (``bayescrl.envs.mjx.MJXVectorEnv``) against the CPU gymnasium
vector env the trainer uses, in one run, plus a short ppo-lag training on MJX batches.

    PYTHONPATH=. python benchmarks/mjx_throughput.py [--out results.json] [--device cuda] [--env ID]
        [--sizes 256 1024 4096 16384 65536] [--budget-s 100]

Stages (each guarded: an error is recorded in the JSON and the next stage runs; a stage that would start
after ``--budget-s`` seconds is skipped and listed under ``skipped``; the JSON is rewritten after every
stage, so a killed run still leaves what it measured):

1. ``gym``: ``SyncVectorEnv`` of n = 8 and 16 CPU envs (random actions, the trainer's wrappers).
2. ``mjx``: ``MJXVectorEnv`` at each size, random actions drawn on the device; the first step (the XLA
   compile, ``compile_s``) is not timed.
3. ``ratios``: MJX steps/s over the gym vector env's (both n).
4. ``train``: ppo-lag, ``config.env_backend: mjx`` at ``--train-envs`` copies for ``--train-iters``
   iterations (env steps per second including the update; the first iteration, which compiles, is listed
   apart), and the same on the gym backend with 16 envs for the ratio.

Defaults: on a GPU (torch and JAX see one) sizes 256..65,536 (under 2 minutes on an H100); on CPU-JAX
sizes 64 and 256 with fewer steps, so the script also runs on a laptop. ``--env`` takes any id of
``bayescrl.envs.mjx.MJX_ENV_IDS`` (default Point-Circle; e.g. ``bayescrl/AntCircleElliptic-v0``).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
import traceback

import numpy as np
import torch

from bayescrl.constrained.core.envs import make_vector_env, resolve_env_factory
from bayescrl.constrained.registry import get_algorithm
from bayescrl.utils import write_json


def gym_steps_per_s(env_id: str, n: int, steps: int) -> dict:
    envs = make_vector_env(resolve_env_factory(env_id), n, 1)
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    acts = rng.uniform(-1, 1, (steps, n, envs.single_action_space.shape[0]))
    t0 = time.perf_counter()
    for a in acts:
        envs.step(a)
    dt = time.perf_counter() - t0
    envs.close()
    return {"n_envs": n, "steps": steps, "seconds": dt, "env_steps_per_s": n * steps / dt}


def mjx_steps_per_s(env_id: str, n: int, steps: int, device: str) -> dict:
    import jax

    from bayescrl.envs.mjx import MJXVectorEnv

    env = MJXVectorEnv(env_id, n, seed=0, device=device)
    t0 = time.perf_counter()
    env.reset()
    a_dim = env.single_action_space.shape[0]
    out = env.step(torch.zeros(n, a_dim, device=device))
    jax.block_until_ready(env._state)
    compile_s = time.perf_counter() - t0
    gen = torch.Generator(device=device).manual_seed(0)
    acts = torch.rand((steps, n, a_dim), generator=gen, device=device) * 2 - 1
    t0 = time.perf_counter()
    for a in acts:
        out = env.step(a)
    jax.block_until_ready(env._state)
    dt = time.perf_counter() - t0
    assert out.obs.shape[0] == n and bool(torch.isfinite(out.obs).all())
    env.close()
    return {
        "n_envs": n,
        "steps": steps,
        "compile_s": compile_s,
        "seconds": dt,
        "env_steps_per_s": n * steps / dt,
        "obs_device": str(out.obs.device),
    }


def train_steps_per_s(env_id: str, backend: str, n: int, iters: int, device: str, rollout: int) -> dict:
    cfg = {
        "env_backend": backend,
        "n_envs": n,
        "rollout_steps": rollout,
        "minibatch_size": max(64, n * rollout // 8),
        "update_epochs": 4,
    }
    algo = get_algorithm("ppo-lag")(env_id, seed=0, config=cfg, device=device if backend == "mjx" else "cpu")
    t0 = time.perf_counter()
    algo.learn(iters * n * rollout, progress=False)
    wall = time.perf_counter() - t0
    hist = algo.history
    later = [r["steps_per_s"] for r in hist[1:]] or [hist[0]["steps_per_s"]]
    algo.close()
    return {
        "backend": backend,
        "n_envs": n,
        "rollout_steps": rollout,
        "iterations": len(hist),
        "env_steps": hist[-1]["env_steps"],
        "wall_s": wall,
        "first_iter_s": hist[0]["iter_s"],
        "env_steps_per_s_after_first": statistics.median(later),
        "rollout_s": [r["rollout_s"] for r in hist],
        "update_s": [r["update_s"] for r in hist],
        "ep_return": hist[-1]["ep_return"],
    }


def main() -> None:
    # before jax loads: JAX would otherwise take 75 % of the GPU's memory up front, leaving little to torch
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    gpu = torch.cuda.is_available()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--env", default="bayescrl/PointCircle-v0")
    parser.add_argument("--device", default="cuda" if gpu else "cpu")
    parser.add_argument("--sizes", type=int, nargs="+", default=None)
    parser.add_argument(
        "--steps", type=int, default=None, help="MJX steps per size (default 200 GPU, 25 CPU)"
    )
    parser.add_argument("--gym-envs", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--gym-steps", type=int, default=200)
    parser.add_argument("--train-envs", type=int, default=None, help="default 1024 (GPU), 64 (CPU)")
    parser.add_argument("--train-iters", type=int, default=3)
    parser.add_argument("--budget-s", type=float, default=100.0, help="no stage starts after this")
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "mjx_throughput.json"))
    args = parser.parse_args()
    on_gpu = args.device.startswith("cuda")
    sizes = args.sizes or ([256, 1024, 4096, 16384, 65536] if on_gpu else [64, 256])
    steps = args.steps or (200 if on_gpu else 25)
    train_n = args.train_envs or (1024 if on_gpu else 64)
    start = time.perf_counter()
    res: dict = {
        "env": args.env,
        "device": args.device,
        "gpu": torch.cuda.get_device_name(0) if gpu else None,
        "cpu_count": os.cpu_count(),
        "load_average_1min_at_start": os.getloadavg()[0],
        "python": platform.python_version(),
        "torch": torch.__version__,
        "gym": {},
        "mjx": {},
        "ratios": {},
        "train": {},
        "errors": {},
        "skipped": [],
    }
    try:
        import jax

        res["jax"], res["jax_devices"] = jax.__version__, [str(d) for d in jax.devices()]
    except Exception as exc:  # noqa: BLE001 - recorded, the gym stage still runs
        res["errors"]["jax"] = repr(exc)

    def stage(name: str, fn, *a):
        if time.perf_counter() - start > args.budget_s:
            res["skipped"].append(name)
            return None
        try:
            out = fn(*a)
            print(
                f"{name:24s} {out.get('env_steps_per_s', out.get('env_steps_per_s_after_first', 0)):14,.0f} "
                f"env-steps/s  ({time.perf_counter() - start:.0f} s)",
                flush=True,
            )
            return out
        except Exception as exc:  # noqa: BLE001 - every stage is guarded
            res["errors"][name] = f"{exc!r}\n{traceback.format_exc(limit=3)}"
            print(f"{name:24s} failed: {exc!r}", flush=True)
            return None
        finally:
            res["elapsed_s"] = time.perf_counter() - start
            write_json(args.out, res)

    for n in args.gym_envs:
        if (r := stage(f"gym n={n}", gym_steps_per_s, args.env, n, args.gym_steps)) is not None:
            res["gym"][str(n)] = r
    for n in sizes:
        if (r := stage(f"mjx n={n}", mjx_steps_per_s, args.env, n, steps, args.device)) is not None:
            res["mjx"][str(n)] = r
    for n, r in res["mjx"].items():
        for g, q in res["gym"].items():
            res["ratios"][f"mjx{n}/gym{g}"] = r["env_steps_per_s"] / q["env_steps_per_s"]
    t = stage("train mjx", train_steps_per_s, args.env, "mjx", train_n, args.train_iters, args.device, 250)
    if t is not None:
        res["train"]["mjx"] = t
    g = stage("train gym n=16", train_steps_per_s, args.env, "gym", 16, 2, "cpu", 250)
    if g is not None:
        res["train"]["gym"] = g
    if t is not None and g is not None:
        res["ratios"]["train_mjx/train_gym"] = (
            t["env_steps_per_s_after_first"] / g["env_steps_per_s_after_first"]
        )
    res["elapsed_s"] = time.perf_counter() - start
    write_json(args.out, res)
    print({k: round(v, 2) for k, v in res["ratios"].items()})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

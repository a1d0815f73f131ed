"""Plot what trained Point-Circle policies do: x-y paths of the deterministic policy, strip and circle drawn.

    .venv/bin/python benchmarks/diagnostics/acpo_circle_paths.py runs/probe/acpo_s6 runs/probe/atrpo_s6 \\
        --labels "ACPO (plateau)" "ATRPO" --out benchmarks/results/acpo/diag/circle_paths.png

Each run directory must hold a ``checkpoint.pt`` (``learn(out_dir=...)`` writes one).  For each run: one
200-step episode per ``--episodes`` evaluation seed (``seed + 10000 + j``, the protocol's seeds), its reward
and cost; the JSON beside the PNG holds the numbers and the paths.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def rollout_xy(algo, seed: int, steps: int = 200) -> dict:
    """One episode of the deterministic policy from ``reset(seed)``: x-y path, reward, cost."""
    import torch

    from bayescrl.constrained.core.envs import ConstraintWrapper

    env = ConstraintWrapper(algo.factory(), algo.m, algo.reward_fn, algo.cost_fn)
    obs, _ = env.reset(seed=seed)
    xy, rew, cost = [np.asarray(env.unwrapped.xy).copy()], 0.0, 0.0
    with torch.no_grad():
        for h in range(steps):
            enc = algo.encoder(np.asarray(obs)[None])
            x = algo.policy_input(algo.collector.normalize(enc), np.array([h]))
            a, _ = algo.policy.act(x, deterministic=True)
            a = np.clip(a.cpu().numpy()[0], env.action_space.low, env.action_space.high)
            obs, r, term, trunc, info = env.step(a)
            rew += float(r)
            cost += float(np.sum(info["cost"]))
            xy.append(np.asarray(env.unwrapped.xy).copy())
            if term or trunc:
                break
    env.close()
    return {
        "xy": np.array(xy).tolist(),
        "reward_per_step": rew / (len(xy) - 1),
        "cost_per_step": cost / (len(xy) - 1),
    }


def main(argv: list[str] | None = None) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bayescrl.constrained.registry import get_algorithm
    from bayescrl.utils.seeding import set_torch_threads

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="run directories with checkpoint.pt")
    ap.add_argument("--labels", nargs="*", default=None)
    ap.add_argument(
        "--algos", nargs="*", default=None, help="algorithm per run (default: from the directory name)"
    )
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/results/acpo/diag/circle_paths.png")
    args = ap.parse_args(argv)
    set_torch_threads(1)
    labels = args.labels or [Path(r).name for r in args.runs]
    fig, axes = plt.subplots(1, len(args.runs), figsize=(4.2 * len(args.runs), 4.6), squeeze=False)
    out: dict = {"runs": {}}
    for k, (run, label) in enumerate(zip(args.runs, labels, strict=True)):
        name = args.algos[k] if args.algos else ("atrpo" if "atrpo" in Path(run).name else "acpo")
        algo = get_algorithm(name).load(run)
        probe_env = algo.factory()
        task = probe_env.unwrapped.task
        probe_env.close()
        eps = [rollout_xy(algo, algo.seed + 10_000 + j) for j in range(args.episodes)]
        algo.close()
        ax = axes[0, k]
        th = np.linspace(0, 2 * np.pi, 200)
        ax.plot(
            task.radius * np.cos(th),
            task.radius * np.sin(th),
            color="0.7",
            lw=1,
            label=f"circle r = {task.radius:g}",
        )
        for s in (-1, 1):
            ax.axvline(s * task.x_lim, color="tab:red", ls="--", lw=1)
        for e in eps:
            p = np.array(e["xy"])
            ax.plot(p[:, 0], p[:, 1], lw=1)
        r = np.mean([e["reward_per_step"] for e in eps])
        c = np.mean([e["cost_per_step"] for e in eps])
        ax.set_title(f"{label}\nreward {r:.3f}/step, cost {c:.3f}/step", fontsize=9)
        ax.set_aspect("equal")
        ax.set_xlim(-task.radius - 0.5, task.radius + 0.5)
        ax.set_ylim(-task.radius - 0.5, task.radius + 0.5)
        ax.set_xlabel("x")
        lim = task.radius + 0.5
        far = [p for p in (np.array(e["xy"]) for e in eps) if np.abs(p).max() > lim]
        if far:  # straight runs along the strip leave the view: say where they end
            ends = ", ".join(f"({q[-1, 0]:.1f}, {q[-1, 1]:.1f})" for q in far)
            ax.text(
                0.02,
                0.02,
                f"{len(far)} path(s) leave the view, end at {ends}",
                transform=ax.transAxes,
                fontsize=7,
            )
        out["runs"][label] = {
            "run": run,
            "algo": name,
            "episodes": eps,
            "reward_per_step": r,
            "cost_per_step": c,
        }
    axes[0, 0].set_ylabel("y")
    fig.tight_layout()
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    path.with_suffix(".json").write_text(json.dumps(out))
    for label, v in out["runs"].items():
        print(
            f"{label}: reward {v['reward_per_step']:.3f}/step, cost {v['cost_per_step']:.3f}/step "
            f"({args.episodes} episodes)"
        )
    return out


if __name__ == "__main__":
    main()

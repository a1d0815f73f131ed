"""Training throughput with a learned reward vs the same training on the env reward (one process, one thread).

Rounds alternate the two runs (same algorithm, env, config and seed) so that machine load hits both alike;
the figure of merit is the ratio of env steps per second, learned / env reward (goal >= 0.8). The learned
run includes everything preference learning adds: features, segment buffer, query selection, simulated
raters, posterior updates and relabelling. Writes ``benchmarks/results/prefrl/throughput.json``.

    .venv/bin/python benchmarks/prefrl_throughput.py --rounds 3 --steps 32000
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from bayescrl.utils.io import write_json

OUT = Path(__file__).parent / "results" / "prefrl"
CFG = dict(n_envs=8, rollout_steps=200, minibatch_size=200, update_epochs=10, checkpoint_every=0)
SPEC = dict(
    features="env",
    segment_length=25,
    raters=[{"id": "expert", "beta": 10.0, "lam": 100.0}, {"id": "novice", "beta": 0.5, "lam": 2.0}],
    competence="infer",
    queries={"total": 400, "per_round": 20, "select": "bald"},
    reward="thompson",
)


def run(algo: str, env: str, steps: int, learned: bool, reward_model: str) -> tuple[float, float]:
    """(env steps per second, seconds spent in preference learning)."""
    from bayescrl.constrained.registry import get_algorithm
    from bayescrl.prefrl.loop import PreferenceLearner

    agent = get_algorithm(algo)(env, None, seed=0, config=CFG)
    learner = None
    if learned:
        learner = PreferenceLearner(agent, {**SPEC, "reward_model": reward_model})
    t0 = time.perf_counter()
    agent.learn(steps, progress=False)
    dt = time.perf_counter() - t0
    agent.close()
    return steps / dt, (learner.update_seconds if learner else 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--algo", default="ecop")
    ap.add_argument("--env", default="bayescrl/PointCircle-v0")
    ap.add_argument("--steps", type=int, default=32_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reward-model", default="linear", choices=["linear", "ensemble"])
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for k in range(args.rounds):
        env_sps, _ = run(args.algo, args.env, args.steps, False, args.reward_model)
        pref_sps, pref_s = run(args.algo, args.env, args.steps, True, args.reward_model)
        share = pref_s / (args.steps / pref_sps)
        rows.append(
            {
                "round": k,
                "env_reward_sps": env_sps,
                "learned_sps": pref_sps,
                "ratio": pref_sps / env_sps,
                "preference_share": share,
            }
        )
        print(
            f"round {k}: env reward {env_sps:.0f} steps/s, learned {pref_sps:.0f} steps/s, "
            f"ratio {pref_sps / env_sps:.2f}, preference learning {100 * share:.0f} % of the time",
            flush=True,
        )
    ratios = [r["ratio"] for r in rows]
    OUT.mkdir(parents=True, exist_ok=True)
    name = "throughput" if args.reward_model == "linear" else f"throughput_{args.reward_model}"
    write_json(
        OUT / f"{name}.json",
        {
            "args": vars(args),
            "spec": SPEC,
            "config": CFG,
            "rounds": rows,
            "ratio_median": float(np.median(ratios)),
            "ratio_min": float(min(ratios)),
        },
    )
    print(f"ratio learned / env reward: median {np.median(ratios):.2f}, min {min(ratios):.2f} (goal >= 0.8)")


if __name__ == "__main__":
    main()

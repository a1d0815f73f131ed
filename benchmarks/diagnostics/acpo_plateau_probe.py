"""Probe a trained ACPO/ATRPO policy on Point-Circle: estimation artefact or local optimum?

    .venv/bin/python benchmarks/diagnostics/acpo_plateau_probe.py --algo acpo --seed 6 --steps 800000 \\
        --set n_envs=20 error_correction=0.2 log_std_init=-0.5 --run-dir runs/probe/acpo_s6 \\
        --out benchmarks/results/acpo/diag/probe_acpo_s6.json

Trains (or, when ``--run-dir`` already holds a checkpoint, loads) one run with δ = 0.01 and then, with the
policy frozen, measures:

1. the training-style estimate ``Ĵ_C`` (phase-stratified mean of ``--batches`` fresh training batches)
   against the protocol's stochastic and deterministic evaluations;
2. the agreement of the cost and reward gradients between independent batches, ``cos_H(a_i, a_j) =
   a_iᵀH⁻¹a_j / √(a_iᵀH⁻¹a_i · a_jᵀH⁻¹a_j)`` (≈ 0: noise-dominated; ≈ 1: a consistent direction);
3. the realised effect of a pure cost step ``x = −√(2δ'/s) H⁻¹a`` and a pure reward step ``x = √(2δ'/q) H⁻¹g``
   for δ' ∈ {1e-2, 1e-3}: predicted ``aᵀx`` against the realised change of ``Ĵ_C`` and of the average reward
   (``--batches`` fresh batches each), and the deterministic policy's protocol reward and cost.

Also summarises the run's per-iteration training ``Ĵ_C`` and reward (first 30 iterations, second half).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/acpo_common.py

from acpo_common import TASKS, algo_config  # noqa: E402


def _batch_stats(algo, rng, n: int) -> tuple[dict, object]:
    from bayescrl.constrained.acpo import phase_stratified_rate

    jc, rew, batch = [], [], None
    for _ in range(n):
        roll = algo.collector.collect(algo.policy, algo.critic_value, algo.config.rollout_steps, rng)
        batch = algo.compute_advantages(roll)
        jc.append(float(phase_stratified_rate(batch.rewards[:, 1:], batch.h)[0]))
        rew.append(float(batch.rewards[:, 0].mean()))
    se = lambda v: float(np.std(v) / math.sqrt(len(v)))  # noqa: E731
    return {
        "jc": float(np.mean(jc)),
        "jc_se": se(jc),
        "reward": float(np.mean(rew)),
        "reward_se": se(rew),
    }, batch


def main(argv: list[str] | None = None) -> dict:
    import torch
    from torch.nn.utils import parameters_to_vector, vector_to_parameters

    from bayescrl.constrained.acpo import trust_region_terms
    from bayescrl.constrained.acpo_eval import average_reward_evaluation
    from bayescrl.constrained.registry import get_algorithm
    from bayescrl.utils.seeding import set_torch_threads

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--algo", default="acpo", choices=["acpo", "atrpo"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=800_000)
    ap.add_argument("--delta", type=float, default=1e-2)
    ap.add_argument("--set", nargs="*", default=[], help="extra config key=value (json values)")
    ap.add_argument("--run-dir", required=True, help="checkpoint directory (trained here when empty)")
    ap.add_argument("--batches", type=int, default=6, help="fresh training batches per measurement")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    set_torch_threads(1)
    task = TASKS["PointCircle"]
    cls = get_algorithm(args.algo)
    run_dir = Path(args.run_dir)
    if (run_dir / "checkpoint.pt").exists():
        algo = cls.load(run_dir)
    else:
        cfg = algo_config(args.algo, args.delta)
        for kv in args.set:
            k, v = kv.split("=", 1)
            try:
                cfg[k] = json.loads(v)
            except json.JSONDecodeError:
                cfg[k] = v
        algo = cls(task["env"], [task["limit"]], args.seed, cfg)
        algo.learn(args.steps, out_dir=run_dir, progress=False)
    hist = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train_jc = np.array([h["avg_costs"][0] for h in hist])
    train_r = np.array([h["avg_reward"] for h in hist])
    half = len(hist) // 2
    res: dict = {
        "args": vars(args),
        "limit": task["limit"],
        "training": {
            "iterations": len(hist),
            "jc_first30": float(train_jc[:30].mean()),
            "jc_second_half": float(train_jc[half:].mean()),
            "reward_second_half": float(train_r[half:].mean()),
        },
        "log_std": algo.policy.log_std.detach().tolist(),
    }
    # 1. training-style estimate vs protocol
    algo.collector.reset(algo.seed + 991)  # fresh envs, not the training seeds' continuation
    rng = np.random.default_rng(algo.seed + 991)
    base, batch = _batch_stats(algo, rng, args.batches)
    sto = average_reward_evaluation(algo, 40, 1000, deterministic=False)
    det = average_reward_evaluation(algo, 10, 1000)
    res["estimate"] = {
        "train_style": base,
        "protocol_stochastic_40x1000": {"reward": sto["avg_reward"], "cost": sto["avg_costs"][0]},
        "protocol_deterministic_10x1000": {"reward": det["avg_reward"], "cost": det["avg_costs"][0]},
    }
    # 2. gradient agreement between independent batches
    terms = [trust_region_terms(algo, batch, 10, 0.1)]
    for _ in range(3):
        _, b = _batch_stats(algo, rng, 1)
        terms.append(trust_region_terms(algo, b, 10, 0.1))

    def cos(u1, w1, u2, w2) -> float:
        return float(u1 @ w2) / math.sqrt(float(u1 @ w1) * float(u2 @ w2))

    pairs = [(i, j) for i in range(len(terms)) for j in range(i + 1, len(terms))]
    res["gradient_agreement"] = {
        "cos_H_cost": [
            cos(terms[i].A[:, 0], terms[i].W[:, 0], terms[j].A[:, 0], terms[j].W[:, 0]) for i, j in pairs
        ],
        "cos_H_reward": [cos(terms[i].g, terms[i].v, terms[j].g, terms[j].v) for i, j in pairs],
    }
    # 3. pure cost / reward steps from the first batch's terms
    tr = terms[0]
    a, w = tr.A[:, 0], tr.W[:, 0]
    s = float(a @ w)
    theta0 = parameters_to_vector(algo.policy.parameters()).detach().clone()
    steps = []
    for kind in ("cost", "reward"):
        for d in (1e-2, 1e-3):
            x = -math.sqrt(2 * d / s) * w if kind == "cost" else math.sqrt(2 * d / tr.q) * tr.v
            vector_to_parameters(theta0 + x.float(), algo.policy.parameters())
            with torch.no_grad():
                kl = float(algo.policy.kl(tr.old_dist, algo.policy.distribution(tr.x)).mean())
            after, _ = _batch_stats(algo, rng, args.batches)
            det1 = average_reward_evaluation(algo, 10, 1000)
            steps.append(
                {
                    "step": kind,
                    "delta": d,
                    "kl": kl,
                    "predicted_dJc": float(a @ x),
                    "realised_dJc": after["jc"] - base["jc"],
                    "realised_dJc_se": math.hypot(after["jc_se"], base["jc_se"]),
                    "realised_dR": after["reward"] - base["reward"],
                    "realised_dR_se": math.hypot(after["reward_se"], base["reward_se"]),
                    "deterministic": {"reward": det1["avg_reward"], "cost": det1["avg_costs"][0]},
                }
            )
            vector_to_parameters(theta0, algo.policy.parameters())
    res["steps"] = steps
    algo.close()
    print(json.dumps(res, indent=1))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()

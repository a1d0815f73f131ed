"""How many online queries an offline preference file saves (the warmPref idea, with a constraint).

ACPO learns the reward of an average-reward tabular CMDP (5 states x 3 actions, `make_ergodic_cmdp`) from
online preferences, with and without an offline file of segment comparisons made beforehand by a rater of
unknown competence (segments of a uniformly random policy). For each online budget the learned policy is
evaluated exactly; the score is the normalised gain (J - J_uniform) / (J* - J_uniform) of the LP optimum J*,
and the constraint is checked. Writes ``benchmarks/results/prefrl/offline.json`` and ``offline.png``.

    .venv/bin/python benchmarks/prefrl_offline.py --seeds 0 1 2 3 4 --budgets 0 20 40 80 160 320
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from bayescrl.utils.io import write_json
from bayescrl.utils.plotting import plt

OUT = Path(__file__).parent / "results" / "prefrl"
CFG = dict(
    n_envs=4, rollout_steps=250, delta=0.02, normalize_obs=False, update_epochs=5, actor_hidden=(32,),
    critic_hidden=(32,), checkpoint_every=0,
)  # fmt: skip
L = 10


def offline_file(cmdp, n: int, beta: float, seed: int, path: Path) -> None:
    """``n`` comparisons of random-policy segments (Φ = one-hot (s, a) counts), labelled with P(σ0 ≻ σ1) =
    sigmoid(β (R(σ0) − R(σ1))) from the true reward."""
    rng = np.random.default_rng(10_000 + seed)
    S, A = cmdp.num_states, cmdp.num_actions

    def segment() -> tuple[np.ndarray, float]:
        s, phi, ret = rng.integers(S), np.zeros(S * A), 0.0
        for _ in range(L):
            a = rng.integers(A)
            phi[s * A + a] += 1
            ret += cmdp.rewards[s, a]
            s = rng.choice(S, p=cmdp.transitions[s, a])
        return phi, ret

    recs = []
    for _ in range(n):
        (x0, r0), (x1, r1) = segment(), segment()
        y = int(rng.random() >= 1 / (1 + np.exp(-beta * (r0 - r1))))
        recs.append({"x0": x0.tolist(), "x1": x1.tolist(), "y": y})
    path.write_text(json.dumps({"rater": {"id": "log", "beta": 1.0, "lam": 10.0}, "records": recs}))


def call_one(job: dict) -> dict:
    """:func:`one_run` from a JSON job (the sweep engine's call)."""
    return one_run(*job["args"])


def one_run(seed: int, budget: int, n_offline: int, steps: int) -> dict:
    import torch

    from bayescrl.envs import make_ergodic_cmdp
    from bayescrl.prefrl.loop import train_with_preferences

    torch.set_num_threads(1)
    cmdp = make_ergodic_cmdp(num_states=5, num_actions=3, seed=seed)
    opt, uni = cmdp.solve().value, cmdp.evaluate(np.full((5, 3), 1 / 3)).value
    spec = {
        "features": "onehot",
        "segment_length": L,
        "raters": [{"id": "expert", "beta": 5.0, "lam": 100.0}],
        "competence": "infer",
        "queries": {"total": budget, "per_round": 20},
        "reward": "mean",
    }
    with tempfile.TemporaryDirectory() as tmp:
        if n_offline:
            spec["offline"] = str(Path(tmp) / "offline.json")
            offline_file(cmdp, n_offline, 2.0, seed, Path(spec["offline"]))
        m = train_with_preferences(
            "acpo", lambda: cmdp.make_env(max_episode_steps=200), spec, total_steps=steps,
            cost_limits=cmdp.limits.tolist(), seed=seed, config=CFG,
        )  # fmt: skip
    algo = m["_learner"].algo
    with torch.no_grad():
        pi = algo.policy.distribution(torch.eye(5)).probs.numpy()
    ev = cmdp.evaluate(pi)
    return {
        "seed": seed,
        "budget": budget,
        "offline": n_offline,
        "gain": (ev.value - uni) / (opt - uni),
        "value": ev.value,
        "optimum": opt,
        "cost": float(ev.costs[0]),
        "limit": float(cmdp.limits[0]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--budgets", type=int, nargs="+", default=[0, 20, 40, 80, 160, 320])
    ap.add_argument("--offline", type=int, default=200, help="offline comparisons in the file")
    ap.add_argument("--steps", type=int, default=40_000)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    jobs = [(s, b, n, args.steps) for s in args.seeds for b in args.budgets for n in (0, args.offline)]
    from bayescrl.sweep.calls import map_calls  # each run its own process, --workers at a time

    runs = map_calls(
        f"{Path(__file__).resolve()}:call_one", [{"args": list(j)} for j in jobs], workers=args.workers
    )
    table = {}
    for n in (0, args.offline):
        for b in args.budgets:
            rs = [r for r in runs if r["offline"] == n and r["budget"] == b]
            g = np.array([r["gain"] for r in rs])
            table[f"offline={n}/online={b}"] = {
                "gain_mean": float(g.mean()),
                "gain_sd": float(g.std(ddof=1)) if len(g) > 1 else 0.0,
                "within_limit": int(sum(r["cost"] <= 1.1 * r["limit"] for r in rs)),
                "seeds": len(rs),
            }
            row = table[f"offline={n}/online={b}"]
            print(
                f"offline {n:4d}  online {b:4d}: gain {row['gain_mean']:.3f} ± {row['gain_sd']:.3f}"
                f"  within 1.1 x limit {row['within_limit']}/{len(rs)}"
            )
    OUT.mkdir(parents=True, exist_ok=True)
    cmd = "benchmarks/prefrl_offline.py " + " ".join(os.sys.argv[1:])
    write_json(OUT / "offline.json", {"command": cmd, "args": vars(args), "table": table, "runs": runs})
    p = plt()
    fig, ax = p.subplots(figsize=(5.5, 3.6))
    for n, label in ((0, "online only"), (args.offline, f"+ {args.offline} offline comparisons")):
        m = [table[f"offline={n}/online={b}"]["gain_mean"] for b in args.budgets]
        s = [table[f"offline={n}/online={b}"]["gain_sd"] for b in args.budgets]
        ax.errorbar(args.budgets, m, yerr=s, marker="o", capsize=3, label=label)
    ax.set_xlabel("online preference queries")
    ax.set_ylabel("normalised gain (J - J_unif) / (J* - J_unif)")
    ax.set_title("ACPO on a 5x3 average-reward CMDP")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(OUT / "offline.png", dpi=110)


if __name__ == "__main__":
    main()

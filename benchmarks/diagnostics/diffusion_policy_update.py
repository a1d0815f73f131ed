"""Does the policy update of the image experiment raise the reward it optimises? (PSPL, appendix `pickapic`)

Runs the oracle (policy updates on the hidden true reward ⟨θ*, ψ(τ)⟩) of
``examples/pspl/diffusion_digits.yaml`` with the DDPO update (the earlier defaults, and with the current
exploration sd / learning rate) and with the reward-gradient update, from the same base sampler and random
streams, and reports the final-episode reward against the base sampler's. It also measures why DDPO cannot
move at this budget: the signal-to-noise ratio of a score-function (REINFORCE) estimate of the derivative
of the reward along one useful direction (a uniform shift c of every ε_t: ink, hence stroke mass) against
the exact pathwise derivative.

Run from the repository root (needs the cached base model):
``.venv/bin/python benchmarks/diagnostics/diffusion_policy_update.py --seeds 3 --epochs 30``
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

from bayescrl.pbrl.diffusion.base import load_or_train
from bayescrl.pbrl.diffusion.experiment import _Setup, run_agent, stream, validate_config
from bayescrl.utils.io import load_yaml, write_json

VARIANTS = {
    "ddpo (earlier defaults: sd 0.1, lr 1e-4, 4 PPO steps)": {
        "update": "ddpo",
        "sd_init": 0.1,
        "lr": 1e-4,
        "updates": 4,
    },
    "ddpo (sd 0.03, lr 3e-4, 4 PPO steps)": {"update": "ddpo", "sd_init": 0.03, "lr": 3e-4, "updates": 4},
    "reward_grad (default: sd 0.03, lr 3e-4, 1 step)": {"update": "reward_grad"},
}


def snr(st: _Setup, n: int) -> dict:
    """Uniform-shift derivative dR/dc of the true reward: pathwise (exact, autograd) vs the per-trajectory
    score-function estimate (R_i − R̄)·Σ_{t,d} ξ_itd/σ, from ``n`` trajectories of the base policy."""
    pol = st.pi0.select([0])
    sd = float(pol.b3.detach()[0, 0, pol.D :].exp().mean())
    gens = [stream("snr", 0)]
    p, z = st.random_starts(gens, n)
    # pathwise: a shift c of the residual's last bias (every pixel, every step), differentiated at c = 0
    ro = st.rollout(pol, p, z, gens, grad=True)
    R = st.true_reward(ro)[0]
    (g,) = torch.autograd.grad(R.sum(), pol.b3)
    pathwise = float(g[0, 0, : pol.D].sum()) / n  # d E[R] / dc
    xi = (ro.actions - ro.eps_hat)[0] / sd  # [n, T, D]
    sf = (R.detach() - R.detach().mean()).double() * xi.sum((1, 2)).double() / sd  # per-trajectory estimates
    return {
        "trajectories": n,
        "exploration_sd": sd,
        "pathwise_dR_dc": pathwise,
        "score_function_mean": float(sf.mean()),
        "score_function_sd_per_trajectory": float(sf.std()),
        "trajectories_for_one_sd": float((sf.std() / abs(pathwise)) ** 2) if pathwise else math.inf,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--snr-trajectories", type=int, default=200)
    ap.add_argument("--cache", default="runs/diffusion_base/base_model")
    ap.add_argument("--out", default="benchmarks/results/pspl/diffusion_policy_update.json")
    a = ap.parse_args()
    torch.set_num_threads(1)
    raw = load_yaml("examples/pspl/diffusion_digits.yaml")
    raw.update(
        {"K": 0, "final": {**raw["final"], "epochs": a.epochs}, "offline": {**raw["offline"], "N": 16}}
    )
    raw["pools"] = {"val": 8, "explore": 8}
    raw["base"] = {**raw["base"], "cache": a.cache}
    out = {
        "seeds": a.seeds,
        "epochs": a.epochs,
        "rollouts_per_epoch": raw["policy"]["rollouts"],
        "variants": {},
    }
    base = None
    for name, over in VARIANTS.items():
        cfg = validate_config({**raw, "policy": {**raw["policy"], **over}})
        if base is None:
            bcfg = {k: v for k, v in cfg["base"].items() if k != "cache"}
            base = load_or_train(bcfg, a.cache, no_train=True)
        st = _Setup(cfg, a.seeds, base, "cpu")
        b = float(st.evaluate(st.pi0.select([0]))["reward"][0])
        t0 = time.perf_counter()
        r = run_agent(st, "oracle", progress=False)
        fr = r["final_reward"]
        out["variants"][name] = {
            "policy": cfg["policy"],
            "base_reward": b,
            "oracle_final_reward_per_seed": fr.tolist(),
            "gain_over_base_mean": float(fr.mean() - b),
            "seeds_above_base": int((fr > b).sum()),
            "wall_s": time.perf_counter() - t0,
        }
        print(
            name,
            json.dumps(out["variants"][name]["oracle_final_reward_per_seed"]),
            f"base {b:.3f}",
            flush=True,
        )
        if over["update"] == "reward_grad":
            out["uniform_shift_snr"] = snr(st, a.snr_trajectories)
            print(out["uniform_shift_snr"], flush=True)
    write_json(Path(a.out), out)
    print("wrote", a.out)


if __name__ == "__main__":
    main()

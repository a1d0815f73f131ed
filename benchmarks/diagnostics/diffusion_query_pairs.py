"""Do the rater's labels of the image experiment's online queries carry information? (PSPL, appendix
`pickapic`)

For each variant, runs the agents of a config for ``--seeds`` seeds and records, for every labelled query
pair, the hidden reward difference Δ = ⟨θ*, ψ(τ0) − ψ(τ1)⟩ and whether the label agrees with its sign
(``label_agreement``), with the agreement a rater of deliberateness β would have in expectation,
mean σ(β|Δ|) (λ's belief noise aside). Variants:

* ``examples/pspl/diffusion_digits.yaml`` with the two query images from one shared z_T (the earlier
  construction) and from their own z_T (``pools.query_starts: independent``), PSPL only, no final
  epochs, no oracle: how much the two images differ, and what the labels agree on;
* ``examples/pspl/diffusion_digits_gpu.yaml`` (PSPL, DPS and the oracle): the oracle's and agents' final
  reward against the base sampler, and the agreement at that budget; and PSPL there with the η term of
  the policy's reward back at κ = ``policy.eta_weight`` = 0.2 (the default): its score-function gradient
  in the 2 560-dimensional action sequence drowns the reward's pathwise gradient.

It also reports σ(β|Δ|) over the validation pool's pairs (two images of one prompt from their own z_T
under the base sampler, like D0's) for a range of β: the agreement a rater of that β gives such pairs.

Run from the repository root (needs the cached base model, e.g. from one run of the example config):
``.venv/bin/python benchmarks/diagnostics/diffusion_query_pairs.py --seeds 2``
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from bayescrl.pbrl.diffusion.base import load_or_train
from bayescrl.pbrl.diffusion.experiment import _Setup, run_agent, validate_config
from bayescrl.utils.io import apply_overrides, load_yaml, write_json

MAIN, GPU = "examples/pspl/diffusion_digits.yaml", "examples/pspl/diffusion_digits_gpu.yaml"
VARIANTS = {
    "diffusion_digits.yaml, shared z_T": (MAIN, ["pools.query_starts=shared", "final.epochs=0"], ["pspl"]),
    "diffusion_digits.yaml, independent z_T": (
        MAIN,
        ["pools.query_starts=independent", "final.epochs=0"],
        ["pspl"],
    ),
    "diffusion_digits_gpu.yaml": (GPU, [], ["pspl", "dps", "oracle"]),
    "diffusion_digits_gpu.yaml, eta_weight 0.2": (GPU, ["policy.eta_weight=0.2"], ["pspl"]),
}
BETAS = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


class _Recorder:
    """The experiment's rater, recording the hidden reward difference of every pair it labels."""

    def __init__(self, rater, theta_star: torch.Tensor):
        self.rater, self.theta_star, self.diffs = rater, theta_star, []

    def label(self, phi0, phi1, *, generator=None):
        self.diffs.append(((phi0 - phi1) @ self.theta_star).detach().cpu())
        return self.rater.label(phi0, phi1, generator=generator)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--cache", default="runs/diffusion_base/base_model")
    ap.add_argument("--out", default="benchmarks/results/pspl/diffusion_query_pairs.json")
    a = ap.parse_args()
    torch.set_num_threads(1)
    out: dict = {"seeds": a.seeds, "variants": {}}
    base = None
    for name, (path, overrides, agents) in VARIANTS.items():
        raw = apply_overrides(load_yaml(path), [*overrides, "oracle=false"])
        raw["agents"] = [x for x in agents if x != "oracle"]
        cfg = validate_config(raw)
        if base is None:
            base = load_or_train(
                {k: v for k, v in cfg["base"].items() if k != "cache"}, a.cache, no_train=True
            )
        st = _Setup(cfg, a.seeds, base, "cpu")
        beta = cfg["offline"]["beta"]
        b = float(st.evaluate(st.pi0.select([0]))["reward"][0])
        v: dict = {
            "config": path,
            "overrides": overrides,
            "offline_beta": beta,
            "base_reward": b,
            "agents": {},
        }
        if "oracle" in agents:
            dv = (st.val_true[:, 0] - st.val_true[:, 1]).abs()
            v["validation_pairs"] = {
                "abs_reward_difference_median": float(dv.median()),
                "reward_difference_sd": float((st.val_true[:, 0] - st.val_true[:, 1]).std()),
                "expected_agreement_by_beta": {str(x): float(torch.sigmoid(x * dv).mean()) for x in BETAS},
            }
        for agent in agents:
            rec = _Recorder(st.rater, st.theta_star)
            st.rater = rec
            t0 = time.perf_counter()
            r = run_agent(st, agent, progress=False)
            st.rater = rec.rater
            fr = r["final_reward"]
            m = {
                "final_reward_per_seed": fr.tolist(),
                "gain_over_base_mean": float(fr.mean() - b),
                "seeds_above_base": int((fr > b).sum()),
                "train_images": r["train_images"],
                "wall_s": time.perf_counter() - t0,
            }
            if rec.diffs:
                d = torch.stack(rec.diffs).double().abs()  # [K, B]
                m |= {
                    "labelled_pairs": d.numel(),
                    "label_agreement": float(r["label_agreement"].mean()),
                    "expected_agreement": float(torch.sigmoid(beta * d).mean()),
                    "abs_reward_difference_median": float(d.median()),
                    "abs_reward_difference_mean": float(d.mean()),
                    "val_accuracy_mean": float(r["val_accuracy"].mean()),
                }
            v["agents"][agent] = m
            print(
                name,
                agent,
                json.dumps({k: x for k, x in m.items() if k != "final_reward_per_seed"}),
                flush=True,
            )
        out["variants"][name] = v
    write_json(Path(a.out), out)
    print("wrote", a.out)


if __name__ == "__main__":
    main()

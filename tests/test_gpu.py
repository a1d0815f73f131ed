"""The same runs on CUDA and on the CPU agree up to floating point (marker ``gpu``: skipped without CUDA).

Run on a machine with a GPU: ``pytest -m gpu tests/test_gpu.py``. ``benchmarks/gpu_check.py`` runs every
command through the CLI on the GPU as well.
"""

import math

import pytest
import torch

from bayescrl.constrained.registry import REGISTRY, get_algorithm

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]
SMALL = dict(n_envs=2, rollout_steps=64, minibatch_size=64, update_epochs=2, vf_epochs=2)


@pytest.mark.parametrize("algo", sorted(REGISTRY))
def test_first_update_matches_cpu(algo):
    """One iteration (the rollout is the same: actions are sampled by a numpy copy of the policy) on CPU
    and CUDA: the update's losses and KL agree to float32 rounding."""
    env = "bayescrl.constrained.toy:CostPendulum"
    recs = {}
    for dev in ("cpu", "cuda"):
        cfg = dict(SMALL, horizon=32) if algo in ("acpo", "atrpo") else SMALL
        a = get_algorithm(algo)(env, [5.0], seed=0, config=cfg, device=dev)
        a.learn(cfg["rollout_steps"] * cfg["n_envs"], progress=False)
        recs[dev] = a.history[-1]
        a.evaluate(1)
        a.close()
    for key in ("ep_return", "kl", "policy_loss", "value_loss"):
        if key in recs["cpu"]:
            x, y = float(recs["cpu"][key]), float(recs["cuda"][key])
            assert math.isclose(x, y, rel_tol=1e-3, abs_tol=1e-5), (key, x, y)


def test_pspl_tabular_matches_cpu():
    from bayescrl.pbrl.experiment import run_agents, validate_config

    cfg = validate_config(
        {"env": {"name": "riverswim", "S": 4, "H": 6}, "offline": {"N": 8}, "K": 3, "agents": ["pspl", "dps"]}
    )
    cpu = run_agents(cfg, 2, device="cpu", progress=False)
    gpu = run_agents(cfg, 2, device="cuda", progress=False)
    for name in cfg["agents"]:
        c, g = cpu["agents"][name], gpu["agents"][name]
        assert c["simple_regret_curve_mean"] == pytest.approx(g["simple_regret_curve_mean"], abs=1e-8)

"""Device plumbing checked on the CPU: PyTorch's ``meta`` device holds shapes, not values, and refuses to mix
with CPU tensors ("Tensor on device cpu is not on the expected device meta"), just as CUDA refuses. Code that
builds a tensor on the CPU where it should follow its inputs' device fails here as it would on a GPU.

Only value-free code can run on ``meta`` (no ``float()``/``.item()``/numpy), so this covers the pure maths and
the step that moves a rollout to the device; the whole loop on a GPU is ``tests/test_gpu.py`` (marker
``gpu``, skipped without CUDA) and ``benchmarks/gpu_check.py``.
"""

import numpy as np
import pytest
import torch

from bayescrl.constrained.core.advantages import average_gae, discounted_gae, finite_horizon_advantages
from bayescrl.constrained.registry import get_algorithm

META = torch.device("meta")
SMALL = dict(n_envs=2, rollout_steps=16, minibatch_size=16, update_epochs=1, vf_epochs=1)


def _rollout_tensors(T=5, n=2, k=2, device=META):
    r = torch.zeros(T, n, k, dtype=torch.float64, device=device)
    term = torch.zeros(T, n, dtype=torch.bool, device=device)
    return r, r.clone(), r.clone(), term, term.clone()


def test_advantages_follow_their_inputs_device():
    """Per-channel ``gamma`` given as a CPU tensor (the algorithm's) meets rewards on the device."""
    rewards, values, next_values, term, end = _rollout_tensors()
    gam = torch.tensor([0.99, 0.95], dtype=torch.float64)  # CPU, as OnPolicyAlgorithm.gammas
    adv, ret = discounted_gae(rewards, values, next_values, term, end, gam, 0.95)
    assert adv.device == META and ret.device == META
    adv, _ = finite_horizon_advantages(rewards, values, next_values, term, term, end, 0.9, gam)
    assert adv.device == META
    rate = torch.zeros(2, dtype=torch.float64)  # a CPU Ĵ (ACPO's phase-stratified rate)
    adv, _, j = average_gae(rewards, values, next_values, term, end, 0.9, rate)
    assert adv.device == META and j.device == META


@pytest.mark.parametrize("algo", ["ecop", "acpo"])
def test_rollout_moves_to_the_device_once(algo):
    """``compute_advantages`` takes the numpy rollout (values from the device's critic) and returns a batch
    whose every tensor is on the algorithm's device: the update then never copies per minibatch."""
    env = "bayescrl.constrained.toy:CostPendulum"
    a = get_algorithm(algo)(env, [5.0], seed=0, config=SMALL if algo != "acpo" else dict(SMALL, horizon=8))
    a.collector.reset(0)
    roll = a.collector.collect(a.policy, a.critic_value, SMALL["rollout_steps"], a.rng)
    a.device = META  # as if the networks lived on an accelerator
    roll.values, roll.next_values = roll.values.to(META), roll.next_values.to(META)
    if algo == "acpo":  # its Ĵ needs values (phase means): the text's batch mean, value-free
        a.config.cost_estimate = "batch"
    batch = a.compute_advantages(roll)
    for name in ("obs", "h", "actions", "logp", "rewards", "values", "advantages", "returns"):
        assert getattr(batch, name).device == META, name
    assert isinstance(batch.ep_returns, np.ndarray)  # bookkeeping stays on the host
    a.close()


def test_diffusion_pairs_on_the_inputs_device():
    """PSPL-diffusion's trajectory pairs (placeholder states included) live where the embeddings do."""
    from bayescrl.pbrl.diffusion.agents import _pairs

    phi = torch.zeros(2, 3, 3, dtype=torch.float64, device=META)
    y = torch.zeros(2, 3, dtype=torch.long, device=META)
    pairs = _pairs(phi, phi, y)
    assert pairs.states.device == META and pairs.phi.device == META

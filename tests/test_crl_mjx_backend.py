"""Training on the MJX backend (``config.env_backend: mjx``): rollouts stay torch tensors, and the
bookkeeping (episodes, returns, truncation bootstraps, observation statistics) matches its definition.
The jax-free checks run everywhere; the rest is skipped without jax/mujoco-mjx."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from mjx_utils import run_isolated

from bayescrl.constrained.core.rollout_torch import TorchRolloutCollector
from bayescrl.constrained.registry import get_algorithm
from bayescrl.envs.mjx import mjx_available
from bayescrl.utils.errors import ConfigError

needs_mjx = pytest.mark.skipif(not mjx_available(), reason="needs jax and mujoco-mjx (the mjx extra)")
TINY = dict(env_backend="mjx", n_envs=4, rollout_steps=250, minibatch_size=500, update_epochs=2)


def test_unknown_backend_and_unsupported_env_are_refused():
    with pytest.raises(ConfigError, match="env_backend"):
        get_algorithm("ppo-lag")("bayescrl/PointCircle-v0", config={"env_backend": "brax"})
    with pytest.raises(ConfigError, match="async_envs"):
        get_algorithm("ppo-lag")("bayescrl/PointCircle-v0", config={"env_backend": "mjx", "async_envs": True})
    with pytest.raises(ConfigError, match="PointNavigation"):
        get_algorithm("ppo-lag")("bayescrl/PointNavigation-v0", config={"env_backend": "mjx"})


def train_checks() -> str:
    """ppo-lag and cpo on MJX batches, then one rollout by hand (run in a child process)."""
    algo = get_algorithm("ppo-lag")("bayescrl/PointCircle-v0", seed=0, config=TINY)
    assert isinstance(algo.collector, TorchRolloutCollector)
    rec = algo.learn(2 * 4 * 250, progress=False)
    assert rec["env_steps"] == 2000 and algo.iteration == 2
    assert [r["episodes"] for r in algo.history] == [4, 4]  # H = 200: one episode per copy per 250 steps
    assert algo.rms.count == 2000
    assert np.isfinite(rec["ep_return"]) and len(rec["ep_costs"]) == 1

    # one more rollout by hand: tensors, episode totals, truncation bootstraps, advantages
    roll = algo.collector.collect(algo.policy, algo.critic_value, 250)
    assert all(isinstance(x, torch.Tensor) for x in (roll.obs, roll.raw, roll.rewards, roll.actions))
    ended = roll.ended.numpy()
    assert ended.sum() == 4 and not roll.terminated.any()
    t_end = np.flatnonzero(ended[:, 0])[0]  # the episode of copy 0 that ends in this rollout
    h_end = int(roll.h[t_end, 0])
    assert h_end == 199 and bool(roll.at_horizon[t_end, 0])
    rew = roll.rewards.numpy()
    k = list(np.argwhere(ended)[:, 1]).index(0)  # episodes are listed in (step, env) order
    if t_end >= 199:  # the whole episode lies in this rollout
        assert roll.ep_returns[k] == pytest.approx(rew[t_end - 199 : t_end + 1, 0, 0].sum(), rel=1e-12)
    # the step after a truncation is a new episode: h restarts at 0
    assert int(roll.h[t_end + 1, 0]) == 0
    # V(final_obs) bootstraps the truncated step, not V(first obs of the next episode)
    assert not torch.equal(roll.next_values[t_end, 0], roll.values[t_end + 1, 0])
    # the advantages of the tensor rollout equal those of the same rollout as numpy arrays
    as_np = {
        f.name: getattr(roll, f.name).numpy()
        for f in dataclasses.fields(roll)
        if isinstance(getattr(roll, f.name), torch.Tensor) and f.name not in ("values", "next_values")
    }
    b_t = algo.compute_advantages(roll)
    b_n = algo.compute_advantages(dataclasses.replace(roll, **as_np))
    assert torch.equal(b_t.advantages, b_n.advantages) and torch.equal(b_t.returns, b_n.returns)
    algo.close()

    cpo = get_algorithm("cpo")("bayescrl/PointCircle-v0", seed=1, config=TINY)  # trust region, same envs
    rec = cpo.learn(4 * 250, progress=False)
    assert rec["env_steps"] == 1000 and np.isfinite(rec["ep_return"])
    ev = cpo.evaluate(1)  # evaluation runs the CPU env with the same observation definition
    assert ev["lengths"] == [200]
    return "ok"


# in a child process (tests/mjx_utils.py says why); the first step compiles there (XLA on CPU: 10-30 s)
@needs_mjx
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ppo_lag_and_cpo_train_on_mjx_batches():
    assert run_isolated("test_crl_mjx_backend", "train_checks") == "ok"

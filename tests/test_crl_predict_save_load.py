"""Stable-Baselines3-style ``predict`` / ``save`` / ``load`` on every constrained algorithm (shared base)."""

import numpy as np
import pytest

from bayescrl.constrained.core.base import OnPolicyAlgorithm
from bayescrl.constrained.ecop import ECOP
from bayescrl.constrained.ppo_lag import PPOLag
from bayescrl.constrained.registry import get_algorithm
from bayescrl.utils.errors import ConfigError

PENDULUM = "bayescrl.constrained.toy:CostPendulum"
TINY = dict(n_envs=2, rollout_steps=32, minibatch_size=32, update_epochs=1, vf_epochs=1, horizon=20)


def _agent(cls=ECOP):
    return cls(PENDULUM, [5.0], seed=3, config=TINY, env_kwargs={"max_episode_steps": 20})


def test_saved_and_loaded_agent_predicts_identically(tmp_path):
    algo = _agent()
    algo.learn(64, progress=False)  # one iteration: trained weights and observation statistics
    assert algo.rms.count > 0
    obs = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    steps = np.arange(6)
    a, state = algo.predict(obs, deterministic=True, step=steps)
    assert state is None and a.shape == (6, 1)
    path = algo.save(tmp_path / "ecop.pt")
    assert path == tmp_path / "ecop.pt" and path.exists()
    loaded = ECOP.load(path)
    b, _ = loaded.predict(obs, deterministic=True, step=steps)
    np.testing.assert_array_equal(a, b)
    # one observation: the single action (equal to the batched one up to float32 matmul rounding)
    one, _ = loaded.predict(obs[2], step=2)
    assert one.shape == (1,)
    np.testing.assert_allclose(one, b[2], rtol=1e-5, atol=1e-7)
    # a run folder works too, and the generic loader picks the algorithm from the file
    algo.save(tmp_path / "run")
    again = OnPolicyAlgorithm.load(tmp_path / "run")
    assert type(again) is ECOP
    np.testing.assert_array_equal(again.predict(obs, step=steps)[0], a)
    for x in (algo, loaded, again):
        x.close()


def test_load_refuses_a_checkpoint_of_another_algorithm(tmp_path):
    algo = _agent(PPOLag)
    path = algo.save(tmp_path / "lag.pt")
    algo.close()
    with pytest.raises(ConfigError, match=r"checkpoint of 'ppo-lag', not of 'ecop'"):
        ECOP.load(path)
    assert type(get_algorithm("ppo-lag").load(path)) is PPOLag


def test_load_with_an_env_factory_replaces_the_saved_env(tmp_path):
    from bayescrl.constrained.toy import CostPendulum

    algo = ECOP(lambda: CostPendulum(max_episode_steps=20), [5.0], seed=3, config=TINY)
    path = algo.save(tmp_path / "obj.pt")
    obs = np.zeros(3, np.float32)
    a = algo.predict(obs, step=0)[0]
    algo.close()
    with pytest.raises(ConfigError, match="pass env= to load it"):
        ECOP.load(path)
    loaded = ECOP.load(path, env=lambda: CostPendulum(max_episode_steps=20))
    np.testing.assert_array_equal(loaded.predict(obs, step=0)[0], a)
    loaded.close()

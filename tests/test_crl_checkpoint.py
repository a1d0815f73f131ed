"""Checkpoints load with ``weights_only=True`` (a crafted pickle is refused, nothing runs), RNG states
survive the safe encoding bit for bit, and ``bayescrl.load`` gives the run's own evaluation actions."""

import os
import random

import numpy as np
import pytest
import torch

import bayescrl
from bayescrl.constrained.core.base import CHECKPOINT, OnPolicyAlgorithm
from bayescrl.constrained.registry import get_algorithm
from bayescrl.utils.errors import ConfigError, DataError
from bayescrl.utils.safe_state import decode, encode, load_state, save_state

PENDULUM = "bayescrl.constrained.toy:CostPendulum"
SMALL = dict(n_envs=2, rollout_steps=64, minibatch_size=64, update_epochs=2, vf_epochs=2)


class _Payload:
    """Unpickling this runs ``os.mkdir(marker)``: stands for arbitrary code in a shared run folder."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def test_crafted_pickle_checkpoint_is_refused_and_never_run(tmp_path):
    marker = tmp_path / "pwned"
    torch.save({"algo": "ecop", "policy": _Payload(marker)}, tmp_path / CHECKPOINT)
    with pytest.raises(DataError) as err:
        OnPolicyAlgorithm.load(tmp_path)
    assert err.value.field == "checkpoint" and "weights_only" in str(err.value)
    assert "\n" not in str(err.value) and "mkdir" in str(err.value)  # names the refused global
    assert not marker.exists()  # the payload did not run
    with pytest.raises(DataError):
        bayescrl.load(tmp_path)
    assert not marker.exists()
    torch.load(tmp_path / CHECKPOINT, weights_only=False)  # control: the file really is a payload
    assert marker.exists()


def test_old_pickled_checkpoint_gives_one_line_data_error(tmp_path):
    # what bayescrl 0.1 wrote: numpy arrays and RNG tuples pickled as objects
    torch.save(
        {"algo": "ecop", "policy": {}, "cum_cost": np.zeros(1), "rng": np.random.RandomState(0).get_state()},
        tmp_path / CHECKPOINT,
    )
    with pytest.raises(DataError) as err:
        OnPolicyAlgorithm.load(tmp_path)
    assert err.value.field == "checkpoint" and "\n" not in str(err.value)


def test_rng_states_and_numpy_values_survive_weights_only(tmp_path):
    gen = np.random.default_rng(12345)
    gen.random(3)
    state = {
        "numpy": np.random.RandomState(7).get_state(),
        "python": random.Random(7).getstate(),
        "pcg": gen.bit_generator.state,  # 128-bit integers
        "torch": torch.Generator().manual_seed(3).get_state(),
        "arrays": [np.arange(5, dtype=np.uint32), np.eye(2), np.array([True, False]), np.zeros((0, 3))],
        "scalars": (np.float32(0.1), np.int64(-3), np.float64(np.pi), np.bool_(True)),
        "plain": {"a": [1, 2.5, None, "x"], 3: (True,)},
    }
    save_state(state, tmp_path / "s.pt")
    torch.load(tmp_path / "s.pt", weights_only=True)  # loads with the safe unpickler
    back = load_state(tmp_path / "s.pt")
    r1, r2 = np.random.RandomState(), np.random.RandomState()
    r1.set_state(state["numpy"])
    r2.set_state(back["numpy"])
    assert r1.random() == r2.random()
    p = random.Random()
    p.setstate(back["python"])
    assert p.random() == random.Random(7).random()
    g2 = np.random.default_rng()
    g2.bit_generator.state = back["pcg"]
    assert g2.random() == gen.random()
    assert torch.equal(back["torch"], state["torch"])
    for a, b in zip(state["arrays"], back["arrays"], strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    for a, b in zip(state["scalars"], back["scalars"], strict=True):
        assert type(a) is type(b) and a == b
    assert back["plain"] == state["plain"] and isinstance(back["plain"][3], tuple)
    assert decode(encode(state["numpy"]))[0] == "MT19937"
    with pytest.raises(TypeError, match="state.obj"):
        encode({"obj": object()})


def _trained(tmp_path):
    cfg = dict(SMALL, horizon=30)
    algo = get_algorithm("ecop")(PENDULUM, [5.0], seed=1, config=cfg, env_kwargs={"max_episode_steps": 30})
    algo.learn(3 * 128, out_dir=tmp_path, progress=False)
    torch.load(tmp_path / CHECKPOINT, weights_only=True)  # the checkpoint needs no unsafe unpickling
    assert algo.rms is not None and algo.rms.count > 0  # normalisation matters for the check below
    return algo


def test_load_predict_equals_deterministic_evaluation_actions(tmp_path):
    algo = _trained(tmp_path)
    seen = []
    act = algo.policy.act

    def spy(x, deterministic=False):
        a, logp = act(x, deterministic=deterministic)
        seen.append(np.clip(a.detach().numpy()[0], -2.0, 2.0))
        return a, logp

    algo.policy.act = spy
    env = algo.factory()
    obs_list = []
    orig_step = env.step

    def step(a):
        out = orig_step(a)
        obs_list.append(out[0])
        return out

    torch_state = torch.get_rng_state()
    pol = bayescrl.load(tmp_path)
    assert torch.equal(torch.get_rng_state(), torch_state)  # load leaves global RNGs alone
    ev = algo.evaluate(episodes=1, seed=77)
    # replay the same episode with the loaded policy
    obs, _ = env.reset(seed=77)
    env.step = step
    actions = []
    assert pol.time_feature  # e-COP's default: the time index is part of the policy input
    for h in range(ev["lengths"][0]):
        a = pol.predict(obs, deterministic=True, step=h)
        actions.append(a)
        obs = env.step(a)[0]
    assert len(actions) == len(seen) == 30
    np.testing.assert_array_equal(np.stack(actions), np.stack(seen))
    # batched = one by one
    batch = np.stack(obs_list[:7])
    out = pol.predict(batch, step=np.arange(7))
    assert out.shape == (7, 1)
    expect = np.stack([pol.predict(o, step=h) for h, o in enumerate(batch)])
    np.testing.assert_allclose(out, expect, rtol=1e-5, atol=1e-7)  # batched matmul: float rounding
    with pytest.raises(DataError):
        pol.predict(np.zeros(4), step=0)
    with pytest.raises(ConfigError):
        pol.predict(batch)  # time index missing
    algo.close()

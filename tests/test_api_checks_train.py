"""The Python API refuses what the CLI refuses: devices, configs changed after they were built, cost
limits, evaluation and prediction arguments, missing checkpoints and engine options nobody reads."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import bayescrl
from bayescrl.bandits.config import BanditExperiment, resolve_config
from bayescrl.constrained.core.base import OnPolicyAlgorithm
from bayescrl.constrained.registry import get_algorithm
from bayescrl.pbrl.experiment import run_experiment
from bayescrl.prefrl.spec import parse_preference_spec
from bayescrl.utils.errors import ConfigError

ENV = "bayescrl/SmallCMDP-v0"
TINY = {"n_envs": 1, "rollout_steps": 8, "minibatch_size": 8, "update_epochs": 1}


@pytest.fixture(scope="module")
def ecop():
    agent = get_algorithm("ecop")(ENV, [3.0], config=TINY)
    yield agent
    agent.close()


@pytest.mark.parametrize("device", ["gpu", "cuda:9", "tpu"])
def test_algorithm_refuses_a_device_that_is_not_there(device):
    if device == "cuda:9" and torch.cuda.device_count() > 9:
        pytest.skip("this machine has ten GPUs")
    with pytest.raises(ConfigError, match=r"^device = "):
        get_algorithm("ppo-lag")(ENV, [3.0], config=TINY, device=device)


def test_a_config_changed_after_it_was_built_is_checked_again():
    algo = get_algorithm("ppo-lag")
    cfg = algo.config_class(**TINY)
    cfg.pi_lr = float("nan")
    with pytest.raises(ConfigError, match=r"^pi_lr = nan"):
        algo(ENV, [3.0], config=cfg)
    cfg.pi_lr, cfg.minibatch_size = 1e-3, 0
    with pytest.raises(ConfigError, match=r"^minibatch_size = 0"):
        algo(ENV, [3.0], config=cfg)


@pytest.mark.parametrize("limits", [True, [False], "3", [3.0, 1.0], [float("nan")], [-1.0], {"a": 1}])
def test_cost_limits_are_numbers_one_per_channel(limits):
    with pytest.raises(ConfigError, match=r"^cost_limits"):
        get_algorithm("ppo-lag")(ENV, limits, config=TINY)


@pytest.mark.parametrize("limits", [np.float32(2.5), [np.float32(2.5)], np.array([2.5]), torch.tensor(2.5)])
def test_cost_limits_take_numpy_and_torch_numbers(limits):
    agent = get_algorithm("ppo-lag")(ENV, limits, config=TINY)
    try:
        assert agent.cost_limits.tolist() == [2.5]
    finally:
        agent.close()


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"seed": "x"}, "seed"), ({"seed": -5}, "seed"), ({"seed": True}, "seed"),
    ({"deterministic": "yes"}, "deterministic"), ({"episodes": True}, "episodes"),
])  # fmt: skip
def test_evaluate_checks_its_arguments(ecop, kwargs, field):
    with pytest.raises(ConfigError, match=rf"^{field} = "):
        ecop.evaluate(**kwargs)


@pytest.mark.parametrize("step", [float("nan"), "x", "3", True, -1, [0, 1, 2], [[0]], [0, [1]], None])
def test_predict_refuses_a_bad_time_index(ecop, step):
    obs = ecop.envs.single_observation_space.sample()
    with pytest.raises(ConfigError, match=r"^step = "):
        ecop.predict(obs, step=step)


def test_predict_takes_one_time_index_or_one_per_observation(ecop):
    space = ecop.envs.single_observation_space
    one, _ = ecop.predict(space.sample(), step=3)
    batch, _ = ecop.predict(np.stack([space.sample(), space.sample()]), step=[0, 5])
    assert np.shape(batch)[0] == 2 and np.shape(one) == np.shape(batch)[1:]
    with pytest.raises(ConfigError, match=r"^deterministic = "):
        ecop.predict(space.sample(), step=0, deterministic="no")


def test_evaluate_takes_any_integer_seed(ecop):
    assert ecop.evaluate(episodes=1, seed=np.int64(3))["seeds"] == [3]


def test_a_missing_checkpoint_is_named_by_the_argument_that_named_it(tmp_path):
    with pytest.raises(ConfigError, match=r"^run_dir = .*no checkpoint.pt"):
        bayescrl.load(tmp_path)
    with pytest.raises(ConfigError, match=r"^run_dir = .*no such checkpoint file"):
        bayescrl.load(tmp_path / "x.pt")
    with pytest.raises(ConfigError, match=r"^path = .*no checkpoint.pt"):
        OnPolicyAlgorithm.load(tmp_path)


def test_config_check_reaches_into_sections():
    exp = BanditExperiment.from_dict({"bandit": {"K": 4, "d": 2, "T": 5}})
    exp.bandit.K = 0
    with pytest.raises(ConfigError, match=r"^bandit\.K = 0"):
        exp.check()


def test_pspl_experiment_refuses_a_bad_device_before_work(tmp_path):
    cfg = {"env": {"name": "riverswim"}, "K": 2, "agents": ["pspl"]}
    with pytest.raises(ConfigError, match=r"^device = 'gpu'"):
        run_experiment(cfg, seeds=1, out=tmp_path, device="gpu")
    assert not any(tmp_path.iterdir())


RATERS = [{"id": "a", "beta": 1.0, "lam": 10.0}]


@pytest.mark.parametrize(("spec", "field"), [
    ({"engine": "laplace", "engine_options": {"lr": 0.1}}, "preferences.engine_options.lr"),
    ({"engine": "svi", "engine_options": {"lr": float("nan")}}, "preferences.engine_options.lr"),
    ({"engine": "svi", "engine_options": {"lrr": 0.1}}, "preferences.engine_options"),
    ({"engine": "nuts", "engine_options": [1]}, "preferences.engine_options"),
])  # fmt: skip
def test_prefrl_engine_options_are_checked_or_refused_when_unused(spec, field):
    with pytest.raises(ConfigError, match=rf"^{field}"):
        parse_preference_spec({"raters": RATERS, "competence": "known", **spec})


def test_prefrl_engine_options_of_an_engine_that_reads_them_pass():
    spec = parse_preference_spec(
        {"raters": RATERS, "competence": "known", "engine": "svi", "engine_options": {"max_steps": 1e3}}
    )
    assert spec.engine_options == {"max_steps": 1000} and type(spec.engine_options["max_steps"]) is int


@pytest.mark.parametrize(("options", "field"), [
    ({"engine": "laplace", "engine_options": {"max_steps": 10}}, "options.engine_options.max_steps"),
    ({"engine": "nuts", "engine_options": {"target_accept": 1.5}}, "options.engine_options.target_accept"),
])  # fmt: skip
def test_bandit_engine_options_are_checked_or_refused_when_unused(options, field):
    with pytest.raises(ConfigError, match=rf"^{field}"):
        resolve_config({"bandit": {"K": 4, "d": 2, "T": 5}, "agents": ["ps"], "options": options})


SVI_AGENT = {"id": "warmpref-ps", "engine": "svi"}


@pytest.mark.parametrize(("agent", "field"), [
    ({"id": "warmpref-ps", "engine": "foo"}, "agents[0].engine"),
    ({"id": "warmpref-ps", "p_online": 5}, "agents[0].p_online"),
    ({**SVI_AGENT, "engine_options": {"max_stepz": 1}}, "agents[0].engine_options"),
    ({"id": "warmpref-ps", "engine_options": {"max_steps": 1}}, "agents[0].engine_options.max_steps"),
])  # fmt: skip
def test_an_agents_option_overrides_are_checked_by_name(agent, field):
    with pytest.raises(ConfigError, match=rf"^{re.escape(field)}"):
        resolve_config({"bandit": {"K": 4, "d": 2, "T": 5}, "agents": [agent]})


def test_engine_options_read_by_one_agents_engine_pass():
    cfg = resolve_config({"options": {"engine_options": {"max_steps": 1e2}}, "agents": ["ps", SVI_AGENT]})
    opts = cfg["options"]["engine_options"]
    assert opts == {"max_steps": 100} and type(opts["max_steps"]) is int  # as the svi agent's engine reads it
    own = resolve_config({"agents": [{**SVI_AGENT, "engine_options": {"max_steps": 1e2}}]})["agents"][0]
    assert type(own["engine_options"]["max_steps"]) is int

"""The one key-hint matcher (bayescrl.utils.hints): keys compared by the meaning of their parts, nothing
suggested rather than something wrong; and the places that use it (constrained config, model spec, engine
options, pspl/bandit sections, sweep keys)."""

import dataclasses
import json

import pytest

from bayescrl.bandits.config import resolve_config
from bayescrl.constrained.core.config import TrainConfig
from bayescrl.constrained.ecop import ECOPConfig
from bayescrl.inference.options import ENGINE_OPTIONS
from bayescrl.models.spec import SPEC_KEYS
from bayescrl.pbrl.experiment import validate_config
from bayescrl.sweep.spec import ADAPTERS, _user_keys, get_command
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.hints import close_keys, parts

ECOP_KEYS = [f.name for f in dataclasses.fields(ECOPConfig)]
NUTS = list(ENGINE_OPTIONS["nuts"])
SVI = list(ENGINE_OPTIONS["svi"])

# key typed, valid keys, expected suggestions ([] = suggest nothing)
TABLE = [
    ("pi_learning_rate", ECOP_KEYS, ["pi_lr"]),  # difflib alone said 'compile_update'
    ("vf_learning_rate", ECOP_KEYS, ["vf_lr"]),
    ("policy_lr", ECOP_KEYS, ["pi_lr"]),
    ("critic_lr", ECOP_KEYS, ["vf_lr"]),
    ("num_envs", ECOP_KEYS, ["n_envs"]),
    ("gama", ECOP_KEYS, ["gamma"]),
    ("noise_std", SPEC_KEYS, ["noise_sd"]),
    ("sigma", ["dim", "noise_sd", "prior"], ["noise_sd"]),
    ("lamda", ["id", "beta", "lam"], ["lam"]),
    ("lambda", ["id", "beta", "lam"], ["lam"]),
    ("num_sample", NUTS, ["num_samples"]),
    ("n_samples", NUTS, ["num_samples"]),
    ("numChains", NUTS, ["num_chains"]),
    ("max_iterations", SVI, ["max_steps"]),
    ("learning_rate", SVI, ["lr"]),
    ("engin", ["engine", "seed"], ["engine"]),
    ("NN", ["N", "beta", "lam"], ["N"]),
    ("colour", ECOP_KEYS, []),
    ("foo", SVI, []),
    ("lr", ["id", "beta", "lam"], []),
    ("episodes", ["eps", "tol"], []),  # 'ep' (episode) is not 'eps' (epsilon): short words match exactly
    ("raters", ["K", "agents", "env", "model", "offline", "prior", "seed"], []),  # not 'agents'
]


@pytest.mark.parametrize(("key", "valid", "want"), TABLE, ids=[t[0] for t in TABLE])
def test_hint_table(key, valid, want):
    assert close_keys(key, valid) == want


def test_parts_are_canonical_words():
    assert parts("pi_learning_rate") == ["pi", "lr"]
    assert parts("noise.std") == parts("noise_sd") == ["noise", "sd"]
    assert parts("numSamples") == parts("n_samples") == ["n", "sample"]
    assert parts("max_iterations") == parts("max-steps") == ["max", "iter"]


def test_constrained_config_points_at_pi_lr():
    with pytest.raises(
        ConfigError, match=r"config\.pi_learning_rate = 0\.1: unknown key; did you mean 'pi_lr'\?"
    ):
        TrainConfig.from_dict({"pi_learning_rate": 0.1})


def test_pspl_misplaced_rater_section_points_at_the_competence_field():
    with pytest.raises(ConfigError) as exc:
        validate_config({"env": {"name": "riverswim"}, "raters": {"lam": 3.0}})
    assert exc.value.field == "raters"
    assert "did you mean one of 'model.lam', 'offline.lam'?" in str(exc.value)
    assert "'agents'" not in str(exc.value).split("(valid")[0]
    with pytest.raises(ConfigError, match=r"did you mean 'options\.dpo_lr'\?"):
        resolve_config({"dpo": {"dpo_lrate": 0.1}})


@pytest.mark.parametrize(
    ("command", "want"),
    [
        ("train", ["algo", "config", "cost-limit", "device", "env", "log-dir", "preferences", "seed",
                   "threads", "total-steps", "wandb"]),
        ("pspl", ["algo", "config", "device", "env", "log-dir", "no-plots", "no-train", "seed", "wandb"]),
    ],
)  # fmt: skip
def test_sweep_lists_each_user_facing_key_once(command, want):
    keys = _user_keys(get_command(command), ADAPTERS[command])
    assert keys == want  # no env-id / out-dir / resume-dir / config-file, seed once


def test_prefrl_offline_file_refuses_a_misspelt_rater_competence(tmp_path):
    from bayescrl.prefrl.loop import _load_offline
    from bayescrl.utils.errors import DataError

    rec = {"x0": [0.0, 1.0], "x1": [1.0, 0.0], "y": 0}
    path = tmp_path / "off.json"
    path.write_text(json.dumps({"rater": {"id": "log", "lamda": 300}, "records": [rec]}))
    with pytest.raises(DataError, match=r"offline\.rater\.lamda = 300: unknown key; did you mean 'lam'\?"):
        _load_offline(str(path), 2, ["a"])
    path.write_text(json.dumps({"rater": {"id": "log"}, "records": [rec, {**rec, "why": 1}]}))
    with pytest.raises(DataError, match=r"offline\.records\.why\[1\] = 1: unknown key"):
        _load_offline(str(path), 2, ["a"])

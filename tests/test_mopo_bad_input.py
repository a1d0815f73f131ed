"""``bayescrl mopo`` refuses bad input with one line and exit status 2 (tabular, synthetic, your own data)."""

import pytest
from cli_utils import run

from bayescrl.commands.mopo import check_config
from bayescrl.utils import load_yaml


@pytest.mark.parametrize(
    ("config", "setting", "words"),
    [
        ("tabular_mopo.yaml", "tau=-0.5", ["tau = -0.5", "> 0"]),
        ("tabular_exact.yaml", "tau=0", ["tau = 0", "> 0"]),
        ("sanity.yaml", "tau=[0.1, -1]", ["tau[1] = -1", "> 0"]),  # refused before the first run
        ("motivating.yaml", "mopo.tau=-0.3", ["mopo.tau = -0.3", "> 0"]),
        ("tabular_mopo.yaml", "mopo.runs=0", ["mopo.runs = 0"]),
        ("tabular_mopo.yaml", "mopo.eps=-0.1", ["mopo.eps = -0.1", ">= 0"]),  # was run as eps = 0
        ("tabular_mopo.yaml", "mopo.beta=-1", ["mopo.beta = -1", "> 0"]),
        ("tabular_mopo_lb.yaml", "mopo_lb.gamma=2", ["mopo_lb.gamma = 2", "(0, 1]"]),
        ("tabular_mopo.yaml", "mopo.batch=0", ["mopo.batch = 0"]),
        ("tabular_bayes.yaml", "raters=[{id: expert, beta: 1.0}, {id: crowd1}]", ["data.rater", "crowd2"]),
        # engine options are checked by name before any fit (they used to be passed on unchecked:
        # a traceback for a non-mapping or an svi typo, silently ignored by laplace)
        ("tabular_bayes.yaml", "bradley_terry.engine_options=5", ["bradley_terry.engine_options = 5"]),
        ("tabular_bayes.yaml", "bradley_terry.engine_options={foo: 1}", ["engine_options.foo", "unknown"]),
        ("tabular_bayes.yaml", "bradley_terry.seed=-1", ["bradley_terry.seed = -1", ">= 0"]),
        ("trl_format.yaml", "train.tau=-1", ["train.tau = -1", "> 0"]),  # before any model is loaded
        ("trl_format.yaml", "train.batch_size=0", ["train.batch_size = 0"]),
        ("trl_format.yaml", "train.epsilon=-1", ["train.epsilon = -1", ">= 0"]),  # the field as written
        ("trl_format.yaml", "train.beta=[0.9, 2]", ["train.beta[1] = 2", "(0, 1]"]),
        # mode lm, every key and value checked by its config dataclass before any work
        ("trl_format.yaml", "data.format=jsonl", ["data.format = 'jsonl'", "trl"]),
        ("trl_format.yaml", "progress.log_evry=5", ["progress.log_evry", "did you mean 'log_every'"]),
        ("trl_format.yaml", "threads=0", ["threads = 0", ">= 1"]),
        ("trl_format.yaml", "bradley_terry={feature_dim: 0}", ["bradley_terry.feature_dim = 0"]),
        ("trl_format.yaml", "device=gpu", ["device = 'gpu'", "cpu, cuda"]),
        ("lm_tiny.yaml", "sweep.thresholds=[[0.6]]", ["sweep.thresholds[0] = [0.6]", "2 numbers"]),
        ("lm_tiny.yaml", "sweep.thresholds=[[0.6, 1.5]]", ["sweep.thresholds[0] = 1.5", "[0, 1]"]),
        ("lm_tiny.yaml", "methods=[mopo, dpo_jiont]", ["methods[1] = 'dpo_jiont'", "'dpo_joint'"]),
        ("lm_tiny.yaml", "task.l_high=3", ["task.l_high = 3", "task.l_low = 6"]),
        ("lm_tiny.yaml", "task.l_hgh=3", ["task.l_hgh", "did you mean 'l_high'"]),
        ("lm_tiny.yaml", "model.sft_steps=0", ["model.sft_steps = 0", ">= 1"]),
        ("lm_tiny.yaml", "scalarise_weights=[[0, 0, 0]]", ["scalarise_weights[0]", "not all be 0"]),
        ("lm_tiny.yaml", "hv_reference=[0]", ["hv_reference = [0]", "2 numbers"]),
        ("lm_tiny.yaml", "seed=-1", ["seed = -1", ">= 0"]),
        ("textgen_assistant.yaml", "threads=0", ["threads = 0", ">= 1"]),
        ("textgen_assistant.yaml", "ric.steps=0", ["ric.steps = 0", ">= 1"]),
    ],
)
def test_one_line_exit_2(config, setting, words, tmp_path, capsys):
    extra = ["--model", str(tmp_path)] if config.startswith("trl") else []
    code, err = run(
        ["mopo", f"examples/mopo/{config}", "--out", str(tmp_path / "o"), "--set", setting, *extra], capsys
    )
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert all(w in lines[0] for w in words), lines[0]
    assert not (tmp_path / "o").exists()  # refused before the output folder is made


def test_lm_model_directory_is_checked_before_the_data_is_read(tmp_path, capsys):
    """``--model`` without config.json stops the run up front: no output folder, the data not read (a file
    that is not JSON would be named otherwise)."""
    bad = tmp_path / "prefs.jsonl"
    bad.write_text("not json\n")
    args = ["mopo", "examples/mopo/trl_format.yaml", "--model", str(tmp_path), "--out", str(tmp_path / "o")]
    code, err = run([*args, "--set", f"data.path={bad}"], capsys)
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert code == 2 and len(lines) == 1, err
    assert "model.path = " in lines[0] and "no config.json" in lines[0], lines[0]
    assert not (tmp_path / "o").exists()


def test_every_bradley_terry_option_is_a_valid_key():
    cfg = load_yaml("examples/mopo/tabular_bayes.yaml")
    cfg["bradley_terry"] = {**cfg["bradley_terry"], "beta_prior_sd": 1.0, "seed": 3, "engine_options": {}}
    check_config(cfg)  # no ConfigError


def test_sweep_check_of_an_lm_run_takes_its_model_and_device_flags(tmp_path):
    """A sweep's check of ``mopo CONFIG --model PATH`` sees ``--model`` (the config names none) and
    ``--device``, as the command does."""
    from bayescrl.commands.mopo import sweep_check
    from bayescrl.utils import ConfigError

    (tmp_path / "config.json").write_text('{"n_positions": 64}')
    p = {"config_path": "examples/mopo/trl_format.yaml", "overrides": (), "resume": False}
    sweep_check({**p, "model_path": str(tmp_path), "device": "cpu"})  # no ConfigError
    with pytest.raises(ConfigError, match="model.path = None"):
        sweep_check({**p, "model_path": None, "device": None})
    with pytest.raises(ConfigError, match="--device = 'gpu'"):
        sweep_check({**p, "model_path": str(tmp_path), "device": "gpu"})
    with pytest.raises(ConfigError, match="train.max_length = 128.*64 tokens"):
        long = ("train.max_length=128",)
        sweep_check({**p, "overrides": long, "model_path": str(tmp_path), "device": None})

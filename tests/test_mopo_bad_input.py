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
    assert not (tmp_path / "o" / "results.json").exists()


def test_every_bradley_terry_option_is_a_valid_key():
    cfg = load_yaml("examples/mopo/tabular_bayes.yaml")
    cfg["bradley_terry"] = {**cfg["bradley_terry"], "beta_prior_sd": 1.0, "seed": 3, "engine_options": {}}
    check_config(cfg)  # no ConfigError

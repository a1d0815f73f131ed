"""Shared helpers: config overrides, error messages, JSON writing and the CLI's error handling."""

import json
import math

import numpy as np
import pytest
import torch

from bayescrl.cli import main
from bayescrl.utils import ConfigError, apply_overrides, load_yaml, to_jsonable, write_json


def test_apply_overrides_nested_and_typed():
    cfg = {"bandit": {"K": 50, "d": 6}, "agents": ["ps"]}
    out = apply_overrides(cfg, ["bandit.K=10", "offline.beta=2.5", "agents=[ps, lints]"])
    assert out == {"bandit": {"K": 10, "d": 6}, "agents": ["ps", "lints"], "offline": {"beta": 2.5}}
    assert cfg["bandit"]["K"] == 50  # the input is not mutated


@pytest.mark.parametrize("bad", ["bandit.K", "=3", "bandit.K.x=1"])
def test_apply_overrides_rejects_malformed(bad):
    with pytest.raises(ConfigError, match="--set"):
        apply_overrides({"bandit": {"K": 50}}, [bad])


def test_config_error_names_field_index_and_value():
    err = ConfigError("preferences.y", 3, "must be 0 or 1", index=7)
    assert str(err) == "preferences.y[7] = 3: must be 0 or 1"
    assert (err.field, err.index, err.value) == ("preferences.y", 7, 3)


def test_to_jsonable_and_write_json(tmp_path):
    obj = {"a": np.arange(3), "b": torch.tensor([1.5, math.nan]), "c": np.float32(2.0), "d": (np.int64(4),)}
    assert to_jsonable(obj) == {"a": [0, 1, 2], "b": [1.5, None], "c": 2.0, "d": [4]}
    path = write_json(tmp_path / "sub" / "r.json", obj)
    assert json.loads(path.read_text())["b"] == [1.5, None]


def test_load_yaml_errors(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_yaml(tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_yaml(tmp_path / "list.yaml")


def test_cli_help_lists_every_family(capsys):
    main(["--help"])  # returns normally (exit status 0)
    text = capsys.readouterr().out
    for name in ["bandit", "compare", "demo", "evaluate", "infer", "mopo", "pspl", "simulate", "train"]:
        assert name in text


def test_cli_unknown_command_exits_nonzero():
    with pytest.raises(SystemExit) as exc:
        main(["no-such-command"])
    assert exc.value.code != 0


def test_yaml_scientific_notation_is_a_float_in_files_and_overrides(tmp_path):
    from bayescrl.utils.io import apply_overrides, load_yaml

    f = tmp_path / "c.yaml"
    f.write_text("lr: 1e-4\nsteps: 1e3\nplain: 3\nname: e5\nquoted: '1e3'\nneg: -2.5E+3\n")
    d = load_yaml(f)
    assert d == {"lr": 1e-4, "steps": 1000.0, "plain": 3, "name": "e5", "quoted": "1e3", "neg": -2500.0}
    assert isinstance(d["plain"], int)
    assert apply_overrides({}, ["a.b=3e-2", "c=1e3"]) == {"a": {"b": 0.03}, "c": 1000.0}

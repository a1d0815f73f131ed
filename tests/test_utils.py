"""Shared helpers: config overrides, error messages, JSON writing and the CLI's error handling."""

import ast
import dataclasses
import json
import math
import re
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch

from bayescrl.cli import main
from bayescrl.utils import ConfigError, apply_overrides, load_yaml, to_jsonable, write_json
from bayescrl.utils.checks import boolean, choice, number, positive_int
from bayescrl.utils.config import Config


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


def test_per_run_samplers_draw_each_runs_rows_from_its_own_stream():
    """With one generator per run, run r's rows of every sampler are what run r's generator alone gives
    (so a run does not depend on how many runs share the batch); one generator is torch's own draw."""
    from bayescrl.utils.seeding import bernoulli, draw, multinomial, per_run, randint, run_generators

    assert [g.initial_seed() for g in run_generators(7, 3)] == [7, 8, 9]
    assert [g.initial_seed() for g in run_generators(7, 2, key=lambda s: 10 * s)] == [70, 80]
    p = torch.full((6, 4), 0.3, dtype=torch.float64)
    samplers = {
        "randn": lambda g, n: draw(torch.randn, (n, 4), g, dtype=torch.float64, device="cpu"),
        "rand_dim1": lambda g, n: draw(torch.rand, (2, n, 3), g, dtype=torch.float64, device="cpu", dim=1),
        "bernoulli": lambda g, n: bernoulli(p[:n], g),
        "randint": lambda g, n: randint(5, (n, 4), g),
        "multinomial": lambda g, n: multinomial(p[:n].float(), 1, g),
        "per_run": lambda g, n: per_run(lambda x, gg: torch.randn(x.shape, generator=gg), p[:n], g),
    }
    for name, f in samplers.items():
        together = f(run_generators(3, 3), 6)
        alone = [f(run_generators(3 + r, 1), 2) for r in range(3)]
        dim = 1 if name == "rand_dim1" else 0
        assert torch.equal(together, torch.cat(alone, dim)), name
        one = f(torch.Generator().manual_seed(3), 6)
        assert torch.equal(one, f(run_generators(3, 1), 6)), name  # a list of one is the plain stream
    with pytest.raises(ValueError, match="cannot be split"):
        draw(torch.randn, (5, 2), run_generators(0, 2), dtype=torch.float64, device="cpu")


def test_trim_jsonl_keeps_records_up_to_the_checkpoint_and_drops_only_a_torn_last_line(tmp_path, caplog):
    from bayescrl.utils.errors import DataError
    from bayescrl.utils.io import trim_jsonl

    log = tmp_path / "metrics.jsonl"
    log.write_text('{"step": 1}\n{"step": 2}\n{"step": 3}\n{"step": 4, "lo')
    with caplog.at_level("WARNING", logger="bayescrl"):
        trim_jsonl(log, "step", 2)
    assert log.read_text() == '{"step": 1}\n{"step": 2}\n'
    assert "half-written last line" in caplog.text
    log.write_text('{"step": 1}\n{"step": 2, "lo\n{"step": 3}\n')  # damage before the end: refused
    with pytest.raises(DataError, match=r"line 2: .*rerun with --resume"):
        trim_jsonl(log, "step", 3)
    trim_jsonl(tmp_path / "absent.jsonl", "step", 3)  # nothing to trim


@dataclasses.dataclass
class _Inner(Config):
    SECTION: ClassVar[str] = "inner"
    n: int = 2
    """a count"""
    rate: float = 0.5
    """a probability"""

    def validate(self) -> None:
        self.n = positive_int(self.n, self.key("n"), 1)
        number(self.rate, "rate", 0.0, 1.0)  # named without its section: from_dict adds it


@dataclasses.dataclass
class _Outer(Config):
    seed: int = 0
    """a seed"""
    inner: _Inner = dataclasses.field(default_factory=_Inner)
    """a section"""
    mode: str = "a"
    """a choice"""

    def validate(self) -> None:
        choice(self.mode, "mode", ("a", "b"))


def test_config_dataclasses_build_check_and_name_fields():
    cfg = _Outer.from_dict({"inner": {"n": 3.0}, "mode": "b", "name": "x"}, extra={"name": None})
    assert cfg.to_dict() == {"seed": 0, "inner": {"n": 3, "rate": 0.5}, "mode": "b"}
    assert isinstance(cfg.inner.n, int) and _Outer.defaults() == {
        "seed": 0,
        "inner": {"n": 2, "rate": 0.5},
        "mode": "a",
    }
    assert _Outer.schema() == {"seed": None, "inner": {"n": None, "rate": None}, "mode": None}
    cases = [
        ({"inner": {"n": 0}}, "inner.n = 0: must be an integer >= 1"),
        ({"inner": {"rate": 2}}, "inner.rate = 2: must be in [0, 1]"),
        ({"inner": 3}, "inner = 3: must be a mapping"),
        ({"inner": {"m": 1}}, "inner.m = 1: unknown key"),
        ({"extra": {"rate": 1}}, "extra = {'rate': 1}: unknown key; did you mean 'inner.rate'?"),
        ({"mode": "bb"}, "mode = 'bb': must be one of ['a', 'b']; did you mean 'b'?"),
        ({"name": "x"}, "name = 'x': unknown key"),
    ]
    for data, message in cases:
        with pytest.raises(ConfigError) as exc:
            _Outer.from_dict(data)
        assert str(exc.value).startswith(message), (data, str(exc.value))


def test_shared_scalar_validators():
    assert number(3, "x", 0.0, strict=True) == 3.0 and number(-math.inf, "x", allow_inf=True) == -math.inf
    assert number(np.float32(0.5), "x", 0.0, 1.0) == 0.5
    for value, kwargs, reason in [
        ("3", {}, "must be a finite number"),
        (True, {}, "must be a finite number"),
        (math.nan, {"allow_inf": True}, "must be a number"),
        (math.inf, {}, "must be a finite number"),
        (0.0, {"low": 0.0, "strict": True}, "must be > 0"),
        (-1, {"low": 0.0}, "must be >= 0"),
        (1.5, {"low": 0.0, "high": 1.0, "strict": True}, "must be in (0, 1]"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(f"x = {value!r}: {reason}")):
            number(value, "x", **kwargs)
    assert choice(True, "c", (True, "auto")) is True
    with pytest.raises(ConfigError, match="must be one of"):
        choice(1, "c", (True, False))  # 1 == True, but a number is not a flag
    with pytest.raises(ConfigError, match="c = 1: must be true or false"):
        boolean(1, "c")
    with pytest.raises(ConfigError, match=r"c\[2\] = 0: must be an integer >= 1"):
        positive_int(0, "c", index=2)


@pytest.mark.parametrize(
    "module",
    [
        "bayescrl/bandits/config.py",
        "bayescrl/pbrl/experiment.py",
        "bayescrl/pbrl/diffusion/experiment.py",
        "bayescrl/mopo/textgen/run.py",
        "bayescrl/mopo/config.py",
    ],
)
def test_every_config_field_is_documented(module):
    """Each field of a :class:`Config` dataclass carries a docstring under it (as CleanRL's ``Args``)."""
    tree = ast.parse((Path(__file__).resolve().parents[1] / module).read_text())
    configs, classes = {"Config", "MOPOLMConfig"}, []
    for c in tree.body:  # subclasses of Config, directly or through a class of the module
        if isinstance(c, ast.ClassDef) and any(getattr(b, "id", "") in configs for b in c.bases):
            configs.add(c.name)
            classes.append(c)
    assert classes
    for cls in classes:
        body = cls.body
        for i, node in enumerate(body):
            if isinstance(node, ast.AnnAssign) and "ClassVar" not in ast.unparse(node.annotation):
                doc = body[i + 1] if i + 1 < len(body) else None
                ok = (
                    isinstance(doc, ast.Expr)
                    and isinstance(doc.value, ast.Constant)
                    and isinstance(doc.value.value, str)
                )
                assert ok, f"{module}: {cls.name}.{ast.unparse(node.target)} has no docstring"

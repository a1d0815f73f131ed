"""A sweep's run is its command's library call (the command's ``sweep_adapter``), never the command line
parsed again: the run's process makes it without click, and writes what the command line the sweep shows
for it (``--dry-run``, ``sweep.json``) writes, bit for bit but for wall-clock fields."""

import ast
import json
import re
import shutil
import sys
import types
from pathlib import Path

import click
import pytest
import yaml

from bayescrl.cli import main
from bayescrl.commands.sweepable import SweepAdapter
from bayescrl.sweep import runner
from bayescrl.sweep.child import dispatch
from bayescrl.sweep.spec import ADAPTERS, SWEEPABLE, build_runs, parse_sweep, validate_runs
from bayescrl.sweep.target import RUN
from bayescrl.utils.errors import ConfigError

EX = Path(__file__).resolve().parents[1] / "examples"


def _no_clock(data):
    """``data`` without its wall-clock fields (seconds and rates: ``*_s``), the only ones allowed to
    differ between two runs of the same settings."""
    if isinstance(data, dict):
        return {k: _no_clock(v) for k, v in data.items() if not k.endswith("_s")}
    if isinstance(data, list):
        return [_no_clock(v) for v in data]
    return data


def _no_click_parsing(monkeypatch) -> None:
    """From here on, parsing a command line fails the test."""

    def refuse(*_a, **_k):
        raise AssertionError("a sweep run parsed a command line")

    monkeypatch.setattr(click.Command, "make_context", refuse)
    monkeypatch.setattr(click.Command, "main", refuse)


def _run_both_ways(spec: dict, tmp_path: Path, monkeypatch, files: tuple[str, ...]) -> None:
    """The sweep's run (its runner task's call, as the run's process makes it) and the command line it
    shows for that run write the same ``files``."""
    spec = parse_sweep(spec)
    [run] = build_runs(spec, tmp_path / "sweep")
    validate_runs(spec, [run])
    task = runner._task(run, tmp_path / "sweep", spec, retries=0)
    assert task["call"][:2] == [RUN, spec.command] and json.loads(task["call"][2]) == run.params
    cli_out = tmp_path / "cli"
    argv = [str(cli_out) if a == str(run.out) else a for a in run.argv]
    main(argv)
    with monkeypatch.context() as m:
        _no_click_parsing(m)
        dispatch(task["call"])
    for name in files:
        a, b = (run.out / name).read_text(), (cli_out / name).read_text()
        if name.endswith(".jsonl"):
            a, b = ([_no_clock(json.loads(x)) for x in t.splitlines()] for t in (a, b))
        else:
            a, b = _no_clock(json.loads(a)), _no_clock(json.loads(b))
        assert a == b, name


def test_train_run_of_a_sweep_is_the_command_line_without_click(tmp_path, monkeypatch):
    spec = {
        "command": "train",
        "grid": {"algo": ["ecop"], "env": ["bayescrl/SmallCMDP-v0"], "seed": [3]},
        "args": {"total-steps": 200, "cost-limit": 3},
        "set": {"config.n_envs": 2, "config.rollout_steps": 50},
    }
    _run_both_ways(spec, tmp_path, monkeypatch, ("metrics.json", "curves.json", "metrics.jsonl", "run.json"))


@pytest.mark.parametrize(
    "spec, files",
    [
        (
            {"command": "bandit", "grid": {"algo": ["ps"], "seed": [1]}, "set": {"bandit.T": 15}},
            ("results.json",),
        ),
        (
            {
                "command": "pspl",
                "grid": {
                    "config": [str(EX / "pspl" / "riverswim_default.yaml")],
                    "algo": ["pspl"],
                    "seed": [2],
                },
                "args": {"no-plots": True},
                "set": {"K": 3, "offline.N": 20, "seed": 2},
            },
            ("results.json",),
        ),
        (
            {
                "command": "mopo",
                "grid": {"config": [str(EX / "mopo" / "tabular_mopo.yaml")], "seed": [4]},
                "set": {"mopo.steps": 50, "mopo.runs": 1},
            },
            ("results.json",),
        ),
    ],
    ids=["bandit", "pspl", "mopo"],
)
def test_every_command_run_of_a_sweep_writes_what_its_command_line_writes(spec, files, tmp_path, monkeypatch):
    _run_both_ways(spec, tmp_path, monkeypatch, files)


def test_a_user_error_in_a_run_is_one_line_and_exit_status_2(tmp_path, capsys):
    """The run's process reports a ``ConfigError`` as ``bayescrl`` does (the runner does not retry 2)."""
    spec = parse_sweep({"command": "bandit", "grid": {"seed": [0]}, "args": {"device": "tpu"}})
    [run] = build_runs(spec, tmp_path)
    with pytest.raises(SystemExit) as exc:
        dispatch([RUN, "bandit", json.dumps(run.params)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith("error: --device = 'tpu'") and len(err.splitlines()) == 1


def test_each_command_gives_its_own_adapter_and_the_sweep_none_of_its_internals():
    """Every sweepable command's module exports a ``SweepAdapter`` of its own click command; the sweep
    package imports no command module but the adapter's type (it finds them through the CLI's table)."""
    for name in SWEEPABLE:
        if name == "call":
            continue
        adapter = ADAPTERS[name]
        assert isinstance(adapter, SweepAdapter) and adapter.command.name == name
        assert callable(adapter.call) and callable(adapter.check)
    sweep = Path(__file__).resolve().parents[1] / "bayescrl" / "sweep"
    for path in sweep.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                assert not name.startswith("bayescrl.commands") or name == "bayescrl.commands.sweepable", (
                    path.name,
                    name,
                )


def test_resume_call_is_the_resume_command_line(tmp_path):
    """A ``train`` run resumes with ``train --resume OUT`` and the options a resumed run accepts; a
    ``mopo`` run with its own command line plus ``--resume``; ``bandit`` restarts (no resume call)."""
    spec = parse_sweep(
        {
            "command": "train",
            "grid": {"algo": ["ecop"], "env": ["e"], "seed": [0]},
            "args": {"total-steps": 50},
        }
    )
    [run] = build_runs(spec, tmp_path)
    p, r = run.params, run.resume_params
    assert (p["algo"], p["seed"], p["total_steps"], p["resume_dir"]) == ("ecop", 0, 50.0, None)
    assert (r["algo"], r["seed"], r["total_steps"], r["resume_dir"]) == (None, None, 50.0, str(run.out))
    assert r["out_dir"] == p["out_dir"] == str(run.out) and not r["progress"]
    task = runner._task(run, tmp_path, spec, retries=0)
    assert json.loads(task["resume_call"][2]) == r
    spec = parse_sweep({"command": "mopo", "grid": {"config": [str(EX / "mopo" / "tabular_mopo.yaml")]}})
    [run] = build_runs(spec, tmp_path)
    assert run.resume_params == {**run.params, "resume": True}
    spec = parse_sweep({"command": "bandit", "grid": {"seed": [0]}})
    [run] = build_runs(spec, tmp_path)
    assert run.resume_params is None and runner._task(run, tmp_path, spec, 0)["resume_call"] is None
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_the_architecture_pages_worked_example_command_runs_alone_and_in_a_sweep(
    tmp_path, monkeypatch, capsys
):
    """docs/architecture.md adds a command ``lp`` with its sweep adapter: its module, as printed there,
    solves the small CMDP (J* = (1 - bonus) H + bonus min(d, H - 1)), and a sweep over the cost limit
    validates, runs and reports it."""
    from bayescrl import cli
    from bayescrl.sweep import spec as sweep_spec

    page = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text()
    section = page.split("## Worked example: a new command", 1)[1]
    source = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    module = types.ModuleType("_doc_lp")
    exec(compile(source, "docs/architecture.md", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, "_doc_lp", module)
    monkeypatch.setitem(cli.COMMANDS, "lp", ("_doc_lp:lp", "Exact optimum of the small CMDP."))
    monkeypatch.setattr(sweep_spec, "SWEEPABLE", (*sweep_spec.SWEEPABLE, "lp"))
    main(["lp", "--limit", "3", "--out", str(tmp_path / "single")])
    assert "J* = 6.5, multiplier 0.5" in capsys.readouterr().out
    yaml_text = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    spec = parse_sweep(yaml.safe_load(yaml_text))
    runs = build_runs(spec, tmp_path / "sweep")
    validate_runs(spec, runs)
    assert [r.argv[:5] for r in runs][1] == ["lp", "--limit", "3", "--horizon", "10"]
    for run in runs:
        dispatch(runner._task(run, tmp_path / "sweep", spec, retries=0)["call"])
    same = (tmp_path / "sweep" / runs[1].id / "results.json").read_text()
    assert same == (tmp_path / "single" / "results.json").read_text()
    values = [json.loads((r.out / "results.json").read_text())["value"] for r in runs]
    assert values == pytest.approx([5.0 + 0.5 * min(d, 9) for d in (0.5, 3, 20)])
    bad = parse_sweep({**spec.raw, "grid": {"limit": [-1], "horizon": [10]}})
    with pytest.raises(ConfigError, match=r"--limit = -1.0: must be in \[0, inf\] \(grid point limit=-1"):
        validate_runs(bad, build_runs(bad, tmp_path / "bad"))

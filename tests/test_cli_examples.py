"""``bayescrl examples list / copy DIR``: every file of examples/, shipped in the wheel, copied verbatim."""

import itertools
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from bayescrl.cli import main

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted(
    p.relative_to(ROOT / "examples").as_posix() for p in (ROOT / "examples").rglob("*") if p.is_file()
)


def test_list_names_every_example_file(capsys):
    main(["examples", "list"])
    assert capsys.readouterr().out.split() == FILES
    main(["examples", "list", "pspl"])
    assert capsys.readouterr().out.split() == [f for f in FILES if f.startswith("pspl/")]


def test_copy_writes_identical_files_and_refuses_to_overwrite(tmp_path, capsys):
    dest = tmp_path / "ex"
    main(["examples", "copy", str(dest)])
    assert f"copied {len(FILES)} example files" in capsys.readouterr().out
    for f in FILES:
        assert (dest / f).read_bytes() == (ROOT / "examples" / f).read_bytes()
    (dest / FILES[0]).write_text("edited")
    with pytest.raises(SystemExit) as exc:
        main(["examples", "copy", str(dest)])
    assert exc.value.code == 2 and "--force" in capsys.readouterr().err
    assert (dest / FILES[0]).read_text() == "edited"  # nothing overwritten
    main(["examples", "copy", str(dest), "--force", "--family", FILES[0].split("/")[0]])
    assert (dest / FILES[0]).read_bytes() == (ROOT / "examples" / FILES[0]).read_bytes()


def test_wheel_ships_the_examples(tmp_path):
    """Build a wheel from a copy of the sources (no network: no build isolation, no dependencies)."""
    src = tmp_path / "src"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "_examples")
    shutil.copytree(ROOT / "bayescrl", src / "bayescrl", ignore=skip)
    shutil.copytree(ROOT / "examples", src / "examples", ignore=skip)
    for f in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE"):
        shutil.copy(ROOT / f, src / f)
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
    proc = subprocess.run([*cmd, "-w", str(tmp_path / "whl"), str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = (tmp_path / "whl").glob("bayescrl-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"bayescrl/_examples/{f}" for f in FILES} <= names


def test_copied_examples_validate_from_any_folder(tmp_path, monkeypatch, capsys):
    """``bayescrl examples copy DIR`` (into a clone's root, beside benchmarks/), then every shipped config
    validates from another folder: file paths inside a config resolve against the config file."""
    from bayescrl.bandits.config import resolve_config
    from bayescrl.models.spec import from_spec
    from bayescrl.prefrl.spec import parse_preference_spec
    from bayescrl.sweep.spec import validator
    from bayescrl.utils.io import apply_overrides, load_yaml

    (tmp_path / "benchmarks").symlink_to(ROOT / "benchmarks")  # the clone's benchmark scripts (call sweeps)
    main(["examples", "copy", str(tmp_path / "my-examples")])
    ex = tmp_path / "my-examples"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    model = tmp_path / "model"  # stands for --model PATH: a local Hugging Face model directory
    model.mkdir()
    (model / "config.json").write_text('{"n_positions": 2048}')
    checked = 0
    for f in sorted(ex.rglob("*.yaml")):
        family, rel = f.parent.name, str(f.relative_to(tmp_path))
        if family == "warmpref":
            cfg = load_yaml(f)
            grid = cfg.pop("sweep", None) or {}  # a bandit sweep: {key: [values]}, every cell checked
            for cell in itertools.product(*grid.values()):
                sets = [f"{k}={json.dumps(v)}" for k, v in zip(grid, cell, strict=True)]
                resolve_config(apply_overrides(cfg, sets))
        elif family == "pspl":
            validator("pspl")({"config": f"../{rel}"})  # a relative config path works too
        elif family == "mopo":  # a config of your own data takes its model from --model (a local directory)
            cfg = load_yaml(f)
            data, given = cfg.get("data"), (cfg.get("model") or {}).get("path")
            own = cfg.get("mode") == "lm" and isinstance(data, dict) and data.get("path") and not given
            validator("mopo")({"config_path": str(f), **({"model_path": str(model)} if own else {})})
        elif family in ("ecop", "acpo"):
            validator("train")({"config_file": str(f)})
        elif family == "prefrl":
            parse_preference_spec(f)
        elif family == "core":
            from_spec(f)
        elif family == "sweeps":
            try:
                main(["sweep", str(f), "--out", str(tmp_path / "o"), "--dry-run"])
            except SystemExit as exc:
                raise AssertionError(f"{rel}: {capsys.readouterr().err}") from exc
        else:
            raise AssertionError(f"no validator for {rel}")
        checked += 1
    assert checked >= 70 and not (tmp_path / "o").exists()

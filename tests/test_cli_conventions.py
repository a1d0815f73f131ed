"""One behaviour across commands: output folders (--out required, --force/--resume), -q, spread, closing
lines, and the small errors that named the wrong thing."""

from __future__ import annotations

import json
import statistics
import warnings
from pathlib import Path

import pytest

from bayescrl.cli import main
from bayescrl.utils.spread import fmt_num, fmt_spread, spread

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
TINY_BANDIT = ["--set", "bandit.T=5", "--set", "agents=[ps]", "--seeds", "2"]


def _run(args: list[str], capsys) -> tuple[int, str, str]:
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.mark.parametrize(
    "args, hint",
    [
        (["bandit", str(EX / "warmpref" / "default.yaml"), *TINY_BANDIT], "--force"),
        (["pspl", str(EX / "pspl" / "riverswim_default.yaml")], "--force"),
        (["mopo", str(EX / "mopo" / "tabular_exact.yaml")], "--force"),
        (["mopo", str(EX / "mopo" / "lm_tiny.yaml")], "--resume"),
        (["compare", str(EX / "core" / "default_spec.yaml")], "--force"),
        (["demo"], "--force"),
        (["train", "--algo", "ecop", "--env", "bayescrl/PointCircle-v0", "--total-steps", "100"], "--resume"),
        (["infer", str(EX / "core" / "default_spec.yaml")], "--force"),
    ],
)
def test_a_non_empty_out_is_refused_before_any_work(args, hint, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text("mine")
    target = out / "results.json" if args[0] == "infer" else out  # infer writes a file: --out FILE
    code, _, err = _run([*args, "--out", str(target)], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    what = "already exists" if args[0] == "infer" else "already holds 1 file (results.json)"
    assert lines[0].startswith(f"error: --out = '{target}': {what}") and hint in err
    assert (
        sorted(p.name for p in out.iterdir()) == ["results.json"]
        and (out / "results.json").read_text() == "mine"
    )


def test_out_is_required_and_force_writes_into_a_folder(tmp_path, capsys):
    cfg = str(EX / "warmpref" / "default.yaml")
    code, _, err = _run(["bandit", cfg, *TINY_BANDIT], capsys)
    assert code == 2 and "--out" in err
    code, _, err = _run(
        ["train", "--algo", "ecop", "--env", "bayescrl/PointCircle-v0", "--total-steps", "9"], capsys
    )
    assert code == 2 and err.startswith("error: --out = None: give the output folder")
    out = tmp_path / "b"
    out.mkdir()
    (out / "notes.txt").write_text("kept")
    code, stdout, err = _run(["bandit", cfg, *TINY_BANDIT, "--out", str(out), "--force"], capsys)
    assert code == 0, err
    assert stdout.splitlines()[-1] == f"wrote {out.as_posix()}/: results.json, regret.png"
    assert (out / "notes.txt").read_text() == "kept"  # --force replaces its own files, never deletes others


def test_sweep_needs_resume_to_continue_and_takes_set(tmp_path, capsys, monkeypatch):
    import bayescrl.sweep.runner as runner
    from bayescrl.utils.errors import ConfigError

    smoke = str(EX / "sweeps" / "smoke.yaml")
    code, out, err = _run(
        ["sweep", smoke, "--out", str(tmp_path / "o"), "--dry-run", "--set", "grid.seed=[7]"], capsys
    )
    assert code == 0 and "2 runs valid" in out and "--seed 7" in out, err
    code, out, _ = _run(
        ["sweep", smoke, "--out", str(tmp_path / "o"), "--dry-run", "--set", "set.config.n_envs=3"], capsys
    )
    assert "config.n_envs=3" in out and "config.n_envs=2" not in out

    from bayescrl.sweep.spec import load_sweep

    done = tmp_path / "done"  # this very sweep's folder: only --resume continues it
    done.mkdir()
    (done / "sweep.json").write_text(json.dumps({"hash": load_sweep(smoke).hash}))
    code, _, err = _run(["sweep", smoke, "--out", str(done), "--backend", "local"], capsys)
    assert code == 2 and "already holds 1 file (sweep.json); pass --resume" in err

    def no_ray(*a, **k):
        raise ConfigError("--address", "auto", "cannot start/connect to Ray: no cluster")

    monkeypatch.setattr(runner, "run_all", no_ray)
    code, _, err = _run(["sweep", smoke, "--out", str(tmp_path / "new"), "--backend", "local"], capsys)
    assert code == 2 and "--address" in err
    assert not (tmp_path / "new").exists()  # no sweep.json (or folder) left behind
    (tmp_path / "old").mkdir()
    code, _, err = _run(["sweep", smoke, "--out", str(tmp_path / "old"), "--backend", "local"], capsys)
    assert code == 2 and (tmp_path / "old").is_dir() and not any((tmp_path / "old").iterdir())


def test_wrong_way_errors_name_the_right_thing(tmp_path, capsys):
    code, _, err = _run(["evaluate", str(tmp_path / "nonexistent")], capsys)
    assert code == 2 and err.startswith("error: RUN_DIR = ") and "resume" not in err
    code, _, err = _run(
        ["train", "--algo", "ecop", "--env", "bayescrl/PointCircle-v0", "--total-steps", "100"]
        + ["--preferences", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "r")],
        capsys,
    )
    assert code == 2 and err.startswith("error: --preferences = ") and "file not found" in err
    assert not (tmp_path / "r").exists()


def test_prefs_import_takes_a_one_rater_spec_without_rater(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "queries").mkdir(parents=True)
    seg = {"segment": 0, "obs": [[0.0]], "actions": [[0.0]], "features": [1.0]}
    pending = {"env": "e", "round": 1, "iteration": 1, "segment_length": 1, "raters": ["me"],
               "observation_names": None, "action_names": None,
               "queries": [{"id": "r1q0", "left": seg, "right": seg}]}  # fmt: skip
    (run / "queries" / "pending.json").write_text(json.dumps(pending))
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"round": 1, "labels": [{"query": "r1q0", "choice": "left"}]}))
    code, _, err = _run(["prefs", "import", str(run), str(labels)], capsys)
    assert code == 0, err
    answers = json.loads((run / "queries" / "answers.json").read_text())["answers"]
    assert answers == [{"query": "r1q0", "y": 0, "rater": "me"}]


def test_spread_is_sample_sd_with_a_t_interval():
    from scipy import stats

    xs = [3.0, 5.0, 4.0, 10.0]
    sp = spread(xs)
    assert sp.sd == pytest.approx(statistics.stdev(xs), rel=1e-12) and sp.n == 4
    lo, hi = stats.t.interval(0.95, 3, loc=statistics.fmean(xs), scale=statistics.stdev(xs) / 2)
    assert sp.ci95 == pytest.approx((lo, hi), rel=1e-12)
    assert fmt_spread(sp.mean, sp.sd, sp.n) == "5.5 ± 3.109 (n = 4)"
    one = spread([2.5])
    assert one.sd is None and one.ci95 is None and fmt_spread(one.mean, 0.0, 1) == "2.5 (n = 1)"  # no ± 0
    assert fmt_num(1.234e-5) == "1.234e-05" and fmt_num(0.0012345) == "0.001234"  # never rounded to 0


def test_pspl_prints_sample_sd(tmp_path, capsys):
    cfg = str(EX / "pspl" / "riverswim_default.yaml")
    args = ["pspl", cfg, "--seeds", "3", "--set", "K=2", "--set", "offline.N=5", "--set", "agents=[uniform]"]
    code, out, err = _run([*args, "--out", str(tmp_path / "p"), "--no-progress"], capsys)
    assert code == 0, err
    res = json.loads((tmp_path / "p" / "results.json").read_text())["agents"]["uniform"]
    per_seed = res["final_simple_regret_per_seed"]
    assert res["final_simple_regret_std"] == pytest.approx(statistics.stdev(per_seed), rel=1e-9)
    assert "(n = 3)" in out and out.splitlines()[-1].startswith(
        f"wrote {(tmp_path / 'p').as_posix()}/: results.json"
    )


def test_mopo_prints_a_rounded_table(tmp_path, capsys):
    code, out, err = _run(
        ["mopo", str(EX / "mopo" / "tabular_exact.yaml"), "--out", str(tmp_path / "m")], capsys
    )
    assert code == 0, err
    assert "{" not in out and "y2      1.53e-07" in out and "1           0.75  0.75  1" in out
    assert out.splitlines()[-1] == f"wrote {(tmp_path / 'm').as_posix()}/: results.json, policy.png"


def test_quiet_silences_bars_and_library_warnings(tmp_path, capsys):
    import sys
    import types

    from tqdm.auto import tqdm

    from bayescrl.utils.quiet import set_quiet

    cfg = str(EX / "warmpref" / "default.yaml")
    code, _, err = _run(["bandit", cfg, *TINY_BANDIT, "--out", str(tmp_path / "a")], capsys)
    assert code == 0 and "0/5 [" in err  # the progress bar
    code, _, err = _run(["-q", "bandit", cfg, *TINY_BANDIT, "--out", str(tmp_path / "b")], capsys)
    assert code == 0 and err == ""
    mods = {}
    for name, msg in (("peft.tuners.fake", "fan_in_fan_out is set to False"), ("bayescrl.fake", "ours")):
        mods[name] = types.ModuleType(name)  # a warning raised from that module
        exec(f"import warnings\ndef warn():\n    warnings.warn({msg!r}, UserWarning)", mods[name].__dict__)
    set_quiet(False)  # as every CLI call without -q does
    try:
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            set_quiet(True)
            mods["peft.tuners.fake"].warn()
            assert tqdm(range(3)).disable
            mods["bayescrl.fake"].warn()  # bayescrl's own still show
            set_quiet(False)
            mods["peft.tuners.fake"].warn()
        assert [str(w.message) for w in rec] == ["ours", "fan_in_fan_out is set to False"]
        assert not tqdm(range(3), file=sys.stderr).disable
    finally:
        set_quiet(False)

"""``bayescrl sweep``/``report`` without running anything: grid expansion, argv, validation, bad input,
the report's arithmetic against hand-computed numbers."""

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bayescrl.cli import main
from bayescrl.sweep.report import build_report, by_pattern, flatten, select, series
from bayescrl.sweep.spec import build_runs, parse_sweep, validate_runs
from bayescrl.utils.errors import ConfigError

SMOKE = Path(__file__).resolve().parents[1] / "examples" / "sweeps" / "smoke.yaml"


def _run(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code, capsys.readouterr()


def _write(tmp_path, text: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return path


TRAIN = """
command: train
grid: {algo: [ecop, ppo-lag], env: [bayescrl/PointCircle-v0], seed: [0, 1]}
args: {total-steps: 1000, cost-limit: [10]}
set: {config.pi_lr: [3.0e-4, 1.0e-3], config.n_envs: 2}
"""


def test_sweep_grid_is_the_product_and_each_run_is_the_single_command(tmp_path):
    spec = parse_sweep(__import__("yaml").safe_load(TRAIN))
    runs = build_runs(spec, tmp_path)
    assert len(runs) == 2 * 1 * 2 * 2  # algos x envs x pi_lr x seeds
    assert len({r.id for r in runs}) == len(runs)
    first = runs[0]
    assert first.id == "ecop_pi_lr=0.0003_s0"  # varying values only; env is fixed
    assert first.point == {"algo": "ecop", "env": "bayescrl/PointCircle-v0", "config.pi_lr": 3e-4, "seed": 0}
    assert first.argv == [
        "train",
        "--total-steps",
        "1000",
        "--cost-limit",
        "10",
        "--algo",
        "ecop",
        "--env",
        "bayescrl/PointCircle-v0",
        "--seed",
        "0",
        "--set",
        "config.n_envs=2",
        "--set",
        "config.pi_lr=0.0003",
        "--no-progress",
        "--out",
        str((tmp_path / first.id).resolve()),
    ]
    # resuming keeps only what --resume accepts
    assert first.resume_argv == [
        "train",
        "--resume",
        str(first.out),
        "--total-steps",
        "1000",
        "--no-progress",
        "--out",
        str(first.out),
    ]
    assert [r.point["seed"] for r in runs[:2]] == [0, 1]  # seed varies fastest
    validate_runs(spec, runs)  # all valid


def test_sweep_bandit_and_pspl_seed_each_run_alone(tmp_path):
    spec = parse_sweep(
        {"command": "bandit", "grid": {"algo": ["ps", "lints"], "seed": [3]}, "set": {"bandit.T": 20}}
    )
    runs = build_runs(spec, tmp_path)
    out = str((tmp_path / "ps_s3").resolve())
    # one seed per run (--seeds 1, seed=S): its result does not depend on which seeds share a batch
    assert runs[0].argv == [
        "bandit", "--seeds", "1", "--set", "seed=3", "--set", "bandit.T=20", "--set", "agents=[ps]",
        "--no-progress", "--out", out,
    ]  # fmt: skip
    assert runs[0].resume_argv is None  # bandit runs restart from scratch
    validate_runs(spec, runs)
    cfg = str(Path(__file__).resolve().parents[1] / "examples" / "pspl" / "riverswim_default.yaml")
    spec = parse_sweep({"command": "pspl", "grid": {"config": [cfg], "env": ["riverswim"], "algo": ["pspl"]}})
    (run,) = build_runs(spec, tmp_path)
    assert run.argv[:2] == ["pspl", cfg] and "env.name=riverswim" in run.argv and "agents=[pspl]" in run.argv
    validate_runs(spec, [run])
    mopo_cfg = str(Path(__file__).resolve().parents[1] / "examples" / "mopo" / "tabular_mopo.yaml")
    (run,) = build_runs(
        parse_sweep({"command": "mopo", "grid": {"config": [mopo_cfg], "seed": [2]}}), tmp_path
    )
    assert run.argv[:4] == ["mopo", mopo_cfg, "--set", "mopo.seed=2"]
    assert run.resume_argv == [*run.argv, "--resume"]  # used only when the run left checkpoint/state.pt
    spec = parse_sweep({"command": "bandit", "grid": {"seed": [0]}, "args": {"seeds": 5}})
    with pytest.raises(ConfigError, match="each seed is its own run"):
        build_runs(spec, tmp_path)


PC = "bayescrl/PointCircle-v0"


@pytest.mark.parametrize(
    "body, field, words",
    [
        (
            f"grid: {{algo: [ecop, ecopp], env: [{PC}]}}",
            "algo",
            ["'ecopp'", "unknown algorithm", "algo=ecopp"],
        ),
        (
            "grid: {algo: [ecop], env: [bayescrl/PointCirlce-v0]}",
            "env",
            ["PointCirlce", "not a registered gymnasium id"],
        ),
        (f"grid: {{algoo: [ecop], env: [{PC}]}}", "grid.algoo", ["did you mean 'algo'"]),
        (f"grid: {{algo: [ecop], env: [{PC}]}}\nset: {{config.pi_lrr: [0.1, 0.2]}}", "pi_lrr", ["unknown"]),
        (f"grid: {{algo: [ecop], env: [{PC}]}}\nargs: {{out: x}}", "args.out", ["set by the sweep"]),
        (f"grid: {{algo: [ecop], env: [{PC}], seed: [0, 0]}}", "grid.seed", ["repeats"]),
    ],
)
def test_sweep_bad_grid_point_fails_before_any_run(tmp_path, capsys, body, field, words):
    args = "" if "args:" in body else "args: {total-steps: 1000}\n"
    path = _write(tmp_path, f"command: train\n{args}{body}\n")
    out = tmp_path / "out"
    code, cap = _run(["sweep", str(path), "--out", str(out), "--backend", "local"], capsys)
    assert code == 2 and cap.err.startswith("error: ") and cap.err.count("\n") == 1, cap.err
    assert field in cap.err and all(w in cap.err for w in words), cap.err
    assert not out.exists()  # nothing started, nothing written


def test_sweep_refuses_other_sweeps_folder_and_unreachable_address(tmp_path, capsys):
    path = _write(tmp_path, SMOKE.read_text())
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"hash": "0123", "sweep_file": "other.yaml"}))
    code, cap = _run(["sweep", str(path), "--out", str(out), "--backend", "local"], capsys)
    assert code == 2 and "holds a different sweep" in cap.err and cap.err.count("\n") == 1
    (out / "sweep.json").unlink()
    (out / "notes.txt").write_text("mine")
    code, cap = _run(["sweep", str(path), "--out", str(out), "--backend", "local"], capsys)
    assert code == 2 and "holds no sweep.json" in cap.err
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pytest.importorskip("ray")
    code, cap = _run(
        ["sweep", str(path), "--out", str(tmp_path / "o2"), "--address", f"ray://127.0.0.1:{port}"], capsys
    )
    assert code == 2 and cap.err.count("\n") == 1 and f"cannot reach 127.0.0.1:{port}" in cap.err, cap.err
    code, cap = _run(["sweep", str(path), "--out", str(tmp_path / "o2"), "--address", "nowhere"], capsys)
    assert code == 2 and "expected ray://HOST:PORT" in cap.err
    assert not (tmp_path / "o2").exists()


def test_sweep_flatten_select_and_series():
    data = {"final_costs": [1.0, 2.0], "eval": {"returns": list(range(20))}, "ok": True, "x": None, "r": 3}
    flat = flatten(data)
    assert flat == {"final_costs.0": 1.0, "final_costs.1": 2.0, "r": 3.0}  # no curves, bools, None
    assert list(select(flat, ["r", "final_costs.*"])) == ["r", "final_costs.0", "final_costs.1"]
    curves = {"ep_costs": [[1, 5], [2, 6], [3, 7]], "agents": {"a": {"c": [1, 2]}, "b": {"c": [3, 4]}}}
    assert series(curves, "ep_costs.1") == {"ep_costs.1": [5.0, 6.0, 7.0]}
    assert series(curves, "agents.*.c") == {"agents.a.c": [1.0, 2.0], "agents.b.c": [3.0, 4.0]}
    # one agent per run (bandit/pspl grid over algo): the runs share the pattern's column
    found = [{"agents.*.r": {"agents.ps.r": 1.0}}, {"agents.*.r": {"agents.lints.r": 2.0}}]
    assert by_pattern(found, ["agents.*.r"]) == [{"agents.*.r": 1.0}, {"agents.*.r": 2.0}]
    found = [{"c.*": {"c.0": 1.0}}, {"c.*": {"c.0": 2.0}}]  # the same single key: keep its name
    assert by_pattern(found, ["c.*"]) == [{"c.0": 1.0}, {"c.0": 2.0}]
    found = [{"a.*": {"a.x": 1.0, "a.y": 2.0}}]
    assert by_pattern(found, ["a.*"]) == [{"a.x": 1.0, "a.y": 2.0}]


def _fake_sweep(tmp_path) -> Path:
    """A finished 2 algos x 3 seeds train sweep written by hand (known numbers)."""
    spec = {
        "name": "fake",
        "command": "train",
        "grid": {"algo": ["a", "b"], "seed": [0, 1, 2]},
        "reference": {
            "source": "thesis Table X",
            "rows": [
                {"match": {"algo": "a"}, "final_return": 9.5},
                {"match": {}, "final_costs.0": 0.25},  # every group
            ],
        },
    }
    out = tmp_path / "sw"
    runs = []
    values = {"a": [1.0, 2.0, 3.0], "b": [10.0, 10.0, 13.0]}
    for algo in ("a", "b"):
        for s in range(3):
            rid = f"{algo}_s{s}"
            runs.append({"id": rid, "point": {"algo": algo, "seed": s}, "argv": []})
            r = values[algo][s]
            (out / rid).mkdir(parents=True)
            (out / rid / "metrics.json").write_text(
                json.dumps({"final_return": r, "final_costs": [r / 10], "cost_limits": [0.5]})
            )
            (out / rid / "curves.json").write_text(
                json.dumps({"env_steps": [100, 200], "ep_return": [0.0, r], "ep_costs": [[0.0], [r / 10]]})
            )
            (out / "status").mkdir(exist_ok=True)
            status = "done" if (algo, s) != ("b", 2) else "running"  # one unfinished run
            (out / "status" / f"{rid}.json").write_text(json.dumps({"status": status}))
    (out / "sweep.json").write_text(json.dumps({"hash": "x", "spec": spec, "runs": runs}))
    return out


def test_report_mean_sd_over_seeds_with_thesis_numbers(tmp_path, capsys):
    out = _fake_sweep(tmp_path)
    rep = build_report(out)
    a, b = rep["groups"]
    assert a["group"] == "algo=a" and a["seeds"] == [0, 1, 2]
    assert a["metrics"]["final_return"]["mean"] == pytest.approx(2.0)
    assert a["metrics"]["final_return"]["sd"] == pytest.approx(1.0)  # sample sd of 1, 2, 3
    assert b["seeds"] == [0, 1] and b["metrics"]["final_return"]["sd"] == pytest.approx(0.0)
    assert a["reference"] == {"final_return": 9.5, "final_costs.0": 0.25}
    assert b["reference"] == {"final_costs.0": 0.25}
    assert rep["missing"] == ["b_s2"]
    md = (out / "report.md").read_text()
    assert "| a | 3 | 2 ± 1 (3) | 9.5 | 0.2 ± 0.1 (3) | 0.25 |" in md, md
    assert "| b | 2 | 10 ± 0 (2) | – | 1 ± 0 (2) | 0.25 |" in md, md  # n per cell: b has 2 seeds, a 3
    assert "5 of 6 runs finished; not finished: b_s2" in md
    warn = "cells average over different numbers of seeds (n = 2 to 3): algo=b: final_return n = 2"
    assert rep["warnings"] == [warn + "; algo=b: final_costs.0 n = 2"] and f"**Warning**: {warn}" in md
    assert sorted(rep["figures"]) == ["curves_ep_costs.0.png", "curves_ep_return.png"]
    assert json.loads((out / "report.json").read_text())["groups"][0]["metrics"]["final_return"]["n"] == 3
    code = main(["report", str(out), "--no-plots"])
    cap = capsys.readouterr()
    assert code is None and "| a | 3 | 2 ± 1 (3) | 9.5 |" in cap.out and f"warning: {warn}" in cap.err
    (out / "status" / "b_s2.json").write_text(json.dumps({"status": "done"}))  # every cell n = 3: no warning
    rep = build_report(out, plots=False)
    assert rep["warnings"] == [] and "Warning" not in rep["markdown"]
    assert rep["groups"][1]["metrics"]["final_return"]["sd"] == pytest.approx(3**0.5)  # sd of 10, 10, 13
    code, cap = _run(["report", str(tmp_path)], capsys)
    assert code == 2 and "not a sweep folder" in cap.err


def test_sweep_seed_results_do_not_depend_on_the_other_runs(tmp_path):
    """The bandit run (ps, seed 1) of a 2-seed sweep equals that of a 1-seed sweep (each seed its own run;
    `bandit --seeds 2` would share the agent's random stream between its seeds)."""
    cfg = str(Path(__file__).resolve().parents[1] / "examples" / "warmpref" / "default.yaml")
    results = []
    for seeds in ([0, 1], [1]):
        spec = parse_sweep(
            {
                "command": "bandit",
                "grid": {"config": [cfg], "algo": ["ps"], "seed": seeds},
                "set": {"bandit.T": 15},
            }
        )
        run = build_runs(spec, tmp_path / f"n{len(seeds)}")[-1]
        assert run.point["seed"] == 1
        main(run.argv)
        results.append(json.loads((run.out / "results.json").read_text())["agents"]["ps"])
    assert results[0]["final_regret_per_seed"] == results[1]["final_regret_per_seed"]
    assert results[0]["regret_curve_mean"] == results[1]["regret_curve_mean"]


def test_sweep_validates_diffusion_pspl_and_lm_mopo_configs_with_their_own_checks(tmp_path):
    ex = Path(__file__).resolve().parents[1] / "examples"
    # pspl with task: diffusion goes to the diffusion experiment's validator (the tabular one refuses 'task')
    spec = parse_sweep({"command": "pspl", "grid": {"config": [str(ex / "pspl" / "diffusion_digits.yaml")]}})
    validate_runs(spec, build_runs(spec, tmp_path))
    # mopo mode lm seeds by the top-level seed: the default mopo.seed is refused up front, naming the fix
    grid = {"config": [str(ex / "mopo" / "lm_tiny.yaml")], "seed": [0]}
    spec = parse_sweep({"command": "mopo", "grid": grid})
    with pytest.raises(ConfigError, match="seed_key: seed"):
        validate_runs(spec, build_runs(spec, tmp_path / "a"))
    spec = parse_sweep({"command": "mopo", "grid": grid, "seed_key": "seed"})
    (run,) = build_runs(spec, tmp_path / "b")
    assert run.argv[2:4] == ["--set", "seed=0"]
    validate_runs(spec, [run])


def test_sweep_attempts_in_all_are_one_plus_retries_also_across_ray_retries(tmp_path, monkeypatch):
    """``--retries 2`` means 3 attempts per run in all: the restarts of a dying run and Ray's re-execution
    of a lost worker's task draw on one budget (kept in the run's status file), they do not multiply."""
    from bayescrl.sweep import runner
    from bayescrl.sweep.target import RUN

    launched = []

    class Proc:  # a run process that dies (SIGKILL) at once, or is lost with its worker
        def __init__(self, argv, *_a):
            launched.append(argv)
            self.pid = 12345

        def wait(self):
            if lost:
                lost.pop()
                raise RuntimeError("worker lost")  # Ray would now run the task again elsewhere
            return -9

    monkeypatch.setattr(runner, "launch", Proc)
    spec = parse_sweep({"command": "train", "grid": {"algo": ["ecop"], "env": ["e"], "seed": [0]}})
    [run] = build_runs(spec, tmp_path / "sw")
    lost: list = []
    task = runner._task(run, tmp_path / "sw", spec, retries=2)
    assert task["max_attempts"] == 3
    rec = runner.execute_run(task)
    assert len(launched) == 3 and rec["status"] == "failed" and rec["attempts"] == 3
    assert launched[0] == [RUN, "train", json.dumps(run.params)]  # the adapter's call, not a command line
    assert runner.execute_run(task)["error"] == "no attempts left (3 made)" and len(launched) == 3
    # a lost worker: attempt 1 dies with it; Ray's retry of the task gets the 2 attempts left, not 3 more
    launched.clear()
    (tmp_path / "sw" / "status" / f"{run.id}.json").unlink()
    lost.append(True)
    task = runner._task(run, tmp_path / "sw", spec, retries=2)
    with pytest.raises(RuntimeError):
        runner.execute_run(task)
    assert runner.execute_run(task)["attempts"] == 3 and len(launched) == 3
    # a resumed sweep (a new session) gives a run 1 + retries attempts more than it had
    assert runner._task(run, tmp_path / "sw", spec, retries=1)["max_attempts"] == 5


def test_sweep_cold_launch_runs_the_run_into_the_log(tmp_path, monkeypatch):
    """``BAYESCRL_SWEEP_WARM=0``: a run is ``python -m bayescrl.sweep.child`` (exit status and output kept):
    a command's run (a user error: one line, status 2) and a function call; the warm fork-server path is
    what tests/test_sweep_run.py runs."""
    from bayescrl.sweep import warm
    from bayescrl.sweep.target import CALL, RUN

    monkeypatch.setenv("BAYESCRL_SWEEP_WARM", "0")
    assert not warm.enabled()
    log = tmp_path / "run.log"
    log.write_text("# header\n")
    env = {**__import__("os").environ}
    spec = parse_sweep({"command": "bandit", "grid": {"seed": [0]}, "args": {"device": "tpu"}})
    [run] = build_runs(spec, tmp_path)
    bad = [RUN, "bandit", json.dumps(run.params)]
    assert warm.launch(bad, str(log), str(tmp_path), env).wait() == 2
    result = tmp_path / "r" / "result.json"
    call = [CALL, "json:dumps", '{"a": 1}', str(result)]
    assert warm.launch(call, str(log), str(tmp_path), env).wait() == 0
    text = log.read_text()
    assert text.startswith("# header\n") and "error: --device = 'tpu'" in text
    assert json.loads(result.read_text()) == '{"a": 1}'


def test_map_calls_runs_each_job_in_its_own_process_in_job_order(tmp_path):
    """The benchmark scripts' grids: FUNCTION(job) per job on the sweep's runner, results in job order,
    each in its own process; a failing job names its log."""
    import os

    from bayescrl.sweep.calls import map_calls

    # forked from the sweep's warm fork server (shared with tests/test_sweep_run.py in one pytest session)
    mod = tmp_path / "jobs_mod.py"
    mod.write_text(
        "import atexit, multiprocessing, os\n"
        "def square(job):\n"
        "    atexit.register(lambda: open(job['mark'], 'w').close() if 'mark' in job else None)\n"
        "    if job['x'] < 0:\n"
        "        raise ValueError('negative x')\n"
        "    return {'y': job['x'] ** 2, 'pid': os.getpid(), 'start': multiprocessing.get_start_method()}\n"
    )
    seen = []
    work = tmp_path / "work"
    with pytest.raises(RuntimeError, match=r"1 of 3 call\(s\) .* failed; c: ValueError: negative x"):
        map_calls(
            f"{mod}:square",
            [
                {"x": 3, "mark": str(tmp_path / "exit_a")},
                {"x": 1},
                {"x": -1, "mark": str(tmp_path / "exit_c")},
            ],
            workers=2,
            ids=["a", "b", "c"],
            workdir=work,
            on_done=lambda j, r: seen.append((j["x"], r["y"])),
        )
    assert sorted(seen) == [(1, 1), (3, 9)] and (work / "logs" / "c.log").exists()
    pids = {json.loads((work / r / "result.json").read_text())["pid"] for r in "ab"}
    assert len(pids | {os.getpid()}) == 3  # two processes, neither of them this one
    # the run's exit handlers ran, as at the end of the single command (also after an exception)
    assert (tmp_path / "exit_a").exists() and (tmp_path / "exit_c").exists()
    # and its multiprocessing start method is a fresh process's (async vector envs fork from the run)
    fresh = subprocess.run(
        [sys.executable, "-c", "import multiprocessing as m; print(m.get_start_method())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert json.loads((work / "a" / "result.json").read_text())["start"] == fresh
    # the same workdir again (a re-run after a failure): every call gets its attempts again
    again = map_calls(
        f"{mod}:square", [{"x": 3}, {"x": 1}, {"x": 2}], workers=2, ids=["a", "b", "c"], workdir=work
    )
    assert [r["y"] for r in again] == [9, 1, 4]
    # many short runs starting and ending at once (a temporary workdir): every exit status read once,
    # results in job order
    out = map_calls(f"{mod}:square", [{"x": i} for i in range(10)], workers=4)
    assert [r["y"] for r in out] == [i * i for i in range(10)]


CASES = """
name: t
command: train
grid:
  task:
    - {name: PC, env: bayescrl/PointCircle-v0, cost-limit: 10}
    - {name: PR, env: bayescrl/PointReach-v0, cost-limit: 25, set: {config.actor_hidden: [8, 8]}}
  algo: [ecop, ppo-lag]
  seed: [0, 1]
args: {total-steps: 1000}
set: {config.n_envs: 2}
reference:
  rows:
    - {match: {task: PC, algo: ecop}, train_final_return: 110.5, train_final_costs.0: 9.8}
report:
  pivot: {rows: task, columns: algo, cells: [train_final_return, train_final_costs.0]}
"""


def test_sweep_cases_link_options_and_pivot_renders_the_readme_layout(tmp_path):
    """A grid axis of cases sets several options together (a task's env and its own cost limit); the
    report's pivot puts tasks in rows and algorithms in columns, mean ± sd (n) per cell, thesis beside."""
    import yaml

    spec = parse_sweep(yaml.safe_load(CASES))
    runs = build_runs(spec, tmp_path / "sw")
    assert [r.id for r in runs][:3] == ["PC_ecop_s0", "PC_ecop_s1", "PC_ppo-lag_s0"] and len(runs) == 8
    pr = runs[-1].argv
    assert pr[pr.index("--env") + 1] == "bayescrl/PointReach-v0" and pr[pr.index("--cost-limit") + 1] == "25"
    assert "config.actor_hidden=[8, 8]" in pr and "config.n_envs=2" in pr
    assert "config.actor_hidden=[8, 8]" not in runs[0].argv and "10" in runs[0].argv
    validate_runs(spec, runs)
    out = tmp_path / "sw"
    values = {("PC", "ecop"): [(100.0, 9.0), (120.0, 11.0)], ("PC", "ppo-lag"): [(1.0, 2.0), (3.0, 4.0)]}
    values[("PR", "ecop")] = [(5.0, 20.0)]  # one seed only (the other not finished)
    manifest = []
    for r in runs:
        task, algo, seed = r.point["task"], r.point["algo"], r.point["seed"]
        manifest.append({"id": r.id, "point": r.point, "argv": r.argv})
        vals = values.get((task, algo), [])
        if seed < len(vals):
            (out / r.id).mkdir(parents=True)
            ret, cost = vals[seed]
            (out / r.id / "metrics.json").write_text(
                json.dumps({"train_final_return": ret, "train_final_costs": [cost]})
            )
            (out / "status").mkdir(exist_ok=True)
            (out / "status" / f"{r.id}.json").write_text(json.dumps({"status": "done"}))
    (out / "sweep.json").write_text(json.dumps({"hash": spec.hash, "spec": spec.raw, "runs": manifest}))
    md = build_report(out, plots=False)["markdown"]
    assert "| task | ecop | ppo-lag | thesis (ecop) |" in md, md
    assert "| PC | 110 ± 14.14 / 10 ± 1.414 (2) | 2 ± 1.414 / 3 ± 1.414 (2) | 110.5 / 9.8 |" in md, md
    assert "| PR | 5 / 20 (1) | – | – |" in md, md
    assert "cells average over different numbers of seeds" in md


@pytest.mark.parametrize(
    "grid, field",
    [
        ("{task: [{name: A, env: x}, {name: A, env: y}], seed: [0]}", "grid.task[1].name"),
        ("{task: [{name: A, cost-limit: 3}], seed: [0]}", "grid.task[0].cost-limit"),  # also in args
        ("{task: [{name: A, env: x}, plain], seed: [0]}", "grid.task[1]"),
        (  # two axes of cases giving one option: the later used to win silently
            "{task: [{name: A, env: x}], v: [{name: V, env: y}, {name: W}], seed: [0]}",
            "grid.v[V].env",
        ),
    ],
)
def test_sweep_cases_bad_input_is_one_line(tmp_path, capsys, grid, field):
    path = _write(tmp_path, f"command: train\ngrid: {grid}\nargs: {{cost-limit: 10, algo: ecop}}\n")
    code, cap = _run(["sweep", str(path), "--out", str(tmp_path / "o"), "--dry-run"], capsys)
    assert code == 2 and cap.err.startswith(f"error: {field} =") and len(cap.err.strip().splitlines()) == 1


def test_sweep_call_runs_a_function_per_grid_point_and_validates_jobs_first(tmp_path, capsys):
    """``command: call``: each grid point is FUNCTION(job) in its own run process (a benchmark script's
    run); the module's validate_job checks every job before any run starts."""
    mod = tmp_path / "bench_mod.py"
    mod.write_text(
        "def validate_job(job):\n"
        "    if job['scale'] <= 0:\n"
        "        raise ValueError(f\"scale {job['scale']}: must be positive\")\n"
        "def run(job):\n"
        "    return {'value': job['scale'] * (job['seed'] + 1) + job['opt']['shift']}\n"
    )
    body = (
        f"command: call\ntarget: {mod}:run\n"
        "grid:\n  case:\n    - {name: small, scale: 1}\n    - {name: big, scale: 10}\n  seed: [0, 1]\n"
        "args: {opt: {shift: 0.5}}\nset: {opt.shift: 0.25}\nreport: {metrics: [value]}\n"
    )
    path = _write(tmp_path, body)
    out = tmp_path / "o"
    assert main(["sweep", str(path), "--out", str(out), "--backend", "local", "--workers", "2"]) is None
    text = capsys.readouterr().out
    assert "| small | 2 | 1.75 ± 0.7071 (2) |" in text and "| big | 2 | 15.25 ± 7.071 (2) |" in text, text
    assert json.loads((out / "big_s1" / "result.json").read_text()) == {"value": 20.25}
    bad = _write(tmp_path, body.replace("scale: 10", "scale: -1"))
    code, cap = _run(["sweep", str(bad), "--out", str(tmp_path / "o2"), "--dry-run"], capsys)
    assert code == 2 and "scale -1: must be positive" in cap.err and "case=big" in cap.err
    assert len(cap.err.strip().splitlines()) == 1 and not (tmp_path / "o2").exists()
    code, cap = _run(
        ["sweep", str(_write(tmp_path, "command: call\nreport: {metrics: [v]}\n")), "--out", "x"], capsys
    )
    assert code == 2 and cap.err.startswith("error: target = None")


def test_ecop_results_convert_into_the_sweep_folder_only_when_settings_match(tmp_path, capsys):
    """benchmarks/ecop_to_sweep.py: ecop_compare records become the sweep's runs (report reads them);
    a results file whose settings differ from its case is refused before anything is written."""
    from bayescrl.sweep.calls import resolve

    convert = resolve(str(Path(__file__).resolve().parents[1] / "benchmarks" / "ecop_to_sweep.py:main"))
    res = tmp_path / "res"
    res.mkdir()
    cfg = {"n_envs": 8, "rollout_steps": 200, "minibatch_size": 200, "update_epochs": 10, "pi_lr": 1e-3}
    cfg.update(vf_lr=1e-3, eval_episodes=3, checkpoint_every=0)
    info = {"env": "bayescrl/PointCircle-v0", "steps": 1000, "cost_limit": 10.0, "config": cfg}
    (res / "pc.json").write_text(json.dumps(info))
    rec = {"algo": "ecop", "label": "ecop", "steps": 1600, "wall_s": 1.0, "eval_return": 3.0}
    rec.update(eval_costs=[1.0], cost_limits=[10.0], curve_return=[1.0], curve_cost=[2.0], curve_steps=[1600])
    lines = [{**rec, "seed": s, "return": 10.0 + s, "costs": [5.0 + s]} for s in (0, 1)]
    lines.append(
        {**rec, "label": "ecop[beta5-fixed]", "seed": 0, "return": 99.0, "costs": [0.0]}
    )  # not a grid point
    (res / "pc.runs.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    sweep = _write(
        tmp_path,
        "command: train\ngrid:\n  task:\n    - {name: PC, env: bayescrl/PointCircle-v0, cost-limit: 10, "
        "total-steps: 1000}\n  algo: [ecop, ppo-lag]\n  seed: [0, 1]\nset: {config.pi_lr: 1.0e-3}\n"
        "report: {pivot: {rows: task, columns: algo, cells: [train_final_return, train_final_costs.0]}}\n",
    )
    out = tmp_path / "sw"
    convert([str(sweep), "--out", str(out), "--results", str(res), "--source", "PC=pc", "--no-plots"])
    assert json.loads((out / "ecop_s1" / "metrics.json").read_text())["train_final_return"] == 11.0
    assert "| PC | 10.5 ± 0.7071 / 5.5 ± 0.7071 (2) | – |" in capsys.readouterr().out
    convert(
        [str(sweep), "--out", str(out), "--results", str(res), "--source", "PC=pc", "--no-plots"]
    )  # again
    other = tmp_path / "real_sweep"  # a folder it did not write (a sweep's own runs) is never deleted
    (other / "run1").mkdir(parents=True)
    with pytest.raises(SystemExit) as exc:
        convert([str(sweep), "--out", str(other), "--results", str(res), "--source", "PC=pc", "--no-plots"])
    assert exc.value.code == 2 and "holds files this script did not write" in capsys.readouterr().err
    assert (other / "run1").is_dir()
    info["config"]["pi_lr"] = 3e-4  # other settings than the sweep file's: refused
    (res / "pc.json").write_text(json.dumps(info))
    with pytest.raises(SystemExit) as exc:
        convert([str(sweep), "--out", str(tmp_path / "sw2"), "--results", str(res), "--source", "PC=pc"])
    assert exc.value.code == 2 and "config.pi_lr 0.0003 != 0.001" in capsys.readouterr().err
    assert not (tmp_path / "sw2").exists()


@pytest.mark.parametrize(
    "bad, words",
    [
        ({"eval_every": 0}, "eval_every 0"),
        ({"final_traj": -1}, "final_traj -1"),
        ({"delta": 0.0}, "delta 0.0"),
        ({"config": [1]}, "config [1]"),
        ({"steps": True}, "steps True"),
    ],
)
def test_acpo_sweep_job_is_validated_before_any_run(bad, words):
    """benchmarks/acpo_common.py:validate_job (what a ``command: call`` sweep checks every job with) refuses
    budgets and settings a run would only trip over after it started."""
    from bayescrl.sweep.calls import resolve

    root = Path(__file__).resolve().parents[1]
    check = resolve(f"{root / 'benchmarks' / 'acpo_common.py'}:validate_job")
    good = {"task": "PointCircle", "algo": "acpo", "seed": 0, "steps": 1000}
    check(good)
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        check({**good, **bad})


def test_sweep_dry_run_refuses_more_constraints_than_the_algorithm_supports(tmp_path, capsys):
    """CPO/PCPO take one constraint: a grid point with two limits is refused before any run starts;
    ``exclude`` leaves such points out."""
    body = (
        "command: train\ngrid:\n  algo: [ecop, cpo]\n  seed: [0, 1]\n"
        "args: {env: bayescrl/PointNavigation-v0, cost-limit: [10, 25], total-steps: 1000}\n"
    )
    path = _write(tmp_path, body)
    code, cap = _run(["sweep", str(path), "--out", str(tmp_path / "o"), "--dry-run"], capsys)
    assert code == 2 and "cost_limits" in cap.err and "cpo supports at most 1 constraint" in cap.err, cap.err
    assert len(cap.err.strip().splitlines()) == 1
    path = _write(tmp_path, body + "exclude:\n  - {algo: cpo}\n")
    assert main(["sweep", str(path), "--out", str(tmp_path / "o2"), "--dry-run"]) is None
    out = capsys.readouterr().out
    assert "2 runs valid" in out and "ecop_s1" in out and "cpo_s0" not in out, out


@pytest.mark.parametrize(
    "exclude, field",
    [
        ("[{learner: cpo}]", "exclude[0]"),  # not an axis
        ("[{algo: trpo}]", "exclude[0].algo"),  # not a value of the axis
        ("{algo: cpo}", "exclude"),  # not a list
    ],
)
def test_sweep_exclude_bad_input_is_one_line(tmp_path, capsys, exclude, field):
    body = (
        "command: train\ngrid:\n  algo: [ecop, cpo]\n  seed: [0]\n"
        f"args: {{env: bayescrl/PointCircle-v0, total-steps: 1000}}\nexclude: {exclude}\n"
    )
    code, cap = _run(
        ["sweep", str(_write(tmp_path, body)), "--out", str(tmp_path / "o"), "--dry-run"], capsys
    )
    assert code == 2 and field in cap.err and len(cap.err.strip().splitlines()) == 1, cap.err


def test_sweep_exclude_leaves_the_hash_of_sweeps_without_it_unchanged():
    spec = parse_sweep({"command": "train", "grid": {"algo": ["ecop"], "seed": [0]}})
    with_empty = parse_sweep({"command": "train", "grid": {"algo": ["ecop"], "seed": [0]}, "exclude": None})
    assert spec.hash == with_empty.hash
    excl = parse_sweep(
        {"command": "train", "grid": {"algo": ["ecop", "cpo"], "seed": [0]}, "exclude": [{"algo": "cpo"}]}
    )
    assert [p["algo"] for p in excl.points()] == ["ecop"]


def test_committed_sweep_folders_keep_their_hash_and_run_ids():
    """Every sweep folder under benchmarks/results/sweeps stays resumable and reportable: its file's hash
    and its runs' ids are what the code computes from the sweep file it holds."""
    from bayescrl.sweep.spec import run_ids

    folders = sorted((Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "sweeps").glob("*/"))
    assert len(folders) >= 10
    for folder in folders:
        manifest = json.loads((folder / "sweep.json").read_text())
        spec = parse_sweep(manifest["spec"])
        assert spec.hash == manifest["hash"], folder.name
        assert [rid for rid, _ in run_ids(spec)] == [r["id"] for r in manifest["runs"]], folder.name

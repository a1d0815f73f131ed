"""``bayescrl sweep examples/sweeps/smoke.yaml`` for real: on a local Ray instance with a worker killed
mid-run, and without Ray with the whole sweep killed and started again. Either way every run finishes once,
nothing finished is recomputed, and each run's metrics.json equals the single command's."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bayescrl.cli import main

SMOKE = Path(__file__).resolve().parents[1] / "examples" / "sweeps" / "smoke.yaml"
TIMING = ("env_steps_per_s",)  # wall-clock numbers: the only fields allowed to differ


def _sweep(out: Path, *extra: str, env=None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "bayescrl", "sweep", str(SMOKE), "--out", str(out), "--workers", "2", *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _wait_then_kill(out: Path, proc: subprocess.Popen, *, key: str, need_done: int = 0) -> str:
    """Once ``need_done`` runs are finished and another has a checkpoint, SIGKILL the process named by its
    status ``key`` (``worker_pid``: its Ray worker; ``driver``: the sweep itself). Returns the run id."""
    deadline = time.time() + 400  # generous: the shared CI machine can be heavily loaded
    while time.time() < deadline and proc.poll() is None:
        states = {}
        for path in (out / "status").glob("*.json"):
            try:
                states[path.stem] = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
        done = [r for r, s in states.items() if s.get("status") == "done"]
        for rid, s in states.items():
            mid_run = (out / rid / "checkpoint.pt").exists() and not (out / rid / "metrics.json").exists()
            if s.get("status") == "running" and mid_run and len(done) >= need_done:
                os.kill(proc.pid if key == "driver" else s[key], signal.SIGKILL)
                return rid
        time.sleep(0.02)
    pytest.fail(
        f"no run reached a checkpoint in time: {proc.poll()} {proc.stderr.read() if proc.stderr else ''}"
    )


def _gone_soon(pid: int, timeout: float = 20.0) -> None:
    """The process ``pid`` exits (or is a zombie) within ``timeout`` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except FileNotFoundError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    pytest.fail(f"run process {pid} outlived its killed sweep")


def _same_as_single_command(out: Path, rid: str, tmp_path: Path) -> None:
    manifest = json.loads((out / "sweep.json").read_text())
    argv = next(r["argv"] for r in manifest["runs"] if r["id"] == rid)
    ref = tmp_path / f"single_{rid}"
    argv = [str(ref) if a == str((out / rid).resolve()) else a for a in argv]
    main(argv)  # the single command, uninterrupted, in this process
    a = json.loads((out / rid / "metrics.json").read_text())
    b = json.loads((ref / "metrics.json").read_text())
    for k in TIMING:
        a.pop(k), b.pop(k)
    assert a == b
    lines = (out / rid / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["iteration"] for x in lines] == [1, 2, 3, 4, 5]  # no iteration logged twice


def _mtimes(out: Path) -> dict:
    return {p: p.stat().st_mtime_ns for p in out.glob("*/metrics.json")}


def test_sweep_smoke_on_local_ray_survives_a_killed_worker(tmp_path, capsys):
    pytest.importorskip("ray")
    out = tmp_path / "smoke"
    proc = _sweep(out, "--backend", "ray")
    victim = _wait_then_kill(out, proc, key="worker_pid")
    stdout, stderr = proc.communicate(timeout=400)  # a hang (say, a retry that never comes) fails here
    assert proc.returncode == 0, stderr
    status = json.loads((out / "status" / f"{victim}.json").read_text())
    assert status["status"] == "done" and status["resumed"] and status["attempts"] == 2, status
    assert "(resumed from checkpoint)" in stdout and "4 of 4 runs finished" in stdout
    assert "| ecop | 2 |" in stdout and "| ppo-lag | 2 |" in stdout  # the report table
    assert (out / "report.md").exists() and (out / "curves_ep_return.png").exists()
    _same_as_single_command(out, victim, tmp_path)
    before = _mtimes(out)
    capsys.readouterr()
    main(["sweep", str(SMOKE), "--out", str(out), "--resume"])  # again, in this process: nothing left to run
    assert "4 of 4 runs already finished (skipped)" in capsys.readouterr().out
    assert _mtimes(out) == before  # nothing recomputed


def test_sweep_without_ray_resumes_a_killed_sweep(tmp_path, capsys, monkeypatch):
    blocker = tmp_path / "noray" / "ray"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('Ray is not installed (blocked by the test)')\n")
    env = {**os.environ, "PYTHONPATH": str(blocker.parent)}
    out = tmp_path / "smoke"
    proc = _sweep(out, env=env)
    victim = _wait_then_kill(out, proc, key="driver", need_done=1)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    done = [p.stem for p in (out / "status").glob("*.json") if json.loads(p.read_text())["status"] == "done"]
    finished = {r: (out / r / "metrics.json").stat().st_mtime_ns for r in done}
    assert finished and victim not in finished
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails in this process too
    capsys.readouterr()
    main(["sweep", str(SMOKE), "--out", str(out), "--workers", "2", "--resume"])  # resume, in this process
    again = capsys.readouterr().out
    assert f"{len(finished)} of 4 runs already finished (skipped)" in again
    assert "(local backend)" in again and "4 of 4 runs finished" in again
    assert {k: v for k, v in _mtimes(out).items() if k.parent.name in finished} == {
        out / k / "metrics.json": v for k, v in finished.items()
    }  # finished runs untouched
    assert json.loads((out / "status" / f"{victim}.json").read_text())["resumed"]
    _same_as_single_command(out, victim, tmp_path)


def test_a_killed_sweep_leaves_no_run_computing(tmp_path):
    """SIGKILL the sweep (no Ray) while its one long run trains: the run dies within seconds. (Each forked
    run used to hold the fork server's "alive" pipe, so the fork server, and with it the run, lived on to
    the run's end, writing into a folder a resumed sweep would also write into.)"""
    spec = tmp_path / "long.yaml"
    spec.write_text(
        "command: train\n"
        "grid: {algo: [ppo-lag], env: [bayescrl/PointCircle-v0], seed: [0]}\n"
        "args: {total-steps: 2000000, cost-limit: 10}\n"
        "set: {config.n_envs: 2, config.rollout_steps: 200, config.minibatch_size: 200}\n"
    )
    out = tmp_path / "long"
    cmd = [sys.executable, "-m", "bayescrl", "sweep", str(spec), "--out", str(out), "--backend", "local"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:  # the one run's id is "s0" (axes with one value do not name runs)
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if (out / "s0" / "checkpoint.pt").exists():  # training, not just started
                break
            time.sleep(0.05)
        run_pid = json.loads((out / "status" / "s0.json").read_text())["pid"]
    finally:
        proc.kill()
        proc.wait(timeout=60)
    _gone_soon(run_pid, timeout=15)

"""``--log-dir`` (TensorBoard scalars, optional W&B) for train/bandit/pspl/mopo and ``-q/-v`` logging."""

import json
import logging
import sys
import types

import pytest

from bayescrl.cli import main

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


def _scalars(log_dir) -> dict[str, list[tuple[int, float]]]:
    """The scalars of the one run under ``log_dir`` (each run writes its own ``<name>_<n>`` folder)."""
    (run,) = [p for p in log_dir.iterdir() if p.is_dir()]
    ea = EventAccumulator(str(run))
    ea.Reload()
    return {t: [(e.step, e.value) for e in ea.Scalars(t)] for t in ea.Tags()["scalars"]}


def _exit(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code, capsys.readouterr()


BANDIT = ["bandit", "--seeds", "2", "--set", "bandit.T=15", "--set", "agents=[ps, lints]", "--no-progress"]


def test_bandit_log_dir_holds_the_regret_curves_of_results_json(tmp_path, capsys):
    main([*BANDIT, "--out", str(tmp_path / "out"), "--log-dir", str(tmp_path / "tb")])
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    sc = _scalars(tmp_path / "tb")
    for agent in ("ps", "lints"):
        curve = sc[f"agents/{agent}/regret_curve_mean"]
        assert [s for s, _ in curve] == list(range(1, 16))  # one point per round t = 1..T
        assert [v for _, v in curve] == pytest.approx(res["agents"][agent]["regret_curve_mean"], rel=1e-6)
        (final,) = sc[f"agents/{agent}/final_regret_mean"]
        assert final[1] == pytest.approx(res["agents"][agent]["final_regret_mean"], rel=1e-6)
    assert "logging scalars to" in capsys.readouterr().err  # an INFO line on stderr by default


def test_pspl_log_dir_holds_simple_regret_per_episode(tmp_path):
    main(
        [
            "pspl",
            "examples/pspl/intro_riverswim.yaml",
            "--seeds",
            "2",
            "--set",
            "K=4",
            "--set",
            "offline.N=10",
            "--set",
            "agents=[pspl-bootstrap]",
            "--out",
            str(tmp_path / "out"),
            "--log-dir",
            str(tmp_path / "tb"),
            "--no-progress",
            "--no-plots",
        ]
    )
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    want = res["agents"]["pspl-bootstrap"]["simple_regret_curve_mean"]
    got = _scalars(tmp_path / "tb")["agents/pspl-bootstrap/simple_regret_curve_mean"]
    assert len(got) == len(want) and [v for _, v in got] == pytest.approx(want, rel=1e-6, abs=1e-9)


def test_mopo_log_dir_holds_the_solver_history_ending_at_the_final_policy(tmp_path):
    main(
        [
            "mopo",
            "examples/mopo/tabular_mopo.yaml",
            "--out",
            str(tmp_path / "out"),
            "--set",
            "mopo.steps=300",
            "--set",
            "mopo.log_every=100",
            "--log-dir",
            str(tmp_path / "tb"),
        ]
    )
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    sc = _scalars(tmp_path / "tb")
    for a, p in res["policy"].items():
        hist = sc[f"history/policy/{a}"]
        assert hist[-1][0] == 300 and hist[-1][1] == pytest.approx(p, abs=1e-6)
    assert sc["tau"] == [(0, pytest.approx(1.0))]


def test_train_log_dir_writes_each_iteration_at_its_env_step(tmp_path, capsys):
    out = tmp_path / "run"
    args = [
        "train",
        "--algo",
        "ppo-lag",
        "--env",
        "bayescrl.constrained.toy:PaintedWalk",
        "--cost-limit",
        "1",
    ]
    args += ["--total-steps", "96", "--out", str(out), "--set", "config.n_envs=1", "--set"]
    args += ["config.rollout_steps=32", "--set", "config.update_epochs=1", "--set", "config.eval_episodes=1"]
    main([*args, "--no-progress", "--log-dir", str(tmp_path / "tb")])
    recs = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]
    sc = _scalars(tmp_path / "tb")
    assert [s for s, _ in sc["train/ep_return"]] == [r["env_steps"] for r in recs] == [32, 64, 96]
    assert [v for _, v in sc["train/ep_return"]] == pytest.approx([r["ep_return"] for r in recs], rel=1e-6)
    assert [v for _, v in sc["train/ep_costs/0"]] == pytest.approx([r["ep_costs"][0] for r in recs])
    metrics = json.loads((out / "metrics.json").read_text())
    assert sc["final/final_return"] == [(96, pytest.approx(metrics["final_return"], rel=1e-6))]


def test_runs_sharing_a_log_dir_get_one_folder_each(tmp_path):
    tb = tmp_path / "tb"
    main([*BANDIT, "--out", str(tmp_path / "a" / "out"), "--log-dir", str(tb)])
    main([*BANDIT, "--out", str(tmp_path / "b" / "out"), "--log-dir", str(tb)])
    main([*BANDIT, "--out", str(tmp_path / "other"), "--log-dir", str(tb)])
    assert sorted(p.name for p in tb.iterdir()) == ["other_1", "out_1", "out_2"]  # as SB3's <name>_<n>
    for run in tb.iterdir():  # each a run of its own: one regret curve of T = 15 points
        ea = EventAccumulator(str(run))
        ea.Reload()
        assert len(ea.Scalars("agents/ps/regret_curve_mean")) == 15


def test_log_dir_without_tensorboard_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails as if not installed
    code, cap = _exit([*BANDIT, "--out", str(tmp_path / "o"), "--log-dir", str(tmp_path / "tb")], capsys)
    err = cap.err.strip()
    assert code == 2 and "\n" not in err and "bayescrl[log]" in err and "--log-dir" in err
    assert not (tmp_path / "tb").exists()


def test_wandb_flag_without_wandb_is_one_line_and_with_wandb_gets_the_same_scalars(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(sys.modules, "wandb", None)
    code, cap = _exit(
        [*BANDIT, "--out", str(tmp_path / "o"), "--log-dir", str(tmp_path / "tb"), "--wandb"], capsys
    )
    assert code == 2 and "\n" not in cap.err.strip() and "wandb" in cap.err
    logged = []

    class _Run:
        def log(self, data, step):
            logged.append((step, data))

        def finish(self):
            logged.append("finished")

    fake = types.SimpleNamespace(init=lambda **kw: _Run())  # no network: a stand-in for wandb
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.setenv("BAYESCRL_WANDB", "1")  # the env var turns it on without --wandb
    main([*BANDIT, "--out", str(tmp_path / "o2"), "--log-dir", str(tmp_path / "tb2")])
    res = json.loads((tmp_path / "o2" / "results.json").read_text())
    ps = [d["agents/ps/regret_curve_mean"] for s, d in logged[:-1] if "agents/ps/regret_curve_mean" in d]
    assert (
        ps == pytest.approx(res["agents"]["ps"]["regret_curve_mean"], rel=1e-6) and logged[-1] == "finished"
    )


def test_quiet_and_verbose_set_the_bayescrl_logger_level(tmp_path, capsys):
    log = logging.getLogger("bayescrl")
    main(["-q", *BANDIT, "--out", str(tmp_path / "o"), "--log-dir", str(tmp_path / "tb")])
    cap = capsys.readouterr()
    assert log.level == logging.WARNING and "logging scalars" not in cap.err
    assert "total" in cap.out  # the result summary stays on stdout
    main(["-v", "examples", "list"])
    assert log.level == logging.DEBUG
    main(["-qq", "examples", "list"])
    assert log.level == logging.ERROR
    main(["examples", "list"])
    assert log.level == logging.INFO

"""``bayescrl train`` / ``bayescrl evaluate``: outputs, resume, bad input (exit status 2, clear message)."""

import json

import pytest

from bayescrl.cli import main
from bayescrl.constrained.run import train
from bayescrl.prefrl.run import train as train_any

ENV = "bayescrl.constrained.toy:CostCartPole"
SMALL = [
    "--set",
    "config.n_envs=2",
    "--set",
    "config.rollout_steps=64",
    "--set",
    "config.update_epochs=1",
    "--set",
    "config.eval_episodes=1",
    "--no-progress",
]


def _run(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code, capsys.readouterr()


def test_train_writes_metrics_curves_checkpoint_then_evaluate_and_resume(tmp_path, capsys):
    out = tmp_path / "run"
    main(
        [
            "train",
            "--algo",
            "ecop",
            "--env",
            ENV,
            "--total-steps",
            "256",
            "--seed",
            "1",
            "--out",
            str(out),
            "--cost-limit",
            "5",
            *SMALL,
        ]
    )
    m = json.loads((out / "metrics.json").read_text())
    for key in ("final_return", "final_costs", "cost_limits", "env_steps_per_s"):
        assert key in m
    assert m["cost_limits"] == [5.0] and len(m["final_costs"]) == 1 and m["env_steps"] == 256
    assert (out / "curves.png").stat().st_size > 1000 and (out / "checkpoint.pt").exists()
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[-1])["iteration"] == 2
    main(["evaluate", str(out), "--episodes", "2"])
    ev = json.loads((out / "evaluation.json").read_text())
    assert len(ev["returns"]) == 2
    main(["train", "--resume", str(out), "--total-steps", "384", "--no-progress"])
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["iteration"] for x in lines] == [1, 2, 3]
    assert json.loads((out / "metrics.json").read_text())["env_steps"] == 384


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--algo", "nope", "--env", ENV], "unknown algorithm"),
        (["--algo", "ecop", "--env", "NoSuchEnv-v9"], "not a registered gymnasium id"),
        (["--algo", "ecop", "--env", ENV, "--cost-limit", "1", "--cost-limit", "2"], "give exactly 1 limit"),
        (["--algo", "ecop", "--env", ENV, "--cost-limit", "-1"], "cost_limits[0] = -1.0: must be >= 0"),
        (
            ["--algo", "ppo-lag", "--env", "bayescrl.constrained.toy:NaNEnv", "--cost-limit", "1"],
            "non-finite observation from env 0 at env step",
        ),
        (
            [
                "--algo",
                "ppo-lag",
                "--env",
                "bayescrl.constrained.toy:NaNEnv",
                "--cost-limit",
                "1",
                "--set",
                "env_kwargs={what: reward}",
            ],
            "non-finite reward",
        ),
        (["--algo", "ecop", "--env", ENV, "--cost-limit", "1", "--total-steps", "-5"], "total_steps"),
        (
            [
                "--algo",
                "ecop",
                "--env",
                "bayescrl/PointCircle-v0",
                "--cost-limit",
                "1",
                "--set",
                "env_kwargs={render_mode: window}",
            ],
            "env_kwargs.render_mode = 'window'",
        ),
        (["--algo", "ecop", "--env", ENV, "--cost-limit", "1", "--set", "config.gamma=2"], "gamma"),
        (
            ["--algo", "ecop", "--env", ENV, "--cost-limit", "1", "--set", "config.bogus=1"],
            "bogus = 1: unknown",
        ),
    ],
)
def test_bad_input_is_rejected_with_clear_message(args, message, tmp_path, capsys):
    full = ["train", *args, "--out", str(tmp_path / "bad"), *SMALL]
    if "--total-steps" not in args:
        full += ["--total-steps", "128"]
    code, cap = _run(full, capsys)
    assert code == 2
    assert message in cap.err and cap.err.startswith("error: ")


def test_resume_of_missing_run_is_clear(tmp_path, capsys):
    code, cap = _run(["train", "--resume", str(tmp_path / "nothing")], capsys)
    assert code == 2 and "no checkpoint.pt" in cap.err


def test_library_train_is_the_command(tmp_path, capsys):
    """``constrained.run.train`` (a Python user's call) and ``prefrl.run.train`` resuming it give what
    ``bayescrl train`` gives: the same iterations and final numbers for the same seed."""
    cfg = {"n_envs": 2, "rollout_steps": 64, "update_epochs": 1, "eval_episodes": 1}
    args = ["--algo", "ppo-lag", "--env", ENV, "--seed", "2", "--cost-limit", "5", *SMALL]
    main(["train", *args, "--total-steps", "256", "--out", str(tmp_path / "cli")])
    lib = train("ppo-lag", ENV, total_steps=128, seed=2, cost_limits=[5], config=cfg, out_dir=tmp_path / "l")
    assert lib["env_steps"] == 128
    lib = train_any(resume_dir=tmp_path / "l", total_steps=256)
    cli = json.loads((tmp_path / "cli" / "metrics.json").read_text())
    for key in ("env_steps", "final_return", "final_costs", "train_final_return"):
        assert lib[key] == pytest.approx(cli[key], rel=1e-9), key
    rows = [(tmp_path / d / "metrics.jsonl").read_text().splitlines() for d in ("cli", "l")]
    assert [json.loads(r)["value_loss"] for r in rows[0]] == pytest.approx(
        [json.loads(r)["value_loss"] for r in rows[1]], rel=1e-9
    )
    with pytest.raises(Exception, match="seed"):
        train_any(resume_dir=tmp_path / "l", seed=3)

"""``bayescrl train`` / ``bayescrl evaluate``: outputs, resume, bad input (exit status 2, clear message)."""

import json

import pytest

from bayescrl.cli import main

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
        (["--algo", "ecop", "--env", ENV, "--cost-limit", "-1"], "must be a finite number >= 0"),
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

"""Every command refuses bad input before it works: one line ``error: <field> = <value>: <reason>``, exit 2.

One test per class of bad input, parametrised over the commands: unknown keys (with the closest valid
one), the one override syntax (``--set KEY=VALUE``; the old forms are gone), numbers / devices / sizes,
``train --resume`` with conflicting settings, unwritable outputs, corrupt checkpoints, envs without a cost
channel, malformed YAML, degenerate sizes and NaN results.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from bayescrl.cli import main

TOY = "bayescrl.constrained.toy:CostCartPole"
TRAIN_SMALL = [
    "--set",
    "config.n_envs=1",
    "--set",
    "config.rollout_steps=64",
    "--set",
    "config.update_epochs=1",
    "--set",
    "config.eval_episodes=1",
    "--no-progress",
]
BANDIT = "bandit: {K: 4, d: 2, T: 5}\noffline: {N: 3}\nagents: [ps]\n"
PSPL = (
    "env: {name: riverswim, S: 3, H: 4}\noffline: {N: 4}\nK: 2\nagents: [dpo]\n"
    "agent_params: {dpo: {steps: 2}}\n"
)
MOPO_EXACT = (
    "mode: tabular\nsolver: exact\nactions: [y1, y2, y3]\nprimary: 1\ntau: 0.1\nb: [0.75]\ndata:\n"
    "  - {y: y1, y_prime: y2, prefs: [1, 1]}\n  - {y: y1, y_prime: y3, prefs: [1, 0]}\n"
    "  - {y: y2, y_prime: y3, prefs: [0, 0]}\n"
)
MOPO_SGD = MOPO_EXACT.replace("solver: exact", "solver: mopo") + "mopo: {steps: 20, batch: 3, runs: 2}\n"
SPEC = "dim: 2\npreferences: [{x0: [1, 0], x1: [0, 1], y: 1}]\n"
SANITY = "mode: synthetic\nexperiment: sanity\ndatasets: [D1]\ntau: [1.0]\nmopo: {steps: 10, runs: 2}\n"


def run(args: list[str], capsys) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``bayescrl ARGS``."""
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def refused(args, capsys, *needles: str) -> str:
    """Assert ``args`` exits 2 with one ``error:`` line holding every needle; returns that line."""
    code, _, err = run(args, capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture
def files(tmp_path):
    """Small configs of every command, written to ``tmp_path``."""
    out = {}
    for name, text in {
        "bandit": BANDIT,
        "pspl": PSPL,
        "mopo": MOPO_EXACT,
        "mopo_sgd": MOPO_SGD,
        "sanity": SANITY,
    }.items():
        p = tmp_path / f"{name}.yaml"
        p.write_text(text)
        out[name] = p
    return out


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """A finished two-iteration ``train`` run on the cost-aware toy env (for resume / evaluate)."""
    out = tmp_path_factory.mktemp("toy") / "run"
    main(["train", "--algo", "ppo-lag", "--env", TOY, "--total-steps", "128", "--cost-limit", "5"]
         + ["--out", str(out), *TRAIN_SMALL])  # fmt: skip
    return out


# ------------------------------------------------------------------ unknown keys
UNKNOWN = {
    "bandit-override": (["bandit", "{bandit}", "--set", "offline.NN=3"], "offline.NN = 3", "'N'"),
    "bandit-file": (["bandit", "{bad}"], "bandti = ", "'bandit'"),
    "pspl-override": (["pspl", "{pspl}", "--set", "agent_params.dpo.step=3"], "dpo.step = 3", "'steps'"),
    "pspl-file": (["pspl", "{bad}"], "bandti = ", None),
    "mopo-override": (["mopo", "{mopo_sgd}", "--set", "mopo.batch_size=0"], "mopo.batch_size = 0", "'batch'"),
    "mopo-top": (["mopo", "{sanity}", "--set", "runs=0"], "runs = 0", None),
    "mopo-file": (["mopo", "{bad}"], "bandti = ", None),
    "train-config": (
        ["train", "--algo", "ppo-lag", "--env", TOY, "--set", "config.n_env=2"],
        "n_env",
        "'n_envs'",
    ),
    "infer-spec": (["infer", "{spec}", "--set", "noise_sdd=2"], "noise_sdd = 2", "'noise_sd'"),
    "infer-option": (
        ["infer", "{spec}", "--engine", "nuts", "--set", "engine_options.num_chain=2"],
        "engine_options.num_chain = 2",
        "'num_chains'",
    ),
    "simulate-rater": (["simulate", "{badrater}"], "raters[0].lamda", "'lam'"),
    "compare-option": (
        ["compare", "{spec}", "--set", "engine_options.bootstrap.p_ofline=0.5"],
        "p_ofline",
        "'p_offline'",
    ),
    "compare-engine": (
        ["compare", "{spec}", "--set", "engine_options.nut.warmup=5"],
        "engine_options.nut",
        "'nuts'",
    ),
    "train-top": (
        ["train", "--algo", "ppo-lag", "--env", TOY, "--set", "confg.gamma=1"],
        "confg = ",
        "'config'",
    ),
}


@pytest.mark.parametrize("case", list(UNKNOWN))
def test_unknown_keys_are_refused_with_the_closest_valid_one(case, files, tmp_path, capsys):
    args, needle, hint = UNKNOWN[case]
    cmd = args[0]
    bad = tmp_path / "bad.yaml"
    base = {"bandit": BANDIT, "pspl": PSPL, "mopo": MOPO_EXACT}.get(cmd, "")
    bad.write_text(base + "bandti: {K: 3}\n")
    spec, badrater = tmp_path / "spec.yaml", tmp_path / "badrater.yaml"
    spec.write_text(SPEC)
    badrater.write_text("dim: 2\nraters: [{id: a, lamda: 3}]\n")
    args = [a.format(bad=bad, spec=spec, badrater=badrater, **files) for a in args]
    out = tmp_path / ("out.nc" if cmd == "infer" else "out")
    args += ["--out", out] + (["--total-steps", "64"] if cmd == "train" else [])
    line = refused(args, capsys, needle, "unknown key")
    if hint:
        assert f"did you mean {hint}" in line
    assert not (out / "results.json").exists() and not (out / "checkpoint.pt").exists()


# ------------------------------------------------------------------ one override syntax
@pytest.mark.parametrize(
    "args",
    [
        ["bandit", "{bandit}", "bandit.T=3"],  # positional KEY=VALUE
        ["bandit", "{bandit}", "-s", "2"],  # -s meant --seeds
        ["mopo", "{mopo}", "-s", "tau=1.0"],  # -s meant --set
        ["infer", "{spec}", "-o", "p_offline=0.6"],  # -o / --option engine options
        ["compare", "{spec}", "--option", "nuts.num_chains=2"],
    ],
    ids=["bandit-positional", "bandit-s", "mopo-s", "infer-o", "compare-option"],
)
def test_old_override_forms_are_gone(args, files, tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text("dim: 2\n")
    code, _, err = run([a.format(spec=spec, **files) for a in args] + ["--out", tmp_path / "o"], capsys)
    assert code == 2 and any(m in err for m in ("--set", "No such option", "unexpected extra argument")), err


def test_set_is_the_override_of_every_command(files, tmp_path, capsys):
    """The same ``--set KEY=VALUE`` changes the config of mopo, bandit and pspl (known answers)."""
    assert run(["mopo", files["mopo"], "--out", tmp_path / "m", "--set", "tau=1.0"], capsys)[0] == 0
    assert json.loads((tmp_path / "m" / "results.json").read_text())["tau"] == 1.0
    args = ["bandit", files["bandit"], "--seeds", "1", "--out", tmp_path / "b", "--no-progress"]
    assert run([*args, "--set", "bandit.T=3"], capsys)[0] == 0
    res = json.loads((tmp_path / "b" / "results.json").read_text())
    assert len(res["agents"]["ps"]["regret_curve_mean"]) == 3
    args = ["pspl", files["pspl"], "--seeds", "1", "--out", tmp_path / "p", "--no-progress", "--no-plots"]
    assert run([*args, "--set", "K=1"], capsys)[0] == 0
    res = json.loads((tmp_path / "p" / "results.json").read_text())
    assert len(res["agents"]["dpo"]["simple_regret_curve_mean"]) == 2  # K + 1 points


# ------------------------------------------------------------------ numbers, devices, sizes
NUMERIC = {
    "train-steps-inf": (["train", "--algo", "ppo-lag", "--env", TOY, "--total-steps", "inf"], "total_steps"),
    "train-steps-nan": (["train", "--algo", "ppo-lag", "--env", TOY, "--total-steps", "nan"], "total_steps"),
    "train-threads": (["train", "--algo", "ppo-lag", "--env", TOY, "--total-steps", "64", "--threads", "0"],
                      "--threads = 0"),
    "train-device": (["train", "--algo", "ppo-lag", "--env", TOY, "--total-steps", "64", "--device", "foo"],
                     "--device = 'foo'"),
    "train-n-envs": (["train", "--algo", "ppo-lag", "--env", TOY, "--total-steps", "64", "--set",
                      "config.n_envs=100000000"], "GiB"),
    "infer-p-offline": (["infer", "{spec}", "--set", "engine_options.p_offline=abc"], "p_offline = 'abc'"),
    "infer-max-steps": (["infer", "{spec}", "--engine", "svi", "--set", "engine_options.max_steps=0"],
                        "max_steps = 0"),
    "infer-num-chains": (["infer", "{spec}", "--engine", "nuts", "--set", "engine_options.num_chains=0"],
                         "num_chains = 0"),
    "infer-samples": (["infer", "{spec}", "--engine", "laplace", "--samples", "10000000000000"], "GiB"),
    "simulate-huge": (["simulate", "{spec}", "--num-prefs", "10000000000000"], "GiB"),
    "compare-engine": (["compare", "{spec}", "--engines", "laplace,foo"], "--engines[1] = 'foo'"),
    "pspl-device": (["pspl", "{pspl}", "--device", "foo"], "--device = 'foo'"),
    "pspl-seeds": (["pspl", "{pspl}", "--seeds", "0"], "--seeds = 0"),
    "bandit-seeds": (["bandit", "{bandit}", "--seeds", "0"], "--seeds = 0"),
    "bandit-device": (["bandit", "{bandit}", "--set", "device=foo"], "device = 'foo'"),
    "mopo-device": (["mopo", "{mopo}", "--device", "foo"], "--device = 'foo'"),
    "mopo-runs": (["mopo", "{sanity}", "--set", "mopo.runs=0"], "mopo.runs = 0"),
    "mopo-batch": (["mopo", "{mopo_sgd}", "--set", "mopo.batch=0"], "mopo.batch = 0"),
    "mopo-steps": (["mopo", "{mopo_sgd}", "--set", "mopo.steps=-3"], "mopo.steps = -3"),
    "mopo-lr": (["mopo", "{mopo_sgd}", "--set", "mopo.lr=.nan"], "mopo.lr = nan"),
}  # fmt: skip
if not torch.cuda.is_available():
    NUMERIC["train-cuda"] = (
        ["train", "--algo", "ppo-lag", "--env", TOY, "--total-steps", "64", "--device", "cuda"],
        "CUDA is not available",
    )
    NUMERIC["mopo-cuda"] = (["mopo", "{mopo}", "--device", "cuda"], "CUDA is not available")


@pytest.mark.parametrize("case", list(NUMERIC))
def test_numbers_devices_and_sizes_are_checked_before_work(case, files, tmp_path, capsys):
    args, needle = NUMERIC[case]
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / ("out.json" if args[0] in ("infer", "simulate") else "out")
    refused([*(a.format(spec=spec, **files) for a in args), "--out", out], capsys, needle)
    assert not (out / "results.json").exists() and not (out / "metrics.jsonl").exists()


def test_evaluate_refuses_days_of_episodes(toy_run, capsys):
    refused(["evaluate", toy_run, "--episodes", "100000000000"], capsys, "episodes = ", "env steps")
    refused(["evaluate", toy_run, "--device", "foo"], capsys, "--device = 'foo'")


# ------------------------------------------------------------------ --resume with conflicting settings
@pytest.mark.parametrize(
    ("extra", "names"),
    [
        (["--algo", "cpo"], ["--algo"]),
        (["--seed", "7", "--env", "CartPole-v1"], ["--env", "--seed"]),
        (["--cost-limit", "3"], ["--cost-limit"]),
        (["--set", "config.gamma=0.5", "--set", "config.n_envs=1"], ["config.gamma"]),
    ],
    ids=["algo", "seed-env", "cost-limit", "config"],
)
def test_resume_refuses_conflicting_settings(extra, names, toy_run, capsys):
    before = (toy_run / "checkpoint.pt").read_bytes()
    line = refused(["train", "--resume", toy_run, "--total-steps", "192", *extra], capsys, *names)
    assert "config.n_envs" not in line  # equal to the saved value: no conflict
    assert (toy_run / "checkpoint.pt").read_bytes() == before


# ------------------------------------------------------------------ outputs, checkpoints, envs, YAML
OUT_UNDER_FILE = {
    "bandit": ["bandit", "{bandit}", "--seeds", "1"],
    "pspl": ["pspl", "{pspl}", "--seeds", "1"],
    "mopo": ["mopo", "{mopo}"],
    "train": ["train", "--algo", "ppo-lag", "--env", TOY, "--total-steps", "64"],
    "infer": ["infer", "{spec}", "--engine", "laplace"],
    "simulate": ["simulate", "{spec}"],
    "compare": ["compare", "{spec}", "--engines", "laplace"],
}


@pytest.mark.parametrize("cmd", list(OUT_UNDER_FILE))
def test_output_under_an_existing_file_is_one_line(cmd, files, tmp_path, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    args = [a.format(spec=spec, **files) for a in OUT_UNDER_FILE[cmd]]
    refused([*args, "--out", blocker / "sub"], capsys, "--out = ", "is a file")


@pytest.mark.parametrize("how", ["truncated", "garbage", "missing-keys"])
@pytest.mark.parametrize("cmd", ["evaluate", "resume"])
def test_corrupt_checkpoint_is_one_line(cmd, how, toy_run, tmp_path, capsys):
    import shutil

    run_dir = tmp_path / "copy"
    shutil.copytree(toy_run, run_dir)
    ckpt = run_dir / "checkpoint.pt"
    data = ckpt.read_bytes()
    if how == "truncated":
        ckpt.write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        ckpt.write_bytes(b"not a checkpoint\n" * 10)
    else:  # decodes, but a hand-edit dropped entries the run needs
        st = torch.load(ckpt, weights_only=True)
        torch.save({k: st[k] for k in ("algo", "policy", "env")}, ckpt)
    args = (
        ["evaluate", run_dir] if cmd == "evaluate" else ["train", "--resume", run_dir, "--total-steps", "256"]
    )
    refused(args, capsys, "checkpoint = ", "checkpoint.pt")


def test_env_without_cost_channel_trains_unconstrained_or_is_refused(tmp_path, capsys):
    """CartPole-v1 has no ``info['cost']``: PPO/TRPO-style algorithms train it unconstrained; a cost limit
    is refused by name."""
    out = tmp_path / "cp"
    code, so, err = run(["train", "--algo", "ppo-lag", "--env", "CartPole-v1", "--total-steps", "64",
                         "--out", out, *TRAIN_SMALL], capsys)  # fmt: skip
    assert code == 0, err
    m = json.loads((out / "metrics.json").read_text())
    assert m["cost_limits"] == [] and m["final_costs"] == [] and m["env_steps"] == 64
    assert "unconstrained" in so
    refused(["train", "--algo", "cpo", "--env", "CartPole-v1", "--total-steps", "64", "--cost-limit", "1",
             "--out", tmp_path / "cp2", *TRAIN_SMALL], capsys, "cost_limits", "0 cost channel")  # fmt: skip


@pytest.mark.parametrize("cmd", ["bandit", "pspl", "mopo", "train", "infer", "simulate", "compare"])
def test_malformed_yaml_is_one_line(cmd, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("mode: tabular\nactions: [y1, y2\ntau: 1\n")
    args = {"train": ["train", "--config", bad], "bandit": ["bandit", bad]}.get(cmd, [cmd, bad])
    line = refused([*args, "--out", tmp_path / "o"], capsys, "not valid YAML", "line ")
    assert "bad.yaml" in line


# ------------------------------------------------------------------ NaN is never a success
@pytest.mark.parametrize("cmd", ["bandit", "pspl", "mopo", "train"])
def test_no_command_exits_0_with_nan_results(cmd, files, tmp_path, monkeypatch, capsys):
    """A diverged run (here: a solver patched to return NaN) exits 2 naming the NaN entry."""
    nan = float("nan")
    if cmd == "mopo":
        import bayescrl.mopo.tabular_run as tab

        real = tab.solve_problem
        monkeypatch.setattr(tab, "solve_problem", lambda *a, **k: ({**real(*a, **k)[0], "G": [nan]}, None))
        args, field = ["mopo", files["mopo"]], "G[0]"
    elif cmd == "bandit":
        import bayescrl.bandits.experiment as bx

        real_b = bx.summarise
        monkeypatch.setattr(bx, "summarise", lambda *a: {**real_b(*a), "final_regret_mean": nan})
        args, field = ["bandit", files["bandit"], "--seeds", "1", "--no-progress"], "final_regret_mean"
    elif cmd == "pspl":
        import bayescrl.pbrl.experiment as px

        real_p = px.run_experiment
        monkeypatch.setattr(px, "run_experiment", lambda *a, **k: {**real_p(*a, **k), "optimal_value": nan})
        args, field = ["pspl", files["pspl"], "--seeds", "1", "--no-progress", "--no-plots"], "optimal_value"
    else:
        from bayescrl.constrained.core.base import OnPolicyAlgorithm

        real_w = OnPolicyAlgorithm.write_results
        monkeypatch.setattr(
            OnPolicyAlgorithm, "write_results", lambda self, *a: {**real_w(self, *a), "final_return": nan}
        )
        args = ["train", "--algo", "ppo-lag", "--env", TOY, "--total-steps", "64", "--cost-limit", "5"]
        args, field = [*args, *TRAIN_SMALL], "final_return"
    refused([*args, "--out", tmp_path / "o"], capsys, "results = ", f"{field} is NaN")


def test_first_nan_finds_nested_entries():
    from bayescrl.utils.checks import first_nan

    assert first_nan({"a": [1.0, {"b": math.nan}]}) == "a[1].b"
    assert first_nan({"t": torch.tensor([0.0, math.nan])}) == "t[1]"
    assert first_nan({"a": [1.0, None, math.inf], "s": "nan"}) is None

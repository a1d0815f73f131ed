"""README.md's command block runs as written, in order, in an empty folder (with small budgets).

The block under "## Command line" is extracted, continuation lines joined, ``;`` split, and each command is
run in this process through ``bayescrl.cli.main`` in a temporary folder. Only budgets change: options the
block gives (``--seeds 5``, ``--total-steps 100000``) are lowered and ``--set`` overrides (the one override
parser every command has) shrink the rest (:data:`BUDGET`). The person labelling queries between ``prefs
export`` and ``prefs import`` is played by :func:`_label` (it writes ``labels.json``, as the page does).
Every command that writes results must end with its ``wrote DIR/: files`` line.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path

import pytest

from bayescrl.cli import main

ROOT = Path(__file__).resolve().parents[1]
TRAIN = [
    "--set", "config.n_envs=1", "--set", "config.rollout_steps=100", "--set", "config.minibatch_size=100",
    "--set", "config.update_epochs=1", "--set", "config.eval_episodes=1",
]  # fmt: skip
#: the run that `evaluate` (and its video) replays: short episodes
SHORT = ["--set", "env_kwargs.max_episode_steps=20"]
#: per command (mopo: per config file name): {option: lowered value} and extra arguments appended
BUDGET: dict[str, tuple[dict[str, str], list[str]]] = {
    "demo": ({}, ["--seeds", "2", "--set", "bandit.T=20"]),
    "infer": ({"--samples": "64"}, []),
    "compare": (
        {},
        ["--samples", "50", "--coverage-reps", "0", "--engines", "exact,laplace"]
        + ["--set", "preferences=[]"],  # rewards only: the exact posterior is the reference, no NUTS
    ),
    "bandit": ({"--seeds": "1"}, ["--set", "bandit.T=10"]),
    "pspl": ({"--seeds": "1"}, ["--set", "K=2", "--set", "offline.N=10", "--set", "agents=[pspl, dps]"]),
    "train": ({"--total-steps": "200"}, TRAIN),
    "evaluate": ({"--episodes": "1"}, []),
    "sweep": (
        {},
        ["--backend", "local", "--set", "args.total-steps=200", "--set", "grid.seed=[0]"]
        + ["--set", "grid.algo=[ecop]"],
    ),
    "lm_tiny.yaml": (
        {},
        ["--set", "model.sft_steps=2", "--set", "train.steps=2", "--set", "data.n_train=16"]
        + ["--set", "data.n_eval_prompts=2", "--set", "methods=[mopo]", "--set", "sweep.thresholds=[]"],
    ),
    "trl_format.yaml": ({}, ["--set", "train.steps=2", "--set", "progress.checkpoint_every=0"]),
}
#: commands that write results (their last line names the files)
WRITERS = (
    "demo",
    "simulate",
    "infer",
    "compare",
    "bandit",
    "pspl",
    "train",
    "evaluate",
    "mopo",
    "sweep",
    "report",
)


def readme_commands() -> list[tuple[dict[str, str], list[str]]]:
    """``(env, argv)`` of every command in README.md's command-line block, in order."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Command line\n.*?```bash\n(.*?)```", text, re.S).group(1)
    block = block.replace("\\\n", " ")
    out = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        cmd: list[str] = []
        for w in [*words, ";"]:
            if w != ";" and not w.endswith(";"):
                cmd.append(w)
                continue
            if w != ";":
                cmd.append(w[:-1])
            if cmd:
                env = {}
                while cmd and re.fullmatch(r"[A-Z_]+=\S*", cmd[0]):
                    k, v = cmd.pop(0).split("=", 1)
                    env[k] = v
                out.append((env, cmd))
            cmd = []
    return out


def _budget(argv: list[str]) -> list[str]:
    args = [a for a in argv if a not in ("-q", "-qq", "-v")]
    name = args[0]
    if name == "mopo":
        name = Path(args[1]).name
    lower, extra = BUDGET.get(name, ({}, []))
    if name == "train" and "--resume" in argv:
        extra = []  # a resumed run keeps its settings
    if name == "train" and "runs/ecop" in argv:
        extra = extra + SHORT
    argv = list(argv)
    for opt, value in lower.items():
        if opt in argv:
            argv[argv.index(opt) + 1] = value
        elif name != "evaluate":
            argv += [opt, value]
    return argv + extra


def _label(run: Path) -> None:
    """The person at the labelling page: every pending query answered 'left'."""
    pending = json.loads((run / "queries" / "pending.json").read_text())
    labels = [{"query": q["id"], "choice": "left"} for q in pending["queries"]]
    Path("labels.json").write_text(json.dumps({"round": pending["round"], "labels": labels}))


def test_readme_block_is_what_the_test_runs():
    cmds = readme_commands()
    assert cmds[0][1] == ["bayescrl", "--help"] and len(cmds) >= 20
    assert all(argv[0] == "bayescrl" for _env, argv in cmds)
    assert ["bayescrl", "examples", "copy", "my-examples"] in [a for _e, a in cmds]


def test_readme_commands_run_as_written(tmp_path, monkeypatch, capsys):
    pytest.importorskip("transformers")  # the lm extra (make install-dev), used by the mopo lm lines
    monkeypatch.chdir(tmp_path)
    t0, times = time.time(), {}
    for env, argv in readme_commands():
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        args = _budget(argv[1:])
        if args[:2] == ["prefs", "import"]:
            _label(Path(args[2]))
        t = time.time()
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code or 0
        cap = capsys.readouterr()
        times[" ".join(argv[1:4])] = round(time.time() - t, 1)
        assert code == 0, f"{shlex.join(argv)} -> exit {code}: {cap.err[-1500:]}"
        cmd = next((a for a in args if not a.startswith("-")), "")
        if cmd in WRITERS:
            assert cap.out.rstrip().splitlines()[-1].startswith("wrote "), (argv, cap.out[-500:])
        for k in env:
            monkeypatch.delenv(k)
    assert (tmp_path / "runs" / "smoke" / "report.md").exists()
    print("seconds per README command:", times, f"total {time.time() - t0:.0f}")  # shown with -rP

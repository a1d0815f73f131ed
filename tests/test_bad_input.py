"""Every class of bad input, over every command: one line ``error: <field> = <value>: <reason>``, exit 2, no
traceback, nothing written. One table (``CASES``): each row is a command line whose ``{placeholders}`` name
files built on demand (configs, damaged copies of a finished run or sweep folder, a tiny model) and the
words its one error line must hold. Below it, the kill-safe resume paths that succeed: a torn last log line
is dropped with a message, a sweep reruns a run whose result file is damaged.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from bayescrl.cli import main

ROOT = Path(__file__).resolve().parents[1]
TOY = "bayescrl.constrained.toy:CostCartPole"
SMALL = ["--set", "config.n_envs=1", "--set", "config.rollout_steps=64", "--set", "config.update_epochs=1"]
SMALL += ["--set", "config.eval_episodes=1", "--no-progress"]
TRAIN = ["train", "--algo", "ppo-lag", "--env", TOY, "--total-steps", "64", "--cost-limit", "5"]
TRAIN += ["--out", "{out}"]
PSPL = ["pspl", "{pspl}", "--seeds", "1", "--out", "{out}", "--no-progress", "--no-plots"]
BANDIT = ["bandit", "{bandit}", "--seeds", "1", "--out", "{out}", "--no-progress"]
COMPARE = ["compare", "{spec}", "--out", "{out}"]
MOPO_LM = ["mopo", str(ROOT / "examples/mopo/trl_format.yaml"), "--model", "{model}", "--out", "{out}"]
TEXTGEN = ["mopo", str(ROOT / "examples/mopo/textgen_assistant.yaml"), "--out", "{out}"]
LM_TINY = ["mopo", str(ROOT / "examples/mopo/lm_tiny.yaml"), "--out", "{out}"]

TEXTS = {
    "pspl": "env: {name: riverswim, S: 3, H: 4}\noffline: {N: 4}\nK: 2\nagents: [pspl]\n",
    "bandit": "bandit: {K: 4, d: 2, T: 5}\noffline: {N: 3}\nagents: [ps]\n",
    "bandit_dup": "bandit: {K: 4, d: 2, T: 5, K: 8}\nagents: [ps]\n",
    "spec": "dim: 2\npreferences: [{x0: [1, 0], x1: [0, 1], y: 1}]\n",
    "data_dup_json": '{"dim": 2, "preferences": [{"x0": [1, 0], "x1": [0, 1], "y": 1, "y": 0}]}\n',
    "mopo": (ROOT / "examples/mopo/tabular_mopo.yaml").read_text(),
    "native_jsonl": '{"prompt": "q", "response_a": "a", "response_b": "b", "prefs": [1, 0], "rater": "x"}\n',
    "prefs_long": "features: onehot\nsegment_length: 1000\nraters: [{id: a}]\n",
    "prefs_ok": "features: onehot\nsegment_length: 2\nraters: [{id: a}]\n",
    "labels_conflict": json.dumps(
        {
            "round": 3,
            "labels": [
                {"query": "r3q0", "choice": "left", "rater": "alice"},
                {"query": "r3q0", "choice": "right", "rater": "alice"},
            ],
        }  # fmt: skip
    ),
    "labels_dup": '{"round": 3, "round": 3, "labels": []}',
}

# id: (command line, words of the one error line)
CASES: dict[str, tuple[list[str], list[str]]] = {
    # sizes beyond memory: the shared estimate-and-refuse (check_memory), naming the size to lower
    "pspl-N": ([*PSPL, "--set", "offline.N=1000000000"], ["offline.N = 1000000000", "GiB"]),
    "pspl-S": ([*PSPL, "--set", "env.S=100000"], ["env.S = 100000", "GiB"]),
    "pspl-H": ([*PSPL, "--set", "env.H=100000000"], ["env.H = 100000000", "GiB"]),
    "pspl-seeds": ([*PSPL[:2], "--seeds", "100000000", *PSPL[4:]], ["--seeds = 100000000", "GiB"]),
    "bandit-K": ([*BANDIT, "--set", "bandit.K=1000000000"], ["bandit.K = 1000000000", "GiB"]),
    "bandit-d": ([*BANDIT, "--set", "bandit.d=100000"], ["bandit.d = 100000", "GiB"]),
    "bandit-T": ([*BANDIT, "--set", "bandit.T=10000000000"], ["bandit.T = 10000000000", "GiB"]),
    "bandit-seeds": ([*BANDIT[:2], "--seeds", "100000000000", *BANDIT[4:]], ["--seeds = 100000000000"]),
    "compare-samples": ([*COMPARE, "--samples", "100000000000"], ["--samples = 100000000000", "GiB"]),
    "compare-reps": ([*COMPARE, "--coverage-reps", "1000000000"], ["--coverage-reps = 1000000000", "GiB"]),
    # values only a library checked (deep inside a fit or a model build)
    "pspl-beta-inf": ([*PSPL, "--set", "offline.beta=.inf"], ["offline.beta = inf", "model.beta"]),
    "train-hidden-abc": ([*TRAIN, "--set", "config.actor_hidden=abc", *SMALL], ["actor_hidden = 'abc'"]),
    "train-hidden-float": ([*TRAIN, "--set", "config.actor_hidden=[1.5]", *SMALL], ["actor_hidden[0] = 1.5"]),
    "train-lagrange-lr": ([*TRAIN, "--set", "config.lagrange_lr=abc", *SMALL], ["lagrange_lr = 'abc'"]),
    "mopo-steps-abc": (["mopo", "{mopo}", "--out", "{out}", "--set", "mopo.steps=abc"], ["mopo.steps = "]),
    "lm-peft-r": ([*MOPO_LM, "--set", "train.peft.r=0"], ["train.peft.r = 0"]),
    "lm-lr-inf": ([*MOPO_LM, "--set", "train.lr=.inf"], ["train.lr = inf", "finite"]),
    "lm-batch-huge": ([*MOPO_LM, "--set", "train.batch_size=1e9"], ["batch_size = 1000000000", "64 records"]),
    "lm-max-length": ([*MOPO_LM, "--set", "train.max_length=4096"], ["train.max_length = 4096", "context"]),
    "lm-tiny-heads": ([*LM_TINY, "--set", "model.n_head=3"], ["model.n_head = 3", "n_embd = 64"]),
    "lm-tiny-words": ([*LM_TINY, "--set", "task.max_words=100"], ["task.max_words = 100", "context"]),
    "textgen-heads": ([*TEXTGEN, "--set", "model.n_head=3"], ["model.n_head = 3"]),
    "textgen-new-tokens": ([*TEXTGEN, "--set", "task.max_new_tokens=500"], ["task.max_new_tokens = 500"]),
    # silently accepted before
    "compare-no-engine": ([*COMPARE, "--engines", ","], ["--engines = ','", "names no engine"]),
    "compare-empty-engines": ([*COMPARE, "--engines", ""], ["--engines = ''"]),
    "labels-conflict": (["prefs", "import", "{pending}", "{labels_conflict}"], ["labels.query[1] = 'r3q0'"]),
    "labels-dup-key": (["prefs", "import", "{pending}", "{labels_dup}"], ["labels = ", "'round' appears"]),
    "infer-dup-key": (["infer", "{data_dup_json}", "--out", "{out}/p.nc"], ["'y' appears twice", "line 1"]),
    "yaml-dup-key": ([*BANDIT[:1], "{bandit_dup}", *BANDIT[2:]], ["bandit_dup", "'K' appears twice"]),
    "mopo-record-key": (
        ["mopo", "{mopo}", "--out", "{out}", "--set", "data=[{{y: y1, y_prime: y2, prefs: [1], ratr: a}}]"],
        ["data[0].ratr = 'a'", "did you mean 'rater'"],
    ),
    "lm-native-key": (
        [*MOPO_LM, "--set", "data={{path: '{native_jsonl}', format: native}}"],
        ["native_jsonl.jsonl[0].rater = 'x'", "unknown key"],
    ),
    "prefs-segment-too-long": (
        [*TRAIN, "--preferences", "{prefs_long}", *SMALL],
        ["preferences.segment_length = 1000", "rollout"],
    ),
    "textgen-seeds": ([*TEXTGEN, "--set", "seeds=[0, 1, 0]"], ["seeds = [0, 1, 0]", "seed 0 appears twice"]),
    # outputs that cannot be written: refused before any work
    "demo-readonly": (["demo", "--out", "{readonly}/demo", "--seeds", "1"], ["--out = ", "cannot"]),
    "train-readonly": ([*TRAIN[:-1], "{readonly}/run", *SMALL], ["--out = ", "cannot write here"]),
    "examples-readonly": (["examples", "copy", "{readonly}/ex"], ["DIR = ", "cannot"]),
    "examples-file-in-way": (["examples", "copy", "{blocked_examples}"], ["DIR = ", "is a file"]),
    "video-under-file": (["evaluate", "{run}", "--video", "{blocker}/v.gif"], ["--video = ", "is a file"]),
    "video-readonly": (["evaluate", "{run}", "--video", "{readonly}/v.gif"], ["--video = ", "cannot"]),
    "report-md-is-folder": (["report", "{sweep_md_folder}"], ["DIR = ", "report.md", "is a folder"]),
    "report-readonly": (["report", "{readonly}"], ["DIR = ", "cannot write"]),
    # damaged sweep folders: which file, and how to recover
    "report-manifest-truncated": (["report", "{sweep_manifest_cut}"], ["sweep.json = ", "truncated"]),
    "report-manifest-list": (["report", "{sweep_manifest_list}"], ["sweep.json = ", "must be an object"]),
    "report-runs-garbage": (["report", "{sweep_runs_garbage}"], ["sweep.json = ", "runs[0]"]),
    "report-status-garbage": (["report", "{sweep_status_garbage}"], ["status/a_s0.json = ", "one of"]),
    "report-status-nan": (["report", "{sweep_status_nan}"], ["status/a_s0.json = ", "got float"]),
    "report-result-cut": (["report", "{sweep_result_cut}"], ["a_s1/metrics.json = ", "truncated", "rerun"]),
    "report-result-list": (["report", "{sweep_result_list}"], ["a_s1/metrics.json = ", "got list"]),
    "report-curves-cut": (["report", "{sweep_curves_cut}"], ["a_s0/curves.json = ", "truncated", "rerun"]),
    # damaged run folders and changed settings on --resume
    "resume-prefs-added": (["train", "--resume", "{run_copy}", "--preferences", "{prefs_ok}"],
                           ["preferences = ", "env reward"]),  # fmt: skip
    "resume-run-json-cut": (["train", "--resume", "{run_json_cut}"], ["run.json = ", "truncated"]),
    "resume-log-middle-cut": (["train", "--resume", "{run_log_middle_cut}"], ["metrics.jsonl = ", "line 1"]),
    "resume-answers-cut": (["train", "--resume", "{prefs_answers_cut}", "--no-progress"],
                           ["answers.json = ", "truncated", "prefs import"]),  # fmt: skip
    "lm-resume-config-cut": ([*MOPO_LM, "--resume"], ["checkpoint = ", "config.json", "truncated"]),
}  # fmt: skip


def run(args: list[str], capsys) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``bayescrl ARGS`` in this process (``bayescrl.cli.main``)."""
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code
    cap = capsys.readouterr()
    return code, cap.out, cap.err


# ------------------------------------------------------------------------------------------ shared runs
@pytest.fixture(scope="module")
def toy_run(tmp_path_factory) -> Path:
    """A finished two-iteration ``train`` run on the env reward."""
    out = tmp_path_factory.mktemp("toy") / "run"
    main(["train", "--algo", "ppo-lag", "--env", TOY, "--total-steps", "128", "--cost-limit", "5",
          "--out", str(out), *SMALL])  # fmt: skip
    return out


@pytest.fixture(scope="module")
def prefs_run(tmp_path_factory) -> Path:
    """A ``train --preferences`` run with people as raters, paused on its first round of queries."""
    tmp = tmp_path_factory.mktemp("prefs")
    spec = tmp / "prefs.yaml"
    spec.write_text(
        "labels: external\nfeatures: onehot\nsegment_length: 2\nraters: [{id: alice}]\n"
        "queries: {total: 4, per_round: 2, select: uniform}\n"
    )
    out = tmp / "run"
    main(["train", "--algo", "ecop", "--env", "bayescrl/SmallCMDP-v0", "--cost-limit", "3", "--total-steps",
          "200", "--preferences", str(spec), "--out", str(out), "--set", "config.n_envs=1", "--set",
          "config.rollout_steps=50", "--no-progress"])  # fmt: skip
    assert (out / "queries" / "pending.json").exists()
    return out


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """The tiny random GPT-2 (context 64 tokens) and its tokenizer as a local Hugging Face directory."""
    from bayescrl.mopo.lm.tiny import build_model, build_tokenizer

    path = tmp_path_factory.mktemp("tiny_gpt2")
    tok = build_tokenizer()
    build_model(tok, n_layer=1, n_embd=16, n_head=2, seed=1).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _readonly(tmp: Path) -> Path:
    """A folder no file can be created in (chmod 555; as root, which ignores modes, /sys)."""
    path = tmp / "ro"
    path.mkdir()
    path.chmod(0o555)
    try:
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError:
        return path
    sysfs = Path("/sys/kernel")
    try:
        with tempfile.TemporaryFile(dir=sysfs):
            pass
    except OSError:
        return sysfs
    pytest.skip("no read-only folder on this machine")


def _fake_sweep(out: Path) -> Path:
    """A finished 1 algo x 2 seeds train sweep written by hand."""
    spec = {"name": "fake", "command": "train", "grid": {"algo": ["a"], "seed": [0, 1]}}
    runs = [{"id": f"a_s{s}", "point": {"algo": "a", "seed": s}, "argv": []} for s in (0, 1)]
    (out / "status").mkdir(parents=True)
    for s in (0, 1):
        (out / f"a_s{s}").mkdir()
        (out / f"a_s{s}" / "metrics.json").write_text(
            json.dumps({"final_return": 1.0 + s, "final_costs": [0.1]})
        )
        (out / f"a_s{s}" / "curves.json").write_text(
            json.dumps({"env_steps": [1, 2], "ep_return": [0.0, 1.0]})
        )
        (out / "status" / f"a_s{s}.json").write_text(json.dumps({"status": "done"}))
    (out / "sweep.json").write_text(json.dumps({"format": 1, "hash": "x", "spec": spec, "runs": runs}))
    return out


def _cut(path: Path) -> None:
    """Cut a file mid-way, as a process killed while writing it leaves it."""
    text = path.read_text()
    path.write_text(text[: len(text) // 2])


class Files(dict):
    """``{placeholder: path}``, each built the first time a command line names it."""

    def __init__(self, tmp: Path, request):
        super().__init__(out=str(tmp / "out"))
        self.tmp, self.request = tmp, request

    def __missing__(self, key: str) -> str:
        self[key] = str(self._make(key))
        return self[key]

    def _copy(self, fixture: str, name: str) -> Path:
        dst = self.tmp / name
        shutil.copytree(self.request.getfixturevalue(fixture), dst)
        return dst

    def _make(self, key: str) -> Path:
        tmp = self.tmp
        if key in TEXTS:
            name, _, ext = key.rpartition("_")
            path = tmp / (f"{key}.{ext}" if ext in ("json", "jsonl") else f"{key}.yaml")
            path.write_text(TEXTS[key])
            return path
        if key == "readonly":
            return _readonly(tmp)
        if key == "model":
            return self.request.getfixturevalue("model_dir")
        if key == "run":
            return self.request.getfixturevalue("toy_run")
        if key == "pending":  # a run folder waiting for labels of round 3
            path = tmp / "pending_run"
            (path / "queries").mkdir(parents=True)
            query = {"segment": 0, "obs": [[0.0]], "actions": [[0.0]], "features": [1.0]}
            pending = {
                "round": 3,
                "raters": ["alice"],
                "queries": [{"id": "r3q0", "left": query, "right": query}],
            }
            (path / "queries" / "pending.json").write_text(json.dumps(pending))
            return path
        if key == "blocker":
            (tmp / "blocker").write_text("a file, not a folder\n")
            return tmp / "blocker"
        if key == "blocked_examples":
            path = tmp / "ex"
            path.mkdir()
            (path / "pspl").write_text("a file where the pspl folder goes\n")
            return path
        if key.startswith("sweep_"):
            out = _fake_sweep(tmp / key)
            how = key[len("sweep_") :]
            if how == "md_folder":
                (out / "report.md").mkdir()
            elif how == "manifest_cut":
                _cut(out / "sweep.json")
            elif how == "manifest_list":
                (out / "sweep.json").write_text("[]")
            elif how == "runs_garbage":
                m = json.loads((out / "sweep.json").read_text())
                (out / "sweep.json").write_text(json.dumps({**m, "runs": ["a_s0"]}))
            elif how == "status_garbage":
                (out / "status" / "a_s0.json").write_text(json.dumps({"status": "dne"}))
            elif how == "status_nan":
                (out / "status" / "a_s0.json").write_text("NaN")
            elif how == "result_cut":
                _cut(out / "a_s1" / "metrics.json")
            elif how == "result_list":
                (out / "a_s1" / "metrics.json").write_text("[1, 2]")
            elif how == "curves_cut":
                _cut(out / "a_s0" / "curves.json")
            return out
        if key == "run_copy":
            return self._copy("toy_run", key)
        if key == "run_json_cut":
            path = self._copy("toy_run", key)
            _cut(path / "run.json")
            return path
        if key == "run_log_middle_cut":
            path = self._copy("toy_run", key)
            lines = (path / "metrics.jsonl").read_text().splitlines()
            (path / "metrics.jsonl").write_text("\n".join([lines[0][:20], *lines[1:]]) + "\n")
            return path
        if key == "prefs_answers_cut":
            path = self._copy("prefs_run", key)
            (path / "queries" / "answers.json").write_text('{"round": 1, "answers": [{"query": "r1q0", "y"')
            return path
        raise KeyError(key)


@pytest.fixture
def files(tmp_path, request) -> Files:
    return Files(tmp_path, request)


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case, files, tmp_path, capsys):
    args, words = CASES[case]
    if case == "lm-resume-config-cut":  # a checkpoint whose config.json a kill cut short
        ckpt = Path(files["out"]) / "checkpoint"
        ckpt.mkdir(parents=True)
        (ckpt / "state.pt").write_bytes(b"")
        (ckpt / "config.json").write_text('{"method": "mopo", "tau"')
    args = [a.format_map(files) for a in args]
    capsys.readouterr()  # what building the files printed
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    code, _, err = run(args, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for w in words:
        assert w.format_map(files) in lines[0], (w, lines[0])
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    new = [p for p in after if p not in before]
    assert not [p for p in new if (tmp_path / p).is_file()], new  # nothing written (at most an empty folder)


# ------------------------------------------------------------------------------------------ kill-safe resume
def test_resume_drops_a_half_written_last_log_line_with_a_message(toy_run, tmp_path, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(toy_run, run_dir)
    log = run_dir / "metrics.jsonl"
    good = log.read_text().splitlines()
    log.write_text("\n".join(good) + '\n{"iteration": 3, "env_st')  # killed while appending iteration 3
    code, _, err = run(["train", "--resume", run_dir, "--total-steps", "192", "--no-progress"], capsys)
    assert code == 0, err
    assert "dropped its half-written last line" in err and "Traceback" not in err
    iters = [json.loads(ln)["iteration"] for ln in log.read_text().splitlines()]
    assert iters == [1, 2, 3]  # the torn line is gone, iteration 3 logged once, by the resumed run


def test_resume_refuses_a_changed_preference_spec(prefs_run, tmp_path, capsys):
    other = tmp_path / "other.yaml"
    other.write_text("labels: external\nfeatures: onehot\nsegment_length: 3\nraters: [{id: alice}]\n")
    code, _, err = run(["train", "--resume", prefs_run, "--preferences", other], capsys)
    assert code == 2 and "preferences = " in err and "differs" in err


def test_sweep_reruns_a_finished_run_whose_result_is_damaged(tmp_path, caplog):
    """A resumed sweep treats a run whose status or result file is damaged as unfinished (and says so);
    ``report`` refuses it, naming the file."""
    from bayescrl.sweep.report import run_done
    from bayescrl.utils.errors import DataError

    out = _fake_sweep(tmp_path / "sw")
    assert run_done(out, "a_s1", "metrics.json")
    _cut(out / "a_s1" / "metrics.json")
    with caplog.at_level("WARNING"):
        assert not run_done(out, "a_s1", "metrics.json")
    assert "a_s1 will run again" in caplog.text and "truncated" in caplog.text
    with pytest.raises(DataError, match="a_s1/metrics.json"):
        run_done(out, "a_s1", "metrics.json", strict=True)
    (out / "status" / "a_s0.json").write_text("{")
    assert not run_done(out, "a_s0", "metrics.json")


def test_json_reader_refuses_repeated_keys_and_names_truncation(tmp_path):
    from bayescrl.utils.errors import DataError
    from bayescrl.utils.io import load_json, yaml_loads

    path = tmp_path / "x.json"
    cases = {
        '{"a": 1, "a": 2}': "key 'a' appears twice in one object",
        '{"a": [1, 2': "truncated (ends mid-document)",
        '{"a": "tr': "truncated (ends mid-document)",
        "": "empty",
        '{"a": 1} x': "not valid JSON (Extra data, line 1 column 10)",
    }
    for text, why in cases.items():
        path.write_text(text)
        with pytest.raises(DataError, match=re.escape(f"x.json': {why}; fix it")):
            load_json(path, "x", recover="fix it")
    path.write_text('{"a": {"b": 1}, "c": [{"b": 1}]}')  # the same key in different objects is fine
    assert load_json(path) == {"a": {"b": 1}, "c": [{"b": 1}]}
    assert yaml_loads("a: &x {p: 1}\nb: {<<: *x, p: 2}\n")["b"] == {"p": 2}  # a merge key may be overridden
    assert os.path.exists(path)

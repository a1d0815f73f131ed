"""MOPO on a user's TRL-format file and local model: CLI end to end, resume, progress, bad input, NaN stop."""

import json

import pytest
import torch
from cli_utils import run

from bayescrl.mopo.lm.data import load_trl
from bayescrl.mopo.lm.tiny import build_model, build_tokenizer
from bayescrl.mopo.lm.trainer import MOPOLMTrainer
from bayescrl.utils import DataError

EXAMPLE = "examples/mopo/trl_format.yaml"
FAST = ["--set", "train.steps=4", "--set", "train.t0=2", "--set", "progress.checkpoint_every=2"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """The tiny random GPT-2 and its word-level tokenizer, saved as a local Hugging Face model directory."""
    path = tmp_path_factory.mktemp("tiny_gpt2")
    tok = build_tokenizer()
    build_model(tok, n_layer=2, n_embd=32, n_head=2, seed=1).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def lines(path):
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def adapter(out):
    from safetensors.torch import load_file

    return load_file(out / "policy" / "adapter" / "adapter_model.safetensors")


def test_trl_file_with_two_objectives_runs_end_to_end(model_dir, tmp_path, capsys):
    out = tmp_path / "run"
    code, err = run(["mopo", EXAMPLE, "--model", str(model_dir), "--out", str(out), *FAST], capsys)
    assert code == 0, err
    res = json.loads((out / "results.json").read_text())
    assert res["data"]["objectives"] == ["short_enough", "helpful"] and res["data"]["primary"] == "helpful"
    assert res["data"]["records"] == 64 and res["data"]["raters"] == 3 and res["steps"] == 4
    assert set(res["implicit_accuracy"]) == {"short_enough", "helpful"}
    recs = lines(out / "metrics.jsonl")
    assert [r["step"] for r in recs] == [1, 2, 3, 4]
    assert all(len(r["lambda"][0]) == 1 and "eta_s" in r for r in recs) and recs[-1]["eta_s"] == 0
    assert (out / "checkpoint" / "state.pt").exists() and (out / "policy" / "heads.pt").exists()
    progress = [ln for ln in err.splitlines() if "ETA" in ln]  # progress lines on stderr
    assert progress and "step 4/4" in progress[-1] and "lambda" in progress[-1]


def test_resume_continues_where_an_interrupted_run_stopped(model_dir, tmp_path, capsys):
    full, part = tmp_path / "full", tmp_path / "part"
    args = ["mopo", EXAMPLE, "--model", str(model_dir), *FAST, "--set", "train.epsilon=0.1"]
    assert run([*args, "--out", str(full)], capsys)[0] == 0
    real = MOPOLMTrainer.step

    def interrupted(self):  # Ctrl-C after step 3 was logged; the last checkpoint is step 2's
        if self.step_count == 3:
            raise KeyboardInterrupt
        return real(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(MOPOLMTrainer, "step", interrupted)
        assert run([*args, "--out", str(part)], capsys)[0] == 130
    assert len(lines(part / "metrics.jsonl")) == 3
    assert run([*args, "--out", str(part), "--resume"], capsys)[0] == 0
    a, b = lines(full / "metrics.jsonl"), lines(part / "metrics.jsonl")
    assert [r["step"] for r in b] == [1, 2, 3, 4]  # step 3 was redone from the checkpoint, logged once
    assert a[-1]["lambda"] != a[1]["lambda"]  # the multipliers moved after the interruption
    for ra, rb in zip(a, b, strict=True):
        assert torch.allclose(torch.tensor(ra["lambda"]), torch.tensor(rb["lambda"]), atol=1e-6)
        assert ra["b"] == rb["b"] and torch.allclose(torch.tensor(ra["G"]), torch.tensor(rb["G"]), atol=1e-6)
        assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-5)
    wa, wb = adapter(full), adapter(part)
    assert all(torch.allclose(wa[k], wb[k], atol=1e-6) for k in wa)
    assert json.loads((part / "results.json").read_text())["resumed_from_step"] == 2
    code, err = run([*args, "--out", str(part), "--resume", "--set", "train.tau=0.3"], capsys)
    assert code == 2 and "train.tau" in err and "checkpoint" in err


def _one_error_line(err):
    msg = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(msg) == 1 and "Traceback" not in err, err
    return msg[0]


def test_bad_input_is_one_line_and_exit_2(model_dir, tmp_path, capsys):
    rows = [json.loads(ln) for ln in open("examples/mopo/trl_tiny.jsonl")]
    del rows[5]["pref_short_enough"]  # a label missing for one row
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = ["mopo", EXAMPLE, "--out", str(tmp_path / "o")]
    cases = [
        (
            [*base, "--model", str(model_dir), "--set", f"data.path={bad}"],
            ["pref_short_enough", "[5]", "missing"],
        ),
        ([*base, "--model", str(tmp_path / "nope")], ["model.path", "no such directory"]),
        ([*base, "--model", str(model_dir), "--set", "train.batch_size=0"], ["batch_size", ">= 1"]),
        ([*base], ["model.path", "--model"]),
        (["mopo", "examples/mopo/tabular_exact.yaml", "--out", str(tmp_path / "t"), "--model", "x"], ["lm"]),
    ]
    for args, words in cases:
        code, err = run(args, capsys)
        line = _one_error_line(err)
        assert code == 2 and all(w in line for w in words), line


def test_nan_stops_the_run_with_a_clear_message(model_dir, tmp_path, capsys, monkeypatch):
    real = MOPOLMTrainer._backward

    def poison(self, loss):  # after the first update the weights hold NaN
        real(self, loss)
        with torch.no_grad():
            self._params[0].fill_(float("nan"))

    monkeypatch.setattr(MOPOLMTrainer, "_backward", poison)
    out = tmp_path / "nan"
    code, err = run(["mopo", EXAMPLE, "--model", str(model_dir), "--out", str(out), *FAST], capsys)
    line = _one_error_line(err)
    assert code == 2 and "not finite at step 2" in line, line
    assert not (out / "results.json").exists() and len(lines(out / "metrics.jsonl")) == 1


def test_load_trl_columns_raters_and_parquet(tmp_path, monkeypatch):
    rows = [
        {"prompt": "p", "chosen": "x y", "rejected": "z", "pref_safe": 1, "pref_brief": 0, "rater": "ann"},
        {"prompt": "q", "chosen": "u", "rejected": "v w", "pref_safe": 0, "pref_brief": 1, "rater": 7},
    ]
    d = load_trl(rows, primary="helpful")
    assert d.names == ("brief", "safe", "helpful")  # pref_ columns sorted, the primary (chosen) last
    assert d.prefs.tolist() == [[0, 1, 1], [1, 0, 1]] and d.raters == ("ann", "7")
    assert d.responses_a == ("x y", "u") and d.subset([1]).raters == ("7",)
    with pytest.raises(DataError, match=r"pref_safe\[1\].*missing"):
        load_trl([rows[0], {**rows[1], "pref_safe": None}])
    with pytest.raises(DataError, match=r"rater\[1\]"):
        load_trl([rows[0], {k: v for k, v in rows[1].items() if k != "rater"}])
    with pytest.raises(DataError, match=r"pref_brief\[0\].*0 or 1"):
        load_trl([{**rows[0], "pref_brief": 2}, rows[1]])
    back = load_trl(d.to_trl_rows(primary=1), primary="safe")  # round trip, another primary
    assert back.names == ("brief", "helpful", "safe") and back.raters == d.raters
    assert back.prefs.tolist() == [[0, 1, 1], [0, 0, 1]]  # chosen = the answer "safe" prefers
    assert back.responses_a == ("x y", "v w")
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    path = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist([{**r, "rater": str(r["rater"])} for r in rows]), path)
    assert load_trl(path, primary="helpful").prefs.tolist() == d.prefs.tolist()
    monkeypatch.setitem(__import__("sys").modules, "pyarrow.parquet", None)  # as if pyarrow were absent
    with pytest.raises(DataError, match=r"bayescrl\[parquet\]"):
        load_trl(path)

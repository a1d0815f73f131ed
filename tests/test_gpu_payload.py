"""benchmarks/gpu_payload.py (SmolLM2 in two parts for the GPU machine), benchmarks/gpu_textgen.py's merge."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_payload  # noqa: E402
import gpu_textgen  # noqa: E402


def _q4_1_block(d: float, m: float, q: list[int]) -> bytes:
    """One Q4_1 block: float16 scale and minimum, then 32 4-bit codes (element i in the low nibble of byte
    i, element 16 + i in its high nibble)."""
    lo, hi = np.array(q[:16], np.uint8), np.array(q[16:], np.uint8)
    return np.float16(d).tobytes() + np.float16(m).tobytes() + (lo | (hi << 4)).astype(np.uint8).tobytes()


def test_dequantize_q4_1_known_values():
    q = list(range(16)) + list(range(15, -1, -1))
    raw = _q4_1_block(0.5, -1.0, q) + _q4_1_block(0.25, 2.0, [3] * 32)
    w = gpu_payload.dequantize(raw, "Q4_1", (2, 32))
    assert w.dtype == np.float32
    np.testing.assert_array_equal(w[0], 0.5 * np.array(q, np.float32) - 1.0)
    np.testing.assert_array_equal(w[1], np.full(32, 2.75, np.float32))


def test_dequantize_q8_0_and_f32():
    x = np.arange(-16, 16, dtype=np.int8)
    raw = np.float16(0.125).tobytes() + x.tobytes()
    w = gpu_payload.dequantize(raw, "Q8_0", (1, 32))
    np.testing.assert_array_equal(w[0], 0.125 * x.astype(np.float32))
    v = np.array([1.5, -2.0, 3.25], np.float32)
    np.testing.assert_array_equal(gpu_payload.dequantize(v.tobytes(), "F32", (3,)), v)
    with pytest.raises(gpu_payload.PayloadError, match="bytes"):
        gpu_payload.dequantize(raw[:-1], "Q8_0", (1, 32))


def test_unpermute_inverts_llama_cpp_permute():
    # llama.cpp's convert_hf_to_gguf permute: (h, 2, dim/2, ...) -> swap -> rows interleaved per head
    heads, rows, cols = 3, 18, 5  # 6 rows per head: the permutation is not its own inverse
    w = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    permuted = w.reshape(heads, 2, rows // heads // 2, cols).swapaxes(1, 2).reshape(rows, cols)
    assert not np.array_equal(permuted, w)
    np.testing.assert_array_equal(gpu_payload.unpermute(permuted, heads), w)


def test_hf_names():
    assert gpu_payload.hf_name("blk.12.attn_k.weight") == "model.layers.12.self_attn.k_proj.weight"
    assert gpu_payload.hf_name("token_embd.weight") == "model.embed_tokens.weight"
    assert gpu_payload.hf_name("blk.0.ffn_norm.weight") == "model.layers.0.post_attention_layernorm.weight"


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _payload(tmp_path: Path, parts: list[bytes]) -> Path:
    man = {
        "archive_sha256": hashlib.sha256(b"".join(parts)).hexdigest(),
        "parts": [
            {"name": f"a.part{i}", "folder": f"call{i}", "bytes": len(p), "sha256": _sha(p)}
            for i, p in enumerate(parts, 1)
        ],
    }
    for i, p in enumerate(parts, 1):
        (tmp_path / f"call{i}").mkdir()
        (tmp_path / f"call{i}" / f"a.part{i}").write_bytes(p)
        (tmp_path / f"call{i}" / "manifest.json").write_text(json.dumps(man))
    return tmp_path


def test_check_finds_missing_and_corrupt_parts(tmp_path):
    pay = _payload(tmp_path, [b"first part", b"second"])
    assert gpu_payload.check(pay, (1, 2)) == {1: b"first part", 2: b"second"}
    (pay / "call2" / "a.part2").unlink()
    assert gpu_payload.check(pay, (1,)) == {1: b"first part"}  # call 1 sees only its own part
    with pytest.raises(gpu_payload.PayloadError, match="missing"):
        gpu_payload.check(pay, (1, 2))
    (pay / "call1" / "a.part1").write_bytes(b"first parT")
    with pytest.raises(gpu_payload.PayloadError, match="SHA-256"):
        gpu_payload.check(pay, (1,))


def _job_dir(parts: Path, name: str, seed: int, algos: dict, data: str, fp: str = "f1") -> None:
    d = parts / name / f"seed_{seed}"
    d.mkdir(parents=True)
    ref = {"reference": {"points": [{"r": [0.5, 0.5]}]}}
    rec = {"seed": seed, "fingerprint": fp, "algorithms": {**ref, **algos}}
    (d / "results.json").write_text(json.dumps(rec))
    (d / "train_trl.jsonl").write_text(data)
    for a in algos:
        (d / f"train_log_{a}.jsonl").write_text("{}\n")
    (parts / name / "results.json").write_text(json.dumps({"hv_reference": [0.0, 0.0]}))


def test_merge_unions_the_jobs_of_a_seed(tmp_path):
    parts, merged = tmp_path / "parts", tmp_path / "merged"
    _job_dir(parts, "summary_s0_a", 0, {"ric": {"points": []}}, "same")
    _job_dir(parts, "summary_s0_b", 0, {"modpo": {"points": []}}, "same")
    _job_dir(parts, "summary_s0_c", 0, {"mopo-lag": {"points": []}}, "other")  # failed job: left out
    jobs = [
        {"name": "summary_s0_a", "task": "summary", "seed": 0, "rc": 0},
        {"name": "summary_s0_b", "task": "summary", "seed": 0, "rc": 0},
        {"name": "summary_s0_c", "task": "summary", "seed": 0, "rc": -9},
    ]
    rep = gpu_textgen.merge(parts, merged, jobs)
    assert rep["summary_s0"]["algorithms"] == ["modpo", "ric"]
    assert rep["summary_s0"]["identical_data"] is True
    rec = json.loads((merged / "summary" / "seed_0" / "results.json").read_text())
    assert set(rec["algorithms"]) == {"reference", "ric", "modpo"}
    assert sorted(p.name for p in (merged / "summary" / "seed_0").glob("train_log_*")) == [
        "train_log_modpo.jsonl",
        "train_log_ric.jsonl",
    ]
    jobs[2]["rc"] = 0
    rep = gpu_textgen.merge(parts, tmp_path / "merged2", jobs)
    assert rep["summary_s0"]["identical_data"] is False
    _job_dir(parts, "assistant_s1_a", 1, {"ric": {"points": []}}, "x", fp="f1")
    _job_dir(parts, "assistant_s1_b", 1, {"parm": {"points": []}}, "x", fp="f2")
    names = ("assistant_s1_a", "assistant_s1_b")
    jobs = [{"name": n, "task": "assistant", "seed": 1, "rc": 0} for n in names]
    with pytest.raises(SystemExit, match="different settings"):
        gpu_textgen.merge(parts, tmp_path / "merged3", jobs)

"""MOPO LM data: loaders (native JSONL, TRL-style, HH-RLHF), validation naming the record, D_J, tokenising."""

import json

import pytest
import torch

from bayescrl.mopo.lm.data import (
    collate,
    from_scored_samples,
    from_trl_rows,
    load_data,
    load_hh_rlhf,
    load_jsonl,
    tokenize,
    validate_records,
)
from bayescrl.mopo.lm.tiny import build_tokenizer
from bayescrl.utils import DataError


def rec(prefs, a="sure here", b="um well"):
    return {"prompt": "q : how do i bake ? a :", "response_a": a, "response_b": b, "prefs": prefs}


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_native_jsonl_any_number_of_objectives(tmp_path):
    rows = [rec([1, 0, 1, 1]), rec([0, 0, 1, 0]), rec([True, False, 0, 1.0])]
    data = load_jsonl(write_jsonl(tmp_path / "d.jsonl", rows))
    assert len(data) == 3 and data.num_objectives == 4
    assert data.prefs.tolist() == [[1, 0, 1, 1], [0, 0, 1, 0], [1, 0, 0, 1]]
    again = load_jsonl(data.to_jsonl(tmp_path / "e.jsonl"))
    assert again.records() == data.records()


@pytest.mark.parametrize(
    ("bad", "field", "index", "words"),
    [
        ({"prompt": "p", "response_a": "x", "prefs": [1, 0]}, "response_b", 2, "missing"),
        (rec([1, 0, 1]), "prefs", 2, "expected K = 2"),
        (rec([1, 2]), "prefs", 2, "0 or 1"),
        (rec([1, 0.5]), "prefs", 2, "0 or 1"),
        (rec("10"), "prefs", 2, "list"),
        (rec([1, 0], a=3), "response_a", 2, "string"),
        (rec([1, 0], b="   "), "response_b", 2, "non-empty"),
    ],
)
def test_malformed_record_is_rejected_naming_it(tmp_path, bad, field, index, words):
    rows = [rec([1, 0]), rec([0, 1]), bad]
    with pytest.raises(DataError) as err:
        load_jsonl(write_jsonl(tmp_path / "bad.jsonl", rows))
    e = err.value
    assert e.field.endswith(field) and e.index == index
    assert words in str(e) and f"[{index}]" in str(e)


def test_declared_k_and_bad_json_line(tmp_path):
    with pytest.raises(DataError, match=r"expected K = 3"):
        validate_records([rec([1, 0])], num_objectives=3)
    p = tmp_path / "x.jsonl"
    p.write_text(json.dumps(rec([1])) + "\n{not json\n")
    with pytest.raises(DataError, match="line 2"):
        load_jsonl(p)
    with pytest.raises(DataError, match="not found"):
        load_jsonl(tmp_path / "missing.jsonl")


def test_trl_rows_with_one_column_per_objective(tmp_path):
    rows = [
        {"prompt": "p1", "chosen": "good", "rejected": "bad", "helpful": 1, "harmless": 0, "humour": 1},
        {"prompt": "p2", "chosen": "fine", "rejected": "worse", "helpful": 1, "harmless": 1, "humour": 0},
    ]
    data = from_trl_rows(rows, ["harmless", "humour", "helpful"])
    assert data.names == ("harmless", "humour", "helpful")
    assert data.responses_a == ("good", "fine") and data.prefs.tolist() == [[0, 1, 1], [1, 0, 1]]
    loaded = load_data(
        {
            "path": str(write_jsonl(tmp_path / "t.jsonl", rows)),
            "format": "trl",
            "columns": ["harmless", "helpful"],
        }
    )
    assert loaded.num_objectives == 2
    rows[1].pop("harmless")
    with pytest.raises(DataError) as err:
        from_trl_rows(rows, ["harmless", "helpful"])
    assert err.value.index == 1 and err.value.field.endswith("harmless")


def test_hh_rlhf_split_and_errors():
    rows = [
        {
            "chosen": "\n\nHuman: hi\n\nAssistant: hello there",
            "rejected": "\n\nHuman: hi\n\nAssistant: go away",
            "harmless": 1,
        },
    ]
    data = load_hh_rlhf(rows, ["harmless"])
    assert data.prompts[0] == "\n\nHuman: hi\n\nAssistant:"
    assert data.responses_a[0] == " hello there" and data.responses_b[0] == " go away"
    assert data.prefs.tolist() == [[1, 1]] and data.names == ("harmless", "chosen")
    bad = rows + [{"chosen": "no marker", "rejected": "x", "harmless": 0}]
    with pytest.raises(DataError) as err:
        load_hh_rlhf(bad, ["harmless"])
    assert err.value.index == 1


def test_jointly_preferred_and_scalarised_pairs():
    rows = [
        rec([1, 1, 1], "a0", "b0"),
        rec([0, 0, 0], "a1", "b1"),
        rec([1, 0, 1], "a2", "b2"),
        rec([0, 1, 0], "a3", "b3"),
    ]
    data = validate_records(rows)
    dj = data.dpo_pairs()
    assert dj.source_index == (0, 1) and dj.chosen == ("a0", "b1") and dj.rejected == ("b0", "a1")
    sc = data.dpo_pairs([1, 1, 1])  # majority vote
    assert sc.source_index == (0, 1, 2, 3) and sc.chosen == ("a0", "b1", "a2", "b3")
    tie = data.dpo_pairs([1, 1, 0])  # record 2 and 3: one vote each way -> dropped
    assert tie.source_index == (0, 1)
    assert dj.as_preference_data().prefs.tolist() == [[1], [1]]
    with pytest.raises(DataError):
        data.dpo_pairs([1, -1, 0])


def test_tokenize_rejects_over_long_records_and_collate_masks():
    tok = build_tokenizer()
    data = validate_records([rec([1]), rec([0], a=" ".join(["sure"] * 40))])
    with pytest.raises(DataError) as err:
        tokenize(data, tok, max_length=20)
    assert err.value.index == 1
    t = tokenize(data, tok, max_length=64)
    assert t.a_ids[0][-1] == tok.eos_token_id
    b = collate(t.prompt_ids, t.a_ids, tok.pad_token_id)
    n_p = len(t.prompt_ids[0])
    assert b["response_mask"][0].sum() == len(t.a_ids[0]) and not b["response_mask"][0, :n_p].any()
    assert b["attention_mask"][0].sum() == n_p + len(t.a_ids[0])
    assert torch.all(b["input_ids"][0, n_p + len(t.a_ids[0]) :] == tok.pad_token_id)


def test_from_scored_samples_pairs_best_with_worst():
    """Ranked by the primary, paired outside-in; prefs follow each objective; primary ties are skipped."""
    answers = [["w", "x", "y", "z"], ["u", "v"]]
    scores = [
        [[0.1, 5.0, 1.0], [0.9, 1.0, 1.0], [0.5, 3.0, 0.0], [0.3, 2.0, 2.0]],  # ranks: x > y > z > w
        [[0.7, 0.0, 0.0], [0.7, 1.0, 1.0]],  # tie on the primary: no record
    ]
    for seed in range(4):
        d = from_scored_samples(["p0", "p1"], answers, scores, primary=0, names=("h", "s", "t"), seed=seed)
        assert d.names == ("h", "s", "t") and len(d) == 2 and d.prompts == ("p0", "p0")
        pairs = {
            frozenset((a, b)): (a, q.tolist())
            for a, b, q in zip(d.responses_a, d.responses_b, d.prefs, strict=True)
        }
        assert set(pairs) == {frozenset("xw"), frozenset("yz")}
        a, q = pairs[frozenset("xw")]  # x: (0.9, 1, 1) vs w: (0.1, 5, 1): x wins h, loses s, ties t
        assert q[:2] == ([1, 0] if a == "x" else [0, 1])
        a, q = pairs[frozenset("yz")]  # y: (0.5, 3, 0) vs z: (0.3, 2, 2)
        assert q == ([1, 1, 0] if a == "y" else [0, 0, 1])
    ties = [from_scored_samples(["p0"], answers[:1], scores[:1], seed=s) for s in range(40)]
    # primary = -1 (objective t): z > w = x > y, pairs (z, y) and (w, x); the second ties and is skipped
    assert {tuple(sorted((d.responses_a[0], d.responses_b[0]))) for d in ties} == {("y", "z")}
    # a tie on a constraint is a fair coin, independent of which sample is response_a
    flips = set()
    for s in range(20):
        d = from_scored_samples(["p"], [["a", "b"]], [[[1.0, 0.0], [0.0, 0.0]]], primary=0, seed=s)
        flips.add((d.prefs[0, 0].item(), d.prefs[0, 1].item()))
    assert flips == {(0, 0), (0, 1), (1, 0), (1, 1)}


def test_from_scored_samples_rejects_bad_shapes():
    with pytest.raises(DataError, match=r"samples.scores\[1\]"):
        from_scored_samples(["p", "q"], [["a", "b"], ["c", "d"]], [[[1.0], [0.0]], [[1.0], [0.0], [2.0]]])
    with pytest.raises(DataError, match="expected K = 2"):
        from_scored_samples(["p", "q"], [["a", "b"], ["c", "d"]], [[[1, 0], [0, 1]], [[1], [0]]])
    with pytest.raises(DataError, match="primary = 3"):
        from_scored_samples(["p"], [["a", "b"]], [[[1, 0], [0, 1]]], primary=3)
    with pytest.raises(DataError, match="no pair with a strict preference"):
        from_scored_samples(["p"], [["a", "b"]], [[[1, 0], [1, 1]]], primary=0)

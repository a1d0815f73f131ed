"""Text-generation table: RiC, PARM, proxies, labels, table builder, bad input (tiny local GPT-2 only)."""

import json
import math

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("peft")

from bayescrl.cli import main  # noqa: E402
from bayescrl.mopo.textgen import parm, ric  # noqa: E402
from bayescrl.mopo.textgen.base import build_tokenizer  # noqa: E402
from bayescrl.mopo.textgen.labels import disagreement, label_pairs  # noqa: E402
from bayescrl.mopo.textgen.table import build_table, kendall_tau, markdown, table_point  # noqa: E402

EXAMPLE = "examples/mopo/textgen_assistant.yaml"


def _run(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code, capsys.readouterr()


def _tiny(vocab, seed=0, n_embd=32):
    from bayescrl.mopo.lm.tiny import build_model

    tok = build_tokenizer(vocab)
    return build_model(tok, n_layer=1, n_embd=n_embd, n_head=2, n_positions=32, seed=seed), tok


# ------------------------------------------------------------------------------------------------ RiC
def test_ric_reward_tokens_are_rounded_clipped_and_placed_before_the_marker():
    p = ric.format_prompt("user : how do i cook rice ? assistant :", [0.54, -1.26], "assistant :")
    assert p == "user : how do i cook rice ? <r1> 0.5 <r2> -1.3 assistant :"
    assert ric.format_scores([5.2, -0.04]) == "<r1> 4.0 <r2> 0.0"  # clipped to [-4, 4], no "-0.0"
    assert ric.format_prompt("summarise : x", [1.0, 2.0], "summary :") == "summarise : x <r1> 1.0 <r2> 2.0"
    z = ric.normalise(
        torch.tensor([[1.0, 10.0], [3.0, 30.0]]), torch.tensor([2.0, 20.0]), torch.tensor([1.0, 4.0])
    )
    assert z.tolist() == [[-1.0, -2.5], [1.0, 2.5]]
    # the tiny tokenizer keeps a marker and a score as one token each
    _, tok = _tiny(["user", "assistant", ":", "hi"])
    ids = tok(p.replace("how do i cook rice ?", "hi"), add_special_tokens=False)["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == [
        "user",
        ":",
        "hi",
        "<r1>",
        "0.5",
        "<r2>",
        "-1.3",
        "assistant",
        ":",
    ]


def test_ric_preference_to_score_maps_by_hand():
    assert ric.desired_scores([0.6, 0.8], -3.0, 3.0, "l2") == [0.6, 1.8]  # low + w/|w| (high - low)
    assert ric.desired_scores([0.25, 0.75], -3.0, 3.0, "linf") == [0.0, 3.0]  # argmax -> high; low + 2w (..)
    assert ric.desired_scores([0.5, 0.5], -3.0, 3.0, "linear") == [0.0, 0.0]
    lo, hi = ric.reference_range(25_000, seed=0)
    assert -5.0 < lo < -3.3 and 3.3 < hi < 5.0  # the thesis: "generally around +-3"


def test_ric_score_conditioned_generation_follows_the_desired_score():
    """SFT with reward tokens on two answers that differ in r1; generation conditioned on a high / low r1
    writes the matching answer (greedy)."""
    from bayescrl.mopo.lm.model import lora_policy
    from bayescrl.mopo.textgen.base import Plain, sample

    base, tok = _tiny(["user", "assistant", ":", "q", "good", "bad", "answer"])
    with torch.no_grad():  # a random GPT-2's tied embeddings are too small for LoRA alone to move its logits
        base.transformer.wte.weight.mul_(30)
    pol = lora_policy(
        base,
        {"r": 8, "lora_alpha": 16, "target_modules": ["c_attn", "c_proj", "c_fc"], "fan_in_fan_out": True},
    )
    prompts = ["user : q assistant :"] * 2
    answers = ["good answer", "bad answer"]
    scores = torch.tensor([[2.0, 0.0], [-2.0, 0.0]])
    losses = ric.train(
        pol,
        tok,
        prompts,
        answers,
        scores,
        "assistant :",
        steps=60,
        batch_size=8,
        lr=0.03,
        seed=0,
        max_length=32,
    )
    assert losses[-1] < 0.2 * losses[0]
    hi = ric.format_prompt(prompts[0], [2.0, 0.0], "assistant :")
    lo = ric.format_prompt(prompts[0], [-2.0, 0.0], "assistant :")
    from bayescrl.mopo.lm.evaluate import generate

    out = generate(pol, tok, [hi, lo], max_new_tokens=3, do_sample=False)
    assert [o.split()[0] for o in out] == ["good", "bad"]
    assert isinstance(sample(Plain(base), tok, [hi], 2, seed=0)[0], str)


# ----------------------------------------------------------------------------------------------- PARM
def test_guided_scores_equal_base_plus_weighted_rm_logprobs_by_hand():
    base = torch.log(torch.tensor([0.5, 0.25, 0.25]))
    rm = torch.log(torch.tensor([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]]))
    w, beta = [0.25, 0.75], 0.5
    got = parm.guided_scores(base + 3.0, rm - 1.0, w, beta)  # logits: shifts must not matter
    want = [
        math.log(0.5) + (0.25 * math.log(0.2) + 0.75 * math.log(0.6)) / 0.5,
        math.log(0.25) + (0.25 * math.log(0.3) + 0.75 * math.log(0.2)) / 0.5,
        math.log(0.25) + (0.25 * math.log(0.5) + 0.75 * math.log(0.2)) / 0.5,
    ]
    assert got.tolist() == pytest.approx(want, abs=1e-6)
    one = parm.guided_scores(base, rm[1], None, 1.0)  # PARM: one RM at the weighting
    assert one.tolist() == pytest.approx([math.log(0.5 * 0.6), math.log(0.25 * 0.2), math.log(0.25 * 0.2)])
    with pytest.raises(ValueError, match="need 2 weights"):
        parm.guided_scores(base, rm, [1.0], 1.0)


def _arm():
    base, tok = _tiny(["user", "assistant", ":", "q", "x", "good", "bad", "answer"], n_embd=16)
    arm = parm.ARM(base, k=2, r=4, alpha=8.0)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for m in arm.modules():
            if isinstance(m, parm.PBLoRALinear):
                m.B.copy_(0.3 * torch.randn(m.B.shape, generator=g))
                m.Mk.copy_(torch.randn(m.Mk.shape, generator=g))
    return base, arm, tok


def test_pblora_core_is_linear_in_the_weighting_and_starts_as_the_base():
    base, tok = _tiny(["q", "x"], n_embd=16)
    fresh = parm.ARM(base, k=2, r=4, alpha=8.0)
    ids = torch.tensor([[3, 4, 3]])
    m = torch.ones_like(ids)
    assert torch.allclose(fresh(ids, m), base(input_ids=ids, attention_mask=m).logits, atol=1e-6)
    _, arm, _ = _arm()
    layer = next(m for m in arm.modules() if isinstance(m, parm.PBLoRALinear))
    with arm.weighting([0.3, 0.7]):
        c = layer.core()
    assert torch.allclose(c, layer.M0 + 0.3 * layer.Mk[0] + 0.7 * layer.Mk[1])
    trainable = {n.split(".")[-1] for n, p in arm.named_parameters() if p.requires_grad}
    assert trainable == {"A", "B", "M0", "Mk"}


def test_parm_guided_decoding_step_equals_base_plus_weighted_rm_logprobs():
    """One decoding step on a left-padded batch: the scores equal log pi_base + (1/beta) log pi_ARM(w)
    (PARM), resp. + (1/beta) sum_k w_k log pi_ARM(e_k) (mixture), each computed from a separate plain
    forward pass of the unpadded prompt."""
    base, arm, tok = _arm()
    prompts = ["user : q x assistant :", "user : q assistant :"]
    ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    width = max(map(len, ids))
    x = torch.tensor([[tok.pad_token_id] * (width - len(i)) + i for i in ids])
    mask = torch.tensor([[0] * (width - len(i)) + [1] * len(i) for i in ids])
    w, beta = [0.3, 0.7], 2.0
    got = parm.next_token_scores(base, arm, x, mask, w, beta, "parm")
    got_mix = parm.next_token_scores(base, arm, x, mask, w, beta, "mixture")
    for row, i in enumerate(ids):
        t = torch.tensor([i])
        lb = torch.log_softmax(base(input_ids=t).logits[0, -1], -1)
        with arm.weighting(w):
            lr = torch.log_softmax(arm(t, torch.ones_like(t))[0, -1], -1)
        assert torch.allclose(got[row], lb + lr / beta, atol=1e-5)
        mix = 0
        for k in range(2):
            with arm.weighting(torch.eye(2)[k]):
                mix = mix + w[k] * torch.log_softmax(arm(t, torch.ones_like(t))[0, -1], -1)
        assert torch.allclose(got_mix[row], lb + mix / beta, atol=1e-5)
    assert not torch.allclose(got, got_mix)  # the ARM is not linear in w: the two rules differ
    texts = parm.guided_generate(base, arm, tok, prompts, w, beta, "parm", max_new_tokens=4, seed=0)
    assert len(texts) == 2 and all(isinstance(t, str) for t in texts)


def test_parm_training_lowers_the_weighted_bradley_terry_loss():
    from bayescrl.mopo.lm.data import validate_records

    base, tok = _tiny(["user", "assistant", ":", "q", "good", "bad", "answer"], n_embd=16)
    recs = [
        {
            "prompt": "user : q assistant :",
            "response_a": "good answer",
            "response_b": "bad answer",
            "prefs": [1, 0],
        }
    ] * 4
    data = validate_records(recs, 2)
    arm = parm.ARM(base, k=2, r=4, alpha=8.0)
    losses = parm.train(arm, tok, data, steps=40, batch_size=4, lr=0.02, seed=0, max_length=32)
    assert all(math.isfinite(v) for v in losses)
    b = __import__("bayescrl.mopo.lm.data", fromlist=["collate"]).collate(
        [tok("user : q assistant :", add_special_tokens=False)["input_ids"]] * 2,
        [
            tok(a, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            for a in ("good answer", "bad answer")
        ],
        tok.pad_token_id,
    )
    with arm.weighting([1.0, 0.0]), torch.no_grad():
        r1 = arm.sequence_logprobs(b)
    with arm.weighting([0.0, 1.0]), torch.no_grad():
        r2 = arm.sequence_logprobs(b)
    assert r1[0] > r1[1]  # objective 1 prefers "good"
    assert r2[1] > r2[0]  # objective 2 prefers "bad": the weighting steers the one model


# ------------------------------------------------------------------------------------------------ tasks
def test_tasks_prompts_split_and_behaviour_policy():
    import random

    from bayescrl.mopo.textgen.tasks import build_task
    from bayescrl.utils import ConfigError

    a = build_task("assistant")
    assert (len(a.prompts), len(a.eval_prompts)) == (256, 64)  # 40 topics x 8 phrasings, 20 % held out
    assert not set(a.prompts) & set(a.eval_prompts)
    assert sum(c["unsafe"] for c in a.contexts + a.eval_contexts) == 8 * 8
    assert build_task("assistant", 10, 5).eval_prompts == a.eval_prompts[:5]  # the split is fixed
    s = build_task("summary")
    assert (len(s.prompts), len(s.eval_prompts)) == (240, 60)
    rng = random.Random(0)
    answers = [s.behaviour(s.contexts[0], rng) for _ in range(50)]
    assert s.contexts[0]["source"].split(" . ")[0] + " ." in answers  # copies the first sentence sometimes
    vocab = set(s.vocabulary())
    assert all(w in vocab for t in answers for w in t.split())
    with pytest.raises(ConfigError, match="task.n_eval_prompts"):
        build_task("summary", 10, 61)
    with pytest.raises(ConfigError, match="task.name"):
        build_task("poems")


# ------------------------------------------------------------------------------------ scorers, labels
def test_proxy_scorers_on_known_texts():
    pytest.importorskip("profanity_check")
    pytest.importorskip("rouge_score")
    pytest.importorskip("textstat")
    from bayescrl.mopo.textgen.scorers import coverage, faithful, harmless, readable, score_all

    assert (
        harmless({}, "you are a stupid idiot") < 0.1 < 0.9 < harmless({}, "water the cactus every two weeks")
    )
    assert coverage(["water", "cactus", "sun", "soil"], "Water the cactus.") == 0.5
    assert faithful({"source": "the cat sat on the mat"}, "the cat ran") == pytest.approx(2 / 3)
    assert faithful({"source": "a b"}, "") == 0.0
    easy, hard = (
        readable({}, "the cat sat on the mat ."),
        readable({}, "municipal administration announced comprehensive renovations ."),
    )
    assert 0 <= hard < easy <= 1
    rows = score_all(["helpful", "harmless"], [{"keywords": ["tea"]}] * 2, ["make tea", "shut up idiot"])
    assert rows[0][0] > rows[1][0] and rows[0][1] > rows[1][1]


def test_bradley_terry_labels_follow_scores_for_a_competent_rater_and_disagreement_by_hand():
    prompts = ["p"] * 8
    resp = [f"answer {i}" for i in range(8)]
    # pairs (0,1) (2,3) (4,5) (6,7): objective 0 prefers a in pairs 0, 1; objective 1 prefers a in pairs 0, 2
    scores = torch.tensor([[2, 2], [0, 0], [2, 0], [0, 2], [0, 2], [2, 0], [0, 0], [2, 2.0]])
    raters = [{"id": "expert", "beta": 200.0, "lam": 1e6}]
    data, info = label_pairs(prompts, resp, scores, ["r1", "r2"], raters, seed=0)
    assert data.prefs.tolist() == [[1, 1], [1, 0], [0, 1], [0, 0]]
    assert data.raters == ("expert",) * 4
    assert info["score_disagreement"] == 0.5 and info["label_disagreement"] == 0.5
    d = disagreement(torch.tensor([[1.0, 1.0], [1.0, 0.0]]), torch.tensor([[0.0, 2.0], [0.0, 0.0]]))
    assert d == {"score_disagreement": 1.0, "score_ties": 0.5}
    noisy, _ = label_pairs(
        prompts * 50,
        resp * 50,
        scores.repeat(50, 1),
        ["r1", "r2"],
        [{"id": "coin", "beta": 1e-6, "lam": 1.0}],
        seed=0,
    )
    assert 0.4 < noisy.prefs.float().mean() < 0.6  # an incompetent rater labels at random


# ---------------------------------------------------------------------------------------------- table
def _synthetic_runs():
    def rec(seed, shift):
        return {
            "task": "assistant",
            "seed": seed,
            "objectives": ["helpful", "harmless"],
            "algorithms": {
                "ric": {
                    "points": [{"label": "w=a", "r": [0.5, 0.5]}, {"label": "w=b", "r": [0.25, 1.0]}],
                    "train_seconds": 2.0,
                    "generate_seconds": 1.0,
                },
                "mopo-lag": {
                    "points": [
                        {"label": "adaptive", "r": [0.4 + shift, 0.4]},
                        {"label": "b=0.5", "r": [0.9, 0.9]},
                    ],
                    "train_seconds": 4.0,
                },
                "dpo_joint": {"points": [{"label": "D_J", "r": [0.1 + shift, 0.2]}]},
            },
        }

    return [rec(0, 0.0), rec(1, 0.2)]


def test_table_builder_on_synthetic_runs():
    runs = _synthetic_runs()
    assert table_point(runs[0]["algorithms"]["ric"]["points"])["label"] == "w=b"  # max r1 + r2
    assert table_point(runs[0]["algorithms"]["mopo-lag"]["points"])["label"] == "adaptive"
    t = build_table(runs, (0.0, 0.0))
    rows = t["rows"]
    assert rows["ric"]["mean"] == pytest.approx([0.25, 1.0]) and rows["ric"]["sd"] == pytest.approx([0, 0])
    assert rows["mopo-lag"]["mean"] == pytest.approx([0.5, 0.4])
    assert rows["mopo-lag"]["sd"][0] == pytest.approx(math.sqrt(0.02))  # sd of (0.4, 0.6), ddof 1
    assert rows["ric"]["hypervolume_mean"] == pytest.approx(0.375)  # 0.5*0.5 + 0.25*(1 - 0.5)
    assert rows["mopo-lag"]["hypervolume_mean"] == pytest.approx(0.81)
    assert rows["ric"]["train_seconds_mean"] == 2.0 and rows["dpo_joint"]["train_seconds_mean"] == 0.0
    assert t["ordering"] == ["ric", "mopo-lag", "dpo_joint"]
    assert t["thesis_ordering"] == ["mopo-lag", "ric", "dpo_joint"]
    assert t["kendall_tau"] == pytest.approx(1 / 3)
    assert t["fronts"]["mopo-lag"]["adaptive"] == pytest.approx([0.5, 0.4])
    md = markdown([t])
    assert "| RiC | (0.25 ± 0.00, 1.00 ± 0.00) |" in md and "MOPO-Lag" in md
    one = markdown([build_table(runs[:1], (0.0, 0.0))])  # one seed: no spread, never "± 0"
    assert "| RiC | (0.25, 1.00) |" in one and "±" not in one
    assert kendall_tau(["a", "b", "c"], ["c", "b", "a"]) == -1.0
    # leader RiC (r1 + r2 = 1.25 on both seeds) against MOPO-Lag (0.8, 1.0): differences 0.45, 0.25, mean
    # 0.35, sample sd 0.1 sqrt(2), 95 % t-interval half-width t_.975(1) 0.1 sqrt(2) / sqrt(2) = 1.2706;
    # Wilcoxon on two positive differences: exact two-sided p = 2 / 4
    gap = t["leader_gaps"]["mopo-lag"]
    assert gap["mean"] == pytest.approx(0.35) and (gap["n"], gap["leader_ahead"]) == (2, 2)
    assert gap["ci95"] == pytest.approx([0.35 - 1.270620, 0.35 + 1.270620], rel=1e-5)
    assert gap["wilcoxon_p"] == pytest.approx(0.5)
    assert t["leader_gaps"]["dpo_joint"]["mean"] == pytest.approx(0.85) and "ric" not in t["leader_gaps"]
    assert "| assistant | RiC − MOPO-Lag | 0.350 [-0.921, 1.621] | 2/2 | 0.5 |" in md
    with pytest.raises(ValueError, match="several tasks"):
        build_table(runs + [{**runs[0], "task": "summary"}])


def test_table_cli_over_run_directories(tmp_path, capsys):
    from bayescrl.mopo.textgen.table import main as table_main

    for r in _synthetic_runs():
        d = tmp_path / "a" / f"seed_{r['seed']}"
        d.mkdir(parents=True)
        (d / "results.json").write_text(json.dumps(r))
    assert table_main([str(tmp_path / "a"), "--out", str(tmp_path / "t" / "table")]) == 0
    assert (tmp_path / "t" / "table.png").stat().st_size > 0
    assert json.loads((tmp_path / "t" / "table.json").read_text())[0]["task"] == "assistant"
    assert table_main([str(tmp_path / "empty"), "--out", str(tmp_path / "x")]) == 2


# ------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("ric.desired_scores=[[0.5, 1.0, 2.0]]", "ric.desired_scores[0]"),
        ("parm.weightings=[[0.7, 0.7]]", "parm.weightings[0]"),
        ("modpo.weightings=[[-0.5, 1.5]]", "modpo.weightings[0]"),
        ("task.scorers=[helpful, harmles]", "task.scorers[1]"),
        ("ric.weightings=[[1.0]]", "ric.weightings[0]"),
        ("mopo.thresholds=[[1.5]]", "mopo.thresholds[0]"),
    ],
)
def test_bad_textgen_input_exits_2_with_one_line(tmp_path, capsys, override, field):
    code, cap = _run(["mopo", EXAMPLE, "--out", str(tmp_path / "o"), "--set", override], capsys)
    assert code == 2
    lines = [ln for ln in cap.err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and field in lines[0], cap.err
    assert not (tmp_path / "o").exists()  # refused before the output folder is made


def test_textgen_model_flag_and_resume(tmp_path, capsys):
    code, cap = _run(
        ["mopo", EXAMPLE, "--out", str(tmp_path / "o"), "--model", str(tmp_path / "none")], capsys
    )
    assert code == 2 and "model.path" in cap.err and len(cap.err.strip().splitlines()) == 1
    code, cap = _run(["mopo", EXAMPLE, "--out", str(tmp_path / "o"), "--resume"], capsys)
    assert code == 2 and "--resume" in cap.err and "only for mode: lm" in cap.err
    assert not (tmp_path / "o").exists()


def test_textgen_cpu_config_runs_end_to_end(tmp_path):
    """The whole pipeline at toy scale through the CLI, a seed's algorithms in two calls (merged: the same
    base model and data are rebuilt); table, figure; no NaN."""
    pytest.importorskip("profanity_check")
    out = tmp_path / "run"
    sets = [
        "seeds=[0]",
        "task.n_train_prompts=4",
        "task.n_eval_prompts=2",
        "task.eval_samples=1",
        "task.max_new_tokens=8",
        "model.sft_steps=4",
        "train.steps=2",
        "train.t0=1",
        "ric.steps=2",
        "parm.steps=2",
        "mopo.thresholds=[[0.6]]",
        "modpo.weightings=[[0.5, 0.5]]",
        "ric.weightings=[[0.5, 0.5]]",
        "parm.weightings=[[0.5, 0.5], [1.0, 0.0]]",
        "threads=1",
    ]
    data = []
    for algos in ("[ric, parm, modpo]", "[dpo_joint, mopo-lb, mopo-lag]"):
        args = ["mopo", EXAMPLE, "--out", str(out), "--force", "--set", f"algorithms={algos}"]  # adds rows
        for s in sets:
            args += ["--set", s]
        try:
            main(args)
        except SystemExit as exc:  # click's standalone mode
            assert exc.code in (0, None)
        data.append((out / "seed_0" / "train_trl.jsonl").read_text())
    assert data[0] == data[1]
    res = json.loads((out / "results.json").read_text())
    rows = res["table"]["rows"]
    assert set(rows) == {"ric", "parm", "modpo", "dpo_joint", "mopo-lb", "mopo-lag", "reference"}
    assert all(math.isfinite(v) for r in rows.values() for v in r["mean"])
    assert (out / "pareto.png").stat().st_size > 0 and "MOPO-Lag" in (out / "table.md").read_text()
    trl = [json.loads(line) for line in (out / "seed_0" / "train_trl.jsonl").read_text().splitlines()]
    assert {"prompt", "chosen", "rejected", "pref_harmless", "rater"} <= set(trl[0])

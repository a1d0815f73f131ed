"""Bradley-Terry reward head with rater competence on the language-model path (mopo.lm.reward_head)."""

import json
import math

import pytest
import torch
from cli_utils import run

from bayescrl.mopo.lm.data import validate_records
from bayescrl.mopo.lm.reward_head import (
    atom_preferences,
    fit_lm_preferences,
    parse_lm_preferences,
    whiten,
)
from bayescrl.mopo.lm.tiny import TOPICS, TinyTask, build_model, build_tokenizer
from bayescrl.mopo.lm.trainer import MOPOLMTrainer
from bayescrl.utils import ConfigError, DataError

EXAMPLE = "examples/mopo/trl_format.yaml"
BT = ["--set", "preference_model=bradley-terry", "--set", "raters=[{id: r0, beta: 1.0}, {id: r1}, {id: r2}]"]
FAST = ["--set", "train.steps=2", "--set", "train.t0=2", "--set", "progress.checkpoint_every=0"]


@pytest.fixture(scope="module")
def tiny():
    tok = build_tokenizer()
    return build_model(tok, n_layer=2, n_embd=32, n_head=2, seed=1), tok


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tiny):
    path = tmp_path_factory.mktemp("tiny_gpt2_bt")
    tiny[0].save_pretrained(path)
    tiny[1].save_pretrained(path)
    return path


def careless_data(n_pairs=48, repeats=2, seed=0):
    """Objective ``short``: expert ``e`` labels each pair once from ``P(a > b) = sigmoid(0.5 (|b| - |a|))``
    (the shorter answer tends to win); a careless rater ``c`` labels the same pairs ``repeats`` times by a
    coin flip. Primary ``helpful`` (more helpful words) labelled truthfully by both."""
    task, gen = TinyTask(), torch.Generator().manual_seed(seed)
    pairs = []
    while len(pairs) < n_pairs:
        a, b = task.sample_response(gen), task.sample_response(gen)
        r = task.rewards([a, b])
        la, lb = len(a.split()), len(b.split())
        if la != lb and r[0, 2] != r[1, 2]:
            pairs.append(
                (task.prompt(TOPICS[len(pairs) % len(TOPICS)]), a, b, la, lb, int(r[0, 2] > r[1, 2]))
            )
    recs, raters = [], []
    for who in ["e"] + ["c"] * repeats:
        for prompt, a, b, la, lb, helpful in pairs:
            p_short = torch.sigmoid(torch.tensor(0.5 * (lb - la))) if who == "e" else torch.tensor(0.5)
            short = int(torch.rand(1, generator=gen) < p_short)
            recs.append({"prompt": prompt, "response_a": a, "response_b": b, "prefs": [short, helpful]})
            raters.append(who)
    data = validate_records(recs, 2, ("short", "helpful"), source="test")
    return type(data)(data.prompts, data.responses_a, data.responses_b, data.prefs, data.names, tuple(raters))


def shorter_wins(prefs, data):
    """Fraction of records whose posterior mean ranks the shorter answer above the longer one (``short``)."""
    n = len(data)
    la = torch.tensor([len(t.split()) for t in data.responses_a])
    lb = torch.tensor([len(t.split()) for t in data.responses_b])
    return float(((prefs.mean[:n, 0] > prefs.mean[n:, 0]) == (la < lb)).double().mean())


def test_atom_preferences_average_over_the_prompts_other_responses():
    """Known answer: p(y) = mean over the other responses y' to the same prompt (identical text left out)."""
    data = validate_records(
        [
            {"prompt": "p", "response_a": "x", "response_b": "y", "prefs": [1]},
            {"prompt": "p", "response_a": "z", "response_b": "x", "prefs": [0]},
            {"prompt": "q", "response_a": "u", "response_b": "v", "prefs": [1]},
        ],
        1,
    )
    r = torch.tensor([0.0, 1.0, 2.0, 0.5, 0.0, -1.0], dtype=torch.float64)  # [a0 a1 a2 b0 b1 b2]
    s = torch.sigmoid
    # prompt p: atoms a0 = x (0), a1 = z (1), b0 = y (0.5), b1 = x (0); the two x's do not compare
    want = torch.tensor(
        [
            (s(r[0] - r[1]) + s(r[0] - r[3])) / 2,  # x vs z, y
            (s(r[1] - r[0]) + s(r[1] - r[3]) + s(r[1] - r[4])) / 3,  # z vs x, y, x
            s(r[2] - r[5]),  # prompt q: one pair, p = P(u > v)
            (s(r[3] - r[0]) + s(r[3] - r[1]) + s(r[3] - r[4])) / 3,  # y vs x, z, x
            (s(r[4] - r[1]) + s(r[4] - r[3])) / 2,
            s(r[5] - r[2]),
        ]
    )
    got = atom_preferences(r[None], data)[0]
    assert torch.allclose(got, want, atol=1e-12)
    assert abs(float(got[2] + got[5]) - 1.0) < 1e-12  # one pair per prompt: p(a) + p(b) = 1


def test_whiten_gives_unit_variance_components():
    x = torch.randn(50, 8, dtype=torch.float64) @ torch.randn(8, 8, dtype=torch.float64)
    z = whiten(x, 3)
    assert z.shape == (50, 3)
    assert torch.allclose(z.T @ z / 50, torch.eye(3, dtype=torch.float64), atol=1e-10)
    assert torch.allclose(z.mean(0), torch.zeros(3, dtype=torch.float64), atol=1e-10)


def test_careless_raters_labels_are_down_weighted(tiny):
    """A careless rater flips a coin on the pairs the expert labelled (twice as many labels). Trusted like
    the expert (known beta = 1; or as 0/1 labels, the empirical model) its labels pull every preference
    towards 1/2; with its competence inferred (beta -> the grid's floor) they carry no weight and the
    estimate is the expert-only one."""
    model, tok = tiny
    data = careless_data()
    n_e = data.raters.count("e")
    bt = {"num_samples": 400, "competence": "infer-beta"}  # the beta-only plug-in's pinned numbers
    base = {"preference_model": "bradley-terry", "bradley_terry": bt}

    def fit(raters, d=data):
        return fit_lm_preferences(parse_lm_preferences({**base, "raters": raters}, d), model, tok, d, 64)

    inferred = fit([{"id": "e", "beta": 1.0}, {"id": "c"}])
    trusted = fit([{"id": "e", "beta": 1.0}, {"id": "c", "beta": 1.0}])
    expert = fit([{"id": "e", "beta": 1.0}], data.subset(range(n_e)))
    assert inferred.beta["c"][0] <= 0.05  # short: the coin-flipper barely counts
    assert inferred.beta["c"][1] > 1.0  # helpful: the same rater is right there, and is trusted
    # same responses, same features: without weight on c the posterior is the expert's
    gap_inf = float((inferred.mean[:n_e, 0] - expert.mean[:n_e, 0]).abs().max())
    gap_tr = float((trusted.mean[:n_e, 0] - expert.mean[:n_e, 0]).abs().max())
    assert gap_inf < 0.05 and gap_tr > 0.25  # measured 0.025 (400 posterior draws) and 0.33
    assert shorter_wins(inferred, data) > 0.9 > shorter_wins(trusted, data)
    n = len(data)

    def sep(p):
        return float((p.mean[:n, 0] - p.mean[n:, 0]).abs().mean())  # |p(a) - p(b)|: how decided

    assert sep(trusted) < 0.7 * sep(inferred)
    assert torch.all((inferred.q05 <= inferred.mean) & (inferred.mean <= inferred.q95))


def test_lower_quantile_feeds_the_constraints_and_the_mean_the_primary(tiny):
    model, tok = tiny
    data = careless_data(16, 1)
    cfg = {"preference_model": "bradley-terry", "raters": [{"id": "e", "beta": 1.0}, {"id": "c"}],
           "bradley_terry": {"num_samples": 200, "lower_quantile": 0.1}}  # fmt: skip
    prefs = fit_lm_preferences(parse_lm_preferences(cfg, data), model, tok, data, max_length=64)
    assert torch.all(prefs.constraint <= prefs.mean + 1e-12) and torch.all(
        prefs.constraint >= prefs.q05 - 1e-12
    )
    from bayescrl.mopo.lm.config import MOPOLMConfig
    from bayescrl.mopo.lm.model import lora_policy

    cfg_t = MOPOLMConfig(steps=1, batch_size=4, primary=1, max_length=64)
    tr = MOPOLMTrainer(
        lora_policy(build_model(tok, n_layer=1, n_embd=32, n_head=2), cfg_t.peft),
        tok,
        data,
        cfg_t,
        atom_scores=(prefs.mean, prefs.constraint),
    )
    assert torch.allclose(tr._p_all[0], prefs.mean[:, 1].float())  # primary: posterior mean
    assert torch.allclose(tr._q_all[0, :, 0], prefs.constraint[:, 0].float())  # constraint: 10 % quantile
    with pytest.raises(DataError, match="atom_scores"):
        MOPOLMTrainer(
            lora_policy(build_model(tok, n_layer=1, n_embd=32, n_head=2), cfg_t.peft),
            tok,
            data,
            cfg_t,
            atom_scores=(prefs.mean[:3], prefs.mean[:3]),
        )


def test_bad_preference_settings_are_refused_before_the_model(tiny):
    data = careless_data(4, 1)
    bt = {"preference_model": "bradley-terry"}
    cases = [
        ({**bt, "raters": [{"id": "e", "beta": 1.0}]}, DataError, "data.rater"),  # 'c' not listed
        ({**bt}, ConfigError, "raters"),  # a rater column but no raters
        ({"preference_model": "bt"}, ConfigError, "preference_model"),
        (
            {**bt, "raters": [{"id": "e", "beta": 1}, {"id": "c"}], "bradley_terry": {"feature_dim": 0}},
            ConfigError,
            "feature_dim",
        ),  # fmt: skip
        (
            {**bt, "raters": [{"id": "e", "beta": 1}, {"id": "c"}], "bradley_terry": {"engine": "exact"}},
            ConfigError,
            "engine",
        ),  # fmt: skip
    ]
    for cfg, exc, field in cases:
        with pytest.raises(exc) as info:
            parse_lm_preferences(cfg, data)
        assert field in info.value.field
    # empirical (the default) with a listed rater set still refuses a record of an unlisted rater
    with pytest.raises(DataError, match="c"):
        parse_lm_preferences({"raters": [{"id": "e", "beta": 1.0}]}, data)
    assert parse_lm_preferences({}, data) is None


def test_cli_bradley_terry_on_a_trl_file_writes_preference_probs(model_dir, tmp_path, capsys):
    out = tmp_path / "bt"
    code, err = run(["mopo", EXAMPLE, "--model", str(model_dir), "--out", str(out), *FAST, *BT], capsys)
    assert code == 0, err
    res = json.loads((out / "results.json").read_text())
    assert res["preference_model"] == "bradley-terry" and res["steps"] == 2
    pp = res["preference_probs"]
    assert set(pp) == {"short_enough", "helpful", "per_record"}
    assert 0 < pp["short_enough"]["mean_interval_width_90"] < 1
    assert set(res["rater_beta"]) == {"r0", "r1", "r2"} and res["rater_beta"]["r0"] == [1.0, 1.0]
    assert res["inference"]["engine"] == "laplace" and res["inference"]["fits"]["helpful"]["converged"]
    rows = [json.loads(ln) for ln in (out / "preference_probs.jsonl").read_text().splitlines()]
    assert len(rows) == 64 and {"a", "b"} <= set(rows[0]["short_enough"])
    assert all(math.isfinite(v) for r in rows for s in ("a", "b") for v in r["helpful"][s].values())
    # a record whose rater is not listed: one line, exit 2
    code, err = run(
        ["mopo", EXAMPLE, "--model", str(model_dir), "--out", str(tmp_path / "x"), *BT[:2],
         "--set", "raters=[{id: r0, beta: 1.0}, {id: r1}]"], capsys,
    )  # fmt: skip
    msg = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert (
        code == 2 and len(msg) == 1 and "data.rater" in msg[0] and "r2" in msg[0] and "Traceback" not in err
    )


def test_resume_refits_the_same_preferences(model_dir, tmp_path, capsys):
    """The estimate is refitted on --resume (seeded): a run stopped at step 1 and resumed to step 2 logs
    what an uninterrupted 2-step run logs."""
    base = ["mopo", EXAMPLE, "--model", str(model_dir), *BT, "--set", "train.t0=2"]
    full, part = tmp_path / "full", tmp_path / "part"
    assert run([*base, "--out", str(full), "--set", "train.steps=2"], capsys)[0] == 0
    assert run([*base, "--out", str(part), "--set", "train.steps=1"], capsys)[0] == 0
    assert run([*base, "--out", str(part), "--set", "train.steps=2", "--resume"], capsys)[0] == 0
    a, b = ([json.loads(ln) for ln in (d / "metrics.jsonl").read_text().splitlines()] for d in (full, part))
    assert [r["step"] for r in b] == [1, 2]
    for ra, rb in zip(a, b, strict=True):
        assert ra["b"] == rb["b"] and torch.allclose(torch.tensor(ra["G"]), torch.tensor(rb["G"]), atol=1e-6)
        assert torch.allclose(torch.tensor(ra["lambda"]), torch.tensor(rb["lambda"]), atol=1e-6)

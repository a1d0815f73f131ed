"""``competence: infer`` (the hierarchical rater model) in MOPO tabular, prefrl and the multi-rater bandit:
a deliberate-but-misinformed rater gets the lowest λ, the rater table reaches results and the command's
output; ``infer-beta`` keeps the β-only numbers; a misspelt value is refused with the closest one."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
import yaml

from bayescrl.bandits.experiment import final_table, run_experiment
from bayescrl.cli import main
from bayescrl.inference.rater_report import format_seed_summary, seed_summary
from bayescrl.mopo.preferences import DEFAULT_LAM, fit_bradley_terry
from bayescrl.prefrl.reward_model import LinearRewardPosterior
from bayescrl.raters import Rater

U = torch.tensor([[1.0, 0.0, -0.5, 0.6], [-0.8, 0.4, 0.9, 0.0]], dtype=torch.float64)  # [K, A]


def _bt_data(u: torch.Tensor, raters: list[tuple[float, int]], seed: int):
    """As in test_mopo_preferences: all pairs of actions, ``n`` labels per pair per rater ``(beta, n)``."""
    g = torch.Generator().manual_seed(seed)
    a_n = u.shape[-1]
    ys, yps, labs, rts = [], [], [], []
    for r, (beta, n) in enumerate(raters):
        for i in range(a_n):
            for j in range(i + 1, a_n):
                y = torch.tensor([i, j]).repeat(n)[:n]
                yp = torch.tensor([j, i]).repeat(n)[:n]
                prob = torch.sigmoid(beta * (u[:, y] - u[:, yp])).T  # [n, K]
                labs.append((torch.rand(prob.shape, generator=g, dtype=torch.float64) < prob).double())
                ys.append(y)
                yps.append(yp)
                rts.append(torch.full((n,), r))
    return torch.cat(ys), torch.cat(yps), torch.cat(labs), torch.cat(rts)


ACTIONS = ["a0", "a1", "a2", "a3"]
UTIL = np.array([1.5, 0.5, -0.5, -1.5])


def _mopo_config(n: int = 40, seed: int = 0) -> dict:
    """An expert (β = 1 known) and three raters of unknown competence: two labelling with the true
    utilities (β = 2), one deliberate but misinformed (β = 3, belief = −u: every preference reversed)."""
    g = np.random.default_rng(seed)
    recs = []
    for rid, beta, sign in (("e", 1.0, 1), ("g1", 2.0, 1), ("g2", 2.0, 1), ("w", 3.0, -1)):
        for _ in range(n):
            i, j = g.choice(4, 2, replace=False)
            p = 1 / (1 + np.exp(-beta * sign * (UTIL[i] - UTIL[j])))
            lab = int(g.random() < p)
            recs.append({"y": ACTIONS[i], "y_prime": ACTIONS[j], "prefs": [lab, lab], "rater": rid})
    return {
        "mode": "tabular",
        "solver": "exact",
        "actions": ACTIONS,
        "tau": 0.5,
        "b": [0.3],
        "data": recs,
        "raters": [{"id": "e", "beta": 1.0}, {"id": "g1"}, {"id": "g2"}, {"id": "w"}],
        "preference_model": "bradley-terry",
        "bradley_terry": {"num_samples": 100},
    }


def _lowest_lam(rows, unknown) -> set[str]:
    """Per objective (or seed), the unknown rater with the lowest posterior-mean λ."""
    groups: dict = {}
    for r in rows:
        if r["id"] in unknown:
            groups.setdefault(r.get("objective", r.get("seed")), []).append(r)
    return {min(g, key=lambda r: r["lam_mean"])["id"] for g in groups.values()}


def test_mopo_infer_flags_the_misinformed_rater_and_writes_the_rater_table(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(_mopo_config()))
    main_exit = None
    try:
        main(["mopo", str(cfg), "--out", str(tmp_path / "o")])
    except SystemExit as e:  # click's standalone mode
        main_exit = e.code
    assert main_exit in (None, 0)
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    rows = res["raters"]
    assert {r["id"] for r in rows} == {"e", "g1", "g2", "w"} and len(rows) == 8  # 4 raters x 2 objectives
    assert _lowest_lam(rows, {"g1", "g2", "w"}) == {"w"}
    for r in rows:
        assert r["beta_90"][0] <= r["beta_mean"] <= r["beta_90"][1] and r["verdict"]
    out = capsys.readouterr().out
    assert "rater competence (hierarchical model)" in out
    assert "rater_competence_0.png" in out.splitlines()[-1]
    assert (tmp_path / "o" / "rater_competence_1.png").stat().st_size > 1000


def test_mopo_infer_beta_reproduces_the_beta_only_numbers():
    """Pinned from the β-only ``competence: infer`` before the hierarchical model (same data and seed)."""
    ref = torch.full((4,), 0.25, dtype=torch.float64)
    y, yp, ind, rt = _bt_data(U, [(1.0, 40), (0.25, 200)], seed=1)
    raters = [Rater("expert", 1.0, DEFAULT_LAM), Rater("noisy", None, DEFAULT_LAM)]
    est = fit_bradley_terry(y, yp, ind, rt, raters, ref, num_samples=300, competence="infer-beta")
    assert est.beta["noisy"] == pytest.approx([0.22387211385683395, 0.3548133892335754], rel=1e-12)
    old = [0.7073747591030456, 0.4170461871836778, 0.29552838216014526, 0.5800506715531313]
    assert est.mean[0].tolist() == pytest.approx(old, rel=1e-9)
    assert not est.pools


def _prefrl_data(post, seed=0, raters=((4.0, 1), (4.0, 1), (4.0, 1), (6.0, -1))):
    g = np.random.default_rng(seed)
    theta = np.array([1.0, -1.0, 0.5])
    for r, (beta, sign) in enumerate(raters):
        x0, x1 = g.normal(size=(60, 3)), g.normal(size=(60, 3))
        p = 1 / (1 + np.exp(-beta * sign * ((x1 - x0) @ theta)))
        post.add(x0, x1, (g.random(60) < p).astype(float), np.full(60, r))


def test_prefrl_infer_gives_the_misinformed_rater_the_lowest_lambda():
    ids = ["a", "b", "c", "w"]
    post = LinearRewardPosterior(3, ids, beta=[1] * 4, lam=[1] * 4, competence="infer", seed=0)
    _prefrl_data(post)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # no rater of known competence in this pool
        post.update()
    rows = post.rater_rows()
    assert [r["id"] for r in rows] == ids
    assert _lowest_lam(rows, set(ids)) == {"w"}
    # measured: w's λ 90 % interval [0.10, 1.04], the others' lower bounds ≈ 1.8
    assert rows[3]["lam_90"][1] < min(r["lam_90"][0] for r in rows[:3])
    # w's β interval [0.3, 5.5] (exact competence Hessian) is too wide to call it deliberate: never trusted
    assert rows[3]["verdict"] in ("deliberate-but-misinformed", "uncertain")
    assert post.summary()["beta"] == pytest.approx([r["beta_mean"] for r in rows])
    # the reward posterior follows the three informed raters, not the misinformed one
    assert float(post.mean() @ torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64)) > 0


def test_prefrl_single_rater_keeps_lambda_at_its_prior_and_says_so():
    post = LinearRewardPosterior(3, ["me"], beta=[1], lam=[1], competence="infer", seed=0)
    _prefrl_data(post, raters=((4.0, 1),))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        post.update()
    (row,) = post.rater_rows()
    assert "not identified from one rater" in row["note"] and row["verdict"] == "uncertain"


def test_prefrl_infer_beta_reproduces_the_beta_only_numbers():
    """Pinned from the β-only ``competence: infer`` before the hierarchical model."""
    g = np.random.default_rng(0)
    theta = np.array([0.8, -0.4])
    post = LinearRewardPosterior(2, ["a", "b"], beta=[1, 1], lam=[1, 1], competence="infer-beta")
    for r, b in ((0, 8.0), (1, 0.3)):
        x0, x1 = g.normal(size=(100, 2)), g.normal(size=(100, 2))
        p = 1 / (1 + np.exp(-b * ((x1 - x0) @ theta)))
        post.add(x0, x1, (g.random(100) < p).astype(float), np.full(100, r))
    post.update()
    assert post.beta == pytest.approx([10.0, 0.31622776601683794], rel=1e-12)
    assert post.mean().tolist() == pytest.approx([0.8695954306524158, -0.41239863431133245], rel=1e-9)
    assert post.rater_rows() == []


BANDIT = {
    "bandit": {"K": 12, "d": 3, "T": 4},
    "offline": {
        "raters": [
            {"id": "a", "N": 60, "beta": 5.0, "lam": 100.0},
            {"id": "b", "N": 60, "beta": 5.0, "lam": 100.0},
            {"id": "w", "N": 60, "beta": 8.0, "lam": 0.05},
        ]
    },
    "agents": [
        {"id": "warmpref-ps-bootstrap", "label": "hier", "beta": "infer"},
        {"id": "warmpref-ps-bootstrap", "label": "mle", "beta": "mle"},
        {"id": "warmpref-ps-bootstrap", "label": "infer-beta", "beta": "infer-beta"},
    ],
}


def test_bandit_infer_flags_the_misinformed_rater_and_infer_beta_is_mle(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        res = run_experiment(BANDIT, seeds=1, out=tmp_path)
    hier = res["agents"]["hier"]
    assert _lowest_lam(hier["raters"], {"a", "b", "w"}) == {"w"}
    assert hier["assumed_lam_mean"][2] == min(hier["assumed_lam_mean"])
    assert (tmp_path / "rater_competence.png").stat().st_size > 1000
    on_disk = json.loads((tmp_path / "results.json").read_text())["agents"]["hier"]["raters"]
    assert [r["id"] for r in on_disk] == ["a", "b", "w"]
    # infer-beta is today's beta-only marginal MLE, number for number
    assert res["agents"]["infer-beta"]["assumed_beta_mean"] == res["agents"]["mle"]["assumed_beta_mean"]
    assert res["agents"]["infer-beta"]["final_regret_per_seed"] != []
    assert "raters" not in res["agents"]["mle"]


def test_bandit_rater_table_covers_every_seed(tmp_path):
    """The rater table of ``beta: infer`` has a row per seed and rater, and a per-rater summary over the
    seeds (mean and sd of the posterior means, verdict counts) that the printed table shows."""
    cfg = {**BANDIT, "agents": BANDIT["agents"][:1]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        res = run_experiment(cfg, seeds=2, out=tmp_path)
    hier = res["agents"]["hier"]
    rows = hier["raters"]
    assert [(r["seed"], r["id"]) for r in rows] == [(s, i) for s in (0, 1) for i in ("a", "b", "w")]
    assert rows[0]["beta_mean"] != rows[3]["beta_mean"]  # seed 1 is its own fit, not seed 0 again
    over = {e["id"]: e for e in hier["raters_over_seeds"]}
    assert list(over) == ["a", "b", "w"] and all(e["fits"] == 2 for e in over.values())
    w = [r for r in rows if r["id"] == "w"]
    assert over["w"]["lam_mean"] == pytest.approx((w[0]["lam_mean"] + w[1]["lam_mean"]) / 2, rel=1e-12)
    assert over["w"]["lam_sd"] == pytest.approx(abs(w[0]["lam_mean"] - w[1]["lam_mean"]) / 2**0.5, rel=1e-12)
    assert sum(over["w"]["verdicts"].values()) == 2
    on_disk = json.loads((tmp_path / "results.json").read_text())["agents"]["hier"]
    assert len(on_disk["raters"]) == 6 and len(on_disk["raters_over_seeds"]) == 3
    printed = final_table(res)
    assert "over seeds" in printed and printed.count(" ± ") >= 6


def test_seed_summary_of_known_rows():
    rows = [
        {"id": "x", "seed": 0, "beta_mean": 1.0, "lam_mean": 2.0, "verdict": "trusted", "note": ""},
        {"id": "y", "seed": 0, "beta_mean": 5.0, "lam_mean": 0.5, "verdict": "uncertain", "note": "known"},
        {"id": "x", "seed": 1, "beta_mean": 3.0, "lam_mean": 4.0, "verdict": "trusted", "note": ""},
        {"id": "x", "seed": 2, "beta_mean": 5.0, "lam_mean": 9.0, "verdict": "random", "note": ""},
    ]
    x, y = seed_summary(rows)
    assert (x["id"], x["fits"], x["beta_mean"], x["beta_sd"], x["lam_mean"]) == ("x", 3, 3.0, 2.0, 5.0)
    assert x["lam_sd"] == pytest.approx(13**0.5) and x["verdicts"] == {"trusted": 2, "random": 1}
    assert (y["fits"], y["beta_sd"], y["note"]) == (1, 0.0, "known")
    text = format_seed_summary([x, y])
    assert "3 ± 2" in text and "trusted 2, random 1" in text and "(known)" in text


@pytest.mark.parametrize(
    "argv, config, field",
    [
        (["mopo"], {**_mopo_config(4), "bradley_terry": {"competence": "infre"}}, "bradley_terry.competence"),
        (["bandit"], {**BANDIT, "assumed": {"beta": "infre"}}, "assumed.beta"),
    ],
)
def test_misspelt_competence_is_refused_in_one_line_with_the_closest_value(
    tmp_path, capsys, argv, config, field
):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(SystemExit) as bad:
        main([*argv, str(path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert bad.value.code == 2 and len(err) == 1, err
    assert err[0].startswith(f"error: {field}") and "did you mean 'infer'" in err[0], err[0]
    assert not (tmp_path / "o" / "results.json").exists()


def test_prefrl_misspelt_competence_is_refused_with_the_closest_value():
    from bayescrl.prefrl.spec import parse_preference_spec
    from bayescrl.utils import ConfigError

    with pytest.raises(ConfigError, match="did you mean 'infer'") as e:
        parse_preference_spec({"raters": [{"id": "a", "beta": 1.0}], "competence": "infre"})
    assert e.value.field == "preferences.competence"

"""Tabular MOPO preference models: empirical bit-for-bit with the previous code path, win rates vs scores,
the data-frequency reference, the Bayesian Bradley–Terry estimator (known and inferred competence), errors."""

import json
import math
from pathlib import Path

import pytest
import torch

from bayescrl.mopo.preferences import (
    DEFAULT_LAM,
    action_frequency,
    empirical_scores,
    fit_bradley_terry,
    pairwise_to_action,
)
from bayescrl.mopo.tabular import TabularProblem, parse_tabular, solve_exact, total_variation
from bayescrl.mopo.tabular_run import solve_config
from bayescrl.raters import Rater
from bayescrl.utils import ConfigError, DataError, load_yaml

ROOT = Path(__file__).resolve().parents[1]
D3 = [{"y": "y1", "y_prime": "y2", "prefs": [1, 1]}, {"y": "y2", "y_prime": "y1", "prefs": [0, 1]}]


def _legacy_config(name: str) -> dict:
    """The shipped example (or D3 with the lower bound) as the stored legacy results ran it."""
    if name == "d3_eps":
        cfg = {"mode": "tabular", "solver": "mopo", "actions": ["y1", "y2", "y3"], "primary": 1, "tau": 0.5}
        cfg.update(b=[0.5], data=D3, mopo={"steps": 100, "runs": 1, "eps": 0.1})
    else:
        cfg = load_yaml(ROOT / "examples" / "mopo" / f"{name}.yaml")
        for sect in ("mopo", "mopo_lb"):
            if sect in cfg:
                cfg[sect].update(steps=100, runs=1)
    return {**cfg, "reference": "uniform", "estimator": "score"}


@pytest.mark.parametrize("name", ["tabular_exact", "tabular_mopo", "tabular_mopo_lb", "d3_eps"])
def test_empirical_scores_with_uniform_reference_reproduce_the_previous_results(name):
    stored = json.loads((ROOT / "tests" / "data" / "mopo_empirical_legacy.json").read_text())[name]
    res, _ = solve_config(_legacy_config(name))
    assert "preference_probs" not in res
    # the stored numbers came from another install: equal up to the last bits a BLAS or numpy change moves
    for key in ("policy", "lambda", "G"):
        assert res[key] == pytest.approx(stored[key], rel=1e-12, abs=1e-15)


def test_win_rates_stay_in_unit_interval_scores_do_not_and_agree_under_the_data_reference():
    # D3 under a uniform reference: y1 wins both comparisons on objective 0, so its win rate is 1 and its
    # score 2 / (4 * 1/3) = 1.5 (the thesis' p(y > mu) is a probability)
    uni = parse_tabular({"actions": ["y1", "y2", "y3"], "data": D3, "primary": 1, "reference": "uniform"})
    p_w, q_w = uni.action_scores()
    assert q_w[:, 0].tolist() == [1.0, 0.0, 0.0] and p_w.tolist() == [0.5, 0.5, 0.0]
    uni.estimator = "score"
    p_s, q_s = uni.action_scores()
    assert q_s[:, 0].tolist() == pytest.approx([1.5, 0.0, 0.0]) and p_s.tolist() == pytest.approx(
        [0.75, 0.75, 0]
    )
    # a data set with unequal frequencies: reference = frequency of y among the augmented records
    recs = D3[:1] * 3 + [{"y": "y3", "y_prime": "y1", "prefs": [1, 0]}]
    data = parse_tabular({"actions": ["y1", "y2", "y3"], "data": recs})
    assert data.ref.tolist() == pytest.approx([4 / 8, 3 / 8, 1 / 8])
    w = data.action_scores()
    data.estimator = "score"
    s = data.action_scores()
    assert torch.allclose(w[0], s[0]) and torch.allclose(w[1], s[1])
    assert w[1][:, 0].tolist() == pytest.approx([3 / 4, 0.0, 1.0])  # y1 won 3 of its 4 comparisons


def test_data_reference_refuses_an_action_without_records():
    with pytest.raises(ConfigError, match="never appears"):
        parse_tabular({"actions": ["y1", "y2", "y3"], "data": D3})


def test_pairwise_to_action_is_the_reference_average_over_other_actions():
    u = torch.tensor([0.0, 1.0, -1.0], dtype=torch.float64)
    ref = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)

    def sig(x):
        return 1 / (1 + math.exp(-x))

    got = pairwise_to_action(u, ref)
    assert float(got[0]) == pytest.approx((0.3 * sig(-1) + 0.2 * sig(1)) / 0.5, abs=1e-12)
    assert float(got[1]) == pytest.approx((0.5 * sig(1) + 0.2 * sig(2)) / 0.7, abs=1e-12)


def _bt_data(u: torch.Tensor, pairs_n: int, raters: list[tuple[float, int]], seed: int):
    """All pairs of actions, ``n`` labels per pair per rater ``(beta, n)``; truth P = sigmoid(beta du)."""
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


U = torch.tensor([[1.0, 0.0, -0.5, 0.6], [-0.8, 0.4, 0.9, 0.0]], dtype=torch.float64)  # [K, A]


def test_bradley_terry_single_known_rater_recovers_probabilities_and_the_exact_mopo_policy():
    ref = torch.full((4,), 0.25, dtype=torch.float64)
    y, yp, ind, rt = _bt_data(U, 0, [(1.0, 400)], seed=0)
    est = fit_bradley_terry(y, yp, ind, rt, [Rater("r", 1.0, DEFAULT_LAM)], ref, num_samples=500)
    truth = pairwise_to_action(U, ref)
    assert (est.mean - truth).abs().max() < 0.05
    lo, hi = est.quantile(0.05), est.quantile(0.95)
    assert bool(((lo <= truth) & (truth <= hi)).float().mean() >= 0.75)  # 90 % intervals cover (8 values)

    def policy(p):
        prob = TabularProblem(
            ["a", "b", "c", "d"], y, yp, ind, primary=1, ref=ref, scores=(p[1], p[0][:, None])
        )
        return solve_exact(prob, 0.1, torch.tensor([0.55], dtype=torch.float64)).policy

    assert float(total_variation(policy(est.mean), policy(truth))) < 0.05


def test_bradley_terry_infers_a_noisy_raters_competence_relative_to_the_expert():
    ref = torch.full((4,), 0.25, dtype=torch.float64)
    y, yp, ind, rt = _bt_data(U, 0, [(1.0, 40), (0.25, 200)], seed=1)
    raters = [Rater("expert", 1.0, DEFAULT_LAM), Rater("noisy", None, DEFAULT_LAM)]
    est = fit_bradley_terry(y, yp, ind, rt, raters, ref, num_samples=300)
    for b in est.beta["noisy"]:
        assert 0.15 < b < 0.4
    truth = pairwise_to_action(U, ref)
    emp = empirical_scores(y, ind[:, 0], ind[:, 1:], action_frequency(y, 4))[0]  # objective 0, win rates
    # pooled empirical win rates are pulled to 1/2 by the noisy rater; the model corrects for its beta
    assert (est.mean[0] - truth[0]).abs().max() < 0.5 * (emp - truth[0]).abs().max()


def _bt_cli_config(**kw):
    recs = [{"y": "y1", "y_prime": "y2", "prefs": [1, 1], "rater": "e"}] * 3
    recs += [{"y": "y2", "y_prime": "y3", "prefs": [0, 1], "rater": "n"}] * 3
    recs += [{"y": "y1", "y_prime": "y3", "prefs": [1, 0]}]
    cfg = {"mode": "tabular", "solver": "exact", "actions": ["y1", "y2", "y3"], "tau": 0.5, "b": [0.3]}
    cfg.update(data=recs, raters=[{"id": "e", "beta": 1.0}, {"id": "n"}], preference_model="bradley-terry")
    cfg["bradley_terry"] = {"num_samples": 200}
    return {**cfg, **kw}


def test_results_report_preference_probabilities_with_intervals_and_diagnostics():
    res, _ = solve_config(_bt_cli_config())
    pp = res["preference_probs"]
    assert set(pp) == {"0", "1"} and set(pp["0"]) == {"y1", "y2", "y3"}
    for v in pp["1"].values():
        assert 0 < v["q05"] <= v["mean"] <= v["q95"] < 1
    assert res["inference"]["diagnostics"]["0"]["converged"] is True
    assert set(res["rater_beta"]) == {"e", "n"}
    # b = 0.45 is slack for the posterior mean (lam = 0) but binds for the 10 % quantile of objective 0
    mean, _ = solve_config(_bt_cli_config(b=[0.45]))
    low, _ = solve_config(_bt_cli_config(b=[0.45], bradley_terry={"num_samples": 200, "lower_quantile": 0.1}))
    assert mean["lambda"][0] == 0.0 and low["lambda"][0] > 0.5 and low["G"][0] == pytest.approx(0.45)
    q_mean = [mean["preference_probs"]["0"][a]["mean"] for a in mean["actions"]]
    g_low = sum(low["policy"][a] * q for a, q in zip(low["actions"], q_mean, strict=True))
    assert g_low > mean["G"][0] + 0.02  # the quantile constraint is the tighter one


@pytest.mark.parametrize("batch, tol", [(None, 1e-3), (4, 0.05)])
def test_stochastic_mopo_on_posterior_scores_reaches_the_exact_solution_of_the_same_scores(batch, tol):
    """With bradley-terry the solver's atoms are the actions (weights A pi_ref(a)); mini-batches of them give
    an unbiased G, so Algorithm mopo converges to solve_exact on the same (quantile) scores."""
    mopo = {"steps": 600, "lr": 0.05, "lr_final": 0.002, "batch": batch, "runs": 2}
    bt = {"num_samples": 200, "lower_quantile": 0.1}
    res, _ = solve_config(_bt_cli_config(solver="mopo", b=[0.45], mopo=mopo, bradley_terry=bt))
    assert max(res["tv_to_exact"]) < tol and res["lambda"][0] > 0.5


@pytest.mark.parametrize(
    "change, field",
    [
        ({"data": [{"y": "y1", "y_prime": "y2", "prefs": [1, 1], "rater": "x"}]}, "data.rater[0]"),
        ({"tau": -0.1}, "tau"),
        ({"solver": "mopo", "mopo": {"runs": 0}}, "mopo.runs"),
        ({"raters": [{"id": "a"}, {"id": "b"}]}, "raters"),
        ({"bradley_terry": {"lower_quantile": 0.7}}, "bradley_terry.lower_quantile"),
        ({"preference_model": "bt"}, "preference_model"),
    ],
)
def test_bad_input_one_line_exit_2(tmp_path, capsys, change, field):
    import yaml

    from bayescrl.cli import main

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(_bt_cli_config(**change)))
    with pytest.raises(SystemExit) as bad:
        main(["mopo", str(path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert bad.value.code == 2 and len(err) == 1 and err[0].startswith(f"error: {field}")


def test_records_with_rater_but_no_rater_list_are_refused():
    with pytest.raises(DataError, match="unknown rater"):
        parse_tabular(
            {"actions": ["y1", "y2"], "data": [{"y": "y1", "y_prime": "y2", "prefs": [1, 0], "rater": "a"}]}
        )

"""Synthetic MOPO: sanity-check outcomes (D1/D2/D3), motivating-example closed forms, Pareto tools."""

import math

import numpy as np
import pytest
import torch

from bayescrl.mopo import pareto
from bayescrl.mopo.synthetic import cop_oracle, ideal_mopo_points, run_motivating, run_sanity, true_front
from bayescrl.utils import ConfigError

# short protocol: the text's Adam/batch 12 with fewer steps and a decaying learning rate
FAST = {"steps": 1000, "lr": 0.05, "lr_final": 0.005, "batch": 12, "runs": 2, "seed": 0, "log_every": 500}


@pytest.fixture(scope="module")
def sanity():
    return run_sanity({"tau": [0.1, 1.0], "mopo": FAST})["runs"]


def test_d1_converges_to_condorcet_winner(sanity):
    assert sanity["D1/tau=0.1"]["policy_mean"]["y1"] > 0.9
    assert sanity["D1/tau=1"]["policy_mean"]["y1"] < 0.9  # larger tau interpolates towards pi_ref


def test_d2_equal_mass_on_undominated_actions(sanity):
    pol = sanity["D2/tau=0.1"]["policy_mean"]
    assert abs(pol["y1"] - pol["y3"]) < 0.1 and pol["y1"] > 0.4 and pol["y3"] > 0.4 and pol["y2"] < 0.02


def test_d3_downweights_unobserved_action_more_as_tau_decreases(sanity):
    low, high = sanity["D3/tau=0.1"]["policy_mean"]["y3"], sanity["D3/tau=1"]["policy_mean"]["y3"]
    assert low < 0.01 and high > 0.1 and low < high
    # closed form at tau = 1 (constraint inactive): pi(y3) = 1 / (1 + 2 e^{0.75})
    assert high == pytest.approx(1 / (1 + 2 * math.exp(0.75)), abs=0.02)


def test_sanity_runs_close_to_exact(sanity):
    for key, res in sanity.items():
        # D2 at tau = 0.1 is ill-conditioned (d pi / d lam ~ 1/tau around lam* = 1): looser tolerance
        tol = 0.1 if key == "D2/tau=0.1" else 0.05
        assert max(res["tv_to_exact"]) < tol, key


def test_true_front_set_a_closed_form():
    """Set A: front over y in [0, 1/4]; E_x e^x = e - 1, E_x[-sin x] = cos 1 - 1 (grid mean, tol 5e-3)."""
    f = true_front("A", n_x=201, n_y=2001, n_w=101)
    ex, esin = math.e - 1, math.cos(1) - 1
    assert f[:, 0].max() == pytest.approx(ex + 0.25, abs=5e-3)
    assert f[:, 1].max() == pytest.approx(esin, abs=5e-3)
    assert f[np.argmax(f[:, 0]), 1] == pytest.approx(esin - 1 / 16, abs=5e-3)
    # COP with a vacuous threshold picks argmax r1, i.e. y = 1/4 for every x
    pt = cop_oracle("A", np.array([-10.0]), n_x=201, n_y=2001)[0]
    assert pt[0] == pytest.approx(ex + 0.25, abs=5e-3)


def test_pareto_filter_and_hypervolume_known_values():
    pts = np.array([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0], [1.5, 1.5], [2.0, 2.0]])
    mask = pareto.non_dominated(pts)
    assert mask.tolist() == [True, True, True, False, True]
    # union of rectangles from ref (0, 0): 1*3 + 1*2 + 1*1 = 6
    assert pareto.hypervolume(pts, [0.0, 0.0]) == pytest.approx(6.0)
    assert pareto.hypervolume(pts, [5.0, 5.0]) == 0.0
    assert pareto.mean_distance([[0.0, 0.0]], [[3.0, 4.0], [6.0, 8.0]]) == pytest.approx(5.0)
    dense = pareto.densify_front([[0.0, 1.0], [1.0, 0.0]], n_between=4)
    assert dense.shape == (5, 2) and np.allclose(dense.sum(1), 1.0)


def test_motivating_pipeline_smoke(tmp_path):
    cfg = {
        "reward_sets": ["B"],
        "n": 400,
        "n_y": 11,
        "dpo": {"steps": 30, "batch": 64, "hidden": 16, "w": [0.5]},
        "mopo": {
            "steps": 30,
            "t0": 10,
            "batch": 64,
            "hidden": 16,
            "thresholds": [0.5, 0.7],
            "thresholds_r1": [0.6],
            "primaries": [0, 1],
            "reference_update": "current",
        },
        "cop": {"n": 5},
        "grid": {"n_x": 21, "n_y": 101, "n_w": 21},
    }
    res = run_motivating(cfg, tmp_path)["sets"]["B"]
    assert set(res["methods"]) >= {"DPO D1", "DPO D2", "DPO DJ", "DPO DC(w=0.5)", "COP oracle", "MOPO"}
    assert len(res["methods"]["MOPO"]["points"]) == 2
    assert len(res["methods"]["MOPO r2 primary"]["points"]) == 1
    both = res["methods"]["MOPO both primaries"]
    assert len(both["points"]) == 3
    assert both["hypervolume"] >= max(res["methods"][k]["hypervolume"] for k in ("MOPO", "MOPO r2 primary"))
    assert all(v["hypervolume_front_nadir_ref"] >= 0 for v in res["methods"].values())
    assert all(v["hypervolume"] >= 0 for v in res["methods"].values())
    assert (tmp_path / "motivating_set_B.png").exists()
    torch.testing.assert_close(torch.tensor(res["reference_point"]).shape, torch.Size([2]))


def test_motivating_rejects_bad_reference_update_and_primaries(tmp_path):
    cfg = {"reward_sets": ["B"], "n": 50, "n_y": 5, "dpo": {"steps": 1, "hidden": 4, "w": [0.5]}}
    cfg |= {"cop": {"n": 2}, "grid": {"n_x": 5, "n_y": 11, "n_w": 5}}
    mopo = {"steps": 2, "t0": 1, "batch": 8, "hidden": 4, "thresholds": [0.5]}
    with pytest.raises(ConfigError, match="reference_update"):
        run_motivating(cfg | {"mopo": mopo | {"reference_update": "bogus"}})
    with pytest.raises(ConfigError, match="primaries"):
        run_motivating(cfg | {"mopo": mopo | {"primaries": [1]}})


def test_ideal_mopo_r1_primary_cannot_reach_the_r2_end_of_set_b():
    """Infinite data, exact extraction: with r1 primary no lam reaches the r2 end (the primary's tilt
    e^{1/tau} stays), while the r2-primary head does; more phases sharpen the r1 end (closed form)."""
    lams = np.array([0.0, 1.0, 1e3])
    a30, a1000 = ideal_mopo_points("B", 1.0, 30, lams), ideal_mopo_points("B", 1.0, 1000, lams)
    b30 = ideal_mopo_points("B", 1.0, 30, lams, primary=1)
    assert a30[:, 1].max() < -0.05 and a1000[:, 1].max() < -0.05  # uniform policy has E r2 = 0
    assert b30[0, 1] > 0.2  # r2-primary head, lam = 0
    assert a1000[0, 0] > a30[0, 0] > 2.0  # COP's r1 end: 2.335
    # zero phases: the uniform reference, E r1 = E (x + y)^2 = 7/6 on the grids (tol for the grid means)
    assert ideal_mopo_points("B", 1.0, 0, lams)[0, 0] == pytest.approx(7 / 6, abs=0.01)

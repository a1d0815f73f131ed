"""`compare`: W2 closed form, log-loss identities, calibration of the exact engine, report files."""

import json

import torch

from bayescrl.inference.compare import compare_engines, gaussian_w2, heldout_logloss
from bayescrl.models.simulate import simulate
from bayescrl.models.spec import from_spec
from bayescrl.utils import set_torch_threads

set_torch_threads(1)
DT = torch.float64


def test_w2_closed_forms():
    # 1-D: W2 = sqrt((m1 - m2)² + (s1 - s2)²); commuting covariances: per-axis sum
    w = gaussian_w2(
        torch.tensor([1.0], dtype=DT),
        torch.tensor([[4.0]], dtype=DT),
        torch.tensor([0.0], dtype=DT),
        torch.tensor([[1.0]], dtype=DT),
    )
    assert abs(w - 2**0.5) < 1e-10
    c1, c2 = torch.diag(torch.tensor([1.0, 9.0], dtype=DT)), torch.diag(torch.tensor([4.0, 1.0], dtype=DT))
    w = gaussian_w2(torch.zeros(2, dtype=DT), c1, torch.zeros(2, dtype=DT), c2)
    assert abs(w - (1.0 + 4.0) ** 0.5) < 1e-10


def test_joint_equals_marginal_for_a_point_mass_and_exceeds_it_otherwise():
    spec = simulate({"dim": 2, "raters": [{"id": "a", "beta": 3.0, "lam": 5.0}]}, num_prefs=5, seed=0)
    m = from_spec(spec)
    point = {"vartheta": torch.tensor([[[0.5, -0.2]]], dtype=DT).expand(100, 1, 2)}
    ll = heldout_logloss(point, m, tau=10, batches=200)
    assert abs(ll["marginal"] - ll["joint_per_item"]) < 1e-9
    spread = {"vartheta": torch.randn(400, 1, 2, generator=torch.Generator().manual_seed(0), dtype=DT)}
    ll = heldout_logloss(spread, m, tau=10, batches=200)
    # dyadic batches repeat 2 anchor pairs: a spread posterior's joint loss is below its marginal loss
    assert ll["joint_per_item"] < ll["marginal"]


def test_compare_on_conjugate_model_is_calibrated(tmp_path):
    spec = simulate(
        {"dim": 2, "noise_sd": 0.5, "raters": [{"id": "a", "beta": 3.0, "lam": 5.0}]},
        num_prefs=0,
        num_rewards=15,
        seed=2,
    )
    model = from_spec(spec)
    rep = compare_engines(
        model,
        ["exact", "laplace", "bootstrap"],
        num_samples=4000,
        coverage_reps=200,
        out_dir=tmp_path,
        progress=False,
    )
    assert rep["reference"] == "exact"
    for e in ("exact", "laplace", "bootstrap"):
        row = rep["engines"][e]
        assert row["w2"] < 0.03, (e, row["w2"])
        assert abs(row["coverage90"] - 0.9) < 0.05, (e, row["coverage90"])
    saved = json.loads((tmp_path / "compare.json").read_text())
    assert set(saved["engines"]) == {"exact", "laplace", "bootstrap"}
    assert (tmp_path / "marginals.png").stat().st_size > 1000
    assert "| bootstrap |" in (tmp_path / "compare.md").read_text()


def test_compare_needs_an_observation():
    import pytest

    from bayescrl.utils import DataError

    with pytest.raises(DataError, match="at least one observation"):
        compare_engines(from_spec({"dim": 2}), ["laplace"], progress=False)

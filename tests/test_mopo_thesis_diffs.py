"""Pinned behaviour for the MOPO "Differences from the thesis" (docs/reproduction.md, chapter `mopo`) that
tests/test_mopo_*.py do not pin by name elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from bayescrl.mopo.synthetic import fit_win_rates, make_data

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("kind", [None, "direct"])
def test_pooled_scores_come_from_a_bradley_terry_reward_network_by_default(kind):
    """The thesis' MOPO learns no mapping from preferences to pointwise rewards; the motivating example's
    default (``mopo.scores: pooled``, ``score_model.kind: bt``) smooths the win rates of Eq.
    `empirical-dual` with a Bradley–Terry network r_k(x, y): s_k(x, y) = mean_{y' != y} σ(r_k(x, y) −
    r_k(x, y')). Such win rates average exactly 1/2 over y (σ(a) + σ(−a) = 1); the ``direct`` model's
    logistic regression of the indicators does not obey that identity."""
    mcfg = yaml.safe_load((ROOT / "examples" / "mopo" / "motivating.yaml").read_text())["mopo"]
    assert mcfg["scores"] == "pooled" and "kind" not in mcfg["score_model"]
    gen = torch.Generator().manual_seed(0)
    data = make_data("B", 600, 7, gen, [0.5])
    cfg = {"score_model": {"steps": 60} if kind is None else {"steps": 60, "kind": kind}}
    win = fit_win_rates(data, 7, cfg, gen)(torch.linspace(0, 1, 9))  # [x, y, objective]
    gap = float((win.mean(1) - 0.5).abs().max())
    if kind is None:
        assert gap < 1e-6
    else:
        assert gap > 1e-3

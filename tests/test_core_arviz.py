"""ArviZ output its diagnostics accept: independent draws in 4 chains (R-hat defined, no shape warning),
NUTS sample stats with energy (BFMI) and divergences, ``to_arviz()`` on every posterior class, and one NUTS
progress bar over warm-up and draws that respects quiet mode."""

from __future__ import annotations

import importlib
import logging
import math
import re
import warnings
from pathlib import Path

import numpy as np
import pyro
import pyro.distributions as dist
import pytest
import torch

from bayescrl.inference.arviz import import_arviz, num_draws, split_chains
from bayescrl.inference.engines import fit
from bayescrl.models.spec import from_spec

az = import_arviz()
DT = torch.float64
G = torch.Generator().manual_seed(3)
X = torch.randn(20, 2, generator=G, dtype=DT)
R = X @ torch.tensor([0.8, -0.4], dtype=DT) + 0.5 * torch.randn(20, generator=G, dtype=DT)
SPEC = {
    "dim": 2,
    "prior": {"mean": [0.0, 0.0], "cov": [[1.0, 0.0], [0.0, 1.0]]},
    "noise_sd": 0.5,
    "raters": [{"id": "a", "beta": 2.0, "lam": 3.0}],
    "rewards": [{"x": X[i].tolist(), "r": float(R[i])} for i in range(20)],
    "preferences": [{"x0": [1.0, 0.0], "x1": [0.0, 1.0], "y": 1, "rater": "a"}],
}


def _quiet_summary(idata) -> None:
    """``az.summary`` with R-hat: no warning through ``warnings`` or ArviZ's logger."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("arviz").addHandler(handler)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            summ = az.summary(idata, var_names=["theta"])
    finally:
        logging.getLogger("arviz").removeHandler(handler)
    assert not [r for r in records if r.levelno >= logging.WARNING], [r.getMessage() for r in records]
    assert np.isfinite(summ["r_hat"]).all()


def test_split_chains_and_num_draws():
    assert num_draws(50) == 52 and num_draws(400) == 400 and num_draws(3) == 3 and num_draws(10) == 10
    x = torch.arange(16.0).reshape(16, 1)
    assert split_chains(x).shape == (4, 4, 1)
    assert (split_chains(x)[1, :, 0] == [4, 5, 6, 7]).all()  # draw order kept inside a chain
    assert split_chains(x[:12]).shape == (3, 4, 1)
    assert split_chains(torch.zeros(5, 2)).shape == (1, 5, 2)  # no 2..4 divides 5
    assert split_chains(torch.zeros(6)).shape == (2, 3)  # never more chains than draws per chain
    assert split_chains(torch.zeros(8, 2)).shape == (2, 4, 2)


@pytest.mark.parametrize(
    "engine,opts",
    [
        ("exact", {}),
        ("laplace", {}),
        ("bootstrap", {}),
        ("svi", {"max_steps": 60, "min_steps": 30, "window": 10}),
    ],
)
def test_independent_draws_come_as_four_chains_with_a_defined_rhat(engine, opts):
    post = fit(from_spec(SPEC) if engine != "exact" else _exact_spec(), engine=engine, seed=0, **opts)
    idata = post.to_arviz(400, seed=0)
    assert idata.posterior.sizes["chain"] == 4 and idata.posterior.sizes["draw"] == 100
    rhat = az.rhat(idata, var_names=["theta"])["theta"].values
    assert np.isfinite(rhat).all() and (abs(rhat - 1) < 0.05).all()  # independent draws: R-hat ~ 1
    _quiet_summary(idata)


def _exact_spec() -> dict:
    return {k: v for k, v in SPEC.items() if k != "preferences"}


def _gauss(d: int = 3):
    """θ ~ N(0, I_d): U(θ) = |θ|²/2 + (d/2) log 2π, so H = U + K has mean d + (d/2) log 2π and variance d."""
    pyro.sample("theta", dist.Normal(torch.zeros(d, dtype=DT), 1.0).to_event(1))


def test_nuts_sample_stats_have_energy_so_bfmi_works():
    post = fit(_gauss, engine="nuts", num_samples=150, warmup=50, num_chains=2, seed=0, jit=True)
    idata = post.to_arviz()
    ss = idata.sample_stats
    assert {"energy", "diverging"} <= set(ss.data_vars)
    assert ss["energy"].shape == (2, 150) and ss["diverging"].dtype == bool
    e = ss["energy"].values
    assert abs(e.mean() - (3 + 1.5 * math.log(2 * math.pi))) < 0.3  # E[H] = d + (d/2) log 2π
    assert 2.0 < e.var() < 4.5  # Var[H] = d
    bfmi = az.bfmi(idata)
    assert bfmi.shape == (2,) and (bfmi > 0.5).all() and (bfmi < 2.0).all()  # a healthy sampler
    _quiet_summary(idata)


class _Bar:
    made: list[_Bar] = []

    def __init__(self, total=None, disable=False, **kw):
        self.total, self.disable, self.n, self.descs = total, disable, 0, []
        _Bar.made.append(self)

    def update(self, k=1):
        self.n += k

    def set_description(self, desc, refresh=True):
        self.descs.append(desc)

    def close(self):
        pass


def test_nuts_progress_bar_covers_warmup_and_draws_and_respects_quiet(monkeypatch):
    import bayescrl.inference.nuts as nuts_mod

    monkeypatch.setattr(nuts_mod, "tqdm", _Bar)
    log = logging.getLogger("bayescrl")
    monkeypatch.setattr(log, "level", logging.NOTSET)  # a library user who never set it
    _Bar.made = []
    fit(_gauss, engine="nuts", num_samples=20, warmup=10, num_chains=2, seed=0, progress=True)
    (bar,) = _Bar.made
    assert bar.total == 2 * (10 + 20) and bar.n == bar.total and not bar.disable
    assert bar.descs == [
        "nuts chain 1/2 warm-up",
        "nuts chain 1/2 sampling",
        "nuts chain 2/2 warm-up",
        "nuts chain 2/2 sampling",
    ]
    monkeypatch.setattr(log, "level", logging.WARNING)  # bayescrl -q
    fit(_gauss, engine="nuts", num_samples=5, warmup=5, num_chains=1, seed=0, progress=True)
    assert _Bar.made[-1].disable


def _posterior_classes() -> list[type]:
    root = Path(__file__).resolve().parents[1] / "bayescrl"
    out = []
    for path in sorted(root.rglob("*.py")):
        for name in re.findall(r"^class (\w*Posterior)\b", path.read_text(), re.M):
            mod = ".".join(path.relative_to(root.parent).with_suffix("").parts)
            out.append(getattr(importlib.import_module(mod), name))
    return out


def test_every_posterior_class_has_to_arviz():
    classes = _posterior_classes()
    assert len(classes) >= 7
    missing = [c.__qualname__ for c in classes if not callable(getattr(c, "to_arviz", None))]
    assert not missing


def test_to_arviz_of_the_other_posterior_classes():
    from bayescrl.inference.exact import DirichletPosterior, GaussianLinearPosterior
    from bayescrl.mopo.preferences import RewardPosterior
    from bayescrl.prefrl.ensemble import EnsembleRewardPosterior
    from bayescrl.prefrl.reward_model import CostPosterior, LinearRewardPosterior

    g = GaussianLinearPosterior(torch.zeros(3, 2), torch.eye(2)).to_arviz(100)
    assert g.posterior["theta"].shape == (4, 25, 3, 2)
    d = DirichletPosterior(torch.ones(2, 3)).to_arviz(100)
    assert d.posterior["eta"].shape == (4, 25, 2, 3)
    assert np.allclose(d.posterior["eta"].values.sum(-1), 1.0)
    lin = LinearRewardPosterior(2, ["a"], beta=[1.0], lam=[10.0])
    state = lin.gen.get_state()
    idata = lin.to_arviz(400, seed=1)
    assert torch.equal(lin.gen.get_state(), state)  # the learner's own stream did not move
    assert idata.posterior["theta"].shape == (4, 100, 2)
    _quiet_summary(idata)
    kappa = CostPosterior(2, ["a"], [1.0], [10.0], threshold=0.5).to_arviz(40)
    assert kappa.posterior["kappa"].shape == (4, 10, 2)
    ens = EnsembleRewardPosterior(3, ["a"], beta=[1.0], lam=[10.0], members=4, hidden=(4,))
    assert ens.to_arviz(torch.zeros(5, 3)).posterior["reward"].shape == (2, 2, 5)
    mopo = RewardPosterior(torch.zeros(16, 2, 3), {}, {}).to_arviz()
    assert mopo.posterior["theta"].dims == ("chain", "draw", "objective", "theta_dim")
    assert mopo.posterior["theta"].shape == (4, 4, 2, 3)


def test_compare_hands_its_progress_to_every_engine(monkeypatch):
    import bayescrl.inference.compare as compare_mod

    calls: list[dict] = []

    def spy(model, **kw):
        calls.append(kw)
        return fit(model, **kw)

    monkeypatch.setattr(compare_mod, "fit", spy)
    compare_mod.compare_engines(from_spec(_exact_spec()), ["laplace"], num_samples=200, coverage_reps=2)
    assert [c["engine"] for c in calls] == ["exact", "laplace"]
    assert all(c["progress"] is True for c in calls)  # NUTS / SVI draw their own bar inside compare's

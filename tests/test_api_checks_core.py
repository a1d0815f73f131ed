"""The core's public functions refuse bad arguments by name (ConfigError / DataError), as the CLI does;
valid calls still work. Each test fails when its check is removed."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from bayescrl.inference import GaussianLinearPosterior, fit, laplace, map_estimate, perturbed_map
from bayescrl.models import BTLinearProblem, from_spec, simulate
from bayescrl.raters import CompetencePrior, log_likelihood, parse_raters
from bayescrl.raters.competence import (
    beta_entropy,
    beta_mle,
    beta_mle_given_theta,
    beta_posterior_mean,
    log_marginal_likelihood,
)
from bayescrl.utils import set_torch_threads
from bayescrl.utils.errors import ConfigError, DataError

set_torch_threads(1)
DT = torch.float64
NAN = float("nan")
SPEC = {"dim": 2, "raters": [{"id": "r0", "beta": 1.0, "lam": 1.0}]}
SPEC_FILE = Path(__file__).resolve().parents[1] / "examples" / "core" / "default_spec.yaml"
MU0, COV0 = torch.zeros(2, dtype=DT), torch.eye(2, dtype=DT)


def _prefs(n: int = 20) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One seed of ``n`` comparisons: ``x0, x1 [1, n, 2]``, ``y [1, n]``."""
    g = torch.Generator().manual_seed(0)
    x0, x1 = torch.randn(1, n, 2, dtype=DT, generator=g), torch.randn(1, n, 2, dtype=DT, generator=g)
    return x0, x1, (torch.rand(1, n, generator=g) > 0.5).double()


def _problem() -> BTLinearProblem:
    x0, x1, y = _prefs()
    return BTLinearProblem.from_data(MU0, COV0, 1.0, 1.0, x0=x0[0], x1=x1[0], y=y[0])


@pytest.fixture(scope="module")
def post():
    return fit(simulate(SPEC, num_prefs=20, seed=0), engine="laplace")


# ---------------------------------------------------------------------------- 1. device
@pytest.mark.parametrize(
    "call",
    [
        lambda: from_spec({"dim": 2}, device="gpu"),
        lambda: BTLinearProblem.from_data(MU0, COV0, 1.0, 1.0, device="gpu"),
        lambda: BTLinearProblem.empty(MU0, COV0, device="gpu"),
    ],
    ids=["from_spec", "from_data", "empty"],
)
def test_device_is_checked(call):
    with pytest.raises(ConfigError, match=r"device = 'gpu': not a torch device"):
        call()


# ---------------------------------------------------------------------------- 2. Posterior
def test_posterior_sample_counts(post):
    assert post.sample(1e3)["theta"].shape == (1000, 2)  # a whole float is a count
    for bad in (0, 10.5, "abc", True):
        with pytest.raises(ConfigError, match=r"^n = "):
            post.sample(bad)
    with pytest.raises(ConfigError, match=r"^n = "):
        post.mean_cov("theta", n=-1)


def test_posterior_seed(post):
    torch.testing.assert_close(
        post.sample(5, seed=2**63 - 1)["theta"], post.sample(5, seed=2**63 - 1)["theta"]
    )
    assert post.sample(5, seed=None)["theta"].shape == (5, 2)
    for bad in (2**70, -1, 1.5, "x"):
        with pytest.raises(ConfigError, match=r"^seed = "):
            post.sample(5, seed=bad)


def test_posterior_site(post):
    with pytest.raises(ConfigError, match=r"site = 'thetaa': must be one of .*did you mean 'theta'"):
        post.mean_cov("thetaa")
    assert post.mean_cov("vartheta", n=50)[1].shape == (2, 2)


# ---------------------------------------------------------------------------- 3. NaN features
def test_nan_preference_features_are_refused():
    x0, x1, y = _prefs(5)
    bad = x0[0].clone()
    bad[3, 1] = NAN
    with pytest.raises(DataError, match=r"preferences\.x0\[3\] = \[.*nan\]: must be finite"):
        BTLinearProblem.from_data(MU0, COV0, 1.0, 1.0, x0=bad, x1=x1[0], y=y[0])
    p = _problem()
    with pytest.raises(DataError, match=r"preferences\.x1\[0\]"):
        p.append_preferences(x0[0, :1], torch.full((1, 2), math.inf, dtype=DT), [1.0])
    assert int(p.n_pref) == 20  # nothing appended
    batched = BTLinearProblem.empty(MU0, COV0, batch_size=2, pref_capacity=4)
    with pytest.raises(DataError, match=r"preferences\.x0\[1\]"):
        batched.append_preferences(torch.tensor([[0.0, 1.0], [NAN, 0.0]]), torch.zeros(2, 2), [0.0, 1.0])
    with pytest.raises(DataError, match=r"rewards\.x\[0\]"):
        p.append_rewards(torch.tensor([[NAN, 0.0]]), [1.0])
    p.append_preferences(x0[0, :2], x1[0, :2], [0.0, 1.0])  # valid rows still append
    assert int(p.n_pref) == 22


# ---------------------------------------------------------------------------- 4. exact posterior
def test_gaussian_linear_posterior_checks():
    for sd in (NAN, 0.0, -1.0, math.inf):
        with pytest.raises(DataError, match=r"^noise_sd = "):
            GaussianLinearPosterior(MU0, COV0, sd)
    post = GaussianLinearPosterior(MU0, COV0, 0.5)
    with pytest.raises(DataError, match=r"rewards\.r = \(4,\)"):
        post.update_many(torch.randn(5, 2, dtype=DT), torch.randn(4, dtype=DT))
    with pytest.raises(DataError, match=r"rewards\.x = \(5, 3\)"):
        post.update_many(torch.randn(5, 3, dtype=DT), torch.randn(5, dtype=DT))
    with pytest.raises(DataError, match=r"rewards\.r = nan"):
        post.update_many(torch.randn(5, 2, dtype=DT), torch.full((5,), NAN, dtype=DT))
    with pytest.raises(DataError, match=r"^rewards = \{'x': \(3, 5, 2\)"):  # batch 3 vs the posterior's ()
        post.update_many(torch.randn(3, 5, 2, dtype=DT), torch.randn(3, 5, dtype=DT))
    with pytest.raises(ConfigError, match=r"^n = -1"):
        post.sample(-1)
    assert torch.isfinite(post.mean).all() and int(post.count) == 0  # refused updates change nothing
    batched = GaussianLinearPosterior(torch.zeros(3, 2, dtype=DT), COV0, torch.ones(3, dtype=DT))
    batched.update_many(torch.randn(5, 2, dtype=DT), torch.randn(5, dtype=DT))  # shared X broadcasts
    batched.update_many(torch.randn(5, 2, dtype=DT), torch.randn(3, 5, dtype=DT))  # one design, R per run
    assert batched.mean.shape == (3, 2) and batched.count.tolist() == [10, 10, 10]


# ---------------------------------------------------------------------------- 5. competence / likelihood
def test_beta_estimators_check_their_data():
    x0, x1, y = _prefs()
    for args, field in (
        ((x0, x1, 2 * y), r"y\[0, \d+\] = 2\.0: must be 0 or 1"),
        ((x0[0], x1[0], y[0]), r"x0 = \(20, 2\): expected shape \[S, N, d\]"),
        ((x0, x1, y[:, :5]), r"^y = \(1, 5\)"),
        ((x0.clone().fill_(NAN), x1, y), r"x0\[0, 0, 0\] = nan: must be finite"),
        ((x0[:, :0], x1[:, :0], y[:, :0]), r"offline\.N = 0"),
    ):
        with pytest.raises(ConfigError, match=field):
            beta_mle(*args, MU0, COV0, 1.0)
    for lam in (-1.0, 0.0, NAN):
        with pytest.raises(ConfigError, match=r"^lam = "):
            beta_mle(x0, x1, y, MU0, COV0, lam)
    with pytest.raises(ConfigError, match=r"^lam = "):
        beta_posterior_mean(x0, x1, y, MU0, COV0, -1.0, CompetencePrior.lognormal(0, 1))
    with pytest.raises(DataError, match=r"^y\["):
        log_marginal_likelihood(x0, x1, 3 * y, torch.tensor([1.0], dtype=DT), MU0, COV0, 1.0)


def test_beta_estimators_valid_calls_unchanged():
    x0, x1, y = _prefs()
    grid = torch.logspace(-2, 3, 121, dtype=DT)
    ll = log_marginal_likelihood(x0, x1, y, grid, MU0, COV0, 1.0, check=False)
    assert torch.equal(beta_mle(x0, x1, y.long(), MU0, COV0, 1.0), grid[ll.argmax(1)])
    assert torch.isfinite(beta_mle(x0, x1, y, MU0, COV0, math.inf)).all()  # lam = inf: the rater knows theta
    empty = log_marginal_likelihood(x0[:, :0], x1[:, :0], y[:, :0], grid[:3], MU0, COV0, 1.0)
    torch.testing.assert_close(empty, torch.zeros(1, 3, dtype=DT))  # no data: evidence 1


def test_beta_given_theta_and_entropy_check_their_data():
    with pytest.raises(ConfigError, match=r"offline\.N = 0"):
        beta_mle_given_theta(torch.zeros(1, 0))
    with pytest.raises(DataError, match=r"margins = nan"):
        beta_mle_given_theta(torch.tensor([[NAN, 1.0]]))
    with pytest.raises(DataError, match=r"margins = \(3,\)"):
        beta_mle_given_theta(torch.ones(3))
    beta, at_bound = beta_mle_given_theta(torch.tensor([[1.0, -0.5, 2.0]]))
    assert 0 < float(beta) < 1e3 and not bool(at_bound)
    with pytest.raises(DataError, match=r"items = 7: must be an item index in \[0, 3\)"):
        beta_entropy(torch.tensor([[0, 7]]), 3)


def test_log_likelihood_checks_labels_and_features():
    x0, x1, y = _prefs()
    vt = torch.tensor([0.5, -1.0], dtype=DT)
    with pytest.raises(DataError, match=r"y\[0, \d+\] = 2\.0: must be 0 or 1"):
        log_likelihood(x0, x1, 2 * y, vt, 1.0)
    with pytest.raises(DataError, match=r"x1\[0, 4, 1\] = nan"):
        bad = x1.clone()
        bad[0, 4, 1] = NAN
        log_likelihood(x0, bad, y, vt, 1.0)
    with pytest.raises(
        DataError, match=r"x0, x1, y = .*: expected x0, x1 \[\.\.\., d\] and y \[\.\.\.\] that broadcast"
    ):
        log_likelihood(x0, x1, y[:, :5], vt, 1.0)
    # broadcasting is still allowed: one x1 against every x0
    ll = log_likelihood(x0, x1[0, 0], y, vt, 1.0)
    torch.testing.assert_close(ll, log_likelihood(x0, x1[0, 0].expand_as(x0).clone(), y, vt, 1.0))


# ---------------------------------------------------------------------------- 6. Newton options
@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda p: laplace(p, tol=NAN), r"^tol = nan: must be a finite number"),
        (lambda p: laplace(p, max_iter="x"), r"^max_iter = 'x'"),
        (lambda p: perturbed_map(p, 4, max_iter=0), r"^max_iter = 0: must be an integer >= 1"),
        (lambda p: perturbed_map(p, 4, tol=-1.0), r"^tol = -1\.0: must be > 0"),
        (lambda p: perturbed_map(p, "four"), r"^num_samples = 'four'"),
        (lambda p: map_estimate(p, tol=0.0), r"^tol = 0\.0"),
    ],
    ids=["laplace-tol", "laplace-max_iter", "pmap-max_iter", "pmap-tol", "pmap-num_samples", "map-tol"],
)
def test_newton_options_are_checked(call, field):
    with pytest.raises(ConfigError, match=field):
        call(_problem())


def test_newton_options_valid_calls_unchanged():
    p = _problem()
    a, b = laplace(p, tol=1e-8, max_iter=100), laplace(p, max_iter=100.0)
    assert bool(a.converged) and torch.equal(a.mean, b.mean)
    assert perturbed_map(p, 4, generator=torch.Generator().manual_seed(0)).theta.shape == (4, 2)


# ---------------------------------------------------------------------------- 7. simulate
def test_simulate_accepts_a_spec_file():
    data = simulate(SPEC_FILE, num_prefs=5, seed=3)
    assert len(data["preferences"]) == 5
    assert data["truth"]["seed"] == 3
    assert simulate(str(SPEC_FILE), num_prefs=5, seed=3) == data


def test_simulate_checks_seed_and_greedy():
    for bad in ("x", -1, 1.5, 2**63):
        with pytest.raises(ConfigError, match=r"^seed = "):
            simulate(SPEC, num_prefs=2, seed=bad)
    with pytest.raises(ConfigError, match=r"greedy = 'yes': must be true or false"):
        simulate(SPEC, num_prefs=2, greedy="yes")
    with pytest.raises(ConfigError, match=r"^spec = 42: must be a mapping"):
        simulate(42)
    assert len(simulate(SPEC, num_prefs=2, seed=2**63 - 1, greedy=True)["preferences"]) == 2


# ---------------------------------------------------------------------------- 8. competence priors
def test_unknown_prior_parameter_is_refused():
    with pytest.raises(ConfigError, match=r"prior\.shape = 3: unknown key .*valid: loc, scale"):
        CompetencePrior("lognormal", {"loc": 0, "scale": 1, "shape": 3})
    with pytest.raises(ConfigError, match=r"prior\.rat = 1: unknown key; did you mean 'rate'\?"):
        CompetencePrior("gamma", {"concentration": 2.0, "rat": 1})
    beta = {"prior": "lognormal", "loc": 0, "scale": 1, "sclae": 2}
    with pytest.raises(ConfigError, match=r"raters\[0\]\.beta\.sclae = 2: unknown key; did you mean 'scale'"):
        parse_raters([{"id": "a", "beta": beta}])
    (rater,) = parse_raters([{"id": "a", "beta": {"prior": "lognormal", "loc": 0, "scale": 1}}])
    assert rater.beta == CompetencePrior.lognormal(0, 1)

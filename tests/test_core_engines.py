"""Engines through the common `fit` interface: exact closed forms, conjugate agreement, spec ≡ Pyro."""

import pyro
import pyro.distributions as dist
import pyro.poutine as poutine
import pytest
import torch

from bayescrl.inference.engines import fit
from bayescrl.inference.exact import GaussianLinearPosterior
from bayescrl.models.spec import from_spec
from bayescrl.utils import ConfigError, set_torch_threads

set_torch_threads(1)
DT = torch.float64

G = torch.Generator().manual_seed(3)
X = torch.randn(20, 2, generator=G, dtype=DT)
R = X @ torch.tensor([0.8, -0.4], dtype=DT) + 0.5 * torch.randn(20, generator=G, dtype=DT)
MU0 = torch.tensor([0.1, -0.2], dtype=DT)
COV0 = torch.tensor([[1.0, 0.3], [0.3, 0.8]], dtype=DT)


def exact_post():
    return GaussianLinearPosterior(MU0, COV0, 0.5).update_many(X, R)


def linear_model(x, r):
    """Hand-written conjugate model (θ only), vectorisable with max_plate_nesting = 1."""
    theta = pyro.sample("theta", dist.MultivariateNormal(MU0, COV0))
    with pyro.plate("rewards", x.shape[0], dim=-1):
        pyro.sample("reward", dist.Normal((x * theta).sum(-1), 0.5), obs=r)


def gaussian_spec(with_prefs=False):
    spec = {
        "dim": 2,
        "prior": {"mean": MU0.tolist(), "cov": COV0.tolist()},
        "noise_sd": 0.5,
        "raters": [{"id": "a", "beta": 2.0, "lam": 3.0}],
        "rewards": [{"x": X[i].tolist(), "r": float(R[i])} for i in range(20)],
    }
    if with_prefs:
        spec["preferences"] = [{"x0": [1.0, 0.0], "x1": [0.0, 1.0], "y": 1, "rater": "a"}]
    return spec


def test_exact_engine_equals_closed_form():
    post = fit(gaussian_spec(), engine="exact")
    g = post.sampler.gaussian
    prec = torch.linalg.inv(COV0) + X.T @ X / 0.25
    cov = torch.linalg.inv(prec)
    mean = cov @ (torch.linalg.solve(COV0, MU0) + X.T @ R / 0.25)
    torch.testing.assert_close(g.mean, mean, atol=1e-6, rtol=0)
    torch.testing.assert_close(g.cov, cov, atol=1e-6, rtol=0)
    s = post.sample(20000, seed=1)
    assert s["theta"].shape == (20000, 2) and s["vartheta"].shape == (20000, 1, 2)
    torch.testing.assert_close(s["theta"].mean(0), mean, atol=0.01, rtol=0)
    # laplace is exact on a quadratic loss
    lap = fit(gaussian_spec(), engine="laplace").mean_cov("theta", 40000)
    torch.testing.assert_close(lap[1], cov, atol=3e-3, rtol=0)


def test_exact_refuses_non_conjugate_naming_the_site():
    with pytest.raises(ConfigError, match="site 'pref'"):
        fit(gaussian_spec(with_prefs=True), engine="exact")
    spec = gaussian_spec()
    spec["raters"][0]["beta"] = {"prior": "lognormal", "loc": 0.0, "scale": 1.0}
    with pytest.raises(ConfigError, match="site 'beta_a'"):
        fit(spec, engine="exact")

    def bern_model():
        th = pyro.sample("theta", dist.Normal(0.0, 1.0))
        pyro.sample("click", dist.Bernoulli(logits=th), obs=torch.tensor(1.0))

    with pytest.raises(ConfigError, match="site 'click'"):
        fit(bern_model, engine="exact")


def test_spec_and_handwritten_model_same_log_density():
    spec = gaussian_spec(with_prefs=True)
    spec["raters"].append({"id": "b", "beta": 0.5, "lam": 7.0})
    spec["preferences"].append({"x0": [0.3, -1.0], "x1": [0.0, 2.0], "y": 0, "rater": "b"})
    m = from_spec(spec)
    theta = torch.tensor([0.3, -0.7], dtype=DT)
    vt = torch.tensor([[0.1, 0.2], [-0.4, 0.5]], dtype=DT)

    def hand():
        th = pyro.sample("theta", dist.MultivariateNormal(MU0, COV0))
        with pyro.plate("raters", 2):
            v = pyro.sample(
                "vartheta", dist.Normal(th, torch.tensor([[1 / 3.0], [1 / 7.0]], dtype=DT)).to_event(1)
            )
        x0 = torch.tensor([[1.0, 0.0], [0.3, -1.0]], dtype=DT)
        x1 = torch.tensor([[0.0, 1.0], [0.0, 2.0]], dtype=DT)
        beta = torch.tensor([2.0, 0.5], dtype=DT)
        logits = beta * ((x1 - x0) * v).sum(-1)
        with pyro.plate("prefs", 2):
            pyro.sample("pref", dist.Bernoulli(logits=logits), obs=torch.tensor([1.0, 0.0], dtype=DT))
        with pyro.plate("rewards", 20):
            pyro.sample("reward", dist.Normal((X * th).sum(-1), 0.5), obs=R)

    cond = {"theta": theta, "vartheta": vt}
    lp_spec = poutine.trace(poutine.condition(m.model, cond)).get_trace().log_prob_sum()
    lp_hand = poutine.trace(poutine.condition(hand, cond)).get_trace().log_prob_sum()
    torch.testing.assert_close(lp_spec, lp_hand, atol=1e-10, rtol=0)
    # and the analytic value of the preference term of rater b: log σ(−0.5·⟨(−0.3, 3), ϑ_b⟩)
    z = 0.5 * ((-0.3) * -0.4 + 3.0 * 0.5)
    tr = poutine.trace(poutine.condition(m.model, cond)).get_trace()
    lp_pref = tr.nodes["pref"]["fn"].log_prob(tr.nodes["pref"]["value"])
    torch.testing.assert_close(lp_pref[1], torch.nn.functional.logsigmoid(torch.tensor(-z, dtype=DT)))


def test_generic_bootstrap_matches_fast_path_and_exact():
    m = from_spec(gaussian_spec(with_prefs=True))
    plain = {"p_offline": 1.0, "online_reward_noise": False, "anchor_prior": False}
    fast = fit(m, engine="bootstrap", **plain).sample(1)["theta"][0]
    gen = fit(m.model, engine="bootstrap", p_obs=1.0, online_reward_noise=False, anchor_prior=False)
    torch.testing.assert_close(gen.sample(2)["theta"][0], fast, atol=1e-5, rtol=0)
    # generic perturbed MAP on the conjugate hand-written model = exact sampling
    post = fit(linear_model, {"x": X, "r": R}, engine="bootstrap")
    s = post.sample(3000, seed=2)["theta"]
    assert post.diagnostics["converged_fraction"] == 1.0
    ex = exact_post()
    se = ex.cov.diagonal().sqrt() / 3000**0.5
    assert ((s.mean(0) - ex.mean).abs() < 4 * se).all()
    torch.testing.assert_close(torch.cov(s.T), ex.cov, atol=0.15 * float(ex.cov.diagonal().max()), rtol=0)


def test_svi_and_nuts_agree_with_exact():
    ex = exact_post()
    sd = ex.cov.diagonal().sqrt()
    svi = fit(linear_model, {"x": X, "r": R}, engine="svi", guide="mvn", max_steps=800, min_steps=200, seed=0)
    m, c = svi.mean_cov("theta", 4000)
    assert ((m - ex.mean).abs() < 0.25 * sd).all(), (m, ex.mean)
    assert ((c.diagonal().sqrt() / sd - 1).abs() < 0.25).all()
    nuts = fit(
        linear_model, {"x": X, "r": R}, engine="nuts", num_samples=100, warmup=80, num_chains=2, seed=0
    )
    m, c = nuts.mean_cov("theta", 200)
    assert ((m - ex.mean).abs() < 0.4 * sd).all(), (m, ex.mean)
    assert ((c.diagonal().sqrt() / sd - 1).abs() < 0.35).all()
    assert nuts.diagnostics["rhat_max"] < 1.1
    assert nuts.chains["theta"].shape == (2, 100, 2)
    assert nuts.diagnostics["warmup_seconds"] > 0 and nuts.diagnostics["sampling_seconds"] > 0  # timed apart


def test_arviz_round_trip(tmp_path):
    import arviz as az

    m = from_spec(gaussian_spec(with_prefs=True))
    post = fit(m, engine="laplace")
    idata = post.to_arviz(52, seed=0, log_likelihood="sites")
    assert idata.posterior["theta"].dims == ("chain", "draw", "theta_dim")
    assert idata.posterior["theta"].shape == (4, 13, 2)  # independent draws split into 4 chains
    assert idata.log_likelihood["reward"].shape == (4, 13, 20)
    assert idata.log_likelihood["pref"].shape == (4, 13, 1)
    # pointwise log-likelihood equals the closed form at one draw
    th = torch.tensor(idata.posterior["theta"].values[2, 7])
    want = torch.distributions.Normal(X @ th, 0.5).log_prob(R)
    torch.testing.assert_close(torch.tensor(idata.log_likelihood["reward"].values[2, 7]), want)
    path = tmp_path / "post.nc"
    idata.to_netcdf(str(path), engine="h5netcdf")
    back = az.from_netcdf(str(path))
    assert (back.posterior["theta"].values == idata.posterior["theta"].values).all()
    assert (back.observed_data["reward"].values == R.numpy()).all()

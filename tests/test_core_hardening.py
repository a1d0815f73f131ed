"""Silent wrong answers in inference: each test fails when its fix is reverted."""

import glob
import warnings

import pyro
import pyro.distributions as dist
import pytest
import torch
from test_core_engines import COV0, MU0, R, X, gaussian_spec, linear_model

from bayescrl.inference.engines import fit
from bayescrl.inference.nuts import nuts_warnings
from bayescrl.models.linear import BTLinearProblem
from bayescrl.models.spec import SpecModel, from_spec
from bayescrl.utils import ConfigError, set_torch_threads

set_torch_threads(1)
DT = torch.float64


def stiff_model(n=100, lam=1000.0):
    """One rater, beta = 1, lam = 1000, d = 2, Bradley-Terry data with theta = (0.8, -0.4)."""
    g = torch.Generator().manual_seed(0)
    x0, x1 = torch.randn(n, 2, generator=g, dtype=DT), torch.randn(n, 2, generator=g, dtype=DT)
    y = torch.bernoulli(torch.sigmoid((x1 - x0) @ torch.tensor([0.8, -0.4], dtype=DT)), generator=g)
    prob = BTLinearProblem.from_data(torch.zeros(2), torch.eye(2), [1.0], [lam], x0=x0, x1=x1, y=y)
    return SpecModel(problem=prob, rater_ids=("r0",))


def test_svi_noncentred_matches_laplace_and_centred_collapse_is_flagged():
    m = stiff_model()
    lm, lc = fit(m, engine="laplace").mean_cov("theta", 4000)
    lsd = lc.diagonal().sqrt()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a converged fit raises no warning
        svi = fit(m, engine="svi", seed=0, max_steps=1500)
    sm, sc = svi.mean_cov("theta", 4000)
    assert ((sm - lm).abs() < 0.5 * lsd).all(), (sm, lm)
    assert ((sc.diagonal().sqrt() / lsd - 1).abs() < 0.35).all(), (sc.diagonal().sqrt(), lsd)
    assert svi.diagnostics["converged"] and svi.diagnostics["reparam"]
    # the centred parametrisation stalls on the lambda^2 ridge: the result must say so
    with pytest.warns(RuntimeWarning, match="svi did not converge"):
        bad = fit(m, engine="svi", seed=0, max_steps=400, reparam=False)
    assert bad.diagnostics["converged"] is False
    assert min(bad.diagnostics["laplace_sd_ratio"]) < 1 / 3


def test_nuts_warns_on_rhat_ess_and_divergences():
    msgs = nuts_warnings({"rhat_max": 2.43, "ess_bulk_min": 5.0, "num_chains": 2, "divergences": 3})
    assert len(msgs) == 3 and "R-hat 2.430" in msgs[0]
    assert nuts_warnings({"rhat_max": 1.005, "ess_bulk_min": 900.0, "num_chains": 2, "divergences": 0}) == []
    with pytest.warns(RuntimeWarning, match="nuts did not converge: .*ESS"):
        post = fit(linear_model, {"x": X, "r": R}, engine="nuts", num_samples=15, warmup=10, num_chains=2)
    assert post.diagnostics["converged"] is False


EXAMPLES = sorted(glob.glob("examples/core/*.yaml") + glob.glob("examples/core/*.json"))
FAST = {
    "svi": {"max_steps": 60, "min_steps": 0, "window": 20, "num_particles": 1},
    "nuts": {"num_samples": 5, "warmup": 5, "num_chains": 1},
    "laplace": {"max_steps": 200},
}


@pytest.mark.parametrize("path", EXAMPLES)
@pytest.mark.parametrize("engine", ["exact", "laplace", "bootstrap", "svi", "nuts"])
def test_every_shipped_example_with_every_engine(path, engine):
    assert len(EXAMPLES) >= 5
    m = from_spec(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # short runs: only the values are checked
            post = fit(m, engine=engine, seed=0, **FAST.get(engine, {}))
    except ConfigError as e:  # only exact may refuse, and with the reason
        assert engine == "exact" and "not conjugate" in str(e) or "no conjugate form" in str(e), e
        return
    s = post.sample(50, seed=0)
    assert s["theta"].shape == (50, m.dim) and torch.isfinite(s["theta"]).all()
    for k, v in s.items():
        assert torch.isfinite(v).all(), k
        if k.startswith(("beta_", "lam_")):
            assert (v > 0).all(), k  # competences stay in their support (LogNormal beta went negative)


def flat_model(x, r):
    """Does not broadcast: ``theta.reshape(-1)[:2]`` uses the first particle's theta for all."""
    theta = pyro.sample("theta", dist.MultivariateNormal(MU0, COV0))
    with pyro.plate("rewards", x.shape[0], dim=-1):
        pyro.sample("reward", dist.Normal(x @ theta.reshape(-1)[:2], 0.5), obs=r)


@pytest.mark.parametrize("engine", ["bootstrap", "svi", "laplace"])
def test_non_broadcasting_user_model_is_refused_with_the_contract(engine):
    budget = {"max_iter": 5} if engine == "bootstrap" else {"max_steps": 5}
    with pytest.raises(ConfigError, match=r"particles are mixed.*broadcast over extra leading dims"):
        fit(flat_model, {"x": X, "r": R}, engine=engine, **budget)
    # the same model written to broadcast is accepted
    post = fit(linear_model, {"x": X, "r": R}, engine=engine, **budget)
    assert post.sample(4)["theta"].shape == (4, 2)


def test_exact_explains_which_structures_it_recognises():
    with pytest.raises(ConfigError, match="exact recognises the conjugate structures of spec models"):
        fit(linear_model, {"x": X, "r": R}, engine="exact")


def test_arviz_joint_log_likelihood_makes_loo_work():
    from bayescrl.inference.posterior import import_arviz

    az = import_arviz()
    post = fit(from_spec(gaussian_spec(with_prefs=True)), engine="laplace")
    idata = post.to_arviz(200, seed=0)
    assert list(idata.log_likelihood.data_vars) == ["joint"]
    assert idata.log_likelihood["joint"].shape == (4, 50, 21)  # 200 draws in 4 chains
    both = post.to_arviz(200, seed=0, log_likelihood="both")
    cat = torch.cat(
        [torch.tensor(both.log_likelihood[k].values) for k in ("pref", "reward")], -1
    )  # site order: pref, reward
    torch.testing.assert_close(torch.tensor(idata.log_likelihood["joint"].values), cat)
    assert list(idata.log_likelihood["observation"].values[:2]) == ["pref[0]", "reward[0]"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        loo = az.loo(idata)  # no var_name needed
    assert loo["elpd_loo"] < 0 and abs(loo["elpd_loo"] - az.loo(both, var_name="joint")["elpd_loo"]) < 1e-9

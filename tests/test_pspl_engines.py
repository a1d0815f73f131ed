"""PSPL's θ posterior by the core's svi / nuts engines (``agent_params.pspl.engine``)."""

from pathlib import Path

import pytest
import torch

import bayescrl.pbrl.agents as agents_mod
from bayescrl.pbrl.agents import PSPL, Context
from bayescrl.pbrl.data import offline_dataset, sample_pairs
from bayescrl.pbrl.envs import riverswim
from bayescrl.pbrl.experiment import validate_config
from bayescrl.pbrl.posterior import TrajectoryPreferenceModel, laplace_theta
from bayescrl.raters import BeliefRater
from bayescrl.utils import load_yaml
from bayescrl.utils.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def _setup(N=200, beta=3.0, lam=10.0):
    mdp = riverswim(S=4, H=8)
    g = torch.Generator().manual_seed(0)
    rater = BeliefRater.sample(mdp.theta, 1, beta, lam, generator=g)
    return mdp, rater, offline_dataset(mdp, rater, N, generator=g), g


def _episodes(agent, mdp, rater, g, K):
    for _ in range(K):
        pi0, pi1 = agent.policies()
        agent.observe(sample_pairs(mdp, pi0.unsqueeze(1), pi1.unsqueeze(1), rater, generator=g))
        pi = agent.output_policy()
        assert pi.shape == (1, mdp.H, mdp.S)


def test_pspl_svi_runs_and_matches_laplace_mean():
    """One svi fit on D0 (RiverSwim, d = 8); its θ mean agrees with the Laplace mean on the same data.

    θ is identified only up to a common shift (Σ_{s,a} φ(τ) = H for every trajectory), a direction the
    likelihood never sees and SVI converges slowly along, so the means are compared after centring
    (policies are invariant to the shift). The MAP is far from the prior mean 0 (max |θ| ≈ 1), and the
    tolerance 0.15 is well below that, so a wrong sign / scale / data layout fails."""
    mdp, rater, D, g = _setup()
    opts = {"max_steps": 150, "min_steps": 150, "lr": 0.1, "guide": "mvn"}
    params = {"engine": "svi", "refit_every": 5, "samples": 1000, "options": opts}
    agent = PSPL(Context(mdp, D, 3, g, beta=3.0, lam=10.0, params=params))
    _episodes(agent, mdp, rater, g, 3)
    assert agent.fits == 1  # fitted once on D0, reused for episodes 2-3 (refit_every = 5)
    mean, cov = agent._gauss
    ref = TrajectoryPreferenceModel(D, mdp.S, mdp.A, 0, beta=3.0, lam=10.0)
    res, _ = ref.solve(1, perturbed=False, return_hessian=True)
    lap_mean, _ = laplace_theta(res, ref.d)
    assert float(lap_mean.abs().max()) > 0.5
    diff = mean - lap_mean
    diff = diff - diff.mean(-1, keepdim=True)
    assert float(diff.abs().max()) < 0.15, (mean, lap_mean)
    assert torch.isfinite(cov).all() and bool((torch.linalg.eigvalsh(cov) > 0).all())


def test_pspl_refit_schedule(monkeypatch):
    """svi/nuts refit after every `refit_every` observed episodes (fits at episodes 1, 3, 5 for 2)."""
    calls = []

    def fake_engine_theta(model, engine, **kw):
        calls.append((engine, model.n))
        res, _ = model.solve(1, perturbed=False, return_hessian=True)
        return laplace_theta(res, model.d)

    monkeypatch.setattr(agents_mod, "engine_theta", fake_engine_theta)
    mdp, rater, D, g = _setup(N=20)
    agent = PSPL(Context(mdp, D, 5, g, beta=3.0, lam=10.0, params={"engine": "nuts", "refit_every": 2}))
    _episodes(agent, mdp, rater, g, 5)
    assert calls == [("nuts", 20), ("nuts", 22), ("nuts", 24)]


@pytest.mark.parametrize(
    "params, field",
    [
        ({"engine": "hmc"}, "agents.pspl.engine"),
        ({"engine": "svi", "refit_every": 0}, "agent_params.pspl.refit_every"),
        ({"engine": "svi", "samples": 1}, "agent_params.pspl.samples"),
        ({"engine": "svi", "options": [1]}, "agent_params.pspl.options"),
    ],
)
def test_pspl_engine_params_rejected(params, field):
    mdp, _, D, g = _setup(N=5)
    with pytest.raises(ConfigError) as e:
        PSPL(Context(mdp, D, 2, g, params=params))
    assert e.value.field == field


def test_svi_example_config_is_valid():
    cfg = validate_config(load_yaml(ROOT / "examples" / "pspl" / "riverswim_svi.yaml"))
    assert cfg["agent_params"]["pspl"]["engine"] == "svi"
    assert cfg["agent_params"]["pspl"]["refit_every"] >= 1

"""Agents, experiment runner, CLI, config validation, reproducibility, bandit BAI."""

import json

import pytest
import torch

from bayescrl.cli import main
from bayescrl.pbrl.agents import Context, LPbRL, PSPLBootstrap
from bayescrl.pbrl.bandit import run_bandit_bai
from bayescrl.pbrl.data import offline_dataset, sample_pairs
from bayescrl.pbrl.envs import riverswim
from bayescrl.pbrl.experiment import run_experiment, validate_config
from bayescrl.pbrl.mdp import simple_regret
from bayescrl.raters import BeliefRater
from bayescrl.utils.errors import ConfigError

SMALL = {
    "env": {"name": "riverswim", "S": 4, "H": 8},
    "offline": {"N": 40},
    "K": 4,
    "agent_params": {"dpo": {"steps": 20}, "ipo": {"steps": 20}},
}


def test_all_agents_run_and_report_required_keys():
    res = run_experiment(SMALL, seeds=2, progress=False)
    assert set(res["agents"]) == {"pspl-bootstrap", "pspl", "dps", "lpbrl", "dpo", "ipo", "uniform"}
    for name, r in res["agents"].items():
        for key in (
            "final_simple_regret_mean",
            "final_simple_regret_std",
            "simple_regret_curve_mean",
            "cumulative_regret_mean",
            "wall_time_s",
        ):
            assert key in r, (name, key)
        curve = r["simple_regret_curve_mean"]
        assert len(curve) == 5 and min(curve) >= -1e-9 and max(curve) <= res["optimal_value"] + 1e-9
        if name in ("dpo", "ipo"):
            assert r["cumulative_regret_mean"] is None
        else:
            cum = r["cumulative_regret_mean"]
            assert len(cum) == 4 and all(b >= a - 1e-9 for a, b in zip(cum, cum[1:], strict=False))
        assert r.get("not_converged", 0) == 0


def test_reproducible_and_seed_dependent():
    cfg = {**SMALL, "agents": ["pspl-bootstrap", "dps"], "K": 3}
    a = run_experiment(cfg, seeds=2, progress=False)
    b = run_experiment(cfg, seeds=2, progress=False)
    c = run_experiment({**cfg, "seed": 1}, seeds=2, progress=False)
    for name in cfg["agents"]:
        assert a["agents"][name]["simple_regret_curve_mean"] == b["agents"][name]["simple_regret_curve_mean"]
        assert a["agents"][name]["cumulative_regret_mean"] == b["agents"][name]["cumulative_regret_mean"]
    assert any(
        a["agents"][n]["cumulative_regret_mean"] != c["agents"][n]["cumulative_regret_mean"]
        for n in cfg["agents"]
    )


def test_expert_data_gives_pspl_zero_simple_regret():
    """With a near-perfect rater and plenty of D0, the MAP/posterior samples find π* or a policy within
    0.5% of V* = 1.105 (a seed whose D0 rarely reaches the river's right end can keep a 0.004 gap;
    without D0 the regret is about 1.06)."""
    cfg = {
        "env": {"name": "riverswim", "S": 4, "H": 8},
        "offline": {"N": 400, "beta": 50.0, "lam": 1000.0},
        "K": 2,
        "agents": ["pspl", "pspl-bootstrap"],
    }
    res = run_experiment(cfg, seeds=2, progress=False)
    assert res["optimal_value"] == pytest.approx(1.1046, abs=1e-4)
    assert min(res["agents"]["pspl"]["final_simple_regret_per_seed"]) == pytest.approx(0.0, abs=1e-9)
    assert max(res["agents"]["pspl"]["final_simple_regret_per_seed"]) < 0.005
    assert res["agents"]["pspl-bootstrap"]["simple_regret_curve_mean"][0] < 0.05


def test_bootstrap_agent_uses_core_perturbations_and_caches():
    mdp = riverswim(S=4, H=6)
    g = torch.Generator().manual_seed(0)
    rater = BeliefRater.sample(mdp.theta, 2, 10.0, 50.0, generator=g)
    D = offline_dataset(mdp, rater, 20, generator=g)
    agent = PSPLBootstrap(Context(mdp, D, 3, g, beta=10.0, lam=50.0))
    pi0, pi1 = agent.policies()
    assert torch.equal(agent.output_policy(), pi0)  # π_{K+1} ≡ π^{(0)}_{K+1}, no re-solve
    assert len(agent.solver_iters) == 1
    agent.observe(sample_pairs(mdp, pi0.unsqueeze(1), pi1.unsqueeze(1), rater, generator=g))
    assert agent.model.problem.pref_online[:, 20].all() and agent.model.n == 21
    agent.policies()
    assert len(agent.solver_iters) == 2


def test_lpbrl_ignores_offline_data_and_is_optimistic():
    mdp = riverswim(S=4, H=6)
    g = torch.Generator().manual_seed(0)
    D = offline_dataset(mdp, BeliefRater.sample(mdp.theta, 1, 10.0, 50.0, generator=g), 30, generator=g)
    agent = LPbRL(Context(mdp, D, 3, g))
    assert agent.model.n == 0
    b = agent._bonus()
    assert torch.allclose(b, torch.full_like(b, 2.0))  # width 1 (V = I) + transition bonus 1 before data
    assert simple_regret(mdp, agent.output_policy()).shape == (1,)


@pytest.mark.parametrize(
    "patch, field",
    [
        ({"offline": {"N": -1}}, "offline.N"),
        ({"offline": {"beta": -2.0}}, "offline.beta"),
        ({"offline": {"lam": 0}}, "offline.lam"),
        ({"offline": {"expert": "oracle"}}, "offline.expert"),
        ({"offline": {"size": 3}}, "offline.size"),
        ({"agents": ["pspl", "ppo"]}, "agents"),
        ({"K": 2.5}, "K"),
        ({"prior": {"sigma0": 0.0}}, "prior.sigma0"),
        ({"model": {"beta_estimate": "bayes"}}, "model.beta_estimate"),
        ({"env": {"name": "cartpole"}}, "env.name"),
        ({"agent_params": {"pspl-bootstrap": {"p_online": 1.5}}}, "agent_params.pspl-bootstrap.p_online"),
        ({"sweep": {"key": "offline.lam", "values": [1.0, -1.0]}}, "sweep.values (key offline.lam)"),
        ({"horizon": 3}, "horizon"),
    ],
)
def test_bad_configs_rejected_with_field(patch, field):
    with pytest.raises(ConfigError) as e:
        validate_config({**SMALL, **patch})
    assert e.value.field == field
    if field == "agents":
        assert e.value.index == 1 and e.value.value == "ppo"
    if field.startswith("sweep"):
        assert e.value.index == 1


def test_cli_writes_results_and_plots(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({**SMALL, "agents": ["pspl-bootstrap", "dps"]}))
    main(["pspl", str(cfg), "--seeds", "2", "--out", str(tmp_path / "o"), "--no-progress", "--set", "K=3"])
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["config"]["K"] == 3 and res["seeds"] == 2
    assert (tmp_path / "o" / "simple_regret.png").stat().st_size > 1000
    assert (tmp_path / "o" / "cumulative_regret.png").exists()


def test_cli_bad_config_exits_2(tmp_path, capsys):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("env: {name: riverswim}\noffline: {N: -5}\n")
    with pytest.raises(SystemExit) as e:
        main(["pspl", str(cfg), "--out", str(tmp_path / "o")])
    assert e.value.code == 2
    assert "error: offline.N = -5" in capsys.readouterr().err


def test_sweep_runs_each_value(tmp_path):
    cfg = {**SMALL, "agents": ["pspl-bootstrap"], "K": 2, "sweep": {"key": "offline.N", "values": [0, 30]}}
    res = run_experiment(cfg, seeds=1, out=tmp_path, progress=False)
    assert [r["value"] for r in res["sweep"]["runs"]] == [0, 30]
    assert (tmp_path / "sweep_pspl-bootstrap.png").exists()


def test_bandit_bai_offline_data_helps_and_finds_best_arm():
    arms = torch.randn(8, 3, generator=torch.Generator().manual_seed(0))
    cold = run_bandit_bai(arms, seeds=6, N=0, K=8, beta=10.0, lam=20.0)["simple_regret"]
    warm = run_bandit_bai(arms, seeds=6, N=100, K=4, beta=10.0, lam=20.0)["simple_regret"]
    assert warm[:, 0].mean() < cold[:, 0].mean()  # informed prior from D0
    assert warm[:, -1].mean() <= warm[:, 0].mean() + 1e-12
    assert cold[:, -1].mean() < 0.5 * cold[:, 0].mean()  # online top-two exploration learns
    assert (warm >= -1e-12).all()


def test_every_example_config_validates():
    from pathlib import Path

    from bayescrl.utils import load_yaml

    files = sorted((Path(__file__).resolve().parents[1] / "examples" / "pspl").glob("*.yaml"))
    assert len(files) >= 12
    for f in files:
        raw = load_yaml(f)
        if raw.get("task") == "diffusion":  # dispatched by the CLI to bayescrl.pbrl.diffusion
            from bayescrl.pbrl.diffusion.experiment import validate_config as validate_diffusion

            assert validate_diffusion(raw)["task"] == "diffusion", f
            continue
        cfg = validate_config(raw)
        assert cfg["env"]["name"] in ("riverswim", "mountaincar"), f


def test_nan_results_are_refused_before_results_json_is_written(tmp_path, monkeypatch):
    import bayescrl.pbrl.experiment as pexp
    from bayescrl.utils.errors import DataError

    monkeypatch.setattr(
        pexp, "run_agents", lambda *a, **k: {"agents": {"pspl": {"final_simple_regret_mean": float("nan")}}}
    )
    with pytest.raises(DataError, match="NaN"):
        run_experiment(SMALL, seeds=1, out=tmp_path / "o", progress=False)
    assert not (tmp_path / "o" / "results.json").exists()


def test_an_agents_result_does_not_depend_on_which_agents_share_the_run():
    """Each agent's random stream is keyed by (seed, agent name), not by its place in ``agents``."""
    cfg = {**SMALL, "K": 3}
    both = run_experiment({**cfg, "agents": ["dps", "dpo", "pspl-bootstrap"]}, seeds=2, progress=False)
    for name in ("pspl-bootstrap", "dps", "dpo"):
        alone = run_experiment({**cfg, "agents": [name]}, seeds=2, progress=False)
        for key in ("simple_regret_curve_mean", "cumulative_regret_mean", "final_simple_regret_per_seed"):
            assert both["agents"][name][key] == alone["agents"][name][key], (name, key)


def test_a_seeds_result_does_not_depend_on_how_many_seeds_share_the_batch():
    """Seed b of a ``--seeds 2`` run with seed 5 is the single-seed run with seed 5 + b, bit for bit, for
    every kind of random draw (one stream per seed: rater, D0, top-two posterior samples incl. Dirichlet,
    perturbed-MAP weights, stochastic-policy pairs, DPO initialisation, dropout and mini-batches)."""
    agents = ["pspl-bootstrap", "pspl", "dps", "uniform", "dpo"]
    cfg = {**SMALL, "K": 3, "seed": 5, "agents": agents, "agent_params": {"dpo": {"steps": 5}}}
    together = run_experiment(cfg, seeds=2, progress=False)
    alone = [run_experiment({**cfg, "seed": 5 + b}, seeds=1, progress=False) for b in range(2)]
    for name, r in together["agents"].items():
        finals = [a["agents"][name]["final_simple_regret_per_seed"][0] for a in alone]
        assert r["final_simple_regret_per_seed"] == finals, name
        for key in ("simple_regret_curve_mean", "cumulative_regret_mean"):
            if r[key] is not None:
                mean = torch.tensor([a["agents"][name][key] for a in alone], dtype=torch.float64).mean(0)
                torch.testing.assert_close(
                    torch.tensor(r[key], dtype=torch.float64), mean, rtol=1e-12, atol=0
                )
    # the two seeds differ (the check is not vacuous)
    assert alone[0]["agents"]["pspl-bootstrap"] != alone[1]["agents"]["pspl-bootstrap"]


def test_bandit_bai_seed_does_not_depend_on_how_many_seeds_share_the_batch():
    """Seed b of a 3-seed bandit run with seed 2 is the single-seed run with seed 2 + b, bit for bit."""
    arms = torch.eye(4, dtype=torch.float64)[:, :3] + 0.1
    together = run_bandit_bai(arms, seeds=3, N=20, K=4, seed=2)
    for b in range(3):
        alone = run_bandit_bai(arms, seeds=1, N=20, K=4, seed=2 + b)
        assert torch.equal(together["theta"][b], alone["theta"][0])
        assert torch.equal(together["simple_regret"][b], alone["simple_regret"][0])

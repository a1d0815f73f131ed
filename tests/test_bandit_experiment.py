"""Experiment runner, CLI and config validation of the warmPref-PS family."""

import json

import pytest
import torch
from click.testing import CliRunner

from bayescrl.bandits import run_experiment
from bayescrl.bandits.config import resolve_config
from bayescrl.bandits.experiment import make_world, run_sweep
from bayescrl.commands.bandit import bandit
from bayescrl.utils.errors import ConfigError

TINY = {
    "bandit": {"K": 10, "d": 3, "T": 40},
    "offline": {"N": 30, "beta": 20.0, "lam": 100.0},
    "agents": ["warmpref-ps-bootstrap", "warmpref-ps", "ps"],
}


def test_same_seed_same_results_and_other_seed_differs():
    cfg = {**TINY, "bandit": {"K": 10, "d": 3, "T": 15}, "agents": ["warmpref-ps-bootstrap", "ps"]}
    a = run_experiment(cfg, seeds=2)
    b = run_experiment(cfg, seeds=2)
    c = run_experiment({**cfg, "seed": 1}, seeds=2)
    for k in a["agents"]:
        assert a["agents"][k]["regret_curve_mean"] == b["agents"][k]["regret_curve_mean"]
    assert a["agents"]["ps"]["regret_curve_mean"] != c["agents"]["ps"]["regret_curve_mean"]


def test_action_sampling_distribution_mu():
    # mu puts all mass on arms 0 and 1: every offline pair uses only those arms
    cfg = resolve_config({"bandit": {"K": 5, "d": 2, "T": 3}, "offline": {"N": 50, "mu": [1, 1, 0, 0, 0]}})
    _, data = make_world(cfg, 2)
    assert set(data.i0.unique().tolist()) | set(data.i1.unique().tolist()) == {0, 1}


def test_adding_seeds_keeps_the_first_environments():
    cfg = resolve_config(TINY)
    e2, d2 = make_world(cfg, 2)
    e3, d3 = make_world(cfg, 3)
    assert torch.equal(e2.theta, e3.theta[:2]) and torch.equal(d2.y, d3.y[:2])


def test_well_specified_warm_agents_beat_ps_over_seeds():
    res = run_experiment(TINY, seeds=8)
    reg = {k: v["final_regret_mean"] for k, v in res["agents"].items()}
    assert reg["warmpref-ps"] < 0.75 * reg["ps"], reg
    assert reg["warmpref-ps-bootstrap"] < 0.75 * reg["ps"], reg
    curve = res["agents"]["ps"]["regret_curve_mean"]
    assert len(curve) == 40 and all(b >= a - 1e-12 for a, b in zip(curve, curve[1:], strict=False))


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ({"agents": ["ps", "thompson"]}, r"agents\[1\] = 'thompson': unknown agent id"),
        ({"offline": {"N": -3}}, r"offline.N = -3: must be an integer >= 0"),
        ({"offline": {"beta": -1.0}}, r"offline.beta = -1.0: must be >= 0"),
        (
            {"bandit": {"d": 3, "prior_mean": [0.0, 0.0]}},
            r"bandit.prior_mean = \[0.0, 0.0\]: length 2 does not",
        ),
        ({"offline": {"raters": [{"N": 2, "lam": 0.0}]}}, r"offline.raters\[0\].lam = 0.0: must be > 0"),
        ({"assumed": {"beta": "guess"}}, r"assumed.beta\[0\] = 'guess'"),
        ({"bandit": {"Kx": 3}}, r"bandit.Kx = 3: unknown key"),
        ({"options": {"p_offline": 1.5}}, r"options.p_offline = 1.5"),
        ({"bandit": {"K": 3}, "offline": {"mu": [1, 2]}}, r"offline.mu = \[1, 2\]: must be null"),
    ],
)
def test_bad_configs_rejected_with_field_and_value(override, match):
    with pytest.raises(ConfigError, match=match):
        run_experiment(override, seeds=1)


def test_cli_writes_results_and_plot(tmp_path):
    out = tmp_path / "run"
    cfg = tmp_path / "c.yaml"
    cfg.write_text("bandit: {K: 6, d: 2, T: 15}\noffline: {N: 5}\nagents: [ps, lints, naive-ps]\n")
    r = CliRunner().invoke(
        bandit, [str(cfg), "--set", "bandit.T=12", "--seeds", "2", "--out", str(out), "--no-progress"]
    )
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    s = res["agents"]["lints"]
    assert set(s) >= {
        "final_regret_mean",
        "final_regret_std",
        "regret_curve_mean",
        "regret_curve_std",
        "wall_time_s",
    }
    assert len(s["regret_curve_mean"]) == 12 and (out / "regret.png").stat().st_size > 1000


def test_sweep_runs_every_cell(tmp_path):
    cfg = {
        "bandit": {"K": 5, "d": 2, "T": 5},
        "agents": ["ps"],
        "sweep": {"bandit.d": [2, 3], "offline.N": [0, 4]},
    }
    res = run_sweep(cfg, seeds=1, out=tmp_path)
    assert list(res["cells"]) == ["d=2,N=0", "d=2,N=4", "d=3,N=0", "d=3,N=4"]
    assert (tmp_path / "summary.png").exists() and (tmp_path / "summary.json").exists()


def test_a_seeds_result_does_not_depend_on_how_many_seeds_share_the_batch():
    """Seed b of a 2-seed run with seed 3 is the single-seed run with seed 3 + b, bit for bit (one random
    stream per agent and seed: perturbed MAPs, posterior samples, warmTSOF's asks and re-draws, the
    hybrid agent's mini-batches and exploration)."""
    agents = [
        "warmpref-ps-bootstrap",
        "ps",
        {"id": "warmtsof", "eps0": 0.6},
        {"id": "hybrid-dpo", "dpo_steps": 30},
    ]
    cfg = {**TINY, "bandit": {"K": 6, "d": 3, "T": 12}, "agents": agents, "seed": 3}
    together = run_experiment(cfg, seeds=2)
    alone = [run_experiment({**cfg, "seed": 3 + b}, seeds=1) for b in range(2)]
    for name, r in together["agents"].items():
        assert r["final_regret_per_seed"] == [a["agents"][name]["final_regret_per_seed"][0] for a in alone], (
            name
        )
    asks = [a["agents"]["warmtsof"]["queries_mean"] for a in alone]
    assert asks[0] != asks[1], asks  # the seeds ask a different number of times (the re-draw path is hit)

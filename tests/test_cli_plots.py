"""Plots people read: log-scale simple regret, shaded bands over seeds, exact MOPO solution, labelled axes.

The figures are captured when saved (``Figure.savefig`` wrapped) and checked as matplotlib objects."""

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402


@pytest.fixture
def saved(monkeypatch):
    figs: dict[str, Figure] = {}
    orig = Figure.savefig

    def savefig(self, fname, *a, **kw):
        figs[str(fname).rsplit("/", 1)[-1]] = self
        return orig(self, fname, *a, **kw)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return figs


def _labelled(ax):
    assert ax.get_xlabel().strip() and ax.get_ylabel().strip()


def _bands(ax) -> list[PolyCollection]:
    return [c for c in ax.collections if isinstance(c, PolyCollection) and len(c.get_paths())]


def test_pspl_simple_regret_is_log_scale_with_a_band_per_agent(tmp_path, saved):
    from bayescrl.pbrl.experiment import plot_results

    k = np.arange(6)
    agents = {
        name: {
            "simple_regret_curve_mean": (scale / (1 + k)).tolist(),
            "simple_regret_curve_std": (0.1 * scale / (1 + k)).tolist(),
            "cumulative_regret_mean": np.cumsum(scale / (1 + k)).tolist(),
            "cumulative_regret_std": np.zeros(6).tolist(),
        }
        for name, scale in (("pspl", 1.0), ("dpo", 3.0))
    }
    plot_results({"env": {"name": "riverswim"}, "agents": agents}, tmp_path)
    (ax,) = saved["simple_regret.png"].axes
    assert ax.get_yscale() == "log" and "log scale" in ax.get_ylabel()
    _labelled(ax)
    assert len(_bands(ax)) == 2  # one shaded ±1 sd band per agent
    line = next(ln for ln in ax.get_lines() if ln.get_label() == "dpo")
    assert np.allclose(line.get_ydata(), 3.0 / (1 + k))
    (cum,) = saved["cumulative_regret.png"].axes
    assert cum.get_yscale() == "linear"
    _labelled(cum)


def test_mopo_tabular_plot_draws_the_exact_solution(tmp_path, saved):
    from bayescrl.commands.mopo import run_config
    from bayescrl.utils import load_yaml

    cfg = load_yaml("examples/mopo/tabular_mopo.yaml")
    cfg["mopo"].update(steps=200, log_every=50, runs=2)
    res = run_config(cfg, tmp_path)
    (ax,) = saved["action_probs.png"].axes
    _labelled(ax)
    exact = {ln.get_label(): ln.get_ydata()[0] for ln in ax.get_lines() if ln.get_label().endswith("(exact)")}
    assert exact.keys() == {f"{a} (exact)" for a in res["actions"]}
    for a, p in res["exact_policy"].items():
        assert exact[f"{a} (exact)"] == pytest.approx(p)
    assert len(_bands(ax)) == len(res["actions"])


def test_mopo_exact_bar_plot_and_sanity_grid_show_the_exact_solution(tmp_path, saved):
    from bayescrl.commands.mopo import run_config
    from bayescrl.utils import load_yaml

    res = run_config(load_yaml("examples/mopo/tabular_exact.yaml"), tmp_path / "exact")
    (ax,) = saved["policy.png"].axes
    _labelled(ax)
    assert [b.get_height() for b in ax.patches] == pytest.approx(list(res["policy"].values()))
    cfg = load_yaml("examples/mopo/sanity.yaml")
    cfg["mopo"] = {**(cfg.get("mopo") or {}), "steps": 50, "log_every": 25, "runs": 1}
    cfg["tau"] = [1.0]
    res = run_config(cfg, tmp_path / "sanity")
    fig = saved["sanity_action_probs.png"]
    for ax, (key, run) in zip(fig.axes, res["runs"].items(), strict=True):
        _labelled(ax)
        dashed = sorted(ln.get_ydata()[0] for ln in ax.get_lines() if ln.get_linestyle() == "--")
        assert dashed == pytest.approx(sorted(run["exact_policy"].values())), key


def test_bandit_regret_plot_has_units_and_bands(tmp_path, saved):
    from bayescrl.bandits.experiment import run_experiment

    cfg = {"bandit": {"T": 10}, "agents": ["ps", "lints"]}
    run_experiment(cfg, seeds=2, out=tmp_path, progress=False)
    (ax,) = saved["regret.png"].axes
    _labelled(ax)
    assert "units" in ax.get_ylabel() and len(_bands(ax)) == 2


PREFS = {
    "features": "onehot",
    "segment_length": 5,
    "raters": [{"id": "a", "beta": 5.0}],
    "queries": {"total": 20, "per_round": 10},
    "reward": "mean",
}


def test_acpo_and_preference_curves_use_env_steps_and_per_episode_limits(tmp_path, saved, monkeypatch):
    # ACPO's limit is per step (l = 0.01); the plotted costs are sums per episode, so the dashed line is l·H
    from bayescrl.constrained.acpo import ACPO
    from bayescrl.prefrl.loop import train_with_preferences

    monkeypatch.setattr(ACPO, "protocol_traj", 2)  # a short final protocol evaluation
    monkeypatch.setattr(ACPO, "protocol_steps", 20)
    cfg = {"n_envs": 2, "rollout_steps": 50, "horizon": 100, "eval_episodes": 1}
    m = train_with_preferences(
        "acpo",
        "bayescrl/ErgodicCMDP-v0",
        PREFS,
        total_steps=200,
        cost_limits=[0.01],
        config=cfg,
        out_dir=tmp_path,
    )
    steps = [c["env_steps"] for c in m["_learner"].curve]
    assert steps == [100, 200]  # one point per iteration, in env steps
    ret, cost, corr = saved["preference_curves.png"].axes
    for ax in (ret, cost, corr):
        _labelled(ax)
        assert ax.get_xlabel() == "env steps"
    assert "per episode" in ret.get_ylabel() and "per episode" in cost.get_ylabel()
    assert list(ret.get_lines()[0].get_xdata()) == steps
    dashed = [ln.get_ydata()[0] for ln in cost.get_lines() if ln.get_linestyle() == "--"]
    assert dashed == pytest.approx([0.01 * 100])
    axes = saved["curves.png"].axes
    for ax in axes:
        _labelled(ax)
    dashed = [ln.get_ydata()[0] for ln in axes[1].get_lines() if ln.get_linestyle() == "--"]
    assert dashed == pytest.approx([0.01 * 100])
    assert "l·H" in axes[1].get_legend().get_texts()[1].get_text()


def test_acpo_benchmark_figure_draws_a_per_step_limit_over_per_step_costs(tmp_path, saved):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "acpo_figure.py"
    spec = importlib.util.spec_from_file_location("acpo_figure", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    agg = {"env_steps": [1000, 2000], "reward_mean": [0.1, 0.2], "reward_sd": [0.0, 0.0]}
    agg |= {"cost_mean": [0.03, 0.02], "cost_sd": [0.01, 0.01]}
    mod.figure({"PointCircle": {"limit": 0.025, "series": [("ACPO", agg)]}}, tmp_path / "fig.png")
    reward, cost = saved["fig.png"].axes
    for ax in (reward, cost):
        _labelled(ax)
        assert "per step" in ax.get_ylabel()
    (dashed,) = [ln for ln in cost.get_lines() if ln.get_linestyle() == "--"]
    assert dashed.get_ydata()[0] == 0.025 and "per step" in dashed.get_label()

"""Preference-based constrained RL end to end: LP optima from preferences, CLI, resume, bad input."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bayescrl.cli import main
from bayescrl.envs import make_ergodic_cmdp, make_small_cmdp
from bayescrl.prefrl.loop import train_with_preferences
from bayescrl.utils.io import load_yaml

# e-COP on the safe/hazard CMDP: the settings of examples/ecop/tabular_small_cmdp.yaml (and of the
# env-reward test in test_crl_train.py)
TABULAR_ECOP = load_yaml(Path(__file__).parents[1] / "examples" / "ecop" / "tabular_small_cmdp.yaml")[
    "config"
]


def _tabular_policy(algo, n_states: int, horizon: int | None) -> np.ndarray:
    eye = np.eye(n_states, dtype=np.float32)
    with torch.no_grad():
        if horizon is None:
            return algo.policy.distribution(torch.as_tensor(eye)).probs.numpy()
        steps = [algo.policy_input(eye, np.full(n_states, h)) for h in range(horizon)]
        return np.stack([algo.policy.distribution(x).probs.numpy() for x in steps])


def test_ecop_from_preferences_reaches_the_lp_optimum_of_an_episodic_cmdp():
    """≤ 500 simulated preferences: ≥ 85 % of the LP optimum's true return at ≤ 1.1 × the cost limit."""
    cmdp = make_small_cmdp("finite", horizon=10)  # J* = 6.5 at cost 3; never entering the hazard: 5.0
    opt = cmdp.solve()
    spec = {
        "features": "onehot",
        "segment_length": 5,
        "raters": [{"id": "expert", "beta": 5.0, "lam": 100.0}],
        "competence": "known",
        "queries": {"total": 300, "per_round": 20, "select": "bald"},
        "reward": "thompson",
    }
    m = train_with_preferences(
        "ecop", cmdp.make_env, spec, total_steps=30_000, cost_limits=[3.0], config=TABULAR_ECOP
    )
    learner = m["_learner"]
    ev = cmdp.evaluate(_tabular_policy(learner.algo, 2, 10))
    assert m["num_queries"] <= 500
    assert ev.value >= 0.85 * opt.value and ev.value > 5.0 + 0.5, ev.value  # beats never taking a risk
    assert ev.costs[0] <= 1.1 * 3.0, ev.costs
    # the hazard's extra reward (the bonus, 0.5) lies within 3 posterior sds of the posterior mean
    w = torch.tensor([-0.5, -0.5, 0.5, 0.5], dtype=torch.float64)
    post = learner.posterior
    est, sd = (w @ post.mean()).item(), (w @ post.cov() @ w).sqrt().item()
    assert abs(est - 0.5) <= 3 * sd and sd < 0.15, (est, sd)
    assert m["reward_correlation"] > 0.95


def test_acpo_from_preferences_reaches_the_lp_optimum_of_an_average_reward_cmdp():
    cmdp = make_ergodic_cmdp(num_states=5, num_actions=3, seed=0)
    opt = cmdp.solve()
    uniform = cmdp.evaluate(np.full((5, 3), 1 / 3)).value
    cfg = dict(
        n_envs=4,
        rollout_steps=250,
        delta=0.02,
        normalize_obs=False,
        update_epochs=5,
        actor_hidden=(32,),
        critic_hidden=(32,),
    )
    spec = {
        "features": "onehot",
        "segment_length": 10,
        "raters": [{"id": "expert", "beta": 5.0, "lam": 100.0}],
        "competence": "known",
        "queries": {"total": 400, "per_round": 20, "select": "bald"},
    }
    m = train_with_preferences(
        "acpo",
        lambda: cmdp.make_env(max_episode_steps=200),
        spec,
        total_steps=40_000,
        cost_limits=cmdp.limits.tolist(),
        config=cfg,
    )
    ev = cmdp.evaluate(_tabular_policy(m["_learner"].algo, 5, None))
    assert m["num_queries"] <= 500
    assert ev.value >= 0.85 * opt.value, (ev.value, opt.value)
    assert (ev.value - uniform) >= 0.7 * (opt.value - uniform)  # most of the gap above a random policy
    assert ev.costs[0] <= 1.1 * cmdp.limits[0], ev.costs


def test_relabel_replaces_the_env_reward_by_the_posterior_draw():
    """The optimiser sees ⟨θ̃, φ⟩ only; the env reward is kept for the raters and the reports."""
    from bayescrl.constrained.registry import get_algorithm
    from bayescrl.prefrl.loop import PreferenceLearner

    cmdp = make_small_cmdp("finite", horizon=4)
    algo = get_algorithm("ppo-lag")(cmdp.make_env, [1.0], 0, {"n_envs": 2, "rollout_steps": 8})
    learner = PreferenceLearner(
        algo, {"raters": [{"id": "a"}], "segment_length": 2, "queries": {"total": 4, "per_round": 4}}
    )
    algo.collector.reset(0)
    roll = algo.collector.collect(algo.policy, algo.critic_value, 8, algo.rng)
    true = roll.rewards[..., 0].copy()
    new = learner.relabel(roll)
    phi = learner.step_features(roll)
    np.testing.assert_allclose(new.rewards[..., 0], (phi @ learner.draw).numpy())
    np.testing.assert_array_equal(roll.rewards[..., 0], true)  # the collected batch is left as it was
    assert not np.allclose(new.rewards[..., 0], true)
    assert learner.num_queries == 4 and learner.buffer.data.true_return.shape == (8,)
    algo.close()


SPEC = """
features: onehot
segment_length: 5
raters: [{id: expert, beta: 5.0, lam: 100.0}, {id: novice, beta: 0.5, lam: 2.0}]
competence: infer
queries: {total: 60, per_round: 20, select: disagreement}
reward: mean
"""
SMALL = ["--set", "config.n_envs=2", "--set", "config.rollout_steps=50", "--no-progress"]
TRAIN = ["train", "--algo", "ecop", "--env", "bayescrl/SmallCMDP-v0", "--cost-limit", "3"]


def _run(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code, capsys.readouterr()


def test_cli_trains_from_preferences_and_resumes(tmp_path, capsys):
    spec = tmp_path / "prefs.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "run"
    main([*TRAIN, "--total-steps", "300", "--preferences", str(spec), "--out", str(out), *SMALL])
    m = json.loads((out / "metrics.json").read_text())
    for key in ("final_true_return", "final_true_costs", "num_queries", "reward_correlation", "competence"):
        assert key in m
    assert m["num_queries"] == 60 and set(m["competence"]) == {"expert", "novice"}
    rounds = json.loads((out / "preference_rounds.json").read_text())
    assert [r["num_queries"] for r in rounds["rounds"]] == [20, 40, 60]
    assert (out / "preference_curves.png").stat().st_size > 1000
    # competence: infer: the hierarchical rater table (metrics, printed) and its plot
    assert [r["id"] for r in m["raters"]] == ["expert", "novice"]
    assert (out / "rater_competence.png").stat().st_size > 1000
    printed = capsys.readouterr().out
    assert "true return" in printed and "rater competence (hierarchical model)" in printed
    assert "rater_competence.png" in printed.splitlines()[-1]
    # resume: the preference state (labels, buffer, generators) comes back and training goes on
    main(["train", "--resume", str(out), "--total-steps", "500", "--no-progress"])
    m2 = json.loads((out / "metrics.json").read_text())
    assert m2["env_steps"] == 500 and m2["num_queries"] == 60 and len(rounds["curve"]) == 3
    # a spec that differs from the stored one is refused
    spec2 = tmp_path / "other.yaml"
    spec2.write_text(SPEC.replace("reward: mean", "reward: thompson"))
    code, cap = _run(["train", "--resume", str(out), "--preferences", str(spec2), "--no-progress"], capsys)
    assert code == 2 and "preferences" in cap.err


@pytest.mark.parametrize(
    "spec, env, message",
    [
        ("raters: [{id: a, beta: -1}]", "bayescrl/SmallCMDP-v0", "raters.beta[0]"),
        ("raters: [{id: a}]\nqueries: {select: best}", "bayescrl/SmallCMDP-v0", "queries.select"),
        ("raters: [{id: a}]\nengin: laplace", "bayescrl/SmallCMDP-v0", "did you mean 'engine'"),
        ("raters: [{id: a}]\nbuffer_size: 5", "bayescrl/SmallCMDP-v0", "larger than the segment buffer"),
        ("raters: [{id: a}]\nfeatures: env", "bayescrl/SmallCMDP-v0", "info['features']"),
        ("raters: [{id: a}]\nfeatures: onehot", "bayescrl/PointCircle-v0", "Discrete"),
        ("raters: [{id: a}]\noffline: nowhere.json", "bayescrl/SmallCMDP-v0", "preferences.offline"),
    ],
)
def test_bad_preference_specs_exit_2_with_one_line_and_no_run_folder(spec, env, message, tmp_path, capsys):
    f = tmp_path / "prefs.yaml"
    f.write_text(spec)
    out = tmp_path / "run"
    args = ["train", "--algo", "ppo-lag", "--env", env, "--total-steps", "100", "--cost-limit", "3"]
    code, cap = _run([*args, "--preferences", str(f), "--out", str(out), "--no-progress"], capsys)
    assert code == 2, cap
    assert message in cap.err and len(cap.err.strip().splitlines()) == 1, cap.err
    assert not out.exists()


def test_offline_preferences_warm_start_the_posterior(tmp_path):
    """An offline file (the warmPref idea) enters the posterior before the first online query."""
    from bayescrl.constrained.registry import get_algorithm
    from bayescrl.prefrl.loop import PreferenceLearner

    cmdp = make_small_cmdp("finite", horizon=4)
    # features are e_s ⊗ e_a (4 dims): segments in the hazard state are preferred
    recs = [{"x0": [0, 0, 1, 1], "x1": [1, 1, 0, 0], "y": 0}] * 30
    off = tmp_path / "offline.json"
    off.write_text(json.dumps({"rater": {"id": "log", "beta": 2.0, "lam": 10.0}, "records": recs}))
    algo = get_algorithm("ppo-lag")(cmdp.make_env, [1.0], 0, {"n_envs": 2, "rollout_steps": 8})
    spec = {"raters": [{"id": "a"}], "offline": str(off), "competence": "known", "segment_length": 4}
    learner = PreferenceLearner(algo, spec)  # (the default segment_length 8 > horizon 4 is refused)
    theta = learner.posterior.mean().reshape(2, 2)
    assert learner.posterior.num_labels == 30 and (theta[1] > theta[0] + 0.3).all()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"records": [{"x0": [0, 0, 1], "x1": [1, 1, 0, 0], "y": 0}]}))
    from bayescrl.utils.errors import DataError

    with pytest.raises(DataError, match=r"offline.records.x0\[0\]"):
        PreferenceLearner(algo, {**spec, "offline": str(bad)})
    algo.close()


def test_people_as_raters_pause_for_labels_and_resume(tmp_path, capsys):
    """labels: external — the run stops with its queries in queries/pending.json; answers.json (what
    ``bayescrl prefs import`` writes) feeds the posterior on --resume, and the next round pauses again."""
    spec = tmp_path / "prefs.yaml"
    spec.write_text(
        "labels: external\nfeatures: onehot\nsegment_length: 2\nraters: [{id: alice}, {id: bob}]\n"
        "queries: {total: 10, per_round: 5, select: uniform}\n"
    )
    out = tmp_path / "run"
    main([*TRAIN, "--total-steps", "1000", "--preferences", str(spec), "--out", str(out), *SMALL])
    assert "5 queries wait for labels" in capsys.readouterr().out
    pending = json.loads((out / "queries" / "pending.json").read_text())
    assert pending["round"] == 1 and len(pending["queries"]) == 5 and pending["raters"] == ["alice", "bob"]
    q = pending["queries"][0]
    assert len(q["left"]["obs"]) == 2 and len(q["left"]["features"]) == 4
    assert json.loads((out / "metrics.json").read_text())["env_steps"] == 100  # stopped after 1 iteration
    # a person labels through the exported page; its download is labels.json (bayescrl prefs export/import)
    main(["prefs", "export", str(out)])
    assert (out / "queries" / "labels.html").exists()
    choices = ["left", "right", "left", "right", "equal"]  # "equal": recorded, not a Bradley-Terry label
    labels = [{"query": q["id"], "choice": c} for q, c in zip(pending["queries"], choices, strict=True)]
    (tmp_path / "labels.json").write_text(json.dumps({"round": 1, "rater": "bob", "labels": labels}))
    main(["prefs", "import", str(out), str(tmp_path / "labels.json")])
    main(["train", "--resume", str(out), "--no-progress"])
    m = json.loads((out / "metrics.json").read_text())
    assert m["num_queries"] == 5 and m["answers"] == {"labels": 4, "skip": 0, "equal": 1}
    assert m["env_steps"] == 200  # one more iteration, then round 2 asks for labels
    assert json.loads((out / "queries" / "pending.json").read_text())["round"] == 2
    assert (out / "queries" / "answered_round1.json").exists()
    bad = {"round": 2, "answers": [{"query": "r9q9", "y": 0, "rater": "alice"}]}
    (out / "queries" / "answers.json").write_text(json.dumps(bad))
    code, cap = _run(["train", "--resume", str(out), "--no-progress"], capsys)
    assert code == 2 and "answers.query[0]" in cap.err


def test_ecop_with_learned_reward_and_learned_cost_stays_within_the_limit():
    """cost: learned — neither the reward nor the cost reaches the optimiser; the constraint uses the
    upper 0.9 posterior quantile of the learned cost, so the true cost stays within the limit."""
    cmdp = make_small_cmdp("finite", horizon=10)
    opt = cmdp.solve()
    spec = {
        "features": "onehot",
        "segment_length": 5,
        "raters": [{"id": "a", "beta": 5.0, "lam": 100.0}],
        "competence": "known",
        "queries": {"total": 200, "per_round": 20},
        "reward": "mean",
        "cost": "learned",
        "cost_raters": [{"id": "safety", "beta": 5.0, "lam": 100.0}],
        "cost_queries": {"total": 200, "per_round": 20},
        "cost_quantile": 0.9,
    }
    m = train_with_preferences(
        "ecop", cmdp.make_env, spec, total_steps=30_000, cost_limits=[3.0], config=TABULAR_ECOP
    )
    learner = m["_learner"]
    ev = cmdp.evaluate(_tabular_policy(learner.algo, 2, 10))
    assert ev.value >= 0.85 * opt.value and ev.costs[0] <= 1.1 * 3.0, (ev.value, ev.costs)
    cost = learner.cost_posteriors[0].mean().reshape(2, 2)  # c(s, a) = s
    np.testing.assert_allclose(cost.numpy(), [[0, 0], [1, 1]], atol=0.2)
    assert m["num_cost_queries"] == 200
    rec = learner.algo.history[-1]
    assert "learned_ep_costs" in rec and rec["ep_costs"] != rec["learned_ep_costs"]


def test_ensemble_reward_model_trains_and_its_state_round_trips(tmp_path):
    from bayescrl.constrained.registry import get_algorithm
    from bayescrl.prefrl.loop import PreferenceLearner

    cmdp = make_small_cmdp("finite", horizon=4)
    spec = {
        "raters": [{"id": "a", "beta": 2.0}],
        "reward_model": "ensemble",
        "ensemble_size": 3,
        "hidden": [16],
        "segment_length": 2,
        "queries": {"total": 20, "per_round": 10},
        "reward": "thompson",
    }
    algo = get_algorithm("ppo-lag")(cmdp.make_env, [1.0], 0, {"n_envs": 2, "rollout_steps": 16})
    learner = PreferenceLearner(algo, spec, out_dir=tmp_path)
    algo.learn(64, progress=False)
    assert learner.num_queries == 20 and learner.posterior.num_labels > 0
    learner.save(tmp_path)
    algo2 = get_algorithm("ppo-lag")(cmdp.make_env, [1.0], 0, {"n_envs": 2, "rollout_steps": 16})
    other = PreferenceLearner(algo2, spec, out_dir=tmp_path)
    other.load(tmp_path)
    phi = torch.eye(4, dtype=torch.float64)
    assert torch.equal(other.posterior.member_rewards(phi), learner.posterior.member_rewards(phi))
    assert other.num_queries == 20
    algo.close()
    algo2.close()


def test_non_finite_user_features_stop_the_run_with_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "badfeats.py").write_text(
        "import torch\n"
        "def phi(obs, actions, envf):\n"
        "    out = torch.cat([obs, actions.reshape(-1, 1).double()], 1)\n"
        "    return out / (out.sum(1, keepdim=True) * 0)\n"  # 0/0 and x/0: NaN and inf
    )
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "prefs.yaml"
    spec.write_text("features: badfeats:phi\nraters: [{id: a}]\n")
    code, cap = _run(
        [*TRAIN, "--total-steps", "200", "--preferences", str(spec), "--out", "run", *SMALL], capsys
    )
    assert code == 2 and "non-finite reward features" in cap.err
    assert len(cap.err.strip().splitlines()) == 1


@pytest.mark.parametrize("algo", ["ecop", "ppo-lag", "p3o", "focops", "cpo", "pcpo", "ipo", "acpo", "atrpo"])
def test_every_registered_optimiser_trains_on_the_learned_reward(algo):
    """The hook is the core's, so any registered algorithm trains on the posterior's reward."""
    from bayescrl.constrained.registry import get_algorithm
    from bayescrl.prefrl.loop import PreferenceLearner

    cmdp = make_ergodic_cmdp(num_states=3, num_actions=2, seed=0)
    cfg = {"n_envs": 2, "rollout_steps": 40, "update_epochs": 1, "normalize_obs": False}
    agent = get_algorithm(algo)(lambda: cmdp.make_env(max_episode_steps=20), cmdp.limits.tolist(), 0, cfg)
    spec = {
        "raters": [{"id": "a", "beta": 5.0}],
        "segment_length": 4,
        "queries": {"total": 20, "per_round": 10},
        "reward": "mean",
    }
    learner = PreferenceLearner(agent, spec)
    seen = []
    core_update = agent.update
    agent.update = lambda batch: (seen.append(batch.rewards[:, 0].double().clone()), core_update(batch))[1]
    agent.learn(160, progress=False)
    assert learner.num_queries == 20 and len(seen) == 2
    # the optimiser's rewards are entries of the learned reward table θ̂(s, a), not the env's r(s, a)
    gap = lambda vals, table: (vals[:, None] - table[None, :]).abs().min(1).values.max().item()
    theta = learner.posterior.mean()
    true = torch.tensor(cmdp.rewards, dtype=torch.float64).reshape(-1)
    assert gap(seen[-1], theta) < 1e-5 and gap(seen[-1], true) > 1e-3
    agent.close()

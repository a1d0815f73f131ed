"""Training-level tests: e-COP vs the LP optimum, truncation bootstrap, resume, m > 1, limit 0, baselines."""

import numpy as np
import pytest
import torch

from bayescrl.constrained.core.base import OnPolicyAlgorithm
from bayescrl.constrained.core.envs import ConstraintWrapper
from bayescrl.constrained.core.normalize import RunningMeanStd
from bayescrl.constrained.core.rollout import ObsEncoder, RolloutCollector
from bayescrl.constrained.registry import REGISTRY, get_algorithm

SMALL = dict(n_envs=2, rollout_steps=64, minibatch_size=64, update_epochs=2, vf_epochs=2)


def _tabular_policy(algo, n_states: int, horizon: int) -> np.ndarray:
    pol = np.zeros((horizon, n_states, algo.envs.single_action_space.n))
    with torch.no_grad():
        for h in range(horizon):
            x = algo.policy_input(np.eye(n_states, dtype=np.float32), np.full(n_states, h))
            pol[h] = algo.policy.distribution(x).probs.numpy()
    return pol


def test_ecop_reaches_lp_optimum_on_tabular_cmdp():
    """Chapter `ecop`: J(pi) within 5% of the LP optimum over occupancy measures, constraint satisfied."""
    from bayescrl.envs import make_small_cmdp

    cmdp = make_small_cmdp("finite", horizon=10)  # J* = 6.5 at cost 3 = d (binding); unconstrained 9.5
    opt = cmdp.solve()
    assert opt.value == pytest.approx(6.5) and opt.costs[0] == pytest.approx(3.0)
    cfg = dict(
        n_envs=8,
        rollout_steps=50,
        minibatch_size=100,
        update_epochs=5,
        pi_lr=1e-3,
        vf_lr=3e-3,
        anneal_lr=True,
        actor_hidden=(32,),
        critic_hidden=(32,),
        beta=1.0,
        kappa=1.02,
        beta_max=10.0,
        advantage="finite_horizon",  # the text's time-indexed, undiscounted A_h
        gamma=1.0,
    )
    algo = get_algorithm("ecop")(cmdp.make_env, [3.0], seed=0, config=cfg)
    algo.learn(30_000, progress=False)
    ev = cmdp.evaluate(_tabular_policy(algo, 2, 10))  # exact evaluation of the learned policy
    assert ev.value >= 0.95 * opt.value, (ev.value, ev.costs)
    assert ev.costs[0] <= 3.0 + 1e-9, ev.costs
    assert algo.history[-1]["multipliers"] and algo.m == 1


class _LinearCritic:
    """V(obs) = first coordinate of the normalised observation, for every channel."""

    def __init__(self, k):
        self.k = k

    def __call__(self, obs, h):
        return torch.as_tensor(obs)[:, :1].float().repeat(1, self.k)


def test_truncation_bootstraps_from_normalised_final_observation():
    import gymnasium as gym

    from bayescrl.constrained.core.envs import make_vector_env
    from bayescrl.constrained.toy import CostPendulum

    envs = make_vector_env(lambda: CostPendulum(max_episode_steps=5), 1, 1)
    rms = RunningMeanStd((3,))
    rms.update(np.random.default_rng(0).normal(size=(100, 3)) * 2 + 1)
    col = RolloutCollector(envs, ObsEncoder(envs.single_observation_space), rms, 1, horizon=1000)
    col.reset(0)

    class Zero:
        def numpy_actor(self):
            return self

        def act(self, x, rng):
            return np.zeros((x.shape[0], 1), np.float32), np.zeros(x.shape[0], np.float32)

    # record the true final observation of the truncated episode
    finals = []
    orig_step = envs.step

    def spy(a):
        out = orig_step(a)
        if out[3][0]:
            finals.append(np.asarray(out[4]["final_obs"][0], dtype=np.float64))
        return out

    envs.step = spy
    roll = col.collect(Zero(), _LinearCritic(2), steps=7, rng=np.random.default_rng(0))
    assert roll.ended[4, 0] and not roll.terminated[4, 0]
    expect = rms.normalize(finals[0][None])[0, 0]
    assert float(roll.next_values[4, 0, 0]) == pytest.approx(float(expect), rel=1e-5)
    # the next obs after the reset is a *different* state: the bootstrap did not use it
    assert float(roll.values[5, 0, 0]) != pytest.approx(float(expect), rel=1e-3)
    assert isinstance(envs, gym.vector.SyncVectorEnv)
    envs.close()


def test_resume_is_equivalent_to_uninterrupted_run(tmp_path):
    env = "bayescrl.constrained.toy:CostCartPole"
    full = get_algorithm("ecop")(env, [5.0], seed=3, config=dict(SMALL, horizon=200))
    full.learn(3 * 128, progress=False)
    part = get_algorithm("ecop")(env, [5.0], seed=3, config=dict(SMALL, horizon=200))
    part.learn(2 * 128, out_dir=tmp_path, progress=False)
    part.close()
    resumed = OnPolicyAlgorithm.load(tmp_path)
    assert resumed.exact_resume and resumed.iteration == 2
    resumed.learn(3 * 128, progress=False)
    for a, b in zip(full.policy.parameters(), resumed.policy.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert full.lam.tolist() == resumed.lam.tolist() and full.beta == resumed.beta
    assert [r["ep_return"] for r in full.history] == [r["ep_return"] for r in resumed.history]


@pytest.mark.parametrize("algo", ["ecop", "ppo-lag", "p3o", "focops", "ipo"])
def test_two_constraints_each_with_own_multiplier(algo):
    a = get_algorithm(algo)(
        "bayescrl.constrained.toy:CostCartPole",
        [0.0, 3.0],
        seed=0,
        config=SMALL,
        env_kwargs={"two_costs": True},
    )
    a.learn(256, progress=False)
    rec = a.history[-1]
    assert a.m == 2 and len(rec["ep_costs"]) == 2 and len(rec["multipliers"]) == 2
    assert len(rec["cost_rate"]) == 2 and a.critic.k == 3
    a.close()


def test_cost_limit_zero_drives_multiplier_up():
    a = get_algorithm("ppo-lag")("bayescrl.constrained.toy:CostCartPole", [0.0], seed=0, config=SMALL)
    a.learn(3 * 128, progress=False)
    assert a.history[-1]["multipliers"][0] > 0.0  # cost > 0 = d at the start of CartPole
    a.close()


@pytest.mark.parametrize("algo", ["ecop", "ppo-lag", "p3o", "focops", "cpo", "pcpo", "ipo"])
@pytest.mark.parametrize(
    "env", ["bayescrl.constrained.toy:CostPendulum", "bayescrl.constrained.toy:CostCartPole"]
)
def test_every_baseline_trains_on_box_and_discrete(algo, env):
    a = get_algorithm(algo)(env, [5.0], seed=1, config=SMALL)
    a.learn(128, progress=False)
    rec = a.history[-1]
    assert np.isfinite(rec["kl"]) and rec["env_steps"] == 128
    assert all(torch.isfinite(p).all() for p in a.policy.parameters())
    a.close()


def test_single_constraint_algorithms_reject_two():
    from bayescrl.utils import ConfigError

    with pytest.raises(ConfigError, match="at most 1 constraint"):
        get_algorithm("cpo")(
            "bayescrl.constrained.toy:CostCartPole", [1.0, 1.0], config=SMALL, env_kwargs={"two_costs": True}
        )


def test_pluggable_reward_and_cost_callables_and_async():
    a = get_algorithm("ppo-lag")(
        "CartPole-v1",
        [10.0],
        seed=0,
        config=dict(SMALL, async_envs=True),
        reward_fn=lambda o, a_, o2, i: 2.0,
        cost_fn=lambda o, a_, o2, i: abs(o2[0]),
    )
    a.learn(128, progress=False)
    rec = a.history[-1]
    lengths = a.evaluate(2)["lengths"]
    assert a.last_eval["mean_return"] == pytest.approx(2.0 * np.mean(lengths))
    assert rec["ep_costs"][0] >= 0 and a.m == 1
    a.close()


def test_evaluation_is_deterministic_and_uses_training_statistics():
    a = get_algorithm("ecop")("bayescrl.constrained.toy:CostPendulum", [5.0], seed=0, config=SMALL)
    a.learn(256, progress=False)
    mean_before = a.rms.mean.copy()
    e1, e2 = a.evaluate(2), a.evaluate(2)
    assert e1["returns"] == e2["returns"] and e1["seeds"] == [10_000, 10_001]
    np.testing.assert_array_equal(a.rms.mean, mean_before)
    a.close()


def test_registry_lists_acpo_family_with_clear_error():
    assert REGISTRY["acpo"] == "bayescrl.constrained.acpo:ACPO"
    assert REGISTRY["atrpo"] == "bayescrl.constrained.atrpo:ATRPO"
    assert "bvf-ppo" not in REGISTRY  # not implemented: not offered
    from bayescrl.utils import ConfigError

    with pytest.raises(ConfigError, match="unknown algorithm"):
        get_algorithm("trpo-magic")


def test_constraint_wrapper_rejects_wrong_cost_length():
    from bayescrl.constrained.toy import CostCartPole
    from bayescrl.utils import ConfigError

    env = ConstraintWrapper(CostCartPole(two_costs=True), num_costs=1)
    env.reset(seed=0)
    with pytest.raises(ConfigError, match="expected 1 cost"):
        env.step(0)


def test_an_env_without_costs_trains_when_no_episode_ends():
    """No cost channel (m = 0) and no finished episode: Ĵ_C is the empty vector, not a reshape error."""
    a = get_algorithm("acpo")("Pendulum-v1", [], seed=0, config=dict(n_envs=2, rollout_steps=50))
    a.learn(100, progress=False)
    rec = a.history[-1]
    assert rec["episodes"] == 0 and rec["ep_costs"] == [] and np.isfinite(rec["ep_return"])
    a.close()

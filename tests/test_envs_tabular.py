"""Tabular CMDPs: LP optima solvable by hand, exact evaluation, the gymnasium env, bad input."""

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from bayescrl.envs import (
    InfeasibleCMDPError,
    TabularCMDP,
    TabularCMDPEnv,
    make_ergodic_cmdp,
    make_small_cmdp,
    stationary_distribution,
)
from bayescrl.utils import ConfigError


def _bandit(d: float, criterion: str = "finite", horizon: int = 5, gamma: float = 0.8) -> TabularCMDP:
    """One state, action 0 pays 1 and costs 1, action 1 pays 0.25 and costs 0."""
    P = np.ones((1, 2, 1))
    return TabularCMDP(
        P, [[1.0, 0.25]], [[1.0, 0.0]], [d], [1.0], criterion=criterion, horizon=horizon, gamma=gamma
    )


@pytest.mark.parametrize(
    "criterion, d, expected, scale",
    [("finite", 2.0, 2 + 0.25 * 3, 5), ("discounted", 2.0, 2 + 0.25 * (5 - 2), 5), ("average", 0.4, 0.55, 1)],
)
def test_bandit_lp_by_hand(criterion, d, expected, scale):
    # Spending cost on action 0 trades 0.25 per step for 1: J* = d + 0.25 (n - d), n = H, 1/(1-g) or 1.
    cmdp = _bandit(d, criterion)
    sol = cmdp.solve()
    assert sol.value == pytest.approx(expected, abs=1e-8)
    assert sol.costs[0] == pytest.approx(d, abs=1e-8)
    assert sol.multipliers[0] == pytest.approx(0.75, abs=1e-8)  # dJ*/dd
    assert cmdp.solve(constrained=False).value == pytest.approx(scale, abs=1e-8)


@pytest.mark.parametrize("criterion", ["finite", "discounted", "average"])
@pytest.mark.parametrize("limit", [0.0, 0.2, 2.0, 100.0])
def test_small_cmdp_closed_form(criterion, limit):
    H, gamma, bonus = 10, 0.9, 0.5
    cmdp = make_small_cmdp(criterion, horizon=H, gamma=gamma, limit=limit, bonus=bonus)
    r0, n_max = {
        "finite": (H, H - 1),
        "discounted": (1 / (1 - gamma), gamma / (1 - gamma)),
        "average": (1.0, 1.0),
    }[criterion]
    sol = cmdp.solve()
    assert sol.value == pytest.approx((1 - bonus) * r0 + bonus * min(limit, n_max), abs=1e-7)
    assert sol.costs[0] <= limit + 1e-7
    ev = cmdp.evaluate(sol.policy)  # the extracted policy attains the LP value exactly
    assert ev.value == pytest.approx(sol.value, abs=1e-7)
    np.testing.assert_allclose(ev.costs, sol.costs, atol=1e-7)
    unc = cmdp.solve(constrained=False)
    assert unc.value == pytest.approx((1 - bonus) * r0 + bonus * n_max, abs=1e-7)
    if 0 < limit < n_max:  # binding: multiplier = reward bought per unit cost
        assert sol.value < unc.value - 1e-6
        assert sol.multipliers[0] == pytest.approx(bonus, abs=1e-7)


def test_finite_horizon_optimum_is_nonstationary():
    # s0: "cash" pays 0.5 and stays; "invest" pays 0 and moves to s1, which pays 2 and returns to s0.
    # H = 2, start uniform: from s0 invest then collect 2 (2 > 0.5 + 0.5); from s1 collect 2 then, in s0
    # at the last step, cash (0.5 > 0). J* = (2 + 2.5) / 2 = 2.25 needs pi_1(s0) != pi_2(s0).
    P = np.zeros((2, 2, 2))
    P[0, 0, 0] = P[0, 1, 1] = P[1, :, 0] = 1.0
    r = np.array([[0.5, 0.0], [2.0, 2.0]])
    cmdp = TabularCMDP(P, r, np.zeros((2, 2)), [1.0], [0.5, 0.5], criterion="finite", horizon=2)
    sol = cmdp.solve()
    assert sol.value == pytest.approx(2.25)
    assert sol.policy.shape == (2, 2, 2)
    assert sol.policy[0, 0, 1] == pytest.approx(1.0)  # invest at h = 1
    assert sol.policy[1, 0, 0] == pytest.approx(1.0)  # cash at h = 2
    stationary = [cmdp.evaluate(np.array([[1 - p, p], [0.5, 0.5]])).value for p in np.linspace(0, 1, 21)]
    assert max(stationary) < sol.value - 0.2  # no stationary policy comes close


def test_exact_evaluation_closed_forms():
    p, q = 0.2, 0.6
    P_pi = np.array([[1 - p, p], [q, 1 - q]])
    np.testing.assert_allclose(stationary_distribution(P_pi), [q / (p + q), p / (p + q)], atol=1e-12)
    # average criterion: a one-action chain with reward = state index
    P = P_pi[:, None, :]
    avg = TabularCMDP(P, [[0.0], [1.0]], [[1.0], [0.0]], [1.0], [1.0, 0.0], criterion="average")
    ev = avg.evaluate(np.ones((2, 1)))
    assert ev.value == pytest.approx(p / (p + q))
    assert ev.costs[0] == pytest.approx(q / (p + q))
    assert ev.state_distribution @ ev.state_values == pytest.approx(0.0, abs=1e-12)
    # bias satisfies the Poisson equation V = r - J + P V
    np.testing.assert_allclose(ev.state_values, np.array([0.0, 1.0]) - ev.value + P_pi @ ev.state_values)
    # discounted: constant reward 1 -> V = 1/(1-gamma), normalised occupation sums to 1
    disc = avg.with_criterion("discounted", gamma=0.75)
    ev = disc.evaluate(np.ones((2, 1)))
    np.testing.assert_allclose(ev.state_values + ev.cost_values[0], 4.0)
    assert ev.state_distribution.sum() == pytest.approx(1.0)
    assert ev.occupancy.sum() == pytest.approx(4.0)


def test_ergodic_cmdp_binds_and_is_deterministic():
    for crit in ("average", "discounted", "finite"):
        cmdp = make_ergodic_cmdp(4, 3, num_costs=2, seed=3, criterion=crit, horizon=6)
        sol, unc = cmdp.solve(), cmdp.solve(constrained=False)
        assert sol.value < unc.value - 1e-6
        assert (sol.costs <= cmdp.limits + 1e-7).all()
        ev = cmdp.evaluate(sol.policy)
        assert ev.value == pytest.approx(sol.value, abs=1e-7)
        np.testing.assert_allclose(ev.costs, sol.costs, atol=1e-7)
    a, b = make_ergodic_cmdp(seed=5), make_ergodic_cmdp(seed=5)
    np.testing.assert_array_equal(a.transitions, b.transitions)
    np.testing.assert_array_equal(a.limits, b.limits)
    assert (a.transitions >= 0.02 - 1e-12).all()


def test_monte_carlo_matches_exact_evaluation():
    cmdp = make_ergodic_cmdp(3, 2, seed=1, criterion="finite", horizon=5)
    pi = cmdp.solve().policy
    env = cmdp.make_env()
    rng = np.random.default_rng(0)
    rets, costs = [], []
    obs, _ = env.reset(seed=0)
    for _ in range(1500):
        ret = cost = 0.0
        for h in range(5):
            obs, r, term, trunc, info = env.step(int(rng.choice(2, p=pi[h, obs])))
            ret, cost = ret + r, cost + info["cost"]
        assert term and not trunc
        rets.append(ret)
        costs.append(cost)
        obs, _ = env.reset()
    ev = cmdp.evaluate(pi)
    assert abs(np.mean(rets) - ev.value) < 4 * np.std(rets) / np.sqrt(len(rets))
    assert abs(np.mean(costs) - ev.costs[0]) < 4 * np.std(costs) / np.sqrt(len(costs)) + 1e-9


def test_env_api_and_seeding():
    env = make_ergodic_cmdp(4, 2, num_costs=2, seed=0, criterion="average").make_env(max_episode_steps=7)
    check_env(env, skip_render_check=True)
    assert env.num_costs == 2
    obs, _ = env.reset(seed=123)
    traj1 = [env.step(t % 2)[0] for t in range(7)]
    env.reset(seed=123)
    steps = [env.step(t % 2) for t in range(7)]
    assert [s[0] for s in steps] == traj1 and obs in range(4)
    assert steps[-1][3] and not steps[-1][2]  # truncated, not terminated
    info = steps[0][4]
    assert isinstance(info["cost"], np.ndarray) and info["cost"].shape == (2,)
    assert set(info["costs"]) == {"cost_0", "cost_1"}
    small = make_small_cmdp("finite", horizon=3).make_env()
    small.reset(seed=0)
    out = [small.step(1) for _ in range(3)]
    assert [o[4]["cost"] for o in out] == [0.0, 1.0, 1.0]  # cost is paid in the hazard state
    assert [o[1] for o in out] == [0.5, 1.0, 1.0]
    assert out[-1][2] and not out[-1][3]


def test_infeasible_limits_are_reported():
    with pytest.raises(InfeasibleCMDPError, match="smallest achievable"):
        make_small_cmdp("finite", limit=-1.0).solve()


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"transitions": np.full((2, 2, 2), 0.4)}, "transitions"),
        ({"rewards": np.full((2, 3), 1.0)}, "rewards"),
        ({"rewards": np.array([[np.nan, 0], [0, 0]])}, "rewards"),
        ({"limits": [1.0, 2.0]}, "limits"),
        ({"initial": [0.3, 0.3]}, "initial"),
        ({"criterion": "total"}, "criterion"),
        ({"criterion": "discounted", "gamma": 1.0}, "gamma"),
        ({"criterion": "finite", "horizon": 0}, "horizon"),
    ],
)
def test_bad_arguments_rejected(kwargs, field):
    P = np.zeros((2, 2, 2))
    P[:, 0, 0] = P[:, 1, 1] = 1.0
    args = {
        "transitions": P,
        "rewards": np.ones((2, 2)),
        "costs": np.ones((1, 2, 2)),
        "limits": [1.0],
        "initial": [1.0, 0.0],
        "criterion": "finite",
        "horizon": 3,
        "gamma": 0.9,
    }
    args.update(kwargs)
    with pytest.raises(ConfigError) as exc:
        TabularCMDP(**args)
    assert exc.value.field == field


def test_bad_policy_and_env_arguments():
    cmdp = make_small_cmdp("finite", horizon=3)
    with pytest.raises(ConfigError, match="policy"):
        cmdp.evaluate(np.full((2, 2), 0.7))
    with pytest.raises(ConfigError, match="policy"):
        cmdp.evaluate(np.full((4, 2, 2), 0.5))
    with pytest.raises(ConfigError, match="max_episode_steps"):
        TabularCMDPEnv(cmdp, max_episode_steps=5)
    with pytest.raises(ConfigError, match="tightness"):
        make_ergodic_cmdp(tightness=1.0)


def test_observe_time_encodes_the_step_and_registered_ids():
    import gymnasium as gym

    import bayescrl.envs  # noqa: F401

    env = gym.make("bayescrl/SmallCMDP-v0", horizon=3, observe_time=True)
    check_env(env.unwrapped, skip_render_check=True)
    assert env.observation_space.n == 6
    obs, _ = env.reset(seed=0)
    seen = [obs] + [env.step(1)[0] for _ in range(2)]
    assert seen == [0, 2 + 1, 4 + 1]  # h * S + s: start in s0, then the hazard state s1
    with pytest.raises(ConfigError, match="observe_time"):
        make_small_cmdp("average").make_env(observe_time=True)
    avg = gym.make("bayescrl/ErgodicCMDP-v0", num_states=3, seed=2)
    assert avg.unwrapped.cmdp.criterion == "average" and avg.observation_space.n == 3

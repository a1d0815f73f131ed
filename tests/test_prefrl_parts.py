"""Preference-based constrained RL, the parts: features, segments, raters, query rules, posterior."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from bayescrl.prefrl.features import make_feature_map
from bayescrl.prefrl.queries import pair_scores, random_pairs, select_pairs
from bayescrl.prefrl.reward_model import LinearRewardPosterior
from bayescrl.prefrl.segments import SegmentBuffer, Segments, cut_segments
from bayescrl.prefrl.spec import parse_preference_spec
from bayescrl.raters import EQUAL, SKIP, Rater, RaterPool
from bayescrl.utils.errors import ConfigError

D, A = gym.spaces.Discrete, gym.spaces.Box


# ---------------------------------------------------------------- features
def test_onehot_features_make_the_linear_reward_the_tabular_reward():
    fmap = make_feature_map("onehot", D(3), D(2))
    assert fmap.dim == 6
    obs = torch.eye(3)[[0, 2, 1, 2]]  # encoded (one-hot) observations
    acts = torch.tensor([1, 0, 1, 1])
    phi = fmap(obs, acts)
    r = torch.arange(6, dtype=torch.float64).reshape(3, 2)  # r[s, a]
    assert torch.equal(phi @ r.reshape(-1), r[[0, 2, 1, 2], [1, 0, 1, 1]])
    assert torch.equal(phi.sum(1), torch.ones(4, dtype=torch.float64))


def test_rff_inner_products_approximate_the_gaussian_kernel():
    ell = 1.5
    fmap = make_feature_map("rff", A(-1, 1, (3,)), A(-1, 1, (1,)), rff_width=20000, rff_lengthscale=ell)
    z = torch.tensor([[0.1, -0.3, 0.5, 0.2], [0.9, 0.4, -0.2, -0.7], [0.1, -0.2, 0.4, 0.3]])
    phi = fmap(z[:, :3], z[:, 3:])
    gram = phi @ phi.T
    want = torch.exp(-(torch.cdist(z.double(), z.double()) ** 2) / (2 * ell**2))
    assert torch.allclose(gram, want, atol=0.03), (gram, want)


def test_user_feature_function_from_current_directory(tmp_path, monkeypatch):
    (tmp_path / "myfeats.py").write_text(
        "import torch\ndef phi(obs, actions, envf):\n    return torch.cat([obs, actions.reshape(-1, 1)], 1)\n"
        "def bad(obs, actions, envf):\n    return obs.sum()\n"
    )
    monkeypatch.chdir(tmp_path)
    fmap = make_feature_map("myfeats:phi", A(-1, 1, (2,)), A(-1, 1, (1,)))
    assert fmap.dim == 3
    with pytest.raises(ConfigError, match=r"\(N, d\)"):
        make_feature_map("myfeats:bad", A(-1, 1, (2,)), A(-1, 1, (1,)))
    with pytest.raises(ConfigError, match="onehot"):
        make_feature_map("onehot", A(-1, 1, (2,)), D(2))


# ---------------------------------------------------------------- segments
def test_segments_sum_features_and_never_cross_an_episode_end():
    T, n, d, L = 6, 2, 2, 3
    phi = np.arange(T * n * d, dtype=float).reshape(T, n, d)
    rew = np.ones((T, n))
    costs = np.zeros((T, n, 1))
    ended = np.zeros((T, n), bool)
    ended[1, 0] = True  # env 0's episode ends inside its first window: that window is dropped
    ended[5, 1] = True  # an end on the last step of a window is allowed
    obs = np.zeros((T, n, 4))
    acts = np.zeros((T, n), np.int64)
    segs = cut_segments(phi, rew, costs, ended, obs, acts, L, first_id=10, iteration=7)
    # windows in segment-major order: (w0, env0) dropped, (w0, env1), (w1, env0), (w1, env1)
    assert segs.ids.tolist() == [10, 11, 12]
    np.testing.assert_allclose(segs.phi[0], phi[0:3, 1].sum(0))
    np.testing.assert_allclose(segs.phi[1], phi[3:6, 0].sum(0))
    assert segs.true_return.tolist() == [3.0, 3.0, 3.0] and segs.iteration.tolist() == [7, 7, 7]


def test_buffer_keeps_the_most_recent_segments_and_finds_them_by_id():
    buf = SegmentBuffer(3)
    for start in (0, 2):
        k = 2
        buf.add(
            Segments(
                ids=np.arange(start, start + k),
                phi=np.arange(start, start + k, dtype=float)[:, None],
                perceived=np.zeros((k, 1)),
                rewards=np.zeros((k, 2)),
                costs=np.zeros((k, 1)),
                obs=np.zeros((k, 2, 1), np.float32),
                actions=np.zeros((k, 2), np.int64),
                iteration=np.zeros(k, np.int64),
                phi_steps=np.zeros((k, 0, 1), np.float32),
            )
        )
    assert buf.data.ids.tolist() == [1, 2, 3] and buf.next_id == 4
    assert buf.by_id([3, 1]).phi[:, 0].tolist() == [3.0, 1.0]
    with pytest.raises(KeyError):
        buf.by_id([0])


# ---------------------------------------------------------------- simulated raters
def _segs(returns, phi=None):
    k = len(returns)
    return Segments(
        ids=np.arange(k),
        phi=np.zeros((k, 1)) if phi is None else phi,
        perceived=np.asarray(returns, float)[:, None],
        rewards=np.asarray(returns, float)[:, None],
        costs=np.zeros((k, 1)),
        obs=np.zeros((k, 1, 1), np.float32),
        actions=np.zeros((k, 1), np.int64),
        iteration=np.zeros(k, np.int64),
        phi_steps=np.zeros((k, 0, 1), np.float32),
    )


def test_myopic_rater_discounts_early_steps_and_belief_error_enters_through_features():
    pool = RaterPool([Rater("a", gamma=0.5, lam=1e12)], feature_dim=2, seed=0)
    rew = np.array([[1.0, 2.0, 4.0]])
    phi = np.zeros((1, 3, 2))
    # sum_t gamma^(L-1-t) r_t = 0.25 * 1 + 0.5 * 2 + 1 * 4
    assert pool.perceive(phi, rew)[0, 0] == pytest.approx(5.25)
    pool = RaterPool([Rater("b", lam=2.0)], feature_dim=2, seed=3)
    phi = np.ones((1, 3, 2))
    assert pool.perceive(phi, np.zeros((1, 3)))[0, 0] == pytest.approx(3 * pool.xi[0].sum())


def test_rater_choices_follow_bradley_terry_and_irrationalities():
    n = 20000
    seg0, seg1 = _segs(np.full(n, 1.0)), _segs(np.zeros(n))
    pool = RaterPool([Rater("a", beta=0.7)], 1, seed=0)
    y = pool.answer(seg0, seg1, np.zeros(n, np.int64))
    assert (y == 0).mean() == pytest.approx(1 / (1 + math.exp(-0.7)), abs=0.01)  # P(σ0) = sigmoid(β Δ)
    pool = RaterPool([Rater("a", beta=1e6, mistake=0.2)], 1, seed=0)
    y = pool.answer(seg0, seg1, np.zeros(n, np.int64))
    assert (y == 1).mean() == pytest.approx(0.2, abs=0.01)  # a perfect rater's flips are the mistakes
    pool = RaterPool([Rater("a", beta=1e6, skip_below=0.5, equal_within=0.05)], 1, seed=0)
    y = pool.answer(_segs([1.0, 0.2, 1.0]), _segs([0.0, 0.3, 0.98]), np.zeros(3, np.int64))
    assert y.tolist() == [0, SKIP, EQUAL]


def test_rater_spec_validation_names_the_field_and_record():
    with pytest.raises(ConfigError, match=r"raters.beta\[1\]"):
        parse_preference_spec({"raters": [{"id": "a"}, {"id": "b", "beta": -1}]})
    with pytest.raises(ConfigError, match="did you mean 'lam'"):
        parse_preference_spec({"raters": [{"id": "a", "lamda": 1.0}]})
    with pytest.raises(ConfigError, match="did you mean 'segment_length'"):
        parse_preference_spec({"raters": [{"id": "a"}], "segment_lenght": 4})
    with pytest.raises(ConfigError, match="buffer"):
        parse_preference_spec({"raters": [{"id": "a"}], "buffer_size": 10, "queries": {"per_round": 20}})
    with pytest.raises(ConfigError, match="unique"):
        parse_preference_spec({"raters": [{"id": "a"}, {"id": "a"}]})
    spec = parse_preference_spec({"raters": [{"id": "a", "beta": 1e1}], "lcb_quantile": 5e-2})
    assert spec.raters[0].beta == 10.0 and spec.lcb_quantile == 0.05


# ---------------------------------------------------------------- query rules
def test_bald_and_disagreement_scores_by_hand():
    phi = torch.tensor([[1.0], [0.0], [0.0]], dtype=torch.float64)
    pairs = torch.tensor([[0, 1], [1, 2]])
    theta = torch.tensor([[2.0], [-2.0]], dtype=torch.float64)  # two draws that disagree on pair 0
    p = torch.sigmoid(torch.tensor([2.0, -2.0], dtype=torch.float64))
    h = lambda q: -(q * q.log() + (1 - q) * (1 - q).log())
    returns = theta @ phi.T
    bald = pair_scores("bald", returns, pairs)
    assert bald[0].item() == pytest.approx((h(p.mean()) - h(p).mean()).item())
    assert bald[1].item() == pytest.approx(0.0, abs=1e-12)  # identical segments: nothing to learn
    dis = pair_scores("disagreement", returns, pairs)
    assert dis[0].item() == pytest.approx(p.var().item()) and dis[1].item() == 0.0


def test_select_pairs_asks_the_informative_pair_first_and_top_two_picks_the_draws_best():
    gen = torch.Generator().manual_seed(0)
    phi = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], dtype=torch.float64)
    theta = torch.tensor([[1.0, 0.1], [0.1, 1.0], [1.0, 0.2], [0.2, 1.0]], dtype=torch.float64)
    # the draws disagree only about segments 1 vs 2
    pair = select_pairs("bald", theta @ phi.T, 1, gen, candidates=200)[0].tolist()
    assert sorted(pair) == [1, 2]
    tt = select_pairs("top-two", theta @ phi.T, 50, gen)
    assert set(map(tuple, tt.tolist())) <= {(1, 2), (2, 1)}
    rp = random_pairs(5, 1000, gen)
    assert (rp[:, 0] != rp[:, 1]).all() and rp.max() == 4 and rp.min() == 0


# ---------------------------------------------------------------- posterior
def _bt_data(n, theta, beta, seed):
    rng = np.random.default_rng(seed)
    x0, x1 = rng.normal(size=(n, len(theta))), rng.normal(size=(n, len(theta)))
    p0 = 1 / (1 + np.exp(-beta * (x0 - x1) @ theta))
    y = (rng.random(n) >= p0).astype(int)
    return x0, x1, y


def test_posterior_recovers_theta_and_concentrates_with_labels():
    theta = np.array([1.0, -0.5, 0.25])
    post = LinearRewardPosterior(3, ["a"], beta=[2.0], lam=[1e3], competence="known", seed=0)
    sds = []
    for k in range(3):
        x0, x1, y = _bt_data(200, theta, 2.0, k)
        post.add(x0, x1, y, np.zeros(200))
        post.update()
        sds.append(post.cov().diagonal().sqrt().max().item())
    m = post.mean().numpy()
    assert np.allclose(m, theta, atol=0.2), m
    assert sds[2] < sds[0] / 1.5  # 600 vs 200 labels: sd shrinks roughly as 1/sqrt(n)
    draws = post.sample(4000)
    assert torch.allclose(draws.mean(0), post.mean(), atol=0.02)
    # lower quantile of <theta, phi>: mean + z_q * sd exactly for the Gaussian posterior
    phi = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]], dtype=torch.float64)
    sd = ((phi @ post.cov()) * phi).sum(1).sqrt()
    z = -1.2815515655446004  # Phi^-1(0.1)
    assert torch.allclose(post.quantile_reward(phi, 0.1), phi @ post.mean() + z * sd)


def test_inferred_competence_ranks_the_expert_above_the_novice():
    theta = np.array([1.0, -1.0])
    post = LinearRewardPosterior(2, ["expert", "novice"], beta=[1, 1], lam=[1, 1], competence="infer")
    for r, beta in ((0, 8.0), (1, 0.3)):
        x0, x1, y = _bt_data(400, theta, beta, r)
        post.add(x0, x1, y, np.full(400, r))
    post.update()
    b_exp, b_nov = post.beta
    assert b_exp > 5 * b_nov, post.beta


@pytest.mark.parametrize("engine", ["laplace", "bootstrap", "svi"])
def test_engines_agree_on_the_reward_posterior(engine):
    theta = np.array([0.8, -0.4])
    opts = {"max_steps": 1500} if engine == "svi" else {}
    post = LinearRewardPosterior(
        2, ["a"], beta=[1.0], lam=[1e3], engine=engine, engine_options=opts, num_samples=400, seed=1
    )
    x0, x1, y = _bt_data(300, theta, 1.0, 5)
    post.add(x0, x1, y, np.zeros(300))
    post.update()
    ref = LinearRewardPosterior(2, ["a"], beta=[1.0], lam=[1e3], engine="laplace")
    ref.add(x0, x1, y, np.zeros(300))
    ref.update()
    assert torch.allclose(post.mean(), ref.mean(), atol=0.06)
    sd, sd_ref = post.cov().diagonal().sqrt(), ref.cov().diagonal().sqrt()
    assert torch.allclose(sd, sd_ref, rtol=0.25), (sd, sd_ref)


@pytest.mark.parametrize(
    "env_id, weights",
    [
        ("bayescrl/PointCircle-v0", {"ring_angular_progress": 1.0, "speed": 0.0}),
        ("bayescrl/PointReach-v0", {"distance_progress": 1.0, "speed": 0.0}),
        # gymnasium Ant-v5: forward weight 1, ctrl cost 0.5, contact cost 5e-4, healthy reward 1
        ("bayescrl/AntRun-v0", {"x_velocity": 1.0, "ctrl_sq": -0.5, "contact_sq": -5e-4, "healthy": 1.0}),
    ],
)
def test_task_rewards_are_linear_in_their_env_features(env_id, weights):
    from bayescrl.prefrl.features import reward_linearity

    fit = reward_linearity(env_id, steps=300, seed=1)
    assert fit["r2"] > 0.9999
    for name, w in weights.items():
        assert fit["weights"][name] == pytest.approx(w, abs=1e-3 + 1e-3 * abs(w)), (name, fit["weights"])


def test_cost_level_needs_safety_labels_not_only_comparisons():
    """Comparisons identify cost differences only; safety labels against the tolerance fix the level."""
    from bayescrl.prefrl.reward_model import CostPosterior

    rng = np.random.default_rng(0)
    kappa = np.array([0.0, 1.0])  # per-step cost: 0 in the safe state, 1 in the hazard
    n1 = rng.integers(0, 6, size=(2, 400))
    phi = np.stack([5 - n1, n1], -1).astype(float)  # 5-step segments: (#safe, #hazard) steps
    seg = [_segs(np.zeros(400), phi=phi[k]) for k in range(2)]
    c0, c1 = phi[0] @ kappa, phi[1] @ kappa
    y = (rng.random(400) >= 1 / (1 + np.exp(-1.5 * (c0 - c1)))).astype(int)  # 0: seg 0 costlier
    who = np.zeros(400, np.int64)
    only_pairs = CostPosterior(2, ["s"], [1.5], [100.0], threshold=2.0)
    only_pairs.add_comparisons(seg[0], seg[1], y, who)
    only_pairs.update()
    m = only_pairs.mean().numpy()
    assert m[1] - m[0] == pytest.approx(1.0, abs=0.15)  # the difference is learned ...
    assert abs(m.sum() - 1.0) > 0.5  # ... the level is not (it stays near the prior's 0)
    both = CostPosterior(2, ["s"], [1.5], [100.0], threshold=2.0)
    both.add_comparisons(seg[0], seg[1], y, who)
    unsafe = (rng.random(400) < 1 / (1 + np.exp(-1.5 * (c0 - 2.0)))).astype(int)
    both.add_safety(seg[0], unsafe, who)
    both.update()
    np.testing.assert_allclose(both.mean().numpy(), kappa, atol=0.15)
    # the constraint sees an upper quantile: above the mean, by z_0.9 posterior sds
    step = torch.tensor([[0.0, 1.0]], dtype=torch.float64)
    assert both.quantile_cost(step, 0.9).item() > both.quantile_cost(step, 0.5).item()


def test_reward_ensemble_learns_the_reward_and_is_unsure_away_from_its_data():
    from types import SimpleNamespace

    from bayescrl.prefrl.ensemble import EnsembleRewardPosterior

    rng = np.random.default_rng(0)
    d, L, N = 3, 4, 300
    theta = np.array([1.0, -0.5, 0.0])

    def segs(n, scale=1.0):
        ps = (scale * rng.uniform(-1, 1, size=(n, L, d))).astype(np.float32)
        return SimpleNamespace(phi_steps=ps, phi=ps.sum(1).astype(np.float64))

    s0, s1 = segs(N), segs(N)
    y = (rng.random(N) < 1 / (1 + np.exp(-3.0 * (s1.phi - s0.phi) @ theta))).astype(int)  # 1: s1 preferred
    post = EnsembleRewardPosterior(
        d, ["a"], beta=[3.0], lam=[100.0], members=6, hidden=(32,), steps=300, seed=0
    )
    post.add_segments(s0, s1, y, np.zeros(N, np.int64))
    post.update()
    test = segs(200)
    R = post.returns(test, 0)  # (members, K)
    assert R.shape == (6, 200)
    assert np.corrcoef(R.mean(0).numpy(), test.phi @ theta)[0, 1] > 0.95
    near = post.member_rewards(torch.as_tensor(test.phi_steps[:, 0])).std(0).mean()
    far = post.member_rewards(torch.as_tensor(5 * test.phi_steps[:, 0])).std(0).mean()
    assert far > 2 * near  # the members agree where the labels are and disagree elsewhere
    assert 0 <= post.draw() < 6


def test_shipped_preference_specs_are_valid():
    from pathlib import Path

    files = sorted((Path(__file__).parents[1] / "examples" / "prefrl").glob("*.yaml"))
    assert len(files) >= 3
    for f in files:
        parse_preference_spec(f)


def test_round_summaries_match_arviz():
    import arviz as az

    from bayescrl.prefrl.reward_model import _hdi

    x = torch.randn(3000, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) ** 2
    lo, hi = _hdi(x, 0.94)
    np.testing.assert_allclose(np.stack([lo, hi], 1), az.hdi(x.numpy()[None], hdi_prob=0.94))
    theta = np.array([1.0, -0.5])
    post = LinearRewardPosterior(2, ["a"], beta=[2.0], lam=[1e3], competence="known")
    x0, x1, y = _bt_data(200, theta, 2.0, 0)
    post.add(x0, x1, y, np.zeros(200))
    post.update()
    table = post.summary()["arviz_summary"]
    ref = az.summary(az.from_dict(posterior={"theta": post.sample(200_000).numpy()[None]}), kind="stats")
    for i in range(2):
        for col in ("mean", "sd", "hdi_3%", "hdi_97%"):
            assert table[f"theta[{i}]"][col] == pytest.approx(ref.loc[f"theta[{i}]", col], abs=0.01)

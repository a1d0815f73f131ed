"""The rater layer (bayescrl.raters): schema, Bradley–Terry likelihood, competence estimators, simulated
raters, record id checks — against hand-computed values and closed forms."""

from __future__ import annotations

import ast
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from bayescrl.raters import (
    EQUAL,
    SKIP,
    BeliefRater,
    CompetencePrior,
    Rater,
    RaterPool,
    check_rater_ids,
    label,
    log_likelihood,
    parse_raters,
    prob_first,
)
from bayescrl.raters.competence import (
    beta_entropy,
    beta_mle,
    beta_mle_given_theta,
    beta_posterior_mean,
)
from bayescrl.utils.errors import ConfigError, DataError

D64 = torch.float64


# ------------------------------------------------------------------------------------------ schema
def test_schema_is_strict_and_names_the_closest_key():
    with pytest.raises(ConfigError, match=r"raters\[1\]\.lamda = 2\.0: unknown key; did you mean 'lam'\?"):
        parse_raters([{"id": "a"}, {"id": "b", "lamda": 2.0}])
    # a family may accept fewer keys: B-Pref's gamma is refused where it means nothing
    with pytest.raises(ConfigError, match=r"raters\[0\]\.gamma .*unknown key"):
        parse_raters([{"id": "a", "gamma": 0.9}], keys=("id", "beta", "lam"))
    with pytest.raises(ConfigError, match=r"raters\.id\[1\] = 'a': duplicate rater id"):
        parse_raters([{"id": "a"}, {"id": "a"}])
    with pytest.raises(ConfigError, match=r"raters\.lam\[0\] = 0\.0: must be > 0"):
        parse_raters([{"id": "a", "lam": 0.0}])
    with pytest.raises(ConfigError, match=r"raters\.beta\[0\] = -1\.0: must be >= 0"):
        parse_raters([{"id": "a", "beta": -1.0}])
    with pytest.raises(ConfigError, match=r"raters\.beta\.scale\[0\] = 0\.0: must be > 0"):
        parse_raters([{"id": "a", "beta": {"prior": "lognormal", "loc": 0.0, "scale": 0.0}}])
    with pytest.raises(ConfigError, match=r"raters\.beta\.prior\[0\] = 'cauchy'"):
        parse_raters([{"id": "a", "beta": {"prior": "cauchy"}}])
    with pytest.raises(ConfigError, match=r"raters\.beta\[0\] .*a prior is not accepted"):
        parse_raters([{"id": "a", "beta": {"prior": "lognormal", "loc": 0, "scale": 1}}], priors=False)
    with pytest.raises(ConfigError, match=r"raters\.mistake\[0\] = 0\.7: must be <= 0\.5"):
        parse_raters([{"id": "a", "mistake": 0.7}])
    with pytest.raises(ConfigError, match=r"rater\.lam = 0\.0: must be > 0"):
        Rater("a", 1.0, 0.0)  # the dataclass validates too


def test_schema_known_values_priors_defaults_and_ids():
    a, b, c = parse_raters(
        [
            {"id": "a", "beta": 10, "lam": "1e4"},  # YAML 1.1 reads 1e4 as a string
            {"beta": {"prior": "lognormal", "loc": 0.5, "scale": 0.5}},
            {"id": "c"},
        ],
        defaults={"lam": 1000.0},
    )
    assert (a.id, a.beta, a.lam, a.known) == ("a", 10.0, 1e4, True)
    assert b.id == "r1" and isinstance(b.beta, CompetencePrior) and not b.known
    assert b.beta.mean == pytest.approx(math.exp(0.5 + 0.5**2 / 2))  # LogNormal mean
    assert b.beta_value() == pytest.approx(math.exp(0.625)) and b.lam == 1000.0
    assert (c.beta, c.lam, c.expert, c.gamma, c.mistake) == (1.0, 1000.0, "bt", 1.0, 0.0)
    (u,) = parse_raters([{"id": "u"}], unknown_beta=True)
    assert u.beta is None and u.beta_value(default=3.0) == 3.0
    assert parse_raters([b.to_dict()])[0] == b  # a declaration round-trips


def test_rater_ids_of_records_must_be_declared():
    raters = parse_raters([{"id": "a"}, {"id": "b"}])
    check_rater_ids(["a", None, "b", "a"], raters)  # None: a record without a rater column
    with pytest.raises(
        DataError, match=r"^data\.rater\[2\] = 'zed': unknown rater id \(declared: \['a', 'b'\]\)$"
    ):
        check_rater_ids(["a", "b", "zed", "a"], raters)
    with pytest.raises(DataError, match=r"none declared"):
        check_rater_ids(["a"], [])


# ------------------------------------------------------------------------------------------ likelihood
def test_bradley_terry_likelihood_against_a_hand_computed_value():
    x0, x1 = torch.tensor([1.0, 0.0], dtype=D64), torch.tensor([0.0, 1.0], dtype=D64)
    vt = torch.tensor([0.5, -0.25], dtype=D64)  # <x0 - x1, vt> = 0.75, beta * 0.75 = 1.5
    p0 = 1.0 / (1.0 + math.exp(-1.5))  # 0.8175744761936437
    assert float(prob_first(x0, x1, vt, 2.0)) == pytest.approx(p0, abs=1e-15)
    ll = log_likelihood(x0.expand(2, 2), x1.expand(2, 2), torch.tensor([0, 1]), vt, 2.0)
    torch.testing.assert_close(ll, torch.tensor([math.log(p0), math.log(1 - p0)], dtype=D64))
    # batched over a leading seed dimension with one β per seed
    beta = torch.tensor([2.0, 0.0], dtype=D64)
    assert prob_first(x0.expand(2, 2), x1.expand(2, 2), vt, beta).tolist() == pytest.approx([p0, 0.5])


# ------------------------------------------------------------------------------------------ competence
def test_beta_mle_given_theta_is_the_closed_form():
    """k of n comparisons agree with θ_ref, all with margin a: Σ m σ(−βm) = 0 gives β̂ = ln(k/(n−k)) / a."""
    a = 0.7
    m = torch.tensor([[a, a, a, -a], [a, a, -a, -a]], dtype=D64)
    beta, at_bound = beta_mle_given_theta(m)
    torch.testing.assert_close(beta, torch.tensor([math.log(3.0) / a, 0.0], dtype=D64), atol=1e-9, rtol=0)
    assert not at_bound.any()
    beta, at_bound = beta_mle_given_theta(torch.tensor([[a, a]], dtype=D64), beta_max=50.0)
    assert at_bound.tolist() == [True] and beta.tolist() == [50.0]  # every label agrees: +∞, flagged


def test_marginal_beta_mle_reduces_to_the_closed_form_when_theta_is_known():
    """A prior concentrated at θ and λ → ∞ make p(D | β) the plain likelihood at θ, so the marginal
    MLE is the closed form ln(k/(n−k)) / a (up to the grid's spacing)."""
    theta = torch.tensor([1.0, 0.0], dtype=D64)
    x0 = torch.tensor([[0.5, 0.0]] * 4, dtype=D64)[None]  # margin a = 0.5
    x1 = torch.zeros_like(x0)
    y = torch.tensor([[0, 0, 0, 1]])  # 3 of 4 prefer x0
    grid = torch.logspace(-1, 1, 2001, dtype=D64)
    b = beta_mle(x0, x1, y, theta, 1e-10 * torch.eye(2, dtype=D64), 1e6, grid)
    assert float(b) == pytest.approx(math.log(3.0) / 0.5, rel=3e-3)


def test_beta_posterior_mean_without_information_is_the_prior_mean():
    """Uninformative comparisons (x0 = x1) leave p(β | D) = p(β): its mean is the LogNormal mean."""
    x = torch.ones(1, 5, 2, dtype=D64)
    prior = CompetencePrior.lognormal(0.3, 0.4)
    m = beta_posterior_mean(
        x, x, torch.zeros(1, 5), torch.zeros(2, dtype=D64), torch.eye(2, dtype=D64), 10.0, prior
    )
    assert float(m) == pytest.approx(math.exp(0.3 + 0.4**2 / 2), rel=1e-6)


def test_entropy_rule_closed_form_and_caps():
    items = torch.tensor([[0, 0, 1, 1], [2, 2, 2, 2]])
    b = beta_entropy(items, 5, c=2.0)
    assert b.tolist() == pytest.approx([2.0 / math.log(2), 1e3])  # H = 0: the documented cap
    b = beta_entropy(items, 5, c=2.0, beta_max=None)
    assert b.tolist() == pytest.approx([2.0 / math.log(2), 2.0 / 1e-12])
    with pytest.raises(ConfigError, match="model.entropy_c"):
        beta_entropy(items, 5, c=0.0, field="model.entropy_c")


# ------------------------------------------------------------------------------------------ simulated
def test_labels_greedy_ties_and_perfect_knowledge():
    x0 = torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=D64)
    x1 = torch.tensor([[0.0, 1.0], [0.0, 0.0]], dtype=D64)  # second pair: an exact tie
    vt = torch.tensor([1.0, 2.0], dtype=D64).expand(2, 2)
    g = torch.Generator().manual_seed(0)
    state = g.get_state()
    assert label(x0, x1, vt, 1.0, "greedy", g).tolist() == [1, 0]  # tie -> Y = 0, no draw
    assert torch.equal(g.get_state(), state)
    coins = torch.stack([label(x0, x1, vt, 1.0, "greedy", g, greedy_ties="coin") for _ in range(400)])
    assert coins[:, 0].eq(1).all() and 0.4 < coins[:, 1].double().mean() < 0.6
    # λ = ∞: the belief is θ exactly
    theta = torch.tensor([0.3, -0.2], dtype=D64)
    r = BeliefRater.sample(theta, 3, 2.0, math.inf, generator=torch.Generator().manual_seed(1))
    assert torch.equal(r.vartheta, theta.expand(3, 2))


def _segs(true_return, perceived=None):
    tr = np.asarray(true_return, dtype=float)
    p = tr[:, None] if perceived is None else np.asarray(perceived, dtype=float)[:, None]
    return SimpleNamespace(
        perceived=p, true_return=tr, costs=np.zeros((len(tr), 1)), phi=np.zeros((len(tr), 1))
    )


def test_simulated_irrationalities_mistake_skip_equal_and_myopia():
    n = 4000
    s0, s1 = _segs(np.ones(n)), _segs(np.zeros(n))
    pool = RaterPool([Rater("m", 1e6, 1e12, mistake=0.2)], 1, seed=0)  # careful but slips 20 %
    y = pool.answer(s0, s1, np.zeros(n, np.int64))
    assert abs(float((y == 1).mean()) - 0.2) < 4 * math.sqrt(0.2 * 0.8 / n)
    pool = RaterPool([Rater("s", 1e6, 1e12, skip_below=0.5, equal_within=0.05)], 1, seed=0)
    y = pool.answer(_segs([1.0, 0.2, 1.0]), _segs([0.0, 0.3, 0.98]), np.zeros(3, np.int64))
    assert y.tolist() == [0, SKIP, EQUAL]
    # myopic γ: R̃ = Σ_t γ^{L-1-t} r_t (λ huge: no belief error)
    pool = RaterPool([Rater("g", 1.0, 1e12, gamma=0.5)], 1, seed=0)
    perceived = pool.perceive(np.zeros((1, 3, 1)), np.array([[1.0, 2.0, 4.0]]))
    assert perceived[0, 0] == pytest.approx(0.25 * 1.0 + 0.5 * 2.0 + 4.0)


def test_the_rater_layer_imports_only_utils():
    pkg = Path(__file__).resolve().parents[1] / "bayescrl" / "raters"
    for path in pkg.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bayescrl."):
                assert node.module.split(".")[1] in ("utils", "raters"), (path.name, node.module)

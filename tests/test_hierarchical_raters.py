"""Hierarchical rater competence (bayescrl.inference.hierarchical): known answers on simulated pools."""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from bayescrl.inference import hierarchical as H
from bayescrl.inference.bootstrap import map_estimate
from bayescrl.inference.hierarchical import PoolRater, RaterPrior, fit_rater_pool, simulate_pool
from bayescrl.models.linear import BTLinearProblem
from bayescrl.utils import ConfigError, set_torch_threads

set_torch_threads()

# an expert (known competence, anchors the pool), a deliberate rater, a deliberate-but-misinformed rater
# (high β, low λ) and a near-random rater (tiny β)
BETAS, LAMS = [10.0, 5.0, 10.0, 0.2], [30.0, 3.0, 0.3, 1.0]
IDS = ["expert", "ok", "misinformed", "random"]
SPEED = Path(__file__).parents[1] / "benchmarks" / "results" / "raters" / "rater_pool_speed.json"
TOL_Z = 0.5


@pytest.fixture(scope="module")
def pool():
    return simulate_pool(3, BETAS, LAMS, 150, seed=1)


@pytest.fixture(scope="module")
def fast(pool):
    raters = [PoolRater("expert", beta=10.0, lam=30.0), "ok", "misinformed", "random"]
    return fit_rater_pool(pool["X0"], pool["X1"], pool["y"], pool["rater"], raters)


def test_fast_engine_ranks_lambda_and_flags_the_misinformed_rater(fast):
    table = {r["rater"]: r for r in fast.rater_table()}
    assert fast.diagnostics["converged"]
    # λ of the deliberate raters ranked as the truth (3 > 0.3), with the truth inside the 90 % intervals
    assert table["ok"]["lam_mean"] > 3 * table["misinformed"]["lam_mean"]
    assert table["misinformed"]["lam_lo"] < 0.3 < table["misinformed"]["lam_hi"]
    assert table["ok"]["lam_lo"] < 3.0 < table["ok"]["lam_hi"]
    # the misinformed rater is deliberate (β well above the random rater's) but not trusted
    assert table["misinformed"]["beta_lo"] > table["random"]["beta_hi"]
    verdict = {k: v["verdict"] for k, v in table.items()}
    assert verdict == {
        "expert": "trusted",
        "ok": verdict["ok"],  # trusted or uncertain: λ = 3 sits near the threshold
        "misinformed": "deliberate-but-misinformed",
        "random": "random",
    }
    assert verdict["ok"] in ("trusted", "uncertain")


def test_known_competence_anchors_the_pool(pool, fast):
    b, lam = fast.draws["beta"][..., 0], fast.draws["lam"][..., 0]
    assert torch.all(b == 10.0) and torch.all(lam == 30.0)
    assert bool(fast.known_beta[0]) and not bool(fast.known_beta[1])
    # anchored, θ's scale is recovered (cosine and norm close to the truth)
    th = fast.theta_mean
    assert torch.nn.functional.cosine_similarity(th, pool["theta"], 0) > 0.97
    assert 0.7 < float(th.norm() / pool["theta"].norm()) < 1.4


def test_no_known_competence_warns_that_only_the_prior_fixes_the_scale(pool):
    with pytest.warns(UserWarning, match="only the prior"):
        post = fit_rater_pool(pool["X0"], pool["X1"], pool["y"], pool["rater"], IDS)
    assert any("only the prior" in w for w in post.diagnostics["warnings"])


def test_single_rater_keeps_lambda_at_its_prior():
    s = simulate_pool(2, [5.0], [0.5], 120, seed=3)
    prior = RaterPrior(lam_loc=math.log(2.0), lam_scale=0.5, lam_pool_scale=0.0)
    with pytest.warns(UserWarning):
        post = fit_rater_pool(s["X0"], s["X1"], s["y"], s["rater"], ["solo"], prior, num_draws=4000)
    assert bool(post.lam_from_prior[0])
    lam = post.flat("lam")[:, 0]
    # λ draws are the prior's: median 2, log-sd 0.5 (not fitted towards the truth 0.5)
    assert float(lam.log().median()) == pytest.approx(math.log(2.0), abs=0.05)
    assert float(lam.log().std()) == pytest.approx(0.5, rel=0.08)
    assert post.rater_table()[0]["verdict"] == "uncertain"
    assert "prior only" in post.summary()
    # β is still inferred from the data (its posterior is narrower than the prior's log-sd 1.5)
    assert float(post.flat("beta")[:, 0].log().std()) < 0.8


def test_fast_engine_theta_agrees_with_the_stored_nuts_reference():
    """The agreement case of benchmarks/rater_pool_speed.py (d = 4, N = 400, R = 4; NUTS 2 × 150 draws
    stored in its JSON): laplace-eb's θ mean within TOL_Z NUTS posterior sd of NUTS' mean on every
    coordinate, its sd within 35 %, and the λ of the misinformed rater the smallest in both."""
    ref = json.loads(SPEED.read_text())["small"]
    case, nuts = ref["case"], ref["engines"]["nuts"]
    s = simulate_pool(case["d"], case["betas"], case["lams"], case["n_per_rater"], seed=case["seed"])
    raters = [PoolRater("anchor", beta=case["betas"][0], lam=case["lams"][0])] + case["raters"][1:]
    fast = fit_rater_pool(s["X0"], s["X1"], s["y"], s["rater"], raters, seed=case["seed"])
    m_n, sd_n = torch.tensor(nuts["theta_mean"]), torch.tensor(nuts["theta_sd"])
    assert torch.all((fast.theta_mean - m_n).abs() < TOL_Z * sd_n)
    assert torch.all((fast.theta_cov.diagonal().sqrt() / sd_n - 1).abs() < 0.35)
    lam_f = fast.flat("lam").mean(0)
    assert int(lam_f[1:].argmin()) == int(torch.tensor(nuts["lam_mean"][1:]).argmin()) == 1


@pytest.mark.parametrize("prior", [None, RaterPrior(lam_pool_scale=0.0)])  # pooled (default), independent
def test_nuts_and_svi_engines_return_the_pool_layout(prior):
    s = simulate_pool(2, [5.0, 5.0], [10.0, 1.0], 20, seed=0)
    raters = [PoolRater("a", beta=5.0, lam=10.0), "b"]
    for engine, kw in (
        ("nuts", {"num_samples": 4, "warmup": 4, "num_chains": 1}),
        ("svi", {"max_steps": 30, "min_steps": 10, "window": 5, "check": False}),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tiny budgets: convergence warnings expected
            post = fit_rater_pool(
                s["X0"], s["X1"], s["y"], s["rater"], raters, prior, engine=engine, num_draws=7, **kw
            )
        n = 4 if engine == "nuts" else 7
        assert post.draws["theta"].shape == (1, n, 2) and post.draws["vartheta"].shape == (1, n, 2, 2)
        assert post.draws["beta"].shape == (1, n, 2)
        assert torch.all(post.draws["beta"][..., 0] == 5.0) and torch.all(post.draws["lam"][..., 0] == 10.0)
        assert torch.all(post.draws["lam"][..., 1] > 0) and post.draws["lam"][..., 1].std() > 0


def test_bad_input_names_the_field(pool):
    args = (pool["X0"], pool["X1"], pool["y"], pool["rater"])
    with pytest.raises(ConfigError) as e:
        fit_rater_pool(*args, IDS, RaterPrior(lam_scale=0.0))
    assert e.value.field == "prior.lam_scale"
    with pytest.raises(ConfigError) as e:
        fit_rater_pool(*args, IDS, {"beta_scale": -1.0})
    assert e.value.field == "prior.beta_scale"
    with pytest.raises(ConfigError) as e:
        fit_rater_pool(pool["X0"][:2], pool["X1"][:2], pool["y"][:2], ["ok", "carol"], IDS)
    assert e.value.field == "rater_index" and e.value.value == "carol"
    with pytest.raises(ConfigError) as e:
        fit_rater_pool(*args, IDS[:3])  # rater 3 in the data is not declared
    assert e.value.field == "rater_index"
    with pytest.raises(ConfigError) as e:
        fit_rater_pool(*args, [PoolRater("expert", beta=-1.0), "ok", "misinformed", "random"])
    assert e.value.field == "raters.beta"


def test_unconverged_engine_warns(pool):
    raters = [PoolRater("expert", beta=10.0, lam=30.0), "ok", "misinformed", "random"]
    with pytest.warns(RuntimeWarning, match="did not converge"):
        post = fit_rater_pool(pool["X0"], pool["X1"], pool["y"], pool["rater"], raters, max_iter=2)
    assert not post.diagnostics["converged"]


def test_arviz_table_and_plot(fast, tmp_path):
    idata = fast.to_arviz()
    assert idata.posterior["beta"].dims == ("chain", "draw", "rater")
    assert list(idata.posterior["lam"].coords["rater"].values) == IDS
    assert idata.posterior["vartheta"].shape[-2:] == (4, 3)
    row = fast.rater_table()[2]
    assert row["rater"] == "misinformed" and row["lam_lo"] <= row["lam_mean"] <= row["lam_hi"]
    fig = fast.plot(tmp_path / "raters.png", truth={"beta": BETAS, "lam": LAMS})
    assert (tmp_path / "raters.png").stat().st_size > 1000
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()][
        2
    ] == "misinformed (deliberate-but-misinformed)"


def test_rater_objects_with_id_beta_lam_are_accepted(pool, fast):
    """Objects with ``id``, ``beta``, ``lam`` (like bayescrl.raters.Rater): numbers known, priors inferred."""
    prior_obj = object()
    raters = [SimpleNamespace(id="expert", beta=10.0, lam=30.0)] + [
        SimpleNamespace(id=r, beta=None, lam=prior_obj) for r in IDS[1:]
    ]
    post = fit_rater_pool(pool["X0"], pool["X1"], pool["y"], pool["rater"], raters)
    assert torch.equal(post.draws["theta"], fast.draws["theta"])
    assert post.known_beta.tolist() == [True, False, False, False]


def test_competence_gradient_matches_finite_differences_of_the_resolved_evidence(pool):
    """The laplace-eb objective's autograd gradient (MAP response by implicit differentiation) equals
    central differences of the objective with the MAP re-solved at every perturbed (log β, log λ)."""
    R, d = 4, 3
    dt = torch.float64
    p = H._pool(
        pool["X0"],
        pool["X1"],
        pool["y"],
        pool["rater"],
        R,
        torch.zeros(d, dtype=dt),
        torch.eye(d, dtype=dt),
        "cpu",
        dt,
    )
    prob = BTLinearProblem.from_data(
        torch.zeros(d),
        torch.eye(d),
        [1.0] * R,
        [1.0] * R,
        x0=pool["X0"],
        x1=pool["X1"],
        y=pool["y"],
        rater=pool["rater"],
    )
    ones = torch.ones(R, dtype=dt)
    prior = RaterPrior()

    def F(h: torch.Tensor) -> torch.Tensor:
        hb, hl = h[:R], h[R:]
        res = map_estimate(replace(prob, beta=hb.detach().exp(), lam=hl.detach().exp()), tol=1e-12)
        th, V = res.theta[0], res.vartheta[0]
        return H._objective(p, prior, hb[None], hl[None], th[None], V[None], ones, ones)[0][0]

    h0 = torch.tensor([2.0, 1.5, 2.2, -0.5, 3.0, 1.0, -1.0, 0.2], dtype=dt, requires_grad=True)
    (g,) = torch.autograd.grad(F(h0), h0)
    eps = 1e-5
    fd = torch.stack(
        [
            (F(h0.detach() + eps * e) - F(h0.detach() - eps * e)) / (2 * eps)
            for e in torch.eye(2 * R, dtype=dt)
        ]
    )
    assert torch.allclose(g, fd.detach(), rtol=1e-5, atol=1e-6)


def _tiny_laplace(seed: int = 3):
    """A tiny pool (d = 3, R = 3) at its converged MAP: the pool, h, the MAP and the Laplace factors."""
    R, d = 3, 3
    dt = torch.float64
    s = simulate_pool(d, [4.0, 2.0, 8.0], [2.0, 0.5, 1.0], [12, 9, 15], seed=seed)
    p = H._pool(
        s["X0"], s["X1"], s["y"], s["rater"], R, torch.zeros(d, dtype=dt), torch.eye(d, dtype=dt), "cpu", dt
    )
    prob = BTLinearProblem.from_data(
        torch.zeros(d), torch.eye(d), [1.0] * R, [1.0] * R, x0=s["X0"], x1=s["X1"], y=s["y"], rater=s["rater"]
    )
    h = torch.tensor([1.2, 0.4, 2.0, 0.6, -0.7, 0.1], dtype=dt)
    res = map_estimate(replace(prob, beta=h[:R].exp(), lam=h[R:].exp()), tol=1e-12)
    th, V = res.theta[0][None], res.vartheta[0][None]
    ones = torch.ones(R, dtype=dt)
    lp = H._laplace(p, RaterPrior(), h[None, :R], h[None, R:], th, V, ones, ones)
    return p, prob, h, th, V, lp, ones


def test_block_arrow_solve_and_log_det_match_the_dense_hessian():
    """The structured (block-arrow) solve of laplace-eb equals a dense solve with the assembled Hessian
    of lemma `mapestimatelemma` (bootstrap's dense assembly), and its log det that of the dense matrix."""
    p, prob, h, th, V, lp, _ = _tiny_laplace()
    R, d = 3, 3
    res = map_estimate(replace(prob, beta=h[:R].exp(), lam=h[R:].exp()), tol=1e-12)  # dense Hessian
    Hd = res.hessian.reshape((R + 1) * d, (R + 1) * d)
    gen = torch.Generator().manual_seed(0)
    r_t = torch.randn(1, 2, d, generator=gen, dtype=torch.float64)
    r_V = torch.randn(1, 2, R, d, generator=gen, dtype=torch.float64)
    x_t, x_V = H._block_solve(lp, r_t, r_V)
    dense = torch.linalg.solve(Hd, torch.cat([r_t[0], r_V[0].reshape(2, R * d)], -1).T).T
    assert torch.allclose(torch.cat([x_t[0], x_V[0].reshape(2, R * d)], -1), dense, rtol=1e-10, atol=1e-12)
    logdet_blocks = (
        2 * torch.linalg.cholesky(torch.linalg.inv(lp.ainv[0])).diagonal(dim1=-2, dim2=-1).log().sum()
    )
    logdet_blocks = logdet_blocks + 2 * lp.chol_s[0].diagonal().log().sum()
    assert torch.allclose(logdet_blocks, torch.logdet(Hd), rtol=1e-10)


@pytest.mark.parametrize("prior", [RaterPrior(), RaterPrior(beta_pool_scale=3.0, lam_pool_scale=2.0)])
def test_analytic_competence_gradient_matches_autograd_of_the_laplace_objective(prior):
    """laplace-eb's analytic dF/d(log β, log λ) (trace terms and the MAP's implicit response) equals the
    autograd gradient of the reference objective (one Newton correction differentiated), and F agrees;
    with the independent and with the pooled (hierarchical) competence prior."""
    p, _, h, th, V, lp, ones = _tiny_laplace()
    lp = H._laplace(p, prior, h[None, :3], h[None, 3:], th, V, ones, ones)
    R = 3
    hh = h.clone().requires_grad_(True)
    f = H._objective(p, prior, hh[None, :R], hh[None, R:], th, V, ones, ones)[0][0]
    (g,) = torch.autograd.grad(f, hh)
    ga = H._evidence_grad(p, prior, lp, h[None, :R], h[None, R:], ones, ones)[0]
    assert torch.allclose(lp.F[0], f.detach(), rtol=1e-12)
    assert torch.allclose(ga, g, rtol=1e-8, atol=1e-10)


def test_linear_solve_hook_reaches_the_same_map():
    """map_estimate with a caller's linear solve (steps with the block factors of a nearby problem) stops
    at the MAP of the default Newton solver."""
    p, prob, h, th, V, lp, _ = _tiny_laplace()
    R, d = 3, 3
    h2 = h + 0.05  # a different problem: the factors of `lp` are only an approximation of its Hessian
    prob2 = replace(prob, beta=h2[:R].exp(), lam=h2[R:].exp())
    ref = map_estimate(prob2, tol=1e-11)
    hook = map_estimate(
        prob2, tol=1e-11, return_hessian=False, linear_solve=lambda g: H._newton_direction(lp, R, d, g)
    )
    assert bool(hook.converged.all()) and hook.iters > ref.iters  # linear, not quadratic, convergence
    assert torch.allclose(hook.theta, ref.theta, atol=1e-10)
    assert torch.allclose(hook.vartheta, ref.vartheta, atol=1e-10)


def test_factorisations_survive_a_rater_with_fewer_comparisons_than_features():
    """A_i = λ_i² I + K_i with λ_i → 0 and K_i of rank < d (a rater with fewer comparisons than features)
    is singular to round-off: the plain Cholesky fails there, the jittered one gives finite factors that
    reproduce A_i (seed 23 of benchmarks/rater_prefrl_pools.py stopped on exactly this)."""
    from bayescrl.inference.bootstrap import spd_cholesky

    g = torch.Generator().manual_seed(0)
    D = torch.randn(2, 6, generator=g, dtype=torch.float64)  # 2 comparisons, d = 6
    A = torch.stack([1e-20 * torch.eye(6, dtype=torch.float64) + D.T @ D, torch.eye(6, dtype=torch.float64)])
    assert torch.linalg.cholesky_ex(A)[1][0] != 0  # what crashed
    L = spd_cholesky(A)
    assert torch.isfinite(L).all()
    assert torch.allclose(L @ L.mT, A, atol=1e-5 * float(A[0].diagonal().mean()))


def test_woodbury_blocks_match_the_dense_factorisations():
    """With fewer comparisons per rater than features (U < d) A_i⁻¹, log det A_i and the Schur complement
    come from U×U factorisations (Woodbury, matrix determinant lemma); evidence, A_i⁻¹, S and the analytic
    gradient equal those of the d×d Cholesky path, also for a rater with λ_i → 0 (A_i near singular)."""
    R, d = 3, 12
    dt = torch.float64
    s = simulate_pool(d, [4.0, 2.0, 8.0], [2.0, 0.5, 1.0], [7, 4, 9], seed=3)
    p = H._pool(
        s["X0"], s["X1"], s["y"], s["rater"], R, torch.zeros(d, dtype=dt), torch.eye(d, dtype=dt), "cpu", dt
    )
    assert p.Q is not None and p.Q.shape == (R, 9, 9)
    gen = torch.Generator().manual_seed(0)
    th = torch.randn(1, d, generator=gen, dtype=dt)
    V = th + torch.randn(1, R, d, generator=gen, dtype=dt)
    ones = torch.ones(R, dtype=dt)
    for h in ([1.2, 0.4, 2.0, 0.6, -0.7, 0.1], [1.2, 0.4, 2.0, 0.6, -4.0, 0.1]):
        h = torch.tensor(h, dtype=dt)[None]
        a = H._laplace(p, RaterPrior(), h[:, :R], h[:, R:], th, V, ones, ones)
        b = H._laplace(replace(p, Q=None), RaterPrior(), h[:, :R], h[:, R:], th, V, ones, ones)
        assert torch.allclose(a.F, b.F, rtol=1e-12)
        assert torch.allclose(a.ainv, b.ainv, rtol=1e-9, atol=1e-12 * float(b.ainv.abs().max()))
        assert torch.allclose(a.chol_s, b.chol_s, rtol=1e-10, atol=1e-12)
        ga = H._evidence_grad(p, RaterPrior(), a, h[:, :R], h[:, R:], ones, ones)
        gb = H._evidence_grad(p, RaterPrior(), b, h[:, :R], h[:, R:], ones, ones)
        assert torch.allclose(ga, gb, rtol=1e-9, atol=1e-9)


def test_hessian_vector_product_matches_the_dense_hessian():
    """The matrix-free H v of the inner solver's conjugate gradients equals the assembled Hessian of lemma
    `mapestimatelemma` (bootstrap's dense assembly) times v."""
    p, prob, h, th, V, lp, _ = _tiny_laplace()
    R, d = 3, 3
    Hd = map_estimate(replace(prob, beta=h[:R].exp(), lam=h[R:].exp()), tol=1e-12).hessian
    Hd = Hd.reshape((R + 1) * d, (R + 1) * d)
    wb2 = p.M * lp.s[0] * (1 - lp.s[0]) * lp.beta[0].unsqueeze(-1) ** 2
    gen = torch.Generator().manual_seed(1)
    v_t = torch.randn(d, generator=gen, dtype=torch.float64)
    v_V = torch.randn(R, d, generator=gen, dtype=torch.float64)
    hv_t, hv_V = H._hess_vec(p, wb2, lp.lam2[0], v_t, v_V)
    dense = Hd @ torch.cat([v_t, v_V.reshape(-1)])
    assert torch.allclose(torch.cat([hv_t, hv_V.reshape(-1)]), dense, rtol=1e-12, atol=1e-12)


def test_inner_solver_reaches_the_map_of_the_dense_newton_solver(monkeypatch):
    """laplace-eb's inner MAP (conjugate gradients preconditioned by the factors of another problem,
    refactored where they are too far off) stops at the MAP of map_estimate's dense Newton solver, from a
    near and from a far preconditioner, from a cold start without one, and when CG is cut short (one
    iteration) so that the factors are rebuilt."""
    p, prob, h, th, V, lp, ones = _tiny_laplace()
    R = 3
    for shift, pre, cg_max in ((0.05, lp, 20), (2.0, lp, 20), (0.3, None, 20), (2.0, lp, 1)):
        monkeypatch.setattr(H, "_CG_MAX", cg_max)
        h2 = h + shift
        ref = map_estimate(replace(prob, beta=h2[:R].exp(), lam=h2[R:].exp()), tol=1e-12)
        diag = {"refactor_left": 30, "factorisations": 0, "inner_steps": 0, "cg_iters": 0}
        th2, V2, ok = H._inner_map(p, RaterPrior(), h2[:R], h2[R:], th[0], V[0], pre, ones, ones, diag)
        assert ok and diag["cg_iters"] > 0
        assert (diag["factorisations"] > 0) == (pre is None or cg_max == 1)
        assert torch.allclose(th2, ref.theta[0], atol=1e-9)
        assert torch.allclose(V2, ref.vartheta[0], atol=1e-9)


def test_cpu_inverse_from_cholesky_is_exactly_symmetric():
    """laplace-eb uses the transpose of torch.cholesky_inverse's column-major result as a row-major view of
    A⁻¹: that is only A⁻¹ itself if the kernel returns an exactly symmetric matrix."""
    g = torch.Generator().manual_seed(2)
    X = torch.randn(4, 40, 30, generator=g, dtype=torch.float64)
    A = X.mT @ X + 0.1 * torch.eye(30, dtype=torch.float64)
    inv = torch.cholesky_inverse(torch.linalg.cholesky(A))
    assert torch.equal(inv, inv.mT)
    ai = H._chol_inverse(torch.linalg.cholesky(A))
    assert ai.is_contiguous()
    assert torch.allclose(ai @ A, torch.eye(30, dtype=torch.float64).expand(4, 30, 30), atol=1e-9)


def test_latent_draws_have_the_inverse_hessian_as_covariance():
    """The draws of (θ, ϑ) given the competences map standard normals e to (θ − θ̂, ϑ − ϑ̂) = T e with
    T Tᵀ = H⁻¹ (the dense Hessian): T is read off by feeding the unit vectors."""
    p, prob, h, th, V, lp, _ = _tiny_laplace()
    R, d = 3, 3
    Hd = map_estimate(replace(prob, beta=h[:R].exp(), lam=h[R:].exp()), tol=1e-12).hessian
    Hd = Hd.reshape((R + 1) * d, (R + 1) * d)
    n = (R + 1) * d
    E = torch.eye(n, dtype=torch.float64)
    dth, dV = H._latent_draws(p, lp, E[:, :d], E[:, d:].reshape(n, R, d))
    T = torch.cat([dth, dV.reshape(n, R * d)], -1).T  # column k: the image of unit vector k
    assert torch.allclose(T @ T.T, torch.linalg.inv(Hd), rtol=1e-9, atol=1e-12)


def test_pooled_competence_prior_is_the_marginal_of_the_pool_level():
    """μ ~ N(loc, s²), log λ_i | μ ~ N(μ, τ²): RaterPrior's closed form (μ integrated out) equals the
    multivariate normal N(loc·1, τ² I + s² 11ᵀ) over the free raters (differences of log densities), its
    gradient equals autograd, known raters do not enter, and s = 0 is the independent prior."""
    dt = torch.float64
    loc, tau, s = 0.3, 1.5, 2.0
    prior = RaterPrior(lam_loc=loc, lam_scale=tau, lam_pool_scale=s, beta_pool_scale=0.7)
    free = torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=dt)  # rater 1 known
    cov = tau**2 * torch.eye(3, dtype=dt) + s**2 * torch.ones(3, 3, dtype=dt)
    mvn = torch.distributions.MultivariateNormal(torch.full((3,), loc, dtype=dt), covariance_matrix=cov)
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(2, 4, generator=gen, dtype=dt) * 2
    hb = torch.full((2, 4), prior.beta_loc, dtype=dt)  # β at its prior location: no β term
    lp, _, gl = prior.log_density(hb, h, free, free)
    ref = mvn.log_prob(h[:, free.bool()])
    assert torch.allclose(lp[0] - lp[1], ref[0] - ref[1], rtol=1e-12)
    hh = h.clone().requires_grad_(True)
    (g_auto,) = torch.autograd.grad(prior.log_density(hb, hh, free, free)[0].sum(), hh)
    assert torch.allclose(gl, g_auto, rtol=1e-12) and bool((gl[:, 1] == 0).all())
    h2 = h.clone()
    h2[:, 1] += 5.0  # the known rater's value does not matter
    assert torch.equal(prior.log_density(hb, h2, free, free)[0], lp)
    indep = RaterPrior(lam_loc=loc, lam_scale=tau, lam_pool_scale=0.0)
    lp0, _, g0 = replace(prior, lam_pool_scale=0.0, beta_pool_scale=0.0).log_density(hb, h, free, free)
    lpi, _, gi = indep.log_density(hb, h, free, free)
    assert torch.equal(lp0, lpi) and torch.equal(g0, gi)
    assert torch.allclose(lpi, -0.5 * (((h - loc) / tau) ** 2 * free).sum(-1), rtol=1e-14)
    assert prior.marginal_scale("lam") == pytest.approx(math.hypot(tau, s))


def test_pyro_model_samples_the_pool_level_with_the_same_marginal_prior():
    """The svi/nuts model of a pooled prior samples μ as ``pool_lam_loc``; integrating its joint prior
    density of (μ, λ_1..R) over μ (quadrature) gives the closed form laplace-eb optimises (in log λ, the
    LogNormal Jacobian Σ log λ_i removed), up to a constant: compared as a difference at two points."""
    import pyro.poutine as poutine  # noqa: PLC0415  (test-local: only this test traces Pyro)

    dt = torch.float64
    s_pool = simulate_pool(2, [5.0, 5.0, 5.0], [2.0, 2.0, 2.0], 5, seed=0)
    prior = RaterPrior(lam_loc=0.2, lam_scale=1.5, lam_pool_scale=2.0)
    p = H._pool(s_pool["X0"], s_pool["X1"], s_pool["y"], s_pool["rater"], 3, torch.zeros(2, dtype=dt),
                torch.eye(2, dtype=dt), "cpu", dt)  # fmt: skip
    fixed = torch.tensor([5.0, 1.0, 1.0], dtype=dt)
    free_b, free_l = [False, True, True], [False, True, True]
    model = H._pyro_model(p, fixed, fixed, free_b, free_l, prior, ["a", "b", "c"])
    mus = torch.linspace(-25, 25, 4001, dtype=dt)

    def log_marginal(h_l: torch.Tensor) -> float:
        vals = []
        for mu in mus[::40]:  # coarse grid for the trace, refined below by the closed-form conditional
            cond = {"pool_lam_loc": mu, "lam_b": h_l[0].exp(), "lam_c": h_l[1].exp(), "beta_b": fixed[1],
                    "beta_c": fixed[2]}  # fmt: skip
            tr = poutine.trace(poutine.condition(model, cond)).get_trace()
            vals.append(sum(float(tr.nodes[k]["fn"].log_prob(tr.nodes[k]["value"]))
                            for k in ("pool_lam_loc", "lam_b", "lam_c")))  # fmt: skip
        lv = torch.tensor(vals, dtype=dt)
        w = mus[::40][1] - mus[::40][0]
        return float(torch.logsumexp(lv, 0) + math.log(w)) + float(h_l.sum())  # dλ = λ dlog λ

    ha, hb2 = torch.tensor([0.5, -1.0], dtype=dt), torch.tensor([2.0, 1.5], dtype=dt)
    diff_model = log_marginal(ha) - log_marginal(hb2)
    ones = torch.tensor([0.0, 1.0, 1.0], dtype=dt)
    lp = prior.log_density(torch.zeros(2, 3, dtype=dt), torch.stack([torch.cat([ha.new_zeros(1), ha]),
                           torch.cat([ha.new_zeros(1), hb2])]), ones * 0, ones)[0]  # fmt: skip
    assert diff_model == pytest.approx(float(lp[0] - lp[1]), abs=1e-6)


def test_noncentred_leaves_lognormal_competences_centred():
    """svi/nuts decentre latent Normals only: a LogNormal competence (whose base is a Normal) keeps its
    prior — LocScaleReparam would draw loc + scale·LogNormal(0, 1) instead (negative under a pool level
    below 0)."""
    import pyro  # noqa: PLC0415  (test-local: only these tests run Pyro directly)
    import pyro.distributions as pdist  # noqa: PLC0415
    import pyro.poutine as poutine  # noqa: PLC0415

    from bayescrl.inference.sites import noncentred, site_infos  # noqa: PLC0415

    def model():
        mu = pyro.sample("mu", pdist.Normal(-3.0, 0.1))
        return pyro.sample("lam", pdist.LogNormal(mu, 1.5))

    run_model, infos = noncentred(model, site_infos(model))
    assert "mu_decentered" in infos and "lam_decentered" not in infos and "lam" in infos
    pyro.set_rng_seed(0)
    draws = torch.stack([poutine.trace(run_model).get_trace().nodes["lam"]["value"] for _ in range(2000)])
    assert bool((draws > 0).all())
    assert float(draws.log().median()) == pytest.approx(-3.0, abs=0.15)
    assert float(draws.log().std()) == pytest.approx(1.5, rel=0.08)


def test_laplace_eb_recovers_from_a_diverged_trial_point():
    """A pool whose competence optimiser once tried log β ≈ 50 (its inner MAP diverged to NaN there, which
    then poisoned every later warm start and the competence Hessian): laplace-eb now backs off (a
    non-finite evaluation is +inf to the line search, the next inner solve starts cold) and returns a
    finite posterior."""
    s = simulate_pool(6, [5, 5, 0.2, 0.2, 0.2], [3, 2, 3, 1, 2], 80, seed=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = fit_rater_pool(
            s["X0"], s["X1"], s["y"], s["rater"], [f"r{i}" for i in range(5)], RaterPrior(lam_pool_scale=0.0)
        )
    assert bool(torch.isfinite(post.draws["theta"]).all()) and bool(torch.isfinite(post.draws["lam"]).all())
    assert float(torch.nn.functional.cosine_similarity(post.theta_mean, s["theta"], 0)) > 0.8


def test_search_mode_gradient_is_close_to_the_exact_one():
    """The competence optimiser's trial-point gradient (float32 trace products and blocks on the CPU)
    stays within 10⁻⁴ of the exact one (2·10⁻⁵ where λ_i is large) on a pool with fewer comparisons than
    features (the Woodbury blocks), F within 10⁻⁴; where a λ_i² is below 10⁻² (A_i⁻¹ = (I − M_iᵀM_i)/λ_i²
    would lose too much to cancellation) the search mode keeps float64 and equals the exact path."""
    R, d = 3, 24
    dt = torch.float64
    s = simulate_pool(d, [4.0, 2.0, 8.0], [2.0, 0.5, 1.0], [18, 15, 20], seed=5)
    p = H._pool(
        s["X0"], s["X1"], s["y"], s["rater"], R, torch.zeros(d, dtype=dt), torch.eye(d, dtype=dt), "cpu", dt
    )
    assert p.Q is not None  # U < d: the Woodbury path
    prob = BTLinearProblem.from_data(
        torch.zeros(d), torch.eye(d), [1.0] * R, [1.0] * R, x0=s["X0"], x1=s["X1"], y=s["y"], rater=s["rater"]
    )
    ones = torch.ones(R, dtype=dt)

    def exact_and_search(h: torch.Tensor):
        """(exact F, search F, exact gradient, search-mode gradient) at the tight MAP for ``h``."""
        res = map_estimate(replace(prob, beta=h[:R].exp(), lam=h[R:].exp()), tol=1e-12)
        th, V = res.theta[0][None], res.vartheta[0][None]
        out = []
        for fast in (False, True):
            lp = H._laplace(p, RaterPrior(), h[None, :R], h[None, R:], th, V, ones, ones, fast=fast)
            out.append(
                (lp.F, H._evidence_grad(p, RaterPrior(), lp, h[None, :R], h[None, R:], ones, ones, fast)[0])
            )
        return out[0][0], out[1][0], out[0][1], out[1][1]

    F, F32, g, g32 = exact_and_search(torch.tensor([1.2, 0.4, 2.0, 0.6, -0.7, 0.1], dtype=dt))
    assert float((g32 - g).abs().max()) < 1e-4 and float((g32 - g).abs().max()) > 0  # float32, not exact
    assert float((F32 - F).abs()) < 1e-4
    # large λ_i (λ² = e^4.4 ≈ 81): tr Cov(θ − ϑ_i) from its positive terms tr(P S⁻¹ P) + tr A⁻¹; the
    # four-term sum tr S⁻¹ − 2λ² tr(S⁻¹A⁻¹) + tr A⁻¹ + λ⁴ tr(A⁻¹S⁻¹A⁻¹) cancels in float32 to ~2·10⁻⁴ here
    F, F32, g, g32 = exact_and_search(torch.tensor([1.2, 0.4, 2.0, 2.2, -0.7, 2.2], dtype=dt))
    assert float((g32 - g).abs().max()) < 2e-5
    F, F32, g, g32 = exact_and_search(torch.tensor([1.2, 0.4, 2.0, 0.6, -3.0, 0.1], dtype=dt))  # λ_2² = e⁻⁶
    assert torch.equal(g32, g) and torch.equal(F32, F)


def test_newton_step_after_the_optimiser_reaches_the_tight_optimum(pool, fast):
    """L-BFGS-B to a gradient of 10⁻² and one Newton step with the competence Hessian end where L-BFGS-B
    run to 10⁻⁷ ends: the same log competences (10⁻⁵), θ̂ and competence covariance (1 %)."""
    raters = [PoolRater("expert", beta=10.0, lam=30.0), "ok", "misinformed", "random"]
    tight = fit_rater_pool(pool["X0"], pool["X1"], pool["y"], pool["rater"], raters, tol=1e-7)
    a, b = fast.diagnostics, tight.diagnostics
    assert a["competence_grad"] < 1e-4 < 1e-2 and a["objective_evals"] < b["objective_evals"]
    assert torch.allclose(
        torch.tensor(a["log_competence_map"]), torch.tensor(b["log_competence_map"]), atol=1e-5
    )
    assert torch.allclose(torch.tensor(a["theta_map"]), torch.tensor(b["theta_map"]), atol=1e-5)
    ca, cb = torch.tensor(a["log_competence_cov"]), torch.tensor(b["log_competence_cov"])
    assert torch.allclose(ca.diagonal(), cb.diagonal(), rtol=0.01)


def _evidence_at_the_prior_centre(pool) -> tuple[H._Evidence, torch.Tensor]:
    """The laplace-eb objective of a simulated pool (the module's by default; every competence free) and
    its start u0 (log β at log 5, log λ at 0)."""
    R, d = int(pool["rater"].max()) + 1, pool["X0"].shape[1]
    dt = torch.float64
    p = H._pool(
        pool["X0"], pool["X1"], pool["y"], pool["rater"], R, torch.zeros(d, dtype=dt), torch.eye(d, dtype=dt),
        "cpu", dt,
    )  # fmt: skip
    prob = BTLinearProblem.from_data(
        torch.zeros(d), torch.eye(d), [1.0] * R, [1.0] * R,
        x0=pool["X0"], x1=pool["X1"], y=pool["y"], rater=pool["rater"],
    )  # fmt: skip
    ones = torch.ones(R, dtype=dt)
    h_b0, h_l0 = torch.full((R,), 1.6, dtype=dt), torch.zeros(R, dtype=dt)
    return H._Evidence(p, RaterPrior(), prob, h_b0, h_l0, ones, ones), torch.cat([h_b0, h_l0])


def test_float32_competence_hessian_is_close_to_the_float64_one():
    """From d = 64 on (CPU) the competence Hessian's perturbed gradients take float32 trace products and a
    step of 5·10⁻⁴: on a pool with fewer comparisons than features its entries stay within 0.3 %
    (Frobenius; about 0.12-0.19 % on such pools) of the float64 Hessian's (step 10⁻⁴); with the float64
    step the float32 rounding, divided by the step, would be about four times as large."""
    s = simulate_pool(64, [4.0, 2.0, 8.0], [2.0, 0.5, 1.0], 40, seed=3)
    ev, u0 = _evidence_at_the_prior_centre(s)
    assert ev.pool.Q is not None  # U < d: the Woodbury blocks
    ev.evaluate(u0)  # exact (not the optimiser's search mode)
    hb, hl = ev.split(u0)
    state = dict(ev.state)
    h32 = H._competence_hessian(ev, hb, hl)
    ev.state, ev.fast_search = state, False
    h64 = H._competence_hessian(ev, hb, hl)
    err = float((h32 - h64).norm() / h64.norm())
    assert 0 < err < 3e-3


def test_a_wild_trial_point_is_not_solved_to_the_end(pool):
    """In search mode a trial point far from the last one (log β + 12: a near-separable MAP) costs at most
    the search's Newton steps and is counted as unsolved; its evidence (where the inner solve stopped) is
    finite and far below the good point's, so the optimiser's line search backs off. The unsolved point
    does not seed the next trial point: back near the good point the inner MAP starts from the good
    point's solution and is solved again (seeded from the unsolved one it is not, and F comes out wrong)."""
    ev, u0 = _evidence_at_the_prior_centre(pool)
    R, dt = 4, torch.float64
    u = u0
    ev.evaluate(u)
    good = ev.state["F"]
    ev.fast = True
    steps = ev.diag["inner_steps"]
    ev.evaluate(u + torch.cat([torch.full((R,), 12.0), torch.full((R,), -6.0)]).to(dt))
    assert ev.diag["inner_steps"] - steps <= H._SEARCH_MAX and ev.diag["unsolved_trials"] == 1
    assert math.isfinite(ev.state["F"]) and ev.state["F"] < good - 100
    ev.evaluate(u + 1e-3)
    assert ev.state["inner_ok"] and ev.diag["unsolved_trials"] == 1 and abs(ev.state["F"] - good) < 1.0


def test_a_newton_step_that_lowers_the_evidence_is_rejected(pool):
    """_newton_polish keeps its step only where the evidence does not decrease: with a Hessian far too
    flat (a step of about 10³ in the log competences) the step is rejected and the optimiser's end point,
    its state (MAP, factors, gradient) included, is what the fit keeps."""
    ev, u0 = _evidence_at_the_prior_centre(pool)
    R, dt = 4, torch.float64
    u, _ = H._optimise_competences(ev, u0, 1e-2, 200)
    before = dict(ev.state)
    assert H._newton_polish(ev, u, 1e-6 * torch.eye(2 * R, dtype=dt)) is u
    assert ev.state["F"] == before["F"] and ev.state["theta"] is before["theta"]
    assert ev.diag["objective_evals"] > 0

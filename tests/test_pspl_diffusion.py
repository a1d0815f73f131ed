"""Diffusion fine-tuning from trajectory preferences (appendix `pickapic`, scaled down): tiny UNet + DDIM,
trajectory embedding, posterior updates, noise-policy log-probabilities, one PSPL and one DPS round."""

import math

import pytest
import torch

pytest.importorskip("diffusers")
pytest.importorskip("sklearn")

from bayescrl.cli import main  # noqa: E402
from bayescrl.pbrl.diffusion.agents import DPSTheta, NoiseNormModel, PSPLTheta  # noqa: E402
from bayescrl.pbrl.diffusion.base import BaseModel, Scorer, make_unet  # noqa: E402
from bayescrl.pbrl.diffusion.experiment import run_agents, runtime_table, validate_config  # noqa: E402
from bayescrl.pbrl.diffusion.mdp import embed, image_stat, rollout  # noqa: E402
from bayescrl.pbrl.diffusion.policy import GaussianNoisePolicy, ddpo_update  # noqa: E402
from bayescrl.utils.errors import ConfigError  # noqa: E402

TINY = {
    "base": {"size": 8, "channels": [8, 16], "train_timesteps": 20},
    "T": 4,
    "offline": {"N": 12},
    "pools": {"val": 6, "explore": 4},
    "policy": {"hidden": 16, "rollouts": 3, "updates": 1},
    "K": 1,
    "final": {"epochs": 1, "L": 1},
    "prompts": [0, 1],
}


@pytest.fixture(scope="module")
def base():
    torch.manual_seed(0)
    unet = make_unet(8, (8, 16)).eval().requires_grad_(False)
    return BaseModel(unet, Scorer(8).eval().requires_grad_(False), 20, 8, {})


def test_rollout_embedding_transition_and_logprob(base):
    sched = base.ddim(4)
    pol = GaussianNoisePolicy(2, 64, 10, hidden=16, sd_init=0.3)
    g = torch.Generator().manual_seed(1)
    prompts = torch.tensor([[0, 3, 7], [1, 1, 9]])
    z = torch.randn(2, 3, 1, 8, 8, generator=g)
    ro = rollout(base, sched, pol, prompts, z, generator=g)
    T = 4
    # log-probabilities of the noise actions: the zero-initialised policy is N(ε̂_t, 0.3² I)
    ref = torch.distributions.Normal(ro.eps_hat, 0.3).log_prob(ro.actions).sum(-1)
    assert torch.allclose(ro.logp, ref, atol=1e-3)
    # embedding φ(τ) = Σ_t [score, ‖ε_t‖/√D, t/T] with Σ_{t=1}^T t/T = (T+1)/2
    norms = ro.actions.norm(dim=-1) / 8.0
    assert torch.allclose(ro.norms, norms, atol=1e-5)
    score = torch.log_softmax(base.scorer(ro.x.reshape(6, 1, 8, 8)), -1)[torch.arange(6), prompts.reshape(-1)]
    phi = ro.phi()
    assert torch.allclose(phi[..., 0], T * score.reshape(2, 3).double(), atol=1e-4)
    assert torch.allclose(phi[..., 1], norms.sum(-1).double(), atol=1e-4)
    assert torch.allclose(phi[..., 2], torch.full((2, 3), 2.5, dtype=torch.float64))
    mass = ((ro.x + 1) / 2).mean((-1, -2, -3))
    assert torch.allclose(ro.psi()[..., 3], T * mass.double(), atol=1e-5)
    assert embed(torch.tensor([-1.0]), torch.tensor([[1.0, 2.0]])).tolist() == [[-2.0, 3.0, 1.5]]
    # the transition is the frozen deterministic DDIM step: replaying the stored actions gives the same image
    x = z.reshape(6, 1, 8, 8)
    for i, t in enumerate(sched.timesteps):
        x = sched.step(ro.actions[:, :, i].reshape(6, 1, 8, 8), t, x, eta=0.0).prev_sample
    assert torch.allclose(x.clamp(-1, 1).reshape(ro.x.shape), ro.x, atol=1e-5)
    # symmetry statistic: a mirror-symmetric image scores 0, a half-ink image −1/2
    sym = torch.ones(1, 1, 4, 4)
    half = torch.cat([torch.ones(1, 1, 4, 2), -torch.ones(1, 1, 4, 2)], -1)
    assert image_stat(sym, "symmetry").item() == 0.0 and image_stat(half, "symmetry").item() == -1.0


def test_ddpo_step_moves_logprob_towards_advantage(base):
    sched = base.ddim(4)
    pol = GaussianNoisePolicy(1, 64, 10, hidden=16)
    g = torch.Generator().manual_seed(2)
    ro = rollout(
        base, sched, pol, torch.tensor([[2, 2]]), torch.randn(1, 2, 1, 8, 8, generator=g), generator=g
    )
    opt = torch.optim.Adam(pol.parameters(), lr=1e-3)
    ddpo_update(pol, opt, ro.inputs, ro.eps_hat, ro.actions, ro.logp, torch.tensor([[1.0, -1.0]]), steps=3)
    mean, lsd = pol(ro.inputs.reshape(1, 8, -1), ro.eps_hat.reshape(1, 8, -1))
    new = pol.log_prob(ro.actions.reshape(1, 8, -1), mean, lsd).reshape(1, 2, 4).sum(-1)
    old = ro.logp.sum(-1)
    assert new[0, 0] > old[0, 0] and new[0, 1] < old[0, 1]


def test_posterior_updates():
    cov0 = torch.diag(torch.tensor([1.0, 0.5, 1 / 12], dtype=torch.float64))
    phi0 = torch.tensor([[[1.0, 0.0, 2.5]]], dtype=torch.float64)
    phi1 = torch.tensor([[[0.0, 1.0, 2.5]]], dtype=torch.float64)
    # DPS: exact Bayesian linear regression of ±½ on Δφ (closed form)
    dps = DPSTheta(phi0, phi1, torch.tensor([[0]]), cov0, noise_sd=1.0)
    x = (phi0 - phi1)[0]
    prec = torch.linalg.inv(cov0) + x.T @ x
    assert torch.allclose(
        dps.point()[0], torch.linalg.solve(prec, x.T @ torch.tensor([0.5], dtype=torch.float64))
    )
    # PSPL: one more "τ0 preferred" row with Δφ = e1 moves the MAP along e1 and shrinks its variance there
    pspl = PSPLTheta(phi0, phi1, torch.tensor([[0]]), 2, cov0, beta=1.0, lam=10.0)
    m0, c0 = pspl.gaussian()
    pspl.observe(torch.tensor([[1.0, 0.0, 2.5]]), torch.tensor([[0.0, 0.0, 2.5]]), torch.tensor([0]))
    m1, c1 = pspl.gaussian()
    assert pspl.model.n == 2 and m1[0, 0] > m0[0, 0] > 0 and c1[0, 0, 0] < c0[0, 0, 0]
    assert torch.allclose(m1[0, 2], torch.zeros((), dtype=torch.float64), atol=1e-6)  # Δφ_time = 0 always
    # Dirichlet noise-norm model: quantile edges, one count per step in the right bin
    nm = NoiseNormModel(1, 2, 2, torch.tensor([[0.0, 1.0], [2.0, 3.0]]))
    assert nm.edges.tolist() == [1.5]
    nm.update(torch.tensor([[[0.5, 2.0]]]))
    assert nm.post.counts[0].tolist() == [[1.0, 0.0], [0.0, 1.0]]
    eta = torch.tensor([[[0.25, 0.75], [0.5, 0.5]]])
    assert math.isclose(
        nm.log_lik(eta, torch.tensor([[[0.5, 2.0]]])).item(), math.log(0.25 * 0.5), rel_tol=1e-6
    )


def test_one_pspl_and_one_dps_round(base):
    cfg = validate_config(TINY)
    res = run_agents(cfg, 2, base, progress=False)
    for a in ("pspl", "dps", "oracle"):
        r = res["agents"][a]
        assert len(r["final_reward_per_seed"]) == 2 and all(
            math.isfinite(v) for v in r["final_reward_per_seed"]
        )
    # best reachable reward per seed: max(base sampler, oracle of that seed); regret = reference − final
    orc = res["agents"]["oracle"]["final_reward_per_seed"]
    ref = [max(res["base_reward"], o) for o in orc]
    assert res["best_reachable_reward_per_seed"] == pytest.approx(ref)
    for a in ("pspl", "dps", "oracle"):
        r = res["agents"][a]
        assert r["simple_regret_per_seed"] == pytest.approx(
            [b - f for b, f in zip(ref, r["final_reward_per_seed"], strict=True)]
        )
    assert min(res["agents"]["oracle"]["simple_regret_per_seed"]) >= 0
    assert len(res["agents"]["pspl"]["query_true_reward_curve_mean"]) == 1
    # K = 1 round: 2 copies × 2 seeds × 3 rollouts + 2 × 2 query images; 1 final epoch: 2 seeds × 3
    assert (
        res["agents"]["pspl"]["train_images"]
        == res["agents"]["dps"]["train_images"]
        == 2 * 2 * 3 + 2 * 2 + 2 * 3
    )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"prompts": [1, 12]}, "prompts[1] = 12: unknown prompt class"),
        ({"T": 50}, "T = 50: larger than the scheduler's 20 training steps"),
        ({"policy": {"update": "ppo"}}, "policy.update = 'ppo': choose one of ['reward_grad', 'ddpo']"),
        (
            {"pools": {"query_starts": "same"}},
            "pools.query_starts = 'same': choose one of ['independent', 'shared']",
        ),
    ],
)
def test_bad_config_one_line(override, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate_config({**TINY, **override})


def test_cli_no_train_without_cache(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("task: diffusion\nT: 4\n")
    with pytest.raises(SystemExit) as e:
        main(["pspl", str(cfg), "--no-train", "--out", str(tmp_path / "o"), "--no-progress"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no cached base model" in err[0] and err[0].startswith("error: --no-train")


def test_missing_extra_is_one_clear_error(monkeypatch):
    from bayescrl.pbrl.diffusion import require

    monkeypatch.setitem(__import__("sys").modules, "diffusers", None)  # import diffusers -> ImportError
    with pytest.raises(ConfigError, match=r"needs diffusers: pip install 'bayescrl\[diffusion\]'"):
        require()


def test_advantage_uses_a_per_prompt_baseline():
    from bayescrl.pbrl.diffusion.experiment import _z

    # prompt 0 rewards {1, 3}, prompt 1 rewards {10, 12}: residuals {−1, 1, −1, 1} -> ±1/sd
    x = torch.tensor([[1.0, 10.0, 3.0, 12.0]])
    p = torch.tensor([[0, 1, 0, 1]])
    sd = torch.tensor([-1.0, 1.0, -1.0, 1.0]).std()
    assert torch.allclose(_z(x, p), torch.tensor([[-1.0, -1.0, 1.0, 1.0]]) / sd)


def test_reward_gradient_is_the_pathwise_derivative(base):
    # a ``grad=True`` rollout is differentiable in the policy weights: autograd's derivative of the
    # final score w.r.t. one mean-bias weight equals a central finite difference (same noise)
    sched = base.ddim(3)
    pol = GaussianNoisePolicy(1, 64, 10, hidden=8, sd_init=0.05).double()
    base64 = BaseModel(base.unet.double(), base.scorer.double(), 20, 8, {})
    p, z = torch.tensor([[4, 4]]), torch.randn(1, 2, 1, 8, 8, dtype=torch.float64)

    def total(h: float = 0.0, grad: bool = False):
        with torch.no_grad():
            pol.b3[0, 0, 5] += h
        ro = rollout(base64, sched, pol, p, z, generator=torch.Generator().manual_seed(3), grad=grad)
        with torch.no_grad():
            pol.b3[0, 0, 5] -= h
        return (ro.score + ro.norms.sum(-1)).sum()

    r = total(grad=True)
    assert r.requires_grad and not rollout(base64, sched, pol, p, z, generator=None).score.requires_grad
    (g,) = torch.autograd.grad(r, pol.b3)
    h = 1e-5
    fd = (total(h) - total(-h)) / (2 * h)
    base.unet.float(), base.scorer.float()
    assert abs(float(g[0, 0, 5])) > 1e-6 and math.isclose(float(g[0, 0, 5]), float(fd), rel_tol=1e-4)


def test_reward_gradient_update_raises_the_reward_and_adam_state_follows_copies(base):
    from bayescrl.pbrl.diffusion.policy import reward_gradient_update, select_adam

    sched = base.ddim(3)
    pol = GaussianNoisePolicy(2, 64, 10, hidden=8, sd_init=0.05)
    p, z = torch.tensor([[1, 2, 3], [1, 2, 3]]), torch.randn(2, 3, 1, 8, 8)
    opt = torch.optim.Adam(pol.parameters(), lr=1e-2)

    def reward(det=False):  # policy 0 wants large noise norms, policy 1 small ones
        ro = rollout(
            base,
            sched,
            pol,
            p,
            z,
            generator=torch.Generator().manual_seed(0),
            grad=not det,
            deterministic=det,
        )
        return ro.norms.sum(-1) * torch.tensor([[1.0], [-1.0]])

    before = reward(det=True).mean(1)
    for _ in range(3):
        reward_gradient_update(pol, opt, reward())
    after = reward(det=True).mean(1)
    assert after[0] > before[0] and after[1] > before[1]
    # the optimiser of the copies [1, 1, 0] carries policy 1's moments twice, then policy 0's
    new = pol.select([1, 1, 0])
    opt2 = select_adam(opt, new, [1, 1, 0])
    m_old = opt.state[pol.b3]["exp_avg"]
    m_new = opt2.state[new.b3]["exp_avg"]
    assert (
        torch.equal(m_new[0], m_old[1])
        and torch.equal(m_new[1], m_old[1])
        and torch.equal(m_new[2], m_old[0])
    )
    assert int(opt2.state[new.b3]["step"]) == 3


def test_agents_draw_from_their_own_streams_and_the_reference_is_fixed_per_seed(base):
    # one agent's draws never move another's: PSPL alone == PSPL after DPS; the best reachable reward
    # of seed 0 (max(base, oracle_0)) does not depend on the other agents or on the number of seeds
    both = run_agents(validate_config({**TINY, "agents": ["dps", "pspl"]}), 2, base, progress=False)
    alone = run_agents(validate_config({**TINY, "agents": ["pspl"]}), 2, base, progress=False)
    one = run_agents(validate_config({**TINY, "agents": ["dps"]}), 1, base, progress=False)
    assert both["agents"]["pspl"]["final_reward_per_seed"] == alone["agents"]["pspl"]["final_reward_per_seed"]
    ref = both["best_reachable_reward_per_seed"]
    assert alone["best_reachable_reward_per_seed"] == ref
    assert one["best_reachable_reward_per_seed"][0] == pytest.approx(ref[0], rel=1e-5)
    none = run_agents(validate_config({**TINY, "agents": ["pspl"], "oracle": False}), 1, base, progress=False)
    assert none["best_reachable_reward"] is None and none["agents"]["pspl"]["simple_regret_mean"] is None


def test_nan_results_are_refused_before_anything_is_written(base, tmp_path, monkeypatch):
    import bayescrl.pbrl.diffusion.base as dbase
    import bayescrl.pbrl.diffusion.experiment as dexp
    from bayescrl.utils.errors import DataError

    monkeypatch.setattr(dbase, "load_or_train", lambda *a, **k: base)
    monkeypatch.setattr(
        dexp,
        "run_agents",
        lambda *a, **k: {"agents": {"pspl": {"final_reward_mean": float("nan")}}, "_images": {}},
    )
    with pytest.raises(DataError, match="NaN"):
        dexp.run_experiment(TINY, 1, tmp_path / "o", progress=False)
    assert not (tmp_path / "o" / "results.json").exists()


def test_a_runs_result_does_not_depend_on_how_many_seeds_share_the_batch(base):
    """Run 0 of a 2-seed batch is run 0 of a 1-seed batch (own rater, posterior and label streams, own
    exploration starts), up to the rounding of batched UNet calls."""
    from bayescrl.pbrl.diffusion.experiment import _Setup, run_agent

    cfg = validate_config({**TINY, "K": 2, "agents": ["pspl", "dps"], "oracle": False})
    one, two = _Setup(cfg, 1, base, "cpu"), _Setup(cfg, 2, base, "cpu")
    for name in ("pspl", "dps"):
        a, b = run_agent(one, name, progress=False), run_agent(two, name, progress=False)
        assert torch.equal(a["label_agreement"][0], b["label_agreement"][0]), name
        for key in ("query_true_reward", "theta_point", "final_reward"):
            torch.testing.assert_close(a[key][0], b[key][0], rtol=1e-5, atol=1e-6, msg=f"{name} {key}")


def test_runtime_table_shows_the_sample_sd_and_no_spread_for_one_seed():
    m = {"wall_time_s": 2.0, "wall_time_per_seed_s": 1.0, "images_per_s": 3.0, "simple_regret_mean": None}
    m |= {"final_reward_mean": -15.6, "final_reward_std": 0.3}
    assert "| -15.600 ± 0.300 |" in runtime_table({"seeds": 5, "agents": {"pspl": m}})
    one = runtime_table({"seeds": 1, "agents": {"pspl": {**m, "final_reward_std": 0.0}}})
    assert "| -15.600 |" in one and "±" not in one


def _query_starts(base, starts: str, **over):
    """(prompts, z_T) of every query rollout of a 2-seed PSPL run (the rollouts that sample actions
    without keeping their inputs: neither the policy epochs nor the deterministic evaluation)."""
    from bayescrl.pbrl.diffusion.experiment import _Setup, run_agent

    cfg = validate_config({**TINY, "K": 2, "pools": {"explore": 4, "query_starts": starts}, **over})
    st, seen = _Setup(cfg, 2, base, "cpu"), []
    inner = st.rollout

    def spy(policy, prompts, z, generator, keep_inputs=True, deterministic=False, grad=False):
        if not keep_inputs and not deterministic:
            seen.append((prompts.clone(), z.clone()))
        return inner(policy, prompts, z, generator, keep_inputs, deterministic, grad)

    st.rollout = spy
    res = run_agent(st, "pspl", progress=False)
    return seen, res


def test_query_pairs_start_from_their_own_noise_and_share_the_prompt(base):
    """The two images of a query are two independent draws (each its own z_T, as D0's pairs): from one
    shared z_T two nearly identical policies give nearly identical images, and the rater's labels are
    coin flips."""
    seen, _ = _query_starts(base, "independent")
    assert len(seen) == 2  # K = 2 episodes
    for p, z in seen:  # copy j of seed b is row j*B + b
        assert torch.equal(p[:2], p[2:])
        assert all(not torch.equal(z[b], z[2 + b]) for b in range(2))
    shared, _ = _query_starts(base, "shared")
    assert all(torch.equal(z[:2], z[2:]) for _, z in shared)
    # the first image of a pair is the same start either way (one exploration pool)
    assert all(torch.equal(a[1][:2], b[1][:2]) for a, b in zip(seen, shared, strict=True))


def test_label_agreement_is_measured_against_the_hidden_reward(base):
    """An expert rater (greedy on θ*: λ = inf) agrees with the hidden reward on every query pair: the
    agreement reads the label's orientation (0 = the first image preferred) against ⟨θ*, ψ⟩."""
    _, res = _query_starts(base, "independent", offline={"N": 12, "expert": "greedy", "lam": float("inf")})
    assert torch.all(res["label_agreement"] == 1)

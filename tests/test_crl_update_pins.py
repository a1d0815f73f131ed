"""Hand-computed pins of the first-order and trust-region baselines' updates (PPO-L, APPO, P3O, FOCOPS, IPO,
CPO, PCPO): each algorithm's policy loss on a fixed 4-sample batch with two constraints, and its
multiplier (or penalty weight) step, compared with the formulas of its paper written out in numpy.

The loss is read by catching the ``loss_fn`` an algorithm hands to ``first_order_policy_update`` (the
shared minibatch loop, tested elsewhere) and evaluating it at hand-chosen probability ratios, some inside
and some outside the clip range ``[0.8, 1.2]``. Each test fails under single-line mutations listed in
``tools/mutation_check.py``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bayescrl.constrained import appo as appo_mod
from bayescrl.constrained import cpo as cpo_mod
from bayescrl.constrained import ecop as ecop_mod
from bayescrl.constrained import focops as focops_mod
from bayescrl.constrained import ipo as ipo_mod
from bayescrl.constrained import p3o as p3o_mod
from bayescrl.constrained import pcpo as pcpo_mod
from bayescrl.constrained import ppo_lag as ppo_lag_mod
from bayescrl.constrained.core.rollout import Batch
from bayescrl.constrained.core.trust_region import TRQuantities
from bayescrl.envs import make_ergodic_cmdp

LIMITS = [1.0, 2.0]
# raw advantages (reward, cost 1, cost 2) of the 4 samples
ADV = np.array(
    [[1.0, 0.5, -0.2], [-2.0, 1.5, 0.4], [0.5, -1.0, 0.3], [3.0, 0.2, -0.9]],
)
ACTIONS = [0, 2, 1, 0]
# probability ratios: sample 0 below the clip range, 2 above it, 1 and 3 inside
RATIO = np.array([0.5, 1.1, 1.6, 0.9])
CLIP = 0.2


@pytest.fixture(scope="module")
def cmdp():
    return make_ergodic_cmdp(num_states=4, num_actions=3, num_costs=2, seed=2)


def _algo(cls, cmdp, cost_limits=LIMITS, cost_gamma=None, **cfg):
    base = {"n_envs": 1, "rollout_steps": 8, "normalize_obs": False, "clip": CLIP}
    if cost_gamma is not None:
        base["cost_gamma"] = cost_gamma
    return cls(
        lambda: cmdp.make_env(max_episode_steps=10), cost_limits=cost_limits, seed=0, config={**base, **cfg}
    )


def _batch(algo, ep_cost, ep_lengths=(10.0,)) -> Batch:
    obs = torch.eye(4)
    x = algo.policy_input(obs, torch.zeros(4))
    acts = torch.tensor(ACTIONS)
    with torch.no_grad():
        logp = algo.policy.log_prob(x, acts)
    adv = torch.tensor(ADV, dtype=torch.float32)
    return Batch(
        obs=obs,
        h=torch.zeros(4),
        actions=acts,
        logp=logp,
        rewards=torch.ones(4, 3),
        values=torch.zeros(4, 3),
        advantages=adv,
        returns=adv.clone(),
        ep_returns=np.zeros(1),
        ep_costs=np.zeros((1, 2)),
        ep_lengths=np.asarray(ep_lengths),
        ep_return_est=0.0,
        ep_cost_est=torch.tensor(ep_cost, dtype=torch.float64),
        raw_obs=obs.numpy(),
        horizon=10,
    )


def _catch_loss(monkeypatch, module, algo, batch):
    """Run ``algo.update_policy(batch)`` with the minibatch loop replaced by one that keeps ``loss_fn``."""
    caught = {}

    def fake(_algo, _batch, loss_fn, uses_dist=True):
        caught["loss_fn"] = loss_fn
        return {}

    monkeypatch.setattr(module, "first_order_policy_update", fake)
    logs = algo.update_policy(batch)
    return caught["loss_fn"], logs


def _norm(a):
    """Advantage normalisation (mean 0, sample sd 1)."""
    return (a - a.mean()) / (a.std(ddof=1) + 1e-8)


def _centre(a):
    return a - a.mean(0)


def _clip_min(r, a):
    """PPO's L^CLIP per sample: min(r A, clip(r) A)."""
    return np.minimum(r * a, np.clip(r, 1 - CLIP, 1 + CLIP) * a)


def _clip_max(r, a):
    """Its pessimistic cost counterpart: max(r A_C, clip(r) A_C) (r broadcast over the m columns)."""
    r = r[:, None]
    return np.maximum(r * a, np.clip(r, 1 - CLIP, 1 + CLIP) * a)


def _eval(loss_fn, ratio=RATIO, dist=None):
    idx = torch.arange(4)
    return float(loss_fn(idx, torch.tensor(ratio, dtype=torch.float32), dist))  # float32, as the networks


def _ecop_penalty(psi, lam, beta):
    """Eq. `main_e-COP_problem`'s constraint part:
    Σ_i λ_i ReLU(ψ_i) + β/2 Σ_i (ReLU(ψ_i + λ_i/β)² − (λ_i/β)²)."""
    return (lam * np.maximum(psi, 0)).sum() + 0.5 * beta * (
        np.maximum(psi + lam / beta, 0) ** 2 - (lam / beta) ** 2
    ).sum()


@pytest.mark.parametrize("scale", ["per_step", "episode"])
def test_ecop_loss_by_hand(monkeypatch, cmdp, scale):
    """e-COP (Algorithm `practical-ECOP`): λ ← max(0, λ + β(J_C − d)) (Eq. `lagrangeupdaterule` at ratio 1),
    ψ_i = H_eff E[max(ρ A_Ci, clip(ρ) A_Ci)] + J_Ci − d_i, loss = −E[L^CLIP] + penalty(ψ) / H_eff
    (``per_step``) or −H_eff E[L^CLIP] + penalty(ψ) (``episode``), Eq. `main_e-COP_problem`."""
    algo = _algo(ecop_mod.ECOP, cmdp, beta=2.0, adaptive_beta=False, constraint_scale=scale)
    algo.lam = torch.tensor([0.2, 3.0], dtype=torch.float64)
    batch = _batch(algo, [2.0, 0.9], ep_lengths=(8.0, 12.0))  # gaps +1.0, -1.1; H_eff = 10
    loss_fn, _ = _catch_loss(monkeypatch, ecop_mod, algo, batch)
    gap = np.array([1.0, -1.1])
    lam = np.maximum(0.0, np.array([0.2, 3.0]) + 2.0 * gap)  # [2.2, 0.8]
    assert algo.multipliers() == pytest.approx(lam.tolist(), rel=1e-6)
    ar, ac = _norm(ADV[:, 0]), _centre(ADV[:, 1:])
    psi = 10.0 * _clip_max(RATIO, ac).mean(0) + gap
    assert psi[0] > 0 and -lam[1] / 2.0 < psi[1] < 0  # both branches of the penalty
    surr = _clip_min(RATIO, ar).mean()
    pen = _ecop_penalty(psi, lam, 2.0)
    expect = -surr + pen / 10.0 if scale == "per_step" else -10.0 * surr + pen
    assert _eval(loss_fn) == pytest.approx(expect, rel=1e-5)
    algo.close()


def test_ecop_penalty_control_variate_by_hand(monkeypatch, cmdp):
    """``penalty_control_variate``: on a minibatch B, ψ_i = H_eff mean_B[max(ρ A_Ci, clip(ρ) A_Ci) − A_Ci]
    + J_Ci − d_i (the subtracted term is 0 in expectation and over the whole batch, constant in θ); without
    it the minibatch's mean cost advantage moves ψ. Over the whole batch both are the same loss."""
    gap = np.array([1.0, -1.1])
    ar, ac = _norm(ADV[:, 0]), _centre(ADV[:, 1:])
    mb = [0, 1]  # a minibatch whose mean cost advantages are far from 0: [1.25, -0.1] after centring

    def loss(cv: bool, rows: list[int]) -> float:
        algo = _algo(ecop_mod.ECOP, cmdp, beta=2.0, adaptive_beta=False, penalty_control_variate=cv)
        algo.lam = torch.tensor([0.2, 3.0], dtype=torch.float64)
        batch = _batch(algo, [2.0, 0.9], ep_lengths=(8.0, 12.0))  # H_eff = 10
        loss_fn, _ = _catch_loss(monkeypatch, ecop_mod, algo, batch)
        out = float(loss_fn(torch.tensor(rows), torch.tensor(RATIO[rows], dtype=torch.float32), None))
        algo.close()
        return out

    lam = np.maximum(0.0, np.array([0.2, 3.0]) + 2.0 * gap)
    r, a = RATIO[mb], ac[mb]
    psi_cv = 10.0 * (_clip_max(r, a) - a).mean(0) + gap
    psi_raw = 10.0 * _clip_max(r, a).mean(0) + gap
    surr = _clip_min(r, ar[mb]).mean()
    assert loss(True, mb) == pytest.approx(-surr + _ecop_penalty(psi_cv, lam, 2.0) / 10.0, rel=1e-5)
    assert loss(False, mb) == pytest.approx(-surr + _ecop_penalty(psi_raw, lam, 2.0) / 10.0, rel=1e-5)
    assert abs(loss(True, mb) - loss(False, mb)) > 0.5
    assert loss(True, [0, 1, 2, 3]) == pytest.approx(loss(False, [0, 1, 2, 3]), rel=1e-5)


def test_ecop_logs_the_penalty_argument_after_the_update(monkeypatch, cmdp):
    """The logged ``cost_surrogate`` is L_Ci = H_eff E[max(ρ A_Ci, clip(ρ) A_Ci)] with the updated policy,
    ``cost_surrogate_plain`` H_eff E[ρ A_Ci] and ``psi`` L_Ci + J_Ci − d_i; an unchanged policy gives
    L_Ci = 0 (centred advantages) and ψ = J_C − d."""
    algo = _algo(ecop_mod.ECOP, cmdp, beta=2.0, adaptive_beta=False)
    batch = _batch(algo, [2.0, 0.9], ep_lengths=(8.0, 12.0))  # gaps +1.0, -1.1; H_eff = 10
    gap = np.array([1.0, -1.1])
    _, logs = _catch_loss(monkeypatch, ecop_mod, algo, batch)  # the policy is not changed
    assert logs["cost_surrogate"] == pytest.approx([0.0, 0.0], abs=1e-6)
    assert logs["psi"] == pytest.approx(gap.tolist(), rel=1e-6)
    batch.logp = batch.logp - torch.log(torch.tensor(RATIO, dtype=torch.float32))  # as if moved by RATIO
    _, logs = _catch_loss(monkeypatch, ecop_mod, algo, batch)
    ac = _centre(ADV[:, 1:])
    upper, plain = 10.0 * _clip_max(RATIO, ac).mean(0), 10.0 * (RATIO[:, None] * ac).mean(0)
    assert (upper >= plain).all() and upper[0] > plain[0] + 1.0  # pessimism: never below, here far above
    assert logs["cost_surrogate"] == pytest.approx(upper.tolist(), rel=1e-5)
    assert logs["cost_surrogate_plain"] == pytest.approx(plain.tolist(), rel=1e-5)
    assert logs["psi"] == pytest.approx((upper + gap).tolist(), rel=1e-5)
    algo.close()


def test_ppo_lag_multiplier_step_and_loss_by_hand(monkeypatch, cmdp):
    """PPO-L (Ray et al. 2019): λ_i ← max(0, λ_i + lr (J_Ci − d_i)), then
    loss = −(E[L^CLIP] − Σ_i λ_i E[ρ A_Ci]) / (1 + Σ_i λ_i), reward advantages normalised, costs centred."""
    algo = _algo(ppo_lag_mod.PPOLag, cmdp, lagrange_init=0.3, lagrange_lr=0.5)
    batch = _batch(algo, [1.8, 1.0])  # gaps +0.8, -1.0
    loss_fn, _ = _catch_loss(monkeypatch, ppo_lag_mod, algo, batch)
    lam = np.array([0.3 + 0.5 * 0.8, max(0.0, 0.3 - 0.5 * 1.0)])  # [0.7, 0]
    assert algo.multipliers() == pytest.approx(lam.tolist(), rel=1e-12)
    # a second step from a positive λ_2 with J_C2 < d_2 lowers it without reaching 0
    algo.lagrange.value = torch.tensor([0.7, 0.9], dtype=torch.float64)
    loss_fn, _ = _catch_loss(monkeypatch, ppo_lag_mod, algo, batch)
    lam = np.array([0.7 + 0.4, 0.9 - 0.5])
    assert algo.multipliers() == pytest.approx(lam.tolist(), rel=1e-12)
    ar, ac = _norm(ADV[:, 0]), _centre(ADV[:, 1:])
    surr_r = _clip_min(RATIO, ar).mean()
    surr_c = (RATIO[:, None] * ac).mean(0)
    expect = -(surr_r - (lam * surr_c).sum()) / (1 + lam.sum())
    assert _eval(loss_fn) == pytest.approx(expect, rel=1e-5, abs=1e-6)
    algo.close()


def test_appo_adam_multiplier_step_and_augmented_loss_by_hand(monkeypatch, cmdp):
    """APPO (Dai et al. 2023, the authors' code): one Adam step on −λ·(J_C − d) (the first moves by
    lr·sign(J_C − d)), λ ≥ 0; f_i = max(0, λ_i + σ(J_Ci − d_i));
    loss = (−E[L^CLIP] + Σ_i f_i E[max(ρ A_Ci, clip(ρ) A_Ci)]) / (1 + Σ_i f_i)."""
    algo = _algo(appo_mod.APPO, cmdp, sigma=0.1, lagrange_init=0.05, lagrange_lr=0.2)
    batch = _batch(algo, [1.5, 5.0])  # gaps +0.5, +3.0: both violated, both factors positive
    loss_fn, logs = _catch_loss(monkeypatch, appo_mod, algo, batch)
    gap = np.array([0.5, 3.0])
    lam = 0.05 + 0.2 * np.sign(gap)  # the first Adam step: m̂ / √v̂ = sign(g)
    assert algo.multipliers() == pytest.approx(lam.tolist(), rel=1e-6)
    f = np.maximum(0.0, lam + 0.1 * gap)  # [0.3, 0.55]
    assert logs["appo_factor"] == pytest.approx(f.tolist(), rel=1e-6)
    ar, ac = _norm(ADV[:, 0]), _centre(ADV[:, 1:])
    expect = (-_clip_min(RATIO, ar).mean() + (f * _clip_max(RATIO, ac).mean(0)).sum()) / (1 + f.sum())
    assert _eval(loss_fn) == pytest.approx(expect, rel=1e-5)
    # a second Adam step with the second constraint now satisfied (Adam's bias-corrected moments by hand)
    batch2 = _batch(algo, [1.5, 1.0])  # gaps +0.5, -1.0
    _catch_loss(monkeypatch, appo_mod, algo, batch2)
    b1, b2, eps, lr = 0.9, 0.999, 1e-8, 0.2
    g1, g2 = -gap, -np.array([0.5, -1.0])  # gradients of −λ·gap
    m = b1 * (1 - b1) * g1 + (1 - b1) * g2
    v = b2 * (1 - b2) * g1**2 + (1 - b2) * g2**2
    lam2 = np.maximum(0.0, lam - lr * (m / (1 - b1**2)) / (np.sqrt(v / (1 - b2**2)) + eps))
    assert algo.multipliers() == pytest.approx(lam2.tolist(), rel=1e-6)
    algo.close()


def test_p3o_penalised_loss_by_hand(monkeypatch, cmdp):
    """P3O (Zhang et al. 2022, Eq. 11): −E[L^CLIP] + κ Σ_i ReLU(E[max(ρ A_Ci, clip(ρ) A_Ci)]
    + (1 − γ_C)(J_Ci − d_i)); constraint 1 violated (the ReLU is active), constraint 2 well inside."""
    algo = _algo(p3o_mod.P3O, cmdp, kappa=7.0, cost_gamma=0.9)
    batch = _batch(algo, [6.0, -8.0])  # (1 − γ_C)(J_C − d) = [0.5, −1.0]
    loss_fn, _ = _catch_loss(monkeypatch, p3o_mod, algo, batch)
    assert algo.multipliers() == [7.0, 7.0]
    ar, ac = _norm(ADV[:, 0]), _centre(ADV[:, 1:])
    l_c = _clip_max(RATIO, ac).mean(0)
    pen = np.maximum(0.0, l_c + 0.1 * np.array([5.0, -10.0]))
    assert pen[0] > 0 and pen[1] == 0  # one active, one inactive ReLU
    expect = -_clip_min(RATIO, ar).mean() + 7.0 * pen.sum()
    assert _eval(loss_fn) == pytest.approx(expect, rel=1e-5)
    algo.close()


def test_ipo_barrier_weights_and_loss_by_hand(monkeypatch, cmdp):
    """IPO (Liu, Ding & Liu 2020): w_i = H_eff / (t (d_i − J_Ci)) for a feasible constraint, penalty_max for
    a violated one, capped at penalty_max; advantage (A − Σ_i w_i A_Ci) / (1 + Σ_i w_i) in L^CLIP."""
    algo = _algo(ipo_mod.IPO, cmdp, t=20.0, penalty_max=10.0)
    batch = _batch(algo, [0.6, 2.5], ep_lengths=(8.0, 12.0))  # slack 0.4 (feasible), -0.5 (violated)
    loss_fn, _ = _catch_loss(monkeypatch, ipo_mod, algo, batch)
    w = np.array([10.0 / (20.0 * 0.4), 10.0])  # H_eff = mean episode length = 10
    assert algo.multipliers() == pytest.approx(w.tolist(), rel=1e-6)
    ar, ac = _norm(ADV[:, 0]), _centre(ADV[:, 1:])
    adv = (ar - (ac * w).sum(1)) / (1 + w.sum())
    assert _eval(loss_fn) == pytest.approx(-_clip_min(RATIO, adv).mean(), rel=1e-5)
    # a slack so small that the barrier weight exceeds the cap is capped
    _catch_loss(monkeypatch, ipo_mod, algo, _batch(algo, [0.99, 1.0]))
    assert algo.multipliers() == pytest.approx([10.0, 10.0 / (20.0 * 1.0)], rel=1e-6)
    algo.close()


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_focops_nu_step_and_loss_by_hand(monkeypatch, cmdp):
    """FOCOPS (Zhang, Vuong & Ross 2020, Eq. 9-10 and Algorithm 1): ν_i ← clip(ν_i + α_ν (J_Ci − d_i), 0,
    ν_max); per state (KL(π_θ ‖ π_k)[s] − ρ (A − Σ_i ν_i A_Ci) / λ) · 1[KL(π_θ ‖ π_k)[s] ≤ δ]. The new
    policy moves less in states 0, 1 (KL ≤ δ) than in 2, 3 (KL > δ, masked)."""
    algo = _algo(focops_mod.FOCOPS, cmdp, temperature=1.5, nu_lr=0.25, nu_max=2.0, delta=0.3)
    algo.nu = torch.tensor([0.5, 1.9], dtype=torch.float64)
    batch = _batch(algo, [1.8, 3.0])  # gaps +0.8, +1.0
    loss_fn, _ = _catch_loss(monkeypatch, focops_mod, algo, batch)
    nu = np.clip(np.array([0.5, 1.9]) + 0.25 * np.array([0.8, 1.0]), 0.0, 2.0)  # [0.7, 2.0]
    assert algo.multipliers() == pytest.approx(nu.tolist(), rel=1e-12)
    x = algo.policy_input(batch.obs, batch.h)
    with torch.no_grad():
        old_logits = algo.policy.logits(x).double().numpy()
    # moves large enough that KL(π_θ ‖ π_k) and KL(π_k ‖ π_θ) differ well beyond float32 round-off
    shift = np.array([[0.9, -0.7, 0.0], [-0.8, 0.0, 0.9], [3.0, -2.0, 0.0], [-2.5, 3.0, 0.0]])
    new_logits = old_logits + shift
    p_old, p_new = _softmax(old_logits), _softmax(new_logits)
    kl = (p_new * (np.log(p_new) - np.log(p_old))).sum(1)  # KL(π_θ ‖ π_k), not KL(π_k ‖ π_θ)
    kl_rev = (p_old * (np.log(p_old) - np.log(p_new))).sum(1)
    assert (kl[:2] < 0.3).all() and (kl[2:] > 0.3).all() and (np.abs(kl - kl_rev)[:2] > 0.01).all()
    ratio = p_new[np.arange(4), ACTIONS] / p_old[np.arange(4), ACTIONS]
    adv = _norm(ADV[:, 0]) - (_centre(ADV[:, 1:]) * nu).sum(1)
    expect = ((kl - ratio * adv / 1.5) * (kl <= 0.3)).mean()
    dist = torch.distributions.Categorical(logits=torch.tensor(new_logits, dtype=torch.float32))
    assert _eval(loss_fn, ratio, dist) == pytest.approx(expect, rel=1e-4)
    # ν is clipped at 0 from below too
    algo.nu = torch.tensor([0.1, 0.1], dtype=torch.float64)
    _catch_loss(monkeypatch, focops_mod, algo, _batch(algo, [0.0, 2.2]))
    assert algo.multipliers() == pytest.approx([0.0, 0.1 + 0.25 * 0.2], rel=1e-12)
    algo.close()


def _tq(v, w, g, b):
    g, b, v, w = (torch.tensor(a, dtype=torch.float64) for a in (g, b, v, w))
    return TRQuantities(g, b, v, w, float(g @ v), float(g @ w), float(b @ w))


def test_pcpo_step_is_the_kl_projection_by_hand():
    """PCPO (Yang et al. 2020, Eq. 7 with the KL projection): θ½ = θ + √(2δ/q) H⁻¹g, then
    θ = θ½ − max(0, (√(2δ/q) r + c) / s) H⁻¹b; after a projection the linearised constraint
    c + bᵀx is 0 (tight), without one the step is TRPO's."""
    H = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 0.5]])
    g, b = np.array([1.0, -0.5, 0.25]), np.array([0.2, 0.8, -0.4])
    Hi = np.linalg.inv(H)
    tq = _tq(Hi @ g, Hi @ b, g, b)
    delta = 0.01
    alpha = math.sqrt(2 * delta / (g @ Hi @ g))
    for c in (0.05, -0.5):
        step, proj = pcpo_mod.pcpo_step(tq, c, delta)
        p = max(0.0, (alpha * (g @ Hi @ b) + c) / (b @ Hi @ b))
        assert proj == pytest.approx(p, rel=1e-6)
        np.testing.assert_allclose(step.numpy(), alpha * Hi @ g - p * Hi @ b, rtol=1e-6)
        if p > 0:
            assert c + b @ step.numpy() == pytest.approx(0.0, abs=1e-7)
            assert 0.5 * step.numpy() @ H @ step.numpy() > delta  # the projection left the TR ball
        else:
            assert 0.5 * step.numpy() @ H @ step.numpy() == pytest.approx(delta, rel=1e-6)


def test_cpo_step_and_per_step_constraint_value_by_hand(monkeypatch, cmdp):
    """CPO's update: c = (Ĵ_C − d) / H_eff, the step (H⁻¹g − ν H⁻¹b) / λ from the dual (Achiam et al.,
    Theorem 1), handed to the line search. With one constraint, checked against the trust-region
    quantities the update computes and ``cpo_direction`` (pinned against a QCQP solver elsewhere)."""
    one = make_ergodic_cmdp(num_states=4, num_actions=3, num_costs=1, seed=2)
    algo = _algo(cpo_mod.CPO, one, cost_limits=[1.0], target_kl=0.01)
    batch = _batch(algo, [1.8], ep_lengths=(8.0,))
    batch.advantages = batch.advantages[:, :2].contiguous()
    caught = {}
    real = cpo_mod.single_constraint_step_inputs

    def spy_inputs(*a, **k):
        out = real(*a, **k)
        caught["inputs"] = out
        return out

    def spy_search(policy, step, accept, steps, decay):
        caught["step"] = step.clone()
        return False, steps

    monkeypatch.setattr(cpo_mod, "single_constraint_step_inputs", spy_inputs)
    monkeypatch.setattr(cpo_mod, "backtracking_line_search", spy_search)
    logs = algo.update_policy(batch)
    adv_r, adv_c, c, tq, _, _ = caught["inputs"]
    assert c == pytest.approx(0.8 / 8.0, rel=1e-6)
    np.testing.assert_allclose(adv_r.numpy(), _norm(ADV[:, 0]), rtol=1e-5)
    np.testing.assert_allclose(adv_c.numpy(), _centre(ADV[:, 1]), rtol=1e-5, atol=1e-7)
    lam, nu, case = cpo_mod.cpo_direction(tq.q, tq.r, tq.s, c, 0.01)
    assert logs["cpo_case"] == case == 1 and logs["nu"] == nu > 0  # both constraints of the QCQP active
    expect = (tq.v - nu * tq.w) / lam
    step = caught["step"].double()
    # KKT: the linearised constraint c + bᵀx = 0 and the trust region xᵀHx / 2 = δ (Hx = g − ν b over λ)
    assert c + float(tq.b.double() @ step) == pytest.approx(0.0, abs=1e-6)
    assert float((tq.g.double() - nu * tq.b.double()) @ step) / lam / 2 == pytest.approx(0.01, rel=1e-4)
    torch.testing.assert_close(caught["step"], expect.to(caught["step"].dtype), rtol=1e-5, atol=1e-9)
    algo.close()

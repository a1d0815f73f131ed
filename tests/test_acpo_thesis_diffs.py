"""Pinned behaviour for the "Differences from the thesis" of chapter `acpo` (docs/reproduction.md)."""

from __future__ import annotations

import pytest
import torch

from bayescrl.constrained import atrpo as atrpo_mod
from bayescrl.constrained.acpo import trust_region_terms
from bayescrl.constrained.atrpo import ATRPO
from bayescrl.constrained.ppo_lag import PPOLag
from bayescrl.envs import make_ergodic_cmdp

CFG = {"n_envs": 2, "rollout_steps": 100, "normalize_obs": False, "update_epochs": 1}


def _factory():
    cmdp = make_ergodic_cmdp(num_states=5, num_actions=3, seed=2)
    return cmdp, (lambda: cmdp.make_env(max_episode_steps=50))


def _batch(algo):
    algo.collector.reset(algo.seed)
    algo._started = True
    roll = algo.collector.collect(algo.policy, algo.critic_value, algo.config.rollout_steps, algo.rng)
    return algo.compute_advantages(roll)


def test_atrpo_lagrangian_normalises_cost_advantages(monkeypatch):
    """Appendix `Experimental Details`: advantages normalised "for both rewards and constraints"."""
    cmdp, factory = _factory()
    algo = ATRPO(factory, cost_limits=cmdp.limits.tolist(), seed=0, config={**CFG, "delta": 0.01, "ell": 0.5})
    seen = []
    real = atrpo_mod.trust_region_terms
    monkeypatch.setattr(
        atrpo_mod, "trust_region_terms", lambda *a, **k: seen.append(real(*a, **k)) or seen[-1]
    )
    algo.learn(200, progress=False)
    algo.close()
    adv_c = seen[0].adv_c
    assert float(adv_c.std()) > 0.5  # the CMDP's costs vary
    assert adv_c.mean(0).abs().max() < 1e-5
    assert adv_c.std(0) == pytest.approx(torch.ones(adv_c.shape[1]), abs=1e-4)
    # ACPO keeps the cost units (a_i next to c_i): only centred
    centred = trust_region_terms(algo, _batch(algo), 2, 0.1).adv_c
    assert centred.mean(0).abs().max() < 1e-5 and float(centred.std()) != pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("ell, unit", [(0.3, True), (None, False)])
def test_ppo_lagrangian_cost_advantage_scaling(ell, unit):
    """Fixed-ℓ PPO (chapter `acpo`) normalises cost advantages; adaptive PPO-L (safety-starter-agents)
    only centres them."""
    cmdp, factory = _factory()
    algo = PPOLag(factory, cost_limits=cmdp.limits.tolist(), seed=0, config={**CFG, "ell": ell})
    batch = _batch(algo)
    adv_r, adv_c = algo.policy_advantages(batch)
    algo.close()
    assert float(adv_r.std()) == pytest.approx(1.0, abs=1e-4)
    assert adv_c.mean(0).abs().max() < 1e-5
    raw_sd = float(batch.advantages[:, 1].std())
    assert float(adv_c[:, 0].std()) == pytest.approx(1.0 if unit else raw_sd, rel=1e-4)


@pytest.mark.parametrize("q", [1e-14, 1e-12])
def test_acpo_tiny_reward_gradient_skips_the_dual_step(monkeypatch, q):
    """q = gᵀH⁻¹g in (1e-16, 1e-12] used to reach `acpo_dual` and raise ConfigError mid-training; now the
    feasible branch takes no step (no ascent direction) and training goes on."""
    from bayescrl.constrained import acpo as acpo_mod
    from bayescrl.constrained.acpo import ACPO

    real = acpo_mod.trust_region_terms

    def tiny(*a, **k):
        tr = real(*a, **k)
        s = (q / tr.q) ** 0.5  # scale g (and H⁻¹g, r) so that gᵀH⁻¹g = q
        tr.g, tr.v, tr.r, tr.q = s * tr.g, s * tr.v, s * tr.r, q
        return tr

    monkeypatch.setattr(acpo_mod, "trust_region_terms", tiny)
    cmdp, factory = _factory()
    algo = ACPO(factory, cost_limits=[10.0], seed=0, config={**CFG, "delta": 0.01})  # feasible
    algo.learn(400, progress=False)
    algo.close()
    assert [h["branch"] for h in algo.history] == ["none", "none"]


def test_acpo_gae_uses_the_same_phase_stratified_rate_as_c():
    """Eq. `avg_GAE`'s Ĵ_C and c = Ĵ_C − l use one estimate (cost_estimate="phase"); "batch" keeps the
    batch mean in both. 100-step rollouts of 30-step episodes: phases are uneven, so the two differ."""
    from bayescrl.constrained.acpo import ACPO, phase_stratified_rate

    cmdp = make_ergodic_cmdp(num_states=5, num_actions=3, seed=2)
    factory = lambda: cmdp.make_env(max_episode_steps=30)  # noqa: E731
    rates = {}
    for est in ("phase", "batch"):
        algo = ACPO(factory, cost_limits=[10.0], seed=0, config={**CFG, "cost_estimate": est})
        batch = _batch(algo)
        algo.close()
        rates[est] = batch.avg_rates.double()
        phase = phase_stratified_rate(batch.rewards, batch.h)
        mean = batch.rewards.double().mean(0)
        assert float((phase - mean).abs().max()) > 1e-3
        torch.testing.assert_close(rates[est], phase if est == "phase" else mean, rtol=1e-5, atol=1e-6)


def test_cost_channel_without_cost_is_only_centred():
    """A batch whose raw costs are all zero has cost advantages that are critic differences only: the
    normalisation centres them and keeps their size (unit sd would make critic noise a full cost signal).
    Per channel: a channel with costs is still normalised to sd 1."""
    from bayescrl.constrained.core.base import OnPolicyAlgorithm

    adv = torch.tensor([[0.3, 0.02], [-0.1, -0.01], [0.4, 0.03], [0.0, 0.0]])
    costs = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0], [1.0, 0.0]])
    out = OnPolicyAlgorithm.normalize_cost_advantages(adv, costs)
    # channel 0 has costs: (adv - 0.15) / sd(adv), sd (n - 1) = sqrt(0.17 / 3); channel 1: adv - 0.01
    torch.testing.assert_close(out[:, 0], (adv[:, 0] - 0.15) / (0.17 / 3) ** 0.5, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out[:, 1], torch.tensor([0.01, -0.02, 0.02, -0.01]), rtol=1e-5, atol=1e-7)
    assert OnPolicyAlgorithm.normalize_cost_advantages(adv[:, :0], costs[:, :0]).shape == (4, 0)


def test_atrpo_and_fixed_ell_ppo_centre_cost_advantages_of_a_cost_free_batch():
    """Through the two code paths (Lagrangian ATRPO's trust-region terms, fixed-ℓ PPO-L): zero the batch's
    raw costs and the cost advantages come back centred at their raw sd, not scaled to sd 1."""
    cmdp, factory = _factory()
    limits = cmdp.limits.tolist()
    atrpo = ATRPO(factory, cost_limits=limits, seed=0, config={**CFG, "delta": 0.01, "ell": 0.5})
    ppo = PPOLag(factory, cost_limits=limits, seed=0, config={**CFG, "ell": 0.3})
    for algo, get in (
        (atrpo, lambda a, b: trust_region_terms(a, b, 2, 0.1, normalize_costs=True).adv_c),
        (ppo, lambda a, b: a.policy_advantages(b)[1]),
    ):
        batch = _batch(algo)
        raw = batch.advantages[:, 1:]
        assert float(get(algo, batch).std()) == pytest.approx(1.0, abs=1e-4)  # costs seen: unit sd
        batch.rewards[:, 1:] = 0.0
        adv_c = get(algo, batch)
        algo.close()
        torch.testing.assert_close(adv_c, raw - raw.mean(0), rtol=1e-5, atol=1e-6)
        assert abs(float(adv_c.std()) - 1.0) > 0.1

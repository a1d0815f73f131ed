"""Pinned behaviour for the e-COP "Differences from the thesis" (docs/reproduction.md, chapter `ecop`)."""

from __future__ import annotations

import pytest
import torch

from bayescrl.constrained.ecop import ECOP, ecop_damping, ecop_penalty
from bayescrl.envs import make_ergodic_cmdp


def _ecop(**cfg):
    cmdp = make_ergodic_cmdp(num_states=5, num_actions=3, seed=2)
    base = {"n_envs": 2, "rollout_steps": 100, "normalize_obs": False, "update_epochs": 1}
    factory = lambda: cmdp.make_env(max_episode_steps=50)  # noqa: E731
    return ECOP(factory, cost_limits=[0.0], seed=0, config={**base, **cfg})


def _ecop_batch(algo):
    algo.collector.reset(algo.seed)
    algo._started = True
    roll = algo.collector.collect(algo.policy, algo.critic_value, algo.config.rollout_steps, algo.rng)
    return algo.compute_advantages(roll)


@pytest.mark.parametrize("scale", ["per_step", "episode"])
def test_ecop_multiplier_step_is_beta_times_episode_gap(scale):
    """Eq. `lagrangeupdaterule` in episode units: lambda_1 = beta (J_C - d), not beta (J_C - d) / H (the old
    per_step scaling, whose effective damping was beta / H)."""
    algo = _ecop(beta=3.0, adaptive_beta=False, constraint_scale=scale)
    batch = _ecop_batch(algo)
    gap = float(batch.ep_cost_est[0])  # d = 0
    assert gap > 1.0 and algo.horizon == 50
    algo.update_policy(batch)
    algo.close()
    assert algo.lam.tolist() == pytest.approx([3.0 * gap])


def test_ecop_penalty_slope():
    """The code minimises the second display, Eq. `main_e-COP_problem`: slope 2 lambda + beta Psi for
    Psi > 0, lambda + beta Psi on (-lambda/beta, 0], 0 below (the first display, Eq.
    `damped_intermediate_problem`, would give lambda + beta Psi for Psi > 0)."""
    lam, beta = torch.tensor([1.5, 1.5, 1.5]), 4.0
    psi = torch.tensor([0.5, -0.1, -1.0], requires_grad=True)
    ecop_penalty(psi, lam, beta).backward()
    torch.testing.assert_close(psi.grad, torch.tensor([2 * 1.5 + 4.0 * 0.5, 1.5 + 4.0 * -0.1, 0.0]))


def test_ecop_beta_grows_every_iteration_while_lambda_is_zero():
    """Algorithm `practical-ECOP`: with lambda = 0, zeta = 0 and C = H sum max(J_C - d, 0) >= 0, so beta
    grows by kappa even when the constraint is satisfied (J_C < d)."""
    lam = torch.zeros(2, dtype=torch.float64)
    gap = torch.tensor([-3.0, -0.5], dtype=torch.float64)  # both satisfied
    new_beta, c_val, zeta = ecop_damping(gap, lam, 5.0, 200, kappa=1.02, beta_max=20.0)
    assert (c_val, zeta) == (0.0, 0.0) and new_beta == pytest.approx(5.1)
    # a positive multiplier on a satisfied constraint stops the growth
    lam1 = torch.tensor([0.5, 0.0], dtype=torch.float64)
    assert ecop_damping(gap, lam1, 5.0, 200, kappa=1.02, beta_max=20.0)[0] == 5.0


def test_appo_multiplier_penalty_and_adam_multiplier():
    """APPO (Dai et al. 2023): f = max(0, λ + σ(J_C − d)); λ by one Adam step on −λ(J_C − d) per iteration
    (the first Adam step moves by lr·sign(gap)), projected on λ ≥ 0."""
    from bayescrl.constrained.appo import APPO, appo_factor
    from bayescrl.constrained.registry import REGISTRY, get_algorithm

    lam = torch.tensor([0.5, 0.5, 0.0])
    gap = torch.tensor([2.0, -10.0, -1.0])
    torch.testing.assert_close(appo_factor(lam, gap, 0.1), torch.tensor([0.7, 0.0, 0.0]))
    cmdp = make_ergodic_cmdp(num_states=5, num_actions=3, seed=2)
    cfg = {"n_envs": 2, "rollout_steps": 100, "normalize_obs": False, "update_epochs": 1}
    algo = APPO(lambda: cmdp.make_env(max_episode_steps=50), cost_limits=[0.0], seed=0, config=cfg)
    batch = _ecop_batch(algo)
    logs = algo.update_policy(batch)
    algo.close()
    assert algo.multipliers() == pytest.approx([1e-3 + 0.2], rel=1e-6)  # J_C > d = 0
    assert logs["appo_factor"] == pytest.approx([0.201 + 0.1 * float(batch.ep_cost_est[0])], rel=1e-5)
    assert get_algorithm("appo") is APPO and "bvf-ppo" not in REGISTRY


def test_ecop_backward_sweep_is_one_time_conditioned_network_with_one_multiplier_per_constraint():
    """Algorithm `practical-ECOP` sweeps t = H..1 over H policies with multipliers λ_{t,i}: here the H
    policies are one network whose input carries h/H (π_h stays non-stationary), updated on the t = 1
    loss, and Eq. `lagrangeupdaterule` keeps one λ_i per constraint (Ψ_{C_i,t} is the same for every t)."""
    algo = _ecop(beta=3.0, adaptive_beta=False)
    assert algo.policy_time and algo.lam.shape == (algo.m,) == (1,)
    first = next(p for p in algo.policy.parameters() if p.dim() == 2)
    assert first.shape[1] == algo.encoder.dim + 1  # the observation and h/H
    batch = _ecop_batch(algo)
    algo.update_policy(batch)
    algo.close()
    assert algo.lam.shape == (1,)

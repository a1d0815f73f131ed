"""Must-hold: tabular softmax ACPO reaches the LP optimum of an ergodic average-reward CMDP (within 5%)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bayescrl.constrained.acpo_tabular import TabularACPOConfig, _advantages, run_tabular_acpo
from bayescrl.constrained.core.optim import conjugate_gradient
from bayescrl.envs import make_ergodic_cmdp
from bayescrl.utils import ConfigError


@pytest.mark.parametrize("seed", [1, 3])
def test_exact_acpo_reaches_lp_optimum_with_constraint(seed):
    cmdp = make_ergodic_cmdp(num_states=5, num_actions=3, seed=seed)
    lp = cmdp.solve()
    unconstrained = cmdp.solve(constrained=False)
    assert unconstrained.value > lp.value + 1e-3  # the constraint binds: ignoring it would not pass
    res = run_tabular_acpo(cmdp, TabularACPOConfig(iterations=80, mode="exact", delta=0.01))
    assert res.rewards[-1] >= 0.95 * lp.value
    assert res.costs[-1][0] <= cmdp.limits[0] * (1 + 1e-3)  # feasible up to the linearisation error
    # the LP optimum is an upper bound for any feasible policy
    assert res.rewards[-1] <= lp.value + 1e-3 * abs(lp.value)


@pytest.mark.parametrize("seed", [0])
def test_sampled_acpo_reaches_lp_optimum(seed):
    """Estimates from 2500 samples per iteration: Ĵ's and average-reward GAE (λ = 0.95), tabular critic."""
    cmdp = make_ergodic_cmdp(num_states=5, num_actions=3, seed=seed)
    lp = cmdp.solve()
    res = run_tabular_acpo(cmdp, TabularACPOConfig(iterations=60, mode="sampled", delta=0.01, seed=seed))
    last = slice(-20, None)
    rewards, costs = np.asarray(res.rewards[last]), np.asarray(res.costs[last])[:, 0]
    assert rewards.mean() >= 0.95 * lp.value
    # sample noise of Ĵ_C (2500 correlated samples) leaves a small violation; the mean stays within 2%
    assert costs.mean() <= cmdp.limits[0] * 1.02
    assert res.rewards[0] < 0.9 * lp.value  # it did have to learn


def test_recovery_brings_infeasible_start_back():
    """A tight limit makes the uniform start infeasible; the first updates must be recoveries."""
    cmdp = make_ergodic_cmdp(num_states=5, num_actions=3, seed=4, tightness=0.05)
    lp = cmdp.solve()
    res = run_tabular_acpo(cmdp, TabularACPOConfig(iterations=80, mode="exact", delta=0.01))
    assert res.costs[0][0] > cmdp.limits[0]
    assert res.branch[0] == "recovery"
    assert res.costs[-1][0] <= cmdp.limits[0] * (1 + 1e-3)
    assert res.rewards[-1] >= 0.95 * lp.value


def test_cg_matches_direct_solve_on_tabular_fisher():
    cmdp = make_ergodic_cmdp(num_states=6, num_actions=3, seed=0)
    S, A = 6, 3
    pi = torch.softmax(torch.randn(S, A, dtype=torch.float64), -1)
    _, _, d, _ = _advantages(cmdp, pi.numpy())
    d = torch.as_tensor(d)
    damping = 1e-2
    blocks = [d[s] * (torch.diag(pi[s]) - torch.outer(pi[s], pi[s])) for s in range(S)]
    H = torch.block_diag(*blocks) + damping * torch.eye(S * A, dtype=torch.float64)

    def fvp(v):
        vs = v.view(S, A)
        return (d[:, None] * (pi * vs - pi * (pi * vs).sum(-1, keepdim=True))).reshape(-1) + damping * v

    b = torch.randn(S * A, 2, dtype=torch.float64)
    x = conjugate_gradient(fvp, b, iters=4 * S * A, tol=1e-28)  # exact in dim steps up to round-off
    assert torch.allclose(x, torch.linalg.solve(H, b), rtol=1e-6, atol=1e-8)
    x10 = conjugate_gradient(fvp, b[:, 0], iters=10)  # the table's budget: close but not exact
    direct = torch.linalg.solve(H, b[:, 0])
    assert float((x10 - direct).norm() / direct.norm()) < 0.5


def test_config_errors_name_the_field():
    with pytest.raises(ConfigError, match="recovery_t"):
        TabularACPOConfig(recovery_t=1.5)
    with pytest.raises(ConfigError, match="mode"):
        TabularACPOConfig(mode="magic")
    with pytest.raises(ConfigError, match="criterion"):
        run_tabular_acpo(make_ergodic_cmdp(seed=0, criterion="discounted"))

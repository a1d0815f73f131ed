"""ACPO's average-cost estimate ``phase_stratified_rate`` against known answers."""

import torch

from bayescrl.constrained.acpo import ACPOConfig, phase_stratified_rate
from bayescrl.utils.errors import ConfigError


def _layout(phases: list[range]) -> torch.Tensor:
    return torch.cat([torch.tensor(list(r)) for r in phases])


def test_phase_estimate_is_unbiased_on_partial_episodes():
    # cost 1 in the second half of a 200-step episode: the reset chain's average cost is exactly 0.5
    for phases in ([range(200), range(200), range(100)], [range(100, 200), range(200), range(200)]):
        h = _layout(phases)
        costs = (h >= 100).double()[:, None]
        assert abs(float(costs.mean()) - 0.5) >= 0.09  # the plain batch mean is off by 0.1
        assert torch.allclose(phase_stratified_rate(costs, h), torch.tensor([0.5], dtype=torch.float64))


def test_phase_estimate_equals_batch_mean_when_balanced():
    g = torch.Generator().manual_seed(0)
    h = _layout([range(50)] * 4)
    costs = torch.rand(h.shape[0], 2, generator=g, dtype=torch.float64)
    assert torch.allclose(phase_stratified_rate(costs, h), costs.mean(0))
    # unbalanced: mean over h of the per-h means
    h2 = torch.tensor([0, 0, 0, 1])
    c2 = torch.tensor([[1.0], [2.0], [3.0], [10.0]], dtype=torch.float64)
    assert torch.allclose(phase_stratified_rate(c2, h2), torch.tensor([6.0], dtype=torch.float64))


def test_bad_cost_estimate_is_rejected():
    try:
        ACPOConfig(cost_estimate="median").validate()
    except ConfigError as e:
        assert "cost_estimate" in str(e)
    else:  # pragma: no cover
        raise AssertionError("cost_estimate='median' was accepted")


def test_model_error_correction_tracks_realised_minus_predicted_change():
    """``b <- (1 - α) b + α (ΔĴ_C − predicted)``, only tightening: known sequence, α = 0.5."""
    from types import SimpleNamespace

    import numpy as np

    from bayescrl.constrained.acpo import ACPO

    algo = ACPO.__new__(ACPO)  # the correction needs no environment
    algo.m, algo.config = 1, SimpleNamespace(error_correction=0.5)
    algo.setup()
    np.testing.assert_allclose(algo._corrected(np.array([0.05])), [0.0])  # first iteration: no comparison
    algo._prev_pred = np.array([-0.02])  # the step predicted a decrease of 0.02 ...
    # ... and the cost rose by 0.01: error 0.03
    np.testing.assert_allclose(algo._corrected(np.array([0.06])), [0.5 * 0.03])
    algo._prev_pred = np.array([0.01])
    np.testing.assert_allclose(algo._corrected(np.array([0.02])), [0.0])  # b = 0.015/2 - 0.025 < 0: off
    np.testing.assert_allclose(algo._bias, [0.5 * 0.015 + 0.5 * (0.02 - 0.06 - 0.01)])
    algo.config.error_correction = 0.0
    np.testing.assert_allclose(algo._corrected(np.array([0.5])), [0.0])  # off: the text's constraint
    try:
        ACPOConfig(error_correction=1.5).validate()
    except ConfigError as e:
        assert "error_correction" in str(e)
    else:  # pragma: no cover
        raise AssertionError("error_correction=1.5 was accepted")

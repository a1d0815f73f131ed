"""Hand-computed pin of MOPO's Bradley–Terry preference fit (``preferences.fit_bt_rewards``):
with one rater of known competence β and a large λ (belief ≈ truth), the utilities' posterior is the
Laplace approximation of ``−Σ_n log σ(β s_n (x1_n − x0_n)·u) + ‖u‖² / (2 s²)`` (prior ``u ~ N(0, s² I)``,
s = ``prior_sd``): mean at the MAP, covariance the inverse Hessian. Three actions and five records keep
the prior's weight large, so a prior scale s instead of s² (the variance) changes the covariance by far
more than the Monte Carlo error. Fails under the mutations listed in ``tools/mutation_check.py``."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from bayescrl.mopo.preferences import fit_bt_rewards
from bayescrl.raters import Rater

Y = [0, 1, 0, 2, 0]
Y_PRIME = [1, 2, 2, 1, 2]
IND = [1.0, 1.0, 0.0, 1.0, 1.0]  # 1: y preferred
BETA, S = 2.0, 1.5


def _hand_laplace():
    eye = np.eye(3)
    z = eye[Y] - eye[Y_PRIME]
    sign = 2 * np.array(IND) - 1

    def f(u):
        return np.logaddexp(0, -BETA * sign * (z @ u)).sum() + u @ u / (2 * S**2)

    u = minimize(f, np.zeros(3), method="BFGS", options={"gtol": 1e-10}).x
    p = 1 / (1 + np.exp(-BETA * sign * (z @ u)))
    hess = (BETA**2 * p * (1 - p) * z.T) @ z + np.eye(3) / S**2
    return u, np.linalg.inv(hess)


@pytest.mark.parametrize("competence", ["infer", "infer-beta"])
def test_bt_reward_posterior_is_the_hand_laplace_with_prior_variance_s_squared(competence):
    eye = torch.eye(3, dtype=torch.float64)
    n = 20000
    post = fit_bt_rewards(
        eye[Y],
        eye[Y_PRIME],
        torch.tensor(IND)[:, None],
        torch.zeros(len(Y), dtype=torch.long),
        [Rater("a", BETA, 1000.0)],
        prior_sd=S,
        competence=competence,
        num_samples=n,
        seed=3,
    )
    th = post.theta[:, 0].numpy()
    m, C = _hand_laplace()
    se = np.sqrt(np.diag(C) / n)
    assert (np.abs(th.mean(0) - m) < 4 * se).all()
    np.testing.assert_allclose(np.cov(th.T), C, rtol=0, atol=0.05 * np.diag(C).max())

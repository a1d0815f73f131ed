"""The Bradley–Terry likelihood with rater competence, batched in torch.

A rater of deliberateness β holding the reward vector ϑ prefers item ``x0`` over ``x1`` (label ``Y = 0``)
with probability (Eq. `rater_preference_dist` of chapter `warmPref-PS`, Eq. `pref_logistic_trajectories`
of chapter `PSPL`)

    P(Y = 0 | x0, x1; ϑ) = σ(β ⟨x0 − x1, ϑ⟩),    so    P(Y = 1) = σ(β ⟨x1 − x0, ϑ⟩).

``x`` is an arm's feature vector (bandits), a trajectory embedding φ(τ) (PSPL), a one-hot action (tabular
MOPO) or the features of a prompt–response pair (language models). Every function broadcasts over leading
batch dimensions (seeds, samples, records) and the feature dimension is the last.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def score_diff(x0: Tensor, x1: Tensor, vartheta: Tensor) -> Tensor:
    """``⟨x0 − x1, ϑ⟩`` ``[...]``: the rater's reward difference of the two items."""
    return ((x0 - x1) * vartheta).sum(-1)


def bt_logit(x0: Tensor, x1: Tensor, vartheta: Tensor, beta: Tensor | float) -> Tensor:
    """Logit of ``P(Y = 0)``: ``β ⟨x0 − x1, ϑ⟩`` (Eq. `rater_preference_dist`)."""
    return beta * score_diff(x0, x1, vartheta)


def prob_first(x0: Tensor, x1: Tensor, vartheta: Tensor, beta: Tensor | float) -> Tensor:
    """``P(Y = 0) = σ(β ⟨x0 − x1, ϑ⟩)`` (Eq. `pref_logistic_trajectories`)."""
    return torch.sigmoid(bt_logit(x0, x1, vartheta, beta))


def signed_diff(x0: Tensor, x1: Tensor, y: Tensor) -> Tensor:
    """``s_n (x0 − x1)`` ``[..., d]`` with ``s_n = +1`` if ``Y_n = 0`` else ``−1``: preferred minus other."""
    sign = 1.0 - 2.0 * y.to(x0.dtype)
    return sign[..., None] * (x0 - x1)


def log_likelihood(x0: Tensor, x1: Tensor, y: Tensor, vartheta: Tensor, beta: Tensor | float) -> Tensor:
    """Per-record ``log P(Y = y)`` ``[...]`` = ``log σ(β s ⟨x0 − x1, ϑ⟩)`` (sum it for the data set)."""
    s = 1.0 - 2.0 * y.to(x0.dtype)
    return F.logsigmoid(s * bt_logit(x0, x1, vartheta, beta))

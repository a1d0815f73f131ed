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

from bayescrl.utils.errors import DataError


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


def check_prefs(x0: Tensor, x1: Tensor, y: Tensor, dims: tuple[str, ...] | None = None) -> None:
    """Refuse comparisons the likelihood cannot use, naming the argument: ``x0, x1 [..., d]`` tensors that
    broadcast (of one shape ``dims``, e.g. ``("S", "N", "d")``, when given), labels ``y`` (shaped as ``x0``
    without ``d``, or broadcasting with it) in {0, 1}, ``x0, x1`` finite. One host sync when all is well."""
    for name, t in (("x0", x0), ("x1", x1), ("y", y)):
        if not isinstance(t, Tensor):
            raise DataError(name, type(t).__name__, "must be a torch tensor")
    if dims is not None:
        want = f"expected shape [{', '.join(dims)}]"
        if x0.dim() != len(dims):
            raise DataError("x0", tuple(x0.shape), want)
        if x1.shape != x0.shape:
            raise DataError("x1", tuple(x1.shape), f"{want}, that of x0 {list(x0.shape)}")
        if y.shape != x0.shape[:-1]:
            raise DataError("y", tuple(y.shape), f"expected shape {list(x0.shape[:-1])} (x0's without d)")
    else:
        try:
            ok = min(x0.dim(), x1.dim()) > 0 and x0.shape[-1] == x1.shape[-1]
            if ok:
                torch.broadcast_shapes(y.shape, torch.broadcast_shapes(x0.shape, x1.shape)[:-1])
        except RuntimeError:
            ok = False
        if not ok:
            shapes = {"x0": tuple(x0.shape), "x1": tuple(x1.shape), "y": tuple(y.shape)}
            raise DataError("x0, x1, y", shapes, "expected x0, x1 [..., d] and y [...] that broadcast")
    labels, fin0, fin1 = (y == 0) | (y == 1), torch.isfinite(x0), torch.isfinite(x1)
    if bool(labels.all() & fin0.all() & fin1.all()):
        return
    for name, t, ok, why in (
        ("y", y, labels, "must be 0 or 1"),
        ("x0", x0, fin0, "must be finite"),
        ("x1", x1, fin1, "must be finite"),
    ):
        if not bool(ok.all()):
            pos = (~ok).nonzero()[0].tolist()
            raise DataError(f"{name}[{', '.join(map(str, pos))}]", t[tuple(pos)].item(), why)


def log_likelihood(x0: Tensor, x1: Tensor, y: Tensor, vartheta: Tensor, beta: Tensor | float) -> Tensor:
    """Per-record ``log P(Y = y)`` ``[...]`` = ``log σ(β s ⟨x0 − x1, ϑ⟩)`` (sum it for the data set); the data
    are checked by :func:`check_prefs`."""
    check_prefs(x0, x1, y)
    s = 1.0 - 2.0 * y.to(x0.dtype)
    return F.logsigmoid(s * bt_logit(x0, x1, vartheta, beta))

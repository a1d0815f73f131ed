"""Optimiser construction shared by the trainers."""

from __future__ import annotations

from collections.abc import Iterable

import torch


def make_adam(params: Iterable[torch.nn.Parameter], lr: float) -> torch.optim.Adam:
    """``Adam(fused=True)`` where this torch and device have the fused kernel, else the default Adam.

    Fused Adam is one kernel per step for all tensors (the per-tensor ops of the foreach/for-loop versions
    dominate the hundreds of tiny minibatch steps of an update); it needs torch >= 2.4 on CPU (the package
    supports >= 2.2). Both give the same update up to float rounding.
    """
    params = list(params)
    try:
        return torch.optim.Adam(params, lr=lr, fused=True)
    except (RuntimeError, TypeError, ValueError):  # a torch or device without the fused kernel
        return torch.optim.Adam(params, lr=lr)

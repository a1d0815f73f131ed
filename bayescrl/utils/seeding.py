"""Reproducible seeding and CPU-thread defaults."""

from __future__ import annotations

import os
import random
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch


def seed_everything(seed: int) -> torch.Generator:
    """Seed python, numpy, torch and pyro; return a fresh ``torch.Generator`` seeded with ``seed``."""
    import pyro
    import torch

    random.seed(seed)
    np.random.seed(seed % (2**32))  # noqa: NPY002 (legacy global RNG used by third-party code)
    torch.manual_seed(seed)
    pyro.set_rng_seed(seed)
    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen


def set_torch_threads(n: int | None = None) -> int:
    """Set torch's intra-op threads (default 1, or ``$BAYESCRL_THREADS``).

    Small MLPs on a shared 2-core machine run up to ~9x slower with more threads than free cores.
    """
    if n is None:
        n = int(os.environ.get("BAYESCRL_THREADS", "1"))
    if n < 1:
        raise ValueError(f"threads = {n}: must be >= 1")
    import torch

    torch.set_num_threads(n)
    return n

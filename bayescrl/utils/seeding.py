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
    from bayescrl.utils.errors import ConfigError

    field = "threads"
    if n is None:
        field, n = "$BAYESCRL_THREADS", os.environ.get("BAYESCRL_THREADS", "1")
    try:
        ok = not isinstance(n, bool) and int(n) >= 1 and float(n) == int(n)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ConfigError(field, n, "must be an integer >= 1")
    n = int(n)
    import torch

    torch.set_num_threads(n)
    return n


def draw(fn, shape, generator: torch.Generator | None, *, dtype, device) -> torch.Tensor:
    """``fn(shape)`` (``torch.randn`` / ``torch.rand``) on ``device``, drawn on ``generator``'s device.

    The package's generators are CPU ``torch.Generator``s (one stream per seed/agent, reproducible across
    devices); a CPU generator cannot feed a CUDA sampler, so the draw is made where the generator lives and
    moved (a no-op when both agree, so CPU results are unchanged and CUDA runs use the same numbers).
    """
    gdev = device if generator is None else generator.device
    return fn(shape, generator=generator, dtype=dtype, device=gdev).to(device)


def bernoulli(p: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """``torch.bernoulli(p)`` drawn on ``generator``'s device (see :func:`draw`), returned on ``p.device``."""
    import torch

    if generator is None or generator.device == p.device:
        return torch.bernoulli(p, generator=generator)
    return torch.bernoulli(p.to(generator.device), generator=generator).to(p.device)

"""Reproducible seeding and CPU-thread defaults."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from bayescrl.utils.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Sequence

    import torch

    #: the ``generator`` of the samplers below: one CPU stream, one stream per run (the draw's rows along
    #: its run dimension split in ``len(list)`` equal blocks, block ``i`` from ``list[i]``), or torch's own
    Streams = torch.Generator | Sequence[torch.Generator] | None


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


def run_generators(seed: int, runs: int, key: Callable[[int], int] | None = None) -> list[torch.Generator]:
    """One random stream per run: run ``r`` of a call with ``seed`` draws from ``seed + r``
    (``key(seed + r)`` when ``key`` maps a run's seed to a stream's, e.g. one stream per agent).

    Passed as the ``generator`` of :func:`draw`, :func:`bernoulli`, :func:`randint`, :func:`multinomial`
    and :func:`per_run`, run ``r``'s rows are drawn from its own stream only, so run ``r``'s result does not
    depend on how many runs share a batched call: it equals the single run (``runs = 1``) with seed
    ``seed + r``, the run a sweep's ``seed`` axis gives.
    """
    import torch

    k = key or (lambda s: s)
    return [torch.Generator(device="cpu").manual_seed(k(seed + r)) for r in range(runs)]


def _blocks(generator: Streams, n: int) -> list[tuple[Any, int, int]]:
    """``(generator, start, length)``: all ``n`` rows for one generator, or ``n`` split in equal blocks."""
    if generator is None or not isinstance(generator, (list, tuple)):
        return [(generator, 0, n)]
    k = len(generator)
    if k == 0 or n % k:
        raise ValueError(f"{n} rows cannot be split over {k} per-run generators")
    m = n // k
    return [(g, i * m, m) for i, g in enumerate(generator)]


def per_run(fn: Callable, x: torch.Tensor, generator: Streams, dim: int = 0) -> torch.Tensor:
    """``fn(x, generator)``; with one generator per run, ``fn`` on each run's block of ``x`` along ``dim``
    with that run's generator, concatenated (for samplers whose number of draws depends on the values,
    e.g. rejection sampling, so a run's stream never advances with another run's rejections)."""
    import torch

    parts = [fn(x.narrow(dim, a, m), g) for g, a, m in _blocks(generator, x.shape[dim])]
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim)


def draw(fn, shape, generator: Streams, *, dtype, device, dim: int = 0) -> torch.Tensor:
    """``fn(shape)`` (``torch.randn`` / ``torch.rand``) on ``device``, drawn on ``generator``'s device.

    The package's generators are CPU ``torch.Generator``s (one stream per seed/agent, reproducible across
    devices); a CPU generator cannot feed a CUDA sampler, so the draw is made where the generator lives and
    moved (a no-op when both agree, so CPU results are unchanged and CUDA runs use the same numbers).
    ``generator`` may be one generator per run (:func:`run_generators`): the runs' rows along ``dim``.
    """
    import torch

    shape = tuple(shape)
    parts = []
    for g, _, m in _blocks(generator, shape[dim]):
        gdev = device if g is None else g.device
        sub = (*shape[:dim], m, *shape[dim + 1 :])
        parts.append(fn(sub, generator=g, dtype=dtype, device=gdev).to(device))
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim)


def bernoulli(p: torch.Tensor, generator: Streams, dim: int = 0) -> torch.Tensor:
    """``torch.bernoulli(p)`` drawn on ``generator``'s device (see :func:`draw`), returned on ``p.device``;
    one generator per run draws the runs' rows of ``p`` along ``dim``."""
    import torch

    def one(q: torch.Tensor, g) -> torch.Tensor:
        if g is None or g.device == q.device:
            return torch.bernoulli(q, generator=g)
        return torch.bernoulli(q.to(g.device), generator=g).to(q.device)

    return per_run(one, p, generator, dim)


def randint(high: int, shape, generator: Streams, *, device=None) -> torch.Tensor:
    """``torch.randint(high, shape)`` on the CPU generator(s), moved to ``device``; one generator per run
    draws the runs' rows (leading dimension)."""
    import torch

    shape = tuple(shape)
    parts = [torch.randint(high, (m, *shape[1:]), generator=g) for g, _, m in _blocks(generator, shape[0])]
    out = parts[0] if len(parts) == 1 else torch.cat(parts)
    return out if device is None else out.to(device)


def multinomial(probs: torch.Tensor, num_samples: int, generator: Streams) -> torch.Tensor:
    """``torch.multinomial(probs [n, K], num_samples)``; one generator per run draws the runs' rows.

    Drawn where the generator lives (the package's CPU streams) and moved back to ``probs.device``, so a
    CUDA run samples the same indices as a CPU run (see :func:`draw`)."""
    import torch

    def one(q: torch.Tensor, g) -> torch.Tensor:
        if g is None or g.device == q.device:
            return torch.multinomial(q, num_samples, generator=g)
        return torch.multinomial(q.to(g.device), num_samples, generator=g).to(q.device)

    return per_run(one, probs, generator)

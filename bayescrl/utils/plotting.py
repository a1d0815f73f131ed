"""Matplotlib helpers shared by experiments (headless Agg backend)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np


def plt():
    """Import pyplot with the non-interactive backend."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as _plt

    return _plt


def plot_mean_sd(
    curves: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    path: str | Path,
    xlabel: str,
    ylabel: str,
    title: str = "",
    x: Sequence[float] | None = None,
    hline: float | None = None,
    hline_label: str = "limit",
) -> Path:
    """Plot ``{label: (mean, sd)}`` as lines with ±1 sd bands (the seed's figure style); save PNG."""
    p = plt()
    fig, ax = p.subplots(figsize=(6.4, 4.2))
    for label, (mean, sd) in curves.items():
        mean, sd = np.asarray(mean, float), np.asarray(sd, float)
        xs = np.arange(1, len(mean) + 1) if x is None else np.asarray(x)
        ax.plot(xs, mean, label=label)
        ax.fill_between(xs, mean - sd, mean + sd, alpha=0.2)
    if hline is not None:
        ax.axhline(hline, ls="--", color="k", lw=1, label=hline_label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    p.close(fig)
    return path

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
    x: Sequence[float] | Mapping[str, Sequence[float]] | None = None,
    hline: float | None = None,
    hline_label: str = "limit",
    logy: bool = False,
    refs: Mapping[str, float] | None = None,
    band_label: str = "±1 sd over seeds",
) -> Path:
    """Plot ``{label: (mean, sd)}`` as lines with shaded ±1 sd bands (the thesis' figure style); save PNG.

    ``logy`` draws the y axis on a log scale (bands and zeros clipped to the smallest positive value
    shown); ``refs`` (label -> y) adds dashed reference lines, e.g. an exact solution, in the colour of the
    curve with the same label prefix when there is one. ``band_label`` says what the bands are (legend).
    ``x`` is one x axis for all curves or a mapping label -> x (curves of different lengths).
    """
    p = plt()
    fig, ax = p.subplots(figsize=(6.4, 4.2))
    colours = {
        str(label): _band(ax, mean, sd, x.get(label) if isinstance(x, Mapping) else x, label, logy)
        for label, (mean, sd) in curves.items()
    }
    if curves:
        ax.fill_between([], [], [], color="0.5", alpha=0.2, label=band_label)  # legend entry for the bands
    if hline is not None:
        ax.axhline(hline, ls="--", color="k", lw=1, label=hline_label)
    for label, y in (refs or {}).items():
        colour = next((c for k, c in colours.items() if str(label).startswith(f"{k} ")), "k")
        ax.axhline(float(y), ls="--", lw=1.2, color=colour, label=label)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3, which="both" if logy else "major")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    p.close(fig)
    return path


def _band(
    ax, mean: Sequence[float], sd: Sequence[float], xl: Sequence[float] | None, label: str, logy: bool
) -> str:
    """Draw one curve (x = 1, 2, ... unless ``xl``) with its shaded mean ± sd band (on a log axis the band
    is clipped to the smallest positive value shown); returns the curve's colour."""
    mean, sd = np.asarray(mean, float), np.asarray(sd, float)
    xs = np.arange(1, len(mean) + 1) if xl is None else np.asarray(xl)
    (line,) = ax.plot(xs, mean, label=label)
    lo, hi = mean - sd, mean + sd
    if logy:
        pos = np.concatenate([mean[mean > 0], hi[hi > 0]])
        floor = pos.min() if pos.size else 1e-12
        lo = np.maximum(lo, floor)
    ax.fill_between(xs, lo, hi, alpha=0.2, color=line.get_color(), lw=0)
    return line.get_color()

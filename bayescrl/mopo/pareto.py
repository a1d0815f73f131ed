"""Pareto utilities shared by the synthetic and language-model experiments (maximisation convention).

``non_dominated`` filters a point set; ``hypervolume`` wraps :func:`moocore.hypervolume` (exact, O(n log n)
in 2-D/3-D) with an explicit reference point; ``mean_distance`` is the mean Euclidean distance of points to
a (densified) reference front.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _as_points(points) -> np.ndarray:
    pts = np.asarray(points, dtype=float)
    if pts.ndim == 1:
        pts = pts[None, :]
    if pts.ndim != 2:
        raise ValueError(f"points must be [n, d], got shape {pts.shape}")
    if not np.all(np.isfinite(pts)):
        raise ValueError("points contain NaN or inf")
    return pts


def non_dominated(points, maximise: bool = True) -> np.ndarray:
    """Boolean mask of the points not dominated by any other (duplicates are all kept)."""
    pts = _as_points(points)
    s = pts if maximise else -pts
    ge = (s[None, :, :] >= s[:, None, :]).all(-1)  # ge[i, j]: j weakly dominates i
    gt = (s[None, :, :] > s[:, None, :]).any(-1)
    dominated = (ge & gt).any(1)
    return ~dominated


def hypervolume(points, ref: Sequence[float], maximise: bool = True) -> float:
    """Hypervolume dominated by ``points`` and bounded by the reference point ``ref`` (moocore).

    Points that do not strictly dominate ``ref`` contribute nothing (they are dropped, never clipped).
    """
    import moocore

    pts = _as_points(points)
    r = np.asarray(ref, dtype=float)
    keep = (pts > r).all(1) if maximise else (pts < r).all(1)
    if not keep.any():
        return 0.0
    return float(moocore.hypervolume(pts[keep], ref=r, maximise=maximise))


def densify_front(front, n_between: int = 20) -> np.ndarray:
    """Linearly interpolate between consecutive points of a 2-D front sorted by the first objective.

    Mixtures of two policies achieve every point of the segment between their reward vectors, so the
    achievable front is piecewise linear between supported points.
    """
    f = _as_points(front)
    f = f[np.argsort(f[:, 0])]
    t = np.linspace(0.0, 1.0, n_between, endpoint=False)[:, None, None]
    seg = f[:-1][None] + t * (f[1:] - f[:-1])[None]
    return np.concatenate([seg.reshape(-1, f.shape[1]), f[-1:]], axis=0)


def mean_distance(points, front) -> float:
    """Mean over ``points`` of the Euclidean distance to the nearest point of ``front``."""
    pts, fr = _as_points(points), _as_points(front)
    d = np.sqrt(((pts[:, None, :] - fr[None, :, :]) ** 2).sum(-1)).min(1)
    return float(d.mean())


nondominated = non_dominated  # alias (moocore spells it ``is_nondominated``)

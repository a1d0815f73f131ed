"""Running observation statistics (parallel Welford / Chan et al. update)."""

from __future__ import annotations

import numpy as np
import torch


class RunningMeanStd:
    """Running mean and variance of observations, updated between iterations.

    Normalised observation: ``clip((x - mean) / sqrt(var + eps), -clip, clip)``; ``clip=None`` disables
    clipping. Evaluation and truncation bootstrapping reuse the same statistics (never updated there).
    """

    def __init__(self, shape: tuple[int, ...], clip: float | None = 10.0, eps: float = 1e-8):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = 0.0
        self.clip, self.eps = clip, eps

    def update(self, x: np.ndarray | torch.Tensor) -> None:
        if isinstance(x, torch.Tensor):  # a device batch: only the batch moments come to the host
            x = x.double().reshape(-1, *self.mean.shape)
            n = x.shape[0]
            if n == 0:
                return
            b_mean = x.mean(0).cpu().numpy()
            b_var = x.var(0, unbiased=False).cpu().numpy()
        else:
            x = np.asarray(x, np.float64).reshape(-1, *self.mean.shape)
            n = x.shape[0]
            if n == 0:
                return
            b_mean, b_var = x.mean(0), x.var(0)
        tot = self.count + n
        delta = b_mean - self.mean
        self.mean = self.mean + delta * n / tot
        self.var = (self.var * self.count + b_var * n + delta**2 * self.count * n / tot) / tot
        self.count = tot

    def normalize(self, x: np.ndarray) -> np.ndarray:
        if self.count == 0:
            out = np.asarray(x, np.float32)
        else:
            out = ((x - self.mean) / np.sqrt(self.var + self.eps)).astype(np.float32)
        if self.clip is not None:
            out = np.clip(out, -self.clip, self.clip)
        return out

    def state_dict(self) -> dict:
        return {"mean": self.mean.copy(), "var": self.var.copy(), "count": self.count}

    def load_state_dict(self, d: dict) -> None:
        self.mean, self.var, self.count = np.asarray(d["mean"]), np.asarray(d["var"]), float(d["count"])

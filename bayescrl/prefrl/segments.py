"""Trajectory segments σ = (s_1, a_1, …, s_L, a_L) cut from rollouts, and a ring buffer of recent ones.

A segment's embedding is the additive trajectory embedding of chapter `PSPL`,
Φ(σ) = Σ_t φ(s_t, a_t), so a linear reward r_θ(s, a) = ⟨θ, φ(s, a)⟩ gives the segment return ⟨θ, Φ(σ)⟩
(Eq. `pref_logistic_trajectories` with x = Φ(σ)). Besides Φ the buffer keeps what the simulated raters and
the reports need (per-step true rewards and features, true costs) and what a human rater needs to see
(raw observations and actions); the learner itself only ever reads Φ.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Segments:
    """A batch of K segments of length L (numpy arrays on the host)."""

    ids: np.ndarray  # (K,) int64, unique over a run
    phi: np.ndarray  # (K, d) Φ(σ) = Σ_t φ(s_t, a_t)
    perceived: np.ndarray  # (K, R) each simulated rater's perceived return R̃_i(σ)
    rewards: np.ndarray  # (K, L) true env rewards (simulated raters and reports only)
    costs: np.ndarray  # (K, m) true summed costs
    obs: np.ndarray  # (K, L, D) raw encoded observations
    actions: np.ndarray  # (K, L, *action_shape)
    iteration: np.ndarray  # (K,) training iteration that produced the segment
    phi_steps: np.ndarray  # (K, L, d) float32 per-step φ when kept (non-linear rewards), else (K, 0, d)

    @property
    def true_return(self) -> np.ndarray:
        return self.rewards.sum(1)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def take(self, idx) -> Segments:
        idx = np.asarray(idx, dtype=np.int64)
        return Segments(**{k: getattr(self, k)[idx] for k in self.__dataclass_fields__})


def cut_segments(
    phi_steps: torch.Tensor | np.ndarray,
    rewards: np.ndarray,
    costs: np.ndarray,
    ended: np.ndarray,
    obs: np.ndarray,
    actions: np.ndarray,
    length: int,
    first_id: int,
    iteration: int,
    perceive=None,
    keep_steps: bool = False,
) -> Segments:
    """Cut the rollout's time axis into non-overlapping windows of ``length`` steps per env.

    Inputs are time-major ``(T, n, ...)``. A window is kept when no episode ends inside it (an end on its
    last step is allowed), so every segment lies within one episode. ``perceive(phi_steps (K, L, d),
    rewards (K, L)) -> (K, R)`` gives the simulated raters' perceived returns (the per-step features are not
    kept unless ``keep_steps``, which a non-linear reward model needs). Vectorised: no loop over steps.
    """
    phi = phi_steps.detach().cpu().numpy() if isinstance(phi_steps, torch.Tensor) else np.asarray(phi_steps)
    T, n = ended.shape
    L = int(length)
    k = T // L
    if k == 0:
        R = 0 if perceive is None else perceive(np.zeros((0, 1, phi.shape[-1])), np.zeros((0, 1))).shape[1]
        return _empty(phi.shape[-1], R, costs.shape[-1], obs.shape[2:], actions.shape[2:], actions.dtype)

    def windows(a: np.ndarray) -> np.ndarray:  # (T, n, ...) -> (k*n, L, ...), segment-major
        w = a[: k * L].reshape(k, L, n, *a.shape[2:])
        return np.moveaxis(w, 2, 1).reshape(k * n, L, *a.shape[2:])

    keep = ~windows(ended)[:, :-1].any(1)
    ids = first_id + np.arange(int(keep.sum()), dtype=np.int64)
    phi_steps = windows(phi)[keep].astype(np.float64)
    rew = windows(rewards)[keep].astype(np.float64)
    perceived = np.zeros((len(ids), 0)) if perceive is None else perceive(phi_steps, rew)
    return Segments(
        ids=ids,
        phi=phi_steps.sum(1),
        perceived=perceived,
        rewards=rew,
        costs=windows(costs)[keep].sum(1).astype(np.float64),
        obs=windows(obs)[keep].astype(np.float32),
        actions=windows(actions)[keep],
        iteration=np.full(ids.shape[0], iteration, dtype=np.int64),
        phi_steps=phi_steps.astype(np.float32)
        if keep_steps
        else np.zeros((len(ids), 0, phi.shape[-1]), "f4"),
    )


def _empty(d: int, R: int, m: int, obs_shape, act_shape, act_dtype) -> Segments:
    return Segments(
        ids=np.zeros(0, np.int64),
        phi=np.zeros((0, d)),
        perceived=np.zeros((0, R)),
        rewards=np.zeros((0, 1)),
        costs=np.zeros((0, m)),
        obs=np.zeros((0, 1, *obs_shape), np.float32),
        actions=np.zeros((0, 1, *act_shape), dtype=act_dtype),
        iteration=np.zeros(0, np.int64),
        phi_steps=np.zeros((0, 0, d), np.float32),
    )


class SegmentBuffer:
    """The ``capacity`` most recent segments (a ring buffer; the oldest are dropped first)."""

    def __init__(self, capacity: int):
        self.capacity = int(capacity)
        self.data: Segments | None = None
        self.next_id = 0

    def __len__(self) -> int:
        return 0 if self.data is None else len(self.data)

    def add(self, segs: Segments) -> None:
        if len(segs) == 0:
            return
        self.next_id = int(segs.ids[-1]) + 1
        if self.data is None:
            merged = segs
        else:
            merged = Segments(
                **{
                    k: np.concatenate([getattr(self.data, k), getattr(segs, k)])
                    for k in Segments.__dataclass_fields__
                }
            )
        if len(merged) > self.capacity:
            merged = merged.take(np.arange(len(merged) - self.capacity, len(merged)))
        self.data = merged

    def by_id(self, ids) -> Segments:
        """The segments with these ids (KeyError naming the first id no longer in the buffer)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        have = self.data.ids if self.data is not None else np.zeros(0, np.int64)
        pos = np.searchsorted(have, ids)
        pos = np.clip(pos, 0, max(len(have) - 1, 0))
        bad = (len(have) == 0) | (have[pos] != ids) if len(have) else np.ones(ids.shape, bool)
        if np.any(bad):
            raise KeyError(int(ids[np.argmax(bad)]))
        return self.data.take(pos)

    def state_dict(self) -> dict:
        d = None if self.data is None else {k: getattr(self.data, k) for k in Segments.__dataclass_fields__}
        return {"capacity": self.capacity, "next_id": self.next_id, "data": d}

    def load_state_dict(self, st: dict) -> None:
        self.capacity, self.next_id = int(st["capacity"]), int(st["next_id"])
        self.data = (
            None if st["data"] is None else Segments(**{k: np.asarray(v) for k, v in st["data"].items()})
        )

"""Data container of the standard model: linear reward, several raters, Bradley–Terry preferences.

The standard model of the warmPref-PS and PSPL chapters (Eq. `rater_preference_dist`,
Eq. `pref_logistic_trajectories`, Eq. `informed_prior`):

* θ ~ N(μ0, Σ0) in R^d;
* rater i has deliberateness β_i >= 0 and knowledgeability λ_i > 0, and a belief ϑ_i ~ N(θ, I/λ_i²);
* a comparison of items x0, x1 by rater i gives Y ~ Bernoulli(σ(β_i⟨x1 − x0, ϑ_i⟩)), Y = 0 meaning x0
  is preferred (the thesis' convention: P(Y = 0) = σ(β⟨x0 − x1, ϑ⟩));
* an online numeric reward is R ~ N(⟨x, θ⟩, σ²).

:class:`BTLinearProblem` stores the data as torch tensors, optionally with a leading batch dimension B
so that many independent problems (seeds, agents) with different data are solved together; ragged data
is padded and masked. Capacity can be pre-allocated so that appending an observation is O(d).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import torch

from bayescrl.utils.checks import check_device
from bayescrl.utils.errors import DataError

_FLOAT = torch.float64


@dataclass
class BTLinearProblem:
    """Data of the standard model, with an optional leading batch dimension ``B``.

    Shapes (``(B,)`` present iff :attr:`batched`): ``mu0 [d]``, ``cov0 [d,d]``, ``beta [R]`` (or
    ``[B,R]``), ``lam [R]`` (or ``[B,R]``), ``noise_sd`` (float), ``x0, x1 [(B,)N,d]``, ``y [(B,)N]``
    (0 = x0 preferred), ``rater [(B,)N]`` (long), ``pref_online [(B,)N]`` (bool), ``pref_mask [(B,)N]``
    (bool), ``x [(B,)T,d]``, ``r [(B,)T]``, ``reward_mask [(B,)T]`` (bool). Masked-out rows are padding
    and never enter any likelihood. ``n_pref`` / ``n_reward`` count the used rows (for appending).
    """

    mu0: torch.Tensor
    cov0: torch.Tensor
    beta: torch.Tensor
    lam: torch.Tensor
    noise_sd: float
    x0: torch.Tensor
    x1: torch.Tensor
    y: torch.Tensor
    rater: torch.Tensor
    pref_online: torch.Tensor
    pref_mask: torch.Tensor
    x: torch.Tensor
    r: torch.Tensor
    reward_mask: torch.Tensor
    rater_ids: tuple[str, ...] | None = None

    # ------------------------------------------------------------------ properties
    @property
    def dim(self) -> int:
        return int(self.mu0.shape[-1])

    @property
    def num_raters(self) -> int:
        return int(self.beta.shape[-1])

    @property
    def batched(self) -> bool:
        return self.y.dim() == 2

    @property
    def batch_size(self) -> int | None:
        return int(self.y.shape[0]) if self.batched else None

    @property
    def device(self) -> torch.device:
        return self.mu0.device

    @property
    def n_pref(self) -> torch.Tensor:
        """Number of used preference rows (per batch element if batched)."""
        return self.pref_mask.sum(-1)

    @property
    def n_reward(self) -> torch.Tensor:
        return self.reward_mask.sum(-1)

    # ------------------------------------------------------------------ construction
    @classmethod
    def empty(
        cls,
        mu0,
        cov0,
        beta: float | Sequence[float] = 1.0,
        lam: float | Sequence[float] = 1.0,
        noise_sd: float = 1.0,
        *,
        batch_size: int | None = None,
        pref_capacity: int = 0,
        reward_capacity: int = 0,
        rater_ids: Sequence[str] | None = None,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = _FLOAT,
    ) -> BTLinearProblem:
        """A problem with no data and pre-allocated (masked-out) capacity for later :meth:`append_*`."""
        device = check_device(device)
        mu0 = torch.as_tensor(mu0, dtype=dtype, device=device)
        cov0 = torch.as_tensor(cov0, dtype=dtype, device=device)
        d = int(mu0.shape[-1])
        beta_t = torch.as_tensor(beta, dtype=dtype, device=device).reshape(-1)
        lam_t = torch.as_tensor(lam, dtype=dtype, device=device).reshape(-1)
        if beta_t.numel() != lam_t.numel():
            raise DataError(
                "raters", (beta_t.tolist(), lam_t.tolist()), "beta and lam need one value per rater"
            )
        lead = () if batch_size is None else (batch_size,)
        kw = {"device": device}
        prob = cls(
            mu0=mu0,
            cov0=cov0,
            beta=beta_t,
            lam=lam_t,
            noise_sd=float(noise_sd),
            x0=torch.zeros(*lead, pref_capacity, d, dtype=dtype, **kw),
            x1=torch.zeros(*lead, pref_capacity, d, dtype=dtype, **kw),
            y=torch.zeros(*lead, pref_capacity, dtype=dtype, **kw),
            rater=torch.zeros(*lead, pref_capacity, dtype=torch.long, **kw),
            pref_online=torch.zeros(*lead, pref_capacity, dtype=torch.bool, **kw),
            pref_mask=torch.zeros(*lead, pref_capacity, dtype=torch.bool, **kw),
            x=torch.zeros(*lead, reward_capacity, d, dtype=dtype, **kw),
            r=torch.zeros(*lead, reward_capacity, dtype=dtype, **kw),
            reward_mask=torch.zeros(*lead, reward_capacity, dtype=torch.bool, **kw),
            rater_ids=tuple(rater_ids) if rater_ids is not None else None,
        )
        prob.validate()
        return prob

    @classmethod
    def from_data(
        cls,
        mu0,
        cov0,
        beta: float | Sequence[float],
        lam: float | Sequence[float],
        noise_sd: float = 1.0,
        *,
        x0=None,
        x1=None,
        y=None,
        rater=None,
        pref_online=None,
        x=None,
        r=None,
        pref_capacity: int | None = None,
        reward_capacity: int | None = None,
        rater_ids: Sequence[str] | None = None,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = _FLOAT,
    ) -> BTLinearProblem:
        """Build an unbatched problem from lists/arrays (any of the data may be ``None``/empty)."""
        device = check_device(device)
        d = int(torch.as_tensor(mu0, dtype=dtype, device=device).shape[-1])
        x0_t, x1_t, x_t = (
            _rows(v, name, d, dtype, device)
            for v, name in ((x0, "preferences.x0"), (x1, "preferences.x1"), (x, "rewards.x"))
        )
        n, t_len = x0_t.shape[0], x_t.shape[0]
        y_t, rat, onl = _pref_columns(y, rater, pref_online, n, dtype, device)
        r_t = torch.as_tensor([] if r is None else r, dtype=dtype, device=device).reshape(-1)
        _check_lengths(n, t_len, x1_t, y_t, rat, onl, r_t)
        prob = cls.empty(
            mu0,
            cov0,
            beta,
            lam,
            noise_sd,
            pref_capacity=max(n, pref_capacity or 0),
            reward_capacity=max(t_len, reward_capacity or 0),
            rater_ids=rater_ids,
            device=device,
            dtype=dtype,
        )
        if n:
            prob.append_preferences(x0_t, x1_t, y_t, rat.reshape(-1), onl.reshape(-1).bool())
        if t_len:
            prob.append_rewards(x_t, r_t)
        return prob

    @classmethod
    def stack(cls, problems: Sequence[BTLinearProblem]) -> BTLinearProblem:
        """Stack unbatched problems (same prior, raters and noise) into one batched problem (padding)."""
        if not problems:
            raise DataError("problems", 0, "need at least one problem to stack")
        p0 = problems[0]
        if any(p.batched for p in problems):
            raise DataError("problems", "batched", "stack expects unbatched problems")
        for i, p in enumerate(problems[1:], start=1):
            same = p.noise_sd == p0.noise_sd and all(
                getattr(p, k).shape == getattr(p0, k).shape and torch.equal(getattr(p, k), getattr(p0, k))
                for k in ("mu0", "cov0", "beta", "lam")
            )
            if not same:
                raise DataError("problems", i, "stacked problems must share prior, raters and noise_sd")
        n_max = max(p.y.shape[0] for p in problems)
        t_max = max(p.r.shape[0] for p in problems)

        def pad(t: torch.Tensor, length: int) -> torch.Tensor:
            extra = length - t.shape[0]
            if extra == 0:
                return t
            return torch.cat([t, torch.zeros(extra, *t.shape[1:], dtype=t.dtype, device=t.device)])

        names = ["x0", "x1", "y", "rater", "pref_online", "pref_mask"]
        kw = {k: torch.stack([pad(getattr(p, k), n_max) for p in problems]) for k in names}
        for k in ["x", "r", "reward_mask"]:
            kw[k] = torch.stack([pad(getattr(p, k), t_max) for p in problems])
        return replace(p0, **kw)

    # ------------------------------------------------------------------ appending
    def _grow(self, kind: str, needed: int) -> None:
        names = (
            ["x0", "x1", "y", "rater", "pref_online", "pref_mask"]
            if kind == "pref"
            else ["x", "r", "reward_mask"]
        )
        axis = 1 if self.batched else 0
        cap = getattr(self, names[0]).shape[axis]
        if needed <= cap:
            return
        new_cap = max(needed, 2 * cap, 16)
        for k in names:
            t = getattr(self, k)
            shape = list(t.shape)
            shape[axis] = new_cap - cap
            setattr(self, k, torch.cat([t, torch.zeros(shape, dtype=t.dtype, device=t.device)], dim=axis))

    def append_preferences(self, x0, x1, y, rater=None, online=None, *, batch_index=None) -> None:
        """Append comparisons (in place, amortised O(d) per row).

        Unbatched: ``x0, x1 [n,d]`` (or ``[d]``), ``y [n]``. Batched: one row per batch element,
        ``x0, x1 [B,d]``, ``y [B]`` (or a subset ``batch_index`` of elements).
        """
        dev, dt = self.device, self.mu0.dtype
        x0 = torch.as_tensor(x0, dtype=dt, device=dev)
        x1 = torch.as_tensor(x1, dtype=dt, device=dev)
        y = torch.as_tensor(y, dtype=dt, device=dev).reshape(-1)
        bad = ~((y == 0) | (y == 1))
        if bad.any():
            i = int(bad.nonzero()[0])
            raise DataError("preferences.y", float(y[i]), "must be 0 or 1", index=i)
        n = y.shape[0]
        rater = (
            torch.zeros(n, dtype=torch.long, device=dev)
            if rater is None
            else torch.as_tensor(rater, device=dev)
        )
        rater = rater.reshape(-1).long().expand(n)
        if ((rater < 0) | (rater >= self.num_raters)).any():
            i = int(((rater < 0) | (rater >= self.num_raters)).nonzero()[0])
            raise DataError(
                "preferences.rater", int(rater[i]), f"unknown rater index (R = {self.num_raters})", i
            )
        online = (
            torch.zeros(n, dtype=torch.bool, device=dev)
            if online is None
            else torch.as_tensor(online, device=dev)
        )
        online = online.reshape(-1).bool().expand(n)
        if not self.batched:
            x0, x1 = x0.reshape(-1, self.dim), x1.reshape(-1, self.dim)
            _check_finite({"preferences.x0": x0, "preferences.x1": x1})
            start = int(self.pref_mask.sum())
            self._grow("pref", start + n)
            sl = slice(start, start + n)
            self.x0[sl], self.x1[sl], self.y[sl] = x0, x1, y
            self.rater[sl], self.pref_online[sl], self.pref_mask[sl] = rater, online, True
            return
        idx = self._batch_index(batch_index)
        if x0.shape != (idx.shape[0], self.dim):
            raise DataError(
                "preferences.x0", tuple(x0.shape), f"batched append expects [{idx.shape[0]}, {self.dim}]"
            )
        _check_finite({"preferences.x0": x0, "preferences.x1": x1})
        pos = self.pref_mask[idx].sum(-1)
        self._grow("pref", int(pos.max()) + 1 if pos.numel() else 0)
        self.x0[idx, pos], self.x1[idx, pos], self.y[idx, pos] = x0, x1, y
        self.rater[idx, pos], self.pref_online[idx, pos], self.pref_mask[idx, pos] = rater, online, True

    def append_rewards(self, x, r, *, batch_index=None) -> None:
        """Append online rewards (in place). Unbatched ``x [n,d], r [n]``; batched ``x [B,d], r [B]``."""
        dev, dt = self.device, self.mu0.dtype
        x = torch.as_tensor(x, dtype=dt, device=dev)
        r = torch.as_tensor(r, dtype=dt, device=dev).reshape(-1)
        if not self.batched:
            x = x.reshape(-1, self.dim)
        _check_finite({"rewards.r": r, "rewards.x": x})
        if not self.batched:
            start = int(self.reward_mask.sum())
            self._grow("reward", start + x.shape[0])
            sl = slice(start, start + x.shape[0])
            self.x[sl], self.r[sl], self.reward_mask[sl] = x, r, True
            return
        idx = self._batch_index(batch_index)
        pos = self.reward_mask[idx].sum(-1)
        self._grow("reward", int(pos.max()) + 1 if pos.numel() else 0)
        self.x[idx, pos], self.r[idx, pos], self.reward_mask[idx, pos] = x, r, True

    def _batch_index(self, batch_index) -> torch.Tensor:
        if batch_index is None:
            return torch.arange(self.batch_size, device=self.device)
        return torch.as_tensor(batch_index, device=self.device).long().reshape(-1)

    # ------------------------------------------------------------------ misc
    def to(self, device: str | torch.device) -> BTLinearProblem:
        kw = {f.name: getattr(self, f.name) for f in fields(self)}
        kw = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
        return BTLinearProblem(**kw)

    def clone(self) -> BTLinearProblem:
        kw = {f.name: getattr(self, f.name) for f in fields(self)}
        return BTLinearProblem(
            **{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
        )

    def batch_view(self) -> BTLinearProblem:
        """The problem with a batch dimension (B = 1 added if unbatched; tensors are views)."""
        if self.batched:
            return self
        names = ["x0", "x1", "y", "rater", "pref_online", "pref_mask", "x", "r", "reward_mask"]
        return replace(self, **{k: getattr(self, k).unsqueeze(0) for k in names})

    def validate(self) -> None:
        """Check prior, competences and noise (data rows are checked when appended)."""
        d = self.dim
        if self.cov0.shape != (d, d):
            raise DataError("prior.cov", tuple(self.cov0.shape), f"expected shape [{d}, {d}]")
        if not torch.isfinite(self.mu0).all():
            raise DataError("prior.mean", self.mu0.tolist(), "must be finite")
        if not torch.isfinite(self.cov0).all() or not torch.allclose(self.cov0, self.cov0.mT, atol=1e-10):
            raise DataError("prior.cov", self.cov0.tolist(), "must be finite and symmetric")
        if torch.linalg.cholesky_ex(self.cov0)[1] != 0:
            raise DataError("prior.cov", self.cov0.tolist(), "must be positive definite")
        for i, b in enumerate(self.beta.reshape(-1).tolist()):
            if not (math.isfinite(b) and b >= 0):
                raise DataError("raters.beta", b, "deliberateness must be finite and >= 0", index=i)
        for i, v in enumerate(self.lam.reshape(-1).tolist()):
            if not (math.isfinite(v) and v > 0):
                raise DataError("raters.lam", v, "knowledgeability must be finite and > 0", index=i)
        if not (math.isfinite(self.noise_sd) and self.noise_sd > 0):
            raise DataError("noise_sd", self.noise_sd, "must be finite and > 0")


def _check_finite(rows: dict[str, torch.Tensor]) -> None:
    """Refuse a NaN or infinity in any of ``rows`` (``{field: [n] or [n, d]}``), naming the field and the
    first bad row; one host sync when everything is finite (appends run once per step)."""
    ok = {
        k: torch.isfinite(t).flatten(1).all(-1) if t.dim() > 1 else torch.isfinite(t) for k, t in rows.items()
    }
    if bool(torch.stack([v.all() for v in ok.values()]).all()):
        return
    name = next(k for k, v in ok.items() if not bool(v.all()))
    i = int((~ok[name]).nonzero()[0])
    raise DataError(name, rows[name][i].tolist(), "must be finite", index=i)


def _rows(v: object, name: str, d: int, dtype: torch.dtype, device: str | torch.device) -> torch.Tensor:
    """The records ``v`` as an ``[n, d]`` tensor (``None`` or empty: ``[0, d]``); refuses another shape."""
    if v is None:
        return torch.zeros(0, d, dtype=dtype, device=device)
    t = torch.as_tensor(v, dtype=dtype, device=device)
    if t.numel() == 0:
        return torch.zeros(0, d, dtype=dtype, device=device)
    if t.dim() != 2 or t.shape[1] != d:
        raise DataError(name, tuple(t.shape), f"expected shape [n, {d}] (dim = {d})")
    return t


def _pref_columns(
    y: object, rater: object, pref_online: object, n: int, dtype: torch.dtype, device: str | torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Labels ``y`` (``dtype``), rater indices (default 0) and online flags (default False) as tensors."""
    y_t = torch.as_tensor([] if y is None else y, dtype=dtype, device=device).reshape(-1)
    rat = (
        torch.zeros(n, dtype=torch.long, device=device)
        if rater is None
        else torch.as_tensor(rater, device=device)
    )
    onl = (
        torch.zeros(n, dtype=torch.bool, device=device)
        if pref_online is None
        else torch.as_tensor(pref_online, device=device)
    )
    return y_t, rat, onl


def _check_lengths(
    n: int,
    t_len: int,
    x1: torch.Tensor,
    y: torch.Tensor,
    rater: torch.Tensor,
    online: torch.Tensor,
    r: torch.Tensor,
) -> None:
    """Refuse preference fields whose length is not ``n`` (the number of ``x0``) and rewards ``r`` whose
    length is not ``t_len`` (the number of ``x``), naming the first such field."""
    for name, v, want in (
        ("preferences.x1", x1.shape[0], n),
        ("preferences.y", y.shape[0], n),
        ("preferences.rater", rater.reshape(-1).shape[0], n),
        ("preferences.online", online.reshape(-1).shape[0], n),
        ("rewards.r", r.shape[0], t_len),
    ):
        if v != want:
            raise DataError(name, v, f"length must match the number of records ({want})")

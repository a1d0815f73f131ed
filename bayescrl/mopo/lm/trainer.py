"""MOPO training loop for causal language models (Algorithm `mopo` with LoRA policies).

One step on a mini-batch of ``M`` records (``2M`` sequences after the symmetric augmentation):

1. ``log pi_ref`` (adapters disabled, cached per record) and ``log pi_lag`` (snapshot swapped in, or merged
   into a copy of the adapted weights once per lag, ``merge_lagged_mb``; cached until the next lag update)
   of every response, without gradients;
2. ``chi`` step on the lower bound (Eq. `chi_update`) at ``rho_lam^(t-1)``;
3. ``lambda`` step on the dual (Eq. `lambda_policy_update`);
4. ``rho_lam^(t)`` in closed form (Eq. `empirical-dual`) and one Adam step on the importance-weighted
   behaviour cloning loss ``-mean_j u_j log pi_psi(y_j | x_j)`` (Eq. `policy-extraction`), or with
   ``extraction="pairwise"`` on the pairwise cross-entropy of
   :func:`bayescrl.mopo.objective.pairwise_extraction_loss` (a documented departure);
   ``mopo-lb`` replaces 2-4 by one Adam ascent step on the relaxed log-barrier Lagrangian ``L_LB(rho_psi,
   sigma^(t))`` (Eq. `logbarrier`; appendix `logbarrier`: "at each iteration, one can take a single
   optimization step") with ``rho_psi = pi_psi / pi_lag`` on the batch (:func:`dual.barrier_lagrangian`);
   the logged ``lambda`` are the implied multipliers ``sigma / max(G - b, sigma^2)``;
5. every ``t0`` steps: ``pi_lag <- pi_psi^(t - t0)`` and ``b <- beta * G(rho^(t - t0))``. ``G`` is estimated
   on the next ``threshold_batches`` training mini-batches, drawn ahead; their ``log pi_ref`` and
   ``log pi_lag`` are kept and those batches are trained on next, so the estimate costs no extra pass (the
   values are the ones the steps would compute: ``pi_ref`` and ``pi_lag`` do not change in between).

``lambda``, ``chi``, ``b``, ``G`` and the lower bounds are logged at every step; a non-finite loss or
multiplier stops training with a :class:`bayescrl.utils.DataError` naming the step.

Several processes (``accelerate launch``, DDP): every process draws the same global batch of
``P * batch_size`` records (one seeded generator) and trains on its slice; the per-atom quantities the dual
needs (record indices, lagged log-ratios, log-ratios of ``mopo-lb``) are all-gathered, so every process
computes the same ``chi``, ``lambda``, ``b`` and importance weights as one process on the global batch would,
and the policy loss is each process's share of the global one (DDP averages the gradients).

The same loop trains the DPO baselines (``method="dpo"``) so that they share data, tokenisation, LoRA and
precision with MOPO.
See :mod:`bayescrl.mopo.lm.dual` for where the batched formulas depart from the text.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from bayescrl.mopo import objective as obj
from bayescrl.mopo.lm import dual
from bayescrl.mopo.lm.config import MOPOLMConfig
from bayescrl.mopo.lm.data import PreferenceData, TokenizedPairs, collate, tokenize
from bayescrl.mopo.lm.model import Policy
from bayescrl.utils import ConfigError, DataError
from bayescrl.utils.io import load_json
from bayescrl.utils.optim import make_adam
from bayescrl.utils.safe_state import load_state, save_state


@dataclass
class _Batch:
    """A drawn mini-batch: record indices, collated ``[a ; b]`` rows, and (once computed) ``log pi_ref``
    ``(2M,)`` and ``ell = log pi_lag - log pi_ref`` ``(H, 2M)`` under the current lag."""

    idx: list[int]
    batch: dict[str, torch.Tensor]
    ref: torch.Tensor | None = None
    ell: torch.Tensor | None = None


def sigma_at(c: MOPOLMConfig, t: int) -> torch.Tensor:
    """``sigma^(t) = max(sigma_0 gamma^t, sigma_min)`` (appendix `logbarrier`; floor: see the config)."""
    return obj.sigma_schedule(c.sigma_init, c.sigma_decay, t).float().clamp_min(c.sigma_min)


def _check_finite(rec: dict[str, Any], step: int) -> None:
    """Stop at the first non-finite loss or multiplier (a run never goes on, or ends, with NaN)."""
    for key in ("loss", "lambda", "chi", "b", "G"):
        if (
            key in rec
            and not torch.isfinite(torch.as_tensor(rec[key], dtype=torch.float64, device="cpu")).all()
        ):
            raise DataError(
                f"train.{key}",
                rec[key],
                f"not finite at step {step}: training diverged (lower train.lr or train.lr_lambda, raise "
                "train.tau, or use dtype float32)",
            )


class MOPOLMTrainer:
    """Train a :class:`Policy` with MOPO (or DPO) on a :class:`PreferenceData` set.

    Args:
        policy: LoRA policy (:func:`bayescrl.mopo.lm.model.lora_policy`); ``multi_head`` needs
            ``policy.num_heads == K``.
        tokenizer: a HF tokenizer with ``eos_token_id`` and ``pad_token_id``.
        data: validated preference data (K objectives).
        config: :class:`MOPOLMConfig`.
        accelerator: optional ``accelerate.Accelerator`` (device placement, mixed precision, several
            processes: the dual is computed on the all-gathered global batch, see the module docstring).
        log_path: optional JSONL file receiving one line per step.
        atom_scores: optional ``(mean, constraint)``, each ``(2N, K)`` in ``[0, 1]``: preference
            probabilities of the augmented atoms ``[a ; b]`` used instead of the labels ``[I ; 1 - I]``
            (``mean`` for the primary objective, ``constraint`` for the constrained ones; a Bayesian
            estimate, :mod:`bayescrl.mopo.lm.reward_head`).
    """

    def __init__(
        self,
        policy: Policy,
        tokenizer: Any,
        data: PreferenceData,
        config: MOPOLMConfig,
        accelerator: Any = None,
        log_path: str | Path | None = None,
        atom_scores: tuple[torch.Tensor, torch.Tensor] | None = None,
    ):
        self.config = c = config.check()  # its fields may have been set since it was built
        self.tokenizer = tokenizer
        self.data = data
        self.accelerator = accelerator
        self.k = data.num_objectives
        self._init_heads(c, policy)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.tok: TokenizedPairs = tokenize(data, tokenizer, c.max_length)
        self._init_dual(c, data, atom_scores)
        self.step_count = 0
        self.lag_snapshot: dict[str, torch.Tensor] | None = None  # None = pi_ref itself
        self.pending_snapshot: dict[str, torch.Tensor] | None = None
        self.world = accelerator.num_processes if accelerator is not None else 1
        self.rank = accelerator.process_index if accelerator is not None else 0
        self.gen = torch.Generator().manual_seed(c.seed)  # same on every process: one global batch order
        self._order: list[int] = []
        self._ahead: list[_Batch] = []  # drawn for a threshold estimate, trained on next
        n, h = len(data), len(self.head_primary)
        self._ref_cache = torch.full((2, n), float("nan"), device="cpu")
        self._lag_cache = torch.full((h, 2, n), float("nan"), device="cpu")
        self._lag_merged: list | None = None  # merged lagged weights (Policy.merge_snapshot), per lag
        self._lag_merged_for: object = None  # the snapshot they were merged from
        self._init_optimizer(c, policy, accelerator)
        self.log: list[dict[str, Any]] = []
        self.log_path = Path(log_path) if log_path else None
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self.log_path.write_text("")

    def _init_heads(self, c: MOPOLMConfig, policy: Policy) -> None:
        """The primary objective and, per policy head, its primary (one head, or one per objective with
        ``multi_head``); refuses a method, primary or head count the data's ``K`` does not allow."""
        if c.method == "dpo" and self.k != 1:
            raise ConfigError("method", "dpo", f"DPO needs K = 1 chosen/rejected data, got K = {self.k}")
        if not -self.k <= c.primary < self.k:
            raise ConfigError("primary", c.primary, f"must index one of K = {self.k} objectives")
        self.primary = c.primary % self.k
        if c.multi_head:
            if policy.num_heads != self.k:
                raise ConfigError("multi_head", policy.num_heads, f"policy needs K = {self.k} heads")
            self.head_primary = torch.arange(self.k, device="cpu")
        else:
            if policy.num_heads != 1:
                raise ConfigError("multi_head", False, "a single-objective run needs a 1-head policy")
            self.head_primary = torch.tensor([self.primary], device="cpu")

    def _init_dual(
        self, c: MOPOLMConfig, data: PreferenceData, atom_scores: tuple[torch.Tensor, torch.Tensor] | None
    ) -> None:
        """The dual state, one row per head: ``beta``, ``lam``, ``chi``, ``sigma``, the thresholds ``b``
        (fixed, or ``beta G(rho^(0))``), and the atoms' indicators (or ``atom_scores``) split per head."""
        h, m = len(self.head_primary), self.k - 1
        if c.thresholds is not None and len(c.thresholds) != m:
            raise ConfigError("thresholds", c.thresholds, f"need K - 1 = {m} values")
        beta = c.beta if isinstance(c.beta, list) else [c.beta] * m
        if len(beta) != m:
            raise ConfigError("beta", c.beta, f"need K - 1 = {m} values")
        self.beta = torch.tensor(beta, dtype=torch.float32, device="cpu").expand(h, m).clone()
        # dual state, one row per head
        self.lam = torch.full((h, m), float(c.lambda_init), device="cpu")
        self.chi = torch.full((h, m), float(c.chi_init), device="cpu")
        self.sigma = torch.full((h, m), float(c.sigma_init), device="cpu")
        if c.thresholds is not None:
            self.b = torch.tensor(c.thresholds, dtype=torch.float32, device="cpu").expand(h, m).clone()
        # indicators of every augmented atom, split per head once: rows [a_0..a_{N-1} ; b_0..b_{N-1}]
        self._p_all, self._q_all = dual.split_heads(dual.augment(data.prefs), self.head_primary)
        if atom_scores is not None:  # posterior preference probabilities instead of the 0/1 labels
            mean, con = (x.to(self._p_all.dtype) for x in atom_scores)
            if mean.shape != (2 * len(data), self.k) or con.shape != mean.shape:
                raise DataError("atom_scores", tuple(mean.shape), f"expected ({2 * len(data)}, {self.k})")
            self._p_all = dual.split_heads(mean, self.head_primary)[0]
            self._q_all = dual.split_heads(con, self.head_primary)[1]
        if c.thresholds is None:  # b = beta * G(rho^(0)), rho^(0) = 1: the data win-rate (1/2 here)
            q = self._q_all
            self.b = dual.threshold(self.beta, torch.zeros(q.shape[:2], device="cpu"), q)

    def _init_optimizer(self, c: MOPOLMConfig, policy: Policy, accelerator: Any) -> None:
        """Adam on the policy's trainable parameters (``accelerate``-prepared when given); training mode."""
        params = [p for p in policy.parameters() if p.requires_grad]
        if not params:
            raise ConfigError("peft", c.peft, "the policy has no trainable parameters")
        self._params = params
        self.optimizer = make_adam(params, c.lr)
        self.policy = policy
        self._has_dropout = any(isinstance(mod, torch.nn.Dropout) and mod.p > 0 for mod in policy.modules())
        policy.train()
        if accelerator is not None:
            self.policy, self.optimizer = accelerator.prepare(policy, self.optimizer)

    # ------------------------------------------------------------------------------------- helpers
    @property
    def model(self) -> Policy:
        """The unwrapped policy (``accelerate`` may wrap it in DDP)."""
        return self.accelerator.unwrap_model(self.policy) if self.accelerator else self.policy

    @property
    def device(self) -> torch.device:
        return self.accelerator.device if self.accelerator else next(self.model.parameters()).device

    def _mean(self, x: torch.Tensor) -> torch.Tensor:
        if self.world == 1:
            return x
        return self.accelerator.reduce(x.to(self.device), reduction="mean").cpu()

    def _gather(self, x: torch.Tensor) -> torch.Tensor:
        """Concatenate ``x`` over processes along its last (atom) dim, in process order (CPU result)."""
        if self.world == 1:
            return x
        y = self.accelerator.gather(x.movedim(-1, 0).contiguous().to(self.device))
        return y.cpu().movedim(0, -1)

    def _local(self, n_local: int) -> slice:
        """This process's atoms in a gathered global batch."""
        return slice(self.rank * n_local, (self.rank + 1) * n_local)

    def next_indices(self) -> list[int]:
        """This process's ``batch_size`` record indices of the next global batch (reshuffled each epoch,
        seeded; every process draws the same ``world * batch_size`` indices and keeps its slice)."""
        bs, out = self.config.batch_size, []
        while len(out) < bs * self.world:
            if not self._order:
                self._order = torch.randperm(len(self.data), generator=self.gen).tolist()
            out.append(self._order.pop())
        return out[self.rank * bs : (self.rank + 1) * bs]

    def batch(self, idx: list[int]) -> dict[str, torch.Tensor]:
        """Collated ``[a ; b]`` sequences of the records ``idx`` (``2 * len(idx)`` rows)."""
        prompts = [self.tok.prompt_ids[i] for i in idx]
        resp = [self.tok.a_ids[i] for i in idx] + [self.tok.b_ids[i] for i in idx]
        return collate(prompts + prompts, resp, self.pad_id, self.device)

    def _from_cache(self, cache: torch.Tensor, idx: list[int]) -> torch.Tensor | None:
        """Rows ``[a ; b]`` of ``cache`` (``(..., 2, N)``) for ``idx``, or None if any is missing."""
        if not self.config.cache_logprobs:
            return None
        vals = torch.cat([cache[..., 0, idx], cache[..., 1, idx]], -1)
        return None if torch.isnan(vals).any() else vals

    def _to_cache(self, cache: torch.Tensor, idx: list[int], vals: torch.Tensor) -> None:
        if self.config.cache_logprobs:
            cache[..., 0, idx] = vals[..., : len(idx)]
            cache[..., 1, idx] = vals[..., len(idx) :]

    def _eval_mode(self, fn):
        """Run ``fn`` in eval mode (dropout off) -- skipped when the model has no active dropout, since
        toggling ``train()``/``eval()`` walks every module (~6 ms per step on the tiny benchmark model)."""
        if not self._has_dropout:
            return fn()
        was = self.model.training
        self.model.eval()
        try:
            return fn()
        finally:
            self.model.train(was)

    @property
    def lag_active(self) -> bool:
        return self.config.lagged_reference and self.lag_snapshot is not None

    def ref_and_lag(
        self, idx: list[int], batch: dict[str, torch.Tensor], ref: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``log pi_ref`` ``(2M,)`` and ``ell = log pi_lag - log pi_ref`` ``(H, 2M)`` (zero while the lag is
        ``pi_ref``); what is not given or cached is computed without gradients."""
        h = len(self.head_primary)
        if ref is None:
            ref = self._from_cache(self._ref_cache, idx)
        lag = self._from_cache(self._lag_cache, idx) if self.lag_active else None
        need_lag = self.lag_active and lag is None
        snap = self.lag_snapshot
        if ref is None:
            ref = self._eval_mode(lambda: self.model.reference_logprobs(batch)).float().cpu()
            self._to_cache(self._ref_cache, idx, ref)
        if need_lag:
            merged = self._merged_lag()
            lag = self._eval_mode(lambda: self.model.snapshot_logprobs(snap, batch, merged)).float().cpu()
            self._to_cache(self._lag_cache, idx, lag)
        ell = lag - ref if self.lag_active else torch.zeros(h, 2 * len(idx), device="cpu")
        return ref, ell

    def _merged_lag(self) -> list | None:
        """The lag snapshot merged into the adapted base weights (once per lag), or None: plain swap."""
        if self._lag_merged_for is not self.lag_snapshot:
            self._lag_merged = self.model.merge_snapshot(self.lag_snapshot, self.config.merge_lagged_mb)
            self._lag_merged_for = self.lag_snapshot
        return self._lag_merged

    def _pq(self, idx: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """``p`` ``(H, 2M)``, ``q`` ``(H, 2M, K-1)`` of the augmented atoms ``[a ; b]`` of records ``idx``."""
        n = len(self.data)
        rows = torch.tensor(idx + [n + i for i in idx], device="cpu")
        return self._p_all[:, rows], self._q_all[:, rows]

    def _global(self, idx: list[int], ell: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``p``, ``q`` and ``ell`` of the global batch: every process's atoms ``[a_r ; b_r]`` in order."""
        if self.world == 1:
            return (*self._pq(idx), ell)
        all_idx = self._gather(torch.tensor(idx, device="cpu")).view(self.world, -1).tolist()
        parts = [self._pq(i) for i in all_idx]
        p = torch.cat([a for a, _ in parts], 1)
        return p, torch.cat([b for _, b in parts], 1), self._gather(ell)

    def _draw(self) -> _Batch:
        """The next training mini-batch: one drawn ahead by a threshold update, else a fresh one."""
        if self._ahead:
            return self._ahead.pop(0)
        idx = self.next_indices()
        return _Batch(idx, self.batch(idx))

    def _prepare(self, d: _Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """``(ref, ell)`` of ``d``, computed once per lag (kept on ``d``)."""
        if d.ell is None:
            d.ref, d.ell = self.ref_and_lag(d.idx, d.batch, d.ref)
        return d.ref, d.ell

    @torch.no_grad()
    def precompute_reference(self, chunk: int = 64) -> None:
        """Fill the reference cache for every record (as TRL's ``precompute_ref_log_probs``)."""
        if not self.config.cache_logprobs:
            raise ConfigError("cache_logprobs", False, "precompute_reference needs the cache")
        for s in range(0, len(self.data), chunk):
            idx = list(range(s, min(s + chunk, len(self.data))))
            batch = self.batch(idx)
            ref = self._eval_mode(lambda b=batch: self.model.reference_logprobs(b))
            self._to_cache(self._ref_cache, idx, ref.float().cpu())

    # ----------------------------------------------------------------------------------------- step
    def step(self) -> dict[str, Any]:
        """One iteration of Algorithm `mopo` (or of DPO); returns the logged record."""
        c, t0 = self.config, time.perf_counter()
        d = self._draw()
        idx, batch = d.idx, d.batch
        ref, ell = self._prepare(d)  # (2M,), (H, 2M)
        if self._has_dropout:
            self.model.train()
        if c.method == "dpo":
            rec = self._dpo_step(idx, batch, ref)
        else:
            rec = self._mopo_step(idx, batch, ref, ell)
        self.step_count += 1
        _check_finite(rec, self.step_count)
        if c.method != "dpo" and self.step_count % c.t0 == 0:
            self._lag_update()
        rec.update(step=self.step_count, seconds=time.perf_counter() - t0)
        self.log.append(rec)
        if self.log_path:
            with self.log_path.open("a") as fh:
                fh.write(json.dumps(rec) + "\n")
        return rec

    def _mopo_step(self, idx, batch, ref, ell) -> dict[str, Any]:
        c = self.config
        p, q, ell_g = self._global(idx, ell)  # the global batch (= the local one on one process)
        own = self._local(ell.shape[-1])
        if c.method == "mopo-lb":
            return self._barrier_step(batch, ref, ell, p, q, ell_g, own)
        d = dual.batch_dual(p, q, ell_g, self.lam, c.tau)  # at lambda^(t-1)
        g = d.g
        self.chi = dual.chi_step(self.chi, d, q, c.epsilon, c.lr_chi)
        bound = dual.lower_bounds(d, q, self.chi, c.epsilon)
        self.lam = dual.lambda_step(self.lam, bound, self.b, c.lr_lambda)
        d = dual.batch_dual(p, q, ell_g, self.lam, c.tau, with_g=False)  # rho_lambda^(t)
        logp = self.policy(batch)  # (H, 2M) with grad
        if c.extraction == "pairwise":  # rho* is relative to pi_lag = pi_ref * exp(ell)
            base = (ref.unsqueeze(0) + ell).to(logp.device, torch.float32)
            loss = obj.pairwise_extraction_loss(logp.float(), base, d.log_rho[:, own].to(base)).mean()
        else:  # Eq. `policy-extraction`; u has mean 1 over the global batch
            loss = obj.bc_loss(logp, d.u[:, own].to(logp.device)).mean()
        self._backward(loss)
        return {
            "loss": self._mean(loss.detach()).item(),
            "lambda": self.lam.tolist(),
            "chi": self.chi.tolist(),
            "b": self.b.tolist(),
            "G": g.tolist(),
            "lower_bound": bound.tolist(),
            "logratio_ref": (logp.detach().cpu() - ref).mean().item(),
        }

    def _barrier_step(self, batch, ref, ell, p, q, ell_g, own) -> dict[str, Any]:
        """One ascent step on ``L_LB(rho_psi, sigma^(t))`` (Eq. `logbarrier`, appendix `logbarrier`).

        ``L_LB`` couples the atoms (``rho`` is normalised over the batch), so it is differentiated in the
        gathered log-ratios and each process backpropagates its atoms' share ``sum_j dL/dl_j l_j`` (times
        the number of processes, which DDP's gradient average divides out)."""
        c = self.config
        t = self.step_count + 1
        self.sigma = sigma_at(c, t).expand_as(self.b).clone()
        logp = self.policy(batch)  # (H, 2M) with grad
        rel = logp.detach().float().cpu() - ref - ell  # log pi_psi - log pi_lag
        x = self._gather(rel).requires_grad_(True)
        w = obj.normalized_ratio(ell_g) / ell_g.shape[-1]  # lagged reference measure of the atoms
        lb, g = dual.barrier_lagrangian(x, p, q, w, self.b, self.sigma, c.tau)
        (grad,) = torch.autograd.grad(lb.sum(), x)
        coef = (grad[:, own] * self.world).to(logp.device, logp.dtype)
        self._backward(-(coef * logp).sum())  # d/dpsi = -dL_LB/dpsi (this process's share)
        self.lam = dual.barrier_lambda(g.detach(), self.b, self.sigma)
        return {
            "loss": -float(lb.detach().mean()),
            "lambda": self.lam.tolist(),
            "chi": self.chi.tolist(),
            "b": self.b.tolist(),
            "G": g.detach().tolist(),
            "lower_bound": g.detach().tolist(),
            "sigma": self.sigma.tolist(),
            "logratio_ref": (logp.detach().cpu() - ref).mean().item(),
        }

    def _dpo_step(self, idx, batch, ref) -> dict[str, Any]:
        m = len(idx)
        logp = self.policy(batch)[0]
        chosen_is_a = self.data.prefs[idx, 0].bool().to(logp.device)
        delta = (logp - ref.to(logp.device)) * self.config.dpo_beta
        margin = torch.where(chosen_is_a, delta[:m] - delta[m:], delta[m:] - delta[:m])
        loss = -F.logsigmoid(margin).mean()
        self._backward(loss)
        return {
            "loss": loss.item(),
            "margin": margin.mean().item(),
            "accuracy": (margin > 0).float().mean().item(),
        }

    def _backward(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        if self.accelerator is not None:
            self.accelerator.backward(loss)
            if self.config.grad_clip:
                self.accelerator.clip_grad_norm_(self.policy.parameters(), self.config.grad_clip)
        else:
            loss.backward()
            if self.config.grad_clip:
                torch.nn.utils.clip_grad_norm_(self._params, self.config.grad_clip)
        self.optimizer.step()

    def _lag_update(self) -> None:
        """``pi_ref <- pi_psi^(t - t0)``, ``b <- beta * G(rho^(t - t0))`` (Algorithm `mopo`, lines 9-11)."""
        c = self.config
        if c.lagged_reference:
            self.lag_snapshot, self.pending_snapshot = self.pending_snapshot, self.model.trainable_state()
            self._lag_cache.fill_(float("nan"))
            for d in self._ahead:  # their lagged log-probs belong to the previous lag
                d.ell = None
        if c.thresholds is None:
            # G(rho^(t - t0)) on the next training batches (drawn ahead, trained on next): their pi_ref and
            # pi_lag log-probs are needed by those steps anyway, so the estimate adds no forward pass
            while len(self._ahead) < c.threshold_batches:
                idx = self.next_indices()
                self._ahead.append(_Batch(idx, self.batch(idx)))
            gs = []
            for d in self._ahead[: c.threshold_batches]:
                _, ell = self._prepare(d)
                _, q, ell_g = self._global(d.idx, ell)
                gs.append(dual.threshold(self.beta, ell_g, q))
            self.b = torch.stack(gs).mean(0)

    def train(self, steps: int | None = None) -> list[dict[str, Any]]:
        """Run ``steps`` (default ``config.steps``) iterations; returns the per-step log."""
        for _ in range(self.config.steps if steps is None else steps):
            self.step()
        return self.log

    # ----------------------------------------------------------------------------------- checkpoints
    def save_checkpoint(self, path: str | Path) -> Path:
        """Adapters + heads (``policy/``), dual state, snapshots, optimiser and data order (``state.pt``)."""
        path = Path(path)
        self.model.save(path / "policy")
        save_state(  # tensors and plain values only: from_checkpoint reads it with weights_only=True
            {
                "step": self.step_count,
                "lam": self.lam,
                "chi": self.chi,
                "b": self.b,
                "sigma": self.sigma,
                "lag_snapshot": self.lag_snapshot,
                "pending_snapshot": self.pending_snapshot,
                "optimizer": self.optimizer.state_dict(),
                "generator": self.gen.get_state(),
                "order": self._order,
                "ahead": [d.idx for d in self._ahead],
            },
            path / "state.pt",
        )
        (path / "config.json").write_text(json.dumps(self.config.to_dict(), indent=2))
        return path

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path,
        base_model: torch.nn.Module,
        tokenizer: Any,
        data: PreferenceData,
        **kwargs: Any,
    ) -> MOPOLMTrainer:
        """Rebuild a trainer (policy, dual state, optimiser, data order) from :meth:`save_checkpoint`."""
        path = Path(path)
        if not (path / "state.pt").exists():
            raise DataError("checkpoint", str(path), "no state.pt: not a MOPO trainer checkpoint")
        fix = "delete the checkpoint folder and rerun without --resume (or restore it from a copy)"
        config = MOPOLMConfig.from_dict(load_json(path / "config.json", "checkpoint", kind=dict, recover=fix))
        policy = Policy.load(base_model, path / "policy")
        tr = cls(policy, tokenizer, data, config, **kwargs)
        st = load_state(path / "state.pt", field="checkpoint")
        tr.step_count = st["step"]
        tr.lam, tr.chi, tr.b, tr.sigma = st["lam"], st["chi"], st["b"], st["sigma"]
        tr.lag_snapshot, tr.pending_snapshot = st["lag_snapshot"], st["pending_snapshot"]
        tr.optimizer.load_state_dict(st["optimizer"])
        tr.gen.set_state(st["generator"])
        tr._order = list(st["order"])
        tr._ahead = [_Batch(list(i), tr.batch(list(i))) for i in st.get("ahead", [])]
        return tr

"""Configuration of MOPO training on language models (one documented dataclass, validated)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from bayescrl.utils import ConfigError
from bayescrl.utils.checks import finite_float, positive_int
from bayescrl.utils.config import Config

METHODS = ("mopo", "mopo-lb", "dpo")
EXTRACTIONS = ("bc", "pairwise")


@dataclass
class MOPOLMConfig(Config):
    """Hyper-parameters of :class:`bayescrl.mopo.lm.trainer.MOPOLMTrainer`.

    Defaults follow table `exp_details_text_generation` where it applies (tau 0.08 there; eps 0.15;
    beta 0.9995; t0 500 for 10k steps) scaled to short CPU runs.

    Attributes:
        method: ``"mopo"`` (Lagrangian, Algorithm `mopo`), ``"mopo-lb"`` (one stochastic ascent step per
            iteration on the relaxed log-barrier Lagrangian Eq. `logbarrier`, appendix `logbarrier`) or
            ``"dpo"`` (the DPO loss on the same loop; data must have K = 1, ``prefs[0] = 1``
            meaning ``response_a`` is chosen; used by the D_J and scalarised baselines).
        extraction: how the policy is fitted to ``pi* = pi_ref rho*`` (MOPO methods): ``"bc"``, the
            importance-weighted behaviour cloning of Eq. `policy-extraction`; ``"pairwise"``, a departure: the
            cross-entropy between ``pi*``'s and the policy's choice probabilities within each record's pair
            (:func:`bayescrl.mopo.objective.pairwise_extraction_loss`), which also lowers the answer ``rho*``
            down-weights and transfers the preference to new prompts where ``"bc"`` does not (docs/mopo.md).
        primary: index of the primary objective (the thesis' ``K``-th objective; default ``-1`` = last).
            With ``multi_head`` it is the head used at inference.
        multi_head: train one output head per objective (figure `multiplepolicyheads`): head ``k`` solves the
            MOPO problem whose primary objective is ``k``; all heads share the LoRA backbone.
        tau: KL regularisation ``tau`` of Eq. `main-obj`.
        epsilon: radius of the KL ball of the lower-bound problem `lbop` (0 = constrain ``G`` itself).
        beta: constraint relaxation: adaptive thresholds ``b = beta * G(rho^(t - t0))`` (section
            `sec:function_approx`); a number or one value per constraint.
        thresholds: fixed thresholds ``b`` (K - 1 win-rates in [0, 1]); when set, ``beta`` is not used.
        t0: lag of the reference policy and period of the threshold update (Algorithm `mopo`).
        lagged_reference: use the lagged reference (``False``: always regularise towards ``pi_ref``).
        steps, batch_size: optimisation steps and records per step and process (each record gives 2
            sequences; under ``accelerate launch`` with ``P`` processes a step sees ``P * batch_size``
            records, TRL's per-device convention).
        lr: Adam learning rate of the policy (LoRA + heads).
        lr_lambda, lr_chi: step sizes of the projected dual updates of ``lambda`` and ``chi``.
        lambda_init, chi_init: initial ``lambda`` and ``chi``.
        sigma_init, sigma_decay, sigma_min: log-barrier schedule ``sigma^(t) = max(gamma^t sigma_0,
            sigma_min)`` (``mopo-lb``). The text lets ``sigma -> 0``; the floor (as in the tabular solver)
            keeps the barrier's ``1/sigma`` slope finite for a finite step size; ``0`` = no floor.
        dpo_beta: inverse temperature of the DPO loss (``method="dpo"``).
        max_length: maximal prompt + response tokens (longer records are rejected, never truncated).
        cache_logprobs: cache reference and lagged log-probs per record (they are constant between lag
            updates); the lagged cache is cleared at every update.
        merge_lagged_mb: merge the lagged snapshot's LoRA deltas into a copy of the adapted base weights at
            each lag update when that copy takes at most this many MB (``0`` = never): the lagged pass then
            costs a ``pi_ref`` pass instead of a LoRA pass (:meth:`bayescrl.mopo.lm.model.Policy.
            merge_snapshot`; vanilla LoRA on float32 weights only, equal up to float rounding).
        grad_clip: gradient-norm clip (``0`` = none).
        dtype: precision of the model built by :func:`bayescrl.mopo.lm.run.run_lm` (see :meth:`torch_dtype`):
            ``"auto"`` (bf16 on CUDA with bf16 support, else fp32), ``"float32"`` or ``"bfloat16"``. The
            trainer itself uses whatever dtype the policy has; log-probs are always reduced in fp32.
        peft: LoRA settings passed to ``peft.LoraConfig`` (``r``, ``lora_alpha``, ``lora_dropout``,
            ``target_modules``, ...).
        threshold_batches: mini-batches used to estimate ``G(rho^(t - t0))`` at a threshold update.
        seed: seed of the data order and of the model's initialisation.
    """

    method: str = "mopo"
    extraction: str = "bc"
    primary: int = -1
    multi_head: bool = False
    tau: float = 0.1
    epsilon: float = 0.0
    beta: float | list[float] = 0.9995  # table `exp_details_text_generation`
    thresholds: list[float] | None = None
    t0: int = 50
    lagged_reference: bool = True
    steps: int = 200
    batch_size: int = 8
    lr: float = 2e-3
    lr_lambda: float = 0.5
    lr_chi: float = 0.1
    lambda_init: float = 0.0
    chi_init: float = 1.0
    sigma_init: float = 1.0
    sigma_decay: float = 0.99
    sigma_min: float = 1e-3
    dpo_beta: float = 0.1
    max_length: int = 128
    cache_logprobs: bool = True
    merge_lagged_mb: float = 512.0
    grad_clip: float = 1.0
    dtype: str = "auto"
    peft: dict[str, Any] = field(default_factory=lambda: {"r": 8, "lora_alpha": 16, "lora_dropout": 0.0})
    threshold_batches: int = 4
    seed: int = 0

    SECTION: ClassVar[str] = "train"

    def validate(self) -> None:
        if self.method not in METHODS:
            raise ConfigError("method", self.method, f"must be one of {', '.join(METHODS)}")
        if self.extraction not in EXTRACTIONS:
            raise ConfigError("extraction", self.extraction, f"must be one of {', '.join(EXTRACTIONS)}")
        for name in ("tau", "lr", "dpo_beta", "chi_init", "sigma_init"):  # finite: an inf lr is a NaN later
            if finite_float(getattr(self, name), name) <= 0:
                raise ConfigError(name, getattr(self, name), "must be > 0")
        for name in (
            "epsilon",
            "lr_lambda",
            "lr_chi",
            "lambda_init",
            "grad_clip",
            "merge_lagged_mb",
            "sigma_min",
        ):
            if finite_float(getattr(self, name), name) < 0:
                raise ConfigError(name, getattr(self, name), "must be >= 0")
        for name in ("t0", "steps", "batch_size", "max_length", "threshold_batches"):  # 1e9 is 10**9
            setattr(self, name, positive_int(getattr(self, name), name))
        if not 0 < finite_float(self.sigma_decay, "sigma_decay") <= 1:
            raise ConfigError("sigma_decay", self.sigma_decay, "must be in (0, 1]")
        betas = self.beta if isinstance(self.beta, list) else [self.beta]
        for i, v in enumerate(betas):
            idx = i if isinstance(self.beta, list) else None
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
                raise ConfigError("beta", v, "must be in (0, 1]", index=idx)
        if self.thresholds is not None:
            if not isinstance(self.thresholds, (list, tuple)):
                raise ConfigError("thresholds", self.thresholds, "must be a list of win-rates in [0, 1]")
            for i, v in enumerate(self.thresholds):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                    raise ConfigError("thresholds", v, "a win-rate threshold must be in [0, 1]", index=i)
        _check_peft(self.peft)
        if self.dtype not in ("auto", "float32", "bfloat16"):
            raise ConfigError("dtype", self.dtype, "must be auto, float32 or bfloat16")

    def torch_dtype(self, device: str | torch.device) -> torch.dtype:
        """The model dtype for ``device`` (``"auto"``: bf16 on a CUDA device that supports it, else fp32)."""
        if self.dtype == "float32":
            return torch.float32
        if self.dtype == "bfloat16":
            return torch.bfloat16
        dev = torch.device(device)
        return torch.bfloat16 if dev.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32


def _check_peft(peft: Any) -> None:
    """The LoRA settings peft itself checks only deep inside the model build: rank, alpha, dropout."""
    if not isinstance(peft, Mapping):
        raise ConfigError("peft", peft, "must be a mapping of peft.LoraConfig options (r, lora_alpha, ...)")
    if "r" in peft:
        positive_int(peft["r"], "peft.r")
    if "lora_alpha" in peft and finite_float(peft["lora_alpha"], "peft.lora_alpha") <= 0:
        raise ConfigError("peft.lora_alpha", peft["lora_alpha"], "must be > 0")
    if "lora_dropout" in peft and not 0 <= finite_float(peft["lora_dropout"], "peft.lora_dropout") < 1:
        raise ConfigError("peft.lora_dropout", peft["lora_dropout"], "must be in [0, 1)")

r"""Rewards-in-Context (RiC; Yang et al. 2024), the offline stage, on a LoRA policy.

1. **Reward tokens.** Every scored sample's objectives are standardised over the offline data
   (``(s - mean) / sd``, as the thesis' appendix "Implementation Details" does for all baselines), rounded to
   one decimal and clipped to [-4, 4], and written into the prompt before the response marker:
   ``"user : ... <r1> 0.5 <r2> -1.2 assistant :"`` (:func:`format_prompt`; RiC's
   ``<rm1_score> s1 <rm2_score> s2 ### Response:``).
2. **SFT.** The policy maximises the likelihood of each sample's response given its reward-augmented prompt
   (LoRA on the base, Adam, :func:`train`).
3. **Score-conditioned generation.** A preference weighting ``w`` on the simplex is mapped to desired scores
   (:func:`desired_scores`, RiC's ``map_rewards_from_preference``): with ``[low, high]`` the range of 25,000
   standard-normal draws (the thesis' choice, about +-3.9), ``l2`` gives
   ``s_i = low + w_i / ||w||_2 (high - low)``, ``linf`` gives ``high`` for the largest weight and
   ``low + min(K w_i, 1) (high - low)`` for the others. Sweeping ``w`` traces RiC's front; explicit desired
   score vectors (``ric.desired_scores``) can be swept instead.

Departure: RiC's online stage (multi-objective rejection sampling and further fine-tuning on generated
samples) is not run; the thesis' table lists it (10,000 samples per iteration, 4,000 steps), which is far
beyond a CPU-sized run. Documented in docs/reproduction.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from bayescrl.mopo.lm.data import collate
from bayescrl.mopo.lm.model import Policy
from bayescrl.utils import ConfigError

MAPPINGS = ("l2", "linf", "linear")
CLIP = 4.0


def reward_markers(k: int) -> list[str]:
    return [f"<r{i + 1}>" for i in range(k)]


def format_scores(scores: Sequence[float]) -> str:
    """``"<r1> 0.5 <r2> -1.2"``: one marker and one rounded, clipped score per objective."""
    parts = []
    for marker, s in zip(reward_markers(len(scores)), scores, strict=True):
        v = min(max(round(float(s), 1), -CLIP), CLIP)
        parts.append(f"{marker} {v + 0.0:.1f}")  # + 0.0: no "-0.0"
    return " ".join(parts)


def format_prompt(prompt: str, scores: Sequence[float], marker: str | None = None) -> str:
    """Insert the reward tokens before the response marker ``marker`` (appended when absent)."""
    tokens = format_scores(scores)
    if marker and prompt.rstrip().endswith(marker):
        head = prompt.rstrip()[: -len(marker)].rstrip()
        return f"{head} {tokens} {marker}"
    return f"{prompt.rstrip()} {tokens}"


def normalise(scores: torch.Tensor, mean: torch.Tensor, sd: torch.Tensor) -> torch.Tensor:
    """Standardised, rounded (1 decimal) and clipped scores ``(n, K)`` written into RiC's prompts."""
    z = (torch.as_tensor(scores, dtype=torch.float64, device="cpu") - mean) / sd
    return torch.round(z * 10).div(10).clamp(-CLIP, CLIP)


def reference_range(draws: int = 25_000, seed: int = 0) -> tuple[float, float]:
    """``(low, high)``: min and max of ``draws`` standard-normal samples, rounded to 1 decimal."""
    x = np.random.default_rng(seed).standard_normal(draws)
    return round(float(x.min()), 1), round(float(x.max()), 1)


def check_weighting(w: Any, k: int, field: str, index: int | None = None) -> list[float]:
    """A weighting on the probability simplex of ``k`` objectives (one clear error otherwise)."""
    if not isinstance(w, (list, tuple)) or len(w) != k:
        raise ConfigError(field, w, f"need {k} weights, one per objective", index=index)
    vals = []
    for v in w:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConfigError(field, w, "weights must be finite numbers", index=index)
        vals.append(float(v))
    if min(vals) < 0 or abs(sum(vals) - 1.0) > 1e-6:
        raise ConfigError(
            field, w, "a weighting must lie on the simplex (weights >= 0 summing to 1)", index=index
        )
    return vals


def check_desired(s: Any, k: int, field: str = "ric.desired_scores", index: int | None = None) -> list[float]:
    """A desired-score vector: ``k`` finite numbers."""
    if not isinstance(s, (list, tuple)) or len(s) != k:
        raise ConfigError(field, s, f"need {k} desired scores, one per objective", index=index)
    for v in s:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConfigError(field, s, "desired scores must be finite numbers", index=index)
    return [float(v) for v in s]


def desired_scores(w: Sequence[float], low: float, high: float, method: str = "l2") -> list[float]:
    """RiC's map from a preference weighting to desired (standardised) scores (module docstring)."""
    w = np.asarray(w, dtype=float)
    n = len(w)
    if method == "l2":
        out = low + w / np.sqrt((w**2).sum()) * (high - low)
    elif method == "linear":
        out = low + w * (high - low)
    elif method == "linf":
        out = low + np.minimum(n * w, 1.0) * (high - low)
        out[int(np.argmax(w))] = high
    else:
        raise ConfigError("ric.mapping", method, f"must be one of {', '.join(MAPPINGS)}")
    return [round(float(v), 1) for v in out]


def train(
    policy: Policy,
    tokenizer: Any,
    prompts: Sequence[str],
    responses: Sequence[str],
    scores: torch.Tensor,
    marker: str | None,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    max_length: int,
) -> list[float]:
    """RiC's offline SFT: maximise ``log pi(y | x, <r> s(y))`` over the scored samples (per-token mean)."""
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    aug = [format_prompt(p, s.tolist(), marker) for p, s in zip(prompts, scores, strict=True)]
    p_ids = tokenizer(aug, add_special_tokens=False)["input_ids"]
    r_ids = [ids + [eos] for ids in tokenizer(list(responses), add_special_tokens=False)["input_ids"]]
    keep = [
        i for i in range(len(aug)) if responses[i].strip() and len(p_ids[i]) + len(r_ids[i]) <= max_length
    ]
    if not keep:
        raise ConfigError("ric", len(aug), f"no sample fits max_length {max_length}")
    params = [p for p in policy.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr)
    gen = torch.Generator().manual_seed(seed)
    device = next(policy.parameters()).device
    policy.train()
    losses = []
    for _ in range(steps):
        idx = [keep[i] for i in torch.randint(len(keep), (batch_size,), generator=gen).tolist()]
        b = collate([p_ids[i] for i in idx], [r_ids[i] for i in idx], pad, device)
        logp = policy.logprobs(b)[0]
        loss = -logp.sum() / b["response_mask"][:, 1:].sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(loss.item())
    policy.eval()
    if not all(math.isfinite(v) for v in losses):
        raise ConfigError("ric.lr", lr, "RiC's SFT loss is not finite: lower ric.lr")
    return losses

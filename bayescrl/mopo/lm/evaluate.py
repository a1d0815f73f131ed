"""Evaluation of LM policies: generation, implicit preference accuracy, Pareto front of a sweep.

The Pareto summary (non-dominated filter and hypervolume, all objectives maximised) comes from
:mod:`bayescrl.mopo.pareto`; the hypervolume's reference point is passed explicitly and written next to
the value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from bayescrl.mopo import pareto
from bayescrl.mopo.lm.data import PreferenceData, collate, tokenize
from bayescrl.mopo.lm.model import Policy
from bayescrl.utils import ConfigError


@torch.no_grad()
def generate(
    policy: Policy,
    tokenizer: Any,
    prompts: Sequence[str],
    head: int = 0,
    max_new_tokens: int = 24,
    seed: int = 0,
    batch_size: int = 64,
    do_sample: bool = True,
    temperature: float = 1.0,
) -> list[str]:
    """Sample one response per prompt with head ``head`` (ancestral sampling at ``temperature``, seeded).

    ``temperature = 1`` samples the policy itself; smaller values sharpen it (``do_sample=False``: greedy).
    """
    if not temperature > 0:
        raise ConfigError("temperature", temperature, "must be > 0")
    torch.manual_seed(seed)
    policy.eval()
    out: list[str] = []
    device = next(policy.parameters()).device
    for s in range(0, len(prompts), batch_size):
        chunk = list(prompts[s : s + batch_size])
        ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in chunk]
        width = max(len(i) for i in ids)
        pad = tokenizer.pad_token_id
        # left padding so that every prompt ends at the same position
        input_ids = torch.tensor([[pad] * (width - len(i)) + i for i in ids], device=device)
        mask = torch.tensor([[0] * (width - len(i)) + [1] * len(i) for i in ids], device=device)
        seqs = policy.generate(
            input_ids,
            mask,
            head=head,
            max_new_tokens=max_new_tokens,
            do_sample=do_sample,
            top_k=0,
            top_p=1.0,
            temperature=temperature if do_sample else None,
            pad_token_id=pad,
            eos_token_id=tokenizer.eos_token_id,
        )
        out += tokenizer.batch_decode(seqs[:, width:], skip_special_tokens=True)
    return out


@torch.no_grad()
def implicit_accuracy(
    policy: Policy,
    tokenizer: Any,
    data: PreferenceData,
    head: int = 0,
    max_length: int = 128,
    chunk: int = 32,
):
    """Per objective, the fraction of records where the implicit reward ``log pi/pi_ref`` ranks ``a`` vs ``b``
    as ``prefs`` does (a reward-model-free held-out check for data without programmatic objectives).
    Evaluated in chunks of ``chunk`` records on the policy's device."""
    tok = tokenize(data, tokenizer, max_length)
    was = policy.training
    policy.eval()
    device = next(policy.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    margins = []
    with torch.no_grad():
        for s in range(0, len(data), chunk):
            i = slice(s, s + chunk)
            b = collate(tok.prompt_ids[i] * 2, tok.a_ids[i] + tok.b_ids[i], pad, device)
            m = policy.logprobs(b, heads=[head])[0].float().cpu() - policy.reference_logprobs(b).float().cpu()
            n = m.shape[0] // 2
            margins.append(m[:n] - m[n:])
    policy.train(was)
    a_better = (torch.cat(margins) > 0).long()
    return (a_better[:, None] == data.prefs).float().mean(0).tolist()


def pareto_summary(points: np.ndarray, ref: Sequence[float]) -> dict[str, Any]:
    """Non-dominated mask and hypervolume (all axes maximised) of ``points`` ``(n, m)`` w.r.t. ``ref``.

    Uses :func:`bayescrl.mopo.pareto.non_dominated` and :func:`bayescrl.mopo.pareto.hypervolume` (moocore).
    """
    pts = np.asarray(points, dtype=float)
    return {
        "nondominated": np.asarray(pareto.non_dominated(pts, maximise=True), dtype=bool).tolist(),
        "hypervolume": float(pareto.hypervolume(pts, ref=list(ref), maximise=True)),
        "reference_point": list(ref),
    }

"""The base model ``pi_ref`` of the text-generation table: a tiny offline GPT-2 or a local HF model.

``model.path`` unset: a word-level tokenizer over the task's vocabulary (plus RiC's reward tokens ``<r1>``,
``<r2>``, ... and the scores ``-4.0 ... 4.0``) and a randomly initialised GPT-2
(:func:`bayescrl.mopo.lm.tiny.build_model`) fitted by supervised fine-tuning to the task's behaviour policy
(:meth:`bayescrl.mopo.textgen.tasks.Task.behaviour`). ``model.path`` set: that local model directory is
loaded offline (:func:`bayescrl.mopo.lm.user.load_local_model`, e.g. SmolLM2-135M exported by
``examples/mopo/smollm2.py --export-hf DIR``) and used as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from bayescrl.mopo.lm.data import PreferenceData
from bayescrl.mopo.lm.evaluate import generate
from bayescrl.mopo.lm.tiny import build_model, sft
from bayescrl.mopo.textgen.tasks import _TOKEN, Task

SPECIAL = ("<pad>", "<unk>", "<eos>")
SCORE_TOKENS = tuple(f"{v / 10:.1f}" for v in range(-40, 41))


def reward_tokens(k: int) -> tuple[str, ...]:
    """RiC's reward markers ``<r1> ... <rK>``."""
    return tuple(f"<r{i + 1}>" for i in range(k))


def build_tokenizer(vocab: Sequence[str], k: int = 2):
    """A word-level ``PreTrainedTokenizerFast`` (pad 0, unk 1, eos 2) over ``vocab`` and RiC's tokens."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = list(SPECIAL) + sorted(set(vocab) | set(reward_tokens(k)) | set(SCORE_TOKENS))
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(_TOKEN.pattern), behavior="isolated")]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>"
    )


def tiny_base(task: Task, n_layer: int, n_embd: int, n_head: int, n_positions: int, seed: int):
    """Tokenizer and randomly initialised GPT-2 for ``task`` (not yet fitted)."""
    tok = build_tokenizer(task.vocabulary())
    model = build_model(tok, n_layer, n_embd, n_head, n_positions=n_positions, seed=seed)
    return model, tok


def fit_behaviour(
    model: nn.Module, tokenizer: Any, task: Task, steps: int, per_prompt: int, lr: float, seed: int
) -> list[float]:
    """Supervised fine-tuning of ``model`` on ``per_prompt`` behaviour answers per training prompt."""
    prompts, responses = task.corpus(per_prompt, seed)
    n = len(prompts)
    data = PreferenceData(
        tuple(prompts), tuple(responses), tuple(responses), torch.zeros(n, 1, dtype=torch.long, device="cpu")
    )
    return sft(model, tokenizer, data, steps=steps, batch_size=16, lr=lr, seed=seed)


class Plain(nn.Module):
    """A causal LM behind the ``generate(input_ids, mask, head=..., **kw)`` interface of
    :class:`bayescrl.mopo.lm.model.Policy`, so :func:`bayescrl.mopo.lm.evaluate.generate` samples it."""

    def __init__(self, lm: nn.Module):
        super().__init__()
        self.lm = lm

    @torch.no_grad()
    def generate(self, input_ids, attention_mask, head: int = 0, **kwargs):
        return self.lm.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)


def clean(text: str) -> str:
    """Strip a decoded response (the word-level tokenizer decodes with spaces between tokens)."""
    return " ".join(text.split())


def sample(
    policy: nn.Module,
    tokenizer: Any,
    prompts: Sequence[str],
    max_new_tokens: int,
    seed: int,
    temperature: float = 1.0,
    head: int = 0,
    batch_size: int = 64,
) -> list[str]:
    """One sampled response per prompt (:func:`bayescrl.mopo.lm.evaluate.generate`), cleaned."""
    texts = generate(
        policy,
        tokenizer,
        list(prompts),
        head=head,
        max_new_tokens=max_new_tokens,
        seed=seed,
        batch_size=batch_size,
        temperature=temperature,
    )
    return [clean(t) for t in texts]

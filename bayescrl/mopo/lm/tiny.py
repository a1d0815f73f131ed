"""The tiny verbosity-constrained text task (section `Secondary Evaluation`, figure `length`), offline.

Everything is built locally, nothing is downloaded: a word-level tokenizer over a 30-word vocabulary, a
randomly initialised 2-layer GPT-2, a behaviour policy ``mu`` that writes answers of random length and
random "helpfulness", and K = 3 programmatic objectives (the thesis' convention: the primary objective is
the last one):

* ``long_enough``  ``r_1(y) = -max(0, l_low - |y|)``  (the thesis' ``|y| >= l_low``),
* ``short_enough`` ``r_2(y) = -max(0, |y| - l_high)`` (the thesis' ``-|y| >= -l_high``),
* ``helpful``      ``r_3(y)`` = number of helpful words (a lexical helpfulness score; the primary).

``|y|`` is the number of words (= tokens, word-level tokenizer, EOS excluded). Preference labels are drawn
from Bradley-Terry ``P(y > y') = sigmoid(scale * (r_k(y) - r_k(y')))`` per objective (ties are coin flips),
as in the motivating example (Eq. `appendix_bt_model`). Helpfulness grows with length, so it conflicts with
``short_enough``: maximising it alone makes answers too long.

Departure: the base model is first fitted (full fine-tuning, a few hundred steps) to ``mu``'s answers so that
``pi_ref`` generates text of the task; the thesis' models are SFT models too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from bayescrl.mopo.lm.data import collate, tokenize, validate_records
from bayescrl.mopo.lm.model import sequence_logprobs
from bayescrl.utils.checks import positive_int
from bayescrl.utils.errors import ConfigError

HELPFUL = ("sure", "here", "step", "because", "example", "first", "then", "check", "tip", "answer")
FILLER = ("um", "well", "so", "like", "maybe", "the", "a", "it", "thing", "stuff")
TOPICS = ("bake", "fix", "learn", "plant", "clean", "paint", "cook", "build")
SPECIAL = ("<pad>", "<unk>", "<eos>")
PROMPT_WORDS = ("q", ":", "how", "do", "i", "?", "a")
OBJECTIVES = ("long_enough", "short_enough", "helpful")


@dataclass(frozen=True)
class TinyTask:
    """Parameters of the verbosity task (``l_low <= |y| <= l_high`` while maximising helpfulness)."""

    l_low: int = 6
    l_high: int = 12
    max_words: int = 20
    bt_scale: float = 2.0

    def prompt(self, topic: str) -> str:
        return f"q : how do i {topic} ? a :"

    def rewards(self, responses: Sequence[str]) -> torch.Tensor:
        """``(n, 3)`` rewards ``(r_long, r_short, r_helpful)`` of whitespace-separated responses."""
        out = []
        for text in responses:
            words = text.split()
            n = len(words)
            out.append(
                [-max(0, self.l_low - n), -max(0, n - self.l_high), float(sum(w in HELPFUL for w in words))]
            )
        return torch.tensor(out, dtype=torch.float32, device="cpu")

    def sample_response(self, gen: torch.Generator) -> str:
        n = int(torch.randint(1, self.max_words + 1, (1,), generator=gen))
        p_help = float(torch.rand(1, generator=gen)) * 0.7
        words = []
        for _ in range(n):
            pool = HELPFUL if float(torch.rand(1, generator=gen)) < p_help else FILLER
            words.append(pool[int(torch.randint(len(pool), (1,), generator=gen))])
        return " ".join(words)

    def make_data(self, n: int, seed: int = 0):
        """``n`` records ``{prompt, response_a, response_b, prefs}`` with Bradley-Terry labels."""
        gen = torch.Generator().manual_seed(seed)
        recs = []
        for _ in range(n):
            topic = TOPICS[int(torch.randint(len(TOPICS), (1,), generator=gen))]
            a, b = self.sample_response(gen), self.sample_response(gen)
            r = self.rewards([a, b])
            p = torch.sigmoid(self.bt_scale * (r[0] - r[1]))
            prefs = (torch.rand(3, generator=gen) < p).long().tolist()
            recs.append({"prompt": self.prompt(topic), "response_a": a, "response_b": b, "prefs": prefs})
        return validate_records(recs, 3, OBJECTIVES, source="tiny")

    def eval_prompts(self, n: int) -> list[str]:
        return [self.prompt(TOPICS[i % len(TOPICS)]) for i in range(n)]

    def summarise(self, responses: Sequence[str]) -> dict[str, float]:
        """Primary score, constraint values and satisfaction of generated responses."""
        r = self.rewards(responses)
        lengths = torch.tensor([len(t.split()) for t in responses], dtype=torch.float32, device="cpu")
        in_range = ((lengths >= self.l_low) & (lengths <= self.l_high)).float()
        return {
            "primary_helpful": r[:, 2].mean().item(),
            "helpful_per_word": (r[:, 2] / lengths.clamp_min(1)).mean().item(),
            "mean_length": lengths.mean().item(),
            "r_long_enough": r[:, 0].mean().item(),
            "r_short_enough": r[:, 1].mean().item(),
            "frac_long_enough": (lengths >= self.l_low).float().mean().item(),
            "frac_short_enough": (lengths <= self.l_high).float().mean().item(),
            "frac_in_range": in_range.mean().item(),
            "constraints_satisfied": bool(self.l_low <= lengths.mean().item() <= self.l_high),
        }


def build_tokenizer():
    """A word-level ``PreTrainedTokenizerFast`` over the task's words (pad 0, unk 1, eos 2)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = list(SPECIAL) + sorted(set(PROMPT_WORDS + HELPFUL + FILLER + TOPICS))
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>"
    )


def check_shape(model: Mapping[str, Any], prefix: str = "model", n_positions: int = 64) -> int:
    """Refuse a GPT-2 shape transformers refuses only while building it (``n_head`` must divide ``n_embd``);
    returns the context length ``n_positions``."""
    n_embd = positive_int(model.get("n_embd", 64), f"{prefix}.n_embd")
    n_head = positive_int(model.get("n_head", 2), f"{prefix}.n_head")
    if n_embd % n_head:
        why = f"must divide {prefix}.n_embd = {n_embd} (the attention heads split it)"
        raise ConfigError(f"{prefix}.n_head", n_head, why)
    return positive_int(model.get("n_positions", n_positions), f"{prefix}.n_positions")


def build_model(
    tokenizer, n_layer: int = 2, n_embd: int = 64, n_head: int = 2, n_positions: int = 64, seed: int = 0
):
    """A randomly initialised GPT-2 (pad/eos/bos ids set for the small vocabulary), dropout off."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(
        vocab_size=len(tokenizer),
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_positions=n_positions,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    model = GPT2LMHeadModel(cfg)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def sft(
    model, tokenizer, data, steps: int = 300, batch_size: int = 16, lr: float = 3e-3, seed: int = 0
) -> list[float]:
    """Fit the base model to the behaviour policy's responses (both of each pair) by maximum likelihood."""
    tok = tokenize(data, tokenizer, model.config.n_positions)
    prompts = tok.prompt_ids + tok.prompt_ids
    resp = tok.a_ids + tok.b_ids
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(steps):
        idx = torch.randint(len(resp), (batch_size,), generator=gen).tolist()
        b = collate([prompts[i] for i in idx], [resp[i] for i in idx], tokenizer.pad_token_id, model.device)
        logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
        n_tok = b["response_mask"][:, 1:].sum()
        loss = -sequence_logprobs(logits, b["input_ids"], b["response_mask"]).sum() / n_tok
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    return losses

"""Policies for MOPO on language models: LoRA policy, multi-head policy, reference and lagged reference.

* The policy is a causal LM wrapped by ``peft`` (LoRA on the backbone). The reference ``pi_ref`` of
  Eq. `main-obj` is the *same* module with its adapters disabled (``PeftModel.disable_adapter()``) and the
  base output head, so no second copy of the model is held in memory.
* The multi-head architecture of figure `multiplepolicyheads`: one shared (LoRA-adapted) backbone and one
  output matrix ``theta_k`` per objective (``K`` policies, parameter count ``m - dL + dKL``). Head ``k`` is
  the policy whose primary objective is ``k``; at inference the user picks ``primary`` and decoding uses
  ``theta_primary``. Heads start as copies of the base output head, so at step 0 every head equals the
  reference.
* The lagged reference ``pi_psi^(t - t0)`` of Algorithm `mopo` is a *snapshot of the trainable tensors*
  (adapter weights and heads, a few MB); its log-probabilities are computed by swapping the snapshot into
  the live parameters under ``torch.no_grad`` and swapping back (:meth:`Policy.swapped`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bayescrl.utils import ConfigError


def sequence_logprobs(
    logits: torch.Tensor, input_ids: torch.Tensor, response_mask: torch.Tensor
) -> torch.Tensor:
    """Sum of response-token log-probabilities ``log pi(y | x)`` per sequence (masked, batched).

    ``logits``: ``(..., B, T, V)``; the token at position ``t`` is scored by the logits at ``t - 1``.
    Computed in float32 whatever the model dtype (bf16 log-softmax loses ~2 digits over long responses).
    Returns ``(..., B)``.
    """
    logits = logits[..., :-1, :].float()
    target = input_ids[:, 1:]
    mask = response_mask[:, 1:].to(logits.dtype)
    target = target.expand(logits.shape[:-1])
    tok = torch.gather(logits, -1, target.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    return (tok * mask).sum(-1)


def backbone_of(lm: nn.Module) -> nn.Module:
    """The transformer body of a HF causal LM (``lm.transformer`` for GPT-2, ``lm.model`` for Llama)."""
    base = lm.get_base_model() if hasattr(lm, "get_base_model") else lm
    prefix = getattr(base, "base_model_prefix", None)
    body = getattr(base, prefix, None) if prefix else None
    if body is None:
        raise ConfigError(
            "model", type(base).__name__, "cannot find the transformer body (base_model_prefix)"
        )
    return body


class Policy(nn.Module):
    """A LoRA-adapted causal LM with ``num_heads`` output heads (1 = plain LoRA policy).

    ``num_heads == 1`` keeps the model's own (frozen) output head: only the adapters train.
    ``num_heads > 1`` adds trainable heads initialised from the base head (figure `multiplepolicyheads`).
    """

    def __init__(self, peft_model: nn.Module, num_heads: int = 1):
        super().__init__()
        if num_heads < 1:
            raise ConfigError("num_heads", num_heads, "must be >= 1")
        self.lm = peft_model
        self.num_heads = num_heads
        base = peft_model.get_base_model()
        self.base_head = base.get_output_embeddings()
        self.body = backbone_of(peft_model)
        if num_heads > 1:
            w = self.base_head.weight.detach()
            self.heads = nn.ParameterList([nn.Parameter(w.clone()) for _ in range(num_heads)])
        else:
            self.heads = nn.ParameterList()
        self._trainable_cache: list[tuple[str, nn.Parameter]] | None = None

    # -------------------------------------------------------------------------------------- log-probs
    def forward(self, batch: dict[str, torch.Tensor], heads: Sequence[int] | None = None) -> torch.Tensor:
        """Same as :meth:`logprobs` (``forward`` so that DDP/``accelerate`` wrappers see the call)."""
        return self.logprobs(batch, heads)

    def _hidden(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        out = self.body(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        return out.last_hidden_state

    def _logits(self, h: torch.Tensor, heads: Sequence[int] | None) -> torch.Tensor:
        if self.num_heads == 1:
            return self.base_head(h).unsqueeze(0)
        idx = range(self.num_heads) if heads is None else heads
        w = torch.stack([self.heads[k] for k in idx])  # (H, V, d)
        return torch.einsum("btd,hvd->hbtv", h, w.to(h.dtype))

    def logprobs(self, batch: dict[str, torch.Tensor], heads: Sequence[int] | None = None) -> torch.Tensor:
        """``log pi_k(y | x)`` for every head ``k`` (or the listed ones): shape ``(H, B)``."""
        h = self._hidden(batch)
        return sequence_logprobs(self._logits(h, heads), batch["input_ids"], batch["response_mask"])

    @torch.no_grad()
    def reference_logprobs(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """``log pi_ref(y | x)``: adapters disabled, base output head; shape ``(B,)``."""
        with self.lm.disable_adapter():
            h = self._hidden(batch)
        return sequence_logprobs(self.base_head(h), batch["input_ids"], batch["response_mask"])

    # ------------------------------------------------------------------------------ lagged reference
    def _trainable(self) -> list[tuple[str, nn.Parameter]]:
        if self._trainable_cache is None:
            self._trainable_cache = [(n, p) for n, p in self.named_parameters() if p.requires_grad]
        return self._trainable_cache

    def trainable_state(self) -> dict[str, torch.Tensor]:
        """Detached clones of every trainable tensor (adapters + heads): the lagged-reference snapshot."""
        return {n: p.detach().clone() for n, p in self._trainable()}

    @contextlib.contextmanager
    def swapped(self, snapshot: dict[str, torch.Tensor]) -> Iterator[None]:
        """Temporarily load ``snapshot`` into the live trainable parameters (no autograd, restored after).

        Swapping a few LoRA tensors costs far less than a forward pass and holds no second model. (Measured
        alternatives on the tiny benchmark model: peft's mixed-adapter batches and one pass over a doubled
        batch with the adapter output masked on the reference rows were both slower than two plain passes.)
        """
        pairs = [(p, snapshot[n]) for n, p in self._trainable() if n in snapshot]
        if len(pairs) != len(snapshot):
            raise ConfigError(
                "snapshot", sorted(snapshot)[:3], "does not match the policy's trainable tensors"
            )
        with torch.no_grad():
            saved = [p.detach().clone() for p, _ in pairs]
            for p, t in pairs:
                p.copy_(t)
        try:
            yield
        finally:
            with torch.no_grad():
                for (p, _), t in zip(pairs, saved, strict=True):
                    p.copy_(t)

    @torch.no_grad()
    def snapshot_logprobs(
        self, snapshot: dict[str, torch.Tensor], batch: dict[str, torch.Tensor]
    ) -> torch.Tensor:
        """``log pi_snapshot_k(y | x)`` for every head, shape ``(H, B)`` (the lagged reference)."""
        with self.swapped(snapshot):
            return self.logprobs(batch)

    # --------------------------------------------------------------------------------- generation
    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, head: int = 0, **kwargs: Any):
        """Decode with head ``head``, the user's primary objective (fig. `multiplepolicyheads`)."""
        if self.num_heads == 1:
            return self.lm.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        base = self.lm.get_base_model()
        old = base.get_output_embeddings()
        lin = nn.Linear(old.in_features, old.out_features, bias=False).to(self.heads[head].device)
        lin.weight = self.heads[head]
        base.set_output_embeddings(lin)
        try:
            return self.lm.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        finally:
            base.set_output_embeddings(old)

    # -------------------------------------------------------------------------------- checkpoints
    def save(self, path: str | Path) -> Path:
        """Save adapters (peft ``save_pretrained``) and heads; the base model is not copied."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.lm.save_pretrained(path / "adapter", selected_adapters=["default"])
        torch.save(
            {"num_heads": self.num_heads, "heads": [h.detach().cpu() for h in self.heads]}, path / "heads.pt"
        )
        return path

    @classmethod
    def load(cls, base_model: nn.Module, path: str | Path, is_trainable: bool = True) -> Policy:
        """Rebuild a policy from ``base_model`` and a directory written by :meth:`save`."""
        from peft import PeftModel

        path = Path(path)
        if not (path / "heads.pt").exists():
            raise ConfigError("checkpoint", str(path), "not a MOPO policy checkpoint (no heads.pt)")
        lm = PeftModel.from_pretrained(base_model, path / "adapter", is_trainable=is_trainable)
        state = torch.load(path / "heads.pt", map_location="cpu")
        pol = cls(lm, state["num_heads"])
        with torch.no_grad():
            for p, t in zip(pol.heads, state["heads"], strict=True):
                p.copy_(t)
        return pol


def lora_policy(base_model: nn.Module, peft_config: Any, num_heads: int = 1) -> Policy:
    """Wrap ``base_model`` with LoRA (``peft_config``: a ``peft.LoraConfig`` or a dict of its fields)."""
    from peft import LoraConfig, get_peft_model

    if isinstance(peft_config, dict):
        cfg = dict(peft_config)
        cfg.setdefault("task_type", "CAUSAL_LM")
        try:
            peft_config = LoraConfig(**cfg)
        except TypeError as exc:
            raise ConfigError("peft_config", cfg, str(exc)) from exc
    return Policy(get_peft_model(base_model, peft_config), num_heads)

"""Policies for MOPO on language models: LoRA policy, multi-head policy, reference and lagged reference.

* The policy is a causal LM wrapped by ``peft`` (LoRA on the backbone). The reference ``pi_ref`` of
  Eq. `main-obj` is the *same* module with its adapters disabled and the base output head, so no second
  copy of the model is held in memory. Adapters are disabled by flipping the flag that
  ``PeftModel.disable_adapter()`` sets on every tuner layer, on a list of those layers gathered once
  (:meth:`Policy.adapters_disabled`): peft's context manager walks the whole module tree twice and checks
  the adapter status on every call (~1.3 ms per no-grad pass on the tiny benchmark model, a few % of a step).
* The multi-head architecture of figure `multiplepolicyheads`: one shared (LoRA-adapted) backbone and one
  output matrix ``theta_k`` per objective (``K`` policies, parameter count ``m - dL + dKL``). Head ``k`` is
  the policy whose primary objective is ``k``; at inference the user picks ``primary`` and decoding uses
  ``theta_primary``. Heads start as copies of the base output head, so at step 0 every head equals the
  reference.
* The lagged reference ``pi_psi^(t - t0)`` of Algorithm `mopo` is a *snapshot of the trainable tensors*
  (adapter weights and heads, a few MB); its log-probabilities are computed by pointing the live
  parameters at the snapshot's tensors under ``torch.no_grad`` and back (:meth:`Policy.swapped`; no copy).
  For plain LoRA on float32/float64 weights the snapshot's adapters can also be merged into a copy of the
  adapted base weights once per lag update (:meth:`Policy.merge_snapshot`, what ``merge_and_unload`` does):
  the lagged pass then runs the base layers with those weights and the adapters disabled, as fast as a
  ``pi_ref`` pass (~35 % less than a LoRA pass on the tiny benchmark model). It costs one copy of the adapted
  weights, so the trainer does it only below a size limit (``MOPOLMConfig.merge_lagged_mb``).
* Sequence log-probabilities apply the output head to the response positions only (``response_pos`` of
  :func:`bayescrl.mopo.lm.data.collate`) and reduce in float32 there: no ``(B, T, V)`` logits, let alone a
  float32 copy of them, for prompt and padding positions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bayescrl.utils import ConfigError
from bayescrl.utils.io import load_json
from bayescrl.utils.safe_state import load_state, save_state


def check_model_dir(path: str | Path) -> Path:
    """``path`` if it is a local Hugging Face model directory (with config.json); nothing is downloaded."""
    path = Path(path).expanduser()
    if not path.is_dir() or not (path / "config.json").is_file():
        why = "no such directory" if not path.exists() else "no config.json in it"
        raise ConfigError(
            "model.path",
            str(path),
            f"{why}: need a local Hugging Face model directory (nothing is downloaded)",
        )
    return path


def model_context(path: str | Path) -> int | None:
    """The context length (``n_positions`` / ``max_position_embeddings``) a local model's config.json
    declares (None when it declares none); a damaged config.json is named."""
    cfg = load_json(Path(path).expanduser() / "config.json", "model.path", kind=dict)
    for key in ("n_positions", "max_position_embeddings", "n_ctx"):
        if isinstance(cfg.get(key), int) and not isinstance(cfg.get(key), bool):
            return int(cfg[key])
    return None


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
        self._adapter_layers: list[nn.Module] | None = None

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

    def _seq_logprobs(
        self, h: torch.Tensor, batch: dict[str, torch.Tensor], heads: Sequence[int] | None, base: bool
    ) -> torch.Tensor:
        """Response log-probs from hidden states ``h`` ``(B, T, d)``: ``(H, B)``, or ``(B,)`` with the base
        head (``base=True``). With ``batch["response_pos"]`` only those positions go through the head (same
        values as :func:`sequence_logprobs` up to float rounding); without it, every position does."""
        pos = batch.get("response_pos")
        if pos is None:
            logits = self.base_head(h) if base else self._logits(h, heads)
            return sequence_logprobs(logits, batch["input_ids"], batch["response_mask"])
        b, t, d = h.shape
        hs = h.reshape(b * t, d).index_select(0, pos)  # (N, d): states that score response tokens
        if base:
            logits = self.base_head(hs)  # (N, V)
        elif self.num_heads == 1:
            logits = self.base_head(hs).unsqueeze(0)  # (1, N, V)
        else:
            idx = range(self.num_heads) if heads is None else heads
            w = torch.stack([self.heads[k] for k in idx])  # (H, V, d)
            logits = torch.einsum("nd,hvd->hnv", hs, w.to(hs.dtype))
        logits = logits.float()
        target = batch["input_ids"].reshape(-1).index_select(0, pos + 1).expand(logits.shape[:-1])
        tok = torch.gather(logits, -1, target.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
        # scatter back to (.., B, T) and sum per row: index_copy with distinct indices is deterministic on
        # every device (an index_add over rows would use atomics on CUDA)
        full = tok.new_zeros(*tok.shape[:-1], b * t).index_copy(-1, pos, tok)
        return full.view(*tok.shape[:-1], b, t).sum(-1)

    def logprobs(self, batch: dict[str, torch.Tensor], heads: Sequence[int] | None = None) -> torch.Tensor:
        """``log pi_k(y | x)`` for every head ``k`` (or the listed ones): shape ``(H, B)``."""
        return self._seq_logprobs(self._hidden(batch), batch, heads, base=False)

    @torch.no_grad()
    def reference_logprobs(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """``log pi_ref(y | x)``: adapters disabled, base output head; shape ``(B,)``."""
        with self.adapters_disabled():
            h = self._hidden(batch)
        return self._seq_logprobs(h, batch, None, base=True)

    def _tuner_layers(self) -> list[nn.Module]:
        """The peft layers whose ``_disable_adapters`` flag ``PeftModel.disable_adapter()`` sets (LoRA & co.),
        gathered once; empty for prompt-learning methods, which peft disables differently."""
        if self._adapter_layers is None:
            from peft.tuners.tuners_utils import BaseTunerLayer

            kinds: tuple[type, ...] = (BaseTunerLayer,)
            try:  # modules_to_save / trainable-token wrappers (peft >= 0.14)
                from peft.utils.other import AuxiliaryTrainingWrapper

                kinds = (BaseTunerLayer, AuxiliaryTrainingWrapper)
            except ImportError:  # pragma: no cover - older peft
                pass
            cfg = getattr(self.lm, "active_peft_config", None)
            flag_based = cfg is not None and not (
                getattr(cfg, "is_prompt_learning", False) or getattr(cfg, "is_adaption_prompt", False)
            )
            self._adapter_layers = (
                [m for m in self.lm.modules() if isinstance(m, kinds) and hasattr(m, "_disable_adapters")]
                if flag_based
                else []
            )
        return self._adapter_layers

    @contextlib.contextmanager
    def adapters_disabled(self) -> Iterator[None]:
        """Run the base model (``pi_ref``): what ``PeftModel.disable_adapter()`` does for LoRA-type adapters
        (set ``_disable_adapters`` on every tuner layer, restore the previous flags after), without peft's
        per-call module walks and status check. Gradients of the adapters are not toggled: use it for
        no-grad passes. Falls back to peft's context manager for prompt-learning adapters."""
        layers = self._tuner_layers()
        if not layers:
            with self.lm.disable_adapter():
                yield
            return
        flags = [m._disable_adapters for m in layers]
        for m in layers:
            m._disable_adapters = True
        try:
            yield
        finally:
            for m, f in zip(layers, flags, strict=True):
                m._disable_adapters = f

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
        """Temporarily point the live trainable parameters at ``snapshot``'s tensors (restored after).

        A pointer swap of ``Parameter.data``: nothing is copied (the old version cloned and copied every
        trainable tensor twice per pass, which for ``K`` output heads of a real vocabulary is hundreds of
        MB), and no second model is held. For no-grad passes only; the snapshot must not be modified inside.
        Tensors on another device or dtype (a snapshot loaded from a checkpoint) are converted first.
        (Measured alternatives on the tiny benchmark model: peft's mixed-adapter batches and one pass over a
        doubled batch with the adapter output masked on the reference rows were both slower than two plain
        passes. Not used: a second named peft adapter, whose ``set_adapter`` walks the modules at every
        switch.)
        """
        pairs = [(p, snapshot[n]) for n, p in self._trainable() if n in snapshot]
        if len(pairs) != len(snapshot):
            raise ConfigError(
                "snapshot", sorted(snapshot)[:3], "does not match the policy's trainable tensors"
            )
        for p, t in pairs:
            if t.shape != p.shape:
                raise ConfigError("snapshot", tuple(t.shape), f"parameter has shape {tuple(p.shape)}")
        saved = [p.data for p, _ in pairs]
        for p, t in pairs:
            p.data = t.to(device=p.device, dtype=p.dtype)
        try:
            yield
        finally:
            for (p, _), d in zip(pairs, saved, strict=True):
                p.data = d

    @torch.no_grad()
    def merge_snapshot(
        self, snapshot: dict[str, torch.Tensor], max_mb: float = float("inf")
    ) -> list[tuple[nn.Parameter, torch.Tensor]] | None:
        """The adapted base weights with ``snapshot``'s LoRA deltas merged in, ``[(base_weight, W + dW)]``,
        for :meth:`snapshot_logprobs`; ``None`` (use the plain swap) unless every tuner layer is a vanilla
        LoRA ``Linear`` with one active, unmerged adapter (no DoRA or other variant, no LoRA bias) on
        float32/float64 weights (merging into bf16 weights would round the small deltas away) and the copy
        takes at most ``max_mb`` MB. ``dW`` is peft's ``get_delta_weight``, as in ``merge_and_unload``."""
        if not max_mb > 0:
            return None
        from peft.tuners.lora.layer import Linear as LoraLinear

        layers, items, size = self._tuner_layers(), [], 0
        if not layers:
            return None
        for m in layers:
            if type(m) is not LoraLinear or m.merged or len(m.active_adapters) != 1:
                return None
            a = m.active_adapters[0]
            if a not in m.lora_A or a in m.lora_variant or m.lora_bias.get(a, False):
                return None
            w = m.get_base_layer().weight
            if w.dtype not in (torch.float32, torch.float64) or m.lora_A[a].weight.dtype != w.dtype:
                return None
            size += w.numel() * w.element_size()
            items.append((m, a, w))
        if size > max_mb * 2**20:
            return None
        with self.swapped(snapshot):
            return [(w, w + m.get_delta_weight(a)) for m, a, w in items]

    @torch.no_grad()
    def snapshot_logprobs(
        self,
        snapshot: dict[str, torch.Tensor],
        batch: dict[str, torch.Tensor],
        merged: list[tuple[nn.Parameter, torch.Tensor]] | None = None,
    ) -> torch.Tensor:
        """``log pi_snapshot_k(y | x)`` for every head, shape ``(H, B)`` (the lagged reference).

        ``merged`` (from :meth:`merge_snapshot` of the same snapshot): run the base layers with the merged
        weights and the adapters disabled instead of the LoRA layers (equal up to float rounding)."""
        with self.swapped(snapshot):
            if merged is None:
                return self.logprobs(batch)
            saved = [w.data for w, _ in merged]
            for w, m in merged:
                w.data = m
            try:
                with self.adapters_disabled():
                    return self.logprobs(batch)
            finally:
                for (w, _), d in zip(merged, saved, strict=True):
                    w.data = d

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
        save_state(
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
        state = load_state(path / "heads.pt", field="checkpoint")  # weights_only=True
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

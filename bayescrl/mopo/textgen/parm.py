r"""PARM (Lin et al. 2025): one preference-conditioned autoregressive reward model guiding a frozen base.

**Autoregressive reward model (ARM).** A causal LM ``pi_r`` whose sequence log-likelihood is the reward,
``r(x, y) = sum_t log pi_r(y_t | x, y_<t)`` (GenARM), trained with the Bradley–Terry loss
``-log sigmoid(beta_r [r(x, y_w) - r(x, y_l)])``.

**Preference conditioning (PBLoRA).** One ARM serves every weighting ``w`` on the simplex: the base model's
linear layers get a bilinear low-rank update ``Delta W(w) = (alpha / r) B M(w) A`` with
``M(w) = M_0 + sum_k w_k M_k`` (``A`` ``(r, in)``, ``B`` ``(out, r)``, ``M_k`` ``(r, r)``; ``B = 0`` and
``M_0 = I``, ``M_k = 0`` at the start, so the ARM starts as the base model). This is PARM's
preference-aware bilinear LoRA with the preference-dependent block linear in ``w``
(:class:`PBLoRALinear`). Training draws ``w ~ Dirichlet(1)`` per step and minimises the weighted sum of the
objectives' Bradley–Terry losses ``sum_k w_k L_k(theta(w))`` (:func:`train`).

**Guided decoding.** The base model stays frozen; at each step the next-token scores are
``log pi_base(. | x, y_<t) + (1 / beta) log pi_r(. | x, y_<t; w)`` and the token is sampled from their
softmax (:func:`guided_scores`, :func:`guided_generate`). With ``guidance: mixture`` the reward term is
``(1 / beta) sum_k w_k log pi_r(. | x, y_<t; e_k)`` -- the weighted sum of the per-objective ARMs (the
vertices of the same model), GenARM's multi-objective rule; ``parm`` (default) evaluates the one ARM at ``w``.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bayescrl.mopo.lm.data import PreferenceData, collate, tokenize
from bayescrl.mopo.lm.model import sequence_logprobs
from bayescrl.utils import ConfigError

GUIDANCE = ("parm", "mixture")


class _Pref:
    """The weighting every :class:`PBLoRALinear` of one model reads (shared holder)."""

    def __init__(self, k: int):
        self.w = torch.full((k,), 1.0 / k, device="cpu")


class PBLoRALinear(nn.Module):
    """``y = base(x) + (alpha / r) x A^T M(w)^T B^T`` with ``M(w) = M_0 + sum_k w_k M_k`` (module docstring).

    Wraps an ``nn.Linear`` or a GPT-2 ``Conv1D`` (weight ``(in, out)``); the base layer is frozen."""

    def __init__(self, base: nn.Module, pref: _Pref, k: int, r: int, alpha: float):
        super().__init__()
        if isinstance(base, nn.Linear):
            n_in, n_out = base.in_features, base.out_features
        elif type(base).__name__ == "Conv1D":
            n_in, n_out = base.weight.shape
        else:
            raise ConfigError("parm.target_modules", type(base).__name__, "only Linear / Conv1D layers")
        self.base, self.pref, self.scale = base, pref, alpha / r
        for p in base.parameters():
            p.requires_grad_(False)
        w = base.weight
        self.A = nn.Parameter(torch.empty(r, n_in, dtype=w.dtype, device=w.device))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
        self.B = nn.Parameter(torch.zeros(n_out, r, dtype=w.dtype, device=w.device))
        self.M0 = nn.Parameter(torch.eye(r, dtype=w.dtype, device=w.device))
        self.Mk = nn.Parameter(torch.zeros(k, r, r, dtype=w.dtype, device=w.device))

    def core(self) -> torch.Tensor:
        w = self.pref.w.to(self.Mk)
        return self.M0 + torch.einsum("k,kij->ij", w, self.Mk)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.scale * (x @ self.A.T @ self.core().T @ self.B.T)


def add_pblora(model: nn.Module, k: int, r: int, alpha: float, targets: Sequence[str]) -> _Pref:
    """Replace every linear layer whose name ends with one of ``targets`` by a :class:`PBLoRALinear`;
    freeze everything else. Returns the shared weighting holder."""
    pref = _Pref(k)
    for p in model.parameters():
        p.requires_grad_(False)
    names = [n for n, m in model.named_modules() if n and n.split(".")[-1] in targets]
    if not names:
        raise ConfigError("parm.target_modules", list(targets), "no layer of the model has such a name")
    for name in names:
        parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
        child = name.rsplit(".", 1)[-1]
        setattr(parent, child, PBLoRALinear(getattr(parent, child), pref, k, r, alpha))
    return pref


def default_targets(model: nn.Module) -> list[str]:
    """GPT-2's ``c_attn``/``c_proj``/``c_fc``; else the attention projections ``q_proj``/``v_proj``."""
    leaf = {n.split(".")[-1] for n, _ in model.named_modules()}
    if "c_attn" in leaf:
        return ["c_attn", "c_proj", "c_fc"]
    return [t for t in ("q_proj", "v_proj") if t in leaf]


class ARM(nn.Module):
    """A preference-conditioned autoregressive reward model: a copy of the base with PBLoRA layers."""

    def __init__(self, base: nn.Module, k: int, r: int = 8, alpha: float = 16.0, targets=None):
        super().__init__()
        self.lm = copy.deepcopy(base)
        self.k = k
        self.pref = add_pblora(self.lm, k, r, alpha, targets or default_targets(self.lm))

    @contextlib.contextmanager
    def weighting(self, w: Sequence[float] | torch.Tensor) -> Iterator[None]:
        old = self.pref.w
        self.pref.w = torch.as_tensor(w, dtype=torch.float32, device="cpu")
        try:
            yield
        finally:
            self.pref.w = old

    def forward(self, input_ids, attention_mask, position_ids=None):
        return self.lm(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids).logits

    def sequence_logprobs(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """``r(x, y) = log pi_r(y | x)`` of every row of a collated batch ``(B,)``."""
        logits = self(batch["input_ids"], batch["attention_mask"])
        return sequence_logprobs(logits, batch["input_ids"], batch["response_mask"])


def train(
    arm: ARM,
    tokenizer: Any,
    data: PreferenceData,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    max_length: int,
    beta_r: float = 1.0,
) -> list[float]:
    """PARM's objective: ``w ~ Dirichlet(1)``, loss ``sum_k w_k BT_k`` on a mini-batch of records."""
    tok = tokenize(data, tokenizer, max_length)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    params = [p for p in arm.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr)
    gen = torch.Generator().manual_seed(seed)
    dirichlet = torch.distributions.Dirichlet(torch.ones(arm.k, device="cpu"))
    device = next(arm.parameters()).device
    sign = (2 * data.prefs - 1).double()  # +1: a preferred under objective k
    arm.train()
    losses = []
    for _ in range(steps):
        idx = torch.randint(len(data), (batch_size,), generator=gen).tolist()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(torch.randint(2**31 - 1, (1,), generator=gen)))
            w = dirichlet.sample()
        b = collate(
            [tok.prompt_ids[i] for i in idx] * 2,
            [tok.a_ids[i] for i in idx] + [tok.b_ids[i] for i in idx],
            pad,
            device,
        )
        with arm.weighting(w):
            r = arm.sequence_logprobs(b).double()
        m = len(idx)
        margin = beta_r * (r[:m] - r[m:]).unsqueeze(1) * sign[idx].to(r.device)  # (m, K)
        loss = (-(F.logsigmoid(margin)).mean(0) * w.to(margin)).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(loss.item())
    arm.eval()
    if not all(math.isfinite(v) for v in losses):
        raise ConfigError("parm.lr", lr, "PARM's reward-model loss is not finite: lower parm.lr")
    return losses


def guided_scores(
    base_logits: torch.Tensor,
    rm_logits: torch.Tensor,
    weights: Sequence[float] | torch.Tensor | None = None,
    beta: float = 1.0,
) -> torch.Tensor:
    """Next-token scores ``log pi_base + (1 / beta) sum_k w_k log pi_r_k`` (``(..., V)``).

    ``rm_logits`` is ``(..., V)`` (one reward model, PARM at a weighting: ``weights`` unused) or
    ``(K, ..., V)`` with ``weights`` ``(K,)`` (a weighted sum over K reward models). Log-probabilities are
    ``log_softmax`` of the logits; the scores are unnormalised (sample from their softmax)."""
    if not beta > 0:
        raise ConfigError("parm.beta", beta, "must be > 0")
    base = F.log_softmax(base_logits.float(), dim=-1)
    rm = F.log_softmax(rm_logits.float(), dim=-1)
    if weights is not None:
        w = torch.as_tensor(weights, dtype=rm.dtype, device=rm.device)
        if w.shape != (rm.shape[0],):
            raise ConfigError("weights", w.tolist(), f"need {rm.shape[0]} weights, one per reward model")
        rm = torch.einsum("k,k...->...", w, rm)
    return base + rm / beta


@torch.no_grad()
def next_token_scores(
    base: nn.Module,
    arm: ARM,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    w: Sequence[float],
    beta: float = 1.0,
    guidance: str = "parm",
) -> torch.Tensor:
    """Guided scores ``(B, V)`` of the next token after left-padded ``input_ids`` (positions counted from
    each row's first real token, as ``generate`` does): ``parm`` uses the ARM at ``w``, ``mixture`` the
    ARM at every vertex ``e_k`` weighted by ``w_k`` (:func:`guided_scores`)."""
    pos = (attention_mask.cumsum(-1) - 1).clamp_min(0)
    bl = base(input_ids=input_ids, attention_mask=attention_mask, position_ids=pos).logits[:, -1]
    if guidance == "parm":
        with arm.weighting(w):
            return guided_scores(bl, arm(input_ids, attention_mask, pos)[:, -1], None, beta)
    rls = []
    for v in torch.eye(arm.k, device="cpu"):
        with arm.weighting(v):
            rls.append(arm(input_ids, attention_mask, pos)[:, -1])
    return guided_scores(bl, torch.stack(rls), w, beta)


@torch.no_grad()
def guided_generate(
    base: nn.Module,
    arm: ARM,
    tokenizer: Any,
    prompts: Sequence[str],
    w: Sequence[float],
    beta: float = 1.0,
    guidance: str = "parm",
    max_new_tokens: int = 32,
    seed: int = 0,
    temperature: float = 1.0,
    batch_size: int = 64,
) -> list[str]:
    """Sample from ``softmax(guided_scores / temperature)`` token by token (left-padded batches, no cache:
    both models re-read the whole prefix at every step, which keeps them exactly aligned)."""
    if guidance not in GUIDANCE:
        raise ConfigError("parm.guidance", guidance, f"must be one of {', '.join(GUIDANCE)}")
    gen = torch.Generator().manual_seed(seed)
    device = next(base.parameters()).device
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    pad = eos if pad is None else pad
    base.eval()
    arm.eval()
    out: list[str] = []
    for s in range(0, len(prompts), batch_size):
        ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts[s : s + batch_size]]
        width = max(len(i) for i in ids)
        x = torch.tensor([[pad] * (width - len(i)) + i for i in ids], device=device)
        mask = torch.tensor([[0] * (width - len(i)) + [1] * len(i) for i in ids], device=device)
        done = torch.zeros(len(ids), dtype=torch.bool, device=device)
        new: list[torch.Tensor] = []
        for _ in range(max_new_tokens):
            scores = next_token_scores(base, arm, x, mask, w, beta, guidance)
            probs = torch.softmax(scores / temperature, dim=-1).cpu()
            nxt = torch.multinomial(probs, 1, generator=gen).squeeze(1).to(device)
            nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
            new.append(nxt)
            done |= nxt == eos
            x = torch.cat([x, nxt[:, None]], 1)
            mask = torch.cat([mask, (~done | (nxt == eos)).long()[:, None]], 1)
            if bool(done.all()):
                break
        seqs = torch.stack(new, 1).tolist()
        for row in seqs:
            if eos in row:
                row = row[: row.index(eos)]
            out.append(" ".join(tokenizer.decode(row, skip_special_tokens=True).split()))
    return out

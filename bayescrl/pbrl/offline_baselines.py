"""Offline baselines DPO (Rafailov et al. 2023) and IPO (Azar et al. 2023) trained on D0 only.

As in the thesis' appendix (section `Appendix` of chapter `PSPL`): a policy MLP with two hidden layers of
64 ReLU units (Xavier initialisation), dropout 0.1 on the trunk, an action-logit head, Adam with learning
rate 3e-4. The policy is non-stationary: its input is the one-hot state concatenated with h/H. Losses, for
winner τ_w and loser τ_l with ``h_π = log π(τ_w)/π_ref(τ_w) − log π(τ_l)/π_ref(τ_l)`` and
``log π(τ) = Σ_h log π(a_h | s_h, h)``:

* DPO: ``−log σ(τ_reg · h_π)``;
* IPO: ``(h_π − 1/(2 τ_reg))²``.

``π_ref`` is D0's behaviour policy (known to the simulator). One independent network per seed, trained
together with batched weights ``[B, ...]``. Implementation note: inputs are tabular, so each step
evaluates the network once on the S·H distinct inputs (one dropout mask per (s, h) row) and gathers
trajectory log-likelihoods from that table — the same loss as per-sample evaluation at a fraction of the
cost. The output policy is greedy in the network's logits (eval mode); it is scored exactly by value
iteration on the true MDP. With one generator per seed (:func:`~bayescrl.utils.seeding.run_generators`)
seed ``b``'s initialisation, dropout masks and mini-batches come from its own stream.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from bayescrl.pbrl.data import TrajectoryPairs
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.seeding import draw, randint

if TYPE_CHECKING:
    from bayescrl.utils.seeding import Streams

LOSSES = ("dpo", "ipo")


class BatchedMLP(torch.nn.Module):
    """``B`` independent MLPs ``in → 64 → 64 → out`` (ReLU, dropout on the trunk), evaluated with bmm."""

    def __init__(
        self, B: int, n_in: int, n_out: int, hidden: int = 64, dropout: float = 0.1, *, generator=None
    ):
        super().__init__()
        sizes = [n_in, hidden, hidden, n_out]
        self.weights = torch.nn.ParameterList()
        self.biases = torch.nn.ParameterList()
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
            bound = math.sqrt(6.0 / (fan_in + fan_out))  # Xavier uniform
            u = draw(
                torch.rand, (B, fan_in, fan_out), generator, dtype=torch.get_default_dtype(), device="cpu"
            )
            w = (u * 2 - 1) * bound
            self.weights.append(torch.nn.Parameter(w))
            self.biases.append(
                torch.nn.Parameter(torch.zeros(B, 1, fan_out, device="cpu"))
            )  # .to(device) later
        self.dropout = dropout

    def forward(self, x: Tensor, *, generator=None) -> Tensor:
        """``x [B, n, in]`` -> ``[B, n, out]``."""
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            x = torch.baddbmm(b, x, w)
            if i < len(self.weights) - 1:
                x = torch.relu(x)
                if self.training and self.dropout > 0:
                    keep = (
                        draw(torch.rand, x.shape, generator, dtype=x.dtype, device=x.device) >= self.dropout
                    )
                    x = x * keep / (1 - self.dropout)
        return x


def _inputs(S: int, H: int, B: int, device=None) -> Tensor:
    """Rows (h, s) in h-major order: one-hot(s) ⊕ h/H, shape ``[B, H·S, S+1]``."""
    eye = torch.eye(S, device=device)
    hs = torch.arange(H, dtype=torch.float32, device=device).repeat_interleave(S).unsqueeze(-1) / H
    x = torch.cat([eye.repeat(H, 1), hs], -1)
    return x.expand(B, -1, -1)


def _traj_logp(table: Tensor, states: Tensor, actions: Tensor) -> Tensor:
    """``table [B, H, S, A]`` log-probs, ``states [B, N, H+1]``, ``actions [B, N, H]`` -> ``[B, N]``."""
    B, H, S, A = table.shape
    N = actions.shape[1]
    h = torch.arange(H, device=table.device).expand(B, N, H)
    flat = table.reshape(B, -1)
    idx = ((h * S + states[..., :H]) * A + actions).reshape(B, -1)
    return flat.gather(1, idx).reshape(B, N, H).sum(-1)


def _rows(t: Tensor, idx: Tensor) -> Tensor:
    """Select rows ``idx [B, n]`` of ``t [B, N, L]``."""
    return t.gather(1, idx.unsqueeze(-1).expand(-1, -1, t.shape[-1]))


def _check_options(loss: str, tau: float, steps: int, batch_size: int) -> None:
    """Refuse an unknown loss, τ <= 0, steps < 0 or batch_size < 1."""
    if loss not in LOSSES:
        raise ConfigError("agents.loss", loss, f"choose one of {list(LOSSES)}")
    if not tau > 0:
        raise ConfigError("agents.tau", tau, "regularisation strength must be > 0")
    if steps < 0 or batch_size < 1:
        raise ConfigError("agents.steps", (steps, batch_size), "steps >= 0 and batch_size >= 1 required")


def _winners_losers(data: TrajectoryPairs) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """States ``[B, N, H+1]`` and actions ``[B, N, H]`` of the preferred and of the other trajectory of
    every pair: ``(s_w, a_w, s_l, a_l)``."""
    B, N = data.y.shape
    H = data.actions.shape[-1]
    win = data.y  # index of the preferred trajectory
    sw = data.states.gather(2, win.view(B, N, 1, 1).expand(-1, -1, 1, H + 1)).squeeze(2)
    aw = data.actions.gather(2, win.view(B, N, 1, 1).expand(-1, -1, 1, H)).squeeze(2)
    sl = data.states.gather(2, (1 - win).view(B, N, 1, 1).expand(-1, -1, 1, H + 1)).squeeze(2)
    al = data.actions.gather(2, (1 - win).view(B, N, 1, 1).expand(-1, -1, 1, H)).squeeze(2)
    return sw, aw, sl, al


def _preference_loss(h_pi: Tensor, loss: str, tau: float) -> Tensor:
    """Per-pair loss of the log-ratio margin h_π: DPO −log σ(τ h_π), IPO (h_π − 1/(2τ))²."""
    if loss == "dpo":
        return -torch.nn.functional.logsigmoid(tau * h_pi)
    return (h_pi - 1.0 / (2.0 * tau)) ** 2


def train_offline_policy(
    data: TrajectoryPairs,
    ref_policy: Tensor,
    S: int,
    A: int,
    *,
    loss: str = "dpo",
    tau: float = 0.1,
    steps: int = 500,
    lr: float = 3e-4,
    batch_size: int = 256,
    dropout: float = 0.1,
    generator: Streams = None,
) -> Tensor:
    """Train one DPO/IPO policy per seed on D0 and return the greedy policy ``long [B, H, S]``.

    ``ref_policy [H, S, A]`` is π_ref (D0's behaviour policy). With ``N = 0`` the untrained (random
    initialisation) network's greedy policy is returned.
    """
    _check_options(loss, tau, steps, batch_size)
    B, N = data.y.shape
    H = data.actions.shape[-1]
    dev = data.y.device
    net = BatchedMLP(B, S + 1, A, dropout=dropout, generator=generator).to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    x = _inputs(S, H, B, device=dev)
    ref_table = torch.log(ref_policy.clamp_min(1e-12)).float().expand(B, -1, -1, -1)
    sw, aw, sl, al = _winners_losers(data)
    ref_margin = _traj_logp(ref_table, sw, aw) - _traj_logp(ref_table, sl, al) if N else None
    net.train()
    for _ in range(steps if N else 0):
        idx = randint(N, (B, min(batch_size, N)), generator, device=dev)
        table = torch.log_softmax(net(x, generator=generator), -1).reshape(B, H, S, A)
        win_lp = _traj_logp(table, _rows(sw, idx), _rows(aw, idx))
        h_pi = win_lp - _traj_logp(table, _rows(sl, idx), _rows(al, idx)) - ref_margin.gather(1, idx)
        obj = _preference_loss(h_pi, loss, tau)
        opt.zero_grad()
        obj.mean(-1).sum().backward()  # seeds are independent: sum of per-seed means
        opt.step()
    net.eval()
    with torch.no_grad():
        logits = net(x).reshape(B, H, S, A)
    return logits.argmax(-1)

"""Which pairs of segments to ask the raters about.

Given candidate segments with embeddings Φ (K, d) and S posterior draws θ_s (S, d), with
p_s(i, j) = sigmoid(β⟨θ_s, Φ_i − Φ_j⟩) the predicted probability that i is preferred under draw s:

* ``uniform``: random pairs;
* ``disagreement``: the pairs with the largest variance of p_s over draws (the rule of the `imitation`
  library's preference comparisons, there over an ensemble);
* ``bald``: the pairs with the largest mutual information between the label and θ,
  H(E_s p_s) − E_s H(p_s) (Houlsby et al., 2011);
* ``top-two``: top-two posterior sampling (the PSPL / DPS idea of chapter `PSPL`): one draw's best segment
  against another draw's best, the buffer's segments standing in for the policies the draws would be
  greedy for (a departure from the thesis, which plans a policy per draw: with a deep policy planning per
  draw is one training run per query).

All rules are vectorised over candidates and draws.
"""

from __future__ import annotations

import torch

RULES = ("uniform", "disagreement", "bald", "top-two")


def _entropy(p: torch.Tensor) -> torch.Tensor:
    p = p.clamp(1e-12, 1 - 1e-12)
    return -(p * p.log() + (1 - p) * (1 - p).log())


def random_pairs(k: int, n: int, gen: torch.Generator) -> torch.Tensor:
    """``n`` pairs (i, j), i ≠ j, drawn uniformly from ``range(k)``: shape (n, 2)."""
    i = torch.randint(k, (n,), generator=gen)
    j = (i + 1 + torch.randint(k - 1, (n,), generator=gen)) % k
    return torch.stack([i, j], 1)


def pair_scores(rule: str, phi: torch.Tensor, pairs: torch.Tensor, theta: torch.Tensor, beta: float = 1.0):
    """Score of each candidate pair under ``rule`` (higher is asked first)."""
    delta = phi[pairs[:, 0]] - phi[pairs[:, 1]]  # (P, d)
    p = torch.sigmoid(beta * (delta @ theta.T))  # (P, S)
    if rule == "disagreement":
        return p.var(1)
    if rule == "bald":
        return _entropy(p.mean(1)) - _entropy(p).mean(1)
    raise ValueError(rule)


def select_pairs(
    rule: str,
    phi: torch.Tensor,
    theta: torch.Tensor,
    n_pairs: int,
    gen: torch.Generator,
    *,
    beta: float = 1.0,
    candidates: int = 1000,
) -> torch.Tensor:
    """``n_pairs`` distinct pairs of row indices of ``phi`` (K, d) to query, shape (n_pairs, 2)."""
    K = phi.shape[0]
    if rule == "top-two":
        return _top_two(phi, theta, n_pairs, gen)
    cand = random_pairs(K, max(candidates, n_pairs), gen)
    if rule == "uniform":
        return cand[:n_pairs]
    order = torch.argsort(pair_scores(rule, phi, cand, theta, beta), descending=True)
    return cand[order[:n_pairs]]


def _top_two(phi: torch.Tensor, theta: torch.Tensor, n_pairs: int, gen: torch.Generator) -> torch.Tensor:
    """Pair k: argmax_i ⟨θ_a, Φ_i⟩ against argmax_i ⟨θ_b, Φ_i⟩ for two draws a ≠ b; when both draws pick the
    same segment (the posterior is sure), the challenger is the best segment other than the leader under
    draw b, so no pair compares a segment with itself."""
    S = theta.shape[0]
    a = torch.randint(S, (n_pairs,), generator=gen)
    b = (a + 1 + torch.randint(max(S - 1, 1), (n_pairs,), generator=gen)) % max(S, 2) if S > 1 else a
    scores = theta @ phi.T  # (S, K)
    lead = scores[a].argmax(1)
    sb = scores[b].clone()
    sb[torch.arange(n_pairs), lead] = -torch.inf
    chal = sb.argmax(1)
    return torch.stack([lead, chal], 1)

"""Which pairs of segments to ask the raters about.

Given K candidate segments and their predicted returns R_s(k) under S posterior draws (R_s(k) = ⟨θ_s, Φ_k⟩
for the linear model, member s's return for an ensemble), with p_s(i, j) = sigmoid(β (R_s(i) − R_s(j))) the
predicted probability that i is preferred under draw s:

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


def pair_scores(rule: str, returns: torch.Tensor, pairs: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """Score of each candidate pair under ``rule`` (higher is asked first); ``returns (S, K)``."""
    p = torch.sigmoid(beta * (returns[:, pairs[:, 0]] - returns[:, pairs[:, 1]])).T  # (P, S)
    if rule == "disagreement":
        return p.var(1)
    if rule == "bald":
        return _entropy(p.mean(1)) - _entropy(p).mean(1)
    raise ValueError(rule)


def select_pairs(
    rule: str,
    returns: torch.Tensor,
    n_pairs: int,
    gen: torch.Generator,
    *,
    beta: float = 1.0,
    candidates: int = 1000,
) -> torch.Tensor:
    """``n_pairs`` pairs of candidate segments to query, shape (n_pairs, 2).

    ``returns (S, K)`` holds the predicted return of each of the K candidate segments under each of S
    posterior draws (⟨θ_s, Φ_k⟩ for the linear model, the members' returns for an ensemble)."""
    K = returns.shape[1]
    if rule == "top-two":
        return _top_two(returns, n_pairs, gen)
    cand = random_pairs(K, max(candidates, n_pairs), gen).to(returns.device)
    if rule == "uniform":
        return cand[:n_pairs].cpu()
    order = torch.argsort(pair_scores(rule, returns, cand, beta), descending=True)
    return cand[order[:n_pairs]].cpu()


def _top_two(scores: torch.Tensor, n_pairs: int, gen: torch.Generator) -> torch.Tensor:
    """Pair k: the best segment under draw a against the best under draw b ≠ a; when both draws pick the
    same segment (the posterior is sure), the challenger is the best segment other than the leader under
    draw b, so no pair compares a segment with itself."""
    S = scores.shape[0]
    a = torch.randint(S, (n_pairs,), generator=gen).to(scores.device)
    b = (
        (a + 1 + torch.randint(max(S - 1, 1), (n_pairs,), generator=gen).to(a.device)) % max(S, 2)
        if S > 1
        else a
    )
    lead = scores[a].argmax(1)
    sb = scores[b].clone()
    sb[torch.arange(n_pairs, device=scores.device), lead] = -torch.inf
    chal = sb.argmax(1)
    return torch.stack([lead, chal], 1).cpu()

r"""Preference data from the base model's own samples, labelled by rater-competence Bradley–Terry raters.

For every training prompt the base model samples ``n`` answers; consecutive answers form pairs ``(a, b)``.
Objective ``k``'s utility of an answer is its proxy score standardised over the data,
``u_k(y) = (s_k(y) - mean_k) / sd_k``. Rater ``i`` (records are dealt to the raters in turn) holds the
belief ``vartheta_i(y) = u_k(y) + xi``, ``xi ~ N(0, 1 / lam_i^2)`` per answer, and labels
``P(a > b) = sigmoid(beta_i (vartheta_i(a) - vartheta_i(b)))`` -- Eq. `rater_preference_dist` with one-hot
items (the model :mod:`bayescrl.mopo.preferences` fits with ``preference_model: bradley-terry``). One
0/1 label per objective, so the data set is MOPO's multi-objective preference data; its ``rater`` column
lets a Bayesian fit infer the raters' competence.

:func:`disagreement` measures how often the two objectives prefer different answers of a pair (on the
noise-free scores and on the labels): with no disagreement there is no trade-off to resolve.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from bayescrl.mopo.lm.data import PreferenceData, validate_records
from bayescrl.raters import parse_raters as parse_rater_list
from bayescrl.utils import ConfigError

DEFAULT_RATERS = ({"id": "r0", "beta": 4.0, "lam": 1000.0},)


def parse_raters(raters: Any) -> list[dict[str, Any]]:
    """Validate ``labels.raters`` with the raters' schema (:func:`bayescrl.raters.parse_raters`): a list of
    ``{id, beta, lam}`` (defaults ``beta: 4``, ``lam: 1000``, ``id: r<i>``), as plain mappings."""
    if raters is None:
        return [dict(r) for r in DEFAULT_RATERS]
    parsed = parse_rater_list(
        raters,
        "labels.raters",
        keys=("id", "beta", "lam"),
        defaults={"beta": 4.0, "lam": 1000.0},
        priors=False,
    )
    return [{"id": r.id, "beta": r.beta, "lam": r.lam} for r in parsed]


def label_pairs(
    prompts: Sequence[str],
    responses: Sequence[str],
    scores: torch.Tensor,
    names: Sequence[str],
    raters: Sequence[Mapping[str, Any]],
    seed: int,
) -> tuple[PreferenceData, dict[str, Any]]:
    """Pair consecutive samples of the same prompt and label them (module docstring).

    ``scores`` ``(n, K)`` are the proxies of ``responses``; pairs with an empty answer are skipped.
    Returns the data and a summary (standardisation, disagreement fractions)."""
    s = torch.as_tensor(scores, dtype=torch.float64, device="cpu")
    mean, sd = s.mean(0), s.std(0).clamp_min(1e-8)
    u = (s - mean) / sd
    gen = torch.Generator().manual_seed(seed)
    recs, raters_col, idx = [], [], []
    for i in range(0, len(responses) - 1, 2):
        j = i + 1
        if prompts[i] != prompts[j] or not responses[i].strip() or not responses[j].strip():
            continue
        r = raters[len(recs) % len(raters)]
        noise = torch.randn(2, s.shape[1], generator=gen, dtype=torch.float64) / r["lam"]
        z = r["beta"] * ((u[i] + noise[0]) - (u[j] + noise[1]))
        prefs = (torch.rand(s.shape[1], generator=gen, dtype=torch.float64) < torch.sigmoid(z)).long()
        recs.append(
            {
                "prompt": prompts[i],
                "response_a": responses[i],
                "response_b": responses[j],
                "prefs": prefs.tolist(),
            }
        )
        raters_col.append(r["id"])
        idx.append((i, j))
    if not recs:
        raise ConfigError("task", len(responses), "no pair of non-empty sampled answers to label")
    data = validate_records(recs, s.shape[1], tuple(names), source="samples")
    data = PreferenceData(
        data.prompts, data.responses_a, data.responses_b, data.prefs, data.names, tuple(raters_col)
    )
    ia = torch.tensor([a for a, _ in idx], device="cpu")
    ib = torch.tensor([b for _, b in idx], device="cpu")
    return data, {
        "records": len(data),
        "score_mean": mean.tolist(),
        "score_sd": sd.tolist(),
        **disagreement(s[ia], s[ib], data.prefs),
    }


def disagreement(sa: torch.Tensor, sb: torch.Tensor, prefs: torch.Tensor | None = None) -> dict[str, float]:
    """How often objectives 0 and 1 prefer different answers of a pair.

    ``score_disagreement``: among pairs where both objectives' scores differ, the fraction where their signs
    differ; ``score_ties``: fraction of pairs tied on some objective; ``label_disagreement``: fraction of
    records whose two labels differ."""
    d = torch.sign(torch.as_tensor(sa, device="cpu") - torch.as_tensor(sb, device="cpu"))
    strict = (d[:, 0] != 0) & (d[:, 1] != 0)
    out = {
        "score_disagreement": float((d[strict, 0] != d[strict, 1]).double().mean()) if strict.any() else 0.0,
        "score_ties": float((~strict).double().mean()),
    }
    if prefs is not None:
        out["label_disagreement"] = float((prefs[:, 0] != prefs[:, 1]).double().mean())
    return out

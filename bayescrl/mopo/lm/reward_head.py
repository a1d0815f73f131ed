r"""Bayesian preference estimates for the language-model path: a linear Bradley–Terry reward head.

``preference_model: bradley-terry`` in a ``bayescrl mopo`` run on your own data
(:mod:`bayescrl.mopo.lm.user`). The tabular model of :mod:`bayescrl.mopo.preferences` with one-hot items
becomes, for prompt-response pairs, a linear reward ``r_k(x, y) = theta_k . phi(x, y)`` on fixed features:

* ``phi(x, y)``: the frozen base model's last hidden state, mean-pooled over the tokens of prompt + response
  (:func:`response_features`), centred over the data set's responses and projected on its first
  ``feature_dim`` principal components, each scaled to unit variance (:func:`whiten`); the prior
  ``theta_k ~ N(0, prior_scale^2 / d I)`` then gives each response's reward a prior sd of about
  ``prior_scale``, the tabular prior on utilities.
* Per objective ``k``, the rater-competence Bradley–Terry likelihood of :mod:`bayescrl.models` (Eq.
  `rater_preference_dist`, rater ``i`` labels with ``sigmoid(beta_i (r_k(x, a) - r_k(x, b)))``), fitted by any
  :mod:`bayescrl.inference` engine through :func:`bayescrl.mopo.preferences.fit_bt_rewards` (the same code
  as the tabular fit); competence known (``raters: [{id, beta}]``) or inferred (``competence: infer |
  joint``), so a careless rater's labels count for less.
* The preference MOPO needs for a response ``y`` of prompt ``x`` is ``p_k(y) = E_{y' ~ pi_ref(.|x)}
  P_k(y > y')`` with ``pi_ref`` the data's responses to ``x`` (the reference policy defaults to the data's
  frequency, as in the tabular case; a response identical to ``y`` is left out, the tie term of the tabular
  estimator). With one pair per prompt, ``p_k(a) = P_k(a > b)``: the record's 0/1 label becomes a
  posterior probability. Posterior draws of ``theta_k`` give draws of ``p_k``; MOPO uses their mean
  (:func:`atom_preferences`) in place of the labels (the augmented atoms ``[a ; b]`` of
  :mod:`bayescrl.mopo.lm.dual`), and with ``lower_quantile`` that lower posterior quantile for the constrained
  objectives, so a constraint tightens where the evidence is thin.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from bayescrl.mopo.lm.data import PreferenceData, collate, tokenize
from bayescrl.mopo.preferences import PREFERENCE_MODELS, fit_bt_rewards, parse_bt_options, parse_raters
from bayescrl.raters import Rater, check_rater_ids
from bayescrl.utils import ConfigError, DataError

#: LM-only keys of the ``bradley_terry`` section
LM_KEYS = ("feature_dim", "feature_batch")
DEFAULT_FEATURE_DIM = 16


@dataclass
class LMPreferenceSpec:
    """Validated preference settings of an LM run (``preference_model``, raters, ``bradley_terry``)."""

    model: str
    raters: list[Rater]
    rater_index: Tensor  # [N] index into raters per record
    options: dict[str, Any]
    feature_dim: int
    feature_batch: int


@dataclass
class LMPreferences:
    """Per-atom preference probabilities ``[2N, K]`` (rows ``a_0..a_{N-1}, b_0..b_{N-1}``): posterior mean,
    the values used for the constraints (``constraint``: the mean or a lower quantile), the 90 % interval,
    and the fit's competence and diagnostics."""

    mean: Tensor
    constraint: Tensor
    q05: Tensor
    q95: Tensor
    beta: dict[str, list[float]]
    diagnostics: dict[str, Any]
    feature_dim: int


@dataclass
class LMPreferenceSettings:
    """The preference settings of an LM run checked without the data (:func:`preference_settings`)."""

    model: str
    raters: list[Rater]
    options: dict[str, Any]
    feature_dim: int
    feature_batch: int


def preference_settings(config: Mapping[str, Any]) -> LMPreferenceSettings:
    """Check ``preference_model``, ``raters`` and ``bradley_terry`` (every key and value) of an LM config;
    the checks against the data's raters are :func:`bind_preferences`'."""
    model = config.get("preference_model", "empirical")
    if model not in PREFERENCE_MODELS:
        raise ConfigError("preference_model", model, f"must be one of {list(PREFERENCE_MODELS)}")
    raters = parse_raters(config.get("raters"))
    if not isinstance(config.get("bradley_terry") or {}, Mapping):
        raise ConfigError("bradley_terry", config.get("bradley_terry"), "must be a mapping")
    opts = dict(config.get("bradley_terry") or {})
    lm_opts = {k: opts.pop(k) for k in LM_KEYS if k in opts}
    parsed = parse_bt_options(opts)
    dim = lm_opts.get("feature_dim", DEFAULT_FEATURE_DIM)
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ConfigError("bradley_terry.feature_dim", dim, "must be an integer >= 1")
    fb = lm_opts.get("feature_batch", 16)
    if isinstance(fb, bool) or not isinstance(fb, int) or fb < 1:
        raise ConfigError("bradley_terry.feature_batch", fb, "must be an integer >= 1")
    return LMPreferenceSettings(model, raters, parsed, dim, fb)


def bind_preferences(settings: LMPreferenceSettings, data: PreferenceData) -> LMPreferenceSpec | None:
    """The settings against the data: None for ``empirical`` (the labels as they are); a record whose
    ``rater`` is not listed under ``raters`` is refused (``data.rater[i]``), and so is a rater column without
    ``raters``, or several raters without a rater column."""
    raters = settings.raters
    if raters and data.raters:
        check_rater_ids(data.raters, raters)
    if settings.model == "empirical":
        return None
    if data.raters and not raters:
        raise ConfigError(
            "raters",
            None,
            f"the data has a rater column ({len(set(data.raters))} raters): list them under 'raters' "
            "(with beta for at least one of them)",
        )
    if data.raters:
        index = {r.id: i for i, r in enumerate(raters)}
        rater_index = torch.tensor([index[r] for r in data.raters], dtype=torch.long, device="cpu")
    else:
        if len(raters) > 1:
            raise ConfigError("raters", [r.id for r in raters], "the data has no rater column")
        rater_index = torch.zeros(len(data), dtype=torch.long, device="cpu")
    return LMPreferenceSpec(
        settings.model, raters, rater_index, settings.options, settings.feature_dim, settings.feature_batch
    )


def parse_lm_preferences(config: Mapping[str, Any], data: PreferenceData) -> LMPreferenceSpec | None:
    """:func:`preference_settings` of ``config`` bound to ``data`` (:func:`bind_preferences`); None for
    ``empirical``."""
    return bind_preferences(preference_settings(config), data)


@torch.no_grad()
def response_features(
    model: torch.nn.Module, tokenizer: Any, data: PreferenceData, max_length: int, batch_size: int = 16
) -> Tensor:
    """Mean-pooled last hidden state of ``prompt + response`` for every atom, ``[2N, H]`` float64 (rows
    ``a_0..a_{N-1}, b_0..b_{N-1}``), from the model as it is (call it before LoRA is attached)."""
    tok = tokenize(data, tokenizer, max_length)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    device = next(model.parameters()).device
    prompts = tok.prompt_ids + tok.prompt_ids
    responses = tok.a_ids + tok.b_ids
    was_training = model.training
    model.eval()
    out = []
    try:
        for s in range(0, len(prompts), batch_size):
            b = collate(prompts[s : s + batch_size], responses[s : s + batch_size], pad, device)
            h = model(
                input_ids=b["input_ids"], attention_mask=b["attention_mask"], output_hidden_states=True
            ).hidden_states[-1]
            m = b["attention_mask"].unsqueeze(-1).to(h.dtype)
            out.append(((h * m).sum(1) / m.sum(1)).double().cpu())
    finally:
        model.train(was_training)
    return torch.cat(out)


def whiten(features: Tensor, dim: int) -> Tensor:
    """Centre ``features [n, H]``, project on the first ``min(dim, rank)`` principal components and scale each
    to unit variance (``[n, d]``); directions with no variance are dropped."""
    x = features.double() - features.double().mean(0)
    u, s, _ = torch.linalg.svd(x, full_matrices=False)
    keep = int((s > s.max() * 1e-8).sum()) if s.numel() and float(s.max()) > 0 else 0
    d = min(dim, keep)
    if d == 0:
        raise DataError("features", 0, "the responses' features do not vary: no reward can be fitted")
    return u[:, :d] * math.sqrt(x.shape[0])  # each column: mean 0, variance 1


def prompt_groups(data: PreferenceData) -> list[Tensor]:
    """Atom indices (rows of ``[a ; b]``) of each prompt's responses."""
    n = len(data)
    by_prompt: dict[str, list[int]] = {}
    for i, p in enumerate(data.prompts):
        by_prompt.setdefault(p, []).extend((i, n + i))
    return [torch.tensor(v, device="cpu") for v in by_prompt.values()]


def atom_preferences(reward: Tensor, data: PreferenceData) -> Tensor:
    """``p(y) = E_{y' ~ pi_ref(.|x)}[sigmoid(r(y) - r(y'))]`` over the other responses to the same prompt
    (``pi_ref`` = the data's responses to ``x``, identical texts left out), for rewards ``reward [..., 2N]``
    (any leading batch of draws and objectives); ``[..., 2N]``."""
    texts = list(data.responses_a) + list(data.responses_b)
    out = torch.full_like(reward, 0.5)
    for g in prompt_groups(data):
        r = reward[..., g]
        pair = torch.sigmoid(r.unsqueeze(-1) - r.unsqueeze(-2))  # [..., m, m]: P(y_j > y_j')
        t = [texts[int(j)] for j in g]
        w = torch.tensor([[float(a != b) for b in t] for a in t], dtype=reward.dtype, device="cpu")
        cnt = w.sum(-1)
        p = (pair * w).sum(-1) / cnt.clamp_min(1.0)
        out[..., g] = torch.where(cnt > 0, p, torch.full_like(p, 0.5))
    return out


def fit_lm_preferences(
    spec: LMPreferenceSpec,
    model: torch.nn.Module,
    tokenizer: Any,
    data: PreferenceData,
    max_length: int,
    features: Tensor | None = None,
) -> LMPreferences:
    """Features (:func:`response_features`, unless given), :func:`whiten`, one rater-competence BT fit per
    objective (:func:`~bayescrl.mopo.preferences.fit_bt_rewards`), per-atom ``p_k`` draws
    (:func:`atom_preferences`) summarised as mean, 90 % interval and the constraint values."""
    opts = spec.options
    if features is None:
        features = response_features(model, tokenizer, data, max_length, spec.feature_batch)
    z = whiten(features, spec.feature_dim)
    n, d = len(data), z.shape[1]
    post = fit_bt_rewards(
        z[:n],
        z[n:],
        data.prefs,
        spec.rater_index,
        spec.raters,
        prior_sd=opts["prior_scale"] / math.sqrt(d),
        engine=opts["engine"],
        engine_options=opts["engine_options"],
        num_samples=opts["num_samples"],
        competence=opts["competence"],
        beta_prior_sd=opts["beta_prior_sd"],
        seed=opts["seed"],
    )
    reward = torch.einsum("skd,nd->skn", post.theta, z)  # [S, K, 2N]
    draws = atom_preferences(reward, data).transpose(1, 2)  # [S, 2N, K]
    mean = draws.mean(0)
    q = opts["lower_quantile"]
    constraint = torch.quantile(draws, q, dim=0) if q is not None else mean
    lo, hi = torch.quantile(draws, 0.05, dim=0), torch.quantile(draws, 0.95, dim=0)
    return LMPreferences(mean, constraint, lo, hi, post.beta, post.diagnostics, d)


def summary(prefs: LMPreferences, data: PreferenceData, names: Sequence[str]) -> dict[str, Any]:
    """``preference_probs`` for ``results.json``: per objective, the mean posterior probability that response
    ``a`` is preferred where the record says so and where it does not, how often the posterior means rank
    ``a`` and ``b`` as the label does (``p(a) > p(b)``), and the mean width of the 90 % intervals."""
    n = len(data)
    out = {}
    for k, name in enumerate(names):
        pa, pb = prefs.mean[:n, k], prefs.mean[n:, k]
        lab = data.prefs[:, k].bool()
        out[name] = {
            "mean_p_a_when_label_a": float(pa[lab].mean()) if bool(lab.any()) else None,
            "mean_p_a_when_label_b": float(pa[~lab].mean()) if bool((~lab).any()) else None,
            "agreement_with_labels": float(((pa > pb) == lab).double().mean()),
            "mean_interval_width_90": float((prefs.q95[:, k] - prefs.q05[:, k]).mean()),
        }
    return out


def write_records(path: Any, prefs: LMPreferences, data: PreferenceData, names: Sequence[str]) -> None:
    """One JSON line per record: ``{record, rater, <objective>: {a: {mean, q05, q95}, b: {...}}}``."""
    import json

    n = len(data)
    with open(path, "w") as fh:
        for i in range(n):
            row: dict[str, Any] = {"record": i}
            if data.raters:
                row["rater"] = data.raters[i]
            for k, name in enumerate(names):
                row[name] = {
                    side: {
                        "mean": float(prefs.mean[j, k]),
                        "q05": float(prefs.q05[j, k]),
                        "q95": float(prefs.q95[j, k]),
                    }
                    for side, j in (("a", i), ("b", n + i))
                }
            fh.write(json.dumps(row) + "\n")

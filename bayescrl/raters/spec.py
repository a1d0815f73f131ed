"""One declarative schema for raters, used by every spec of the package.

A rater is declared as a mapping; every key is optional except where a family asks for ``id``::

    raters:
      - {id: expert, beta: 10.0, lam: 100.0}                           # known competence
      - {id: crowd, beta: {prior: lognormal, loc: 0.0, scale: 1.5}}    # unknown β with a prior
      - {id: myopic, beta: 5.0, gamma: 0.9, mistake: 0.1}              # a simulated B-Pref rater

Keys: ``id``, ``beta``, ``lam``, ``expert``, ``gamma``, ``skip_below``, ``equal_within``, ``mistake``,
``weight`` (:class:`~bayescrl.raters.rater.Rater`); a family may accept only some of them. An unknown key is
refused with the closest valid key (``lamda`` → ``lam``), duplicate ids are refused, and
:func:`check_rater_ids` refuses data that names an undeclared rater.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bayescrl.raters.rater import FIELDS, Rater, check_field
from bayescrl.utils.errors import ConfigError, DataError
from bayescrl.utils.io import check_keys


def parse_rater(
    rec: Any,
    where: str = "rater",
    *,
    index: int | None = None,
    keys: Sequence[str] = FIELDS,
    defaults: Mapping[str, Any] | None = None,
    unknown_beta: bool = False,
    finite: bool = True,
    priors: bool = True,
) -> Rater:
    """One rater from its declaration ``rec``. Errors name ``{where}.{key}`` (and ``index``); ``keys`` are
    the keys the family accepts, ``defaults`` fill the missing ones, ``unknown_beta`` lets ``beta`` be
    absent/None (estimated later), ``finite=False`` accepts ``lam: .inf`` (ϑ = θ), ``priors=False`` refuses
    a prior (a simulated rater's competence is a number)."""
    if not isinstance(rec, Mapping):
        shape = ", ".join(f"{k}: ..." for k in keys[:3])
        raise ConfigError(where, rec, f"each rater is a mapping like {{{shape}}}", index=index)
    check_keys(rec, keys, where if index is None else f"{where}[{index}]")
    merged = {**(defaults or {}), **rec}
    if "id" not in merged and index is not None:
        merged["id"] = f"r{index}"
    if unknown_beta and "beta" not in merged:
        merged["beta"] = None
    kw = {
        k: check_field(k, v, f"{where}.{k}", index, unknown_beta=unknown_beta, finite=finite, priors=priors)
        for k, v in merged.items()
    }
    return Rater(**kw)


def parse_raters(
    raw: Any,
    where: str = "raters",
    *,
    keys: Sequence[str] = FIELDS,
    defaults: Mapping[str, Any] | None = None,
    require_id: bool = False,
    unknown_beta: bool = False,
    finite: bool = True,
    priors: bool = True,
) -> list[Rater]:
    """A non-empty list of rater declarations → ``list[Rater]`` (strict; see the module docstring).

    Errors name ``{where}.{key}[i]`` (record ``i``); a missing ``id`` is ``r{i}`` unless ``require_id``.

    >>> parse_raters([{"id": "a", "lamda": 2.0}])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bayescrl.utils.errors.ConfigError: raters[0].lamda = 2.0: unknown key; did you mean 'lam'? ...
    """
    if not isinstance(raw, list) or not raw:
        raise ConfigError(where, raw, "must be a non-empty list of raters like {id: r0, beta: 1.0, lam: 1.0}")
    out: list[Rater] = []
    seen: set[str] = set()
    for i, rec in enumerate(raw):
        if require_id and isinstance(rec, Mapping) and "id" not in rec:
            raise ConfigError(f"{where}.id", None, "every rater needs a non-empty string id", index=i)
        r = parse_rater(
            rec,
            where,
            index=i,
            keys=keys,
            defaults=defaults,
            unknown_beta=unknown_beta,
            finite=finite,
            priors=priors,
        )
        if r.id in seen:
            raise ConfigError(f"{where}.id", r.id, "duplicate rater id (ids must be unique)", index=i)
        seen.add(r.id)
        out.append(r)
    return out


def check_rater_ids(used: Iterable[Any], raters: Sequence[Rater], where: str = "data.rater") -> None:
    """Refuse the first record whose rater id is not declared: ``DataError`` naming ``where[record]`` and
    the id (one line), e.g. ``data.rater[7] = 'bob': unknown rater id (declared: ['a', 'b'])``. ``None``
    entries (records without a rater column) are skipped."""
    ids = [r.id for r in raters]
    known = set(ids)
    for i, rid in enumerate(used):
        if rid is not None and str(rid) not in known:
            hint = f"declared: {ids}" if ids else "none declared: list them under 'raters'"
            raise DataError(where, rid, f"unknown rater id ({hint})", index=i)

"""Multi-objective preference data for language models: loading, validation, D_J, tokenisation.

A record is one prompt with two responses and one preference bit per objective,
``{"prompt", "response_a", "response_b", "prefs": [0/1 per objective]}``; ``prefs[k] = 1`` means
``response_a`` is preferred to ``response_b`` under objective ``k`` (the indicator ``I_k(y, y')`` of
section `appendix:samplingbasedcop`). Any number of objectives K >= 1 is accepted; K is fixed by the
first record (or by the caller) and every record must agree.

Four sources are read:

* JSONL in the native form above (:func:`load_jsonl`);
* TRL-style rows ``prompt`` / ``chosen`` / ``rejected`` plus one 0/1 column per objective
  (:func:`from_trl_rows`; ``chosen`` becomes ``response_a``), e.g. a ``datasets.Dataset`` or a JSONL file;
* TRL's preference format as a JSONL or Parquet file (:func:`load_trl`): ``chosen`` / ``rejected`` is the
  primary objective's annotation, one ``pref_<name>`` 0/1 column per extra objective, optional ``rater``;
* ``n`` sampled responses per prompt scored by programmatic objectives (:func:`from_scored_samples`);
* HH-RLHF-style ``chosen`` / ``rejected`` transcripts whose shared prefix up to the last
  ``"\\n\\nAssistant:"`` is the prompt (:func:`load_hh_rlhf`).

Every malformed record raises :class:`bayescrl.utils.DataError` naming the field, the record index and
the value; nothing is silently dropped, clipped or truncated.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bayescrl.utils import DataError
from bayescrl.utils.io import check_keys, json_loads

REQUIRED = ("prompt", "response_a", "response_b", "prefs")


@dataclass(frozen=True)
class PreferenceData:
    """A validated multi-objective preference data set (N records, K objectives).

    ``prefs`` is an ``(N, K)`` int64 tensor of 0/1 indicators; ``names`` optionally names the objectives.
    """

    prompts: tuple[str, ...]
    responses_a: tuple[str, ...]
    responses_b: tuple[str, ...]
    prefs: torch.Tensor
    names: tuple[str, ...] = ()
    raters: tuple[str, ...] = ()  # who labelled each record (optional ``rater`` column), or empty

    def __post_init__(self) -> None:
        n = len(self.prompts)
        if not (len(self.responses_a) == len(self.responses_b) == self.prefs.shape[0] == n):
            raise DataError("data", n, "prompts, responses and prefs must have the same length")
        if self.names and len(self.names) != self.num_objectives:
            raise DataError("objectives", list(self.names), f"expected {self.num_objectives} names")
        if self.raters and len(self.raters) != n:
            raise DataError("data.rater", len(self.raters), f"need one rater per record ({n})")

    def __len__(self) -> int:
        return len(self.prompts)

    @property
    def num_objectives(self) -> int:
        return int(self.prefs.shape[1])

    def subset(self, index: Sequence[int] | torch.Tensor) -> PreferenceData:
        idx = [int(i) for i in index]
        return PreferenceData(
            tuple(self.prompts[i] for i in idx),
            tuple(self.responses_a[i] for i in idx),
            tuple(self.responses_b[i] for i in idx),
            self.prefs[idx].clone(),
            self.names,
            tuple(self.raters[i] for i in idx) if self.raters else (),
        )

    def records(self) -> list[dict[str, Any]]:
        return [
            {"prompt": p, "response_a": a, "response_b": b, "prefs": q.tolist()}
            for p, a, b, q in zip(self.prompts, self.responses_a, self.responses_b, self.prefs, strict=True)
        ]

    def to_jsonl(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in self.records()))
        return path

    def to_trl_rows(self, primary: int = -1) -> list[dict[str, Any]]:
        """Rows of TRL's preference format read by :func:`load_trl`: ``chosen``/``rejected`` by objective
        ``primary``, ``pref_<name>`` (1: ``chosen`` also preferred) for the others, ``rater`` if known."""
        k = self.num_objectives
        if not -k <= primary < k:
            raise DataError("primary", primary, f"must index one of K = {k} objectives")
        primary %= k
        names = self.names or tuple(f"objective_{j}" for j in range(k))
        rows = []
        for i, q in enumerate(self.prefs.tolist()):
            a_wins = q[primary] == 1
            a, b = self.responses_a[i], self.responses_b[i]
            row: dict[str, Any] = {"prompt": self.prompts[i], "chosen": a if a_wins else b}
            row["rejected"] = b if a_wins else a
            row.update({f"pref_{names[j]}": q[j] if a_wins else 1 - q[j] for j in range(k) if j != primary})
            if self.raters:
                row["rater"] = self.raters[i]
            rows.append(row)
        return rows

    def to_trl_jsonl(self, path: str | Path, primary: int = -1) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in self.to_trl_rows(primary)))
        return path

    def dpo_pairs(self, objective_weights: Sequence[float] | None = None) -> DPOPairs:
        """Chosen/rejected pairs for the DPO baselines.

        ``objective_weights=None``: the jointly preferred subset D_J (section `sec:chapter5-preliminaries`):
        records whose K indicators all agree; the agreed winner is ``chosen``, mixed records are dropped.
        With weights ``w`` (MODPO-style scalarisation, ``DPO on w^T r`` of figure `dpo_comparison`): every
        record is kept, ``a`` is chosen when ``w . prefs > w . (1 - prefs)``, and exact ties are dropped.
        """
        q = self.prefs.to(torch.float64)
        if objective_weights is None:
            s = q.sum(1)
            keep = (s == 0) | (s == self.num_objectives)
            a_wins = s == self.num_objectives
        else:
            w = torch.as_tensor(list(objective_weights), dtype=torch.float64, device="cpu")
            if w.shape != (self.num_objectives,) or bool((w < 0).any()) or float(w.sum()) <= 0:
                raise DataError(
                    "objective_weights", list(objective_weights), f"need {self.num_objectives} weights >= 0"
                )
            score = q @ w - (1 - q) @ w
            keep = score != 0
            a_wins = score > 0
        idx = torch.nonzero(keep).flatten().tolist()
        chosen = [self.responses_a[i] if a_wins[i] else self.responses_b[i] for i in idx]
        rejected = [self.responses_b[i] if a_wins[i] else self.responses_a[i] for i in idx]
        return DPOPairs(tuple(self.prompts[i] for i in idx), tuple(chosen), tuple(rejected), tuple(idx))


@dataclass(frozen=True)
class DPOPairs:
    """Single-objective chosen/rejected pairs (``source_index`` points back into the MOPO data set)."""

    prompts: tuple[str, ...]
    chosen: tuple[str, ...]
    rejected: tuple[str, ...]
    source_index: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.prompts)

    def as_preference_data(self) -> PreferenceData:
        """View as a K = 1 preference data set (``response_a`` = chosen) for the shared training loop."""
        n = len(self.prompts)
        return PreferenceData(
            self.prompts, self.chosen, self.rejected, torch.ones(n, 1, dtype=torch.long, device="cpu")
        )

    def as_trl_rows(self) -> list[dict[str, str]]:
        return [
            {"prompt": p, "chosen": c, "rejected": r}
            for p, c, r in zip(self.prompts, self.chosen, self.rejected, strict=True)
        ]


# ----------------------------------------------------------------------------------------- validation
def _check_text(rec: Mapping[str, Any], key: str, i: int, source: str) -> str:
    if key not in rec:
        raise DataError(f"{source}.{key}", None, "missing field", index=i)
    v = rec[key]
    if not isinstance(v, str):
        raise DataError(f"{source}.{key}", v, f"must be a string, got {type(v).__name__}", index=i)
    if key != "prompt" and not v.strip():
        raise DataError(f"{source}.{key}", v, "response must be a non-empty string", index=i)
    return v


def _check_bit(v: Any, field: str, i: int) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int) and v in (0, 1):
        return v
    if isinstance(v, float) and v in (0.0, 1.0):
        return int(v)
    raise DataError(field, v, "preference indicator must be 0 or 1", index=i)


def validate_records(
    records: Iterable[Mapping[str, Any]],
    num_objectives: int | None = None,
    names: Sequence[str] = (),
    source: str = "data",
) -> PreferenceData:
    """Validate native records (see module docstring) and return a :class:`PreferenceData`.

    Errors name ``source.field``, the 0-based record index and the offending value.
    """
    prompts, ra, rb, prefs = [], [], [], []
    k = num_objectives if num_objectives is not None else (len(names) or None)
    for i, rec in enumerate(records):
        if not isinstance(rec, Mapping):
            raise DataError(source, rec, f"record must be a JSON object, got {type(rec).__name__}", index=i)
        prompts.append(_check_text(rec, "prompt", i, source))
        ra.append(_check_text(rec, "response_a", i, source))
        rb.append(_check_text(rec, "response_b", i, source))
        if "prefs" not in rec:
            raise DataError(f"{source}.prefs", None, "missing field", index=i)
        p = rec["prefs"]
        if not isinstance(p, (list, tuple)) or len(p) == 0:
            raise DataError(f"{source}.prefs", p, "must be a non-empty list of 0/1 (one per objective)", i)
        if k is None:
            k = len(p)
        if len(p) != k:
            raise DataError(f"{source}.prefs", p, f"has {len(p)} indicators, expected K = {k}", index=i)
        prefs.append([_check_bit(v, f"{source}.prefs", i) for v in p])
    if not prompts:
        raise DataError(source, 0, "no records")
    return PreferenceData(
        tuple(prompts),
        tuple(ra),
        tuple(rb),
        torch.tensor(prefs, dtype=torch.long, device="cpu"),
        tuple(names),
    )


def _read_jsonl(path: str | Path) -> list[Any]:
    path = Path(path)
    if not path.exists():
        raise DataError("data.path", str(path), "file not found")
    rows = []
    for line_no, line in enumerate(path.read_text().splitlines()):
        if not line.strip():
            continue
        try:
            rows.append(json_loads(line, path.name, str(path)))
        except DataError as exc:  # a repeated key, a malformed or half-written line
            raise DataError(f"{path.name}", line[:80], f"line {line_no + 1}: {exc.reason}") from None
    return rows


def load_jsonl(
    path: str | Path, num_objectives: int | None = None, names: Sequence[str] = ()
) -> PreferenceData:
    """Load native JSONL records (one per line; blank lines skipped); index in errors = record number.
    A field other than ``prompt, response_a, response_b, prefs`` is refused (a misspelt one would be lost)."""
    rows = _read_jsonl(path)
    for i, row in enumerate(rows):
        if isinstance(row, Mapping):
            check_keys(row, REQUIRED, f"{Path(path).name}[{i}]")
    return validate_records(rows, num_objectives, names, source=Path(path).name)


def from_trl_rows(
    rows: Iterable[Mapping[str, Any]] | str | Path,
    objective_columns: Sequence[str],
    source: str = "trl",
) -> PreferenceData:
    """Convert TRL-style rows (``prompt``, ``chosen``, ``rejected``, one 0/1 column per objective).

    ``rows`` may be a JSONL path, a list of dicts or a ``datasets.Dataset``. ``chosen`` becomes
    ``response_a``, so ``row[c] = 1`` means chosen is preferred under objective ``c``; the ``chosen`` name
    only records the primary annotation and may disagree with other objectives (that is the point of MOPO).
    """
    if isinstance(rows, (str, Path)):
        source = Path(rows).name
        rows = _read_jsonl(rows)
    cols = list(objective_columns)
    if not cols:
        raise DataError("objective_columns", cols, "need at least one preference column")
    native = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise DataError(source, row, "row must be a mapping", index=i)
        for c in ("prompt", "chosen", "rejected", *cols):
            if c not in row:
                raise DataError(f"{source}.{c}", None, "missing field", index=i)
        native.append(
            {
                "prompt": row["prompt"],
                "response_a": row["chosen"],
                "response_b": row["rejected"],
                "prefs": [row[c] for c in cols],
            }
        )
    return validate_records(native, len(cols), cols, source=source)


PREF_PREFIX = "pref_"


def _read_rows(path: str | Path) -> list[Any]:
    """Rows of a JSONL file, or of a Parquet file (``.parquet``/``.pq``; needs ``pyarrow``)."""
    path = Path(path)
    if path.suffix.lower() not in (".parquet", ".pq"):
        return _read_jsonl(path)
    if not path.exists():
        raise DataError("data.path", str(path), "file not found")
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise DataError(
            "data.path",
            str(path),
            "reading Parquet needs pyarrow: pip install 'bayescrl[parquet]' (or use JSONL)",
        ) from exc
    try:
        return pq.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow raises ArrowInvalid & co. on a corrupt or non-Parquet file
        raise DataError("data.path", str(path), f"not a readable Parquet file: {exc}") from exc


def load_trl(
    rows: Iterable[Mapping[str, Any]] | str | Path, primary: str = "chosen", source: str = "trl"
) -> PreferenceData:
    """Load TRL's preference format with one extra label column per additional objective.

    Each row has ``prompt``, ``chosen``, ``rejected`` (TRL's ``DPOTrainer`` columns, plain strings) and, for
    every extra objective ``<name>``, a 0/1 column ``pref_<name>`` (1: ``chosen`` is preferred under
    ``<name>`` too, 0: ``rejected`` is), plus an optional ``rater`` column (kept in
    :attr:`PreferenceData.raters`). The ``chosen``/``rejected`` annotation is objective ``primary`` and comes
    last, the thesis' convention for the primary objective ``K``; the ``pref_`` columns come first in sorted
    order. ``rows`` may be a JSONL or Parquet path or a list of mappings. A label column that some rows lack
    (or hold null) is an error naming the first such row; nothing is dropped or imputed.
    """
    if isinstance(rows, (str, Path)):
        source = Path(rows).name
        rows = _read_rows(rows)
    rows = list(rows)
    if not rows:
        raise DataError(source, 0, "no records")
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise DataError(source, row, "row must be a mapping", index=i)
    cols = sorted({k for row in rows for k in row if isinstance(k, str) and k.startswith(PREF_PREFIX)})
    names = tuple(c[len(PREF_PREFIX) :] for c in cols)
    if primary in names or not primary:
        raise DataError("data.primary", primary, f"must be a non-empty name other than {list(names)}")
    has_rater = any("rater" in row for row in rows)
    native, raters = [], []
    for i, row in enumerate(rows):
        rec, rater = _trl_record(row, i, cols, source, has_rater)
        native.append(rec)
        if has_rater:
            raters.append(rater)
    data = validate_records(native, len(cols) + 1, (*names, primary), source=source)
    return PreferenceData(
        data.prompts, data.responses_a, data.responses_b, data.prefs, data.names, tuple(raters)
    )


def _trl_record(
    row: Mapping[str, Any], i: int, cols: list[str], source: str, has_rater: bool
) -> tuple[dict[str, Any], str | None]:
    """Row ``i`` of a TRL file as a native record (``prefs``: the ``pref_`` labels, then 1 for ``chosen``)
    and its rater id (None without a rater column); a missing field or label, a missing rater (when the file
    has a rater column) or a label other than 0/1 is refused."""
    for c in ("prompt", "chosen", "rejected", *cols):
        v = row.get(c)
        if v is None or (isinstance(v, float) and v != v):  # absent, null or NaN (Parquet/pandas)
            what = "label missing (other rows have this column)" if c in cols else "missing field"
            raise DataError(f"{source}.{c}", v, what, index=i)
    rater = None
    if has_rater:
        r = row.get("rater")
        if r is None or isinstance(r, bool) or not isinstance(r, (str, int)):
            raise DataError(f"{source}.rater", r, "rater must be a string or integer id in every row", i)
        rater = str(r)
    prefs = [_check_bit(row[c], f"{source}.{c}", i) for c in cols]
    rec = {"prompt": row["prompt"], "response_a": row["chosen"], "response_b": row["rejected"]}
    return {**rec, "prefs": [*prefs, 1]}, rater


def from_scored_samples(
    prompts: Sequence[str],
    answers: Sequence[Sequence[str]],
    scores: Sequence[Any],
    primary: int = -1,
    names: Sequence[str] = (),
    seed: int = 0,
    source: str = "samples",
) -> PreferenceData:
    """Preference records from ``n`` scored samples per prompt (``K`` programmatic objectives).

    ``answers[i]`` are the samples of ``prompts[i]`` and ``scores[i]`` their ``(n, K)`` objective values
    (higher is better). The samples of a prompt are ranked by the ``primary`` objective and paired
    outside-in -- best with worst, second with second-worst, ... (``n // 2`` pairs; the usual binarisation of
    ranked samples, which keeps the primary margins large). ``prefs[k] = 1`` where ``response_a`` scores
    higher on objective ``k``; a tie on a non-primary objective is a fair coin flip (``seed``); which sample
    is ``response_a`` is a coin flip too. Pairs that tie on the primary carry no preference and pairs with an
    empty sample cannot be validated: both are skipped, which is the only filtering done.
    """
    if not (len(prompts) == len(answers) == len(scores)):
        raise DataError(
            f"{source}.answers", (len(prompts), len(answers), len(scores)), "prompts, answers, scores differ"
        )
    rng = random.Random(seed)
    recs, k_all = [], None
    for i, (prompt, ans) in enumerate(zip(prompts, answers, strict=True)):
        sc = torch.as_tensor(scores[i], dtype=torch.float64, device="cpu")
        if sc.ndim != 2 or sc.shape[0] != len(ans) or sc.shape[1] < 1:
            raise DataError(f"{source}.scores", tuple(sc.shape), f"must be ({len(ans)}, K)", index=i)
        if k_all is None:
            k_all = sc.shape[1]
        if sc.shape[1] != k_all:
            raise DataError(f"{source}.scores", tuple(sc.shape), f"expected K = {k_all} objectives", index=i)
        if not -k_all <= primary < k_all:
            raise DataError("primary", primary, f"not an objective index for K = {k_all}")
        order = torch.argsort(-sc[:, primary], stable=True).tolist()
        for r in range(len(order) // 2):
            hi, lo = order[r], order[-1 - r]
            if sc[hi, primary] == sc[lo, primary] or not ans[hi].strip() or not ans[lo].strip():
                continue
            a, b = (hi, lo) if rng.random() < 0.5 else (lo, hi)
            prefs = [
                int(sc[a, k] > sc[b, k]) if sc[a, k] != sc[b, k] else int(rng.random() < 0.5)
                for k in range(k_all)
            ]
            recs.append({"prompt": prompt, "response_a": ans[a], "response_b": ans[b], "prefs": prefs})
    if not recs:
        raise DataError(f"{source}.answers", len(prompts), "no pair with a strict preference on the primary")
    return validate_records(recs, k_all, names, source=source)


HH_SEP = "\n\nAssistant:"


def split_hh(chosen: str, rejected: str) -> tuple[str, str, str]:
    """Split two HH-RLHF transcripts into (prompt, chosen response, rejected response).

    The prompt is the text up to and including the last ``"\\n\\nAssistant:"`` of ``chosen``; both
    transcripts must share it (HH-RLHF pairs differ only in the final assistant turn).
    """
    cut = chosen.rfind(HH_SEP)
    if cut < 0:
        raise ValueError(f"no {HH_SEP!r} marker")
    prompt = chosen[: cut + len(HH_SEP)]
    if not rejected.startswith(prompt):
        raise ValueError("chosen and rejected do not share the dialogue prefix")
    return prompt, chosen[len(prompt) :], rejected[len(prompt) :]


def load_hh_rlhf(
    rows: Iterable[Mapping[str, Any]] | str | Path, objective_columns: Sequence[str] = ()
) -> PreferenceData:
    """Load HH-RLHF-style ``chosen``/``rejected`` transcripts (JSONL path or rows).

    Without ``objective_columns`` the data set has K = 1 (``chosen`` preferred); extra 0/1 columns (e.g. a
    harmlessness label) add objectives, the ``chosen`` annotation being the last (primary) one.
    """
    source = "hh-rlhf"
    if isinstance(rows, (str, Path)):
        source = Path(rows).name
        rows = _read_jsonl(rows)
    native = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise DataError(source, row, "row must be a mapping", index=i)
        for c in ("chosen", "rejected", *objective_columns):
            if c not in row:
                raise DataError(f"{source}.{c}", None, "missing field", index=i)
            if c in ("chosen", "rejected") and not isinstance(row[c], str):
                raise DataError(f"{source}.{c}", row[c], "must be a string", index=i)
        try:
            prompt, a, b = split_hh(row["chosen"], row["rejected"])
        except ValueError as exc:
            raise DataError(f"{source}.chosen", row["chosen"], str(exc), index=i) from exc
        native.append(
            {
                "prompt": prompt,
                "response_a": a,
                "response_b": b,
                "prefs": [*(row[c] for c in objective_columns), 1],
            }
        )
    names = (*objective_columns, "chosen")
    return validate_records(native, len(names), names, source=source)


def load_data(spec: Mapping[str, Any] | str | Path, num_objectives: int | None = None) -> PreferenceData:
    """Load from a config entry: a path (native JSONL) or ``{"path", "format": native|trl|hh, "columns"}``.

    ``format: trl`` without ``columns`` reads ``pref_<name>`` label columns (:func:`load_trl`; JSONL or
    Parquet, ``primary`` names the chosen/rejected objective); with ``columns`` every listed column is an
    objective (:func:`from_trl_rows`)."""
    if isinstance(spec, (str, Path)):
        return load_jsonl(spec, num_objectives)
    fmt = spec.get("format", "native")
    path = spec.get("path")
    if path is None:
        raise DataError("data.path", None, "missing field")
    if fmt == "native":
        return load_jsonl(path, num_objectives, spec.get("names", ()))
    if fmt == "trl":
        if spec.get("columns"):
            return from_trl_rows(path, spec["columns"])
        return load_trl(path, spec.get("primary") or "chosen")
    if fmt == "hh":
        return load_hh_rlhf(path, spec.get("columns", ()))
    raise DataError("data.format", fmt, "must be one of native, trl, hh")


# ----------------------------------------------------------------------------------------- tokenising
@dataclass
class TokenizedPairs:
    """Token ids of prompts and of both responses (lists of python ints, EOS appended to responses)."""

    prompt_ids: list[list[int]]
    a_ids: list[list[int]]
    b_ids: list[list[int]]
    prefs: torch.Tensor

    def __len__(self) -> int:
        return len(self.prompt_ids)


def tokenize(data: PreferenceData, tokenizer: Any, max_length: int) -> TokenizedPairs:
    """Tokenise prompts and responses; ``prompt + response + eos`` longer than ``max_length`` is an error.

    Responses get the tokenizer's EOS appended so that the policy models when to stop (the length of a
    response is part of the verbosity objectives). Over-long records are rejected, never truncated.
    """
    eos = tokenizer.eos_token_id
    if eos is None:
        raise DataError("tokenizer.eos_token_id", None, "tokenizer needs an EOS token")
    enc = lambda texts: tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    p_ids, a_ids, b_ids = enc(data.prompts), enc(data.responses_a), enc(data.responses_b)
    a_ids = [ids + [eos] for ids in a_ids]
    b_ids = [ids + [eos] for ids in b_ids]
    for i in range(len(data)):
        n = len(p_ids[i]) + max(len(a_ids[i]), len(b_ids[i]))
        if n > max_length:
            raise DataError(
                "data.length", n, f"prompt + response has {n} tokens > max_length {max_length}", i
            )
    return TokenizedPairs(p_ids, a_ids, b_ids, data.prefs)


def collate(
    prompt_ids: Sequence[list[int]], response_ids: Sequence[list[int]], pad_id: int, device: Any = "cpu"
) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``response_mask`` (1 on response tokens).

    Also ``response_pos``: the flat indices ``row * T + t - 1`` (row-major over ``(B, T)``) of the
    positions whose logits score the response tokens ``(row, t)`` (``t >= 1``, as ``response_mask[:, 1:]``),
    so that a policy can apply its output head to those positions only
    (:meth:`bayescrl.mopo.lm.model.Policy.logprobs`). They are built here, on the CPU, from the lengths:
    selecting them on the device needs no host synchronisation (a boolean mask would).
    """
    seqs = [p + r for p, r in zip(prompt_ids, response_ids, strict=True)]
    lens = [len(s) for s in seqs]
    width = max(lens)
    ids = torch.tensor(
        [s + [pad_id] * (width - n) for s, n in zip(seqs, lens, strict=True)], dtype=torch.long, device="cpu"
    )
    ar = torch.arange(width, device="cpu")
    end = torch.tensor(lens, device="cpu").unsqueeze(1)
    start = torch.tensor([len(p) for p in prompt_ids], device="cpu").unsqueeze(1)
    att = (ar < end).long()
    resp = (ar >= start) & (ar < end)
    pos = [
        row * width + t - 1
        for row, (p, n) in enumerate(zip(prompt_ids, lens, strict=True))
        for t in range(max(len(p), 1), n)
    ]
    return {
        "input_ids": ids.to(device),
        "attention_mask": att.to(device),
        "response_mask": resp.to(device),
        "response_pos": torch.tensor(pos, dtype=torch.long, device=device),
    }

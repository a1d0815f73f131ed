"""People as raters (``labels: external``): the queries a run waits on (``OUT/queries/pending.json``) and
the answers that come back (``OUT/queries/answers.json``, written by ``bayescrl prefs import``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from bayescrl.prefrl.segments import SegmentBuffer, Segments
from bayescrl.raters import EQUAL, SKIP
from bayescrl.utils.errors import ConfigError, DataError
from bayescrl.utils.io import load_json, write_json


class LabelFiles:
    """The pending queries of one run folder (``pending``: ``[{id, seg0, seg1}]``, ids ``r<round>q<k>``)."""

    def __init__(self, out_dir: str | Path | None, rater_ids: list[str], segment_length: int):
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.rater_ids, self.segment_length = list(rater_ids), segment_length
        self.pending: list[dict] = []

    def check_folder(self) -> None:
        """People's labels need a run folder to exchange files through."""
        if self.out_dir is None:
            raise ConfigError("preferences.labels", "external", "needs a run folder (out_dir)")

    def write_pending(self, pairs: np.ndarray, data: Segments, rnd: int, env_id, iteration: int) -> None:
        """Write round ``rnd``'s queries (rows ``pairs`` (n, 2) of ``data``) to ``queries/pending.json``."""
        self.check_folder()
        self.pending = [
            {"id": f"r{rnd}q{k}", "seg0": int(data.ids[i]), "seg1": int(data.ids[j])}
            for k, (i, j) in enumerate(pairs)
        ]

        def seg(row: int) -> dict:
            return {
                "segment": int(data.ids[row]),
                "obs": data.obs[row].tolist(),
                "actions": data.actions[row].reshape(data.actions.shape[1], -1).tolist(),
                "features": data.phi[row].tolist(),
            }

        qdir = self.out_dir / "queries"
        qdir.mkdir(parents=True, exist_ok=True)
        write_json(
            qdir / "pending.json",
            {
                "env": str(env_id),
                "round": rnd,
                "iteration": int(iteration),
                "segment_length": self.segment_length,
                "raters": self.rater_ids,
                "observation_names": None,
                "action_names": None,
                "queries": [
                    {"id": q["id"], "left": seg(i), "right": seg(j)}
                    for q, (i, j) in zip(self.pending, pairs, strict=True)
                ],
            },
        )

    def take_answers(self, buffer: SegmentBuffer, ingest: Callable[..., None]) -> int:
        """Hand the answers in ``queries/answers.json`` to pending queries to ``ingest(s0, s1, y, who)``;
        they then leave the pending list and the file becomes ``answered_round<r>.json``. Answers to
        unknown queries or with bad values are refused. Returns the number of answers used."""
        path = None if self.out_dir is None else self.out_dir / "queries" / "answers.json"
        if not self.pending or path is None or not path.exists():
            return 0
        fix = f"delete it and import the labels again (bayescrl prefs import {self.out_dir} LABELS.json)"
        raw = load_json(path, "answers.json", kind=dict, recover=fix)
        rnd = int(self.pending[0]["id"][1:].split("q")[0])
        if raw.get("round") != rnd:
            raise DataError("answers.round", raw.get("round"), f"the pending queries are round {rnd}")
        by_id = {q["id"]: q for q in self.pending}
        rows = []
        answers = raw.get("answers", [])
        if not isinstance(answers, list):
            raise DataError("answers.json", str(path), f"'answers' must be a list; {fix}")
        for i, a in enumerate(answers):
            if not isinstance(a, dict):
                raise DataError("answers", a, f"each answer is {{query, y, rater}}; {fix}", i)
            q = by_id.get(a.get("query"))
            if q is None:
                raise DataError("answers.query", a.get("query"), "not a pending query", i)
            if a.get("y") not in (0, 1, EQUAL, SKIP) or a.get("rater") not in self.rater_ids:
                raise DataError("answers", a, "y must be 0, 1, 2 or -1 and rater a spec rater", i)
            rows.append((q, int(a["y"]), self.rater_ids.index(a["rater"])))
        if rows:
            s0 = buffer.by_id([q["seg0"] for q, _, _ in rows])
            s1 = buffer.by_id([q["seg1"] for q, _, _ in rows])
            ingest(s0, s1, np.array([y for _, y, _ in rows]), np.array([w for _, _, w in rows]))
        done = {q["id"] for q, _, _ in rows}
        self.pending = [q for q in self.pending if q["id"] not in done]
        path.replace(path.with_name(f"answered_round{rnd}.json"))
        if not self.pending:
            (path.parent / "pending.json").unlink(missing_ok=True)
        return len(rows)

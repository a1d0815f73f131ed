"""Same numbers before and after a refactor of the training loop: tiny ``bayescrl train`` runs of every
constrained algorithm and of three ``train --preferences`` runs, compared bit for bit.

``run DIR`` trains each case into ``DIR/<case>`` (a few hundred env steps each, under a minute in all;
one more preference run through the library's ``train_with_preferences``);
``compare A B`` checks that two such trees hold the same numbers: every ``metrics.jsonl`` record,
``metrics.json``, ``curves.json``, ``preference_rounds.json``, ``queries/pending.json``, and every tensor,
array and value of ``checkpoint.pt`` / ``prefs_state.pt`` — except wall-clock timings (keys ending in
``_s``, ``_per_s`` or ``seconds``). Exits 1 when a case differs.

    PYTHONPATH=OLD_CHECKOUT python benchmarks/diagnostics/same_numbers.py run /tmp/before  # old code
    python benchmarks/diagnostics/same_numbers.py run /tmp/after      # on the new code
    python benchmarks/diagnostics/same_numbers.py compare /tmp/before /tmp/after
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np
import torch

from bayescrl.cli import main
from bayescrl.constrained.registry import REGISTRY
from bayescrl.prefrl.loop import train_with_preferences

PENDULUM = "bayescrl.constrained.toy:CostPendulum"
TINY = {"n_envs": 2, "rollout_steps": 32, "minibatch_size": 32, "update_epochs": 2, "horizon": 20}
PREFS = {
    "prefs_infer": (
        "ecop",
        "features: onehot\nsegment_length: 5\n"
        "raters: [{id: expert, beta: 5.0, lam: 100.0}, {id: novice, beta: 0.5, lam: 2.0}]\n"
        "competence: infer\nqueries: {total: 60, per_round: 20, select: disagreement}\nreward: mean\n",
    ),
    "prefs_cost": (
        "ppo-lag",
        "features: onehot\nsegment_length: 5\nraters: [{id: a, beta: 5.0, lam: 100.0}]\ncompetence: known\n"
        "queries: {total: 40, per_round: 20}\nreward: thompson\ncost: learned\n"
        "cost_raters: [{id: c, beta: 5.0, lam: 100.0}]\ncost_queries: {total: 40, per_round: 20}\n",
    ),
    "prefs_external": (
        "ecop",
        "labels: external\nfeatures: onehot\nsegment_length: 2\nraters: [{id: alice}, {id: bob}]\n"
        "queries: {total: 10, per_round: 5, select: uniform}\n",
    ),
}
TIMING = re.compile(r"(_s|_per_s|seconds)$")
FILES = ("metrics.jsonl", "metrics.json", "curves.json", "preference_rounds.json", "queries/pending.json")


def _train(args: list[str]) -> None:
    try:
        main(["train", *args, "--no-progress"])
    except SystemExit as exc:  # pragma: no cover - a failed case is reported by compare
        if exc.code:
            raise


def run(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    sets = [x for k, v in TINY.items() for x in ("--set", f"config.{k}={v}")]
    for name in REGISTRY:
        _train(
            ["--algo", name, "--env", PENDULUM, "--total-steps", "192", "--seed", "3", "--cost-limit", "5",
             "--set", "env_kwargs.max_episode_steps=20", *sets, "--out", str(root / name)]
        )  # fmt: skip
    for case, (algo, spec) in PREFS.items():
        f = root / f"{case}.yaml"
        f.write_text(spec)
        _train(
            ["--algo", algo, "--env", "bayescrl/SmallCMDP-v0", "--cost-limit", "3", "--total-steps", "300",
             "--preferences", str(f), "--set", "config.n_envs=2", "--set", "config.rollout_steps=50",
             "--out", str(root / case)]
        )  # fmt: skip
    # the library entry point of a preference run (no CLI)
    spec = root / "library.yaml"
    spec.write_text(PREFS["prefs_infer"][1].replace("reward: mean", "reward: lcb"))
    cfg = {"n_envs": 2, "rollout_steps": 25}
    out = root / "library"
    train_with_preferences(
        "ipo", "bayescrl/SmallCMDP-v0", spec, total_steps=200, cost_limits=[3.0], config=cfg, out_dir=out
    )


def _canon(x, where: str, out: dict) -> None:
    """Flatten ``x`` into ``out[path] = comparable value`` (timings left out)."""
    if isinstance(x, dict):
        for k, v in x.items():
            if not (isinstance(k, str) and TIMING.search(k)):
                _canon(v, f"{where}.{k}", out)
    elif isinstance(x, (list, tuple)):
        out[f"{where}#len"] = len(x)
        for i, v in enumerate(x):
            _canon(v, f"{where}[{i}]", out)
    elif isinstance(x, torch.Tensor):
        out[where] = (str(x.dtype), tuple(x.shape), x.detach().cpu().numpy().tobytes())
    elif isinstance(x, np.ndarray):
        out[where] = (str(x.dtype), x.shape, x.tobytes())
    elif isinstance(x, float) and x != x:
        out[where] = "nan"
    else:
        out[where] = x


def _load(path: Path):
    if path.suffix == ".pt":
        return torch.load(path, weights_only=True)
    if path.suffix == ".jsonl":
        return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    return json.loads(path.read_text())


def compare(a: Path, b: Path) -> int:
    cases = sorted(p.name for p in a.iterdir() if p.is_dir())
    bad = 0
    for case in cases:
        diffs, checked = [], 0
        for rel in (*FILES, "checkpoint.pt", "prefs_state.pt"):
            pa, pb = a / case / rel, b / case / rel
            if not pa.exists() and not pb.exists():
                continue
            if pa.exists() != pb.exists():
                diffs.append(f"{rel}: only in {'before' if pa.exists() else 'after'}")
                continue
            ca, cb = {}, {}
            _canon(_load(pa), rel, ca)
            _canon(_load(pb), rel, cb)
            checked += len(ca)
            for k in sorted(set(ca) | set(cb)):
                if ca.get(k, "<missing>") != cb.get(k, "<missing>"):
                    diffs.append(k)
        status = "identical" if not diffs else f"DIFFERS at {len(diffs)} value(s): {diffs[:5]}"
        print(f"{case:16s} {checked:6d} values  {status}")
        bad += bool(diffs)
    print(f"{len(cases) - bad}/{len(cases)} cases bit-identical")
    return 1 if bad or not cases else 0


def _main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("run").add_argument("dir", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = ap.parse_args()
    if args.cmd == "run":
        run(args.dir)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(_main())

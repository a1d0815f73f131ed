"""Slim ``benchmarks/results`` before committing: summaries stay, per-step records go.

Run after a benchmark or sweep has written its results (and after ``bayescrl report`` has drawn a sweep's
curves); each step rewrites a file only where it removes something, so a second run changes nothing:

* ``train_log*.jsonl`` (one line per training step; git ignores them): the first and last record of each,
  with its number of records, go into ``train_logs_summary.json`` of its results folder.
* ``sweeps/*/<run>/results.json`` of ``bandit`` / ``pspl`` sweeps: the per-round curves
  (``agents.*.*curve*``, ``agents.*.cumulative_regret_*``) go; the final metrics the report reads stay.
* ``prefrl/*.json`` (``benchmarks/prefrl_compare.py``): each run's per-iteration ``curve`` goes.
* ``ecop/*.runs.jsonl`` (``benchmarks/ecop_compare.py``): each record's ``curve_*`` lists go.
* ``--png``: PNGs in RGB(A) are re-saved with a 256-colour palette (same pixels size) where that saves at
  least a quarter.

    .venv/bin/python benchmarks/slim_results.py [--png]
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def _dump(path: Path, data, old: str) -> None:
    indent = 2 if "\n  " in old[:2000] else None  # keep the file's own layout
    path.write_text(json.dumps(data, indent=indent) + ("\n" if old.endswith("\n") else ""))


def train_logs(root: Path) -> int:
    """Summaries of the per-step training logs (the logs stay on disk, ignored by git)."""
    by_folder: dict[Path, dict] = {}
    for log in sorted(root.rglob("train_log*.jsonl")):
        rel = log.relative_to(root).parts
        folder = root.joinpath(*rel[:2]) if len(rel) > 2 else log.parent  # <family>/<study>
        lines = [ln for ln in log.read_text().splitlines() if ln.strip()]
        if lines:
            entry = {"records": len(lines), "first": json.loads(lines[0]), "last": json.loads(lines[-1])}
            by_folder.setdefault(folder, {})[log.relative_to(folder).as_posix()] = entry
    for folder, logs in by_folder.items():
        path = folder / "train_logs_summary.json"
        old = json.loads(path.read_text())["logs"] if path.exists() else {}
        merged = dict(sorted({**old, **logs}.items()))
        what = "the first and last record of each per-step training log (train_log*.jsonl) of this folder"
        data = {"what": what + "; the logs themselves are not committed", "logs": merged}
        if merged != old:
            path.write_text(json.dumps(data, indent=1) + "\n")
    return len(by_folder)


def sweep_results(root: Path) -> int:
    n = 0
    for path in sorted(root.glob("sweeps/*/*/results.json")):
        old = path.read_text()
        data = json.loads(old)
        agents = data.get("agents") if isinstance(data, dict) else None
        if not isinstance(agents, dict):
            continue
        drop = [
            (a, k)
            for a, rec in agents.items()
            if isinstance(rec, dict)
            for k in rec
            if "curve" in k or k.startswith("cumulative_regret")
        ]
        for a, k in drop:
            del agents[a][k]
        if drop:
            _dump(path, data, old)
            n += 1
    return n


def prefrl_curves(root: Path) -> int:
    n = 0
    for path in sorted(root.glob("prefrl/*.json")):
        old = path.read_text()
        data = json.loads(old)
        runs = data.get("runs") if isinstance(data, dict) else None
        if isinstance(runs, list) and any(isinstance(r, dict) and "curve" in r for r in runs):
            for r in runs:
                r.pop("curve", None)
            _dump(path, data, old)
            n += 1
    return n


def ecop_curves(root: Path) -> int:
    n = 0
    for path in sorted(root.glob("ecop/*.runs.jsonl")):
        recs = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
        if any(k.startswith("curve_") for r in recs for k in r):
            for r in recs:
                for k in [k for k in r if k.startswith("curve_")]:
                    del r[k]
            path.write_text("".join(json.dumps(r) + "\n" for r in recs))
            n += 1
    return n


def pngs(root: Path) -> int:
    from PIL import Image  # matplotlib's dependency

    n = 0
    for path in sorted(root.rglob("*.png")):
        raw = path.read_bytes()
        im = Image.open(io.BytesIO(raw))
        im.load()
        if im.mode == "RGBA" and im.getchannel("A").getextrema()[0] == 255:
            im = im.convert("RGB")
        if im.mode not in ("RGB", "RGBA"):
            continue
        method = Image.Quantize.MEDIANCUT if im.mode == "RGB" else Image.Quantize.FASTOCTREE
        buf = io.BytesIO()
        extra = {"dpi": im.info["dpi"]} if "dpi" in im.info else {}
        im.quantize(colors=256, method=method).save(buf, format="PNG", optimize=True, **extra)
        if buf.tell() < 0.75 * len(raw):
            path.write_bytes(buf.getvalue())
            n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=RESULTS)
    ap.add_argument("--png", action="store_true", help="also re-save RGB(A) PNGs with a palette")
    args = ap.parse_args()
    print(f"train-log summaries: {train_logs(args.root)} folders")
    print(f"sweep results.json without curves: {sweep_results(args.root)}")
    print(f"prefrl results without curves: {prefrl_curves(args.root)}")
    print(f"ecop runs.jsonl without curves: {ecop_curves(args.root)}")
    if args.png:
        print(f"PNGs re-saved: {pngs(args.root)}")


if __name__ == "__main__":
    main()

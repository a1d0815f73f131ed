"""MOPO synthetic benchmark: motivating example (hypervolume vs DPO and the COP oracle), sanity check.

Usage::

    .venv/bin/python benchmarks/mopo_synthetic.py                     # motivating example, sets A and B
    .venv/bin/python benchmarks/mopo_synthetic.py --sanity            # also the 20k-step sanity check
    .venv/bin/python benchmarks/mopo_synthetic.py --set mopo.steps=2000  # config overrides

Targets (issue 7): on sets A and B, MOPO's hypervolume exceeds every single DPO policy's and is within 10%
of the COP oracle's. Writes ``benchmarks/results/mopo/{motivating,sanity}.json`` and PNG plots.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bayescrl.mopo.synthetic import run_motivating, run_sanity
from bayescrl.utils import apply_overrides, load_yaml, set_torch_threads, write_json

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "mopo"


def table(results: dict) -> tuple[str, dict]:
    """Markdown table per reward set and the pass/fail of the targets."""
    lines, checks = [], {}
    for (rs, res), tag in [(kv, t) for kv in results["sets"].items() for t in ("", "_greedy")]:
        m = res[f"methods{tag}"]
        cop = m["COP oracle"]["hypervolume"]
        lines.append(
            f"\nReward set {rs}, {'greedy' if tag else 'sampled'} evaluation (reference point "
            f"{[round(v, 4) for v in res['reference_point' + tag]]}, true-front HV "
            f"{res['true_front_hypervolume' + tag]:.4f})\n"
        )
        cop_f = m["COP oracle"].get("hypervolume_front_nadir_ref", float("nan"))
        lines.append(
            "| method | #points | hypervolume | HV / COP | HV / COP (front-nadir ref "
            f"{[round(v, 4) for v in res.get('reference_point_front_nadir' + tag, [])]}) | mean distance |"
        )
        lines.append("|---|---|---|---|---|---|")
        for k, v in m.items():
            ratio = v["hypervolume"] / cop if cop > 0 else float("nan")
            hv_f = v.get("hypervolume_front_nadir_ref", float("nan"))
            ratio_f = hv_f / cop_f if cop_f > 0 else float("nan")
            lines.append(
                f"| {k} | {len(v['points'])} | {v['hypervolume']:.4f} | {ratio:.3f} | {ratio_f:.3f} | "
                f"{v['mean_distance_to_front']:.4f} |"
            )
        single = {k: v["hypervolume"] for k, v in m.items() if k.startswith("DPO") and k != "DPO DC (all w)"}
        checks[rs + tag] = {}
        for name in ("MOPO", "MOPO both primaries"):
            if name not in m:
                continue
            hv = m[name]["hypervolume"]
            checks[rs + tag][name] = {
                "beats_every_single_dpo": all(hv > h for h in single.values()),
                "within_10pct_of_cop": hv >= 0.9 * cop,
                "over_cop": hv / cop if cop > 0 else None,
            }
    return "\n".join(lines), checks


def replot(path: Path = OUT / "motivating.json", out: Path = OUT) -> None:
    """Redraw the reward-space plots from a saved ``motivating.json`` (no training)."""
    import json

    import numpy as np

    from bayescrl.mopo.synthetic import _plot_front, true_front

    res = json.loads(path.read_text())
    grid = res.get("config", {}).get("grid", {})
    for rs, r in res["sets"].items():
        front = true_front(
            rs, int(grid.get("n_x", 101)), int(grid.get("n_y", 1001)), int(grid.get("n_w", 401))
        )
        for tag in ("", "_greedy"):
            methods = {k: np.asarray(v["points"]) for k, v in r[f"methods{tag}"].items()}
            _plot_front(rs, front, methods, r[f"reference_point{tag}"], out / f"motivating_set_{rs}{tag}.png")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(ROOT / "examples" / "mopo" / "motivating.yaml"))
    ap.add_argument("--sanity", action="store_true", help="also run examples/mopo/sanity.yaml")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--replot", action="store_true", help="only redraw the plots from motivating.json")
    ap.add_argument("--out", default=str(OUT), help="results folder (default benchmarks/results/mopo)")
    args = ap.parse_args()
    out = Path(args.out)
    if args.replot:
        replot(out / "motivating.json", out)
        return
    set_torch_threads()
    cfg = apply_overrides(load_yaml(args.config), args.overrides)
    t = time.perf_counter()
    res = run_motivating(cfg, out)
    res["wall_s"] = time.perf_counter() - t
    text, checks = table(res)
    res["checks"] = checks
    write_json(out / "motivating.json", res)
    print(text)
    print("\nchecks:", checks)
    if args.sanity:
        scfg = load_yaml(ROOT / "examples" / "mopo" / "sanity.yaml")
        t = time.perf_counter()
        san = run_sanity(scfg, out)
        san["wall_s"] = time.perf_counter() - t
        write_json(out / "sanity.json", san)
        for key, r in san["runs"].items():
            pol = {a: round(v, 4) for a, v in r["policy_mean"].items()}
            print(
                f"{key}: policy {pol}  exact {dict((a, round(v, 4)) for a, v in r['exact_policy'].items())}"
            )


if __name__ == "__main__":
    main()

"""benchmarks/to_sweep.py (benchmark results -> sweep folders) and the README tables it makes reproducible."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bayescrl.sweep.calls import resolve
from bayescrl.sweep.report import build_report

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = ROOT / "benchmarks" / "results" / "sweeps"


def _pivot_rows(markdown: str) -> list[str]:
    """The header and data rows of the report's pivot (after its 'mean ± sd over seeds (n)' heading)."""
    tail = markdown.split("mean ± sd over seeds (n)", 1)[1]
    return [line for line in tail.splitlines() if line.startswith("| ")]


@pytest.mark.parametrize(
    "folder, cell",
    [
        # PointCircle, ACPO with the correction and log-std -0.5, seeds 0-4: final rewards 0.3634 / 0.5866 /
        # 0.3590 / 0.3588 / 0.3612 (benchmarks/results/acpo/circle_8e5_n20_ec0.2_std05/compare.json), mean
        # 0.4058, sample sd 0.1011 (population sd 0.0904: what the README printed before)
        ("acpo_point", "| acpo-ec0.2-std05 | 0.4058 ± 0.1011 / 0.4512 ± 0.379 / 1 ± 0 (5) | – |"),
        ("acpo_point_10seeds", "| atrpo | 0.53 ± 0.3845 / 0.9576 ± 2.41 / 0.9 ± 0.3162 (10) |"),
        ("acpo_point_10seeds_centred", "| atrpo | 0.6418 ± 0.2674 / 0.0228 ± 0.03899 / 1 ± 0 (10) | – |"),
        ("acpo_traffic", "| acpo | 0.8915 ± 0.02479 / 6.221 ± 1.266 / 0 ± 0 (5) |"),
        # Grid at 5e4 steps, ACPO seeds 0-4: final rewards 0.88 / 0.92 / 0.9425 / 0.895 / 0.845, mean 0.8965
        # (benchmarks/results/acpo/traffic_5e4/compare.json); every cost <= 1.1 l
        ("acpo_traffic_5e4", "| acpo | 0.8965 ± 0.0374 / 0.56 ± 0.1476 / 1 ± 0 (5) |"),
    ],
    ids=["point", "point_10seeds", "point_10seeds_centred", "traffic", "traffic_5e4"],
)
def test_report_over_committed_acpo_folders_is_the_readme_table(tmp_path, folder, cell):
    """`bayescrl report` over each committed ACPO sweep folder gives the quoted cell, and every row of its
    pivot table stands in the README as printed (the README's tables are the report's output)."""
    shutil.copytree(SWEEPS / folder, tmp_path / folder)  # the report writes report.md/json into the folder
    rep = build_report(tmp_path / folder, plots=False)
    rows = _pivot_rows(rep["markdown"])
    assert any(row.startswith(cell) for row in rows), rows
    readme = (ROOT / "README.md").read_text()
    if folder in ("acpo_point", "acpo_traffic", "acpo_traffic_5e4"):  # the tables printed in full
        missing = [row for row in rows[1:] if row not in readme]
        assert not missing, missing


def test_acpo_runs_convert_only_when_the_study_equals_the_grid_point(tmp_path, capsys):
    """The acpo reader: an acpo_compare.py study's per-seed finals become sweep_job results (cost / l and
    within 1.1 l derived as sweep_job derives them); a study whose settings differ is refused, nothing
    written."""
    convert = resolve(str(ROOT / "benchmarks" / "to_sweep.py:main"))
    res = tmp_path / "res" / "study"
    res.mkdir(parents=True)
    args = {"tasks": ["PointCircle"], "algos": ["acpo"], "seeds": 2, "steps": 1000, "delta": 0.01}
    args.update(eval_every=500, eval_traj=2, eval_steps=100, n_envs=20, error_correction=None)
    agg = {"seeds": [0, 1], "final_rewards": [0.1, 0.3], "final_costs": [0.05, 0.06]}
    data = {"args": args, "tasks": {"PointCircle": {"limit_per_step": 0.05, "algos": {"acpo": agg}}}}
    (res / "compare.json").write_text(json.dumps(data))
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        f"command: call\ntarget: {ROOT / 'benchmarks' / 'acpo_common.py'}:sweep_job\n"
        "grid: {task: [PointCircle], algo: [acpo, cpo], seed: [0, 1]}\n"
        "args: {steps: 1000, delta: 0.01, eval_every: 500, eval_traj: 2, eval_steps: 100,\n"
        "       config: {n_envs: 20}}\n"
        "report: {metrics: [final_avg_reward, final_cost_over_limit, within_limit]}\n"
    )
    out = tmp_path / "sw"
    base = [str(sweep), "--out", str(out), "--results", str(tmp_path / "res"), "--no-plots"]
    convert([*base, "--source", "acpo=study"])
    rec = json.loads((out / "acpo_s1" / "result.json").read_text())
    assert rec["final_cost_over_limit"] == pytest.approx(1.2) and rec["within_limit"] == 0.0
    assert json.loads((out / "acpo_s0" / "result.json").read_text())["within_limit"] == 1.0
    assert not (out / "cpo_s0").exists()  # not in the study: left for a sweep to run
    text = capsys.readouterr().out
    assert "| acpo | 2 | 0.2 ± 0.1414 (2) | 1.1 ± 0.1414 (2) | 0.5 ± 0.7071 (2) |" in text, text
    args["n_envs"] = None  # the study ran 5 envs, the sweep file says 20: refused
    args["error_correction"] = 0.2
    (res / "compare.json").write_text(json.dumps(data))
    with pytest.raises(SystemExit) as exc:
        convert([*base[:1], "--out", str(tmp_path / "sw2"), *base[3:], "--source", "acpo=study"])
    err = capsys.readouterr().err
    assert (
        exc.value.code == 2
        and "config.n_envs 5 != 20" in err
        and "config.error_correction 0.2 != None" in err
    )
    assert not (tmp_path / "sw2").exists()
    with pytest.raises(SystemExit) as exc:
        convert([*base, "--source", "PointGather=study"])  # not a value of any axis
    assert "no grid value 'PointGather'" in str(exc.value)


@pytest.mark.parametrize("folder, seeds", [("warmpref_headline", 5), ("warmpref_headline_20seeds", 20)])
def test_report_over_warmpref_sweeps_is_the_readme_headline_row(tmp_path, folder, seeds):
    """The README's warmPref-PS 5- and 20-seed rows are the report's cells over the sweeps run here, in the
    grid's agent order (bootstrap, Alg. 1, naive-PS, PS, LinTS)."""
    shutil.copytree(SWEEPS / folder, tmp_path / folder)
    rep = build_report(tmp_path / folder, plots=False)
    cells = []
    for group in rep["groups"]:
        st = group["metrics"]["agents.*.final_regret_mean"]
        assert st["n"] == seeds
        cells.append(f"{st['mean']:.4g} ± {st['sd']:.4g}")
    row = next(ln for ln in (ROOT / "README.md").read_text().splitlines() if ln.startswith(f"| {seeds} |"))
    assert [c.strip().strip("*") for c in row.strip("|").split("|")[1:]] == cells, (row, cells)
    if seeds == 5:  # PS, seeds 0-4: final regrets 19.349 / 68.870 / 50.779 / 78.663 / 45.578 (the runs'
        # results.json), mean 52.648, sample sd 22.925
        assert cells[3] == "52.65 ± 22.93"


def test_report_over_warmpref_actionspace_sweep_is_the_reproduction_table(tmp_path):
    """Table (actionspaceregret), 20 seeds: the report's pivot rows stand in the reproduction page as printed,
    and the README quotes the d = 2, rho = 0.1 cell."""
    shutil.copytree(SWEEPS / "warmpref_actionspace", tmp_path / "w")
    rows = _pivot_rows(build_report(tmp_path / "w", plots=False)["markdown"])
    page = (ROOT / "docs" / "reproduction.md").read_text()
    assert len(rows) == 5 and all(row in page for row in rows), rows
    assert rows[1].startswith("| d=2 rho=0.1 | 12.6 ± 4.699 (20) | 15.91 ± 13.36 (20) | 5.949 ± 4.122 (20) |")
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "bootstrap 5.949 ± 4.122, PS 12.6 ± 4.699, LinTS 15.91 ± 13.36" in readme


def test_report_over_committed_ecop_table_gives_the_readme_rows(tmp_path):
    """The README's e-COP table (tuned e-COP return / cost per task, and its best-other cells) is the report
    over the committed ecop_table folder: e-COP from its runs after the unit change (``*_ecop_v3``), the
    traffic rows at 5 x 10^4 steps. E.g. HumanoidRun e-COP, seeds 0-4: 280.38 / 276.50 / 281.61 / 270.15 /
    289.38, mean 279.60."""
    shutil.copytree(SWEEPS / "ecop_table", tmp_path / "t")
    rep = build_report(tmp_path / "t", plots=False)
    cell = {}
    for g in rep["groups"]:
        m = g["metrics"]
        if m["train_final_return"]["n"]:
            key = (g["point"]["task"], g["point"]["algo"])
            cell[key] = f"{m['train_final_return']['mean']:.1f} / {m['train_final_costs.0']['mean']:.1f}"
    readme = (ROOT / "README.md").read_text()
    expected = {
        ("HumanoidRun", "ecop"): "279.6 / 18.4",
        ("HumanoidRun", "ppo-lag"): "288.2 / 18.9",
        ("PointCircle", "ecop"): "36.2 / 13.1",
        ("PointCircle", "focops"): "46.5 / 7.4",
        ("PointReach", "ecop"): "14.9 / 9.7",
        ("PointNavigation", "ecop"): "3.5 / 5.5",
        ("Grid", "ecop"): "187.8 / 303.8",
        ("Bottleneck", "ecop"): "129.4 / 116.9",
    }
    for key, text in expected.items():
        assert cell[key] == text, (key, cell[key])
        assert text.split(" / ")[0] in readme
    assert sum(1 for (task, _) in cell if task in ("Grid", "Bottleneck")) == 16  # all eight methods on both


def test_acpo_aggregate_reports_the_sample_sd_of_the_seeds():
    """``benchmarks/acpo_common.py:aggregate`` (what ``compare.json`` holds): final and curve spread are the
    sample sd over seeds (values 1, 2, 4: sd 1.528, not the population 1.247); one seed has sd 0."""
    aggregate = resolve(f"{ROOT / 'benchmarks' / 'acpo_common.py'}:aggregate")
    recs = [
        {
            "algo": "a",
            "seed": s,
            "curve": [{"env_steps": 1, "avg_reward": v, "avg_costs": [v]}],
            "final_avg_reward": v,
            "final_avg_costs": [2 * v],
        }
        for s, v in enumerate([1.0, 2.0, 4.0])
    ]
    out = aggregate(recs, "algo")["a"]
    assert out["final_reward_sd"] == pytest.approx(1.5275252316519468, rel=1e-12)
    assert out["final_cost_sd"] == pytest.approx(2 * 1.5275252316519468, rel=1e-12)
    assert out["reward_sd"] == pytest.approx([1.5275252316519468], rel=1e-12)
    assert aggregate(recs[:1], "algo")["a"]["final_reward_sd"] == 0.0


def test_ecop_report_prints_the_sample_sd_of_the_committed_runs():
    """``benchmarks/ecop_report.py`` prints mean ± sample sd from ``NAME.runs.jsonl`` (the docs' tables),
    not the JSON's 1.96 sd/√n: e-COP on PointCircle, 100k steps, returns 57.3 / 76.5 / 57.7 / 39.6 / 26.6."""
    table = resolve(f"{ROOT / 'benchmarks' / 'ecop_report.py'}:table")
    out = table("table_pointcircle_100k", {})
    assert "| ecop | 51.5 ± 19.1 | 6.2 ± 1.9 |" in out, out

"""The README's MOPO tables are ``bayescrl report`` over committed sweep folders
(``benchmarks/results/sweeps/mopo_{tabular,sanity,bayes}``); the report's derived ratio cells
(``report.ratios``) and wildcard pivot cells, against hand-computed numbers."""

import json
import shutil
from pathlib import Path

import pytest

from bayescrl.sweep.report import build_report
from bayescrl.sweep.spec import parse_sweep
from bayescrl.utils.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = ROOT / "benchmarks" / "results" / "sweeps"
README = (ROOT / "README.md").read_text()


def _report(tmp_path, name: str) -> str:
    """The report of a committed sweep folder, built on a copy (the committed files stay untouched)."""
    out = tmp_path / name
    shutil.copytree(SWEEPS / name, out)
    return build_report(out, plots=False)["markdown"]


def test_readme_mopo_tables_are_the_reports_of_the_committed_sweeps(tmp_path):
    """Each quoted row is a line of the report's output and of the README: a changed result file, a
    changed report format or a hand-edited README number fails."""
    bayes = _report(tmp_path, "mopo_bayes")
    row = "| 0.1 | 0.701 (10) | 0.1086 (10) | 0.2816 (10) | 0.2498 (10) |"
    assert row in bayes and row in README
    sanity = _report(tmp_path, "mopo_sanity")
    row = (
        "| D2 | 0.4748 ± 0.03872 / 2.062e-07 ± 8.103e-09 / 0.5252 ± 0.03872 (3) "
        "| 0.5682 ± 0.009115 / 0.05564 ± 0.002841 / 0.3762 ± 0.006274 (3) |"
    )
    assert row in sanity and row in README
    tabular = _report(tmp_path, "mopo_tabular")
    assert "| 4 | 0.005661 ± 0.002044 (4) |" in tabular and "0.005661 ± 0.002044" in README


def test_mopo_bayes_sweep_runs_are_the_benchmarks_seeds():
    """The sweep's run (data set, tau, seed) has the TVs of seed s in benchmarks/mopo_bayes.py's JSON
    (each seed seeded by its data set and seed alone), bit for bit."""
    bench = json.loads((ROOT / "benchmarks" / "results" / "mopo" / "bayes_prefs.json").read_text())
    for data, tau, seed in (("D1", "0.1", 0), ("random8", "1.0", 7)):
        run = json.loads(
            (SWEEPS / "mopo_bayes" / f"data={data}_tau={tau}_s{seed}" / "result.json").read_text()
        )
        for m in ("empirical", "bt_known", "bt_infer"):
            want = bench["sets"][data]["methods"][m]["tv_per_seed"][tau][seed]
            assert run["tv"][m] == want  # bit for bit


# a sweep whose report block the tests extend
BASE = """
command: call
target: benchmarks/mopo_bayes.py:sweep_job
grid: {data: [A, B], part: [p], seed: [0, 1]}
report:
  metrics: ["runs.*.x", y]
"""


@pytest.mark.parametrize(
    ("report", "field"),
    [
        ('  ratios: {r: ["runs.*.x", y]}\n', "report.ratios"),  # a ratio names two metric keys
        ("  ratios: {r: [y]}\n", "report.ratios"),
        ('  pivot: {rows: part, columns: data, cells: ["runs.*.z"]}\n', "report.pivot.cells"),  # not a metric
    ],
)
def test_report_ratios_and_wildcard_cells_are_checked(report, field):
    import yaml

    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        parse_sweep(yaml.safe_load(BASE + report))


def test_report_ratio_cells_against_hand_computed_numbers(tmp_path):
    """y_over_y = mean y / mean y per group (A: 1; B: mean y = 0 gives no number); a wildcard metric
    matching one key per run (runs.A/t.x, runs.B/t.x) is one column, usable as a pivot cell."""
    text = BASE + (
        "  ratios: {y_over_y: [y, y], r: [y, z]}\n"
        '  pivot: {rows: part, columns: data, cells: ["runs.*.x", y_over_y]}\n'
    )
    import yaml

    spec = parse_sweep(yaml.safe_load(text))
    out = tmp_path / "sw"
    (out / "status").mkdir(parents=True)
    runs = []
    vals = {"A": [(1.0, 4.0), (3.0, 8.0)], "B": [(2.0, 0.0), (2.0, 0.0)]}
    for data, per_seed in vals.items():
        for seed, (x, y) in enumerate(per_seed):
            rid = f"{data}_s{seed}"
            runs.append({"id": rid, "point": {"data": data, "part": "p", "seed": seed}, "argv": []})
            (out / rid).mkdir()
            (out / rid / "result.json").write_text(json.dumps({"runs": {f"{data}/t": {"x": x}}, "y": y}))
            (out / "status" / f"{rid}.json").write_text(json.dumps({"status": "done"}))
    (out / "sweep.json").write_text(json.dumps({"hash": spec.hash, "spec": spec.raw, "runs": runs}))
    rep = build_report(out, plots=False)
    groups = {g["point"]["data"]: g["metrics"] for g in rep["groups"]}
    assert groups["A"]["runs.*.x"]["mean"] == 2.0 and groups["A"]["y_over_y"]["mean"] == 1.0
    assert groups["A"]["y_over_y"]["n"] == 2 and groups["A"]["y_over_y"]["sd"] is None
    assert groups["B"]["y_over_y"]["mean"] is None  # mean y = 0: no ratio
    assert groups["A"]["r"]["mean"] is None and groups["A"]["r"]["n"] == 0  # z is no metric
    md = rep["markdown"]
    assert "| p | 2 ± 1.414 / 1 (2) | 2 ± 0 / – (2) |" in md
    assert "y_over_y = mean y / mean y" in md


@pytest.mark.parametrize(
    ("grid", "msg"),
    [
        ("{data: [D1, D9], tau: [0.1], seed: [0]}", "data = 'D9': unknown data set"),
        ("{data: [D1], tau: [0.0], seed: [0]}", "tau = 0.0: must be a number > 0"),
    ],
)
def test_mopo_bayes_sweep_bad_grid_point_is_one_line_before_any_run(tmp_path, capsys, grid, msg):
    from bayescrl.cli import main

    text = (ROOT / "examples" / "sweeps" / "mopo_bayes.yaml").read_text()
    text = text.replace("target: ../../benchmarks/", f"target: {ROOT}/benchmarks/")
    start = text.index("\ngrid:")
    text = text[:start] + f"\ngrid: {grid}" + text[text.index("\nreport:") :]
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(SystemExit) as exc:
        main(["sweep", str(path), "--out", str(tmp_path / "o"), "--dry-run"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and msg in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()

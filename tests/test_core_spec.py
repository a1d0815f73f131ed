"""Spec / data-file validation (every bad-input case names field, record index and value) and the CLI."""

import copy
import json

import numpy as np
import pytest
import torch

from bayescrl.cli import main
from bayescrl.models.simulate import simulate
from bayescrl.models.spec import from_spec
from bayescrl.utils import ConfigError, DataError, set_torch_threads

set_torch_threads(1)

GOOD = {
    "dim": 2,
    "prior": {"mean": [0.0, 0.0], "cov": [[1.0, 0.0], [0.0, 1.0]]},
    "noise_sd": 0.5,
    "raters": [{"id": "r0", "beta": 10.0, "lam": 100.0}, {"id": "r1", "beta": 1.0, "lam": 2.0}],
    "preferences": [
        {"x0": [1.0, 0.0], "x1": [0.0, 1.0], "y": 0, "rater": "r0"},
        {"x0": [0.5, 0.5], "x1": [0.0, 1.0], "y": 1, "rater": "r1", "online": True},
    ],
    "rewards": [{"x": [1.0, 0.0], "r": 0.37}],
}


def test_good_spec_parses_to_problem():
    m = from_spec(GOOD)
    p = m.problem
    assert p.dim == 2 and p.num_raters == 2 and int(p.n_pref) == 2 and int(p.n_reward) == 1
    assert p.rater.tolist() == [0, 1] and p.pref_online.tolist() == [False, True]
    assert p.y.tolist() == [0.0, 1.0] and m.rater_ids == ("r0", "r1")
    # lists may be empty or absent
    m2 = from_spec({"dim": 3})
    assert m2.problem.n_pref == 0 and torch.equal(m2.problem.cov0, torch.eye(3, dtype=torch.float64))


def _set(path, value):
    spec = copy.deepcopy(GOOD)
    node = spec
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return spec


BAD = [
    (("preferences", 1, "x0"), [1.0, 2.0, 3.0], r"preferences\.x0\[1\] = \[1\.0, 2\.0, 3\.0\]: .*dim = 2"),
    (("preferences", 0, "y"), 2, r"preferences\.y\[0\] = 2: must be 0"),
    (("preferences", 1, "rater"), "nobody", r"preferences\.rater\[1\] = 'nobody': unknown rater id"),
    (("preferences", 0, "x1"), [float("nan"), 0.0], r"preferences\.x1\[0\] = nan: must be finite"),
    (("rewards", 0, "x"), [1.0], r"rewards\.x\[0\] = \[1\.0\]"),
    (("rewards", 0, "r"), float("inf"), r"rewards\.r\[0\] = inf: must be finite"),
    (("rewards", 0, "r"), "high", r"rewards\.r\[0\] = 'high': must be a number"),
    (("raters", 1, "beta"), -1.0, r"raters\.beta\[1\] = -1\.0: must be >= 0"),
    (("raters", 0, "lam"), 0.0, r"raters\.lam\[0\] = 0\.0: must be > 0"),
    (("raters", 1, "id"), "r0", r"raters\.id\[1\] = 'r0': duplicate"),
    (("prior", "cov"), [[1.0, 2.0], [2.0, 1.0]], r"prior\.cov = .*positive definite"),
    (("prior", "cov"), [[1.0, 0.5], [0.0, 1.0]], r"prior\.cov = .*symmetric"),
    (("prior", "mean"), [0.0], r"prior\.mean = \[0\.0\]: must be a list of dim = 2"),
    (("noise_sd",), 0.0, r"noise_sd = 0\.0: must be > 0"),
    (("dim",), 0, r"dim = 0: must be an integer >= 1"),
    (("raters", 0, "beta"), {"prior": "cauchy"}, r"raters\.beta\.prior\[0\] = 'cauchy'"),
    (("raters", 0, "beta"), {"prior": "gamma", "concentration": 2.0}, r"raters\.beta\.rate\[0\]"),
    (("preferences", 0, "online"), "yes", r"preferences\.online\[0\] = 'yes'"),
]


@pytest.mark.parametrize(
    "path,value,message", BAD, ids=[".".join(map(str, b[0])) + f"={b[1]!r}" for b in BAD]
)
def test_bad_input_names_field_index_value(path, value, message):
    with pytest.raises(ConfigError, match=message):
        from_spec(_set(path, value))


def test_missing_field_and_bad_transitions():
    spec = copy.deepcopy(GOOD)
    del spec["preferences"][1]["y"]
    with pytest.raises(DataError, match=r"preferences\.y\[1\] = None: missing field"):
        from_spec(spec)
    t = {"num_states": 2, "num_actions": 1, "alpha0": 1.0, "data": [{"s": 0, "a": 0, "next": 5}]}
    with pytest.raises(DataError, match=r"transitions\.data\.next\[0\] = 5"):
        from_spec({**GOOD, "transitions": t})
    t = {"num_states": 2, "num_actions": 1, "alpha0": [1.0, -1.0]}
    with pytest.raises(DataError, match=r"transitions\.alpha0\[1\] = -1\.0: must be > 0"):
        from_spec({**GOOD, "transitions": t})


def test_simulate_labels_follow_the_rater():
    base = {"dim": 2, "raters": [{"id": "e", "beta": 1000.0, "lam": 1e6}]}
    data = simulate(base, num_prefs=200, num_arms=None, seed=0)
    theta = torch.tensor(data["truth"]["theta"])
    y = torch.tensor([p["y"] for p in data["preferences"]], dtype=torch.float64)
    x0 = torch.tensor([p["x0"] for p in data["preferences"]])
    x1 = torch.tensor([p["x1"] for p in data["preferences"]])
    # an almost perfect rater: y = 1 iff x1 has the larger reward (Y = 0 means x0 preferred)
    agree = ((x1 - x0) @ theta > 0).double() == y
    assert agree.double().mean() > 0.97
    from_spec(data)  # the output is a complete, valid spec


def test_cli_simulate_infer_and_errors(tmp_path, capsys):
    import arviz as az

    rater = tmp_path / "rater.yaml"
    rater.write_text("dim: 2\nraters: [{id: a, beta: 5.0, lam: 10.0}]\n")
    data = tmp_path / "data.json"
    main(["simulate", str(rater), "--num-prefs", "30", "--num-rewards", "5", "--out", str(data)])
    out = tmp_path / "post.nc"
    main(
        [
            "infer",
            str(data),
            "--engine",
            "bootstrap",
            "--samples",
            "64",
            "--out",
            str(out),
            "--no-progress",
            "--set",
            "engine_options.p_offline=0.6",
        ]
    )
    idata = az.from_netcdf(str(out))
    assert idata.posterior["theta"].dims == ("chain", "draw", "theta_dim")
    assert idata.posterior["theta"].shape == (4, 16, 2)  # independent draws in 4 chains
    ll = idata.log_likelihood["joint"]  # prefs and rewards: one joint variable, so az.loo works
    assert ll.shape[:2] == (4, 16) and sum(str(o).startswith("pref[") for o in ll["observation"].values) == 30
    summary = json.loads(out.with_suffix(".json").read_text())
    assert summary["diagnostics"]["converged_fraction"] == 1.0
    assert summary["diagnostics"]["options"]["p_offline"] == 0.6  # --set engine_options reached the engine
    draws = torch.as_tensor(idata.posterior["theta"].values).reshape(64, 2).double()  # summarised draws
    torch.testing.assert_close(
        torch.tensor(summary["theta_mean"], dtype=torch.float64), draws.mean(0), rtol=1e-9, atol=1e-12
    )
    torch.testing.assert_close(
        torch.tensor(summary["theta_sd"], dtype=torch.float64), draws.std(0), rtol=1e-9, atol=1e-12
    )
    bad = json.loads(data.read_text())
    bad["preferences"][3]["y"] = 7
    data.write_text(json.dumps(bad))
    with pytest.raises(SystemExit) as exc:
        main(["infer", str(data), "--out", str(out)])
    assert exc.value.code == 2
    assert "error: preferences.y[3] = 7: must be 0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["infer", str(data), "--engine", "exact", "--out", str(out)])
    assert exc.value.code == 2


def _many(n=60, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2 * n + 7, d, generator=g, dtype=torch.float64).tolist()
    return {
        "dim": d,
        "raters": [{"id": "a", "beta": 2.0, "lam": 3.0}, {"id": "b", "beta": 1.0, "lam": 1.0}],
        "preferences": [
            {"x0": x[2 * i], "x1": x[2 * i + 1], "y": i % 2, "rater": "ab"[i % 3 % 2], "online": i % 5 == 0}
            for i in range(n)
        ],
        "rewards": [{"x": x[2 * n + i], "r": 0.1 * i} for i in range(7)],
    }


def test_bulk_validation_gives_the_records_values():
    spec = _many()
    p = from_spec(spec).problem
    recs = spec["preferences"]
    assert torch.equal(p.x0, torch.tensor([r["x0"] for r in recs], dtype=torch.float64))
    assert torch.equal(p.x1, torch.tensor([r["x1"] for r in recs], dtype=torch.float64))
    assert p.y.tolist() == [float(r["y"]) for r in recs]
    assert p.rater.tolist() == [{"a": 0, "b": 1}[r["rater"]] for r in recs]
    assert p.pref_online.tolist() == [r["online"] for r in recs]
    assert torch.equal(p.x, torch.tensor([r["x"] for r in spec["rewards"]], dtype=torch.float64))
    assert p.r.tolist() == [0.1 * i for i in range(7)]
    # ints, tuples and a y given as 1.0 are numbers as before
    spec["preferences"][3].update(x0=(1, 2, 3, 4, 5), y=1.0)
    p = from_spec(spec).problem
    assert p.x0[3].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0] and p.y[3] == 1.0


BULK_BAD = [
    ("x0", [0.0, 1.0, float("inf"), 0.0, 0.0], r"preferences\.x0\[17\] = inf: must be finite"),
    ("x1", [0.0, True, 0.0, 0.0, 0.0], r"preferences\.x1\[17\] = True: must be a number"),
    ("x1", [0.0] * 4, r"preferences\.x1\[17\] = .*dim = 5 numbers \(got 4\)"),
    ("x0", "abc", r"preferences\.x0\[17\] = 'abc': must be a list"),
    ("y", True, r"preferences\.y\[17\] = True: must be 0"),
    ("y", 0.5, r"preferences\.y\[17\] = 0\.5: must be 0"),
    ("rater", "c", r"preferences\.rater\[17\] = 'c': unknown rater id"),
    ("rater", None, r"preferences\.rater\[17\] = None: required when there are several raters"),
    ("online", 1, r"preferences\.online\[17\] = 1: must be true or false"),
    ("y", None, r"preferences\.y\[17\] = None: missing field"),
]


@pytest.mark.parametrize("key,value,message", BULK_BAD, ids=[f"{b[0]}={b[1]!r}" for b in BULK_BAD])
def test_bulk_validation_reports_the_first_bad_record(key, value, message):
    spec = _many()
    spec["preferences"][41]["x0"] = [float("nan")] * 5  # a later bad record must not be the one reported
    if value is None and key == "y":
        del spec["preferences"][17]["y"]
    else:
        spec["preferences"][17][key] = value
    with pytest.raises(DataError, match=message):
        from_spec(spec)
    bad_reward = _many()
    bad_reward["rewards"][5]["x"][2] = float("nan")
    bad_reward["rewards"][6]["r"] = "x"
    with pytest.raises(DataError, match=r"rewards\.x\[5\] = nan: must be finite"):
        from_spec(bad_reward)


def test_load_spec_reads_json_strictly_and_yaml(tmp_path):
    from bayescrl.commands.infer import _load
    from bayescrl.models.spec import from_spec, load_spec

    spec = _many(n=4)
    spec["preferences"][0]["x0"][0] = 1e-05  # json writes "1e-05": YAML 1.1 reads that as a string
    data = tmp_path / "data.json"
    data.write_text(json.dumps(spec))
    assert "1e-05" in data.read_text()
    assert load_spec(data) == spec
    assert from_spec(data).problem.x0[0, 0] == 1e-05
    yml = tmp_path / "spec.yaml"
    yml.write_text(
        "dim: 2\nraters: [{id: a, beta: 2.0, lam: 3.0}]\npreferences:\n  - {x0: [1, 0], x1: [0, 1], y: 1}\n"
    )
    assert int(from_spec(yml).problem.n_pref) == 1
    flow = tmp_path / "flow.json"  # YAML flow style in a .json file is still accepted
    flow.write_text("{dim: 2, noise_sd: 0.5}")
    assert load_spec(flow) == {"dim": 2, "noise_sd": 0.5}
    with pytest.raises(ConfigError, match="file not found"):
        load_spec(tmp_path / "missing.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_spec(tmp_path / "list.json")
    # `infer --set`: overrides apply, untouched record lists are passed through
    out = _load(str(data), ("noise_sd=0.25", "prior.cov=2.0"))
    assert out["noise_sd"] == 0.25 and out["prior"] == {"cov": 2.0} and "noise_sd" not in spec
    assert out["preferences"] == spec["preferences"] and out["rewards"] == spec["rewards"]
    assert _load(str(data), ("rewards=[]",))["rewards"] == []


def test_simulate_never_compares_an_arm_with_itself():
    from bayescrl.models.simulate import simulate

    base = {"dim": 2, "raters": [{"id": "a", "beta": 2.0}]}
    data = simulate(base, num_prefs=400, num_arms=2, heldout=100, seed=0)  # i.i.d. draws: half collide
    for rec in data["preferences"] + data["heldout"]:
        assert rec["x0"] != rec["x1"]
    first = [tuple(r["x0"]) for r in data["preferences"]]
    assert 160 < first.count(first[0]) < 240  # both orders of the one pair, about equally often
    three = simulate(base, num_prefs=3000, num_arms=3, seed=1)["preferences"]
    pairs = {(tuple(r["x0"]), tuple(r["x1"])) for r in three}
    assert len(pairs) == 6  # every ordered pair of distinct arms, none of an arm with itself
    counts = np.array([sum((tuple(r["x0"]), tuple(r["x1"])) == p for r in three) for p in pairs])
    assert (abs(counts / 3000 - 1 / 6) < 0.03).all()  # uniform over the ordered pairs

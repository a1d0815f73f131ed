"""`bayescrl demo`: the best agent (Algorithm `Prefwarm-PS`, Laplace prior) beats naive-PS, which beats PS."""

import json
import math

from click.testing import CliRunner

from bayescrl.commands.demo import DEMO_CONFIG, demo


def test_demo_shows_best_agent_first_with_bands(tmp_path):
    assert DEMO_CONFIG["agents"][0] == "warmpref-ps"  # Alg. 1, not the (worse, slower) bootstrap
    res = CliRunner().invoke(demo, ["--seeds", "30", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    out = json.loads((tmp_path / "results.json").read_text())
    final = {k: v["final_regret_mean"] for k, v in out["agents"].items()}
    se = {k: v["final_regret_std"] / math.sqrt(30) for k, v in out["agents"].items()}

    # the ordering is clear: gaps of several standard errors of the difference (hypot: no credit taken for
    # the agents sharing each seed's task)
    def gap_se(a: str, b: str) -> float:
        return math.hypot(se[a], se[b])

    assert final["warmpref-ps"] + 3 * gap_se("warmpref-ps", "naive-ps") < final["naive-ps"]
    assert final["naive-ps"] + 3 * gap_se("naive-ps", "ps") < final["ps"]
    assert (tmp_path / "regret.png").stat().st_size > 10_000
    table = res.output.splitlines()[2:6]  # title, header, then one row per agent, best first
    names = [ln[:26].strip() for ln in table]
    assert names[:2] == ["warmPref-PS (Alg. 1)", "naive-PS"] and set(names[2:]) == {"PS", "LinTS"}  # tied
    assert "less regret than PS" in res.output

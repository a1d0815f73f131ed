"""learn(callback=...): SB3-style callbacks do the logging and checkpointing; a RewardAdapter relabels
rollouts through a read-only view; the layers stay apart (constrained never imports prefrl, prefrl never
reads the algorithm's internals)."""

import ast
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from bayescrl.constrained.core.adapter import AlgorithmView, BaseRewardAdapter, RewardAdapter
from bayescrl.constrained.core.callbacks import BaseCallback, Checkpointer, MetricsWriter, ResultsWriter
from bayescrl.constrained.core.protocol import TrainingAlgorithm
from bayescrl.constrained.core.rollout import RolloutBatch
from bayescrl.constrained.registry import get_algorithm
from bayescrl.envs import make_small_cmdp
from bayescrl.utils.errors import ConfigError

CFG = {"n_envs": 2, "rollout_steps": 8, "update_epochs": 1, "normalize_obs": False}
ROOT = Path(__file__).resolve().parents[1] / "bayescrl"


def _agent(algo="ppo-lag"):
    return get_algorithm(algo)(make_small_cmdp("finite", horizon=4).make_env, [1.0], 0, CFG)


class Recorder(BaseCallback):
    def __init__(self, stop_at=None):
        self.events, self.stop_at = [], stop_at

    def on_training_start(self, total_steps):
        self.events.append(("start", total_steps, self.algo.collector.global_step))

    def on_iteration(self, record):
        self.events.append(("iter", record["iteration"]))
        record["mine"] = 7 * record["iteration"]  # written by the MetricsWriter that follows
        return record["iteration"] != self.stop_at

    def on_training_end(self):
        self.events.append(("end", self.algo.iteration))


def test_callbacks_see_every_iteration_add_fields_and_stop_training(tmp_path):
    algo = _agent()
    rec, results = Recorder(stop_at=2), ResultsWriter(tmp_path)
    algo.write_results = lambda out, episodes: {"out": out, "iterations": algo.iteration}  # no plotting here
    calls = []
    algo.learn(
        16 * 10,
        progress=False,
        callback=[rec, lambda a, r: calls.append((a, r["iteration"])), MetricsWriter(tmp_path), results],
    )
    # False from on_iteration ends training after that iteration; every callback saw it, end called once
    assert rec.events == [("start", 160, 0), ("iter", 1), ("iter", 2), ("end", 2)]
    assert calls == [(algo, 1), (algo, 2)] and algo.collector.global_step == 32
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [x["mine"] for x in lines] == [7, 14]
    assert results.metrics == {"out": tmp_path, "iterations": 2}
    algo.close()


def test_checkpointer_saves_every_n_iterations_and_at_the_end(tmp_path, monkeypatch):
    algo = _agent()
    saved = []
    monkeypatch.setattr(algo, "save", lambda path: saved.append((algo.iteration, Path(path))))
    algo.learn(16 * 5, progress=False, callback=Checkpointer(tmp_path, every=2))
    assert saved == [(2, tmp_path), (4, tmp_path), (5, tmp_path)]
    algo.close()
    with pytest.raises(ConfigError, match="callback"):
        _agent().learn(16, progress=False, callback=3)


class Negate(BaseRewardAdapter):
    record_info = None

    def __init__(self, stop_after=None):
        self.stop_after, self.views, self.batches = stop_after, [], []

    def relabel(self, batch):
        self.batches.append(batch)
        return dataclasses.replace(batch, rewards=batch.rewards * np.array([-1.0, 1.0]))

    def on_iteration(self, view, record):
        self.views.append((view.iteration, view.env_steps, view.total_steps))
        record["negated"] = True

    def should_stop(self):
        return self.stop_after is not None and len(self.views) >= self.stop_after


def test_a_reward_adapter_relabels_every_rollout_before_the_update():
    algo = _agent()
    seen = []
    core_update = algo.update
    algo.update = lambda b: (seen.append(b.rewards[:, 0].double().clone()), core_update(b))[1]
    adapter = Negate(stop_after=3)
    assert isinstance(adapter, RewardAdapter)
    algo.set_reward_adapter(adapter)
    algo.learn(16 * 10, progress=False)
    assert adapter.views == [(1, 16, 160), (2, 32, 160), (3, 48, 160)]  # should_stop ended it after 3
    assert all(r["negated"] for r in algo.history)
    for batch, upd in zip(adapter.batches, seen, strict=True):
        assert isinstance(batch, RolloutBatch) and batch.shape == (8, 2)
        np.testing.assert_array_equal(upd.numpy(), -batch.rewards[..., 0].reshape(-1))  # env reward, negated
    algo.close()


@pytest.mark.parametrize("algo", ["ppo-lag", "ecop", "cpo"])
def test_every_optimiser_is_what_its_callbacks_and_adapters_are_typed_against(algo):
    """Callbacks and adapters type the optimiser as the TrainingAlgorithm protocol (no import of the loop):
    an optimiser must carry every attribute and method it names."""
    agent = _agent(algo)
    assert isinstance(agent, TrainingAlgorithm)
    agent.close()
    del agent.collector  # the check reads the attributes: without one, the optimiser no longer qualifies
    assert not isinstance(agent, TrainingAlgorithm)


def test_the_view_is_read_only_and_tells_what_an_adapter_needs():
    algo = _agent("acpo")
    view = algo.view()
    assert isinstance(view, AlgorithmView)
    assert (view.num_costs, view.horizon, view.num_envs, view.cost_limits) == (1, 4, 2, [1.0])
    assert view.episode_cost_limits() == [4.0]  # ACPO: a rate per step, times H
    assert view.average_reward and view.iteration == 0 and view.total_steps is None
    assert (view.episode_horizon, view.rollout_steps) == (4, 8)
    with pytest.raises(AttributeError):
        view.horizon = 3
    algo.close()


def test_layers_constrained_never_imports_prefrl_and_prefrl_reads_no_algorithm_internals():
    core = [p for p in (ROOT / "constrained").rglob("*.py") if p.name != "cli.py"]  # cli: the command layer
    imports = [
        (p.name, n.module if isinstance(n, ast.ImportFrom) else n.names[0].name)
        for p in core
        for n in ast.walk(ast.parse(p.read_text()))
        if isinstance(n, ast.Import | ast.ImportFrom)
    ]
    assert len(imports) > 50 and not [x for x in imports if "prefrl" in (x[1] or "")]
    public = {"view", "set_reward_adapter", "learn", "close"}  # all prefrl may call on an optimiser
    reads = []
    for p in (ROOT / "prefrl").glob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if not isinstance(node, ast.Attribute):
                continue
            v = node.value
            if (isinstance(v, ast.Name) and v.id in ("algo", "agent")) or (
                isinstance(v, ast.Attribute) and v.attr == "algo"
            ):
                reads += [] if node.attr in public else [f"{p.name}:{node.lineno} .{node.attr}"]
    assert not reads

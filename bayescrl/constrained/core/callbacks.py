"""Callbacks of :meth:`~bayescrl.constrained.core.base.OnPolicyAlgorithm.learn` (Stable-Baselines3's
``BaseCallback``): what is logged, written, saved or drawn during training lives here, not in the loop.

``learn(total_steps, callback=...)`` takes one :class:`BaseCallback`, a list of them, or a plain function
``fn(algo, record)``. Every callback is bound to the algorithm (``self.algo``), told when training starts,
handed each iteration's record (a dict it may add fields to, before later callbacks write it) and told when
training ends; :meth:`BaseCallback.on_iteration` returning ``False`` ends training after this iteration.

    from bayescrl.constrained.core.callbacks import CallbackList, Checkpointer, MetricsWriter, ProgressBar

    agent.learn(100_000, callback=[MetricsWriter("runs/a"), Checkpointer("runs/a"), ProgressBar()])
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bayescrl.constrained.core.protocol import TrainingAlgorithm
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import to_jsonable

METRICS_LINES = "metrics.jsonl"


class BaseCallback:
    """Override any of :meth:`on_training_start`, :meth:`on_iteration`, :meth:`on_training_end`."""

    algo: TrainingAlgorithm | None = None

    def init_callback(self, algo: TrainingAlgorithm) -> None:
        """Bind to the algorithm being trained (called by ``learn`` before :meth:`on_training_start`)."""
        self.algo = algo

    def on_training_start(self, total_steps: int) -> None:
        """``learn(total_steps)`` begins (``algo.collector.global_step`` may be > 0 on a resumed run)."""

    def on_iteration(self, record: dict) -> bool | None:
        """After each update: ``record`` is the iteration's log entry (``algo.history[-1]``). Return
        ``False`` to stop training after this iteration."""
        return None

    def on_training_end(self) -> None:
        """``learn`` ends (budget reached or stop requested)."""


class CallbackList(BaseCallback):
    """Several callbacks, called in order; training stops when any of them returns ``False``."""

    def __init__(self, callbacks: Iterable[BaseCallback]):
        self.callbacks = list(callbacks)

    def init_callback(self, algo: TrainingAlgorithm) -> None:
        super().init_callback(algo)
        for cb in self.callbacks:
            cb.init_callback(algo)

    def on_training_start(self, total_steps: int) -> None:
        for cb in self.callbacks:
            cb.on_training_start(total_steps)

    def on_iteration(self, record: dict) -> bool:
        go = True
        for cb in self.callbacks:
            go = cb.on_iteration(record) is not False and go
        return go

    def on_training_end(self) -> None:
        for cb in self.callbacks:
            cb.on_training_end()


class FunctionCallback(BaseCallback):
    """A plain function ``fn(algo, record)`` called every iteration (its return value is ignored)."""

    def __init__(self, fn: Callable[[Any, dict], Any]):
        self.fn = fn

    def on_iteration(self, record: dict) -> None:
        self.fn(self.algo, record)


class MetricsWriter(BaseCallback):
    """Appends each iteration's record as one JSON line to ``out_dir/metrics.jsonl``."""

    def __init__(self, out_dir: str | Path):
        self.path = Path(out_dir) / METRICS_LINES

    def on_training_start(self, total_steps: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def on_iteration(self, record: dict) -> None:
        with open(self.path, "a") as fh:
            fh.write(json.dumps(to_jsonable(record)) + "\n")


class Checkpointer(BaseCallback):
    """Saves ``out_dir/checkpoint.pt`` every ``every`` iterations (default: the config's
    ``checkpoint_every``; 0 never) and when training ends."""

    def __init__(self, out_dir: str | Path, every: int | None = None):
        self.out_dir, self.every = Path(out_dir), every

    def on_training_start(self, total_steps: int) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)

    def on_iteration(self, record: dict) -> None:
        every = self.algo.config.checkpoint_every if self.every is None else self.every
        if every and self.algo.iteration % every == 0:
            self.algo.save(self.out_dir)

    def on_training_end(self) -> None:
        self.algo.save(self.out_dir)


class ProgressBar(BaseCallback):
    """A tqdm bar over env steps with the last return, costs and throughput."""

    bar = None

    def on_training_start(self, total_steps: int) -> None:
        from tqdm.auto import tqdm

        self.total = total_steps
        self.bar = tqdm(
            total=total_steps,
            initial=min(self.algo.collector.global_step, total_steps),
            unit="step",
            desc=f"{self.algo.name}",
            dynamic_ncols=True,
            leave=False,
        )

    def on_iteration(self, record: dict) -> None:
        self.bar.update(min(self.algo.collector.global_step, self.total) - self.bar.n)
        costs = ",".join(f"{c:.1f}" for c in record["ep_costs"])
        self.bar.set_postfix_str(f"R={record['ep_return']:.1f} C=[{costs}] sps={record['steps_per_s']:.0f}")

    def on_training_end(self) -> None:
        if self.bar is not None:
            self.bar.close()


class ResultsWriter(BaseCallback):
    """When training ends: the final evaluation, ``metrics.json``, ``curves.json`` and ``curves.png``
    (:meth:`~bayescrl.constrained.core.base.OnPolicyAlgorithm.write_results`); kept in :attr:`metrics`."""

    def __init__(self, out_dir: str | Path, eval_episodes: int | None = None):
        self.out_dir, self.eval_episodes = Path(out_dir), eval_episodes
        self.metrics: dict | None = None

    def on_training_end(self) -> None:
        self.metrics = self.algo.write_results(self.out_dir, self.eval_episodes)


#: what ``learn(callback=...)`` accepts
MaybeCallback = BaseCallback | list | Callable[[Any, dict], Any] | None


def as_callback(callback: MaybeCallback) -> BaseCallback:
    """One :class:`BaseCallback` from ``None``, a callback, a function ``fn(algo, record)`` or a list."""
    if callback is None:
        return CallbackList([])
    if isinstance(callback, BaseCallback):
        return callback
    if isinstance(callback, (list, tuple)):
        return CallbackList(as_callback(c) for c in callback)
    if callable(callback):
        return FunctionCallback(callback)
    raise ConfigError("callback", type(callback).__name__, "must be a BaseCallback, a list or a function")

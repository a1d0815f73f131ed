"""A ``bayescrl train`` run as library calls: read a run file, start or resume a run, train it.

The command (``bayescrl.commands.train``) only parses options, calls these and prints; a Python user or a
sweep calls them directly::

    from bayescrl.constrained.run import train
    metrics = train("ecop", "bayescrl/PointCircle-v0", total_steps=200_000, cost_limits=[10], out_dir="x")

A run learning its reward from preferences goes through :func:`bayescrl.prefrl.run.prepare_train`, which
builds on the pieces here (:func:`new_run`, :func:`resume_run`, :func:`learn`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bayescrl.constrained.core.base import CHECKPOINT, OnPolicyAlgorithm
from bayescrl.constrained.core.callbacks import Checkpointer, MetricsWriter, ProgressBar, ResultsWriter
from bayescrl.constrained.core.envs import resolve_env_factory
from bayescrl.constrained.registry import get_algorithm
from bayescrl.utils.checks import check_memory, positive_int
from bayescrl.utils.configpaths import load_config
from bayescrl.utils.errors import BayesCRLError, ConfigError, DataError
from bayescrl.utils.io import apply_overrides, check_keys, load_json, trim_jsonl, write_json
from bayescrl.utils.outdir import prepare_out_dir
from bayescrl.utils.runlog import RunLogger

#: top-level keys of a ``--config`` run file
RUN_KEYS = ("algo", "env", "env_kwargs", "total_steps", "seed", "cost_limits", "config", "out", "preferences")
#: file paths of a run file (resolved against the run file; a path given by --set or an option: the cwd)
PATH_KEYS = ("preferences", "preferences.offline", "out")
#: files a train run writes (named in its closing line when present)
RUN_FILES = ("metrics.json", "curves.json", "curves.png", "metrics.jsonl", "run.json", "checkpoint.pt")


def positive_steps(value: Any) -> int:
    """``total_steps`` as an integer >= 1 (``1e5`` accepted)."""
    return positive_int(value, "total_steps")


def load_run_spec(config_file: str | Path | None = None, overrides: Iterable[str] = ()) -> dict:
    """The run file ``config_file`` (paths resolved against it) with ``--set`` ``overrides`` applied; its
    keys and its ``config`` mapping checked."""
    spec: dict = load_config(config_file, PATH_KEYS) if config_file else {}
    spec = apply_overrides(spec, overrides or ())
    check_keys(spec, RUN_KEYS)
    if spec.get("config") is not None and not isinstance(spec["config"], dict):
        raise ConfigError("config", spec["config"], "must be a mapping of training options")
    return spec


def load_agent(run_dir: str | Path, device: str = "cpu", option: str = "resume") -> OnPolicyAlgorithm:
    """``OnPolicyAlgorithm.load`` with any failure to decode the checkpoint reported as one line; a missing
    checkpoint is refused on ``option`` (the one that named ``run_dir``)."""
    try:
        return OnPolicyAlgorithm.load(run_dir, device=device)
    except ConfigError as exc:
        if exc.field == "path":  # load's argument: name the option the user gave instead
            raise ConfigError(option, exc.value, exc.reason) from None
        raise
    except BayesCRLError:
        raise
    except Exception as exc:  # a truncated / hand-edited checkpoint: KeyError, EOFError, RuntimeError, ...
        path = str(Path(run_dir) / CHECKPOINT)
        why = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        raise DataError("checkpoint", path, f"cannot be restored (corrupt or truncated?): {why}") from None


def check_size(env_id, env_kwargs, config: dict | None, algo_cls) -> None:
    """Refuse a run whose envs and rollout buffers would not fit in memory (before any env is built)."""
    import gymnasium as gym

    cfg = algo_cls.config_class.from_dict(config)  # unknown / bad options are refused here, by name
    n_envs, steps = int(cfg.n_envs), int(cfg.rollout_steps)
    per_env = 150 * 2**20 if cfg.async_envs else 2 * 2**20  # a process per async env; a sync env object
    if cfg.env_backend == "mjx":
        per_env = 0  # the copies are arrays on the device (the buffers are counted below)
    if n_envs * per_env <= 2**30 and n_envs * steps <= 10**6:
        return  # obviously small: skip probing the env
    env = resolve_env_factory(env_id, env_kwargs)()
    try:
        dims = gym.spaces.flatdim(env.observation_space) + gym.spaces.flatdim(env.action_space)
    finally:
        env.close()
    buffers = n_envs * steps * (2 * dims + 16) * 8
    check_memory(
        n_envs * per_env + buffers, "config.n_envs", n_envs, f"{n_envs} envs x {steps} rollout steps"
    )


def resume_conflicts(agent: OnPolicyAlgorithm, given: Mapping[str, tuple[str, Any]]) -> list[str]:
    """Names of the given settings (``{name: (flag, value)}``, None: not given) that differ from the run
    being resumed."""
    stored = {
        "algo": agent.name,
        "env": agent.env_id,
        "env_kwargs": dict(agent.env_kwargs or {}),
        "seed": agent.seed,
        "cost_limits": [float(d) for d in agent.cost_limits.tolist()],
    }
    config = agent.config.to_dict()
    bad = []
    for name, (flag, value) in given.items():
        if value is None:
            continue
        if name == "config":
            for key, v in value.items():
                if key not in config or config[key] != v:
                    bad.append(f"config.{key}")
            continue
        if name == "cost_limits":
            v = [value] if isinstance(value, (int, float)) else list(value)
            try:
                same = len(v) == len(stored[name]) and all(
                    math.isclose(float(a), b) for a, b in zip(v, stored[name], strict=True)
                )
            except (TypeError, ValueError):
                same = False
            if not same:
                bad.append(flag)
        elif value != stored[name] and str(value) != str(stored[name]):
            bad.append(flag)
    return bad


def run_json(run_dir: str | Path) -> dict | None:
    """The ``run.json`` of a run folder (None if absent); a damaged one is named with how to recover."""
    p = Path(run_dir) / "run.json"
    if not p.exists():
        return None
    fix = "restore it from a copy or start the run again with a new --out (it records the run's settings)"
    return load_json(p, "run.json", kind=dict, recover=fix)


@dataclass
class TrainRun:
    """A run ready to train: its agent, output folder and step budget (from :func:`new_run` or
    :func:`resume_run`); ``resume_dir`` is the folder it continues (None for a new run)."""

    agent: OnPolicyAlgorithm
    out: Path
    total_steps: int
    resume_dir: Path | None = None
    #: extra ``run.json`` entries (a preference run's spec)
    record: dict = field(default_factory=dict)

    def close(self) -> None:
        self.agent.close()


def new_run(
    algo: str | None,
    env: Any,
    *,
    total_steps: Any,
    out_dir: str | Path | None,
    seed: int | None = None,
    cost_limits: Iterable[float] | None = None,
    config: dict | None = None,
    env_kwargs: dict | None = None,
    device: str = "cpu",
    force: bool = False,
) -> TrainRun:
    """A new run of ``algo`` on ``env``: settings checked, the output folder checked (made by
    :func:`start`), the agent built."""
    if algo is None:
        raise ConfigError("algo", None, "give --algo (or 'algo:' in --config)")
    if env is None:
        raise ConfigError("env", None, "give --env (or 'env:' in --config)")
    steps = positive_steps(total_steps)
    seed = seed if seed is not None else 0
    if not out_dir:
        raise ConfigError("--out", None, "give the output folder: --out DIR (or --resume DIR)")
    out = prepare_out_dir(out_dir, force=force, resumable=True, create=False)
    cls = get_algorithm(algo)
    check_size(env, env_kwargs, config, cls)
    agent = cls(env, cost_limits, seed, config or {}, device=device, env_kwargs=env_kwargs)
    return TrainRun(agent, out, steps)


def resume_run(
    resume_dir: str | Path,
    *,
    given: Mapping[str, tuple[str, Any]] | None = None,
    total_steps: Any = None,
    out_dir: str | Path | None = None,
    device: str = "cpu",
) -> TrainRun:
    """The run saved in ``resume_dir``, to continue to ``total_steps`` (default: its own); ``given``
    settings (``{name: (flag, value)}`` for algo, env, env_kwargs, seed, cost_limits, config) must match
    the saved run's."""
    agent = load_agent(resume_dir, device)
    conflicts = resume_conflicts(agent, given or {})
    if conflicts:
        agent.close()
        raise ConfigError(
            "resume",
            str(resume_dir),
            f"{', '.join(conflicts)} differ(s) from the saved run; drop them to resume it as it was "
            "(only --total-steps, --out, --device, --threads and --progress may change)",
        )
    out = prepare_out_dir(out_dir or resume_dir, resume=True)
    steps = positive_steps(
        total_steps if total_steps is not None else (run_json(resume_dir) or {}).get("total_steps")
    )
    trim_jsonl(out / "metrics.jsonl", "iteration", agent.iteration)  # lines after the checkpoint
    return TrainRun(agent, out, steps, resume_dir=Path(resume_dir))


def start(run: TrainRun) -> None:
    """Make a new run's folder (an empty ``metrics.jsonl``) and write ``run.json``."""
    if run.resume_dir is None:
        run.out.mkdir(parents=True, exist_ok=True)
        (run.out / "metrics.jsonl").write_text("")
    agent = run.agent
    write_json(
        run.out / "run.json",
        {
            "algo": agent.name,
            "env": agent.env_id,
            "seed": agent.seed,
            "total_steps": run.total_steps,
            "cost_limits": agent.cost_limits.tolist(),
            "config": agent.config.to_dict(),
            **run.record,
        },
    )


def learn(
    run: TrainRun,
    *,
    progress: bool = False,
    log_dir: str | Path | None = None,
    wandb: Any = None,
    finish: Callable[[dict], dict] | None = None,
) -> dict:
    """Train a started run to its step budget; returns the final metrics (``metrics.json``).

    Writes ``metrics.jsonl`` and the checkpoint each iteration, the results at the end, TensorBoard / W&B
    scalars with ``log_dir`` / ``wandb``; ``finish(metrics)`` (a preference learner's) completes the
    metrics before they are logged. The agent is closed on return."""
    agent, out = run.agent, run.out
    try:
        logger = RunLogger(log_dir, wandb, config=agent.config.to_dict(), name=f"{agent.name}:{out.name}")
    except BayesCRLError:
        agent.close()
        raise
    results = ResultsWriter(out)
    callbacks = [
        *([logger.callback("train/")] if logger.active else []),  # after the learner's fields are added
        MetricsWriter(out),
        Checkpointer(out),
        *([ProgressBar()] if progress else []),
        results,
    ]
    try:
        agent.learn(run.total_steps, progress=False, callback=callbacks)
        metrics = results.metrics
        if finish is not None:
            metrics = finish(metrics)
        logger.scalars(metrics, int(metrics.get("env_steps", 0)), prefix="final/")
    finally:
        agent.close()
        logger.close()
    return metrics


def train(
    algo: str,
    env: Any,
    *,
    total_steps: int,
    out_dir: str | Path,
    seed: int = 0,
    cost_limits: Iterable[float] | None = None,
    config: dict | None = None,
    env_kwargs: dict | None = None,
    device: str = "cpu",
    force: bool = False,
    progress: bool = False,
) -> dict:
    """Train ``algo`` on ``env`` from the env reward into ``out_dir``; returns the final metrics (what
    ``bayescrl train`` does without --preferences / --resume)."""
    run = new_run(
        algo, env, total_steps=total_steps, out_dir=out_dir, seed=seed, cost_limits=cost_limits,
        config=config, env_kwargs=env_kwargs, device=device, force=force,
    )  # fmt: skip
    start(run)
    return learn(run, progress=progress)

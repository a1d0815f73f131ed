"""``bayescrl train`` as one library call: the run file, ``--set`` overrides, resume and an optional
preference spec resolved into a run ready to train (:func:`prepare_train`), then trained (:func:`run_train`).

The command only parses options, calls these and prints; a Python user or a sweep calls them directly::

    from bayescrl.prefrl.run import train
    metrics = train(algo="ecop", env="bayescrl/SmallCMDP-v0", total_steps=2000, out_dir="runs/x",
                    preferences="prefs.yaml")
    metrics = train(resume_dir="runs/x", total_steps=4000)   # continue it

Every setting is checked before any work; a bad one raises :class:`~bayescrl.utils.errors.ConfigError`
naming it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bayescrl.constrained.run import (
    TrainRun,
    learn,
    load_run_spec,
    new_run,
    resume_run,
    run_json,
    start,
)
from bayescrl.prefrl.loop import PREFS_STATE, PreferenceLearner
from bayescrl.prefrl.spec import PreferenceSpec, parse_preference_spec
from bayescrl.utils.errors import ConfigError


@dataclass
class PreparedTrain:
    """A train run ready to go: the run (agent, folder, steps) and its preference learner (None when the
    reward is the env's)."""

    run: TrainRun
    learner: PreferenceLearner | None = None
    prefs: PreferenceSpec | None = None


def _stored_preferences(run_dir) -> dict | None:
    return (run_json(run_dir) or {}).get("preferences")


def _spec_from_dict(d: dict) -> dict:
    """A stored ``PreferenceSpec.to_dict()`` back to spec form (drops the fields left at None)."""
    return {k: v for k, v in d.items() if v is not None}


def _learner(agent, prefs, out: Path) -> PreferenceLearner:
    try:
        return PreferenceLearner(agent, prefs, out_dir=out)
    except Exception:
        agent.close()
        raise


def _preference_spec(preferences, spec: dict) -> PreferenceSpec | None:
    """The preference spec of the ``--preferences`` file or the run file's ``preferences`` (None: neither)."""
    if preferences is None and spec.get("preferences") is None:
        return None
    if isinstance(preferences, (str, Path)) and not Path(preferences).is_file():
        why = "is a folder, expected a YAML file" if Path(preferences).is_dir() else "file not found"
        raise ConfigError("--preferences", str(preferences), why)
    src = preferences if preferences is not None else spec["preferences"]
    if isinstance(src, str) and not Path(src).is_file():
        raise ConfigError("preferences", src, "file not found")
    return src if isinstance(src, PreferenceSpec) else parse_preference_spec(src)  # before any work


def prepare_train(
    *,
    algo: str | None = None,
    env: Any = None,
    total_steps: Any = None,
    seed: int | None = None,
    cost_limits: Iterable[float] | None = None,
    config_file: str | Path | None = None,
    overrides: Iterable[str] = (),
    preferences: str | Path | dict | PreferenceSpec | None = None,
    resume_dir: str | Path | None = None,
    out_dir: str | Path | None = None,
    device: str = "cpu",
    force: bool = False,
) -> PreparedTrain:
    """Resolve a train run: the run file ``config_file`` with ``overrides`` (``key=value``) under the
    explicit arguments, a new run into ``out_dir`` or the run saved in ``resume_dir``, and a
    :class:`PreferenceLearner` when ``preferences`` (or the run file) names a preference spec.

    A new run leaves nothing on disk until :func:`run_train`; a resumed one must agree with the saved
    run on every setting given (only ``total_steps``, ``out_dir`` and ``device`` may change)."""
    spec = load_run_spec(config_file, overrides)
    limits = list(cost_limits) if cost_limits else None
    if total_steps is None:
        total_steps = spec.get("total_steps")
    prefs = _preference_spec(preferences, spec)
    if resume_dir is not None:
        prefs = _resumed_preferences(prefs, preferences, spec, resume_dir)
        given = _given_settings(spec, algo, env, seed, limits)
        run = resume_run(resume_dir, given=given, total_steps=total_steps, out_dir=out_dir, device=device)
        learner = _resumed_learner(run, prefs, resume_dir)
    else:
        run = new_run(
            algo or spec.get("algo"),
            env or spec.get("env"),
            total_steps=total_steps,
            out_dir=out_dir or spec.get("out"),
            seed=seed if seed is not None else int(spec.get("seed", 0)),
            cost_limits=limits if limits else spec.get("cost_limits"),
            config=spec.get("config"),
            env_kwargs=spec.get("env_kwargs"),
            device=device,
            force=force,
        )
        # built before the run folder exists: a bad spec leaves nothing behind
        learner = _learner(run.agent, prefs, run.out) if prefs is not None else None
    if prefs is not None:
        run.record["preferences"] = prefs.to_dict()
    return PreparedTrain(run, learner, prefs)


def _resumed_preferences(
    prefs: PreferenceSpec | None, preferences: Any, spec: dict, resume_dir: str | Path
) -> PreferenceSpec | None:
    """The preference spec of a resumed run: the one it saved (a spec given now must equal it; none may be
    given to a run that learned from the env reward)."""
    stored = _stored_preferences(resume_dir)
    if prefs is not None and stored is not None and prefs.to_dict() != stored:
        raise ConfigError("preferences", preferences, "differs from the spec of the run being resumed")
    if prefs is not None and stored is None:
        raise ConfigError(
            "preferences",
            preferences or spec.get("preferences"),
            "the run being resumed learned from the env reward; a preference spec would switch its "
            "reward source mid-run (start a new run with --out instead)",
        )
    if stored is not None:
        return parse_preference_spec(_spec_from_dict(stored))
    return prefs


def _resumed_learner(
    run: TrainRun, prefs: PreferenceSpec | None, resume_dir: str | Path
) -> PreferenceLearner | None:
    """A resumed run's preference learner (None: it learns from the env reward), with its saved state when
    the run saved one."""
    if prefs is None:
        return None
    learner = _learner(run.agent, prefs, run.out)
    if (Path(resume_dir) / PREFS_STATE).exists():
        learner.load(resume_dir)
    return learner


def _given_settings(
    spec: dict, algo: str | None, env: Any, seed: int | None, limits: list[float] | None
) -> dict[str, tuple[str, Any]]:
    """What a resume is given, setting -> (where it was given, value): the explicit arguments, else the run
    file's (``--config``/``--set``) values; the saved run must agree with each."""
    given = {"algo": ("--algo", algo), "env": ("--env", env), "seed": ("--seed", seed)}
    given["cost_limits"] = ("--cost-limit", limits)
    for key in ("algo", "env", "seed", "cost_limits"):
        if spec.get(key) is not None and given[key][1] is None:
            given[key] = (f"{key} (--config/--set)", spec[key])
    given["env_kwargs"] = ("env_kwargs (--config/--set)", spec.get("env_kwargs"))
    given["config"] = ("config", spec.get("config"))
    return given


def run_train(
    prepared: PreparedTrain, *, progress: bool = False, log_dir: str | Path | None = None, wandb: Any = None
) -> dict:
    """Start and train a prepared run; returns its final metrics (with the preference learner's fields:
    true return and costs, queries, reward correlation, raters)."""
    run, learner = prepared.run, prepared.learner
    start(run)

    def finish(metrics: dict) -> dict:
        learner.save(run.out)
        return learner.write_results(run.out, metrics)

    return learn(
        run, progress=progress, log_dir=log_dir, wandb=wandb, finish=finish if learner is not None else None
    )


def train(
    *, progress: bool = False, log_dir: str | Path | None = None, wandb: Any = None, **settings
) -> dict:
    """:func:`prepare_train` then :func:`run_train` (``settings``: :func:`prepare_train`'s arguments)."""
    return run_train(prepare_train(**settings), progress=progress, log_dir=log_dir, wandb=wandb)

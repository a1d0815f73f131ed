"""``bayescrl train`` and ``bayescrl evaluate`` (constrained RL).

Examples::

    bayescrl train --algo ecop --env bayescrl/PointCircle-v0 --total-steps 200000 --seed 0 \\
        --cost-limit 10 --out runs/ecop-circle
    bayescrl train --resume runs/ecop-circle --total-steps 400000   # continue a killed/finished run
    bayescrl evaluate runs/ecop-circle --episodes 10
"""

from __future__ import annotations

import logging
from pathlib import Path

import click

from bayescrl.commands.options import force_option, log_options
from bayescrl.constrained.core.base import CHECKPOINT, OnPolicyAlgorithm
from bayescrl.constrained.core.callbacks import Checkpointer, MetricsWriter, ProgressBar, ResultsWriter
from bayescrl.constrained.core.envs import resolve_env_factory
from bayescrl.constrained.registry import get_algorithm
from bayescrl.constrained.video import check_video_path, default_gl_backend, record_video
from bayescrl.inference.rater_report import format_table
from bayescrl.prefrl.loop import PREFS_STATE, PreferenceLearner
from bayescrl.prefrl.spec import parse_preference_spec
from bayescrl.utils.checks import check_device, check_memory, check_no_nan, positive_int, prepare_out
from bayescrl.utils.configpaths import load_config
from bayescrl.utils.errors import BayesCRLError, ConfigError, DataError
from bayescrl.utils.io import apply_overrides, check_keys, load_json, trim_jsonl, write_json
from bayescrl.utils.outdir import prepare_out_dir, prepare_out_file_checked, written
from bayescrl.utils.runlog import RunLogger
from bayescrl.utils.seeding import set_torch_threads
from bayescrl.utils.spread import fmt_num

_log = logging.getLogger(__name__)

#: top-level keys of a ``--config`` run file
RUN_KEYS = ("algo", "env", "env_kwargs", "total_steps", "seed", "cost_limits", "config", "out", "preferences")
#: file paths of a run file (resolved against the run file; a path given by --set or an option: the cwd)
PATH_KEYS = ("preferences", "preferences.offline", "out")
#: files a train run writes (named in its closing line when present)
RUN_FILES = ("metrics.json", "curves.json", "curves.png", "metrics.jsonl", "run.json", "checkpoint.pt")
#: episodes x horizon above which ``evaluate`` refuses (days of compute) / warns
EVAL_STEPS_REFUSE, EVAL_STEPS_WARN = 10**9, 10**7


def _positive_steps(value) -> int:
    return positive_int(value, "total_steps")


def _load_agent(run_dir, device: str):
    """``OnPolicyAlgorithm.load`` with any failure to decode the checkpoint reported as one line."""
    try:
        return OnPolicyAlgorithm.load(run_dir, device=device)
    except BayesCRLError:
        raise
    except Exception as exc:  # a truncated / hand-edited checkpoint: KeyError, EOFError, RuntimeError, ...
        path = str(Path(run_dir) / CHECKPOINT)
        why = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        raise DataError("checkpoint", path, f"cannot be restored (corrupt or truncated?): {why}") from None


def _check_size(env_id, env_kwargs, config: dict | None, algo_cls) -> None:
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


def _resume_conflicts(agent, given: dict) -> list[str]:
    """Names of the given settings that differ from the run being resumed."""
    import math

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


@click.command()
@click.option(
    "--algo", default=None, help="ecop, ppo-lag, p3o, focops, cpo, pcpo, ipo, appo (or acpo, atrpo)."
)
@click.option("--env", "env_id", default=None, help="Registered gymnasium id or 'module:Class'.")
@click.option("--total-steps", default=None, type=float, help="Environment steps to train for.")
@click.option("--seed", default=None, type=int, help="Random seed (default 0).")
@click.option(
    "--out",
    "out_dir",
    default=None,
    type=click.Path(file_okay=False),
    help="Output folder (required unless --resume; must be empty unless --force).",
)
@click.option(
    "--cost-limit",
    "cost_limits",
    multiple=True,
    type=float,
    help="Limit d_i of each cost (repeat for m > 1); default: the env's own cost_limits.",
)
@click.option(
    "--resume",
    "resume_dir",
    default=None,
    type=click.Path(file_okay=False),
    help="Continue the run saved in this folder (its checkpoint.pt).",
)
@click.option(
    "--config",
    "config_file",
    default=None,
    type=click.Path(dir_okay=False),
    help="YAML with algo/env/total_steps/seed/cost_limits and a 'config' mapping.",
)
@click.option(
    "--set", "overrides", multiple=True, help="Override a config entry, e.g. --set config.n_envs=8."
)
@click.option(
    "--preferences",
    "preferences_file",
    default=None,
    type=click.Path(dir_okay=False),
    help="Preference spec (YAML): learn the reward from raters' preferences instead of the env reward.",
)
@click.option("--device", default="cpu", show_default=True)
@click.option(
    "--threads", default=None, type=int, help="torch intra-op threads (default 1 or $BAYESCRL_THREADS)."
)
@click.option("--progress/--no-progress", default=True, show_default=True)
@force_option
@log_options
def train(
    algo,
    env_id,
    total_steps,
    seed,
    out_dir,
    cost_limits,
    resume_dir,
    config_file,
    overrides,
    preferences_file,
    device,
    threads,
    progress,
    force,
    log_dir,
    wandb,
) -> None:
    """Train a constrained RL agent; writes metrics.json, curves.json/.png, metrics.jsonl, checkpoint.pt.

    With --preferences SPEC.yaml the reward is learned from (simulated) raters' preferences; the env's
    reward reaches only the raters and the reports (see docs/prefrl.md). --log-dir DIR also writes each
    iteration's record (return, costs, multipliers, losses; x = env steps) as TensorBoard scalars."""
    set_torch_threads(None if threads is None else positive_int(threads, "--threads"))
    device = check_device(device, "--device")
    if total_steps is not None:
        total_steps = _positive_steps(total_steps)
    spec: dict = load_config(config_file, PATH_KEYS) if config_file else {}
    spec = apply_overrides(spec, overrides)
    check_keys(spec, RUN_KEYS)
    if spec.get("config") is not None and not isinstance(spec["config"], dict):
        raise ConfigError("config", spec["config"], "must be a mapping of training options")
    prefs = learner = None
    if preferences_file is not None or spec.get("preferences") is not None:
        if preferences_file is not None and not Path(preferences_file).is_file():
            why = "is a folder, expected a YAML file" if Path(preferences_file).is_dir() else "file not found"
            raise ConfigError("--preferences", preferences_file, why)
        src = preferences_file or spec["preferences"]
        if isinstance(src, str) and not Path(src).is_file():
            raise ConfigError("preferences", src, "file not found")
        prefs = parse_preference_spec(src)  # validated before any work
    if resume_dir is not None:
        stored = _stored_preferences(resume_dir)
        if prefs is not None and stored is not None and prefs.to_dict() != stored:
            raise ConfigError(
                "preferences", preferences_file, "differs from the spec of the run being resumed"
            )
        if prefs is not None and stored is None:
            raise ConfigError(
                "preferences",
                preferences_file or spec.get("preferences"),
                "the run being resumed learned from the env reward; a preference spec would switch its "
                "reward source mid-run (start a new run with --out instead)",
            )
        if stored is not None:
            prefs = parse_preference_spec(_spec_from_dict(stored))
        agent = _load_agent(resume_dir, device)
        given = {
            "algo": ("--algo", algo),
            "env": ("--env", env_id),
            "seed": ("--seed", seed),
            "cost_limits": ("--cost-limit", list(cost_limits) or None),
        }
        for key, flag in (("algo", "algo"), ("env", "env"), ("seed", "seed"), ("cost_limits", "cost_limits")):
            if spec.get(key) is not None and given[key][1] is None:
                given[key] = (f"{flag} (--config/--set)", spec[key])
        given["env_kwargs"] = ("env_kwargs (--config/--set)", spec.get("env_kwargs"))
        given["config"] = ("config", spec.get("config"))
        conflicts = _resume_conflicts(agent, given)
        if conflicts:
            agent.close()
            raise ConfigError(
                "resume",
                str(resume_dir),
                f"{', '.join(conflicts)} differ(s) from the saved run; drop them to resume it as it was "
                "(only --total-steps, --out, --device, --threads and --progress may change)",
            )
        out = prepare_out_dir(out_dir or resume_dir, resume=True)
        steps = _positive_steps(
            total_steps if total_steps is not None else spec.get("total_steps", _stored_total(resume_dir))
        )
        trim_jsonl(out / "metrics.jsonl", "iteration", agent.iteration)  # lines after the checkpoint
    else:
        algo = algo or spec.get("algo")
        env_id = env_id or spec.get("env")
        if algo is None:
            raise ConfigError("algo", None, "give --algo (or 'algo:' in --config)")
        if env_id is None:
            raise ConfigError("env", None, "give --env (or 'env:' in --config)")
        steps = _positive_steps(total_steps if total_steps is not None else spec.get("total_steps"))
        seed = seed if seed is not None else int(spec.get("seed", 0))
        limits = list(cost_limits) if cost_limits else spec.get("cost_limits")
        if not (out_dir or spec.get("out")):
            raise ConfigError("--out", None, "give the output folder: --out DIR (or --resume DIR)")
        out = prepare_out_dir(out_dir or spec["out"], force=force, resumable=True, create=False)
        cls = get_algorithm(algo)
        _check_size(env_id, spec.get("env_kwargs"), spec.get("config"), cls)
        agent = cls(
            env_id, limits, seed, spec.get("config") or {}, device=device, env_kwargs=spec.get("env_kwargs")
        )
        if prefs is not None:  # built before the run folder exists: a bad spec leaves nothing behind
            learner = _learner(agent, prefs, out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "metrics.jsonl").write_text("")
    if prefs is not None and resume_dir is not None:
        learner = _learner(agent, prefs, out)
        if (Path(resume_dir) / PREFS_STATE).exists():
            learner.load(resume_dir)
    write_json(
        out / "run.json",
        {
            "algo": agent.name,
            "env": agent.env_id,
            "seed": agent.seed,
            "total_steps": steps,
            "cost_limits": agent.cost_limits.tolist(),
            "config": agent.config.to_dict(),
            **({"preferences": prefs.to_dict()} if prefs is not None else {}),
        },
    )
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
        agent.learn(steps, progress=False, callback=callbacks)
        metrics = results.metrics
        if learner is not None:
            learner.save(out)
            metrics = learner.write_results(out, metrics)
        logger.scalars(metrics, int(metrics.get("env_steps", 0)), prefix="final/")
    finally:
        agent.close()
        logger.close()
    check_no_nan(metrics, str(out / "metrics.json"))
    if "final_avg_costs" in metrics:  # average-reward algorithms: per-step averages against per-step limits
        avg = metrics["final_avg_costs"]
        costs = ", ".join(f"{fmt_num(c)}/{d:g}" for c, d in zip(avg, metrics["cost_limits"], strict=True))
        perf = f"avg reward {fmt_num(metrics['final_avg_reward'])}, avg costs [{costs}]"
    else:
        costs = ", ".join(
            f"{fmt_num(c)}/{d:g}" for c, d in zip(metrics["final_costs"], metrics["cost_limits"], strict=True)
        )
        perf = f"return {fmt_num(metrics['final_return'])}, costs [{costs}]"
    if learner is not None:
        corr = metrics["reward_correlation"]
        corr = "n/a" if corr is None else f"{corr:.2f}"
        tr = ", ".join(fmt_num(c) for c in metrics["train_final_costs"])
        perf = (
            f"true {perf} (training: return {fmt_num(metrics['train_final_return'])}, costs [{tr}]), "
            f"{metrics['num_queries']} queries, reward corr {corr}"
        )
    if not metrics["cost_limits"]:
        perf += " (unconstrained: the env reports no cost)"
    click.echo(f"{agent.name} on {agent.env_id}: {perf}, {metrics['env_steps_per_s']:.0f} env steps/s")
    if metrics.get("raters"):
        click.echo(format_table(metrics["raters"]))
    if learner is not None and learner.waiting:
        click.echo(
            f"paused at {metrics['env_steps']} steps: {learner.waiting} queries wait for labels -> "
            f"bayescrl prefs export {out}; bayescrl prefs import {out} labels.json; "
            f"bayescrl train --resume {out}"
        )
    extra = sorted(p.name for p in out.iterdir() if p.name not in RUN_FILES)
    click.echo(written(out, [*RUN_FILES, *extra]))


def _learner(agent, prefs, out: Path):
    try:
        return PreferenceLearner(agent, prefs, out_dir=out)
    except Exception:
        agent.close()
        raise


def _run_json(run_dir) -> dict | None:
    """The resumed run's ``run.json`` (None if absent); a damaged one is named with how to recover."""
    p = Path(run_dir) / "run.json"
    if not p.exists():
        return None
    fix = "restore it from a copy or start the run again with a new --out (it records the run's settings)"
    return load_json(p, "run.json", kind=dict, recover=fix)


def _stored_preferences(run_dir) -> dict | None:
    return (_run_json(run_dir) or {}).get("preferences")


def _spec_from_dict(d: dict) -> dict:
    """A stored ``PreferenceSpec.to_dict()`` back to spec form (drops the fields left at None)."""
    return {k: v for k, v in d.items() if v is not None}


def _stored_total(run_dir) -> int | None:
    return (_run_json(run_dir) or {}).get("total_steps")


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--episodes", default=10, show_default=True, type=int)
@click.option(
    "--seed", default=None, type=int, help="First evaluation seed (default: training seed + 10000)."
)
@click.option("--stochastic", is_flag=True, help="Sample actions instead of the deterministic mean/argmax.")
@click.option("--device", default="cpu", show_default=True)
@click.option(
    "--video",
    "video",
    default=None,
    type=click.Path(dir_okay=False),
    help="Also record episodes to this file (.mp4 needs 'bayescrl[video]'; .gif works with Pillow). "
    "MuJoCo envs need MUJOCO_GL=egl or osmesa without a display.",
)
@click.option(
    "--video-episodes", default=1, show_default=True, type=int, help="Episodes to record with --video."
)
@click.option("--force", is_flag=True, help="Replace an existing --video file.")
def evaluate(run_dir, episodes, seed, stochastic, device, video, video_episodes, force) -> None:
    """Re-run the policy saved in RUN_DIR; writes RUN_DIR/evaluation.json (part of the run, replaced by each
    evaluation) and a video with --video (an existing file only with --force)."""
    set_torch_threads()
    if episodes < 1:
        raise ConfigError("episodes", episodes, "must be >= 1")
    device = check_device(device, "--device")
    prepare_out(run_dir, "RUN_DIR", create=False)
    if not Path(run_dir).is_dir():
        raise ConfigError("RUN_DIR", run_dir, "no such run folder (a folder written by bayescrl train --out)")
    if not (Path(run_dir) / CHECKPOINT).is_file():
        raise ConfigError("RUN_DIR", run_dir, f"no {CHECKPOINT} in this folder: not a bayescrl train run")
    if video is not None:
        default_gl_backend()  # before MuJoCo is imported by the env
        check_video_path(video)
        prepare_out_file_checked(video, force=force, field="--video")
        if video_episodes < 1:
            raise ConfigError("--video-episodes", video_episodes, "must be >= 1")
    agent = _load_agent(run_dir, device)
    try:
        steps = episodes * agent.horizon
        if steps > EVAL_STEPS_REFUSE:
            raise ConfigError(
                "episodes",
                episodes,
                f"{episodes} x horizon {agent.horizon} = {steps:.2g} env steps; use fewer",
            )
        if steps > EVAL_STEPS_WARN:
            _log.warning("up to %.2g env steps (%d episodes x %d)", steps, episodes, agent.horizon)
        res = agent.evaluate(episodes, seed=seed, deterministic=not stochastic)
    finally:
        agent.close()
    check_no_nan(res, str(Path(run_dir) / "evaluation.json"))
    res["cost_limits"] = agent.cost_limits.tolist()
    if video is not None:
        rec = record_video(
            run_dir, video, episodes=video_episodes, seed=seed, deterministic=not stochastic, device=device
        )
        res["video"] = {k: rec[k] for k in ("path", "frames", "episodes", "fps")}
    write_json(Path(run_dir) / "evaluation.json", res)
    costs = ", ".join(
        f"{fmt_num(c)}/{d:g}" for c, d in zip(res["mean_costs"], res["cost_limits"], strict=True)
    )
    click.echo(
        f"{agent.name}: mean return {fmt_num(res['mean_return'])} over {episodes} episodes, costs [{costs}]"
    )
    if video is not None:
        v = res["video"]
        click.echo(f"video: {v['episodes']} episode(s), {v['frames']} frames at {v['fps']} fps")
    click.echo(written(run_dir, ["evaluation.json"], others=[video] if video is not None else []))


def sweep_check(p: dict) -> None:
    """Check one ``train`` run of a sweep before any run starts (``p``: the command's parsed options).

    ``bayescrl sweep`` finds it through its registry of commands (``bayescrl.sweep.spec.ADAPTERS``)."""
    check_device(p.get("device", "cpu"), "--device")
    spec = load_config(p["config_file"], PATH_KEYS) if p.get("config_file") else {}
    spec = apply_overrides(spec, p.get("overrides") or ())
    check_keys(spec, RUN_KEYS)
    if spec.get("config") is not None and not isinstance(spec["config"], dict):
        raise ConfigError("config", spec["config"], "must be a mapping of training options")
    algo, env = p.get("algo") or spec.get("algo"), p.get("env_id") or spec.get("env")
    if algo is None:
        raise ConfigError("algo", None, "give algo (grid, args or the --config file)")
    if env is None:
        raise ConfigError("env", None, "give env (grid, args or the --config file)")
    steps = p.get("total_steps") if p.get("total_steps") is not None else spec.get("total_steps")
    positive_int(steps, "total_steps")
    cls = get_algorithm(algo)
    resolve_env_factory(env, spec.get("env_kwargs"))
    _check_size(env, spec.get("env_kwargs"), spec.get("config"), cls)
    if p.get("preferences_file") or spec.get("preferences") is not None:
        parse_preference_spec(p.get("preferences_file") or spec["preferences"])

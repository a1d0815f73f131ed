"""``bayescrl train`` and ``bayescrl evaluate`` (constrained RL).

Examples::

    bayescrl train --algo ecop --env bayescrl/PointCircle-v0 --total-steps 200000 --seed 0 \\
        --cost-limit 10 --out runs/ecop-circle
    bayescrl train --resume runs/ecop-circle --total-steps 400000   # continue a killed/finished run
    bayescrl evaluate runs/ecop-circle --episodes 10
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from bayescrl.commands.options import device_option, force_option, log_options, progress_option, set_option
from bayescrl.commands.sweepable import SweepAdapter
from bayescrl.constrained.core.base import CHECKPOINT
from bayescrl.constrained.core.envs import resolve_env_factory
from bayescrl.constrained.registry import get_algorithm
from bayescrl.constrained.run import RUN_FILES, check_size, load_agent, load_run_spec, positive_steps
from bayescrl.constrained.video import check_video_path, default_gl_backend, record_video
from bayescrl.inference.rater_report import format_table
from bayescrl.prefrl.run import PreparedTrain, prepare_train, run_train
from bayescrl.prefrl.spec import parse_preference_spec
from bayescrl.utils.checks import check_device, check_no_nan, positive_int, prepare_out
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import write_json
from bayescrl.utils.outdir import prepare_out_file_checked, written
from bayescrl.utils.seeding import set_torch_threads
from bayescrl.utils.spread import fmt_num

_log = logging.getLogger(__name__)

#: episodes x horizon above which ``evaluate`` refuses (days of compute) / warns
EVAL_STEPS_REFUSE, EVAL_STEPS_WARN = 10**9, 10**7


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
@set_option("Override a config entry, e.g. --set config.n_envs=8.")
@click.option(
    "--preferences",
    "preferences_file",
    default=None,
    type=click.Path(dir_okay=False),
    help="Preference spec (YAML): learn the reward from raters' preferences instead of the env reward.",
)
@device_option(default="cpu")
@click.option(
    "--threads", default=None, type=int, help="torch intra-op threads (default 1 or $BAYESCRL_THREADS)."
)
@progress_option()
@force_option
@log_options
def train(**options) -> None:
    """Train a constrained RL agent; writes metrics.json, curves.json/.png, metrics.jsonl, checkpoint.pt.

    With --preferences SPEC.yaml the reward is learned from (simulated) raters' preferences; the env's
    reward reaches only the raters and the reports (see docs/prefrl.md). --log-dir DIR also writes each
    iteration's record (return, costs, multipliers, losses; x = env steps) as TensorBoard scalars."""
    run(options)


def run(p: Mapping[str, Any]) -> dict:
    """``bayescrl train`` without click: ``p`` holds the command's parameters by name (``algo``,
    ``env_id``, ``total_steps``, ``seed``, ``out_dir``, ``cost_limits``, ``resume_dir``, ``config_file``,
    ``overrides``, ``preferences_file``, ``device``, ``threads``, ``progress``, ``force``, ``log_dir``,
    ``wandb``). Checks them, trains through the library (:func:`~bayescrl.prefrl.run.prepare_train`,
    :func:`~bayescrl.prefrl.run.run_train`; a Python user calls :func:`bayescrl.prefrl.run.train`), prints
    the summary and returns the final metrics. A sweep's run calls it in its own process."""
    threads, total_steps = p["threads"], p["total_steps"]
    set_torch_threads(None if threads is None else positive_int(threads, "--threads"))
    device = check_device(p["device"], "--device")
    if total_steps is not None:
        total_steps = positive_steps(total_steps)
    prepared = prepare_train(
        algo=p["algo"],
        env=p["env_id"],
        total_steps=total_steps,
        seed=p["seed"],
        cost_limits=p["cost_limits"],
        config_file=p["config_file"],
        overrides=p["overrides"],
        preferences=p["preferences_file"],
        resume_dir=p["resume_dir"],
        out_dir=p["out_dir"],
        device=device,
        force=p["force"],
    )
    metrics = run_train(prepared, progress=p["progress"], log_dir=p["log_dir"], wandb=p["wandb"])
    check_no_nan(metrics, str(prepared.run.out / "metrics.json"))
    _print_summary(prepared, metrics)
    return metrics


def _print_summary(prepared: PreparedTrain, metrics: dict) -> None:
    """What ``train`` prints: the final numbers, the raters' table, a pause for labels, the files."""
    agent, out, learner = prepared.run.agent, prepared.run.out, prepared.learner
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
    extra = sorted(f.name for f in out.iterdir() if f.name not in RUN_FILES)
    click.echo(written(out, [*RUN_FILES, *extra]))


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--episodes", default=10, show_default=True, type=int)
@click.option(
    "--seed", default=None, type=int, help="First evaluation seed (default: training seed + 10000)."
)
@click.option("--stochastic", is_flag=True, help="Sample actions instead of the deterministic mean/argmax.")
@device_option(default="cpu")
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
    agent = load_agent(run_dir, device, option="RUN_DIR")
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
    """Check one ``train`` run of a sweep before any run starts (``p``: the command's parsed options)."""
    check_device(p.get("device", "cpu"), "--device")
    spec = load_run_spec(p.get("config_file"), p.get("overrides") or ())
    algo, env = p.get("algo") or spec.get("algo"), p.get("env_id") or spec.get("env")
    if algo is None:
        raise ConfigError("algo", None, "give algo (grid, args or the --config file)")
    if env is None:
        raise ConfigError("env", None, "give env (grid, args or the --config file)")
    steps = p.get("total_steps") if p.get("total_steps") is not None else spec.get("total_steps")
    positive_int(steps, "total_steps")
    cls = get_algorithm(algo)
    limits = p.get("cost_limits") or spec.get("cost_limits")
    limits = [limits] if isinstance(limits, int | float) else list(limits or [])
    if cls.max_constraints is not None and len(limits) > cls.max_constraints:
        raise ConfigError(
            "cost_limits",
            limits,
            f"{algo} supports at most {cls.max_constraints} constraint(s), as in its paper",
        )
    resolve_env_factory(env, spec.get("env_kwargs"))
    check_size(env, spec.get("env_kwargs"), spec.get("config"), cls)
    if p.get("preferences_file") or spec.get("preferences") is not None:
        parse_preference_spec(p.get("preferences_file") or spec["preferences"])


#: how ``bayescrl sweep`` runs ``train``: ``--seed S``; resumed from checkpoint.pt with ``--resume``
sweep_adapter = SweepAdapter(
    command=train,
    call=run,
    check=sweep_check,
    result="metrics.json",
    seed=lambda s, _key: ["--seed", str(s)],
    metrics=(
        "train_final_return",
        "train_final_costs.*",
        "final_return",
        "final_costs.*",
        "final_avg_reward",
        "final_avg_costs.*",
        "reward_correlation",
    ),
    curve_file="curves.json",
    curve_x="env_steps",
    curves=("ep_return", "ep_costs.*"),
    checkpoint=CHECKPOINT,
    resume="option",
    resume_options=("total_steps", "device", "threads", "log_dir", "wandb"),
)

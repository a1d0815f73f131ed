"""``bayescrl train`` and ``bayescrl evaluate`` (constrained RL).

Examples::

    bayescrl train --algo ecop --env bayescrl/PointCircle-v0 --total-steps 200000 --seed 0 \\
        --cost-limit 10 --out runs/ecop-circle
    bayescrl train --resume runs/ecop-circle --total-steps 400000   # continue a killed/finished run
    bayescrl evaluate runs/ecop-circle --episodes 10
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from bayescrl.utils.errors import ConfigError
from bayescrl.utils.io import apply_overrides, load_yaml, write_json
from bayescrl.utils.seeding import set_torch_threads


def _positive_steps(value) -> int:
    try:
        steps = int(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError("total_steps", value, "must be an integer >= 1") from exc
    if steps < 1 or steps != float(value):
        raise ConfigError("total_steps", value, "must be an integer >= 1")
    return steps


@click.command()
@click.option(
    "--algo", default=None, help="ecop, ppo-lag, p3o, focops, cpo, pcpo, ipo (or acpo, atrpo, bvf-ppo)."
)
@click.option("--env", "env_id", default=None, help="Registered gymnasium id or 'module:Class'.")
@click.option("--total-steps", default=None, type=float, help="Environment steps to train for.")
@click.option("--seed", default=None, type=int, help="Random seed (default 0).")
@click.option("--out", "out_dir", default=None, type=click.Path(file_okay=False), help="Output folder.")
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
) -> None:
    """Train a constrained RL agent; writes metrics.json, curves.json/.png, metrics.jsonl, checkpoint.pt.

    With --preferences SPEC.yaml the reward is learned from (simulated) raters' preferences; the env's
    reward reaches only the raters and the reports (see docs/prefrl.md)."""
    from bayescrl.constrained.core.base import OnPolicyAlgorithm
    from bayescrl.constrained.registry import get_algorithm

    set_torch_threads(threads)
    spec: dict = load_yaml(config_file) if config_file else {}
    spec = apply_overrides(spec, overrides)
    for key in spec:
        if key not in (
            "algo",
            "env",
            "env_kwargs",
            "total_steps",
            "seed",
            "cost_limits",
            "config",
            "out",
            "preferences",
        ):
            raise ConfigError(key, spec[key], "unknown top-level key in the run config")
    prefs = learner = None
    if preferences_file is not None or spec.get("preferences") is not None:
        from bayescrl.prefrl.spec import parse_preference_spec

        prefs = parse_preference_spec(preferences_file or spec["preferences"])  # validated before any work
    if resume_dir is not None:
        stored = _stored_preferences(resume_dir)
        if prefs is not None and stored is not None and prefs.to_dict() != stored:
            raise ConfigError(
                "preferences", preferences_file, "differs from the spec of the run being resumed"
            )
        if stored is not None:
            from bayescrl.prefrl.spec import parse_preference_spec

            prefs = parse_preference_spec(_spec_from_dict(stored))
        agent = OnPolicyAlgorithm.load(resume_dir, device=device)
        out = Path(out_dir or resume_dir)
        steps = _positive_steps(
            total_steps if total_steps is not None else spec.get("total_steps", _stored_total(resume_dir))
        )
        _truncate_metrics(out, agent.iteration)
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
        out = Path(out_dir or spec.get("out") or f"runs/{algo}-{str(env_id).replace('/', '_')}-s{seed}")
        if (out / "checkpoint.pt").exists():
            raise ConfigError("out", str(out), "already holds a run; use --resume to continue it")
        cls = get_algorithm(algo)
        agent = cls(
            env_id, limits, seed, spec.get("config") or {}, device=device, env_kwargs=spec.get("env_kwargs")
        )
        if prefs is not None:  # built before the run folder exists: a bad spec leaves nothing behind
            learner = _learner(agent, prefs, out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "metrics.jsonl").write_text("")
    if prefs is not None and resume_dir is not None:
        from bayescrl.prefrl.loop import PREFS_STATE

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
        agent.learn(steps, out_dir=out, progress=progress, callback=learner and learner.after_iteration)
        metrics = agent.write_results(out)
        if learner is not None:
            learner.save(out)
            metrics = learner.write_results(out, metrics)
    finally:
        agent.close()
    if "final_avg_costs" in metrics:  # average-reward algorithms: per-step averages against per-step limits
        avg = metrics["final_avg_costs"]
        costs = ", ".join(f"{c:.4g}/{d:g}" for c, d in zip(avg, metrics["cost_limits"], strict=True))
        perf = f"avg reward {metrics['final_avg_reward']:.4g}, avg costs [{costs}]"
    else:
        costs = ", ".join(
            f"{c:.2f}/{d:g}" for c, d in zip(metrics["final_costs"], metrics["cost_limits"], strict=True)
        )
        perf = f"return {metrics['final_return']:.2f}, costs [{costs}]"
    if learner is not None:
        corr = metrics["reward_correlation"]
        corr = "n/a" if corr is None else f"{corr:.2f}"
        tr = ", ".join(f"{c:.2f}" for c in metrics["train_final_costs"])
        perf = (
            f"true {perf} (training: return {metrics['train_final_return']:.2f}, costs [{tr}]), "
            f"{metrics['num_queries']} queries, reward corr {corr}"
        )
    click.echo(
        f"{agent.name} on {agent.env_id}: {perf}, "
        f"{metrics['env_steps_per_s']:.0f} env steps/s -> {out}/metrics.json"
    )
    if learner is not None and learner.waiting:
        click.echo(
            f"paused at {metrics['env_steps']} steps: {learner.waiting} queries wait for labels -> "
            f"bayescrl prefs export {out}; bayescrl prefs import {out} labels.json; "
            f"bayescrl train --resume {out}"
        )


def _learner(agent, prefs, out: Path):
    from bayescrl.prefrl.loop import PreferenceLearner

    try:
        return PreferenceLearner(agent, prefs, out_dir=out)
    except Exception:
        agent.close()
        raise


def _stored_preferences(run_dir) -> dict | None:
    p = Path(run_dir) / "run.json"
    return json.loads(p.read_text()).get("preferences") if p.exists() else None


def _spec_from_dict(d: dict) -> dict:
    """A stored ``PreferenceSpec.to_dict()`` back to spec form (drops the fields left at None)."""
    return {k: v for k, v in d.items() if v is not None}


def _stored_total(run_dir) -> int | None:
    p = Path(run_dir) / "run.json"
    return json.loads(p.read_text())["total_steps"] if p.exists() else None


def _truncate_metrics(out: Path, iteration: int) -> None:
    """Drop metric lines written after the checkpoint (a killed run may have logged one more)."""
    p = out / "metrics.jsonl"
    if not p.exists():
        return
    keep = [
        ln for ln in p.read_text().splitlines() if ln.strip() and json.loads(ln)["iteration"] <= iteration
    ]
    p.write_text("".join(ln + "\n" for ln in keep))


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--episodes", default=10, show_default=True, type=int)
@click.option(
    "--seed", default=None, type=int, help="First evaluation seed (default: training seed + 10000)."
)
@click.option("--stochastic", is_flag=True, help="Sample actions instead of the deterministic mean/argmax.")
@click.option("--device", default="cpu", show_default=True)
def evaluate(run_dir, episodes, seed, stochastic, device) -> None:
    """Re-run the policy saved in RUN_DIR; writes RUN_DIR/evaluation.json."""
    from bayescrl.constrained.core.base import OnPolicyAlgorithm

    set_torch_threads()
    if episodes < 1:
        raise ConfigError("episodes", episodes, "must be >= 1")
    agent = OnPolicyAlgorithm.load(run_dir, device=device)
    try:
        res = agent.evaluate(episodes, seed=seed, deterministic=not stochastic)
    finally:
        agent.close()
    res["cost_limits"] = agent.cost_limits.tolist()
    write_json(Path(run_dir) / "evaluation.json", res)
    costs = ", ".join(f"{c:.2f}/{d:g}" for c, d in zip(res["mean_costs"], res["cost_limits"], strict=True))
    click.echo(
        f"{agent.name}: mean return {res['mean_return']:.2f} over {episodes} episodes, costs [{costs}]"
    )

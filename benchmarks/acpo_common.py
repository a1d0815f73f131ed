"""Shared runner for the ACPO benchmarks (``acpo_compare.py``, ``acpo_recovery.py``).

Each run trains one algorithm on one task with one seed, evaluates it with the seed's average-reward
protocol (:mod:`bayescrl.constrained.acpo_eval`) after every iteration and writes
``<out>/runs/<tag>.json``; existing run files are reused, so an interrupted benchmark resumes.
With ``--workers`` > 1 the runs go through the sweep engine (:func:`bayescrl.sweep.calls.map_calls`: each
run its own process forked from a warm fork server, ``--workers`` at a time, one torch thread each);
``--backend ray`` sends them to a local Ray instance instead.

Cost limits: ACPO and ATRPO take the *per-step* average-cost limit ``l``; CPO, PCPO and PPO-Lagrangian
(trained on the discounted criterion with γ = 0.999 as in the chapter) take the episodic limit ``l · H``
of the core's episodic convention (``H`` = the task's episode length: 200, Ant-Gather 500).  All are
evaluated on the per-step average cost.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from bayescrl.utils.io import write_json
from bayescrl.utils.plotting import plot_mean_sd

#: per-step average-cost limits l (the tasks' episodic limits / episode length: 200 steps, Ant-Gather 500)
TASKS: dict[str, dict[str, Any]] = {
    "PointCircle": {"env": "bayescrl/PointCircle-v0", "limit": 10.0 / 200, "horizon": 200},
    "PointGather": {"env": "bayescrl/PointGather-v0", "limit": 0.1 / 200, "horizon": 200},
    "AntCircle": {"env": "bayescrl/AntCircle-v0", "limit": 10.0 / 200, "horizon": 200},
    "AntGather": {"env": "bayescrl/AntGather-v0", "limit": 0.2 / 500, "horizon": 500},
    # traffic (SUMO, the `traffic` extra): e-COP table's episodic limits 75 and 50; the chapter's policies
    # (16,16) and (50,25) with linear baselines (critic_hidden=())
    "Grid": {
        "env": "bayescrl/Grid-v0",
        "limit": 75.0 / 200,
        "horizon": 200,
        "config": {"actor_hidden": (16, 16), "critic_hidden": ()},
    },
    "Bottleneck": {
        "env": "bayescrl/Bottleneck-v0",
        "limit": 50.0 / 200,
        "horizon": 200,
        "config": {"actor_hidden": (50, 25), "critic_hidden": ()},
    },
}
#: tasks run when --tasks is not given
DEFAULT_TASKS = ("PointCircle", "PointGather", "AntCircle", "AntGather")

#: baselines trained on the discounted criterion (γ = 0.999), which take the episodic limit l · H
DISCOUNTED = ("cpo", "pcpo", "ppo-lag")
ALGOS = ("acpo", "atrpo", "cpo", "pcpo", "ppo-lag")

NET = {"actor_hidden": (64, 32), "critic_hidden": (64, 32), "n_envs": 5, "rollout_steps": 500}


def algo_config(algo: str, delta: float, recovery_t: float | None = None) -> dict[str, Any]:
    """Table `tab:hyperparameters` settings per algorithm (``delta`` as given)."""
    if algo == "acpo":
        cfg = {**NET, "delta": delta, "log_std_init": -1.0, "vf_lr": 2e-4}
        if recovery_t is not None:
            cfg["recovery_t"] = recovery_t
        return cfg
    if algo == "atrpo":
        return {**NET, "delta": delta, "log_std_init": -0.5, "vf_lr": 2e-4}
    discounted = {**NET, "advantage": "discounted", "gamma": 0.999, "vf_lr": 2e-4}  # the chapter's baselines
    if algo == "cpo":
        return {
            **discounted,
            "target_kl": delta,
            "log_std_init": -1.0,
            "line_search_steps": 11,
            "line_search_decay": 0.75,
        }
    if algo == "pcpo":
        return {**discounted, "target_kl": delta, "log_std_init": -1.0}
    if algo == "ppo-lag":  # PPO column of table `tab:hyperparameters`, fixed ℓ of `tab:lagrangian_parameters`
        return {**discounted, "log_std_init": -0.5, "pi_lr": 2e-4, "ell": "table"}
    raise ValueError(f"unknown algo {algo}")


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Train + protocol-evaluate one (algo, task, seed); returns and stores the run record."""
    from bayescrl.constrained.acpo_eval import ProtocolEvaluator, average_reward_evaluation
    from bayescrl.constrained.registry import get_algorithm
    from bayescrl.utils.seeding import set_torch_threads

    set_torch_threads(1)
    path = Path(job["path"])
    if path.exists():
        return json.loads(path.read_text())
    task = TASKS[job["task"]]
    limit = task["limit"] * task["horizon"] if job["algo"] in DISCOUNTED else task["limit"]
    cls = get_algorithm(job["algo"])
    algo = cls(task["env"], [limit], job["seed"], {**job["config"], **task.get("config", {})})
    ev = ProtocolEvaluator(every=job["eval_every"], n_traj=job["eval_traj"], traj_steps=job["eval_steps"])
    t0 = time.perf_counter()
    try:
        algo.learn(job["steps"], progress=False, callback=ev)
        # the protocol at the end of training (10 x 1000 steps unless the job says less)
        final = average_reward_evaluation(algo, job.get("final_traj", 10), job.get("final_steps", 1000))
    finally:
        algo.close()
    rec = {
        **{k: v for k, v in job.items() if k != "path"},
        "limit_per_step": task["limit"],
        "curve": ev.curve,
        "final_avg_reward": final["avg_reward"],
        "final_avg_costs": final["avg_costs"],
        "wall_s": time.perf_counter() - t0,
        "branches": [h.get("branch") for h in algo.history],
    }
    write_json(path, rec)
    return rec


#: job keys of :func:`sweep_job` (a sweep file's ``command: call`` runs) and their defaults
SWEEP_JOB = {
    "task": None,
    "algo": None,
    "seed": None,
    "steps": None,
    "delta": 1e-2,
    "config": {},
    "eval_every": 1000,
    "eval_traj": 10,
    "eval_steps": 1000,
    "final_traj": 10,
    "final_steps": 1000,
}


def validate_job(job: dict[str, Any]) -> None:
    """A sweep run's job: known keys, a known task and algorithm, positive budgets (before any run)."""
    unknown = sorted(set(job) - set(SWEEP_JOB))
    if unknown:
        raise ValueError(f"unknown job key(s) {unknown}; known: {sorted(SWEEP_JOB)}")
    for key in ("task", "algo", "seed", "steps"):
        if job.get(key) is None:
            raise ValueError(f"job needs {key}")
    if job["task"] not in TASKS:
        raise ValueError(f"task {job['task']!r}: one of {sorted(TASKS)}")
    if job["algo"] not in ALGOS:
        raise ValueError(f"algo {job['algo']!r}: one of {list(ALGOS)}")
    for key in ("steps", "eval_every", "eval_traj", "eval_steps", "final_traj", "final_steps"):
        value = job.get(key, SWEEP_JOB[key])
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} {value!r}: a positive integer")
    delta = job.get("delta", SWEEP_JOB["delta"])
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < float("inf"):
        raise ValueError(f"delta {delta!r}: a finite number > 0")
    if not isinstance(job.get("config", {}), dict):
        raise ValueError(f"config {job['config']!r}: a mapping of the algorithm's settings")


def sweep_job(job: dict[str, Any]) -> dict[str, Any]:
    """One run of an ACPO comparison from a sweep file (``command: call``): the job of
    ``acpo_compare.py`` for (task, algo, seed) -- the chapter's settings of :func:`algo_config` with
    ``delta``, updated by ``config`` -- trained and protocol-evaluated by :func:`run_one`. Adds
    ``final_cost_over_limit`` (final average cost / l) and ``within_limit`` (1 when ≤ 1.1 l), the ACPO
    table's columns."""
    import tempfile

    job = {**SWEEP_JOB, **job}
    validate_job(job)
    full = {**job, "config": {**algo_config(job["algo"], job["delta"]), **job["config"]}}
    with tempfile.TemporaryDirectory() as tmp:
        rec = run_one({**full, "path": str(Path(tmp) / "run.json")})
    limit = TASKS[job["task"]]["limit"]
    rec["final_cost_over_limit"] = rec["final_avg_costs"][0] / limit
    rec["within_limit"] = float(rec["final_avg_costs"][0] <= 1.1 * limit)
    return rec


def run_all(jobs: list[dict[str, Any]], workers: int, backend: str = "local") -> list[dict[str, Any]]:
    """Every job's record, in job order: in this process for one worker, else on the sweep engine."""
    if workers <= 1:
        return [run_one(j) for j in jobs]
    from bayescrl.sweep.calls import map_calls

    todo = [j for j in jobs if not Path(j["path"]).exists()]  # finished runs are read back, not re-run
    ids = [Path(j["path"]).stem for j in todo]
    map_calls(f"{Path(__file__).resolve()}:run_one", todo, workers=workers, backend=backend, ids=ids)
    return [json.loads(Path(j["path"]).read_text()) for j in jobs]


def aggregate(records: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    """Group by ``key`` (e.g. ``"algo"``): curves mean/sd over seeds and final mean/sd (sample sd, ddof 1;
    0 for one seed; ``compare.json`` files written before 2026-11-28 hold the population sd, and the docs
    compute their spread from ``final_rewards`` / ``final_costs``)."""
    out: dict[str, dict[str, Any]] = {}
    for name in sorted({str(r[key]) for r in records}):
        rs = [r for r in records if str(r[key]) == name]
        n = min(len(r["curve"]) for r in rs)
        steps = [p["env_steps"] for p in rs[0]["curve"][:n]]
        rew = np.array([[p["avg_reward"] for p in r["curve"][:n]] for r in rs])
        cost = np.array([[p["avg_costs"][0] for p in r["curve"][:n]] for r in rs])
        fr = np.array([r["final_avg_reward"] for r in rs])
        fc = np.array([r["final_avg_costs"][0] for r in rs])
        dd = 1 if len(rs) > 1 else 0
        out[name] = {
            "seeds": [r["seed"] for r in rs],
            "env_steps": steps,
            "reward_mean": rew.mean(0).tolist(),
            "reward_sd": rew.std(0, ddof=dd).tolist(),
            "cost_mean": cost.mean(0).tolist(),
            "cost_sd": cost.std(0, ddof=dd).tolist(),
            "final_reward_mean": float(fr.mean()),
            "final_reward_sd": float(fr.std(ddof=dd)),
            "final_cost_mean": float(fc.mean()),
            "final_cost_sd": float(fc.std(ddof=dd)),
            "final_rewards": fr.tolist(),
            "final_costs": fc.tolist(),
        }
    return out


def plot_group(agg: dict[str, dict[str, Any]], limit: float, out_prefix: Path, title: str) -> list[Path]:
    """Reward and cost learning curves (mean ± 1 sd over seeds, dashed cost limit)."""
    x = next(iter(agg.values()))["env_steps"]
    p1 = plot_mean_sd(
        {k: (v["reward_mean"], v["reward_sd"]) for k, v in agg.items()},
        out_prefix.with_name(out_prefix.name + "_rewards.png"),
        "env steps",
        "average reward per step (protocol)",
        f"{title}: average reward",
        x=x,
    )
    p2 = plot_mean_sd(
        {k: (v["cost_mean"], v["cost_sd"]) for k, v in agg.items()},
        out_prefix.with_name(out_prefix.name + "_costs.png"),
        "env steps",
        "average cost per step (protocol)",
        f"{title}: average cost",
        x=x,
        hline=limit,
        hline_label=f"limit l = {limit:g} per step",
    )
    return [p1, p2]

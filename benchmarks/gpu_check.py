"""Check the package's device paths on CUDA against the same computation on CPU.

Run from the repository root with ``PYTHONPATH=. python benchmarks/gpu_check.py [--out PATH]`` on a machine
with a CUDA GPU and the package's dependencies. Two parts, each item wrapped so that a failure is recorded
(error text, traceback or the last lines of stderr) and the rest still run:

1. kernel checks, in-process: a table of check, ok/fail, max |CPU - CUDA|, GPU time, CPU time;
2. command runs: every command family through ``python -m bayescrl ... --device cuda`` (each algorithm's
   ``train``, ``train --preferences``, ``evaluate``, ``pspl`` tabular and diffusion, ``bandit``, ``infer``,
   ``compare``, ``mopo`` tabular/synthetic/LM, ``sweep``), each with its own timeout, in a pool of worker
   processes under one wall-clock budget (``--budget``), compared with the same command on CPU where cheap.

Writes one JSON (``--out``, default ``$OUT/gpu_check.json``) and prints a compact table of each part.
``GPU_CHECK_DEVICE=cpu`` runs the identical script on CPU (a dry run on a machine without a GPU).

Timings: one warm-up call on CUDA, then the timed call (``torch.cuda.synchronize`` around it); CPU uses
``torch.get_num_threads()`` threads (recorded in the JSON). Command runs use one torch thread each.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import platform
import time
import traceback
from pathlib import Path

import torch

DT = torch.float64
GPU = os.environ.get("GPU_CHECK_DEVICE", "cuda")  # "cpu" only to dry-run the script without a GPU
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def _sync(dev):
    if torch.device(dev).type == "cuda":
        torch.cuda.synchronize()


def timed(fn, dev, warmup: bool = True):
    """``(result, seconds)`` of ``fn(dev)``; one untimed warm-up call first on CUDA."""
    if warmup and torch.device(dev).type == "cuda":
        fn(dev)
    _sync(dev)
    t0 = time.perf_counter()
    out = fn(dev)
    _sync(dev)
    return out, time.perf_counter() - t0


def maxdiff(a, b) -> float:
    """Max abs difference of (nested) tensors, after moving both to CPU float64."""
    if isinstance(a, dict):
        return max(maxdiff(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return max(maxdiff(x, y) for x, y in zip(a, b, strict=True))
    a = torch.as_tensor(a).detach().to("cpu", torch.float64)
    b = torch.as_tensor(b).detach().to("cpu", torch.float64)
    return float((a - b).abs().max()) if a.numel() else 0.0


def both(fn, warmup: bool = True):
    cpu, t_cpu = timed(fn, "cpu", warmup=False)
    gpu, t_gpu = timed(fn, GPU, warmup=warmup)
    return cpu, gpu, {"cpu_s": t_cpu, "gpu_s": t_gpu}


# ----------------------------------------------------------------------------------------------- core
def _bt_problem(dev, d=6, N=200, T=300, R=2, seed=0):
    from bayescrl.models.linear import BTLinearProblem

    g = torch.Generator().manual_seed(seed)
    theta = torch.randn(d, generator=g, dtype=DT)
    x0, x1 = torch.randn(N, d, generator=g, dtype=DT), torch.randn(N, d, generator=g, dtype=DT)
    y = (torch.rand(N, generator=g, dtype=DT) < torch.sigmoid(3 * (x1 - x0) @ theta)).to(DT)
    x = torch.randn(T, d, generator=g, dtype=DT)
    r = x @ theta + torch.randn(T, generator=g, dtype=DT)
    rater = torch.arange(N) % R
    online = torch.arange(N) >= N // 2
    return BTLinearProblem.from_data(
        torch.zeros(d), torch.eye(d), [3.0] * R, [10.0] * R, 1.0,
        x0=x0, x1=x1, y=y, rater=rater, pref_online=online, x=x, r=r, device=dev,
    )  # fmt: skip


@check
def core_map_estimate():
    from bayescrl.inference.bootstrap import map_estimate

    def fn(dev):
        res = map_estimate(_bt_problem(dev))
        assert res.all_converged
        return res.theta, res.vartheta

    cpu, gpu, t = both(fn)
    diff = maxdiff(cpu, gpu)
    return {"ok": diff < 1e-5, "max_abs_diff": diff, **t, "note": "plain MAP, float64, tol 1e-5"}


@check
def core_perturbed_map_M10000():
    from bayescrl.inference.bootstrap import perturbed_map

    M = 10_000

    def fn(dev):
        pb = _bt_problem(dev, d=6, N=200, T=300)
        gen = torch.Generator().manual_seed(1)  # CPU stream: the same perturbations on both devices
        res = perturbed_map(pb, M, p_offline=0.6, p_online=0.75, generator=gen)
        return res.theta, res.converged.float().mean()

    cpu, gpu, t = both(fn)
    diff = maxdiff(cpu[0], gpu[0])
    conv = float(gpu[1])
    return {
        "ok": diff < 1e-4 and conv > 0.99,
        "max_abs_diff": diff,
        **t,
        "converged_fraction_gpu": conv,
        "note": f"M={M}, d=6, N=200, T=300, same CPU generator stream on both",
    }


@check
def core_exact_posteriors():
    from bayescrl.inference.exact import DirichletPosterior, GaussianLinearPosterior

    def fn(dev):
        g = torch.Generator().manual_seed(2)
        X = torch.randn(8, 50, 5, generator=g, dtype=DT)
        R = X @ torch.ones(5, dtype=DT) + torch.randn(8, 50, generator=g, dtype=DT)
        post = GaussianLinearPosterior(torch.zeros(8, 5), torch.eye(5).expand(8, 5, 5), 1.0, device=dev)
        post.update_many(X, R)
        post.update(X[:, 0], R[:, 0])
        s = post.sample(64, torch.Generator().manual_seed(3))
        lp = post.log_prob(s.movedim(-2, 0))
        dp = DirichletPosterior(torch.ones(4, 3, 6), device=dev)
        dp.update((torch.tensor([0, 1, 1]), torch.tensor([2, 0, 0])), torch.tensor([5, 1, 1]))
        eta = dp.sample(32, torch.Generator().manual_seed(4))
        eta_free = dp.sample(8)  # torch._standard_gamma on the device
        assert torch.isfinite(eta_free).all() and eta_free.device.type == torch.device(dev).type
        return post.mean, post.cov, s, lp, dp.mean, eta, dp.log_prob(eta)

    cpu, gpu, t = both(fn)
    diff = maxdiff(cpu, gpu)
    return {"ok": diff < 1e-8, "max_abs_diff": diff, **t, "note": "Gaussian + Dirichlet, CPU generators"}


# ----------------------------------------------------------------------------------------------- PSPL
@check
def pspl_value_iteration():
    from bayescrl.pbrl.mdp import policy_value, value_iteration

    def fn(dev):
        g = torch.Generator().manual_seed(5)
        B, S, A, H = 256, 20, 5, 30
        P = torch.softmax(3 * torch.randn(B, S, A, S, generator=g, dtype=DT), -1).to(dev)
        r = torch.rand(B, S, A, generator=g, dtype=DT).to(dev)
        rho = torch.full((S,), 1.0 / S, dtype=DT, device=dev)
        V, Q, pi = value_iteration(P, r, H)
        return V, Q, pi, policy_value(P, r, rho, pi)

    cpu, gpu, t = both(fn)
    diff = maxdiff(cpu[:2] + cpu[3:], gpu[:2] + gpu[3:])
    same_pi = float((cpu[2] == gpu[2].cpu()).double().mean())
    return {
        "ok": diff < 1e-10 and same_pi > 0.999,
        "max_abs_diff": diff,
        **t,
        "policy_agreement": same_pi,
        "note": "B=256 MDPs, S=20, A=5, H=30",
    }


# ----------------------------------------------------------------------------------------- warmPref-PS
@check
def bandit_run_experiment():
    from bayescrl.bandits import run_experiment

    def fn(dev):
        cfg = {
            "device": dev,
            "bandit": {"K": 10, "d": 4, "T": 20},
            "offline": {"N": 10},
            "agents": ["warmpref-ps-bootstrap", "ps", "lints", "naive-ps"],
        }
        res = run_experiment(cfg, seeds=2)
        return {k: torch.tensor(v["regret_curve_mean"]) for k, v in res["agents"].items()}

    cpu, gpu, t = both(fn, warmup=False)
    diff = maxdiff(cpu, gpu)
    finite = all(bool(torch.isfinite(v).all()) for v in gpu.values())
    return {
        "ok": finite and diff < 1e-6,
        "max_abs_diff": diff,
        **t,
        "note": "T=20, 2 seeds, 4 agents; regret curves (same CPU generator streams)",
    }


# ----------------------------------------------------------------------------------------------- MOPO
@check
def mopo_objective():
    from bayescrl.mopo import objective as obj

    def fn(dev):
        g = torch.Generator().manual_seed(6)
        p = torch.randn(4, 512, generator=g, dtype=DT).to(dev)
        q = torch.rand(4, 512, 2, generator=g, dtype=DT).to(dev)
        lam = torch.rand(4, 2, generator=g, dtype=DT).to(dev)
        b = torch.full((4, 2), 0.4, dtype=DT, device=dev)
        w = torch.softmax(torch.randn(4, 512, generator=g, dtype=DT), -1).to(dev)
        rho = obj.rho_star(p, q, lam, 0.5, w)
        f, gv = obj.primal_values(rho, p, q, 0.5, w)
        x = rho.unsqueeze(-1) * q
        chi = obj.chi_star(x, 0.1)
        return (
            obj.log_rho_star(p, q, lam, 0.5),
            obj.dual_value(lam, p, q, b, 0.5, w),
            obj.dual_gradient(lam, p, q, b, 0.5),
            f,
            gv,
            chi,
            obj.lower_bound(x, chi, 0.1),
            obj.log_barrier(gv - b, 0.3),
        )

    cpu, gpu, t = both(fn)
    diff = maxdiff(cpu, gpu)
    return {"ok": diff < 1e-8, "max_abs_diff": diff, **t, "note": "float64, N=512 atoms, K=3"}


LORA = {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["c_attn", "c_proj", "c_fc"]}
LORA["fan_in_fan_out"] = True


@check
def mopo_lm_trainer_bf16():
    from bayescrl.mopo.lm.config import MOPOLMConfig
    from bayescrl.mopo.lm.model import lora_policy
    from bayescrl.mopo.lm.tiny import TinyTask, build_model, build_tokenizer
    from bayescrl.mopo.lm.trainer import MOPOLMTrainer

    tok = build_tokenizer()
    data = TinyTask().make_data(48, seed=3)
    base = build_model(tok, n_layer=2, n_embd=32, n_head=2, seed=1)
    steps = 20

    def fn(dev):
        dtype = torch.bfloat16 if dev == "cuda" else torch.float32
        pol = lora_policy(copy.deepcopy(base).to(dev, dtype), LORA)
        cfg = MOPOLMConfig(peft=LORA, batch_size=8, steps=steps, t0=5, tau=0.5, lr=1e-2)
        tr = MOPOLMTrainer(pol, tok, data, cfg)
        b = tr.batch(list(range(8)))
        with torch.no_grad():
            nll0 = -tr.model.logprobs(b).float().mean().item()
            ref0 = tr.model.reference_logprobs(b).float()
        log = tr.train()
        with torch.no_grad():
            nll1 = -tr.model.logprobs(b).float().mean().item()
            ref1 = tr.model.reference_logprobs(b).float()
        losses = [float(r["loss"]) for r in log if "loss" in r]
        return {"nll0": nll0, "nll1": nll1, "ref0": ref0.cpu(), "ref1": ref1.cpu(), "losses": losses}

    cpu, gpu, t = both(fn, warmup=False)
    ok = (
        all(map(torch.isfinite, map(torch.tensor, gpu["losses"])))
        and gpu["nll1"] < gpu["nll0"] - 0.3
        and bool(torch.isfinite(gpu["ref1"]).all())
        and float((gpu["ref1"] - gpu["ref0"]).abs().max()) < 1e-3  # adapters off = untouched base
    )
    return {
        "ok": bool(ok),
        "max_abs_diff": maxdiff(cpu["ref0"], gpu["ref0"]),
        **t,
        "nll_before_after_gpu": [gpu["nll0"], gpu["nll1"]],
        "nll_before_after_cpu": [cpu["nll0"], cpu["nll1"]],
        "loss_first_last_gpu": [gpu["losses"][0], gpu["losses"][-1]] if gpu["losses"] else None,
        "note": f"{steps} MOPO steps, bf16 on CUDA vs fp32 CPU; diff = reference log-probs bf16 vs fp32",
    }


# ------------------------------------------------------------------------------------------ constrained
@check
def crl_fisher_cg():
    from bayescrl.constrained.core.networks import CategoricalPolicy, GaussianPolicy
    from bayescrl.constrained.core.optim import conjugate_gradient, fisher_vector_product, flat_grad

    torch.manual_seed(7)
    gauss = GaussianPolicy(8, 2, hidden=(64, 64)).double()
    cat = CategoricalPolicy(8, 4, hidden=(64, 64)).double() if _takes_hidden(CategoricalPolicy) else None
    obs_cpu = torch.randn(2048, 8, dtype=DT, generator=torch.Generator().manual_seed(8))

    def fn(dev):
        out = []
        for pol0 in (gauss, cat):
            if pol0 is None:
                continue
            pol = copy.deepcopy(pol0).to(dev)
            obs = obs_cpu.to(dev)
            params = list(pol.parameters())
            dist = pol.distribution(obs)
            act = dist.sample() if isinstance(pol, CategoricalPolicy) else dist.mean
            g = flat_grad(pol.log_prob(obs, act).mean(), params)
            fvp = fisher_vector_product(pol, obs, damping=0.1)
            out += [g, conjugate_gradient(fvp, g, 10), fvp(g)]
        return out

    cpu, gpu, t = both(fn)
    diff = maxdiff(cpu[:3], gpu[:3])  # categorical: sampled actions differ per device, compare Gaussian
    return {"ok": diff < 1e-8, "max_abs_diff": diff, **t, "note": "Gaussian MLP 8-64-64-2, 2048 states"}


def _takes_hidden(cls) -> bool:
    import inspect

    return "hidden" in inspect.signature(cls.__init__).parameters


# ------------------------------------------------------------------------------------ commands (CLI)
# Every command family through ``python -m bayescrl`` with ``--device``: the run on the checked device, and
# (where cheap) the identical command on CPU. Each run is its own process with its own timeout; a failing
# or timed-out run is recorded (return code, last lines of stderr) and the others go on. The runs share a
# pool of worker processes and a wall-clock budget (``--budget``): runs not started by then are "skipped".
ROOT = Path(__file__).resolve().parents[1]
ALGOS = ("ecop", "ppo-lag", "p3o", "focops", "cpo", "pcpo", "ipo", "appo", "acpo", "atrpo")
TRAIN_SET = [
    "--set",
    "config.n_envs=2",
    "--set",
    "config.rollout_steps=500",
    "--set",
    "config.eval_episodes=1",
]
NOISY = ("time", "wall", "_s", "per_s", "steps_per", "seconds", "path", "date", "version")
PSPL_TINY = """env: {name: riverswim, S: 5, H: 8}
offline: {N: 20}
K: 4
agents: [pspl, dps, lpbrl, uniform, dpo]
agent_params: {dpo: {steps: 20}}
"""
DIFFUSION_TINY = """task: diffusion
base: {size: 8, channels: [8, 16], train_timesteps: 20, steps: 20, scorer_steps: 20, batch: 16, cache: null}
T: 4
prompts: [0, 1]
offline: {N: 12}
pools: {val: 6, explore: 4}
policy: {hidden: 16, rollouts: 3, updates: 1}
K: 1
final: {epochs: 1, L: 1}
"""


def _flat(x, prefix: str = "") -> dict[str, float]:
    """Numeric leaves of a JSON value, by dotted path (timings and paths left out)."""
    out: dict[str, float] = {}
    if isinstance(x, dict):
        for k, v in x.items():
            if any(n in str(k).lower() for n in NOISY):
                continue
            out.update(_flat(v, f"{prefix}{k}."))
    elif isinstance(x, list) and len(x) <= 4096:
        for i, v in enumerate(x):
            out.update(_flat(v, f"{prefix}{i}."))
    elif isinstance(x, bool) or x is None:
        pass
    elif isinstance(x, int | float):
        out[prefix.rstrip(".")] = float(x)
    return out


def _rel_diff(a: dict[str, float], b: dict[str, float]) -> tuple[float | None, int, str | None]:
    """Max ``|a - b| / max(1, |a|, |b|)`` over the common finite keys, their number, the worst key."""
    worst, key, n = 0.0, None, 0
    for k in sorted(set(a) & set(b)):
        x, y = a[k], b[k]
        if not (math.isfinite(x) and math.isfinite(y)):
            if math.isfinite(x) != math.isfinite(y):
                return math.inf, n + 1, k
            continue
        n += 1
        d = abs(x - y) / max(1.0, abs(x), abs(y))
        if d > worst:
            worst, key = d, k
    return (worst if n else None), n, key


def _first_record(out: Path) -> dict:
    """The first iteration's record of a train run: its rollout is the same on both devices (the actor
    samples on the CPU), so this compares the first update's losses, KL and multipliers."""
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return {
        "first_iteration": json.loads(lines[0]),
        "final_return": _load(out / "metrics.json")["final_return"],
    }


def _load(path: Path):
    return json.loads(Path(path).read_text())


def _train_extract(out: Path) -> dict:
    return _flat(_first_record(out)["first_iteration"])


def _train_info(out: Path) -> dict:
    m = _load(out / "metrics.json")
    return {
        "final_return": m.get("final_return"),
        "final_costs": m.get("final_costs"),
        "iters": m.get("iterations"),
    }


def _json_extract(name: str):
    return lambda out: _flat(_load(out / name))


def _compare_extract(out: Path) -> dict:
    """Posterior means, sds and coverage of the batched engines (the NUTS reference draws its own
    random numbers on each device, so the errors against it are left out)."""
    eng = _load(out / "compare.json")["engines"]
    keep = ("theta_mean", "theta_sd", "coverage90")
    return _flat({e: {k: v.get(k) for k in keep} for e, v in eng.items() if e != "nuts"})


def _infer_extract(out: Path) -> dict:
    return _flat(_load(out / "post.json"))


def cli_steps(tmp: Path) -> list[dict]:
    """The command runs: name, argv (``{dev}``/``{out}`` filled in), timeout, whether CPU runs too, what to
    compare (a function of the output folder giving numbers by key), tolerance of the relative difference."""
    (tmp / "pspl_tiny.yaml").write_text(PSPL_TINY)
    (tmp / "diffusion_tiny.yaml").write_text(DIFFUSION_TINY)
    ex = ROOT / "examples"
    steps = []
    for algo in ALGOS:
        steps.append(
            dict(
                name=f"train_{algo}",
                argv=["train", "--algo", algo, "--env", "bayescrl/PointCircle-v0", "--total-steps", "2000",
                      "--seed", "0", "--out", "{out}", "--no-progress", *TRAIN_SET],
                timeout=150, cpu=True, extract=_train_extract, info=_train_info, tol=1e-2,
            )
        )  # fmt: skip
    steps += [
        dict(
            name="train_ecop_preferences",
            argv=["train", "--algo", "ecop", "--env", "bayescrl/PointCircle-v0", "--total-steps", "2000",
                  "--seed", "0", "--out", "{out}", "--no-progress", *TRAIN_SET,
                  "--preferences", str(ex / "prefrl" / "pointcircle_mixed_raters.yaml")],
            timeout=180, cpu=True, extract=_train_extract, info=_train_info, tol=5e-2,
        ),
        dict(
            name="train_ecop_preferences_learned_cost",
            argv=["train", "--config", str(ex / "ecop" / "tabular_small_cmdp.yaml"),
                  "--total-steps", "2000", "--out", "{out}", "--no-progress",
                  "--preferences", str(ex / "prefrl" / "tabular_learned_cost.yaml")],
            timeout=180, cpu=True, extract=_train_extract, info=_train_info, tol=5e-2,
        ),
        dict(
            name="pspl_tabular",
            argv=["pspl", str(tmp / "pspl_tiny.yaml"), "--seeds", "2", "--out", "{out}", "--no-progress",
                  "--no-plots"],
            timeout=150, cpu=True, extract=_json_extract("results.json"), tol=1e-6,
        ),
        dict(
            name="pspl_diffusion_tiny",
            argv=["pspl", str(tmp / "diffusion_tiny.yaml"), "--seeds", "1", "--out", "{out}", "--no-progress",
                  "--no-plots"],
            timeout=200, cpu=True, extract=_json_extract("results.json"), tol=None,
        ),
        dict(
            name="bandit",
            argv=["bandit", "--seeds", "2", "--out", "{out}", "--no-progress", "--set", "bandit.T=20",
                  "--set", "bandit.K=10", "--set", "bandit.d=4", "--set", "offline.N=10"],
            timeout=150, cpu=True, extract=_json_extract("results.json"), tol=1e-6,
        ),
        dict(
            name="infer_laplace",
            argv=["infer", str(ex / "core" / "example_data.json"), "--engine", "laplace", "--samples", "200",
                  "--out", "{out}/post.nc", "--no-progress"],
            timeout=120, cpu=True, extract=_infer_extract, tol=1e-6,
        ),
        dict(
            name="infer_bootstrap",
            argv=["infer", str(ex / "core" / "example_data.json"), "--engine", "bootstrap", "--samples",
                  "200", "--out", "{out}/post.nc", "--no-progress"],
            timeout=120, cpu=True, extract=_infer_extract, tol=1e-6,
        ),
        dict(
            name="compare",
            argv=["compare", str(ex / "core" / "example_data.json"), "--engines", "laplace,bootstrap",
                  "--samples", "100", "--coverage-reps", "4", "--set", "engine_options.nuts.num_samples=50",
                  "--set", "engine_options.nuts.warmup=50", "--set", "engine_options.nuts.num_chains=1",
                  "--out", "{out}"],
            timeout=150, cpu=True, extract=_compare_extract, tol=1e-6,
        ),
        dict(
            name="mopo_tabular",
            argv=["mopo", str(ex / "mopo" / "tabular_mopo.yaml"), "--out", "{out}", "--set", "mopo.steps=300",
                  "--set", "mopo.runs=2"],
            timeout=120, cpu=True, extract=_json_extract("results.json"), tol=1e-4,
        ),
        dict(
            name="mopo_tabular_exact",
            argv=["mopo", str(ex / "mopo" / "tabular_exact.yaml"), "--out", "{out}"],
            timeout=120, cpu=True, extract=_json_extract("results.json"), tol=1e-6,
        ),
        dict(
            name="mopo_synthetic",
            argv=["mopo", str(ex / "mopo" / "sanity.yaml"), "--out", "{out}", "--set", "mopo.steps=300",
                  "--set", "mopo.runs=2", "--set", "datasets=[D1]", "--set", "tau=[1.0]"],
            timeout=120, cpu=True, extract=_json_extract("results.json"), tol=1e-4,
        ),  # fmt: skip
        dict(
            name="mopo_lm_tiny",
            argv=["mopo", str(ex / "mopo" / "lm_tiny.yaml"), "--out", "{out}", "--set", "model.sft_steps=20",
                  "--set", "train.steps=20", "--set", "train.t0=10", "--set", "data.n_train=64",
                  "--set", "data.n_eval_prompts=8", "--set", "methods=[mopo]", "--set", "sweep=null"],
            timeout=200, cpu=False, extract=None, tol=None,
        ),
        dict(
            name="sweep_2_runs",
            argv=["sweep", str(ex / "sweeps" / "smoke.yaml"), "--out", "{out}", "--backend", "local",
                  "--workers", "2", "--set", "grid.seed=[0]", "--set", "args.total-steps=1000",
                  "--no-progress"],
            timeout=200, cpu=False, extract=None, tol=None,
        ),
    ]  # fmt: skip
    return steps


def _run_cli(argv: list[str], dev: str, out: Path, timeout: float) -> dict:
    import subprocess
    import sys

    argv = [a.replace("{out}", str(out)) for a in argv] + ["--device", dev]
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)  # keep a wheel dir
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "BAYESCRL_THREADS": "1"}
    env.setdefault("MPLBACKEND", "Agg")
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        p = subprocess.run(
            [sys.executable, "-m", "bayescrl", "-q", *argv],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        rc, err = p.returncode, (p.stderr or "")[-1500:]
    except subprocess.TimeoutExpired as e:
        rc, err = 124, f"timed out after {timeout:.0f} s; " + str(e.stderr or "")[-1000:]
    return {"rc": rc, "wall_s": time.perf_counter() - t0, "argv": " ".join(argv), "stderr_tail": err}


def run_cli_steps(tmp: Path, workers: int, budget: float, only: list[str] | None) -> dict:
    """Run every step on the checked device (and CPU where cheap) in a pool; then ``evaluate`` on the
    checked device's e-COP run. Returns ``{step: record}``."""
    from concurrent.futures import ThreadPoolExecutor

    steps = [s for s in cli_steps(tmp) if not only or s["name"] in only or "cli" in only]
    deadline = time.perf_counter() + budget
    # the device's runs first: if the budget runs out, the CPU references are what is dropped
    jobs = [(s, "device") for s in steps] + [(s, "cpu") for s in steps if s["cpu"]]

    def job(item):
        s, role = item
        left = deadline - time.perf_counter()
        if left < 10:
            return s["name"], role, {"rc": None, "skipped": "budget spent before the run started"}
        dev = GPU if role == "device" else "cpu"
        return s["name"], role, _run_cli(s["argv"], dev, tmp / role / s["name"], min(s["timeout"], left))

    results: dict[str, dict] = {s["name"]: {} for s in steps}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for name, role, rec in pool.map(job, jobs):
            results[name][role] = rec
    # evaluate: the e-COP checkpoint trained on the device, re-run on the device and on CPU
    if (not only or "evaluate" in only or "cli" in only) and "train_ecop" in results:
        src = tmp / "device" / "train_ecop"
        import shutil

        rec: dict = {}
        for dev, key in ((GPU, "device"), ("cpu", "cpu")):
            d = tmp / f"eval_{key}"
            if (src / "checkpoint.pt").is_file():
                shutil.copytree(src, d, dirs_exist_ok=True)
                left = max(10.0, deadline - time.perf_counter() + 60)
                rec[key] = _run_cli(["evaluate", str(d), "--episodes", "2"], dev, d, min(90, left))
            else:
                rec[key] = {"rc": None, "skipped": "no device checkpoint of train_ecop"}
        results["evaluate"] = rec
        steps.append({"name": "evaluate", "extract": lambda out: _flat(_load(out / "evaluation.json")),
                      "tol": 1e-3, "info": None, "cpu": True})  # fmt: skip
    for s in steps:
        r = results[s["name"]]
        dev_ok = r.get("device", {}).get("rc") == 0
        r["ok"] = dev_ok
        out_dev = tmp / ("eval_device" if s["name"] == "evaluate" else f"device/{s['name']}")
        out_cpu = tmp / ("eval_cpu" if s["name"] == "evaluate" else f"cpu/{s['name']}")
        if dev_ok and s.get("info"):
            try:
                r["device_result"] = s["info"](out_dev)
            except Exception as e:  # noqa: BLE001
                r["device_result"] = f"{type(e).__name__}: {e}"
        if dev_ok and s.get("extract") and r.get("cpu", {}).get("rc") == 0:
            try:
                diff, n, key = _rel_diff(s["extract"](out_dev), s["extract"](out_cpu))
                r.update(max_rel_diff=diff, compared=n, worst_key=key)
                if s.get("tol") is not None and diff is not None:
                    r["match"] = bool(diff <= s["tol"])
                    r["tol"] = s["tol"]
            except Exception as e:  # noqa: BLE001 - record and go on
                r["compare_error"] = f"{type(e).__name__}: {e}"
        if not dev_ok and r.get("device"):
            r["error"] = r["device"].get("skipped") or r["device"].get("stderr_tail", "")[-400:]
    return results


# ----------------------------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="JSON path (default $OUT/gpu_check.json)")
    ap.add_argument("--only", nargs="*", default=None, help="names of checks or command steps ('cli': all)")
    ap.add_argument("--no-cli", action="store_true", help="skip the command runs (kernel checks only)")
    ap.add_argument("--workers", type=int, default=None, help="command runs at a time (default: cores / 2)")
    ap.add_argument("--budget", type=float, default=200.0, help="seconds for all command runs together")
    ap.add_argument("--tmp", default=None, help="folder for the command runs' outputs (default: a temp dir)")
    args = ap.parse_args()
    t_start = time.perf_counter()
    out = Path(args.out) if args.out else Path(os.environ.get("OUT", ".")) / "gpu_check.json"
    if GPU == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_check: torch.cuda.is_available() is False")
    meta = {
        "gpu": torch.cuda.get_device_name(0) if GPU == "cuda" else GPU,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cpu_count": os.cpu_count(),
        "cpu_threads": torch.get_num_threads(),
        "python": platform.python_version(),
    }
    results = {}
    for fn in CHECKS:
        if args.only and fn.__name__ not in args.only:
            continue
        t0 = time.perf_counter()
        try:
            res = fn()
        except Exception as e:  # noqa: BLE001 - record and go on
            res = {
                "ok": False,
                "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc()[-3000:],
            }
        res["wall_s"] = time.perf_counter() - t0
        results[fn.__name__] = res
        print(f"{fn.__name__}: {'ok' if res['ok'] else 'FAIL'} {res.get('error', '')}", flush=True)
    cli: dict = {}
    if not args.no_cli:
        import tempfile

        tmp = Path(args.tmp) if args.tmp else Path(tempfile.mkdtemp(prefix="gpu_check_"))
        tmp.mkdir(parents=True, exist_ok=True)
        workers = args.workers or max(2, (os.cpu_count() or 2) // 2)
        meta["cli_workers"], meta["cli_budget_s"], meta["cli_tmp"] = workers, args.budget, str(tmp)
        try:
            cli = run_cli_steps(tmp, workers, args.budget, args.only)
        except Exception as e:  # noqa: BLE001 - the kernel checks' results are still written
            cli = {
                "runner": {
                    "ok": False,
                    "error": f"{type(e).__name__}: {e}",
                    "traceback": traceback.format_exc(),
                }
            }
    meta["total_wall_s"] = time.perf_counter() - t_start
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "checks": results, "commands": cli}, indent=2, default=str))
    print(f"\n{meta['gpu']}, torch {meta['torch']}, CPU threads {meta['cpu_threads']}")
    print(f"{'check':30s} {'ok':4s} {'max|cpu-cuda|':>13s} {'gpu s':>9s} {'cpu s':>9s} {'cpu/gpu':>8s}")
    for name, r in results.items():
        d, g, c = r.get("max_abs_diff"), r.get("gpu_s"), r.get("cpu_s")
        row = f"{name:30s} {'ok' if r['ok'] else 'FAIL':4s} "
        row += f"{d:13.2e} " if d is not None else f"{'-':>13s} "
        row += f"{g:9.4f} {c:9.4f} {c / g:8.1f}" if g and c else f"{'-':>9s} {'-':>9s} {'-':>8s}"
        print(row)
    if cli:
        head = f"{'command':40s} {'device':7s} {'cpu':5s} {'dev s':>7s} {'cpu s':>7s} {'max rel diff':>12s}"
        print(f"\n{head} match")
        for name, r in cli.items():
            dv, cp = r.get("device", {}), r.get("cpu", {})
            st = lambda x: (
                "-"
                if not x
                else ("ok" if x.get("rc") == 0 else ("skip" if x.get("skipped") else f"rc{x.get('rc')}"))
            )  # noqa: E731
            ws = lambda x: f"{x['wall_s']:7.1f}" if x and x.get("wall_s") is not None else f"{'-':>7s}"  # noqa: E731
            d = r.get("max_rel_diff")
            ds = f"{d:12.2e}" if isinstance(d, float) else f"{'-':>12s}"
            m = r.get("match")
            ms = "-" if m is None else ("yes" if m else "NO")
            print(f"{name:40s} {st(dv):7s} {st(cp):5s} {ws(dv)} {ws(cp)} {ds} {ms}")
        bad = [n for n, r in cli.items() if not r.get("ok")]
        print(
            f"\ncommands: {len(cli) - len(bad)} of {len(cli)} ran on {GPU}"
            + (f"; failed: {', '.join(bad)}" if bad else "")
        )
    print(f"total {meta['total_wall_s']:.1f} s")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()

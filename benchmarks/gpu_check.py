"""Check the package's device paths on CUDA against the same computation on CPU.

Run from the repository root with ``PYTHONPATH=. python benchmarks/gpu_check.py [--out PATH]`` on a machine
with a CUDA GPU (pyro-ppl and gymnasium importable). Every check is small and independent; a failing check
records its error text and the others still run. Writes ``$OUT/gpu_check.json`` (or ``--out``) and prints a
table: check, ok/fail, max |CPU - CUDA|, GPU time, CPU time.

Timings: one warm-up call on CUDA, then the timed call (``torch.cuda.synchronize`` around it); CPU uses
``torch.get_num_threads()`` threads (recorded in the JSON).
"""

from __future__ import annotations

import argparse
import copy
import json
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


# ----------------------------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="JSON path (default $OUT/gpu_check.json)")
    ap.add_argument("--only", nargs="*", default=None, help="names of checks to run")
    args = ap.parse_args()
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
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "checks": results}, indent=2, default=float))
    print(f"\n{meta['gpu']}, torch {meta['torch']}, CPU threads {meta['cpu_threads']}")
    print(f"{'check':30s} {'ok':4s} {'max|cpu-cuda|':>13s} {'gpu s':>9s} {'cpu s':>9s} {'cpu/gpu':>8s}")
    for name, r in results.items():
        d, g, c = r.get("max_abs_diff"), r.get("gpu_s"), r.get("cpu_s")
        row = f"{name:30s} {'ok' if r['ok'] else 'FAIL':4s} "
        row += f"{d:13.2e} " if d is not None else f"{'-':>13s} "
        row += f"{g:9.4f} {c:9.4f} {c / g:8.1f}" if g and c else f"{'-':>9s} {'-':>9s} {'-':>8s}"
        print(row)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()

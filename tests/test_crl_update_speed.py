"""The minibatch update's speed measures change no arithmetic: Adam shortcut, joint gradient clipping,
written-out Gaussian log-density, per-epoch gathering (against the plain torch loop)."""

import copy
import math
from types import SimpleNamespace

import torch

from bayescrl.constrained.core.networks import GaussianPolicy
from bayescrl.constrained.core.optim import AdamSteps
from bayescrl.constrained.core.ppo import _clip_grads
from bayescrl.constrained.registry import get_algorithm


def _net(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))


def _grads(net: torch.nn.Module, k: int) -> None:
    g = torch.Generator().manual_seed(100 + k)
    for p in net.parameters():
        p.grad = torch.randn(p.shape, generator=g)


def test_adam_steps_match_optimizer_step_bit_for_bit():
    for fused in (True, False):  # fused: the shortcut; foreach: the fallback to optimizer.step()
        a, b = _net(), _net()
        oa = torch.optim.Adam(a.parameters(), lr=1e-2, fused=fused)
        ob = torch.optim.Adam(b.parameters(), lr=1e-2, fused=fused)
        fast = AdamSteps(ob)
        for k in range(6):
            if k == 3:  # annealed learning rate: read at every step
                oa.param_groups[0]["lr"] = ob.param_groups[0]["lr"] = 3e-3
            _grads(a, k)
            _grads(b, k)
            oa.step()
            fast.step()
        assert (fast._fast is None) == (not fused)
        for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
            assert torch.equal(pa, pb)
            assert torch.equal(oa.state[pa]["exp_avg_sq"], ob.state[pb]["exp_avg_sq"])
            assert float(ob.state[pb]["step"]) == 6.0
        assert not torch.equal(next(a.parameters()), next(_net().parameters()))  # it did move


def test_clip_grads_is_torchs_clip_per_group():
    a, b, ref_a, ref_b = _net(1), _net(2), _net(1), _net(2)
    for net, k in ((a, 0), (b, 1), (ref_a, 0), (ref_b, 1)):
        _grads(net, k)
    norm_b = float(torch.nn.utils.clip_grad_norm_(ref_b.parameters(), 100.0))  # below: left as is
    torch.nn.utils.clip_grad_norm_(ref_a.parameters(), 0.5)
    _clip_grads([(list(a.parameters()), 0.5), (list(b.parameters()), 100.0)])
    for p, q in zip(
        [*a.parameters(), *b.parameters()], [*ref_a.parameters(), *ref_b.parameters()], strict=True
    ):
        assert torch.equal(p.grad, q.grad)
    total_a = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in a.parameters()]))
    assert math.isclose(float(total_a), 0.5, rel_tol=1e-5) and norm_b < 100.0


def test_gaussian_log_prob_written_out_by_hand():
    pol = GaussianPolicy(3, 2, hidden=(4,))
    with torch.no_grad():
        for p in pol.mean.parameters():
            p.zero_()  # mu = 0
        pol.log_std.fill_(math.log(2.0))  # sigma = 2
    a = torch.tensor([[1.0, -2.0]])
    want = -(1.0 + 4.0) / 8.0 - 2 * math.log(2.0) - math.log(2 * math.pi)
    got = pol.log_prob(torch.zeros(1, 3), a).detach()
    assert math.isclose(float(got), want, rel_tol=1e-6)
    x, acts = torch.randn(20, 3), torch.randn(20, 2)
    ref = pol.log_prob_from(pol.distribution(x), acts)
    assert torch.allclose(pol.log_prob(x, acts), ref, atol=1e-5)


def _reference_update(algo, batch, adv_r):
    """The plain loop: index every minibatch, ``optimizer.step()``, ``clip_grad_norm_``, ``Normal``."""
    cfg = algo.config
    x = algo.policy_input(batch.obs, batch.h)
    xc = algo.critic_input(batch.obs, batch.h)
    for _ in range(cfg.update_epochs):
        for idx in algo.minibatches(batch.size):
            dist = algo.policy.distribution(x[idx])
            ratio = torch.exp(algo.policy.log_prob_from(dist, batch.actions[idx]) - batch.logp[idx])
            clipped = torch.clamp(ratio, 1 - cfg.clip, 1 + cfg.clip)
            loss = -torch.min(ratio * adv_r[idx], clipped * adv_r[idx]).mean()
            vloss = ((algo.critic(xc[idx]) - batch.returns[idx]) ** 2).mean(0).sum()
            algo.pi_optim.zero_grad(set_to_none=True)
            algo.vf_optim.zero_grad(set_to_none=True)
            (loss + vloss).backward()
            torch.nn.utils.clip_grad_norm_(algo.policy.parameters(), cfg.max_grad_norm)
            torch.nn.utils.clip_grad_norm_(algo.critic.parameters(), cfg.max_grad_norm * (1 + algo.m))
            algo.pi_optim.step()
            algo.vf_optim.step()


def test_first_order_update_equals_the_plain_loop():
    """PPO-Lagrangian with ``ell = 0`` (pure clipped surrogate): the fast update and the plain loop from
    the same state and minibatch order end at the same networks (float rounding of the log-density)."""
    cfg = dict(n_envs=1, rollout_steps=48, minibatch_size=16, update_epochs=2, ell=0.0, target_kl=None)
    algo = get_algorithm("ppo-lag")("bayescrl.constrained.toy:CostPendulum", [1.0], seed=0, config=cfg)
    try:
        algo.collector.reset(0)
        batch = algo.compute_advantages(algo.collector.collect(algo.policy, algo.critic_value, 48, algo.rng))
        nets = copy.deepcopy((algo.policy, algo.critic, algo.pi_optim, algo.vf_optim))  # same state
        start = [p.detach().clone() for p in algo.policy.parameters()]
        ref = SimpleNamespace(
            config=algo.config,
            m=algo.m,
            policy_input=algo.policy_input,
            critic_input=algo.critic_input,
            minibatches=algo.minibatches,
            policy=nets[0],
            critic=nets[1],
            pi_optim=nets[2],
            vf_optim=nets[3],
        )
        adv_r, _ = algo.policy_advantages(batch)
        torch.manual_seed(7)
        algo.update(batch)
        torch.manual_seed(7)
        _reference_update(ref, batch, adv_r)
        for new, old in ((algo.policy, ref.policy), (algo.critic, ref.critic)):
            for p, q in zip(new.parameters(), old.parameters(), strict=True):
                assert torch.allclose(p, q, atol=1e-5, rtol=1e-4)
        assert not all(torch.equal(p, q) for p, q in zip(algo.policy.parameters(), start, strict=True))
    finally:
        algo.close()


def test_make_adam_falls_back_where_fused_adam_is_missing(monkeypatch):
    """torch < 2.4 refuses ``fused=True`` on CPU: the trainers then use the default Adam."""
    from bayescrl.utils.optim import make_adam

    real = torch.optim.Adam
    net = torch.nn.Linear(2, 1)
    assert make_adam(net.parameters(), 1e-3).defaults["fused"]

    def old_adam(params, lr, fused=None):
        if fused:
            raise RuntimeError(
                "`fused=True` requires all the params to be floating point Tensors of supported devices"
            )
        return real(params, lr=lr)

    monkeypatch.setattr(torch.optim, "Adam", old_adam)
    opt = make_adam(net.parameters(), 1e-3)
    assert not opt.defaults["fused"]


def test_tensor_closure_same_arithmetic():
    """Captured floats become 0-dim float32 tensors: the same float32 results (bit for bit where each
    captured number meets a tensor directly, as in the package's losses)."""
    from bayescrl.constrained.core.ppo import _tensor_closure

    x = torch.randn(50, generator=torch.Generator().manual_seed(3))
    lam = torch.rand(3, generator=torch.Generator().manual_seed(4))
    denom, beta, w, h_eff = 1.4247112870216370, 5.2, 0.37, 187.3

    def loss(idx, ratio, dist):
        a = -(ratio * x[idx]).mean() / denom
        b = -w * ratio.mean() + h_eff * (ratio * x[idx]).mean()
        c = 0.5 * beta * (torch.relu(x[:3] + lam / beta) ** 2 - (lam / beta) ** 2).sum()
        return a + b + c

    fast = _tensor_closure(loss)
    assert fast is not loss and any(isinstance(c.cell_contents, torch.Tensor) for c in fast.__closure__)
    idx, ratio = torch.arange(0, 50, 2), torch.rand(25, generator=torch.Generator().manual_seed(5)) + 0.5
    assert torch.equal(fast(idx, ratio, None), loss(idx, ratio, None))
    assert _tensor_closure(_net) is _net  # nothing captured: the function itself


_TORCH_COMPILE = torch.compile


def _one_update(algo_name: str, compile_update: bool, monkeypatch, compiler=None, **extra):
    """Two iterations from seed 0; ``compiler=None``: the compiled step's function run uncompiled;
    ``torch.compile`` with backend "eager" (dynamo's traced graph, no C++ build) otherwise."""
    from bayescrl.constrained.core import ppo

    monkeypatch.setattr(torch, "compile", compiler or (lambda fn, **kw: fn))
    monkeypatch.setattr(ppo, "COMPILE_BACKEND", "eager")
    monkeypatch.setattr(ppo, "_COMPILED", {})
    monkeypatch.setattr(ppo, "_COMPILE_ERRORS", {})
    cfg = dict(n_envs=1, rollout_steps=48, minibatch_size=16, update_epochs=2, target_kl=None)
    cfg.update(extra, compile_update=compile_update)
    algo = get_algorithm(algo_name)("bayescrl.constrained.toy:CostPendulum", [0.1], seed=0, config=cfg)
    calls = []
    real = ppo.CompiledStep.__call__

    def counting(self, *a):
        out = real(self, *a)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(ppo.CompiledStep, "__call__", counting)
    try:
        logs = []
        for it in range(2):  # two iterations: the multipliers (captured floats) change in between
            if it == 1:  # and the learning rates, as with anneal_lr
                for opt in (algo.pi_optim, algo.vf_optim):
                    opt.param_groups[0]["lr"] *= 0.5
            algo.collector.reset(0)
            roll = algo.collector.collect(algo.policy, algo.critic_value, 48, algo.rng)
            torch.manual_seed(7)
            logs.append(algo.update(algo.compute_advantages(roll)))
        return (
            [p.detach().clone() for p in (*algo.policy.parameters(), *algo.critic.parameters())],
            logs,
            calls,
        )
    finally:
        algo.close()


def test_compiled_update_matches_eager(monkeypatch):
    """``compile_update``: the step's function (functional gradients, clipping, Adam in the fused kernel's
    order) ends at the eager update's networks up to float rounding, for ppo-lag, e-COP and APPO (losses
    capturing per-iteration floats); compiled by dynamo (backend "eager": the traced graph, no C++ build)
    for ppo-lag, with no recompilation when the captured multipliers or the learning rates change."""
    from torch._dynamo.utils import counters

    for algo_name, compiler in (("ppo-lag", _TORCH_COMPILE), ("ecop", None), ("appo", None)):
        eager, logs_e, _ = _one_update(algo_name, False, monkeypatch)
        counters.clear()
        comp, logs_c, calls = _one_update(algo_name, True, monkeypatch, compiler)
        if compiler is not None:
            assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
        # 2 iterations x 2 epochs x 3 minibatches; the very first step is eager (it creates Adam's state)
        assert calls.count(True) == 11 and calls.count(False) == 1
        for p, q in zip(comp, eager, strict=True):
            assert torch.allclose(p, q, atol=1e-5, rtol=1e-4)
        for a, b in zip(logs_c, logs_e, strict=True):
            assert math.isclose(a["policy_loss"], b["policy_loss"], rel_tol=1e-4, abs_tol=1e-6)
            assert math.isclose(a["value_loss"], b["value_loss"], rel_tol=1e-4)


def test_compile_unavailable_falls_back_to_eager(monkeypatch):
    """A torch whose ``torch.compile`` fails: one warning, then the eager update, bit for bit."""
    import warnings

    eager, _, _ = _one_update("ppo-lag", False, monkeypatch)

    def broken(*a, **k):
        raise RuntimeError("no compiler")

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        comp, _, calls = _one_update("ppo-lag", True, monkeypatch, broken)
    assert not any(calls) and sum("compile_update" in str(x.message) for x in w) == 1
    for p, q in zip(comp, eager, strict=True):
        assert torch.equal(p, q)


def test_compiled_update_serves_several_algorithms_in_one_process(monkeypatch):
    """PPO-family algorithms trained one after another in one process all keep the compiled step: their
    graphs (~2 each) share one code object's cache, whose limit (dynamo's default 8, set to 2 here to
    keep the test short) ``fullgraph=True`` turns into an error, and that used to switch the update to
    eager for the rest of the process (the fifth algorithm of a script, at the default)."""
    import warnings

    torch._dynamo.reset()
    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for algo_name in ("ppo-lag", "ecop"):  # 1 + 2 graphs
            _, _, calls = _one_update(algo_name, True, monkeypatch, _TORCH_COMPILE)
            assert calls.count(True) == 11, (algo_name, calls)
    assert not [x for x in w if "compile_update" in str(x.message)]

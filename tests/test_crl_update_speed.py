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

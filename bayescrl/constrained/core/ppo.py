"""Shared first-order policy update: minibatch epochs over a clipped surrogate with KL early stopping."""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass

import torch

from bayescrl.constrained.core.optim import AdamSteps
from bayescrl.constrained.core.rollout import Batch


def clipped_surrogate(ratio: torch.Tensor, adv: torch.Tensor, clip: float, pessimistic: str = "min"):
    """PPO's clipped surrogate ``min(r A, clip(r, 1-eps, 1+eps) A)`` (``pessimistic="min"``, rewards)
    or its cost counterpart ``max(r A_C, clip(r) A_C)`` (``"max"``, an upper bound on cost increase).
    ``adv`` may be ``(B,)`` or ``(B, m)``."""
    if adv.dim() == 2:
        ratio = ratio.unsqueeze(-1)
    clipped = torch.clamp(ratio, 1.0 - clip, 1.0 + clip)
    if pessimistic == "min":
        return torch.min(ratio * adv, clipped * adv)
    return torch.max(ratio * adv, clipped * adv)


def _clip_grads(groups: list[tuple[list[torch.Tensor], float]]) -> None:
    """``torch.nn.utils.clip_grad_norm_(params, max_norm)`` for several parameter groups at once.

    Same arithmetic as torch's (per-tensor 2-norms, the norm of their stack, coefficient
    ``min(1, max_norm / (norm + 1e-6))``), but one ``_foreach_norm`` over every group's gradients and one
    ``_foreach_mul_`` per group instead of a Python loop over tensors per group.
    """
    grads = [p.grad for params, _ in groups for p in params if p.grad is not None]
    if not grads:
        return
    norms = torch._foreach_norm(grads, 2.0)
    start = 0
    for params, max_norm in groups:
        group = [p.grad for p in params if p.grad is not None]
        if not group:
            continue
        total = torch.linalg.vector_norm(torch.stack(norms[start : start + len(group)]), 2.0)
        torch._foreach_mul_(group, torch.clamp(max_norm / (total + 1e-6), max=1.0))
        start += len(group)


class _Joint(torch.nn.Module):
    """Policy log-density and critic values in one module, so that ``torch.func.functional_call`` can
    run both from one parameter mapping (the networks themselves are used, not copied)."""

    def __init__(self, policy: torch.nn.Module, critic: torch.nn.Module):
        super().__init__()
        self.policy, self.critic = policy, critic

    def forward(self, x, xc, acts):
        return self.policy.log_prob(x, acts), self.critic(xc)


def _adam_(params, grads, exp_avgs, exp_avg_sqs, steps, lr, beta1, beta2, eps) -> None:
    """Adam (``amsgrad=False``, no weight decay) in place, in the order of torch's fused CPU kernel:
    ``m <- m + (1 - beta1) (g - m)``, ``v <- beta2 v + (1 - beta2) g^2``,
    ``p <- p - (lr / (1 - beta1^t)) m / (sqrt(v) / sqrt(1 - beta2^t) + eps)``; bias corrections in
    float64, as the kernel computes them."""
    for p, g, m, v, t in zip(params, grads, exp_avgs, exp_avg_sqs, steps, strict=True):
        t.add_(1)
        td = t.double()
        step_size = lr / (1.0 - torch.pow(beta1, td))
        bc2_sqrt = torch.sqrt(1.0 - torch.pow(beta2, td))
        m.lerp_(g, 1.0 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
        denom = v.sqrt() / bc2_sqrt.float() + eps
        p.sub_(step_size.float() * m / denom)


def _clip_coef(grads, max_norm):
    """``clip_grad_norm_``'s coefficient ``min(1, max_norm / (||(||g_1||, ..., ||g_k||)|| + 1e-6))``."""
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g, 2.0) for g in grads]), 2.0)
    return torch.clamp(max_norm / (total + 1e-6), max=1.0)


def _functional_step(
    joint, names, params, n_pi, states, hyper, clips, loss_fn, x, xc, acts, logp_old, target, idx
):
    """One minibatch step of :func:`first_order_policy_update` (policy and critics both active) as one
    function of tensors, for ``torch.compile``: the same loss, gradients by ``torch.func.grad``, the
    same per-group clipping and Adam, applied in place to the networks' parameters and the optimisers'
    state. Returns ``(policy loss, value loss)``."""

    def total(p):
        logp, v = torch.func.functional_call(joint, dict(zip(names, p, strict=True)), (x, xc, acts))
        loss = loss_fn(idx, torch.exp(logp - logp_old), None)
        vloss = ((v - target) ** 2).mean(0).sum()
        return loss + vloss, (loss.detach(), vloss.detach())

    grads, (loss, vloss) = torch.func.grad(total, has_aux=True)(list(params))
    with torch.no_grad():
        for lo, hi, (exp_avgs, exp_avg_sqs, steps), (lr, beta1, beta2, eps), max_norm in zip(
            (0, n_pi), (n_pi, len(params)), states, hyper, clips, strict=True
        ):
            g = grads[lo:hi]
            if max_norm is not None:
                coef = _clip_coef(g, max_norm)
                g = [gi * coef for gi in g]
            _adam_(params[lo:hi], g, exp_avgs, exp_avg_sqs, steps, lr, beta1, beta2, eps)
    return loss, vloss


def _tensor_closure(fn: Callable) -> Callable:
    """``fn`` with every float it captures (a closure cell) replaced by a 0-dim float32 tensor.

    ``torch.compile`` specialises on captured Python numbers, so a loss capturing a multiplier or an
    episode length that changes every iteration would be recompiled every iteration; as tensors they are
    inputs of one compiled graph. The arithmetic is that of the float32 networks: a Python number meeting a
    float32 tensor is cast to float32 there, here once beforehand (equal up to float rounding where the
    loss first combines captured numbers in Python; test ``test_tensor_closure_same_arithmetic``).
    """
    cells = fn.__closure__ or ()
    if not any(type(c.cell_contents) is float for c in cells):
        return fn
    new = tuple(
        types.CellType(torch.tensor(c.cell_contents, dtype=torch.float32))
        if type(c.cell_contents) is float
        else c
        for c in cells
    )
    return types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, new)


#: the ``torch.compile`` backend of the compiled update (tests use ``"eager"``: no C++ build)
COMPILE_BACKEND = "inductor"
_COMPILED: dict[str, Callable] = {}
_COMPILE_ERRORS: dict[str, str] = {}


def _raise_recompile_limit(limit: int = 64) -> None:
    """Let the one compiled step hold a graph per algorithm and shape (~2 each) in a long process.

    Dynamo keeps its graphs per code object, so every algorithm shares ``_functional_step``'s cache;
    at the default limit of 8 a script training a fifth algorithm would hit the limit, which
    ``fullgraph=True`` turns into an error and the step into the eager one for good.
    """
    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):  # the newer name first (torch >= 2.7)
        if hasattr(cfg, name):
            setattr(cfg, name, max(int(getattr(cfg, name)), limit))
            return


class CompiledStep:
    """The minibatch step of :func:`first_order_policy_update` compiled with ``torch.compile``
    (``config.compile_update``): forward, backward, clipping and both Adam steps of a (64, 64) network
    pair become a few fused kernels instead of ~200 eager torch calls.

    Applies when both optimisers are single-group fused Adam without weight decay, amsgrad or
    ``maximize`` (what :func:`~bayescrl.utils.optim.make_adam` builds), after their state exists, for
    full-size minibatches with the policy and the critics both active; :meth:`__call__` returns ``None``
    otherwise and the caller takes the eager step. Where ``torch.compile`` is missing or fails (a torch
    without it, no C++ compiler for inductor, an untraceable loss), a warning is given once and every
    step is the eager one. Results equal the eager update's up to float rounding (test
    ``test_compiled_update_matches_eager``).
    """

    def __init__(self, algo, pi_params: list, vf_params: list, pi_clip: float | None, vf_clip: float | None):
        self.algo, self.pi_params, self.vf_params = algo, pi_params, vf_params
        self.clips = (pi_clip, vf_clip)
        joint = getattr(algo, "_compiled_joint", None)
        if joint is None or joint.policy is not algo.policy or joint.critic is not algo.critic:
            joint = algo._compiled_joint = _Joint(algo.policy, algo.critic)
        self.joint = joint
        name_of = {id(p): n for n, p in joint.named_parameters()}
        self.names = tuple(name_of[id(p)] for p in pi_params + vf_params)
        self.fn = self._compiled()
        self.ready: tuple | None = () if self.fn is not None else None
        self._loss_src = self._loss = None

    @staticmethod
    def _compiled() -> Callable | None:
        backend = COMPILE_BACKEND
        if backend in _COMPILE_ERRORS:
            return None
        if backend not in _COMPILED:
            try:
                _raise_recompile_limit()
                _COMPILED[backend] = torch.compile(_functional_step, backend=backend, fullgraph=True)
            except Exception as e:  # torch without a usable torch.compile
                CompiledStep._disable(backend, e)
                return None
        return _COMPILED[backend]

    @staticmethod
    def _disable(backend: str, err: Exception) -> None:
        import warnings

        _COMPILE_ERRORS[backend] = f"{type(err).__name__}: {err}"
        warnings.warn(
            f"compile_update: torch.compile ({backend}) failed here ({type(err).__name__}); "
            "the eager update is used for the rest of the process",
            RuntimeWarning,
            stacklevel=3,
        )

    def _prepare(self) -> tuple | None:
        states, hyper = [], []
        for opt, params in ((self.algo.pi_optim, self.pi_params), (self.algo.vf_optim, self.vf_params)):
            fast = AdamSteps(opt)._prepare()
            if not fast:
                return fast  # None: never applies; (): no optimiser state yet
            group_params, exp_avgs, exp_avg_sqs, steps, g = fast
            if [id(p) for p in group_params] != [id(p) for p in params]:
                return None
            if g["weight_decay"] or g["maximize"]:
                return None
            states.append((exp_avgs, exp_avg_sqs, steps))
            hyper.append(g)
        return tuple(states), tuple(hyper)

    def __call__(self, x, xc, acts, logp_old, target, idx, loss_fn) -> tuple | None:
        if self.ready is not None and len(self.ready) == 0:
            self.ready = self._prepare()
        if not self.ready or self.fn is None:
            return None
        states, groups = self.ready
        if loss_fn is not self._loss_src:
            self._loss_src, self._loss = loss_fn, _tensor_closure(loss_fn)
        # lr as a tensor: an annealed learning rate is an input, not a constant to recompile for
        hyper = tuple(
            (torch.tensor(g["lr"], dtype=torch.float64), g["betas"][0], g["betas"][1], g["eps"])
            for g in groups
        )
        params = self.pi_params + self.vf_params
        try:
            return self.fn(
                self.joint,
                self.names,
                params,
                len(self.pi_params),
                states,
                hyper,
                self.clips,
                self._loss,
                x,
                xc,
                acts,
                logp_old,
                target,
                idx,
            )
        except Exception as e:  # compilation failed (raised before any parameter was changed)
            _COMPILED.pop(COMPILE_BACKEND, None)
            self._disable(COMPILE_BACKEND, e)
            self.fn = None
            return None


@dataclass
class _UpdateInputs:
    """What every epoch of :func:`first_order_policy_update` reads: the policy and critic inputs of the
    whole batch, the trainable parameters of each network, their Adam steps and clipping norms."""

    x: torch.Tensor  # policy input of the batch
    xc: torch.Tensor  # critic input of the batch
    same_input: bool  # xc equals x: one permuted copy serves both
    pi_params: list[torch.Tensor]
    vf_params: list[torch.Tensor]
    pi_step: Callable[[], None]
    vf_step: Callable[[], None]
    pi_clip: float | None  # max gradient norm of the policy (None or 0: no clipping)
    vf_clip: float | None  # max gradient norm of the critics, ``max_grad_norm * (1 + m)``
    compiled: CompiledStep | None  # ``config.compile_update``'s step (None: eager only)


def _update_inputs(algo, batch: Batch, uses_dist: bool) -> _UpdateInputs:
    """Network inputs, parameters, optimiser steps and clipping norms of one update."""
    cfg = algo.config
    x = algo.policy_input(batch.obs, batch.h)
    xc = algo.critic_input(batch.obs, batch.h)
    vf_clip = cfg.max_grad_norm * (1 + algo.m) if cfg.max_grad_norm else None
    pi_params = [p for p in algo.policy.parameters() if p.requires_grad]
    pi_step, vf_step = AdamSteps(algo.pi_optim).step, AdamSteps(algo.vf_optim).step
    vf_params = [p for p in algo.critic.parameters() if p.requires_grad]
    same_input = xc is x or (xc.shape == x.shape and torch.equal(xc, x))
    compiled = None
    if cfg.compile_update and not uses_dist:  # a loss reading the distribution object stays eager
        compiled = CompiledStep(algo, pi_params, vf_params, cfg.max_grad_norm or None, vf_clip)
    return _UpdateInputs(
        x, xc, same_input, pi_params, vf_params, pi_step, vf_step, cfg.max_grad_norm, vf_clip, compiled
    )


_Losses = tuple[torch.Tensor | None, torch.Tensor | None]


def _eager_step(
    algo, inp: _UpdateInputs, rows: tuple, loss_fn: Callable, uses_dist: bool, active: tuple[bool, bool]
) -> _Losses:
    """One minibatch step without ``torch.compile``: policy loss ``loss_fn(idx, ratio, dist)`` and/or the
    critics' squared error (summed over reward and costs), one backward, per-network clipping, Adam.

    ``rows``: the minibatch's ``(x, xc, actions, logp_old, target, idx)``; ``active``: ``(policy,
    critics)``. Returns ``(policy loss, value loss)``, ``None`` for an inactive one."""
    x, xc, acts, logp_old, target, idx = rows
    policy_active, critic_active = active
    loss = vloss = total = None
    if policy_active:
        if uses_dist:
            dist = algo.policy.distribution(x)
            logp = algo.policy.log_prob_from(dist, acts)
        else:
            dist, logp = None, algo.policy.log_prob(x, acts)
        ratio = torch.exp(logp - logp_old)
        loss = loss_fn(idx, ratio, dist)
        total = loss
    if critic_active:
        vloss = ((algo.critic(xc) - target) ** 2).mean(0).sum()
        total = vloss if total is None else total + vloss
    for p in (inp.pi_params if policy_active else []) + (inp.vf_params if critic_active else []):
        p.grad = None
    total.backward()
    clip_groups = []
    if policy_active and inp.pi_clip:
        clip_groups.append((inp.pi_params, inp.pi_clip))
    if critic_active and inp.vf_clip:
        clip_groups.append((inp.vf_params, inp.vf_clip))
    if clip_groups:
        _clip_grads(clip_groups)
    if policy_active:
        inp.pi_step()
    if critic_active:
        inp.vf_step()
    return loss, vloss


def _run_epoch(
    algo, batch: Batch, inp: _UpdateInputs, loss_fn: Callable, uses_dist: bool, active: tuple[bool, bool]
) -> _Losses:
    """One pass over a fresh permutation of the batch in minibatch steps (compiled where it applies).

    ``active``: ``(policy, critics)``. Returns the last step's ``(policy loss, value loss)``, ``None``
    where no step updated that network.

    Speed (the update's work is hundreds of tiny minibatch steps, so per-call overhead is the cost):
    the batch is permuted once per epoch and minibatches are slices of it (the same samples as indexing
    with each minibatch's indices), gradients are reset by ``grad = None`` and both networks' gradient
    norms are clipped in one pass (:func:`_clip_grads`, torch's arithmetic), and the Adam steps skip
    ``Optimizer.step``'s per-call bookkeeping (:class:`~bayescrl.constrained.core.optim.AdamSteps`, the
    same kernel call and result). ``config.compile_update``: each step is one compiled function
    (:class:`CompiledStep`), equal up to float rounding.
    """
    policy_active, critic_active = active
    perm, mb = algo.minibatch_permutation(batch.size)
    x_p = inp.x[perm]
    xc_p = x_p if inp.same_input else inp.xc[perm]
    cols = (x_p, xc_p, batch.actions[perm], batch.logp[perm], batch.returns[perm], perm)
    loss = vloss = None
    for start in range(0, batch.size, mb):
        end = start + mb
        rows = tuple(col[start:end] for col in cols)
        if inp.compiled is not None and policy_active and critic_active and end <= batch.size:
            out = inp.compiled(*rows, loss_fn)
            if out is not None:
                loss, vloss = out
                continue
        step_loss, step_vloss = _eager_step(algo, inp, rows, loss_fn, uses_dist, active)
        loss = step_loss if policy_active else loss
        vloss = step_vloss if critic_active else vloss
    return loss, vloss


def first_order_policy_update(
    algo,
    batch: Batch,
    loss_fn: Callable[[torch.Tensor, torch.Tensor, object], torch.Tensor],
    uses_dist: bool = True,
) -> dict:
    """Run ``update_epochs`` epochs of minibatch Adam steps on ``loss_fn(idx, ratio, dist)``.

    ``uses_dist=False`` (a loss that reads only ``idx`` and ``ratio``): ``dist`` is ``None`` and the
    log-probabilities come from ``policy.log_prob`` without building a distribution object.

    The critics (reward and every cost) are regressed on their targets in the same minibatch passes
    (one backward for both losses; separate parameters and optimisers, so this equals two separate
    loops but halves the Python overhead). The advantages were computed with the pre-update critics.
    The policy stops early (after an epoch) when the mean KL(pi_old || pi) over the batch exceeds
    ``1.5 * target_kl`` (safety-starter-agents' rule; ``target_kl=None`` disables it); the critics then
    finish their ``vf_epochs`` alone.

    The minibatch steps are :func:`_run_epoch`'s (its docstring says how they are kept fast).
    """
    cfg = algo.config
    inp = _update_inputs(algo, batch, uses_dist)
    vf_epochs = cfg.vf_epochs or cfg.update_epochs
    kl = torch.zeros((), device=algo.device)
    epochs_done = 0
    loss = vloss = torch.zeros((), device=algo.device)
    policy_active = True
    for epoch in range(max(cfg.update_epochs, vf_epochs)):
        policy_active = policy_active and epoch < cfg.update_epochs
        critic_active = epoch < vf_epochs
        if not (policy_active or critic_active):
            break
        ep_loss, ep_vloss = _run_epoch(algo, batch, inp, loss_fn, uses_dist, (policy_active, critic_active))
        loss = loss if ep_loss is None else ep_loss
        vloss = vloss if ep_vloss is None else ep_vloss
        if policy_active:
            epochs_done += 1
            with torch.no_grad():
                kl = algo.approx_kl(algo.policy.log_prob(inp.x, batch.actions), batch.logp)
            if cfg.target_kl is not None and kl > 1.5 * cfg.target_kl:
                policy_active = False
    algo._critics_updated = True
    return {
        "kl": float(kl),
        "policy_epochs": epochs_done,
        "policy_loss": float(loss.detach()),
        "value_loss": float(vloss.detach()),
    }

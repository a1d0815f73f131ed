"""Second-order helpers (CG, Fisher-vector products, backtracking line search) and Lagrange multipliers."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from bayescrl.utils.errors import ConfigError


def flat_params(module: nn.Module) -> torch.Tensor:
    return torch.cat([p.data.reshape(-1) for p in module.parameters()])


def set_flat_params(module: nn.Module, flat: torch.Tensor) -> None:
    i = 0
    for p in module.parameters():
        n = p.numel()
        p.data.copy_(flat[i : i + n].view_as(p))
        i += n


def flat_grad(output: torch.Tensor, params, retain_graph: bool = False, create_graph: bool = False):
    params = list(params)
    grads = torch.autograd.grad(
        output,
        params,
        retain_graph=retain_graph or create_graph,
        create_graph=create_graph,
        allow_unused=True,
    )
    return torch.cat(
        [(torch.zeros_like(p) if g is None else g).reshape(-1) for g, p in zip(grads, params, strict=True)]
    )


def conjugate_gradient(
    avp: Callable[[torch.Tensor], torch.Tensor], b: torch.Tensor, iters: int = 10, tol: float = 1e-10
) -> torch.Tensor:
    """Solve ``A x = b`` for symmetric positive-definite ``A`` given only products ``v -> A v``
    (Schulman et al. 2015); the package's one CG (TRPO-style baselines, ACPO deep and tabular).

    ``b`` may be (d,) or (d, k): k right-hand sides solved together (one CG per column in one batch,
    ``avp`` applied column by column, stopping when every column's squared residual is ``<= tol``).
    ``iters`` is the CG budget (table `tab:hyperparameters`: 10).
    """
    if not isinstance(iters, int) or iters < 1:
        raise ConfigError("cg_iters", iters, "must be an integer >= 1")
    if b.dim() == 1:
        dot, apply = torch.dot, avp
    else:

        def dot(u: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return (u * w).sum(0)

        def apply(p: torch.Tensor) -> torch.Tensor:
            return torch.stack([avp(p[:, j]) for j in range(p.shape[1])], dim=1)

    x = torch.zeros_like(b)
    r = b.clone()
    p = b.clone()
    rr = dot(r, r)
    for _ in range(iters):
        if bool((rr <= tol).all()):
            break
        ap = apply(p)
        alpha = rr / dot(p, ap).clamp_min(1e-30)
        x = x + alpha * p
        r = r - alpha * ap
        rr_new = dot(r, r)
        p = r + (rr_new / rr.clamp_min(1e-30)) * p
        rr = rr_new
    return x


def fisher_vector_product(policy, obs: torch.Tensor, damping: float = 0.1):
    """Return ``v -> (F + damping I) v`` with ``F`` the Hessian of the mean KL(pi_old || pi) at pi_old.

    Uses the double-backward trick: ``F v = grad((grad KL) . v)``.
    """
    params = [p for p in policy.parameters() if p.requires_grad]
    with torch.no_grad():
        old = policy.distribution(obs)
    old = _detach_dist(old)

    def fvp(v: torch.Tensor) -> torch.Tensor:
        kl = policy.kl(old, policy.distribution(obs)).mean()
        g = flat_grad(kl, params, create_graph=True)
        return flat_grad(g @ v, params) + damping * v

    return fvp


def _detach_dist(dist):
    if isinstance(dist, torch.distributions.Normal):
        return torch.distributions.Normal(dist.loc.detach(), dist.scale.detach(), validate_args=False)
    return torch.distributions.Categorical(logits=dist.logits.detach(), validate_args=False)


def line_search(
    step: torch.Tensor,
    accept: Callable[[torch.Tensor], bool],
    coef: float = 0.75,
    max_backtracks: int = 10,
) -> tuple[torch.Tensor | None, int]:
    """Backtracking: return ``(s^j · step, j)`` for the smallest ``j ∈ {0, …, L}`` with ``accept(s^j step)``.

    Returns ``(None, -1)`` if no candidate passes ("no update occurs"). ``coef`` = s ∈ (0, 1) and
    ``max_backtracks`` = L (ACPO's table `tab:hyperparameters`: 0.75 and 10). The package's one line
    search: :func:`backtracking_line_search` runs it on a module's parameters.
    """
    if not (0.0 < coef < 1.0):
        raise ConfigError("backtrack_coef", coef, "must lie in (0, 1)")
    if max_backtracks < 0:
        raise ConfigError("backtrack_iters", max_backtracks, "must be >= 0")
    for j in range(max_backtracks + 1):
        cand = step * coef**j
        if accept(cand):
            return cand, j
    return None, -1


def backtracking_line_search(
    policy: nn.Module,
    step: torch.Tensor,
    accept: Callable[[], bool],
    max_backtracks: int = 25,
    decay: float = 0.8,
) -> tuple[bool, int]:
    """Try ``theta_old + decay^j * step`` for ``j = 0..max_backtracks-1``; keep the first accepted one.

    ``accept()`` evaluates the policy in its current (trial) parameters. On failure the old
    parameters are restored. Returns ``(accepted, j)`` (``(False, max_backtracks)`` on failure).
    """
    old = flat_params(policy)
    if max_backtracks < 1:
        return False, max_backtracks

    def trial(cand: torch.Tensor) -> bool:
        set_flat_params(policy, old + cand)
        return accept()

    cand, j = line_search(step, trial, decay, max_backtracks - 1)
    if cand is None:
        set_flat_params(policy, old)
        return False, max_backtracks
    return True, j


class LagrangeMultipliers:
    """One multiplier per constraint, projected gradient ascent on ``lambda_i (J_Ci - d_i)``:
    ``lambda_i <- max(0, lambda_i + lr (J_Ci - d_i))`` (PPO-Lagrangian of Ray et al. 2019)."""

    def __init__(self, m: int, init: float = 0.0, lr: float = 0.05):
        self.value = torch.full((m,), float(init), dtype=torch.float64, device="cpu")
        self.lr = lr

    def update(self, ep_costs: torch.Tensor, limits: torch.Tensor) -> torch.Tensor:
        self.value = torch.clamp(self.value + self.lr * (ep_costs.double() - limits.double()), min=0.0)
        return self.value

    def state_dict(self) -> dict:
        return {"value": self.value.clone(), "lr": self.lr}

    def load_state_dict(self, d: dict) -> None:
        self.value, self.lr = d["value"].clone(), d["lr"]


class AdamSteps:
    """Repeated ``step()`` of one ``torch.optim.Adam(..., fused=True)`` with less Python work per step.

    After the optimiser's first step has created its state, each step is the call ``Adam.step`` ends in
    (``torch._fused_adam_`` on the group's parameters, gradients, moments and step counts, after adding
    one to the counts), so the result is bit-for-bit ``optimizer.step()``'s (test
    ``test_adam_steps_match_optimizer_step``) without its per-call bookkeeping (hooks, group and state
    look-ups, device grouping), which costs more than the arithmetic for (64, 64) networks. The state
    lives in the optimiser as before (checkpoints unchanged); ``lr`` is read from the group at every step.
    Anything the shortcut does not cover -- not fused, several groups, amsgrad, decoupled weight decay,
    gradient scaling, step hooks, a parameter without a gradient, mixed devices or dtypes -- goes through
    ``optimizer.step()``. Build one per update (a state loaded into the optimiser replaces its tensors).
    """

    def __init__(self, optimizer: torch.optim.Optimizer):
        self.opt = optimizer
        self._fast: tuple | None = ()

    def _prepare(self) -> tuple | None:
        opt = self.opt
        if not isinstance(opt, torch.optim.Adam) or len(opt.param_groups) != 1:
            return None
        from torch.optim import optimizer as _optimizer

        hooks = (
            getattr(opt, "_optimizer_step_pre_hooks", None),
            getattr(opt, "_optimizer_step_post_hooks", None),
            getattr(_optimizer, "_global_optimizer_pre_hooks", None),
            getattr(_optimizer, "_global_optimizer_post_hooks", None),
        )
        if not hasattr(torch, "_fused_adam_") or any(h is None or len(h) for h in hooks):
            return None  # a torch without these internals, or hooks that must run: optimizer.step()
        g = opt.param_groups[0]
        if not g.get("fused") or g["amsgrad"] or g.get("decoupled_weight_decay") or g.get("differentiable"):
            return None
        if getattr(opt, "grad_scale", None) is not None or getattr(opt, "found_inf", None) is not None:
            return None
        params = list(g["params"])
        if not params or len({(p.device, p.dtype) for p in params}) != 1:
            return None
        states = [opt.state.get(p, {}) for p in params]
        if not all("step" in s and "exp_avg" in s and "exp_avg_sq" in s for s in states):
            return ()  # no state yet: the first step creates it
        steps = [s["step"] for s in states]
        return params, [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states], steps, g

    def step(self) -> None:
        if self._fast is not None and len(self._fast) == 0:
            self._fast = self._prepare()
        if not self._fast:  # None: never applies; (): try again after this first step
            self.opt.step()
            return
        params, exp_avgs, exp_avg_sqs, steps, g = self._fast
        grads = [p.grad for p in params]
        if any(gr is None for gr in grads):
            self.opt.step()
            return
        beta1, beta2 = g["betas"]
        torch._foreach_add_(steps, 1)
        torch._fused_adam_(
            params,
            grads,
            exp_avgs,
            exp_avg_sqs,
            [],
            steps,
            amsgrad=False,
            lr=g["lr"],
            beta1=beta1,
            beta2=beta2,
            weight_decay=g["weight_decay"],
            eps=g["eps"],
            maximize=g["maximize"],
            grad_scale=None,
            found_inf=None,
        )

"""``warmtsof``: warmPref-PS with online preference feedback (Algorithm `prac_warmtsof`), batched over seeds.

At round ``t`` the agent draws ``θ̂_t`` by a perturbed MAP (Eq. `final_surrogate_perturbed_loss`), finds
the top-two arms ``A¹_t, A²_t`` under ``θ̂_t`` and, if their gap ``⟨A¹_t - A²_t, θ̂_t⟩ < ε_t``, pays ``c`` to
ask the rater of ``D0`` (same ``ϑ``, ``β`` and expert model) to compare them; the comparison joins the
data as an *online* comparison, ``θ̃_t`` is re-drawn and
``A_t = argmax ⟨a, θ̃_t⟩``. The cost enters the regret: ``regret_t = ⟨A*, θ⟩ - ⟨A_t, θ⟩ + c_t``.

``get_epsilon`` (left open by the thesis, "will be decided through analysis") — our rule::

    ε_t = max(0, ε0 · sqrt(d / t) - c)

``sqrt(d/t)`` is the order of the posterior standard deviation of a reward difference after ``t`` rounds
with unit-norm arms, so the agent asks while the sampled top-two gap is within posterior noise, and it
only asks about gaps that are worth more than the price ``c`` of the question (``ε_t = 0``: never ask).
``λ`` and ``β`` (arguments of the thesis' ``get_epsilon``) are not used by this rule.

The online comparisons join ``D_t`` and the posterior is updated "using Equation
`final_surrogate_perturbed_loss`", whose preference term weights every comparison by ``ω_n ~ Bern(0.5)``:
so they get Bern(``p_online`` = 0.5) bootstrap weights like the offline ones (``p_online = 1`` would leave
them unperturbed and make the re-drawn ``θ̃_t`` over-confident about the asked pair).

With one random stream per seed (:func:`~bayescrl.utils.seeding.run_generators`) a seed that does not ask
at round ``t`` draws nothing for the re-draw and keeps its warm start, so its run is the same whether
other seeds of the batch ask or not.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from bayescrl.bandits.agents import BootstrapAgent
from bayescrl.bandits.env import LinearBandit
from bayescrl.bandits.offline import OfflineData
from bayescrl.raters import label


def get_epsilon(c: float, t: int, d: int, eps0: float = 1.0) -> float:
    """Threshold ``ε_t = max(0, ε0·sqrt(d/t) - c)`` on the top-two gap (``t`` 1-based)."""
    return max(0.0, eps0 * math.sqrt(d / max(t, 1)) - c)


class WarmTSOFAgent(BootstrapAgent):
    """Algorithm `prac_warmtsof` on top of :class:`~bayescrl.bandits.agents.BootstrapAgent`."""

    def __init__(
        self,
        env: LinearBandit,
        data: OfflineData,
        beta: torch.Tensor,
        lam: torch.Tensor,
        *,
        generator: torch.Generator,
        cost: float = 0.0,
        eps0: float = 1.0,
        label: str = "warmtsof",
        **kw,
    ):
        kw.setdefault("p_online", 0.5)  # ω_n ~ Bern(0.5), Eq. `final_surrogate_perturbed_loss`
        kw.update(generator=generator, extra_pref_capacity=env.T, label=label)
        super().__init__(env, data, beta, lam, **kw)
        self.data, self.cost, self.eps0 = data, cost, eps0
        self.queries = torch.zeros(env.num_seeds, dtype=torch.long, device=env.arms.device)

    def act(self, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        env, S = self.env, self.env.num_seeds
        theta = self.sample_theta()
        scores = torch.einsum("skd,sd->sk", env.arms, theta)
        top = scores.topk(2, dim=1)
        gap = top.values[:, 0] - top.values[:, 1]
        ask = gap < get_epsilon(self.cost, t + 1, env.d, self.eps0)
        arm = top.indices[:, 0]
        cost = torch.zeros(S, dtype=theta.dtype, device=theta.device)
        if bool(ask.any()):
            idx = ask.nonzero().squeeze(1)
            rows = torch.arange(S, device=arm.device)
            a1 = env.arms[rows, top.indices[:, 0]][idx]
            a2 = env.arms[rows, top.indices[:, 1]][idx]
            rater = self.data.raters[0]
            gens = self.gen
            per_seed = isinstance(gens, (list, tuple))
            sub = [gens[i] for i in idx.tolist()] if per_seed else gens
            y = label(a1, a2, self.data.vartheta[idx, 0], rater.beta_value(), rater.expert, sub)
            self.problem.append_preferences(a1, a2, y, rater=0, online=True, batch_index=idx)
            if per_seed:  # seeds that did not ask: their streams and warm starts are left as they were
                kept = [(g, g.get_state()) for g, a in zip(gens, ask.tolist(), strict=True) if not a]
                prev = self.prev
            theta2 = self.sample_theta()
            if per_seed:
                for g, state in kept:
                    g.set_state(state)
                if prev is not None:
                    m = ask.view(-1, *([1] * (prev.theta.dim() - 1)))
                    mv = ask.view(-1, *([1] * (prev.vartheta.dim() - 1)))
                    self.prev = dataclasses.replace(
                        self.prev,
                        theta=torch.where(m, self.prev.theta, prev.theta),
                        vartheta=torch.where(mv, self.prev.vartheta, prev.vartheta),
                    )
            arm2 = torch.einsum("skd,sd->sk", env.arms, theta2).argmax(1)
            arm = torch.where(ask, arm2, arm)
            cost = torch.where(ask, torch.full_like(cost, self.cost), cost)
            self.queries += ask.long()
        return arm, cost

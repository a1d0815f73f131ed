"""PSPL: top-two posterior sampling for preference-based RL in tabular episodic MDPs (chapter `PSPL`).

Modules: :mod:`~bayescrl.pbrl.mdp` (value iteration, exact policy values), :mod:`~bayescrl.pbrl.envs`
(RiverSwim, discretised MountainCar), :mod:`~bayescrl.pbrl.data` (offline D0; raters from
:mod:`bayescrl.raters`),
:mod:`~bayescrl.pbrl.agents` (pspl, pspl-bootstrap, uniform, dps, lpbrl),
:mod:`~bayescrl.pbrl.offline_baselines` (dpo, ipo), :mod:`~bayescrl.pbrl.bandit` (best-arm identification),
:mod:`~bayescrl.pbrl.experiment` (runner, β estimated by :mod:`bayescrl.raters.competence`) and the
``bayescrl pspl`` command in :mod:`~bayescrl.commands.pspl`. See ``docs/pspl.md``.
"""

from bayescrl.pbrl.envs import make_env, mountaincar, riverswim
from bayescrl.pbrl.experiment import run_experiment, validate_config
from bayescrl.pbrl.mdp import TabularMDP, policy_value, simple_regret, value_iteration

__all__ = [
    "TabularMDP",
    "make_env",
    "mountaincar",
    "policy_value",
    "riverswim",
    "run_experiment",
    "simple_regret",
    "validate_config",
    "value_iteration",
]

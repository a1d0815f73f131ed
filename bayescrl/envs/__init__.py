"""Safe-control task suite (gymnasium + MuJoCo) and tabular CMDPs with exact LP optima.

See ``docs/envs.md``. Importing this package registers the ``bayescrl/...`` environment ids with gymnasium.
"""

from bayescrl.envs.registration import ENV_IDS, TRAFFIC_IDS, VARIANT_IDS, register_envs
from bayescrl.envs.tabular_cmdp import (
    InfeasibleCMDPError,
    LPSolution,
    PolicyEvaluation,
    TabularCMDP,
    TabularCMDPEnv,
    make_ergodic_cmdp,
    make_small_cmdp,
    policy_from_occupancy,
    stationary_distribution,
)
from bayescrl.envs.wrappers import SafetyGymnasiumStepWrapper, cost_vector

register_envs()

__all__ = [
    "ENV_IDS",
    "TRAFFIC_IDS",
    "VARIANT_IDS",
    "SafetyGymnasiumStepWrapper",
    "cost_vector",
    "register_envs",
    "InfeasibleCMDPError",
    "LPSolution",
    "PolicyEvaluation",
    "TabularCMDP",
    "TabularCMDPEnv",
    "make_ergodic_cmdp",
    "make_small_cmdp",
    "policy_from_occupancy",
    "stationary_distribution",
]

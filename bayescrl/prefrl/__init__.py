"""Preference-based constrained RL: a Bayesian reward posterior learned from raters of unknown competence
drives any registered constrained optimiser (e-COP, ACPO, PPO-Lagrangian, CPO, ...).

See ``docs/prefrl.md``.
"""

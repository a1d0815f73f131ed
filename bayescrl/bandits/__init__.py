"""warmPref-PS (chapter `warmPref-PS`): linear bandits warm-started with offline preferences.

Public entry point: :func:`run_experiment` (used by ``bayescrl bandit`` and ``bayescrl demo``).
"""

from bayescrl.bandits.experiment import run_experiment

__all__ = ["run_experiment"]

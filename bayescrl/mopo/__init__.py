"""MOPO: multi-objective constrained preference optimisation (seed chapter `mopo`).

Modules: :mod:`~bayescrl.mopo.objective` (pure batched torch functions of Problem `main-obj`),
:mod:`~bayescrl.mopo.tabular` (exact and stochastic tabular solvers; :mod:`~bayescrl.mopo.tabular_run` runs a
tabular config through them), :mod:`~bayescrl.mopo.preferences`
(per-action preference probabilities: win rates, or a Bradley–Terry posterior with rater competence),
:mod:`~bayescrl.mopo.synthetic`
(sanity check and motivating example), :mod:`~bayescrl.mopo.pareto` (non-dominated filter, hypervolume),
:mod:`~bayescrl.commands.mopo` (the ``bayescrl mopo`` command) and :mod:`~bayescrl.mopo.lm` (language models).
Sub-modules are imported lazily so that ``import bayescrl.mopo`` never pulls in ``transformers``.
"""

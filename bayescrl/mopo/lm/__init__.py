"""MOPO for causal language models (chapter `mopo`, sec. `sec:function_approx`, fig. `multiplepolicyheads`).

Modules: :mod:`.data` (JSONL / TRL-style / HH-RLHF loaders, validation, D_J), :mod:`.model` (LoRA policy,
multi-head policy, reference via disabled adapters, lagged snapshots, sequence log-probs), :mod:`.dual`
(head-batched adapter over :mod:`bayescrl.mopo.objective`), :mod:`.config` (:class:`MOPOLMConfig`),
:mod:`.trainer` (:class:`MOPOLMTrainer`), :mod:`.evaluate` (generation, Pareto summary), :mod:`.tiny` (the
offline verbosity task), :mod:`.experiment` (the ``mode: lm`` configs, checked before any work), :mod:`.run`
(:func:`run_lm`, the ``mode: lm`` entry point), :mod:`.user` (your own TRL-format file and local model) and
:mod:`.reward_head` (Bradley–Terry reward head with rater competence for ``preference_model:
bradley-terry``).
"""

from __future__ import annotations

from importlib import import_module

__all__ = ["run_lm"]


def __getattr__(name: str):
    """``run_lm`` (the ``mode: lm`` entry point) loads on first use, like the other submodules."""
    if name == "run_lm":
        return import_module("bayescrl.mopo.lm.run").run_lm
    raise AttributeError(name)

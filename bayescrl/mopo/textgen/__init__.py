"""The thesis' text-generation table at small scale, offline (chapter `mopo`, `empirical_tasks_comparison`).

Modules: :mod:`.tasks` (Assistant and Summary prompts from the package's data files, behaviour policies),
:mod:`.scorers` (proxy objectives whose models ship inside pip packages), :mod:`.labels` (rater-competence
Bradley–Terry labels of the base model's own samples), :mod:`.base` (tiny GPT-2 or a local model),
:mod:`.ric` (Rewards-in-Context), :mod:`.parm` (PARM), :mod:`.table` (table, fronts, runtimes) and
:mod:`.run` (``mode: textgen`` of ``bayescrl mopo``).
"""

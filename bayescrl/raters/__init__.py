"""Raters: the one rater model of the package (bottom layer; imports only :mod:`bayescrl.utils`).

A rater has deliberateness β and knowledgeability λ and holds its own reward vector ϑ ~ N(θ, I/λ²)
(Eq. `rater_preference_dist`, Eq. `pref_logistic_trajectories`). Modules: :mod:`.rater` (:class:`Rater`,
:class:`CompetencePrior`), :mod:`.spec` (the declarative schema, :func:`parse_raters`), :mod:`.likelihood`
(Bradley–Terry with competence), :mod:`.competence` (β estimators), :mod:`.simulated` (simulated raters
with B-Pref's irrationalities, :class:`RaterPool`). Bandits, PSPL, safe RL from preferences and MOPO all
use it.
"""

from bayescrl.raters.likelihood import bt_logit, log_likelihood, prob_first, score_diff, signed_diff
from bayescrl.raters.rater import COMPETENCE_PRIORS, EXPERTS, FIELDS, CompetencePrior, Rater
from bayescrl.raters.simulated import EQUAL, SKIP, BeliefRater, RaterPool, label
from bayescrl.raters.spec import check_rater_ids, parse_rater, parse_raters

__all__ = [
    "COMPETENCE_PRIORS",
    "EQUAL",
    "EXPERTS",
    "FIELDS",
    "SKIP",
    "BeliefRater",
    "CompetencePrior",
    "Rater",
    "RaterPool",
    "bt_logit",
    "check_rater_ids",
    "label",
    "log_likelihood",
    "parse_rater",
    "parse_raters",
    "prob_first",
    "score_diff",
    "signed_diff",
]

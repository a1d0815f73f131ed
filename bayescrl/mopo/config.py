"""Configuration of ``bayescrl mopo`` (``mode: tabular | synthetic | lm | textgen``), checked before any work.

The tabular and synthetic modes are :class:`~bayescrl.utils.config.Config` dataclasses, one documented
field each: :class:`TabularMOPO`, :class:`SanityExperiment`, :class:`MotivatingExperiment`. Their solver
sections hold only what a config sets (``null``: the solver's default, see :mod:`bayescrl.mopo.tabular`
and :mod:`bayescrl.mopo.synthetic`); :func:`check_config` refuses unknown keys (with the closest valid one)
and bad numbers by name. ``mode: textgen`` is :class:`bayescrl.mopo.textgen.run.TextgenExperiment`;
``mode: lm`` is :class:`bayescrl.mopo.lm.experiment.TinyExperiment` or, naming a data file or a model,
:class:`bayescrl.mopo.lm.experiment.UserExperiment`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import torch

from bayescrl.mopo.lm.experiment import lm_experiment
from bayescrl.mopo.preferences import PREFERENCE_MODELS, parse_bt_options
from bayescrl.mopo.tabular import TabularProblem, check_tau, parse_tabular
from bayescrl.mopo.textgen.run import validate as validate_textgen
from bayescrl.utils.checks import choice, number, positive_int
from bayescrl.utils.config import Config
from bayescrl.utils.errors import ConfigError

MODES = ("tabular", "synthetic", "lm", "textgen")
#: setting names that are counts (integers >= 1) in every section
COUNTS = ("steps", "runs", "batch", "hidden", "log_every", "n", "n_x", "n_y", "n_w", "n_thresholds")
#: setting names that are real numbers in every section (see :meth:`Section.validate` for their ranges)
REALS = ("lr", "lr_final", "lr_lambda", "sigma0", "sigma_min", "eps", "beta", "gamma", "tau", "t0")


@dataclass
class Section(Config):
    """A solver section: ``null`` settings take the solver's default; the numbers given are checked by
    name (counts >= 1; learning rates, ``sigma0``, ``sigma_min``, ``tau``, ``beta`` > 0; ``eps`` >= 0;
    ``gamma`` in (0, 1]); lists, mappings and other strings are the solver's to check."""

    def validate(self) -> None:
        for f in fields(self):
            value, name = getattr(self, f.name), self.key(f.name)
            numeric = f.name in COUNTS or f.name in REALS
            if (
                value is None
                or isinstance(value, (dict, list, Config))
                or (isinstance(value, str) and not numeric)
            ):
                continue
            if f.name in COUNTS:
                positive_int(value, name)
            elif f.name in ("lr", "lr_final", "lr_lambda", "sigma0", "sigma_min"):
                number(value, name, 0.0, strict=True)
            elif f.name in ("eps", "beta", "gamma", "tau", "t0"):
                number(value, name)
                if f.name in ("tau", "beta") and float(value) <= 0:  # beta: adaptive threshold or DPO's
                    raise ConfigError(name, value, "must be > 0")
                if f.name == "eps" and float(value) < 0:  # a negative one was run as 0 (the bound off)
                    raise ConfigError(name, value, "must be >= 0 (KL radius of the lower bound; 0: off)")
                if f.name == "gamma" and not 0 < float(value) <= 1:
                    raise ConfigError(name, value, "must be in (0, 1] (the decay factor of sigma)")


@dataclass
class Stochastic(Section):
    """Settings of a stochastic (sampled-gradient) solver."""

    steps: int | None = None
    """optimisation steps"""
    lr: float | None = None
    """learning rate"""
    batch: int | None = None
    """samples per step"""
    runs: int | None = None
    """independent runs (their spread is reported)"""
    seed: int | None = None
    """seed of the first run"""
    log_every: int | None = None
    """steps between history records"""
    lr_final: float | None = None
    """final learning rate of a linear decay"""


@dataclass
class MOPOSolver(Stochastic):
    """``mopo:`` the stochastic MOPO solver (Algorithm `mopo`)."""

    SECTION: ClassVar[str] = "mopo"
    beta: float | None = None
    """adaptive-threshold factor b = beta G(rho^(t - t0))"""
    t0: float | None = None
    """lag of the reference policy and period of the threshold update"""
    eps: float | None = None
    """KL radius of the lower-bound problem (0: off)"""


@dataclass
class MOPOLBSolver(Stochastic):
    """``mopo_lb:`` the log-barrier solver (appendix `logbarrier`)."""

    SECTION: ClassVar[str] = "mopo_lb"
    sigma0: float | None = None
    """initial barrier weight sigma_0"""
    gamma: float | None = None
    """decay of sigma per step, in (0, 1]"""
    sigma_min: float | None = None
    """floor of sigma (0: none)"""


@dataclass
class BradleyTerry(Section):
    """``bradley_terry:`` the Bradley-Terry posterior of the per-action preference probabilities."""

    SECTION: ClassVar[str] = "bradley_terry"
    engine: str | None = None
    """inference engine (laplace, bootstrap, svi, nuts)"""
    num_samples: int | None = None
    """posterior samples"""
    prior_scale: float | None = None
    """prior sd of the action scores"""
    competence: str | None = None
    """the raters' competence: known, infer, infer-beta"""
    beta_prior_sd: float | None = None
    """prior sd of log beta (competence infer)"""
    lower_quantile: float | None = None
    """quantile of the lower confidence bound of the win rates"""
    seed: int | None = None
    """seed of the fit"""
    engine_options: Any = None
    """the engine's keyword options (checked by the engine's own table)"""


@dataclass
class Exact(Section):
    """``exact:`` the exact solver (it takes no settings)."""

    SECTION: ClassVar[str] = "exact"


@dataclass
class Common(Config):
    """Keys of every mopo config."""

    mode: str | None = None
    """tabular, synthetic, lm or textgen"""
    name: str | None = None
    """a name for the run"""
    description: str | None = None
    """a description"""


@dataclass
class TabularMOPO(Common):
    """``mode: tabular``: MOPO on a bandit with finitely many actions."""

    solver: Any = None
    """exact, mopo or mopo_lb"""
    actions: Any = None
    """the action names"""
    reference: Any = None
    """the reference policy pi_ref (action -> probability)"""
    primary: Any = None
    """the primary objective"""
    tau: Any = None
    """KL regularisation tau (> 0)"""
    b: Any = None
    """constraint thresholds"""
    data: Any = None
    """preference records (or a file)"""
    augment: bool = True
    """augment the records with their mirror pairs (true or false)"""
    raters: Any = None
    """the raters (ids, competence)"""
    preference_model: Any = None
    """win rates or Bradley-Terry"""
    estimator: Any = None
    """how preference probabilities are estimated"""
    bradley_terry: BradleyTerry = field(default_factory=BradleyTerry)
    """the Bradley-Terry posterior"""
    exact: Exact = field(default_factory=Exact)
    """the exact solver"""
    mopo: MOPOSolver = field(default_factory=MOPOSolver)
    """the stochastic MOPO solver"""
    mopo_lb: MOPOLBSolver = field(default_factory=MOPOLBSolver)
    """the log-barrier solver"""


@dataclass
class SanityExperiment(Common):
    """``mode: synthetic``, ``experiment: sanity``: the sanity check of the solvers."""

    experiment: Any = None
    """sanity"""
    datasets: Any = None
    """the data sets (A, B)"""
    tau: Any = None
    """KL regularisation tau, or a list of them (each > 0)"""
    primary: Any = None
    """the primary objective"""
    estimator: Any = None
    """how preference probabilities are estimated"""
    b: dict | None = None
    """constraint thresholds per data set"""
    mopo: MOPOSolver = field(default_factory=MOPOSolver)
    """the stochastic MOPO solver"""


@dataclass
class MotivatingGrid(Section):
    """``grid:`` the discretisation of the motivating example."""

    SECTION: ClassVar[str] = "grid"
    n_x: int | None = None
    """prompt grid points"""
    n_y: int | None = None
    """response grid points"""
    n_w: int | None = None
    """weighting grid points"""


@dataclass
class MotivatingDPO(Section):
    """``dpo:`` the DPO baseline of the motivating example."""

    SECTION: ClassVar[str] = "dpo"
    beta: float | None = None
    """DPO's inverse temperature"""
    steps: int | None = None
    """optimisation steps"""
    lr: float | None = None
    """learning rate"""
    lr_final: float | None = None
    """final learning rate"""
    batch: int | None = None
    """batch size"""
    hidden: int | None = None
    """hidden units"""
    w: Any = None
    """scalarisation weights"""


@dataclass
class ScoreModel(Section):
    """``mopo.score_model:`` the learned score model."""

    SECTION: ClassVar[str] = "mopo.score_model"
    kind: str | None = None
    """the model's kind"""
    steps: int | None = None
    """training steps"""
    batch: int | None = None
    """batch size"""
    lr: float | None = None
    """learning rate"""
    lr_final: float | None = None
    """final learning rate"""
    hidden: int | None = None
    """hidden units"""


@dataclass
class MotivatingMOPO(Section):
    """``mopo:`` MOPO in the motivating example."""

    SECTION: ClassVar[str] = "mopo"
    tau: float | None = None
    """KL regularisation tau"""
    t0: float | None = None
    """lag of the reference policy"""
    steps: int | None = None
    """optimisation steps"""
    lr: float | None = None
    """learning rate"""
    lr_final: float | None = None
    """final learning rate"""
    lr_lambda: float | None = None
    """step size of the multiplier"""
    batch: int | None = None
    """batch size"""
    hidden: int | None = None
    """hidden units"""
    eps: float | None = None
    """KL radius of the lower bound (0: off)"""
    scores: Any = None
    """the scores"""
    constraint_on: Any = None
    """the constrained objective"""
    thresholds: Any = None
    """thresholds"""
    thresholds_r1: Any = None
    """thresholds on r1"""
    primaries: Any = None
    """primary objectives"""
    reference_update: Any = None
    """how the reference is updated"""
    n_thresholds: int | None = None
    """thresholds per front"""
    score_model: ScoreModel = field(default_factory=ScoreModel)
    """the learned score model"""


@dataclass
class MotivatingCOP(Section):
    """``cop:`` the constrained baseline."""

    SECTION: ClassVar[str] = "cop"
    n: int | None = None
    """grid points"""


@dataclass
class MotivatingExperiment(Common):
    """``mode: synthetic``, ``experiment: motivating``: the motivating example."""

    experiment: Any = None
    """motivating"""
    reward_sets: Any = None
    """the reward sets"""
    n: int | None = None
    """samples"""
    n_y: int | None = None
    """responses per prompt"""
    seed: Any = None
    """seed"""
    grid: MotivatingGrid = field(default_factory=MotivatingGrid)
    """the discretisation"""
    dpo: MotivatingDPO = field(default_factory=MotivatingDPO)
    """the DPO baseline"""
    mopo: MotivatingMOPO = field(default_factory=MotivatingMOPO)
    """MOPO"""
    cop: MotivatingCOP = field(default_factory=MotivatingCOP)
    """the constrained baseline"""

    def validate(self) -> None:
        for key in ("n", "n_y"):
            if getattr(self, key) is not None:
                positive_int(getattr(self, key), key)


#: the config class of each schema (``mode``, or ``experiment`` of ``mode: synthetic``)
CONFIGS: dict[str, type[Config]] = {
    "tabular": TabularMOPO,
    "sanity": SanityExperiment,
    "motivating": MotivatingExperiment,
}


def config_class(config: dict) -> type[Config] | None:
    """The :data:`CONFIGS` class of ``config`` (None: mode lm / textgen, or an unknown experiment)."""
    mode = config.get("mode")
    if mode == "synthetic":
        exp = config.get("experiment", "sanity")
        return CONFIGS.get(exp) if exp in ("sanity", "motivating") else None
    return CONFIGS.get(mode)


def check_config(config: dict) -> None:
    """Refuse unknown keys (with the closest valid one) and degenerate sizes before anything runs."""
    mode = config.get("mode")
    choice(mode, "mode", MODES, f"must be one of {', '.join(MODES)}")
    if mode == "textgen":  # every key and value, before the output folder is made
        validate_textgen(config)
        return
    if mode == "lm":  # every key and value, before any data is read or model built
        lm_experiment(config)
        return
    if mode == "tabular":
        check_tabular(config)
        return
    cls = config_class(config)
    if cls is None:
        raise ConfigError("experiment", config.get("experiment"), "must be 'sanity' or 'motivating'")
    cls.from_dict(config)  # every key and every number of the solver sections
    _check_taus(config.get("tau"))


def check_tabular(config: Mapping[str, Any], device: str | torch.device = "cpu") -> TabularProblem:
    """Check a ``mode: tabular`` config as :func:`check_config` does (every key and number, ``tau``, every
    data record, the Bradley-Terry engine and its options) and return its parsed
    :class:`~bayescrl.mopo.tabular.TabularProblem` on ``device``, so that a run parses its records once."""
    TabularMOPO.from_dict(config)  # every key and every number of the solver sections
    _check_taus(config.get("tau"))
    problem = parse_tabular(config, device)  # every data record (fields, actions, raters)
    model = choice(config.get("preference_model", "empirical"), "preference_model", PREFERENCE_MODELS)
    if model != "empirical":  # the engine and its options, before any fit
        parse_bt_options(config.get("bradley_terry"))
    return problem


def _check_taus(tau: Any) -> None:
    """``tau``: a number (tabular) or a list (sanity), each finite and > 0."""
    for i, t in enumerate(tau if isinstance(tau, list) else [] if tau is None else [tau]):
        check_tau(t, i if isinstance(tau, list) else None)

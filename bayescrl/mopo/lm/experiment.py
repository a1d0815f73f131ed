"""The ``mode: lm`` configs of ``bayescrl mopo``, checked before any work.

Two :class:`~bayescrl.utils.config.Config` dataclasses with a documented field each; :func:`lm_experiment`
picks one by the config's paths:

* :class:`TinyExperiment` -- the tiny verbosity task, built offline (:func:`bayescrl.mopo.lm.run.run_lm`,
  ``examples/mopo/lm_tiny.yaml``);
* :class:`UserExperiment` -- your own preference file and local model, a config naming ``data.path`` or
  ``model.path`` (:func:`bayescrl.mopo.lm.user.run_user`, ``examples/mopo/trl_format.yaml``).

Their ``train`` section holds :class:`~bayescrl.mopo.lm.config.MOPOLMConfig` fields (checked by it, named
``train.<field>``). Every key and value is checked here; what needs the records themselves
(``train.batch_size`` against their number, their raters against ``raters``) is checked as the data is read,
before any model is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from bayescrl.mopo.lm.config import MOPOLMConfig
from bayescrl.mopo.lm.model import check_model_dir, model_context
from bayescrl.mopo.lm.reward_head import LMPreferenceSettings, preference_settings
from bayescrl.mopo.lm.tiny import OBJECTIVES, TinyTask, check_shape
from bayescrl.utils.checks import boolean, check_device, choice, mapping, number, positive_int
from bayescrl.utils.config import Config
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.hints import did_you_mean

#: the tiny task's runs (``methods``)
METHODS = ("mopo", "mopo-lb", "dpo_joint", "dpo_scalarised")
#: the tiny task's LoRA (``train.peft`` default; GPT-2's module names)
GPT2_LORA = {
    "r": 8,
    "lora_alpha": 16,
    "lora_dropout": 0.0,
    "target_modules": ["c_attn", "c_proj", "c_fc"],
    "fan_in_fan_out": True,
}
#: ``data.format`` of a preference file (:func:`bayescrl.mopo.lm.data.load_data`)
FORMATS = ("native", "trl", "hh")


def is_user_config(config: dict[str, Any]) -> bool:
    """True when the config names a data file or a model directory (else: the tiny built-in task)."""
    data, model = config.get("data"), config.get("model")
    return bool(
        (isinstance(data, dict) and data.get("path")) or (isinstance(model, dict) and model.get("path"))
    )


def _check_run_keys(cfg: Config) -> None:
    """The keys every ``mode: lm`` config shares: ``seed``, ``threads``, ``device``."""
    if cfg.seed is not None:
        cfg.seed = positive_int(cfg.seed, "seed", 0)
    if cfg.threads is not None:
        cfg.threads = positive_int(cfg.threads, "threads")
    if cfg.device is not None:
        cfg.device = check_device(cfg.device, "device")


def _number_lists(value: Any, key: str, length: int, low: float | None, high: float | None) -> list[list]:
    """``value`` as a list of lists of ``length`` numbers in ``[low, high]`` (the field named ``key``)."""
    if not isinstance(value, list):
        raise ConfigError(key, value, f"must be a list of lists of {length} numbers")
    for i, row in enumerate(value):
        if not isinstance(row, (list, tuple)) or len(row) != length:
            raise ConfigError(key, row, f"need {length} numbers", index=i)
        for v in row:
            number(v, key, low, high, index=i)
    return value


# ------------------------------------------------------------------------------------------ tiny task
@dataclass
class TinyTaskConfig(Config):
    """``task:`` the verbosity task (:class:`bayescrl.mopo.lm.tiny.TinyTask`)."""

    SECTION: ClassVar[str] = "task"
    l_low: int = 6
    """shortest answer in range, in words: ``r_1(y) = -max(0, l_low - |y|)``"""
    l_high: int = 12
    """longest answer in range, in words: ``r_2(y) = -max(0, |y| - l_high)``"""
    max_words: int = 20
    """longest answer of the behaviour policy (``|y| ~ U{1..max_words}``)"""
    bt_scale: float = 2.0
    """Bradley-Terry scale of the labels, ``P(a > b) = sigmoid(bt_scale (r(a) - r(b)))`` (>= 0)"""

    def validate(self) -> None:
        for key in ("l_low", "l_high", "max_words"):
            setattr(self, key, positive_int(getattr(self, key), self.key(key)))
        if self.l_high < self.l_low:
            raise ConfigError("task.l_high", self.l_high, f"must be >= task.l_low = {self.l_low}")
        if self.max_words < self.l_high:
            raise ConfigError("task.max_words", self.max_words, f"must be >= task.l_high = {self.l_high}")
        self.bt_scale = number(self.bt_scale, self.key("bt_scale"), 0.0)

    def task(self) -> TinyTask:
        """The task these settings describe."""
        return TinyTask(**self.to_dict())


@dataclass
class TinyData(Config):
    """``data:`` the preference records drawn from the behaviour policy, and the evaluation prompts."""

    SECTION: ClassVar[str] = "data"
    n_train: int = 512
    """preference records (K = 3 labels each: long_enough, short_enough, helpful)"""
    n_eval_prompts: int = 64
    """prompts each trained policy answers at evaluation"""

    def validate(self) -> None:
        for key in ("n_train", "n_eval_prompts"):
            setattr(self, key, positive_int(getattr(self, key), self.key(key)))


@dataclass
class TinyModel(Config):
    """``model:`` the tiny GPT-2 (context 64 tokens) and its fit to the behaviour policy."""

    SECTION: ClassVar[str] = "model"
    n_layer: int = 2
    """transformer layers"""
    n_embd: int = 64
    """embedding width"""
    n_head: int = 2
    """attention heads (must divide n_embd)"""
    sft_steps: int = 300
    """steps fitting pi_ref to the behaviour policy's answers"""

    def validate(self) -> None:
        check_shape(self.to_dict(), "model")
        for key in ("n_layer", "n_embd", "n_head", "sft_steps"):
            setattr(self, key, positive_int(getattr(self, key), self.key(key)))

    def context(self) -> int:
        """The model's context length in tokens."""
        return check_shape(self.to_dict(), "model")


@dataclass
class TinySweep(Config):
    """``sweep:`` extra MOPO runs with fixed thresholds (points of MOPO's Pareto front)."""

    SECTION: ClassVar[str] = "sweep"
    thresholds: list = field(default_factory=list)
    """one run per ``[b_long_enough, b_short_enough]``, win-rate thresholds in [0, 1]"""

    def validate(self) -> None:
        _number_lists(self.thresholds, "sweep.thresholds", len(OBJECTIVES) - 1, 0.0, 1.0)


@dataclass
class TinyExperiment(Config):
    """``mode: lm`` on the tiny verbosity task: MOPO and the DPO baselines on the same SFT model."""

    mode: str = "lm"
    """lm"""
    name: str | None = None
    """a name for the run"""
    description: str | None = None
    """a description"""
    out: Any = None
    """not used (the output folder is ``--out``)"""
    seed: int = 0
    """seed of the data, the SFT model and every run (and of ``train.seed`` unless given)"""
    threads: int | None = None
    """torch intra-op threads (null: $BAYESCRL_THREADS or 1)"""
    device: str | None = None
    """torch device (null: cuda if available, else cpu; ``--device`` wins)"""
    task: TinyTaskConfig = field(default_factory=TinyTaskConfig)
    """the verbosity task"""
    data: TinyData = field(default_factory=TinyData)
    """the training records and evaluation prompts"""
    model: TinyModel = field(default_factory=TinyModel)
    """the tiny GPT-2"""
    train: dict | None = None
    """MOPOLMConfig fields shared by every run (default peft: LoRA on GPT-2's attention and MLP)"""
    methods: list = field(default_factory=lambda: list(METHODS))
    """runs to train: mopo, mopo-lb, dpo_joint, dpo_scalarised"""
    sweep: TinySweep = field(default_factory=TinySweep)
    """extra fixed-threshold MOPO runs"""
    scalarise_weights: list = field(default_factory=lambda: [[1, 1, 1]])
    """a scalarised DPO run per weighting of the 3 objectives (each >= 0, not all 0)"""
    hv_reference: list = field(default_factory=lambda: [0.0, 0.0])
    """hypervolume reference point (helpful words, fraction of lengths in range)"""

    def validate(self) -> None:
        _check_run_keys(self)
        if not isinstance(self.methods, list):
            raise ConfigError("methods", self.methods, f"must be a list of {', '.join(METHODS)}")
        for i, m in enumerate(self.methods):
            if m not in METHODS:
                hint = did_you_mean(m, METHODS) if isinstance(m, str) else ""
                raise ConfigError("methods", m, f"must be one of {', '.join(METHODS)}{hint}", index=i)
        self._check_context()
        cfg = self.train_config()
        if cfg.batch_size > self.data.n_train:
            why = f"larger than data.n_train = {self.data.n_train}"
            raise ConfigError("train.batch_size", cfg.batch_size, why)
        weights = _number_lists(self.scalarise_weights, "scalarise_weights", len(OBJECTIVES), 0.0, None)
        for i, w in enumerate(weights):
            if not sum(w) > 0:
                raise ConfigError("scalarise_weights", w, "the weights must not all be 0", index=i)
        if not isinstance(self.hv_reference, list) or len(self.hv_reference) != 2:
            raise ConfigError("hv_reference", self.hv_reference, "need 2 numbers")
        for v in self.hv_reference:
            number(v, "hv_reference")

    def _check_context(self) -> None:
        """The longest prompt + answer must fit the tiny model's context."""
        ctx, task = self.model.context(), self.task.task()
        longest = max(len(p.split()) for p in task.eval_prompts(8)) + task.max_words + 4
        if longest > ctx:
            why = f"prompt + answer ({longest} tokens) would exceed the tiny model's context of {ctx} tokens"
            raise ConfigError("task.max_words", task.max_words, why)

    def train_config(self) -> MOPOLMConfig:
        """The training settings every run shares: ``train`` over the defaults peft :data:`GPT2_LORA` and
        seed ``seed``."""
        train = dict(mapping(self.train, "train"))
        train.setdefault("peft", GPT2_LORA)
        train.setdefault("seed", self.seed)
        return MOPOLMConfig.from_dict(train)


# ------------------------------------------------------------------------------- your data and model
@dataclass
class UserModel(Config):
    """``model:`` the model to align."""

    SECTION: ClassVar[str] = "model"
    path: str | None = None
    """a local Hugging Face model directory (config.json, weights, tokenizer; ``--model`` wins)"""


@dataclass
class UserData(Config):
    """``data:`` the preference file (:func:`bayescrl.mopo.lm.data.load_data`)."""

    SECTION: ClassVar[str] = "data"
    path: str | None = None
    """the file, relative to the config file (JSONL; Parquet for format trl)"""
    format: str = "trl"
    """trl (prompt, chosen, rejected, pref_<name> columns), native or hh"""
    primary: str | None = None
    """format trl: the name of the chosen/rejected objective (null: chosen)"""
    columns: list | None = None
    """format trl / hh: the 0/1 label columns that are objectives (trl: instead of the pref_ columns)"""
    names: list | None = None
    """format native: the objectives' names"""

    def validate(self) -> None:
        choice(self.format, "data.format", FORMATS)
        if self.path is not None and not isinstance(self.path, str):
            raise ConfigError("data.path", self.path, "must be a file path")
        if self.path and not Path(self.path).expanduser().exists():
            raise ConfigError("data.path", self.path, "file not found")

    def spec(self) -> dict[str, Any]:
        """The settings given, as :func:`~bayescrl.mopo.lm.data.load_data` reads them."""
        return {k: v for k, v in self.to_dict().items() if v is not None}


@dataclass
class Progress(Config):
    """``progress:`` progress lines and checkpoints."""

    SECTION: ClassVar[str] = "progress"
    log_every: int = 10
    """steps between progress lines"""
    checkpoint_every: int = 100
    """steps between checkpoints in OUT/checkpoint (0: only at the end)"""

    def validate(self) -> None:
        self.log_every = positive_int(self.log_every, "progress.log_every")
        self.checkpoint_every = positive_int(self.checkpoint_every, "progress.checkpoint_every", minimum=0)


@dataclass
class UserExperiment(Config):
    """``mode: lm`` on your own preference file with a local model (MOPO, MOPO-LB or DPO)."""

    mode: str = "lm"
    """lm"""
    name: str | None = None
    """a name for the run"""
    description: str | None = None
    """a description"""
    out: Any = None
    """not used (the output folder is ``--out``)"""
    seed: int | None = None
    """seed of the run and of the data order (null: train.seed, else 0)"""
    threads: int | None = None
    """torch intra-op threads (null: $BAYESCRL_THREADS or 1)"""
    device: str | None = None
    """torch device (null: cuda if available, else cpu; ``--device`` wins)"""
    model: UserModel = field(default_factory=UserModel)
    """the model"""
    data: UserData = field(default_factory=UserData)
    """the preference file"""
    train: dict | None = None
    """MOPOLMConfig fields (method, tau, steps, batch_size, lr, peft, ...)"""
    progress: Progress = field(default_factory=Progress)
    """progress lines and checkpoints"""
    resume: bool = False
    """continue from OUT/checkpoint (``--resume``)"""
    preference_model: str = "empirical"
    """empirical (the labels) or bradley-terry (a reward head, :mod:`bayescrl.mopo.lm.reward_head`)"""
    raters: list | None = None
    """the raters [{id, beta?, lam?}] of the file's rater column"""
    bradley_terry: dict | None = None
    """the Bradley-Terry fit: the tabular keys plus feature_dim, feature_batch"""

    def validate(self) -> None:
        _check_run_keys(self)
        boolean(self.resume, "resume")
        if not self.model.path:
            why = "give a local model directory: --model PATH (or model.path)"
            raise ConfigError("model.path", None, why)
        if not self.data.path:
            raise ConfigError("data.path", None, "give a preference file (TRL format, JSONL or Parquet)")
        cfg = self.train_config()  # bad values (batch_size: 0) stop here
        prefs = self.preferences()
        if prefs.model != "empirical" and cfg.method == "dpo":
            why = "train.method dpo trains on the labels: use mopo"
            raise ConfigError("preference_model", prefs.model, why)
        ctx = model_context(check_model_dir(str(self.model.path)))
        if ctx is not None and cfg.max_length > ctx:
            why = f"longer than the model's context ({ctx} tokens)"
            raise ConfigError("train.max_length", cfg.max_length, why)

    def train_config(self) -> MOPOLMConfig:
        """``train`` with the top-level seed as its default seed (it also orders the data)."""
        train = dict(mapping(self.train, "train"))
        train.setdefault("seed", 0 if self.seed is None else self.seed)
        return MOPOLMConfig.from_dict(train)

    def run_seed(self) -> int:
        """The seed of the run: ``seed``, else ``train.seed``."""
        return self.train_config().seed if self.seed is None else self.seed

    def preferences(self) -> LMPreferenceSettings:
        """``preference_model``, ``raters`` and ``bradley_terry``, checked."""
        keys = ("preference_model", "raters", "bradley_terry")
        return preference_settings({k: getattr(self, k) for k in keys})


#: the keys of any ``mode: lm`` config
KEYS = tuple(sorted({f.name for cls in (TinyExperiment, UserExperiment) for f in fields(cls)}))


def lm_experiment(config: dict[str, Any]) -> TinyExperiment | UserExperiment:
    """The checked ``mode: lm`` config: :class:`UserExperiment` when it names a data file or a model
    directory, else :class:`TinyExperiment`."""
    cls = UserExperiment if is_user_config(config) else TinyExperiment
    return cls.from_dict(config)

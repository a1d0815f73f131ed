"""``bayescrl mopo CONFIG.yaml --out DIR``, ``mode: textgen``: the text-generation table, offline.

Per seed: the base model (tiny GPT-2 fitted to the task's behaviour policy, or ``model.path``); its samples
on the training prompts, scored by the proxies and labelled by Bradley–Terry raters
(:mod:`bayescrl.mopo.textgen.labels`; written as ``seed_S/train_trl.jsonl``); then every algorithm is trained
on that data and evaluated by sampling on the held-out prompts and scoring the answers:

* ``ric`` -- :mod:`.ric` (SFT with reward tokens; sweep over ``ric.weightings`` or ``ric.desired_scores``);
* ``parm`` -- :mod:`.parm` (a preference-conditioned ARM guides the frozen base; sweep: ``parm.weightings``);
* ``modpo`` -- DPO on the scalarised labels ``w . prefs`` (``dpo_pairs(w)``; a run per ``modpo.weightings``);
* ``dpo_joint`` -- DPO on D_J, the records both objectives agree on;
* ``mopo-lag`` / ``mopo-lb`` -- :class:`bayescrl.mopo.lm.trainer.MOPOLMTrainer` (primary ``r1``, constraint on
  ``r2``; adaptive thresholds; ``mopo.thresholds`` adds fixed-threshold Lagrangian runs to MOPO-Lag's front).

Rewards are normalised per objective to [0, 1] by the min and max of the base model's offline samples.
Outputs: ``seed_S/results.json`` (points, timings, examples), ``results.json`` (the table, the settings),
``table.md``, ``table.json``, ``pareto.png``. See ``examples/mopo/textgen_assistant.yaml``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch

from bayescrl.mopo.lm.config import MOPOLMConfig
from bayescrl.mopo.lm.data import PreferenceData
from bayescrl.mopo.lm.model import lora_policy, model_context
from bayescrl.mopo.lm.tiny import check_shape
from bayescrl.mopo.lm.trainer import MOPOLMTrainer
from bayescrl.mopo.lm.user import load_local_model
from bayescrl.mopo.textgen import labels as lab
from bayescrl.mopo.textgen import parm as parm_mod
from bayescrl.mopo.textgen import ric as ric_mod
from bayescrl.mopo.textgen.base import SCORE_TOKENS, Plain, fit_behaviour, reward_tokens, sample, tiny_base
from bayescrl.mopo.textgen.scorers import get_scorer, score_all
from bayescrl.mopo.textgen.table import build_table, load_runs, markdown, plot_fronts
from bayescrl.mopo.textgen.tasks import DEFAULT_SCORERS, TASKS, Task, build_task
from bayescrl.utils import ConfigError, seed_everything, set_torch_threads, write_json
from bayescrl.utils.checks import boolean, check_device, mapping, number, positive_int
from bayescrl.utils.config import Config
from bayescrl.utils.io import check_keys, load_json

log = logging.getLogger(__name__)

ALGORITHMS = ("ric", "parm", "modpo", "dpo_joint", "mopo-lb", "mopo-lag")
GPT2_LORA = {
    "r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.05,
    "target_modules": ["c_attn", "c_proj", "c_fc"],
    "fan_in_fan_out": True,
}
#: the LoRA of a local model (``model.path``; target modules: peft's default for the architecture)
LOCAL_LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.05}
#: MOPO's settings from the thesis' table `exp_details_text_generation` (t0: 1/20 of the steps, as 500/10000)
THESIS_MOPO = {"tau": 0.08, "epsilon": 0.15, "beta": 0.9995}
DEFAULT_WEIGHTINGS = [[0.0, 1.0], [0.25, 0.75], [0.5, 0.5], [0.75, 0.25], [1.0, 0.0]]


def _section(config: dict[str, Any], key: str) -> dict[str, Any]:
    v = config.get(key) or {}
    if not isinstance(v, dict):
        raise ConfigError(key, v, "must be a mapping")
    return dict(v)


def _weightings(v: Any, k: int, field: str) -> list[list[float]]:
    if not isinstance(v, list) or not v:
        raise ConfigError(field, v, "must be a non-empty list of weightings")
    return [ric_mod.check_weighting(w, k, field, index=i) for i, w in enumerate(v)]


def _positive(v: Any, field: str) -> float:
    return number(v, field, 0.0, strict=True)


#: number of objectives of the text-generation tasks (r1, r2)
K_OBJECTIVES = 2


@dataclass
class TextgenTask(Config):
    """``task:`` the prompts, the proxy scorers and the sampling."""

    SECTION: ClassVar[str] = "task"
    name: str = "assistant"
    """the task: assistant or summary"""
    scorers: list | None = None
    """the two proxy scorers (r1, r2) (null: the task's own)"""
    n_train_prompts: int | None = None
    """training prompts (null: the task's default)"""
    n_eval_prompts: int | None = None
    """held-out evaluation prompts (null: the task's default)"""
    samples_per_prompt: int = 4
    """base-model answers per training prompt (even: they are paired)"""
    eval_samples: int = 2
    """answers per held-out prompt at evaluation"""
    max_new_tokens: int = 40
    """tokens per answer"""
    temperature: float = 1.0
    """sampling temperature (> 0)"""

    def validate(self) -> None:
        if self.name not in TASKS:
            raise ConfigError("task.name", self.name, f"must be one of {', '.join(TASKS)}")
        if self.scorers is None:
            self.scorers = list(DEFAULT_SCORERS[self.name])
        if not isinstance(self.scorers, list) or len(self.scorers) != 2:
            raise ConfigError("task.scorers", self.scorers, "need a list of 2 scorer names (r1, r2)")
        for i, s in enumerate(self.scorers):
            get_scorer(s, "task.scorers", index=i)
        for key in (
            "n_train_prompts",
            "n_eval_prompts",
            "samples_per_prompt",
            "eval_samples",
            "max_new_tokens",
        ):
            if getattr(self, key) is not None:
                setattr(self, key, positive_int(getattr(self, key), self.key(key)))
        if self.samples_per_prompt % 2:
            raise ConfigError(
                "task.samples_per_prompt", self.samples_per_prompt, "must be even (answers are paired)"
            )
        self.temperature = _positive(self.temperature, "task.temperature")
        self.build()  # the prompt counts within the task's pools

    def build(self) -> Task:
        """The task: its training and held-out prompts."""
        return build_task(self.name, self.n_train_prompts, self.n_eval_prompts)


@dataclass
class TextgenModel(Config):
    """``model:`` the base model: a local Hugging Face model (``path``) or a tiny GPT-2 fitted to the task
    (its shape and SFT; null: the defaults)."""

    SECTION: ClassVar[str] = "model"
    path: str | None = None
    """a local Hugging Face model directory (with config.json)"""
    n_layer: int | None = None
    """tiny GPT-2: layers"""
    n_embd: int | None = None
    """tiny GPT-2: embedding width"""
    n_head: int | None = None
    """tiny GPT-2: attention heads (dividing n_embd)"""
    n_positions: int | None = None
    """tiny GPT-2: context length"""
    sft_steps: int | None = None
    """SFT steps on the behaviour policy's answers (0: none)"""
    sft_lr: float | None = None
    """SFT learning rate"""
    sft_per_prompt: int | None = None
    """SFT answers per prompt"""

    def validate(self) -> None:
        for key in ("n_layer", "n_embd", "n_head", "n_positions", "sft_steps", "sft_per_prompt"):
            if getattr(self, key) is not None:
                positive_int(getattr(self, key), self.key(key), minimum=0 if key == "sft_steps" else 1)
        if self.path and not (Path(str(self.path)).expanduser() / "config.json").is_file():
            raise ConfigError(
                "model.path", self.path, "need a local Hugging Face model directory (config.json)"
            )
        if self.sft_lr is not None:
            _positive(self.sft_lr, "model.sft_lr")

    def given(self) -> dict[str, Any]:
        """The settings the config gives (the model builders apply their defaults to the others)."""
        return {k: v for k, v in self.to_dict().items() if v is not None}


@dataclass
class TextgenLabels(Config):
    """``labels:`` the simulated raters of the training pairs."""

    SECTION: ClassVar[str] = "labels"
    raters: list | None = None
    """Bradley-Terry raters [{id, beta, lam, objective}, ...] (null: the default pool)"""

    def validate(self) -> None:
        lab.parse_raters(self.raters)


@dataclass
class TextgenMOPO(Config):
    """``mopo:`` the MOPO runs: settings of MOPO-LB and MOPO-Lag over ``train``, fixed thresholds."""

    SECTION: ClassVar[str] = "mopo"
    thresholds: list = field(default_factory=list)
    """fixed-threshold Lagrangian runs added to MOPO-Lag's front: [[b], ...], each b in [0, 1]"""
    lb: dict | None = None
    """MOPO-LB's settings over ``train`` (keys of MOPOLMConfig)"""
    lag: dict | None = None
    """MOPO-Lag's settings over ``train`` (keys of MOPOLMConfig)"""

    def validate(self) -> None:
        for part in ("lb", "lag"):
            check_keys(
                _section(vars(self), part), [f.name for f in dataclasses.fields(MOPOLMConfig)], f"mopo.{part}"
            )
        thresholds = self.thresholds
        if not isinstance(thresholds, list):
            raise ConfigError("mopo.thresholds", thresholds, "must be a list of [b] win-rate thresholds")
        for i, b in enumerate(thresholds):
            if not isinstance(b, list) or len(b) != K_OBJECTIVES - 1:
                raise ConfigError(
                    "mopo.thresholds", b, f"need {K_OBJECTIVES - 1} threshold(s) per run", index=i
                )
            for v in b:
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                    raise ConfigError("mopo.thresholds", b, "a win-rate threshold must be in [0, 1]", index=i)


@dataclass
class TextgenMODPO(Config):
    """``modpo:`` the scalarised DPO baseline."""

    SECTION: ClassVar[str] = "modpo"
    weightings: list = field(default_factory=lambda: [[0.25, 0.75], [0.5, 0.5], [0.75, 0.25]])
    """a run per weighting w (DPO on the labels w . prefs)"""

    def validate(self) -> None:
        self.weightings = _weightings(self.weightings, K_OBJECTIVES, "modpo.weightings")


@dataclass
class TextgenRiC(Config):
    """``ric:`` rewards-in-context (SFT with reward tokens); null: ``train``'s value."""

    SECTION: ClassVar[str] = "ric"
    steps: int | None = None
    """SFT steps (null: train.steps)"""
    lr: float | None = None
    """learning rate (null: train.lr)"""
    batch_size: int | None = None
    """batch (null: 2 x train.batch_size)"""
    weightings: list = field(default_factory=lambda: copy.deepcopy(DEFAULT_WEIGHTINGS))
    """a run per weighting of the objectives"""
    desired_scores: list | None = None
    """a run per desired score vector instead of the weightings' mapping"""
    mapping: str = "l2"
    """how a weighting becomes desired scores (see ric.MAPPINGS)"""
    reference_draws: int = 25_000
    """draws of the mapping's reference"""
    clip_to_data: bool | None = None
    """clip the desired scores to the data's range (null: true for the tiny model)"""

    def validate(self) -> None:
        for key in ("steps", "batch_size"):
            if getattr(self, key) is not None:
                positive_int(getattr(self, key), self.key(key))
        if self.lr is not None:
            _positive(self.lr, "ric.lr")
        self.reference_draws = positive_int(self.reference_draws, "ric.reference_draws")
        if self.clip_to_data is not None:
            boolean(self.clip_to_data, "ric.clip_to_data")
        if self.mapping not in ric_mod.MAPPINGS:
            raise ConfigError("ric.mapping", self.mapping, f"must be one of {', '.join(ric_mod.MAPPINGS)}")
        self.weightings = _weightings(self.weightings, K_OBJECTIVES, "ric.weightings")
        desired = self.desired_scores
        if desired is not None:
            if not isinstance(desired, list) or not desired:
                raise ConfigError("ric.desired_scores", desired, "must be a non-empty list of score vectors")
            self.desired_scores = [
                ric_mod.check_desired(s, K_OBJECTIVES, index=i) for i, s in enumerate(desired)
            ]

    def resolve(self, base_cfg: MOPOLMConfig, local_model: bool) -> dict[str, Any]:
        """The settings with ``null`` ones taken from ``train`` (``base_cfg``); ``clip_to_data`` defaults to
        true for the tiny model (``local_model`` False)."""
        return {
            "steps": positive_int(base_cfg.steps if self.steps is None else self.steps, "ric.steps"),
            "lr": _positive(base_cfg.lr if self.lr is None else self.lr, "ric.lr"),
            "batch_size": positive_int(
                2 * base_cfg.batch_size if self.batch_size is None else self.batch_size, "ric.batch_size"
            ),
            "mapping": self.mapping,
            "reference_draws": self.reference_draws,
            "clip_to_data": not local_model if self.clip_to_data is None else self.clip_to_data,
            "weightings": self.weightings,
            "desired_scores": self.desired_scores,
        }


@dataclass
class TextgenPARM(Config):
    """``parm:`` the preference-aware reward model guiding the frozen base; null: ``train``'s value."""

    SECTION: ClassVar[str] = "parm"
    steps: int | None = None
    """training steps (null: train.steps)"""
    lr: float | None = None
    """learning rate (null: train.lr)"""
    batch_size: int | None = None
    """batch (null: train.batch_size)"""
    rank: int = 8
    """LoRA rank of the ARM"""
    alpha: float = 16.0
    """LoRA alpha"""
    beta: float = 1.0
    """guidance strength"""
    beta_r: float = 1.0
    """the ARM's preference temperature"""
    guidance: str = "parm"
    """guidance rule (see parm.GUIDANCE)"""
    weightings: list = field(default_factory=lambda: copy.deepcopy(DEFAULT_WEIGHTINGS))
    """a run per weighting of the objectives"""

    def validate(self) -> None:
        for key in ("steps", "batch_size"):
            if getattr(self, key) is not None:
                positive_int(getattr(self, key), self.key(key))
        if self.lr is not None:
            _positive(self.lr, "parm.lr")
        self.rank = positive_int(self.rank, "parm.rank")
        for key in ("alpha", "beta", "beta_r"):
            setattr(self, key, _positive(getattr(self, key), self.key(key)))
        self.weightings = _weightings(self.weightings, K_OBJECTIVES, "parm.weightings")
        if self.guidance not in parm_mod.GUIDANCE:
            raise ConfigError(
                "parm.guidance", self.guidance, f"must be one of {', '.join(parm_mod.GUIDANCE)}"
            )

    def resolve(self, base_cfg: MOPOLMConfig) -> dict[str, Any]:
        """The settings with ``null`` ones taken from ``train`` (``base_cfg``)."""
        return {
            "steps": positive_int(base_cfg.steps if self.steps is None else self.steps, "parm.steps"),
            "lr": _positive(base_cfg.lr if self.lr is None else self.lr, "parm.lr"),
            "batch_size": positive_int(
                base_cfg.batch_size if self.batch_size is None else self.batch_size, "parm.batch_size"
            ),
            "rank": self.rank,
            "alpha": self.alpha,
            "beta": self.beta,
            "beta_r": self.beta_r,
            "guidance": self.guidance,
            "weightings": self.weightings,
        }


@dataclass
class TextgenExperiment(Config):
    """A ``mode: textgen`` experiment (every key optional)."""

    mode: str = "textgen"
    """textgen"""
    name: str | None = None
    """a name for the run"""
    description: str | None = None
    """a description"""
    out: Any = None
    """not used (the output folder is ``--out``)"""
    seeds: list = field(default_factory=lambda: [0, 1, 2])
    """seeds (distinct); a run per seed"""
    task: TextgenTask = field(default_factory=TextgenTask)
    """the task"""
    model: TextgenModel = field(default_factory=TextgenModel)
    """the base model"""
    labels: TextgenLabels = field(default_factory=TextgenLabels)
    """the raters"""
    algorithms: list = field(default_factory=lambda: list(ALGORITHMS))
    """algorithms to run (see ALGORITHMS)"""
    train: dict | None = None
    """MOPOLMConfig settings shared by the DPO/MOPO runs (defaults: the thesis' tau, epsilon, beta)"""
    mopo: TextgenMOPO = field(default_factory=TextgenMOPO)
    """the MOPO runs"""
    modpo: TextgenMODPO = field(default_factory=TextgenMODPO)
    """the scalarised DPO runs"""
    ric: TextgenRiC = field(default_factory=TextgenRiC)
    """rewards-in-context"""
    parm: TextgenPARM = field(default_factory=TextgenPARM)
    """PARM"""
    hv_reference: list = field(default_factory=lambda: [0.0, 0.0])
    """reference point of the hypervolume (one number per objective)"""
    threads: int | None = None
    """torch intra-op threads (null: $BAYESCRL_THREADS or 1)"""
    device: str | None = None
    """torch device (null: cuda if available, else cpu; ``--device`` wins)"""

    def validate(self) -> None:
        self._check_seeds()
        self._check_algorithms()
        m, t = self.model.given(), self.task
        ctx = model_context(m["path"]) if m.get("path") else check_shape(m, "model", n_positions=128)
        if ctx is not None and t.max_new_tokens >= ctx:
            why = f"leaves no room for the prompt in the model's context of {ctx} tokens"
            raise ConfigError("task.max_new_tokens", t.max_new_tokens, why)
        hv_ref = self.hv_reference
        if not isinstance(hv_ref, list) or len(hv_ref) != K_OBJECTIVES:
            raise ConfigError("hv_reference", hv_ref, f"need {K_OBJECTIVES} numbers")
        for v in hv_ref:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ConfigError("hv_reference", hv_ref, "must be finite numbers")
        if self.threads is not None:
            self.threads = positive_int(self.threads, "threads")
        if self.device is not None:
            self.device = check_device(self.device, "device")
        self.train_configs()  # every training setting (MOPO-LB's and MOPO-Lag's too)

    def _check_seeds(self) -> None:
        seeds = self.seeds
        if isinstance(seeds, int) and not isinstance(seeds, bool):
            seeds = self.seeds = [seeds]
        if (
            not isinstance(seeds, list)
            or not seeds
            or any(isinstance(s, bool) or not isinstance(s, int) for s in seeds)
        ):
            raise ConfigError("seeds", seeds, "must be a non-empty list of integers")
        dup = next((x for i, x in enumerate(seeds) if x in seeds[:i]), None)
        if dup is not None:  # one seed's run would overwrite the other's
            raise ConfigError("seeds", seeds, f"seed {dup} appears twice; give distinct seeds")

    def _check_algorithms(self) -> None:
        algos = self.algorithms
        if not isinstance(algos, list) or not algos:
            raise ConfigError("algorithms", algos, f"must be a non-empty list of {', '.join(ALGORITHMS)}")
        for i, a in enumerate(algos):
            if a not in ALGORITHMS:
                raise ConfigError("algorithms", a, f"must be one of {', '.join(ALGORITHMS)}", index=i)

    def train_configs(self) -> tuple[MOPOLMConfig, MOPOLMConfig, MOPOLMConfig]:
        """``(base, MOPO-LB, MOPO-Lag)`` training settings: ``train`` over the thesis' MOPO settings (t0:
        1/20 of the steps) and the model's LoRA default, primary ``r1``; then ``mopo.lb`` / ``mopo.lag``."""
        train = dict(mapping(self.train, "train"))
        train.setdefault("peft", LOCAL_LORA if self.model.path else GPT2_LORA)
        for key, v in THESIS_MOPO.items():
            train.setdefault(key, v)
        train.setdefault("t0", max(1, int(train.get("steps", 200)) // 20))
        train["primary"] = 0
        base_cfg = MOPOLMConfig.from_dict(train)
        mo = self.mopo
        lb_cfg = MOPOLMConfig.from_dict({**base_cfg.to_dict(), "method": "mopo-lb", **(mo.lb or {})})
        lag_cfg = MOPOLMConfig.from_dict({**base_cfg.to_dict(), "method": "mopo", **(mo.lag or {})})
        return base_cfg, lb_cfg, lag_cfg


def validate(config: dict[str, Any]) -> dict[str, Any]:
    """Check every key and value before any work (:class:`TextgenExperiment`); returns the resolved
    settings: the task, raters and :class:`MOPOLMConfig` of each MOPO variant built, ``null`` settings
    resolved against ``train``."""
    exp = TextgenExperiment.from_dict(config)
    t, m = exp.task, exp.model.given()
    base_cfg, lb_cfg, lag_cfg = exp.train_configs()
    return {
        "task": t.build(),
        "scorers": list(t.scorers),
        "seeds": list(exp.seeds),
        "algorithms": list(exp.algorithms),
        "samples_per_prompt": int(t.samples_per_prompt),
        "eval_samples": int(t.eval_samples),
        "max_new_tokens": int(t.max_new_tokens),
        "temperature": float(t.temperature),
        "model": m,
        "raters": lab.parse_raters(exp.labels.raters),
        "base_cfg": base_cfg,
        "lb_cfg": lb_cfg,
        "lag_cfg": lag_cfg,
        "thresholds": [list(map(float, b)) for b in exp.mopo.thresholds],
        "modpo_weightings": exp.modpo.weightings,
        "ric": exp.ric.resolve(base_cfg, bool(m.get("path"))),
        "parm": exp.parm.resolve(base_cfg),
        "hv_reference": [float(v) for v in exp.hv_reference],
        "threads": exp.threads,
        "device": exp.device,
    }


class _Eval:
    """Sampling on the held-out prompts, scoring, normalising by the offline data's range."""

    def __init__(self, s: dict[str, Any], tokenizer, low: torch.Tensor, high: torch.Tensor, seed: int):
        task: Task = s["task"]
        n = s["eval_samples"]
        self.prompts = [p for p in task.eval_prompts for _ in range(n)]
        self.contexts = [c for c in task.eval_contexts for _ in range(n)]
        self.s, self.tok, self.low, self.high, self.seed = s, tokenizer, low, high, seed

    def normalise(self, scores: torch.Tensor) -> list[float]:
        r = (scores.mean(0) - self.low) / (self.high - self.low).clamp_min(1e-8)
        return r.tolist()

    def score(self, texts: list[str], label: str) -> dict[str, Any]:
        raw = torch.tensor(
            score_all(self.s["scorers"], self.contexts, texts), dtype=torch.float64, device="cpu"
        )
        return {"label": label, "r": self.normalise(raw), "raw": raw.mean(0).tolist(), "examples": texts[:3]}

    def policy(self, policy, label: str, prompts: list[str] | None = None) -> dict[str, Any]:
        texts = sample(
            policy,
            self.tok,
            prompts or self.prompts,
            self.s["max_new_tokens"],
            self.seed + 7,
            self.s["temperature"],
        )
        return self.score(texts, label)


@dataclasses.dataclass
class _Seed:
    """What every algorithm of one seed shares: the settings, the frozen base model, the offline data."""

    s: dict[str, Any]
    seed: int
    out: Path
    device: torch.device
    base: torch.nn.Module
    tok: Any
    prompts: list[str]
    texts: list[str]
    scores: torch.Tensor
    data: PreferenceData
    info: dict[str, Any]
    ev: _Eval


def _base_model(
    s: dict[str, Any], seed: int, device: torch.device
) -> tuple[torch.nn.Module, Any, float | None]:
    """The frozen base model and its tokenizer: ``model.path``, or a tiny GPT-2 fitted to the task's
    behaviour policy (then also its mean SFT loss over the last 20 steps; else None)."""
    m = s["model"]
    if m.get("path"):
        base, tok = load_local_model(m["path"], s["base_cfg"].torch_dtype(device))
        sft_loss = None
    else:
        base, tok = tiny_base(
            s["task"],
            int(m.get("n_layer", 2)),
            int(m.get("n_embd", 64)),
            int(m.get("n_head", 2)),
            int(m.get("n_positions", 128)),
            seed,
        )
        base.to(device)
        losses = fit_behaviour(
            base,
            tok,
            s["task"],
            int(m.get("sft_steps", 600)),
            int(m.get("sft_per_prompt", 4)),
            float(m.get("sft_lr", 3e-3)),
            seed,
        )
        sft_loss = float(sum(losses[-20:]) / max(1, len(losses[-20:])))
    base.to(device)
    base.eval()
    for p in base.parameters():
        p.requires_grad_(False)
    return base, tok, sft_loss


def _offline_data(
    s: dict[str, Any], base: torch.nn.Module, tok: Any, seed: int, out: Path
) -> tuple[list[str], list[str], torch.Tensor, PreferenceData, dict[str, Any]]:
    """The base model's answers on the training prompts, their proxy scores and Bradley–Terry labels
    (written as ``out/train_trl.jsonl``): ``(prompts, texts, scores, data, info)``."""
    task: Task = s["task"]
    n = s["samples_per_prompt"]
    prompts = [p for p in task.prompts for _ in range(n)]
    contexts = [c for c in task.contexts for _ in range(n)]
    texts = sample(Plain(base), tok, prompts, s["max_new_tokens"], seed + 1, s["temperature"])
    scores = torch.tensor(score_all(s["scorers"], contexts, texts), dtype=torch.float64, device="cpu")
    data, info = lab.label_pairs(prompts, texts, scores, s["scorers"], s["raters"], seed)
    out.mkdir(parents=True, exist_ok=True)
    data.to_trl_jsonl(out / "train_trl.jsonl", primary=0)
    return prompts, texts, scores, data, info


def _lora(run: _Seed, cfg: MOPOLMConfig) -> Any:
    """A fresh LoRA copy of the base model, from the seed's RNG state (whatever ran before it)."""
    seed_everything(run.seed)
    return lora_policy(copy.deepcopy(run.base), cfg.peft)


def _train(run: _Seed, cfg: MOPOLMConfig, d: PreferenceData, name: str) -> tuple[Any, float, dict[str, Any]]:
    """Train a LoRA policy with :class:`MOPOLMTrainer` (MOPO or DPO, ``cfg.method``); returns the policy,
    the training seconds and the last log record (log: ``out/train_log_<name>.jsonl``)."""
    pol = _lora(run, cfg)
    tr = MOPOLMTrainer(pol, run.tok, d, cfg, log_path=run.out / f"train_log_{name}.jsonl")
    t = time.perf_counter()
    log_ = tr.train()
    return tr.model, time.perf_counter() - t, log_[-1] if log_ else {}


def _run_mopo(run: _Seed, a: str) -> dict[str, Any]:
    """``mopo-lag`` / ``mopo-lb``: adaptive thresholds; MOPO-Lag adds a run per ``mopo.thresholds``."""
    cfg = run.s["lag_cfg"] if a == "mopo-lag" else run.s["lb_cfg"]
    cfg = MOPOLMConfig.from_dict({**cfg.to_dict(), "seed": run.seed})
    pol, secs, final = _train(run, cfg, run.data, a)
    t = time.perf_counter()
    pts = [{**run.ev.policy(pol, "adaptive"), "final": {k: final.get(k) for k in ("lambda", "b", "G")}}]
    gsecs = time.perf_counter() - t
    for b in run.s["thresholds"] if a == "mopo-lag" else []:
        c2 = MOPOLMConfig.from_dict({**cfg.to_dict(), "thresholds": b})
        pol, sec2, _ = _train(run, c2, run.data, f"{a}_b{b[0]}")
        secs += sec2
        t = time.perf_counter()
        pts.append(run.ev.policy(pol, f"b={b[0]:.2f}"))
        gsecs += time.perf_counter() - t
    return {"points": pts, "train_seconds": secs, "generate_seconds": gsecs}


def _run_dpo(run: _Seed, a: str) -> dict[str, Any]:
    """``modpo`` (DPO on ``w . prefs``, a run per ``modpo.weightings``) / ``dpo_joint`` (DPO on D_J)."""
    cfg = MOPOLMConfig.from_dict({**run.s["base_cfg"].to_dict(), "method": "dpo", "seed": run.seed})
    ws = run.s["modpo_weightings"] if a == "modpo" else [None]
    pts, secs, gsecs = [], 0.0, 0.0
    for w in ws:
        pairs = run.data.dpo_pairs(w).as_preference_data()
        pol, sec, _ = _train(run, cfg, pairs, a if w is None else f"{a}_{w[0]:.2f}")
        secs += sec
        t = time.perf_counter()
        label = "D_J" if w is None else f"w=({w[0]:.2f}, {w[1]:.2f})"
        pts.append({**run.ev.policy(pol, label), "records": len(pairs)})
        gsecs += time.perf_counter() - t
    return {"points": pts, "train_seconds": secs, "generate_seconds": gsecs}


def _ric_config(run: _Seed) -> MOPOLMConfig:
    """The shared LoRA settings; for the tiny model also its new reward tokens' embeddings, which train."""
    cfg = run.s["base_cfg"]
    if run.s["model"].get("path"):
        return cfg
    ids = run.tok.convert_tokens_to_ids([*reward_tokens(2), *SCORE_TOKENS])
    return MOPOLMConfig.from_dict(
        {**cfg.to_dict(), "peft": {**cfg.peft, "trainable_token_indices": {"wte": ids}}}
    )


def _ric_targets(rc: dict[str, Any], z: torch.Tensor, seed: int) -> tuple[list[list[float]], list[str]]:
    """RiC's desired scores (``ric.desired_scores``, or mapped from ``ric.weightings``) and their labels."""
    lo, hi = ric_mod.reference_range(rc["reference_draws"], seed)
    targets = rc["desired_scores"] or [
        ric_mod.desired_scores(w, lo, hi, rc["mapping"]) for w in rc["weightings"]
    ]
    if rc["clip_to_data"]:  # word-level scores never seen in training have untrained embeddings
        zlo, zhi = z.min(0).values.tolist(), z.max(0).values.tolist()
        targets = [[min(max(v, a), b) for v, a, b in zip(d, zlo, zhi, strict=True)] for d in targets]
    labels = (
        [f"s=({d[0]:.1f}, {d[1]:.1f})" for d in targets]
        if rc["desired_scores"]
        else [f"w=({w[0]:.2f}, {w[1]:.2f})" for w in rc["weightings"]]
    )
    return targets, labels


def _run_ric(run: _Seed) -> dict[str, Any]:
    """``ric``: SFT with reward tokens in the prompt, then a generation per desired score vector."""
    rc, task = run.s["ric"], run.s["task"]
    pol = _lora(run, _ric_config(run))
    z = ric_mod.normalise(
        run.scores,
        torch.tensor(run.info["score_mean"], device="cpu"),
        torch.tensor(run.info["score_sd"], device="cpu"),
    )
    t = time.perf_counter()
    losses = ric_mod.train(
        pol,
        run.tok,
        run.prompts,
        run.texts,
        z,
        task.marker,
        rc["steps"],
        rc["batch_size"],
        rc["lr"],
        run.seed,
        run.s["base_cfg"].max_length,
    )
    secs = time.perf_counter() - t
    targets, labels = _ric_targets(rc, z, run.seed)
    t = time.perf_counter()
    pts = []
    for d, label in zip(targets, labels, strict=True):
        ps = [ric_mod.format_prompt(p, d, task.marker) for p in run.ev.prompts]
        pts.append({**run.ev.policy(pol, label, ps), "desired": d})
    return {
        "points": pts,
        "train_seconds": secs,
        "generate_seconds": time.perf_counter() - t,
        "sft_final_loss": float(sum(losses[-20:]) / len(losses[-20:])),
    }


def _run_parm(run: _Seed) -> dict[str, Any]:
    """``parm``: a preference-conditioned ARM, then guided decoding of the frozen base per weighting."""
    pc, s = run.s["parm"], run.s
    seed_everything(run.seed)
    arm = parm_mod.ARM(run.base, 2, pc["rank"], pc["alpha"]).to(run.device)
    t = time.perf_counter()
    losses = parm_mod.train(
        arm, run.tok, run.data, pc["steps"], pc["batch_size"], pc["lr"], run.seed, s["base_cfg"].max_length,
        pc["beta_r"],
    )  # fmt: skip
    secs = time.perf_counter() - t
    t = time.perf_counter()
    pts = []
    for w in pc["weightings"]:
        texts_w = parm_mod.guided_generate(
            run.base, arm, run.tok, run.ev.prompts, w, pc["beta"], pc["guidance"], s["max_new_tokens"],
            run.seed + 7, s["temperature"],
        )  # fmt: skip
        pts.append({**run.ev.score(texts_w, f"w=({w[0]:.2f}, {w[1]:.2f})"), "weighting": w})
    return {
        "points": pts,
        "train_seconds": secs,
        "generate_seconds": time.perf_counter() - t,
        "rm_final_loss": float(sum(losses[-20:]) / len(losses[-20:])),
    }


def _run_algorithm(run: _Seed, a: str) -> dict[str, Any]:
    """Train and evaluate one algorithm of :data:`ALGORITHMS` (module docstring)."""
    if a in ("mopo-lag", "mopo-lb"):
        return _run_mopo(run, a)
    if a in ("modpo", "dpo_joint"):
        return _run_dpo(run, a)
    return _run_ric(run) if a == "ric" else _run_parm(run)


def _check_finite(algos: dict[str, Any]) -> None:
    """Stop on a non-finite normalised reward (a diverged run never reaches the table)."""
    for a, rec in algos.items():
        for p in rec["points"]:
            if not all(math.isfinite(v) for v in p["r"]):
                raise ConfigError(f"{a}.points", p["r"], "a normalised reward is not finite")


def run_seed(s: dict[str, Any], seed: int, out: Path, device: torch.device) -> dict[str, Any]:
    """Everything for one seed (module docstring); returns the per-seed record of :mod:`.table`."""
    seed_everything(seed)
    t_start = time.perf_counter()
    base, tok, sft_loss = _base_model(s, seed, device)
    base_seconds = time.perf_counter() - t_start
    t0 = time.perf_counter()
    prompts, texts, scores, data, info = _offline_data(s, base, tok, seed, out)
    data_seconds = time.perf_counter() - t0
    low, high = scores.min(0).values, scores.max(0).values
    ev = _Eval(s, tok, low, high, seed)
    t0 = time.perf_counter()
    algos: dict[str, Any] = {
        "reference": {
            "points": [ev.policy(Plain(base), "base")],
            "train_seconds": 0.0,
            "generate_seconds": time.perf_counter() - t0,
        }
    }
    run = _Seed(s, seed, out, device, base, tok, prompts, texts, scores, data, info, ev)
    for a in s["algorithms"]:
        log.info("seed %d: %s", seed, a)
        algos[a] = _run_algorithm(run, a)
    _check_finite(algos)
    rec = {
        "task": s["task"].name,
        "seed": seed,
        "objectives": s["scorers"],
        "algorithms": algos,
        "data": {
            **info,
            "offline_min": low.tolist(),
            "offline_max": high.tolist(),
            "examples": [
                [prompts[i], texts[i], scores[i].tolist()] for i in range(0, min(len(texts), 12), 2)
            ],
        },
        "base": {"sft_final_loss": sft_loss, "seconds": base_seconds, "data_seconds": data_seconds},
        "seconds": time.perf_counter() - t_start,
    }
    write_json(out / "results.json", rec)
    return rec


def fingerprint(config: dict[str, Any]) -> str:
    """A hash of the settings that change results (everything but the seeds, the algorithms to run, threads,
    device, out, name): a seed's algorithms may be run in several calls, and are merged."""
    import hashlib

    skip = ("seeds", "algorithms", "threads", "device", "out", "name", "description")
    keep = {k: v for k, v in config.items() if k not in skip}
    return hashlib.sha1(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _write_table(
    out: Path, fp: str, hv_reference: list[float]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``table.md``, ``table.json`` and ``pareto.png`` over every seed in ``out`` run with the settings
    ``fp`` (seeds may be run one per call); returns those seeds' records and the table."""
    runs = [r for r in load_runs(out) if r.get("fingerprint") == fp]
    others = sorted(int(r["seed"]) for r in load_runs(out) if r.get("fingerprint") != fp)
    if others:
        log.warning("textgen: seeds %s in %s ran with other settings and are not in the table", others, out)
    table = build_table(runs, hv_reference)
    (out / "table.md").write_text(markdown([table]))
    write_json(out / "table.json", table)
    plot_fronts([table], out / "pareto.png")
    return runs, table


def run_textgen(config: dict[str, Any], out: Path) -> dict[str, Any]:
    """Validate, run every seed, build the table (module docstring)."""
    s = validate(config)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    set_torch_threads(s["threads"])
    device = torch.device(s["device"] or ("cuda" if torch.cuda.is_available() else "cpu"))
    fp = fingerprint(config)
    for seed in s["seeds"]:
        log.info("textgen %s: seed %d", s["task"].name, seed)
        path = out / f"seed_{seed}" / "results.json"
        fix = f"delete {path.parent} and rerun to recompute seed {seed}"
        old = load_json(path, f"seed_{seed}/results.json", kind=dict, recover=fix) if path.exists() else {}
        rec = run_seed(s, seed, out / f"seed_{seed}", device)
        if old.get("fingerprint") == fp:  # algorithms run in an earlier call on the same base and data
            rec["algorithms"] = {**old["algorithms"], **rec["algorithms"]}
        write_json(path, {**rec, "fingerprint": fp})
    runs, table = _write_table(out, fp, s["hv_reference"])
    return {
        "mode": "textgen",
        "task": s["task"].name,
        "objectives": s["scorers"],
        "seeds": [int(r["seed"]) for r in runs],
        "fingerprint": fp,
        "device": str(device),
        "prompts": {"train": len(s["task"].prompts), "eval": len(s["task"].eval_prompts)},
        "disagreement": {
            str(r["seed"]): {
                k: r["data"][k] for k in ("score_disagreement", "label_disagreement", "score_ties")
            }
            for r in runs
        },
        "hv_reference": s["hv_reference"],
        "settings": {
            "mopo_lag": s["lag_cfg"].to_dict(),
            "mopo_lb": s["lb_cfg"].to_dict(),
            "dpo": s["base_cfg"].to_dict(),
            "ric": s["ric"],
            "parm": s["parm"],
            "modpo_weightings": s["modpo_weightings"],
            "mopo_thresholds": s["thresholds"],
            "raters": s["raters"],
            "model": s["model"],
        },
        "table": table,
    }

"""MOPO on your own preference file and a local Hugging Face model (``mode: lm`` with ``data.path``).

``bayescrl mopo CONFIG.yaml --model PATH --out DIR [--device cuda] [--resume]``. Config keys (each
documented and checked by :class:`bayescrl.mopo.lm.experiment.UserExperiment`; see
``examples/mopo/trl_format.yaml``)::

    mode: lm
    seed: 0
    threads: null                # torch intra-op threads (default: $BAYESCRL_THREADS or 1)
    device: null                 # default: cuda if available, else cpu (--device wins)
    model: {path: null}          # a local model directory (config.json + tokenizer); --model wins
    data: {path: FILE, format: trl, primary: chosen}
    train: {...}                 # MOPOLMConfig fields (method, tau, steps, batch_size, lr, peft, ...)
    progress: {log_every: 10, checkpoint_every: 100}

The file is TRL's preference format (``prompt``, ``chosen``, ``rejected``) plus one 0/1 column
``pref_<name>`` per extra objective and an optional ``rater`` column, as JSONL or Parquet
(:func:`bayescrl.mopo.lm.data.load_trl`); ``chosen``/``rejected`` is the primary objective (named
``data.primary``), the ``pref_`` columns are the constrained ones. The model is wrapped with LoRA (``peft``;
``train.peft``, default target modules: peft's for the architecture) and its reference is the same model with
the adapters disabled. Nothing is downloaded: the model and tokenizer are read with ``local_files_only``
and ``HF_HUB_OFFLINE=1``.

Under ``accelerate launch --num_processes P -m bayescrl.cli mopo ...`` the trainer runs data-parallel (DDP):
``train.batch_size`` records per process and step, dual quantities computed on the global batch
(:mod:`bayescrl.mopo.lm.trainer`); only the main process writes files.

Outputs in ``DIR``: ``metrics.jsonl`` (one line per step: loss, lambda, chi, b, G, lower bound, seconds,
ETA), ``checkpoint/`` (every ``progress.checkpoint_every`` steps and at the end; ``--resume`` continues from
it with the same data order, optimiser and dual state), ``policy/`` (final adapters and heads) and
``results.json`` (final dual state, per-objective implicit-reward accuracy on up to 256 records, timing).
Progress lines (step, loss, constraint values, thresholds, multipliers, s/step, ETA) go to stderr.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from bayescrl.mopo.lm import reward_head
from bayescrl.mopo.lm.config import MOPOLMConfig
from bayescrl.mopo.lm.data import PreferenceData, load_data
from bayescrl.mopo.lm.evaluate import implicit_accuracy
from bayescrl.mopo.lm.experiment import UserExperiment
from bayescrl.mopo.lm.model import check_model_dir, lora_policy
from bayescrl.mopo.lm.reward_head import bind_preferences, fit_lm_preferences
from bayescrl.mopo.lm.trainer import MOPOLMTrainer
from bayescrl.utils import ConfigError, DataError, seed_everything, set_torch_threads
from bayescrl.utils.io import load_json, trim_jsonl

log = logging.getLogger(__name__)

EVAL_RECORDS = 256
#: training settings a resumed run must share with its checkpoint (``steps`` may grow)
_RESUME_FREE = ("steps",)


def load_local_model(path: str | Path, dtype: torch.dtype) -> tuple[torch.nn.Module, Any]:
    """A causal LM and its tokenizer from a local directory, never from the network."""
    path = check_model_dir(path)
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # our own progress lines only

    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError, TypeError) as exc:
        raise ConfigError("model.path", str(path), f"no tokenizer could be loaded from it ({exc})") from None
    try:
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype)
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError("model.path", str(path), f"not a loadable causal LM ({exc})") from None
    if tok.eos_token_id is None:
        raise ConfigError("model.path", str(path), "the tokenizer has no EOS token")
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return model, tok


def _accelerator(device: str | None):
    """An ``accelerate.Accelerator`` when launched with several processes, else None."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    from accelerate import Accelerator

    return Accelerator(cpu=device == "cpu")


def _fmt(values: Any) -> str:
    flat = torch.as_tensor(values, dtype=torch.float64, device="cpu").flatten().tolist()
    return "[" + " ".join(f"{v:.3f}" for v in flat) + "]"


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _save_atomic(trainer: MOPOLMTrainer, path: Path) -> None:
    """Write the checkpoint next to ``path`` and swap it in, so an interrupted save leaves the old one."""
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    trainer.save_checkpoint(tmp)
    old = path.with_name(path.name + ".old")
    if path.exists():
        path.rename(old)
    tmp.rename(path)
    shutil.rmtree(old, ignore_errors=True)


def _check_resume(saved: dict[str, Any], cfg: MOPOLMConfig) -> None:
    now = cfg.to_dict()
    for key, value in saved.items():
        if key not in _RESUME_FREE and now.get(key) != value:
            raise ConfigError(
                f"train.{key}", now.get(key), f"differs from the checkpoint's {value!r}: cannot --resume"
            )


def _settings(exp: UserExperiment) -> dict[str, Any]:
    """The run's settings from its checked config (:class:`~bayescrl.mopo.lm.experiment.UserExperiment`)."""
    return {
        "model_path": exp.model.path,
        "data": exp.data.spec(),
        "log_every": exp.progress.log_every,
        "checkpoint_every": exp.progress.checkpoint_every,
        "cfg": exp.train_config(),
        "resume": exp.resume,
        "seed": exp.run_seed(),
    }


def _load_user_data(exp: UserExperiment, st: dict[str, Any]) -> tuple[PreferenceData, Any]:
    """The preference file, checked against the training settings and the preference settings (before the
    model is read), and the Bradley–Terry preference model's settings (None: the empirical labels). DPO
    trains on D_J."""
    cfg = st["cfg"]
    data: PreferenceData = load_data(st["data"])
    if cfg.batch_size > len(data):  # the batch would repeat records within one step
        why = f"larger than the data set ({len(data)} records)"
        raise ConfigError("train.batch_size", cfg.batch_size, why)
    pref_spec = bind_preferences(exp.preferences(), data)  # the records' raters
    if cfg.method == "dpo" and data.num_objectives > 1:
        data = data.dpo_pairs().as_preference_data()  # DPO on D_J: records every objective agrees on
    return data, pref_spec


def _placement(device: str | None) -> tuple[Any, torch.device, bool]:
    """``(accelerator or None, device, is main process)``: DDP under ``accelerate launch``, else one."""
    acc = _accelerator(device)
    if acc is not None:
        return acc, acc.device, acc.is_main_process
    return None, torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu")), True


def _fit_preferences(
    pref_spec: Any,
    base: torch.nn.Module,
    tok: Any,
    data: PreferenceData,
    cfg: MOPOLMConfig,
    acc: Any,
    say: Any,
) -> tuple[Any, tuple[torch.Tensor, torch.Tensor] | None]:
    """The Bradley–Terry reward head on the frozen base model's features, and the atom scores MOPO uses
    (None, None without a preference model); under DDP every rank takes the main process's estimate."""
    if pref_spec is None:
        return None, None
    t_fit = time.perf_counter()
    prefs = fit_lm_preferences(pref_spec, base, tok, data, cfg.max_length)
    atom_scores = (prefs.mean, prefs.constraint)
    if acc is not None:  # every rank takes the main process's estimate: identical dual steps
        from accelerate.utils import broadcast

        atom_scores = tuple(broadcast(x.to(acc.device)).cpu() for x in atom_scores)
    say(
        "Bradley-Terry preferences (%s, %d features) fitted in %.1f s; rater beta %s",
        pref_spec.options["engine"], prefs.feature_dim, time.perf_counter() - t_fit, prefs.beta,
    )  # fmt: skip
    return prefs, atom_scores


def _make_trainer(
    st: dict[str, Any], base: torch.nn.Module, tok: Any, data: PreferenceData, out: Path, acc: Any,
    atom_scores: Any, main: bool, say: Any,
) -> MOPOLMTrainer:  # fmt: skip
    """A new trainer on a LoRA copy of ``base`` (``metrics.jsonl`` emptied), or, with ``--resume`` and a
    checkpoint in ``out``, the checkpoint's (same settings, checked; ``metrics.jsonl`` cut to its step)."""
    cfg, ckpt, metrics = st["cfg"], out / "checkpoint", out / "metrics.jsonl"
    if st["resume"] and (ckpt / "state.pt").exists():
        fix = "delete the checkpoint folder and rerun without --resume (or restore it from a copy)"
        _check_resume(load_json(ckpt / "config.json", "checkpoint", kind=dict, recover=fix), cfg)
        trainer = MOPOLMTrainer.from_checkpoint(
            ckpt, base, tok, data, accelerator=acc, atom_scores=atom_scores
        )
        trainer.config = cfg  # same settings (checked) but this run's steps
        say("resuming from %s at step %d", ckpt, trainer.step_count)
        if main:
            trim_jsonl(metrics, "step", trainer.step_count)
        return trainer
    if st["resume"]:
        log.warning("--resume: no checkpoint in %s, starting at step 0", out)
    heads = data.num_objectives if cfg.multi_head else 1
    trainer = MOPOLMTrainer(
        lora_policy(base, cfg.peft, num_heads=heads),
        tok,
        data,
        cfg,
        accelerator=acc,
        atom_scores=atom_scores,
    )
    if main:
        metrics.write_text("")
    return trainer


def _train_loop(
    trainer: MOPOLMTrainer, st: dict[str, Any], out: Path, acc: Any, main: bool, say: Any
) -> tuple[dict[str, Any], float]:
    """Step to ``train.steps``: a ``metrics.jsonl`` line per step, a progress line every ``log_every``, a
    checkpoint every ``checkpoint_every`` steps; returns the last step's record and the seconds taken."""
    cfg, ckpt, metrics = st["cfg"], out / "checkpoint", out / "metrics.jsonl"
    log_every, ckpt_every = st["log_every"], st["checkpoint_every"]
    start, t_start = trainer.step_count, time.perf_counter()
    rec: dict[str, Any] = {}
    while trainer.step_count < cfg.steps:
        try:
            rec = trainer.step()
        except DataError as exc:  # non-finite loss or multipliers: stop, say where to resume from
            where = f"; last checkpoint: {ckpt}" if (ckpt / "state.pt").exists() else ""
            raise DataError(exc.field, exc.value, exc.reason + where) from None
        t = trainer.step_count
        per_step = (time.perf_counter() - t_start) / (t - start)
        rec["eta_s"] = per_step * (cfg.steps - t)
        if main:
            with metrics.open("a") as fh:
                fh.write(json.dumps(rec) + "\n")
        if t % log_every == 0 or t == cfg.steps:
            extra = (
                f"  G {_fmt(rec['G'])}  b {_fmt(rec['b'])}  lambda {_fmt(rec['lambda'])}"
                if "G" in rec
                else ""
            )
            say(
                "step %d/%d  loss %.4f%s  %.2f s/step  ETA %s",
                t, cfg.steps, rec["loss"], extra, per_step, _duration(rec["eta_s"]),
            )  # fmt: skip
        if ckpt_every and t % ckpt_every == 0 and t < cfg.steps and main:
            _save_atomic(trainer, ckpt)
        if acc is not None and ckpt_every and t % ckpt_every == 0:
            acc.wait_for_everyone()
    return rec, time.perf_counter() - t_start


def _preference_results(prefs: Any, pref_spec: Any, data: PreferenceData, names: list[str]) -> dict[str, Any]:
    """The fitted Bradley–Terry preferences' summary, rater competence and inference settings."""
    return {
        "preference_probs": {
            **reward_head.summary(prefs, data, names),
            "per_record": "preference_probs.jsonl",
        },
        "rater_beta": prefs.beta,
        "inference": {
            "engine": pref_spec.options["engine"],
            "competence": pref_spec.options["competence"],
            "lower_quantile": pref_spec.options["lower_quantile"],
            "features": f"mean-pooled last hidden state of the base model, {prefs.feature_dim} components",
            "fits": {names[int(k)]: v for k, v in prefs.diagnostics.items()},
        },
    }


def _check_finite(final: dict[str, Any], acc_obj: list[float]) -> None:
    """A run never ends with non-finite multipliers, win rates, thresholds or accuracies."""
    for key in ("lambda", "G", "b"):
        vals = torch.as_tensor(final.get(key, []), dtype=torch.float64, device="cpu")
        if vals.numel() and not torch.isfinite(vals).all():
            raise DataError(f"results.final.{key}", final[key], "not finite: the run diverged")
    if not all(math.isfinite(a) for a in acc_obj):
        raise DataError("results.implicit_accuracy", acc_obj, "not finite")


def _evaluate(
    trainer: MOPOLMTrainer, tok: Any, data: PreferenceData, cfg: MOPOLMConfig
) -> tuple[list[float], int]:
    """Per-objective implicit-reward accuracy of the trained policy on the first :data:`EVAL_RECORDS`
    records, and their number."""
    head = trainer.primary if cfg.multi_head else 0
    sub = data.subset(range(min(len(data), EVAL_RECORDS)))
    return implicit_accuracy(trainer.model, tok, sub, head=head, max_length=cfg.max_length), len(sub)


def _user_results(
    st: dict[str, Any], trainer: MOPOLMTrainer, data: PreferenceData, names: list[str], device: torch.device,
    start: int, seconds: float, final: dict[str, Any], acc_obj: list[float], n_eval: int, pref_spec: Any,
) -> dict[str, Any]:  # fmt: skip
    """The ``results.json`` record of a run (module docstring)."""
    return {
        "mode": "lm",
        "model": str(st["model_path"]),
        "device": str(device),
        "processes": trainer.world,
        "data": {
            "path": str(st["data"]["path"]),
            "records": len(data),
            "objectives": names,
            "primary": names[trainer.primary],
            "raters": len(set(data.raters)) if data.raters else None,
        },
        "train": st["cfg"].to_dict(),
        "steps": trainer.step_count,
        "resumed_from_step": start if start else None,
        "train_seconds": seconds,
        "seconds_per_step": seconds / max(1, trainer.step_count - start),
        "final": final,
        "implicit_accuracy": dict(zip(names, acc_obj, strict=True)),
        "implicit_accuracy_records": n_eval,
        "preference_model": "empirical" if pref_spec is None else pref_spec.model,
    }


def run_user(config: dict[str, Any] | UserExperiment, out: Path) -> dict[str, Any]:
    """Train MOPO (or DPO, ``train.method``) on a user file with a local model; see the module docstring.
    ``config``: a :class:`~bayescrl.mopo.lm.experiment.UserExperiment` (checked again: its fields may have
    been set after it was built) or a mapping (parsed and checked)."""
    exp = config.check() if isinstance(config, UserExperiment) else UserExperiment.from_dict(config)
    st = _settings(exp)
    cfg, model_path, out = st["cfg"], st["model_path"], Path(out)
    set_torch_threads(exp.threads)
    seed_everything(st["seed"])
    data, pref_spec = _load_user_data(exp, st)
    names = list(data.names) or [f"objective_{k}" for k in range(data.num_objectives)]
    acc, device, main = _placement(exp.device)
    say = log.info if main else (lambda *a, **k: None)  # progress from the main process only
    base, tok = load_local_model(model_path, cfg.torch_dtype(device))
    base.to(device)
    prefs, atom_scores = _fit_preferences(pref_spec, base, tok, data, cfg, acc, say)
    trainer = _make_trainer(st, base, tok, data, out, acc, atom_scores, main, say)
    start = trainer.step_count
    say(
        "MOPO (%s) on %d records, objectives %s (primary %s), %s on %s x %d, %d steps",
        cfg.method, len(data), names, names[trainer.primary], model_path, device, trainer.world, cfg.steps,
    )  # fmt: skip
    rec, seconds = _train_loop(trainer, st, out, acc, main, say)
    if main:
        _save_atomic(trainer, out / "checkpoint")
        trainer.model.save(out / "policy")
    acc_obj, n_eval = _evaluate(trainer, tok, data, cfg)
    final = {k: v for k, v in (rec or (trainer.log[-1] if trainer.log else {})).items() if k != "seconds"}
    results = _user_results(
        st, trainer, data, names, device, start, seconds, final, acc_obj, n_eval, pref_spec
    )
    if prefs is not None:
        results |= _preference_results(prefs, pref_spec, data, names)
        if main:
            reward_head.write_records(out / "preference_probs.jsonl", prefs, data, names)
    _check_finite(final, acc_obj)
    return results

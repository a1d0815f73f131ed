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
import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import torch

from bayescrl.mopo.lm.config import MOPOLMConfig
from bayescrl.mopo.lm.data import PreferenceData
from bayescrl.mopo.lm.model import lora_policy
from bayescrl.mopo.lm.tiny import check_shape
from bayescrl.mopo.lm.trainer import MOPOLMTrainer
from bayescrl.mopo.lm.user import load_local_model, model_context
from bayescrl.mopo.textgen import labels as lab
from bayescrl.mopo.textgen import parm as parm_mod
from bayescrl.mopo.textgen import ric as ric_mod
from bayescrl.mopo.textgen.base import SCORE_TOKENS, Plain, fit_behaviour, reward_tokens, sample, tiny_base
from bayescrl.mopo.textgen.scorers import get_scorer, score_all
from bayescrl.mopo.textgen.table import build_table, load_runs, markdown, plot_fronts
from bayescrl.mopo.textgen.tasks import DEFAULT_SCORERS, TASKS, Task, build_task
from bayescrl.utils import ConfigError, seed_everything, set_torch_threads, write_json
from bayescrl.utils.checks import number, positive_int
from bayescrl.utils.io import check_keys, load_json

log = logging.getLogger(__name__)

ALGORITHMS = ("ric", "parm", "modpo", "dpo_joint", "mopo-lb", "mopo-lag")
KNOWN = (
    "mode",
    "name",
    "description",
    "seeds",
    "threads",
    "device",
    "task",
    "model",
    "labels",
    "algorithms",
    "train",
    "mopo",
    "modpo",
    "ric",
    "parm",
    "hv_reference",
    "out",
)
SECTIONS = {
    "task": (
        "name",
        "scorers",
        "n_train_prompts",
        "n_eval_prompts",
        "samples_per_prompt",
        "eval_samples",
        "max_new_tokens",
        "temperature",
    ),
    "model": ("path", "n_layer", "n_embd", "n_head", "n_positions", "sft_steps", "sft_lr", "sft_per_prompt"),
    "labels": ("raters",),
    "mopo": ("thresholds", "lb", "lag"),
    "modpo": ("weightings",),
    "ric": (
        "steps",
        "lr",
        "batch_size",
        "weightings",
        "desired_scores",
        "mapping",
        "reference_draws",
        "clip_to_data",
    ),
    "parm": ("steps", "lr", "batch_size", "rank", "alpha", "beta", "beta_r", "guidance", "weightings"),
}
GPT2_LORA = {
    "r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.05,
    "target_modules": ["c_attn", "c_proj", "c_fc"],
    "fan_in_fan_out": True,
}
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


def validate(config: dict[str, Any]) -> dict[str, Any]:
    """Check every key and value before any work; returns the resolved settings."""
    check_keys(config, list(KNOWN))
    sec = {k: _section(config, k) for k in SECTIONS}
    for key, names in SECTIONS.items():
        check_keys(sec[key], list(names), key)
    t = sec["task"]
    name = t.get("name", "assistant")
    if name not in TASKS:
        raise ConfigError("task.name", name, f"must be one of {', '.join(TASKS)}")
    scorers = t.get("scorers", list(DEFAULT_SCORERS[name]))
    if not isinstance(scorers, list) or len(scorers) != 2:
        raise ConfigError("task.scorers", scorers, "need a list of 2 scorer names (r1, r2)")
    for i, s in enumerate(scorers):
        get_scorer(s, "task.scorers", index=i)
    k = 2
    seeds = config.get("seeds", [0, 1, 2])
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        seeds = [seeds]
    if (
        not isinstance(seeds, list)
        or not seeds
        or any(isinstance(s, bool) or not isinstance(s, int) for s in seeds)
    ):
        raise ConfigError("seeds", seeds, "must be a non-empty list of integers")
    dup = next((x for i, x in enumerate(seeds) if x in seeds[:i]), None)
    if dup is not None:  # one seed's run would overwrite the other's
        raise ConfigError("seeds", seeds, f"seed {dup} appears twice; give distinct seeds")
    algos = config.get("algorithms", list(ALGORITHMS))
    if not isinstance(algos, list) or not algos:
        raise ConfigError("algorithms", algos, f"must be a non-empty list of {', '.join(ALGORITHMS)}")
    for i, a in enumerate(algos):
        if a not in ALGORITHMS:
            raise ConfigError("algorithms", a, f"must be one of {', '.join(ALGORITHMS)}", index=i)
    m = sec["model"]
    for key in ("n_layer", "n_embd", "n_head", "n_positions", "sft_steps", "sft_per_prompt"):
        if key in m:
            positive_int(m[key], f"model.{key}", minimum=0 if key == "sft_steps" else 1)
    if m.get("path") and not (Path(str(m["path"])).expanduser() / "config.json").is_file():
        raise ConfigError("model.path", m["path"], "need a local Hugging Face model directory (config.json)")
    ctx = model_context(m["path"]) if m.get("path") else check_shape(m, "model", n_positions=128)
    if "sft_lr" in m:
        number(m["sft_lr"], "model.sft_lr", 0.0, strict=True)
    for key in ("n_train_prompts", "n_eval_prompts", "samples_per_prompt", "eval_samples", "max_new_tokens"):
        if key in t:
            positive_int(t[key], f"task.{key}")
    if ctx is not None and int(t.get("max_new_tokens", 40)) >= ctx:
        why = f"leaves no room for the prompt in the model's context of {ctx} tokens"
        raise ConfigError("task.max_new_tokens", t["max_new_tokens"], why)
    if int(t.get("samples_per_prompt", 4)) % 2:
        raise ConfigError(
            "task.samples_per_prompt", t["samples_per_prompt"], "must be even (answers are paired)"
        )
    number(t.get("temperature", 1.0), "task.temperature", 0.0, strict=True)
    raters = lab.parse_raters(sec["labels"].get("raters"))
    train = _section(config, "train")
    train.setdefault(
        "peft", GPT2_LORA if not m.get("path") else {"r": 16, "lora_alpha": 32, "lora_dropout": 0.05}
    )
    for key, v in THESIS_MOPO.items():
        train.setdefault(key, v)
    train.setdefault("t0", max(1, int(train.get("steps", 200)) // 20))
    train["primary"] = 0
    base_cfg = MOPOLMConfig.from_dict(train)
    mo = sec["mopo"]
    for part in ("lb", "lag"):
        check_keys(
            _section(mo, part),
            [f.name for f in __import__("dataclasses").fields(MOPOLMConfig)],
            f"mopo.{part}",
        )
    thresholds = mo.get("thresholds", [])
    if not isinstance(thresholds, list):
        raise ConfigError("mopo.thresholds", thresholds, "must be a list of [b] win-rate thresholds")
    for i, b in enumerate(thresholds):
        if not isinstance(b, list) or len(b) != k - 1:
            raise ConfigError("mopo.thresholds", b, f"need {k - 1} threshold(s) per run", index=i)
        for v in b:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise ConfigError("mopo.thresholds", b, "a win-rate threshold must be in [0, 1]", index=i)
    lb_cfg = MOPOLMConfig.from_dict({**base_cfg.to_dict(), "method": "mopo-lb", **_section(mo, "lb")})
    lag_cfg = MOPOLMConfig.from_dict({**base_cfg.to_dict(), "method": "mopo", **_section(mo, "lag")})
    modpo_w = _weightings(
        sec["modpo"].get("weightings", [[0.25, 0.75], [0.5, 0.5], [0.75, 0.25]]), k, "modpo.weightings"
    )
    r = sec["ric"]
    ric = {
        "steps": positive_int(r.get("steps", base_cfg.steps), "ric.steps"),
        "lr": number(r.get("lr", base_cfg.lr), "ric.lr", 0.0, strict=True),
        "batch_size": positive_int(r.get("batch_size", 2 * base_cfg.batch_size), "ric.batch_size"),
        "mapping": r.get("mapping", "l2"),
        "reference_draws": positive_int(r.get("reference_draws", 25_000), "ric.reference_draws"),
        "clip_to_data": r.get("clip_to_data", not m.get("path")),
    }
    if not isinstance(ric["clip_to_data"], bool):
        raise ConfigError("ric.clip_to_data", ric["clip_to_data"], "must be true or false")
    if ric["mapping"] not in ric_mod.MAPPINGS:
        raise ConfigError("ric.mapping", ric["mapping"], f"must be one of {', '.join(ric_mod.MAPPINGS)}")
    ric["weightings"] = _weightings(r.get("weightings", DEFAULT_WEIGHTINGS), k, "ric.weightings")
    desired = r.get("desired_scores")
    if desired is not None:
        if not isinstance(desired, list) or not desired:
            raise ConfigError("ric.desired_scores", desired, "must be a non-empty list of score vectors")
        desired = [ric_mod.check_desired(s, k, index=i) for i, s in enumerate(desired)]
    ric["desired_scores"] = desired
    p = sec["parm"]
    parm = {
        "steps": positive_int(p.get("steps", base_cfg.steps), "parm.steps"),
        "lr": number(p.get("lr", base_cfg.lr), "parm.lr", 0.0, strict=True),
        "batch_size": positive_int(p.get("batch_size", base_cfg.batch_size), "parm.batch_size"),
        "rank": positive_int(p.get("rank", 8), "parm.rank"),
        "alpha": number(p.get("alpha", 16.0), "parm.alpha", 0.0, strict=True),
        "beta": number(p.get("beta", 1.0), "parm.beta", 0.0, strict=True),
        "beta_r": number(p.get("beta_r", 1.0), "parm.beta_r", 0.0, strict=True),
        "guidance": p.get("guidance", "parm"),
        "weightings": _weightings(p.get("weightings", DEFAULT_WEIGHTINGS), k, "parm.weightings"),
    }
    if parm["guidance"] not in parm_mod.GUIDANCE:
        raise ConfigError("parm.guidance", parm["guidance"], f"must be one of {', '.join(parm_mod.GUIDANCE)}")
    hv_ref = config.get("hv_reference", [0.0, 0.0])
    if not isinstance(hv_ref, list) or len(hv_ref) != k:
        raise ConfigError("hv_reference", hv_ref, f"need {k} numbers")
    for v in hv_ref:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConfigError("hv_reference", hv_ref, "must be finite numbers")
    task = build_task(name, t.get("n_train_prompts"), t.get("n_eval_prompts"))
    return {
        "task": task,
        "scorers": list(scorers),
        "seeds": list(seeds),
        "algorithms": list(algos),
        "samples_per_prompt": int(t.get("samples_per_prompt", 4)),
        "eval_samples": int(t.get("eval_samples", 2)),
        "max_new_tokens": int(t.get("max_new_tokens", 40)),
        "temperature": float(t.get("temperature", 1.0)),
        "model": m,
        "raters": raters,
        "base_cfg": base_cfg,
        "lb_cfg": lb_cfg,
        "lag_cfg": lag_cfg,
        "thresholds": [list(map(float, b)) for b in thresholds],
        "modpo_weightings": modpo_w,
        "ric": ric,
        "parm": parm,
        "hv_reference": [float(v) for v in hv_ref],
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
        raw = torch.tensor(score_all(self.s["scorers"], self.contexts, texts), dtype=torch.float64)
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


def run_seed(s: dict[str, Any], seed: int, out: Path, device: torch.device) -> dict[str, Any]:
    """Everything for one seed (module docstring); returns the per-seed record of :mod:`.table`."""
    task: Task = s["task"]
    m = s["model"]
    seed_everything(seed)
    t_start = time.perf_counter()
    if m.get("path"):
        base, tok = load_local_model(m["path"], s["base_cfg"].torch_dtype(device))
        sft_loss = None
    else:
        base, tok = tiny_base(
            task,
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
            task,
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
    base_seconds = time.perf_counter() - t_start

    # --- offline preference data from the base model's own samples
    t0 = time.perf_counter()
    n = s["samples_per_prompt"]
    prompts = [p for p in task.prompts for _ in range(n)]
    contexts = [c for c in task.contexts for _ in range(n)]
    texts = sample(Plain(base), tok, prompts, s["max_new_tokens"], seed + 1, s["temperature"])
    scores = torch.tensor(score_all(s["scorers"], contexts, texts), dtype=torch.float64)
    data, info = lab.label_pairs(prompts, texts, scores, s["scorers"], s["raters"], seed)
    out.mkdir(parents=True, exist_ok=True)
    data.to_trl_jsonl(out / "train_trl.jsonl", primary=0)
    data_seconds = time.perf_counter() - t0
    low, high = scores.min(0).values, scores.max(0).values
    ev = _Eval(s, tok, low, high, seed)
    algos: dict[str, Any] = {}
    t0 = time.perf_counter()
    algos["reference"] = {
        "points": [ev.policy(Plain(base), "base")],
        "train_seconds": 0.0,
        "generate_seconds": time.perf_counter() - t0,
    }
    max_len = s["base_cfg"].max_length

    def lora(cfg: MOPOLMConfig):
        seed_everything(seed)
        return lora_policy(copy.deepcopy(base), cfg.peft)

    def train_mopo(cfg: MOPOLMConfig, d: PreferenceData, name: str):
        pol = lora(cfg)
        tr = MOPOLMTrainer(pol, tok, d, cfg, log_path=out / f"train_log_{name}.jsonl")
        t = time.perf_counter()
        log_ = tr.train()
        return tr.model, time.perf_counter() - t, log_[-1] if log_ else {}

    for a in s["algorithms"]:
        log.info("seed %d: %s", seed, a)
        if a in ("mopo-lag", "mopo-lb"):
            cfg = s["lag_cfg"] if a == "mopo-lag" else s["lb_cfg"]
            cfg = MOPOLMConfig.from_dict({**cfg.to_dict(), "seed": seed})
            pol, secs, final = train_mopo(cfg, data, a)
            t = time.perf_counter()
            pts = [{**ev.policy(pol, "adaptive"), "final": {k: final.get(k) for k in ("lambda", "b", "G")}}]
            gsecs = time.perf_counter() - t
            if a == "mopo-lag":
                for b in s["thresholds"]:
                    c2 = MOPOLMConfig.from_dict({**cfg.to_dict(), "thresholds": b})
                    pol, sec2, _ = train_mopo(c2, data, f"{a}_b{b[0]}")
                    secs += sec2
                    t = time.perf_counter()
                    pts.append(ev.policy(pol, f"b={b[0]:.2f}"))
                    gsecs += time.perf_counter() - t
            algos[a] = {"points": pts, "train_seconds": secs, "generate_seconds": gsecs}
        elif a in ("modpo", "dpo_joint"):
            cfg = MOPOLMConfig.from_dict({**s["base_cfg"].to_dict(), "method": "dpo", "seed": seed})
            ws = s["modpo_weightings"] if a == "modpo" else [None]
            pts, secs, gsecs = [], 0.0, 0.0
            for w in ws:
                pairs = data.dpo_pairs(w).as_preference_data()
                pol, sec, _ = train_mopo(cfg, pairs, a if w is None else f"{a}_{w[0]:.2f}")
                secs += sec
                t = time.perf_counter()
                pts.append(
                    {
                        **ev.policy(pol, "D_J" if w is None else f"w=({w[0]:.2f}, {w[1]:.2f})"),
                        "records": len(pairs),
                    }
                )
                gsecs += time.perf_counter() - t
            algos[a] = {"points": pts, "train_seconds": secs, "generate_seconds": gsecs}
        elif a == "ric":
            rc = s["ric"]
            cfg = s["base_cfg"]
            if not m.get("path"):  # the tiny model's reward tokens are new: their embeddings train too
                ids = tok.convert_tokens_to_ids([*reward_tokens(2), *SCORE_TOKENS])
                cfg = MOPOLMConfig.from_dict(
                    {**cfg.to_dict(), "peft": {**cfg.peft, "trainable_token_indices": {"wte": ids}}}
                )
            pol = lora(cfg)
            z = ric_mod.normalise(scores, torch.tensor(info["score_mean"]), torch.tensor(info["score_sd"]))
            t = time.perf_counter()
            losses = ric_mod.train(
                pol,
                tok,
                prompts,
                texts,
                z,
                task.marker,
                rc["steps"],
                rc["batch_size"],
                rc["lr"],
                seed,
                max_len,
            )
            secs = time.perf_counter() - t
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
            t = time.perf_counter()
            pts = []
            for d, label in zip(targets, labels, strict=True):
                ps = [ric_mod.format_prompt(p, d, task.marker) for p in ev.prompts]
                pts.append({**ev.policy(pol, label, ps), "desired": d})
            algos[a] = {
                "points": pts,
                "train_seconds": secs,
                "generate_seconds": time.perf_counter() - t,
                "sft_final_loss": float(sum(losses[-20:]) / len(losses[-20:])),
            }
        elif a == "parm":
            pc = s["parm"]
            seed_everything(seed)
            arm = parm_mod.ARM(base, 2, pc["rank"], pc["alpha"]).to(device)
            t = time.perf_counter()
            losses = parm_mod.train(
                arm, tok, data, pc["steps"], pc["batch_size"], pc["lr"], seed, max_len, pc["beta_r"]
            )
            secs = time.perf_counter() - t
            t = time.perf_counter()
            pts = []
            for w in pc["weightings"]:
                texts_w = parm_mod.guided_generate(
                    base,
                    arm,
                    tok,
                    ev.prompts,
                    w,
                    pc["beta"],
                    pc["guidance"],
                    s["max_new_tokens"],
                    seed + 7,
                    s["temperature"],
                )
                pts.append({**ev.score(texts_w, f"w=({w[0]:.2f}, {w[1]:.2f})"), "weighting": w})
            algos[a] = {
                "points": pts,
                "train_seconds": secs,
                "generate_seconds": time.perf_counter() - t,
                "rm_final_loss": float(sum(losses[-20:]) / len(losses[-20:])),
            }
    for a, rec in algos.items():
        for p in rec["points"]:
            if not all(math.isfinite(v) for v in p["r"]):
                raise ConfigError(f"{a}.points", p["r"], "a normalised reward is not finite")
    rec = {
        "task": task.name,
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


def run_textgen(config: dict[str, Any], out: Path) -> dict[str, Any]:
    """Validate, run every seed, build the table (module docstring)."""
    s = validate(config)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    set_torch_threads(config.get("threads"))
    device = torch.device(config.get("device") or ("cuda" if torch.cuda.is_available() else "cpu"))
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
    # the table covers every seed in ``out`` run with the same settings (seeds may be run one per call)
    runs = [r for r in load_runs(out) if r.get("fingerprint") == fp]
    others = sorted(int(r["seed"]) for r in load_runs(out) if r.get("fingerprint") != fp)
    if others:
        log.warning("textgen: seeds %s in %s ran with other settings and are not in the table", others, out)
    table = build_table(runs, s["hv_reference"])
    (out / "table.md").write_text(markdown([table]))
    write_json(out / "table.json", table)
    plot_fronts([table], out / "pareto.png")
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

"""``run_lm(config, out)``: the ``mode: lm`` entry point of ``bayescrl mopo`` (tiny verbosity task).

Your own data and model (``data.path``, ``--model PATH``): :mod:`bayescrl.mopo.lm.user`. Config keys of the
tiny task (all optional, each documented and checked by :class:`bayescrl.mopo.lm.experiment.TinyExperiment`;
see ``examples/mopo/lm_tiny.yaml``)::

    seed: 0
    threads: 1
    device: null                 # default: cuda if available, else cpu
    task: {l_low: 6, l_high: 12, max_words: 20, bt_scale: 2.0}   # bayescrl.mopo.lm.tiny.TinyTask
    data: {n_train: 512, n_eval_prompts: 64}
    model: {n_layer: 2, n_embd: 64, n_head: 2, sft_steps: 300}
    train: {...}                 # MOPOLMConfig fields shared by every run (MOPO and DPO baselines)
    methods: [mopo, mopo-lb, dpo_joint, dpo_scalarised]
    sweep: {thresholds: [[b_long, b_short], ...]}  # extra MOPO runs with fixed b: the Pareto sweep
    scalarise_weights: [[w_long, w_short, w_help], ...]   # MODPO-style scalarised DPO runs
    hv_reference: [0.0, 0.0]     # (helpful words, fraction of lengths in range), both maximised

Outputs in ``out``: ``results.json`` (per run: primary score, constraint values, satisfaction; Pareto points,
non-dominated mask and hypervolume per family), ``train_log_<run>.jsonl`` (lambda, chi, b, G each step),
``lengths.png`` (figure `length` style), ``pareto.png``, ``dual_trace.png``, ``base/`` (the SFT model and
tokenizer, so checkpoints reload offline) and ``checkpoint_mopo/``.

The baselines are trained by the same loop (``method="dpo"``) rather than by TRL's ``DPOTrainer``: they then
share tokenisation, LoRA, optimiser and precision with MOPO, which is what a like-for-like comparison needs.
TRL's trainer is the reference in the throughput benchmark ``benchmarks/mopo_lm_throughput.py``.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bayescrl.mopo.lm.config import MOPOLMConfig
from bayescrl.mopo.lm.data import PreferenceData
from bayescrl.mopo.lm.evaluate import generate, pareto_summary
from bayescrl.mopo.lm.experiment import TinyExperiment, UserExperiment, lm_experiment
from bayescrl.mopo.lm.model import lora_policy
from bayescrl.mopo.lm.tiny import OBJECTIVES, TinyTask, build_model, build_tokenizer, sft
from bayescrl.mopo.lm.trainer import MOPOLMTrainer
from bayescrl.mopo.lm.user import run_user
from bayescrl.utils import seed_everything, set_torch_threads, write_json
from bayescrl.utils.plotting import plt


def _fit_base(
    exp: TinyExperiment, base_cfg: MOPOLMConfig, data: PreferenceData, device: torch.device, out: Path
) -> tuple[Any, torch.nn.Module, list[float]]:
    """The word-level tokenizer and the tiny GPT-2 fitted (SFT, fp32) to the behaviour policy's answers, then
    cast to the training precision and saved as ``out/base``; returns them and the SFT losses."""
    m, seed = exp.model, exp.seed
    tokenizer = build_tokenizer()
    base = build_model(tokenizer, m.n_layer, m.n_embd, m.n_head, seed=seed)
    base.to(device)
    sft_loss = sft(base, tokenizer, data, steps=m.sft_steps, seed=seed)
    base.to(base_cfg.torch_dtype(device))  # SFT in fp32, alignment in the configured precision
    base.save_pretrained(out / "base")
    tokenizer.save_pretrained(out / "base")
    return tokenizer, base, sft_loss


@dataclasses.dataclass
class _Runs:
    """Trains and evaluates the runs of one call on the same base model; collects their records."""

    task: TinyTask
    base: torch.nn.Module
    tokenizer: Any
    prompts: list[str]
    base_cfg: MOPOLMConfig
    seed: int
    out: Path
    runs: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    lengths: dict[str, list[int]] = dataclasses.field(default_factory=dict)

    def evaluate(self, name: str, policy: Any, head: int = 0) -> dict[str, Any]:
        """Generate on the evaluation prompts; the task's scores, the lengths and three examples."""
        texts = generate(
            policy,
            self.tokenizer,
            self.prompts,
            head=head,
            max_new_tokens=self.task.max_words + 4,
            seed=self.seed + 1,
        )
        self.lengths[name] = [len(t.split()) for t in texts]
        return {**self.task.summarise(texts), "lengths": self.lengths[name], "examples": texts[:3]}

    def reference(self) -> None:
        """The SFT model itself (a zero-initialised LoRA is pi_ref), run ``reference``."""
        ref_policy = lora_policy(copy.deepcopy(self.base), self.base_cfg.peft)
        self.runs["reference"] = {"method": "sft reference", **self.evaluate("reference", ref_policy)}

    def config(self, **kw: Any) -> MOPOLMConfig:
        """The shared training settings with ``kw`` changed."""
        return MOPOLMConfig.from_dict({**self.base_cfg.to_dict(), **kw})

    def train(
        self, name: str, cfg: MOPOLMConfig, run_data: PreferenceData, family: str, extra: dict[str, Any]
    ) -> MOPOLMTrainer:
        """Train one run (log: ``out/train_log_<name>.jsonl``), evaluate it, record it as ``runs[name]``."""
        # every run starts from the same global RNG state (LoRA init, dropout), whatever ran before it:
        # otherwise a run depends on how many draws the previous runs' sampling consumed
        seed_everything(self.seed)
        policy = lora_policy(copy.deepcopy(self.base), cfg.peft, num_heads=3 if cfg.multi_head else 1)
        tr = MOPOLMTrainer(
            policy, self.tokenizer, run_data, cfg, log_path=self.out / f"train_log_{name}.jsonl"
        )
        t = time.perf_counter()
        log = tr.train()
        secs = time.perf_counter() - t
        head = (cfg.primary % 3) if cfg.multi_head else 0
        self.runs[name] = {
            "method": family,
            **extra,
            "train_seconds": secs,
            "train_records": len(run_data),
            "final": {k: v for k, v in log[-1].items() if k != "seconds"},
            **self.evaluate(name, tr.model, head),
        }
        return tr


def _train_methods(r: _Runs, exp: TinyExperiment, data: PreferenceData) -> None:
    """MOPO (adaptive thresholds, then one run per ``sweep.thresholds``), MOPO-LB, DPO on D_J and the
    scalarised DPO runs, as ``methods`` asks."""
    methods = exp.methods
    if "mopo" in methods:
        extra = {"thresholds": "adaptive", "beta": r.base_cfg.beta}
        tr = r.train("mopo", r.config(method="mopo"), data, "mopo", extra)
        tr.save_checkpoint(r.out / "checkpoint_mopo")
        for i, b in enumerate(exp.sweep.thresholds):
            r.train(
                f"mopo_b{i}",
                r.config(method="mopo", thresholds=list(b)),
                data,
                "mopo",
                {"thresholds": list(b)},
            )
    if "mopo-lb" in methods:
        r.train("mopo_lb", r.config(method="mopo-lb"), data, "mopo-lb", {"thresholds": "adaptive"})
    if "dpo_joint" in methods:
        pairs = data.dpo_pairs()
        r.train("dpo_joint", r.config(method="dpo"), pairs.as_preference_data(), "dpo_joint", {})
    if "dpo_scalarised" in methods:
        for i, w in enumerate(exp.scalarise_weights):
            pairs = data.dpo_pairs(w)
            r.train(
                f"dpo_scalarised_{i}",
                r.config(method="dpo"),
                pairs.as_preference_data(),
                "dpo_scalarised",
                {"weights": list(w)},
            )


def _families(runs: dict[str, dict[str, Any]], hv_ref: list[float]) -> dict[str, Any]:
    """Per method family: its runs' (helpful words, fraction in range) points, non-dominated mask, HV."""
    families: dict[str, Any] = {}
    for fam in sorted({r["method"] for r in runs.values()}):
        names = [n for n, r in runs.items() if r["method"] == fam]
        pts = np.array([[runs[n]["primary_helpful"], runs[n]["frac_in_range"]] for n in names])
        families[fam] = {"runs": names, "points": pts.tolist(), **pareto_summary(pts, hv_ref)}
    return families


def run_lm(config: dict[str, Any], out: Path) -> dict[str, Any]:
    """Train MOPO and the DPO baselines on the tiny verbosity task; write results, logs, plots to ``out``.

    ``config`` is checked first (:func:`bayescrl.mopo.lm.experiment.lm_experiment`). A config naming a data
    file or a model directory (``data.path``, ``model.path``) trains on that instead:
    :func:`bayescrl.mopo.lm.user.run_user`."""
    exp = lm_experiment(config)
    if isinstance(exp, UserExperiment):
        return run_user(exp, Path(out))
    out, seed, task, base_cfg = Path(out), exp.seed, exp.task.task(), exp.train_config()
    out.mkdir(parents=True, exist_ok=True)
    set_torch_threads(exp.threads)
    seed_everything(seed)
    data = task.make_data(exp.data.n_train, seed=seed)
    data.to_jsonl(out / "train.jsonl")
    prompts = task.eval_prompts(exp.data.n_eval_prompts)
    device = torch.device(exp.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    tokenizer, base, sft_loss = _fit_base(exp, base_cfg, data, device, out)
    r = _Runs(task, base, tokenizer, prompts, base_cfg, seed, out)
    r.reference()
    _train_methods(r, exp, data)
    families = _families(r.runs, exp.hv_reference)
    results = {
        "mode": "lm",
        "task": {"objectives": list(OBJECTIVES), "primary": "helpful", **task.__dict__},
        "train": base_cfg.to_dict(),
        "sft_final_loss": float(np.mean(sft_loss[-20:])),
        "runs": r.runs,
        "pareto": {"axes": ["primary_helpful", "frac_in_range"], "families": families},
        "verdict": _verdict(r.runs),
    }
    write_json(out / "results.json", results)
    _plots(out, r.runs, r.lengths, families, task)
    return results


def _verdict(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """MOPO vs DPO on D_J: constraint satisfaction (mean length in range) and primary score.

    Compares the adaptive-threshold run ``mopo`` and the best MOPO run of the sweep whose mean length is in
    range (``best_feasible_mopo``) with ``dpo_joint``.
    """
    if "dpo_joint" not in runs:
        return {}
    d, ref = runs["dpo_joint"], runs["reference"]
    out: dict[str, Any] = {"dpo_joint_lengths_in_range": d["constraints_satisfied"]}
    mopo_runs = {n: r for n, r in runs.items() if r["method"] == "mopo"}
    feasible = {n: r for n, r in mopo_runs.items() if r["constraints_satisfied"]}
    picks = {"mopo": mopo_runs.get("mopo")}
    if feasible:
        picks["best_feasible_mopo"] = max(feasible.values(), key=lambda r: r["primary_helpful"])
        out["best_feasible_mopo_run"] = max(feasible, key=lambda n: feasible[n]["primary_helpful"])
    for key, m in picks.items():
        if m is None:
            continue
        out[key] = {
            "lengths_in_range": m["constraints_satisfied"],
            "primary_gain_vs_reference": m["primary_helpful"] - ref["primary_helpful"],
            "primary_minus_dpo_joint": m["primary_helpful"] - d["primary_helpful"],
            "in_range_fraction_minus_dpo_joint": m["frac_in_range"] - d["frac_in_range"],
        }
    return out


def _plots(out: Path, runs, lengths, families, task: TinyTask) -> None:
    import json

    p = plt()
    names = list(lengths)
    fig, ax = p.subplots(figsize=(max(6.0, 0.9 * len(names)), 4.2))
    ax.boxplot([lengths[n] for n in names], notch=False, showmeans=True)
    ax.set_xticks(range(1, len(names) + 1), names, rotation=30, ha="right", fontsize=8)
    for y in (task.l_low, task.l_high):
        ax.axhline(y, ls="--", color="k", lw=1)
    top = max(max(v, default=0) for v in lengths.values()) + 1
    for i, n in enumerate(names):
        ax.annotate(f"{runs[n]['primary_helpful']:.1f}", (i + 1, top), ha="center", fontsize=7)
    ax.set_ylabel("response length (words); helpful words above")
    ax.set_title("Tiny verbosity task: lengths must stay in [l_low, l_high]")
    fig.tight_layout()
    fig.savefig(out / "lengths.png", dpi=120)
    p.close(fig)

    fig, ax = p.subplots(figsize=(6.0, 4.2))
    for fam, f in families.items():
        pts = np.array(f["points"])
        ax.scatter(pts[:, 0], pts[:, 1], label=f"{fam} (HV {f['hypervolume']:.2f})")
    ax.set_xlabel("primary: helpful words per response")
    ax.set_ylabel("fraction of responses with length in range")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "pareto.png", dpi=120)
    p.close(fig)

    log_file = out / "train_log_mopo.jsonl"
    if log_file.exists():
        recs = [json.loads(line) for line in log_file.read_text().splitlines() if line]
        lam = np.array([r["lambda"][0] for r in recs])
        b = np.array([r["b"][0] for r in recs])
        g = np.array([r["G"][0] for r in recs])
        fig, axes = p.subplots(1, 2, figsize=(9.0, 3.6))
        for j, name in enumerate(OBJECTIVES[:2]):
            axes[0].plot(lam[:, j], label=f"lambda {name}")
            axes[1].plot(g[:, j], alpha=0.4, label=f"G {name}")
            axes[1].plot(b[:, j], ls="--", label=f"b {name}")
        axes[0].set_xlabel("step")
        axes[1].set_xlabel("step")
        axes[0].legend(fontsize=8)
        axes[1].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "dual_trace.png", dpi=120)
        p.close(fig)

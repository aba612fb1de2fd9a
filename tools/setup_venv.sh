#!/usr/bin/env bash
# The Python environment the reference tests use, in .venv: numpy, gguf, regex, safetensors
# and tokenizers (tests/test_hf_*.sh: tiny Hugging Face checkpoints, no torch), and the
# official metric packages pinned to the versions the C metrics are checked against
# (rouge: LongBench ROUGE-L, rouge-score: InfiniteBench rougeLsum, fuzzywuzzy: code_sim).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
PINNED="rouge==1.0.1 rouge-score==0.1.2 fuzzywuzzy==0.18.0"
.venv/bin/python - <<'PY' 2>/dev/null && exit 0
import importlib.metadata as m, numpy, gguf, regex, safetensors, tokenizers
want = {"rouge": "1.0.1", "rouge-score": "0.1.2", "fuzzywuzzy": "0.18.0"}
raise SystemExit(any(m.version(k) != v for k, v in want.items()))
PY
.venv/bin/pip install --quiet --disable-pip-version-check numpy gguf regex safetensors tokenizers $PINNED

#!/usr/bin/env bash
# The C GGUF reader and dequantizer against the Python gguf package (tests/gguf_ref.py):
# a synthetic file of every tensor type, then the real model. Prints SKIP for the model
# part (and still passes) only when the model file is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=$BUILD/tests/test_gguf
PY=.venv/bin/python
CACHE=${KVBENCH_CACHE:-$HOME/.cache/kvbench}
MODEL=$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf
if [ "${1:-}" = "--help" ]; then
    echo "usage: BUILD=build bash tests/test_gguf_ref.sh   (needs $BIN and .venv from tools/setup_venv.sh)"
    exit 0
fi
if [ ! -x "$BIN" ]; then echo "test_gguf_ref: $BIN not built (run make $BIN)" >&2; exit 1; fi
if ! "$PY" -c "import numpy, gguf" 2>/dev/null; then
    echo "test_gguf_ref: $PY with numpy and gguf is missing (run tools/setup_venv.sh)" >&2
    exit 1
fi
exec "$PY" tests/gguf_ref.py "$BIN" "$MODEL"

#!/usr/bin/env bash
# The Python environment the reference tests use (numpy, gguf, regex), in .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -c "import numpy, gguf, regex" 2>/dev/null && exit 0
.venv/bin/pip install --quiet --disable-pip-version-check numpy gguf regex

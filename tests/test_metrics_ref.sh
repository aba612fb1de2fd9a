#!/usr/bin/env bash
# The C text metrics (qa_f1, ROUGE-L, rougeLsum, difflib ratio incl. autojunk, code_sim, count,
# retrieval, classification, Code.Debug) against tests/metrics_ref.py: the official packages
# (rouge, rouge-score, fuzzywuzzy, pinned in tools/setup_venv.sh) and standard-library restatements, on fixed and
# fresh random cases.
set -euo pipefail
if [ "${1:-}" = --help ]; then sed -n 2,5p "$0"; exit 0; fi
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
if ! command -v "$PY" >/dev/null 2>&1; then echo "SKIP: no python"; exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
seed=${KVBENCH_TEST_SEED:-$(( $(date +%s%N) % 1000000007 ))}
echo "seed $seed (KVBENCH_TEST_SEED to replay)"
"$PY" tests/metrics_ref.py make --seed "$seed" --n 4000 --cases "$tmp/cases.tsv" --ref "$tmp/ref.txt"
"$BUILD/tests/test_metrics" --eval "$tmp/cases.tsv" > "$tmp/got.txt"
"$PY" tests/metrics_ref.py compare --cases "$tmp/cases.tsv" --ref "$tmp/ref.txt" --got "$tmp/got.txt"

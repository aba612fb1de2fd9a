#!/usr/bin/env bash
# The C text metrics (qa_f1, ROUGE-L, rougeLsum, difflib ratio incl. autojunk, code_sim, count,
# retrieval, classification, Code.Debug, En.MC choice, Retrieve.KV, passkey first_int, RULER
# string_match_all/part) against tests/metrics_ref.py: the official packages (rouge, rouge-score,
# fuzzywuzzy, pinned in tools/setup_venv.sh) and standard-library restatements, on fixed and
# fresh random cases, 400 of them per metric with non-ASCII text; and workloads/pystr_tables.c
# against its generator when this Python has the same Unicode version (header line aside).
set -euo pipefail
if [ "${1:-}" = --help ]; then sed -n 2,7p "$0"; exit 0; fi
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
if ! command -v "$PY" >/dev/null 2>&1; then echo "SKIP: no python"; exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
seed=${KVBENCH_TEST_SEED:-$(( $(date +%s%N) % 1000000007 ))}
echo "seed $seed (KVBENCH_TEST_SEED to replay)"
# --exhaustive (every code point through lower and classes) draws no random number:
# make test-seeds (KVBENCH_TEST_SEED_ONLY=1) leaves it out
all=--exhaustive
[ "${KVBENCH_TEST_SEED_ONLY:-}" = 1 ] && all= && echo "seed-only: left out the exhaustive code point cases"
"$PY" tests/metrics_ref.py make --seed "$seed" --n 4000 --unicode 400 $all --cases "$tmp/cases.tsv" --ref "$tmp/ref.txt"
"$BUILD/tests/test_metrics" --eval "$tmp/cases.tsv" > "$tmp/got.txt"
"$PY" tests/metrics_ref.py compare --cases "$tmp/cases.tsv" --ref "$tmp/ref.txt" --got "$tmp/got.txt"
want=$(sed -n 's/.*(Unicode \([0-9.]*\)).*/\1/p' workloads/pystr_tables.c | head -1)
have=$("$PY" -c 'import unicodedata; print(unicodedata.unidata_version)')
if [ "${KVBENCH_TEST_SEED_ONLY:-}" = 1 ]; then   # the tables' generator reads no seed
    echo "seed-only: left out the pystr_tables.c generator check"
elif [ "$want" = "$have" ]; then
    "$PY" tools/gen_unicode_tables.py --pystr | tail -n +2 | diff -q - <(tail -n +2 workloads/pystr_tables.c) >/dev/null ||
        { echo "workloads/pystr_tables.c differs from tools/gen_unicode_tables.py --pystr"; exit 1; }
    echo "pystr_tables.c matches its generator (Unicode $have)"
else
    echo "pystr_tables.c: Unicode $want, this Python has $have: generator check skipped"
fi

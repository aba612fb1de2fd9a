#!/usr/bin/env bash
# kernels/stats.c against tests/stats_ref.py, an independent standard-library Python
# statement (Wilson by bisection, exact binomial p-values with integers, Holm, the same
# splitmix64 bootstrap), on fresh random cases.
set -euo pipefail
if [ "${1:-}" = --help ]; then sed -n 2,4p "$0"; exit 0; fi
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
seed=${KVBENCH_TEST_SEED:-$(( $(date +%s%N) % 1000000007 ))}
echo "seed $seed (KVBENCH_TEST_SEED to replay)"
"$PY" tests/stats_ref.py make --seed "$seed" --cases "$tmp/cases" --ref "$tmp/ref"
"$BUILD/tests/test_stats" --eval "$tmp/cases" > "$tmp/got"
"$PY" tests/stats_ref.py compare --ref "$tmp/ref" --got "$tmp/got"

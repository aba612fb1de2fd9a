#!/usr/bin/env bash
# Runs every test: the C test binaries, then the shell/python tests (tests/test_*.sh).
# Prints one line per test and a closing "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
unset KVBENCH_TEST_SEED_ONLY   # every part of every test (make test-seeds sets it)
pass=0; fail=0; failed=()
run_one() {
    local name=$1; shift
    local log; log=$(mktemp)
    local t0=$SECONDS
    if "$@" >"$log" 2>&1; then
        pass=$((pass + 1)); echo "PASS $name ($((SECONDS - t0))s)"
    else
        fail=$((fail + 1)); failed+=("$name"); echo "FAIL $name ($((SECONDS - t0))s)"; tail -n 30 "$log" | sed 's/^/    /'
    fi
    rm -f "$log"
}
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] && run_one "$(basename "$t")" "$t"
done
for t in tests/test_*.sh; do
    [ -f "$t" ] && run_one "$(basename "$t")" env BUILD="$BUILD" bash "$t"
done
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

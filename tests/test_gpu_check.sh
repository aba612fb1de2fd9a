#!/usr/bin/env bash
# tests/gpu/check.sh's machinery, without a GPU (about 25 s):
#   1. a failure injected into one step (KB_CHECK_INJECT_FAIL) is recorded, every later step
#      still runs, the summary is complete and the exit status is non-zero;
#   2. a failed build stops the script, with the summary written;
#   3. the deadline: steps that outlast KB_CHECK_BUDGET_S are cut or skipped and the script
#      ends within its budget;
#   4. the real script on this machine: when it has no usable GPU, the versions come first,
#      one line says why it stops, and the summary is written.
# Steps 1-3 run with KB_CHECK_DRY=1: every step's command is an echo (and a sleep), so
# what is tested is the step machinery, the budget and the summary, not the device.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
failed=()
check() {   # check DESCRIPTION COND...
    local what=$1
    shift
    if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; fails=$((fails + 1)); failed+=("$what"); fi
}
has() { grep -qE -- "$2" "$1"; }
steps="build test_kernels model test_cuda test_cuda_model test_cuda_kv test_cuda_sekv bench memcheck"

# 1. one injected failure, every step after it still runs
out=$tmp/inject
OUT=$out KB_CHECK_DRY=1 KB_CHECK_INJECT_FAIL=test_cuda bash tests/gpu/check.sh >"$tmp/inject.log" 2>&1
rc=$?
s=$out/gpu_summary.txt
check "injected failure: exit status non-zero ($rc)" [ "$rc" -ne 0 ]
check "injected failure: summary written" [ -s "$s" ]
for st in $steps; do
    want=pass
    [ "$st" = test_cuda ] && want=FAIL
    check "injected failure: step $st recorded as $want" has "$s" "^  $st +$want "
done
check "injected failure: the step's log says it was injected" has "$out/gpu_test_cuda.log" "failure injected into test_cuda"
check "injected failure: exactly one failure, naming test_cuda" \
    bash -c "grep -q '^gpu check: FAIL (1):' '$s' && grep -q '^  - test_cuda failed (rc 97' '$s'"
check "injected failure: the test seed is in the summary" has "$s" "^test seed: [0-9]+ \(replay: KVBENCH_TEST_SEED="
check "injected failure: versions are in the summary" has "$s" "^  gcc: "
seed=$(sed -n 's/^test seed: \([0-9]*\).*/\1/p' "$s")
OUT=$tmp/seed KB_CHECK_DRY=1 KB_CHECK_SEED=4242 bash tests/gpu/check.sh >/dev/null 2>&1
check "no failure: exit status 0 and PASS" bash -c "[ $? -eq 0 ] && grep -q '^gpu check: PASS' '$tmp/seed/gpu_summary.txt'"
check "the seed is fixed by default ($seed) and set by KB_CHECK_SEED" \
    bash -c "[ -n '$seed' ] && grep -q '^test seed: 4242 ' '$tmp/seed/gpu_summary.txt'"

# 2. a failed build stops everything after it
out=$tmp/build
OUT=$out KB_CHECK_DRY=1 KB_CHECK_INJECT_FAIL=build bash tests/gpu/check.sh >"$tmp/build.log" 2>&1
rc=$?
check "failed build: exit status non-zero ($rc)" [ "$rc" -ne 0 ]
check "failed build: one line says the build failed" \
    bash -c "[ \$(grep -c '^gpu check: FAIL: make CUDA=1 failed' '$tmp/build.log') -eq 1 ]"
check "failed build: summary has the build and no later step" \
    bash -c "grep -qE '^  build +FAIL ' '$out/gpu_summary.txt' && ! grep -q '^  test_kernels ' '$out/gpu_summary.txt' && grep -q '^gpu check: FAIL (1):' '$out/gpu_summary.txt'"

# 3. the deadline: 20 s of the 30 s budget are usable (10 s are kept for the summary);
# each step takes 12 s: the build passes, test_kernels is cut at the 8 s left (skipped
# instead if starting the build took over 3 s on a loaded machine), the rest skipped
out=$tmp/budget
t0=$SECONDS
OUT=$out KB_CHECK_DRY=1 KB_CHECK_DRY_SLEEP=12 KB_CHECK_BUDGET_S=30 bash tests/gpu/check.sh >"$tmp/budget.log" 2>&1
rc=$?
took=$((SECONDS - t0))
s=$out/gpu_summary.txt
check "budget: ended within the 30 s budget (took $took s)" [ "$took" -le 30 ]
check "budget: exit status non-zero ($rc)" [ "$rc" -ne 0 ]
check "budget: build passed" has "$s" "^  build +pass "
check "budget: test_kernels cut at its limit (or skipped)" \
    has "$s" "^  test_kernels +(cut .*stopped at its [0-9]+ s limit|skipped .*no time left)"
grep -E "^  test_kernels " "$s"
for st in model test_cuda test_cuda_model test_cuda_kv test_cuda_sekv bench; do
    check "budget: $st skipped for lack of time" has "$s" "^  $st +skipped "
done
check "budget: memcheck without time is not a failure" has "$s" "^memcheck: no time left"

# 4. the real script here: without a usable GPU it stops after the versions, in one line
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    echo "skip: this machine has a GPU (the real check is tests/gpu/check.sh itself)"
else
    out=$tmp/real
    OUT=$out bash tests/gpu/check.sh >"$tmp/real.log" 2>&1
    rc=$?
    check "no GPU: exit status non-zero ($rc)" [ "$rc" -ne 0 ]
    check "no GPU: exactly one line says why it stops" bash -c "[ \$(grep -c '^gpu check: FAIL: ' '$tmp/real.log') -eq 1 ]"
    check "no GPU: the versions come before that line" \
        bash -c "[ \$(grep -n '^gcc: ' '$tmp/real.log' | head -n 1 | cut -d: -f1) -lt \$(grep -n '^gpu check: FAIL: ' '$tmp/real.log' | cut -d: -f1) ]"
    check "no GPU: summary with versions, seed and the reason" \
        bash -c "grep -q '^  nvcc: ' '$out/gpu_summary.txt' && grep -q '^test seed: ' '$out/gpu_summary.txt' && grep -q '^gpu check: FAIL (1):' '$out/gpu_summary.txt'"
    check "no GPU: nothing was built or run" bash -c "grep -q '^  (none ran)' '$out/gpu_summary.txt'"
fi

if [ "$fails" -ne 0 ]; then
    for f in "$tmp"/*.log; do echo "--- $f"; tail -n 25 "$f"; done
    printf 'FAILED: %s\n' "${failed[@]}"
    echo "test_gpu_check: $fails checks failed"
    exit 1
fi
echo "test_gpu_check: all checks passed"

#!/usr/bin/env bash
# tests/gpu/check.sh's machinery, without a GPU (about 25 s):
#   1. a failure injected into one step (KB_CHECK_INJECT_FAIL) is recorded, every later step
#      still runs, the summary is complete and the exit status is non-zero;
#   2. a failed build stops the script, with the summary written;
#   3. the deadline: steps that outlast KB_CHECK_BUDGET_S are cut or skipped and the script
#      ends within its budget;
#   4. the real script on this machine: when it has no usable GPU, the versions come first,
#      one line says why it stops, and the summary is written;
#   5. what comes back: at most 4 files in $OUT in every case above (the summary, the
#      results file, one tarball of the logs), the tarball holding every step's log; a
#      SIGTERM in the middle of a step ends the script within seconds, summary written;
#   6. the fallback detector: every message the CUDA code prints when it gives up on the
#      device is caught, announced refusals in the tests are not;
#   7. the results file's copy into $OUT while kvbench still holds it open in WAL mode.
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
steps="build model sim anchor test_kernels test_cuda test_cuda_model test_cuda_kv test_cuda_sekv test_cuda_prefill_tc bench memcheck"
# at most 4 plain files in $OUT, and no temporary ones left
few_files() { [ "$(find "$1" -mindepth 1 | wc -l)" -le 4 ] && [ -z "$(find "$1" -mindepth 1 -name '.*')" ]; }

# 1. one injected failure, every step after it still runs
out=$tmp/inject
OUT=$out KB_CHECK_WORK=$tmp/inject-work KB_CHECK_DRY=1 KB_CHECK_INJECT_FAIL=test_cuda bash tests/gpu/check.sh >"$tmp/inject.log" 2>&1
rc=$?
s=$out/gpu_summary.txt
check "injected failure: exit status non-zero ($rc)" [ "$rc" -ne 0 ]
check "injected failure: summary written" [ -s "$s" ]
for st in $steps; do
    want=pass
    [ "$st" = test_cuda ] && want=FAIL
    check "injected failure: step $st recorded as $want" has "$s" "^  $st +$want "
done
check "injected failure: the step's log says it was injected" has "$tmp/inject-work/gpu_test_cuda.log" "failure injected into test_cuda"
check "injected failure: at most 4 files come back ($(ls -A "$out" | tr '\n' ' '))" few_files "$out"
mkdir -p "$tmp/untar"
tar -xzf "$out/gpu_logs.tar.gz" -C "$tmp/untar" 2>/dev/null
check "injected failure: the tarball holds every step's log" \
    bash -c "for st in build model sim anchor test_kernels test_cuda bench memcheck; do ls '$tmp/untar/'gpu_\$st*.log >/dev/null 2>&1 || exit 1; done"
check "injected failure: the model run has --fidelity 0 and bf16 rows" has "$tmp/untar/gpu_model.log" "--fidelity 0 --kv-type bf16"
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
# each step takes 12 s: the build passes, the model run is cut at the 8 s left (skipped
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
check "budget: the model run cut at its limit (or skipped)" \
    has "$s" "^  model +(cut .*stopped at its [0-9]+ s limit|skipped .*no time left)"
grep -E "^  model " "$s"
check "budget: at most 4 files come back" few_files "$out"
for st in sim anchor test_kernels test_cuda test_cuda_model test_cuda_kv test_cuda_sekv test_cuda_prefill_tc bench; do
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
    check "no GPU: at most 4 files come back ($(ls -A "$out" | tr '\n' ' '))" few_files "$out"
    check "no GPU: the logs' tarball holds the versions and the probe's log" \
        bash -c "tar -tzf '$out/gpu_logs.tar.gz' | grep -q gpu_versions.txt && tar -tzf '$out/gpu_logs.tar.gz' | grep -q gpu_probe.log"
    check "no GPU: CUDA_HOME derived from nvcc on PATH or the default" has "$out/gpu_summary.txt" "^  nvcc: .*CUDA_HOME="
fi

# 5. SIGTERM during a long step: the step is stopped at once, the summary written
out=$tmp/term
OUT=$out KB_CHECK_DRY=1 KB_CHECK_DRY_SLEEP=60 bash tests/gpu/check.sh >"$tmp/term.log" 2>&1 &
pid=$!
sleep 4
t0=$SECONDS
kill -TERM "$pid"
wait "$pid"
rc=$?
took=$((SECONDS - t0))
check "SIGTERM: the script ended within 5 s of it (took $took s)" [ "$took" -le 5 ]
check "SIGTERM: exit status non-zero ($rc)" [ "$rc" -ne 0 ]
check "SIGTERM: summary says it was interrupted" has "$out/gpu_summary.txt" "interrupted \(signal\)"
check "SIGTERM: at most 4 files come back" few_files "$out"
check "SIGTERM: no step's process left behind" bash -c "! pgrep -f '[d]ry run: make CUDA=1 WERROR=0' >/dev/null"

# 6. the fallback detector (check.sh's own function, on sample logs)
eval "$(sed -n '/^fallback_lines() {/,/^}/p' tests/gpu/check.sh)"
export -f fallback_lines
for msg in "kvbench: sekv: the device tiers failed; attending on the host rows from now on" \
    "kb cuda kv rows (KV store rows): cudaMemcpy: out of memory" \
    "kb cuda spans: out of host memory" \
    "kb cuda: waiting for the device before a copy: unspecified launch failure" \
    "kvbench: KV store rows failed on the device; this store attends on the host rows from now on" \
    "kb cuda: decode failed on the device; computing it on the CPU" \
    "kvbench run: --backend cuda: no CUDA device; running on the CPU" \
    "kernels/cuda_decode.cu:312: cudaMemcpy: invalid argument"; do
    printf 'ok line\n%s\n' "$msg" >"$tmp/fb.log"
    check "fallback detected: $msg" bash -c "[ -n \"\$(fallback_lines '$tmp/fb.log')\" ]"
done
printf '(two refusals expected next)\nkb cuda kv rows: a\nkb cuda kv rows: b\nbackend cuda\n' >"$tmp/fb.log"
check "announced refusals are not a fallback" bash -c "[ -z \"\$(fallback_lines '$tmp/fb.log')\" ]"
printf '(one refusal expected next)\nkb cuda kv rows: a\nkb cuda kv rows: b\n' >"$tmp/fb.log"
check "one refusal too many is a fallback" bash -c "[ \"\$(fallback_lines '$tmp/fb.log')\" = 'kb cuda kv rows: b' ]"

# 7. the results file's copy into $OUT: while another connection holds the live file in
# WAL mode with committed rows not yet checkpointed, the copy has every row, is one file
# in rollback-journal mode, and nothing else is left in $OUT
eval "$(sed -n '/^snapshot_db() {/,/^}/p' tests/gpu/check.sh)"
logs=$tmp/snap-work out=$tmp/snap-out
mkdir -p "$logs" "$out"
python3 - "$logs/gpu_model.db" <<'PY' &
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA wal_autocheckpoint=0")
db.execute("CREATE TABLE results(id INTEGER PRIMARY KEY, v TEXT)")
db.executemany("INSERT INTO results(v) VALUES (?)", [("r%d" % i,) for i in range(500)])
db.commit()
open(sys.argv[1] + ".ready", "w").close()
time.sleep(3)   # held open: the rows live in the -wal file only
PY
writer=$!
for _ in $(seq 50); do [ -f "$logs/gpu_model.db.ready" ] && break; sleep 0.1; done
check "snapshot: the live file has its rows in the WAL" [ -s "$logs/gpu_model.db-wal" ]
snapshot_db
check "snapshot: the copy has all 500 committed rows" \
    bash -c "[ \"\$(python3 -c \"import sqlite3; print(sqlite3.connect('$out/gpu_model.db').execute('select count(*) from results').fetchone()[0])\")\" = 500 ]"
check "snapshot: the copy is not in WAL mode and stands alone ($(ls -A "$out" | tr '\n' ' '))" \
    bash -c "[ \"\$(ls -A '$out')\" = gpu_model.db ] && [ \"\$(od -An -tu1 -j18 -N1 '$out/gpu_model.db' | tr -d ' ')\" = 1 ]"
wait "$writer"

if [ "$fails" -ne 0 ]; then
    for f in "$tmp"/*.log; do echo "--- $f"; tail -n 25 "$f"; done
    printf 'FAILED: %s\n' "${failed[@]}"
    echo "test_gpu_check: $fails checks failed"
    exit 1
fi
echo "test_gpu_check: all checks passed"

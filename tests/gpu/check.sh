#!/usr/bin/env bash
# The one-call GPU check, for the lent machine with the accelerator. One deadline for the
# whole script (KB_CHECK_BUDGET_S, default 480 s): every step runs under `timeout` bounded
# by what is left, so the script ends within its budget. A failing step is recorded and the
# next one runs; the script stops early only when the build fails or no device is usable.
# The summary ($OUT/gpu_summary.txt) is rewritten after every step and on exit, so it holds
# whatever was measured even if the call is cut; the exit status is non-zero on any failure.
#
#   0. versions first: nvidia-smi (driver and its CUDA version), nvcc, gcc, then a probe
#      built alone with nvcc (tests/gpu/probe.cu: runtime/driver versions, the device);
#      stops with one line if the toolkit is newer than the driver or no device is usable;
#   1. build: make CUDA=1 WERROR=0 (kvbench, the CUDA-side tests, bench_decode), retried
#      with -allow-unsupported-compiler if nvcc rejects the host gcc; ldd of every binary;
#   2. test_kernels: every kernel test loop, CPU and CUDA backends;
#   3. every method on random:llama3-8b (the paper's shape; seeded random weights: latency
#      and memory, not accuracy), NIAH at KB_CHECK_CTX (default 8192,32768) in one
#      `kvbench run`, so the 8B weights are made and uploaded once, --backend cuda, into
#      $OUT/gpu_model.db (results are committed one by one: a cut run keeps what finished);
#      KB_CHECK_LONG=131072 adds a second run at that length with the methods in
#      KB_CHECK_LONG_METHODS (default fullkv,streamingllm,h2o,sekv: no window rows);
#   4. test_cuda, test_cuda_model, test_cuda_kv, test_cuda_sekv;
#   5. bench_decode --backend cuda (decode bandwidth vs a device copy, prefill GFLOP/s);
#   6. compute-sanitizer memcheck over test_cuda with whatever time is left.
# Every test runs with KVBENCH_TEST_SEED=$KB_CHECK_SEED (fixed; printed in the summary),
# so a failure replays locally under tests/gpu/emu.sh with the same seed.
#
# Environment: OUT (logs and summary; default a temporary directory), KB_CHECK_BUDGET_S,
# KB_CHECK_SEED, KB_CHECK_CTX, KB_CHECK_LONG, KB_CHECK_LONG_METHODS, KB_CHECK_MODEL_REST_S
# (seconds kept after the model run for steps 4-6, default 150), KVBENCH_HAYSTACK (default
# ~/.cache/kvbench/haystack/PaulGrahamEssays, else .haystack in the tree), CUDA_HOME,
# KB_DEPS (a prefix with unpacked .debs of the C libraries; see docs/gpu.md).
# For tests of the machinery itself: KB_CHECK_DRY=1 runs every step as a short echo (plus
# KB_CHECK_DRY_SLEEP seconds) instead of its command; KB_CHECK_INJECT_FAIL=STEP makes
# that step fail (names: build test_kernels model model_long test_cuda test_cuda_model
# test_cuda_kv test_cuda_sekv bench memcheck).
set -uo pipefail
[ "${1:-}" = "--help" ] && { sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
cd "$(dirname "$0")/../.." || exit 1

cuda_home=${CUDA_HOME:-/usr/local/cuda}
export PATH="$cuda_home/bin:$PATH"   # this toolkit's nvcc before any other
logs=${OUT:-$(mktemp -d)}
mkdir -p "$logs" || exit 1
budget=${KB_CHECK_BUDGET_S:-480}
seed=${KB_CHECK_SEED:-20261201}
export KVBENCH_TEST_SEED=$seed
dry=${KB_CHECK_DRY:-0}
inject=${KB_CHECK_INJECT_FAIL:-}
ctx_list=${KB_CHECK_CTX:-8192,32768}
rest_s=${KB_CHECK_MODEL_REST_S:-150}
t0=$SECONDS
reserve=10   # seconds kept for the summary at the end

step_lines=()   # "name  status  seconds  note", in order
failures=()     # one line each
memcheck="not run"

elapsed() { echo $((SECONDS - t0)); }
left() { echo $((budget - (SECONDS - t0) - reserve)); }
note_fail() { failures+=("$1"); echo "gpu check: failure: $1" >&2; }
record() { step_lines+=("$(printf '%-16s %-8s %5s s  %s' "$1" "$2" "$3" "$4")"); }

# ---------------------------------------------------------------- the summary

summary() {
    echo "== gpu check summary ($(elapsed) s of a ${budget} s budget; logs in $logs)"
    echo "test seed: $seed (replay: KVBENCH_TEST_SEED=$seed bash tests/gpu/emu.sh)"
    [ -f "$logs/gpu_versions.txt" ] && sed 's/^/  /' "$logs/gpu_versions.txt"
    echo
    echo "steps:"
    [ ${#step_lines[@]} -eq 0 ] && echo "  (none ran)"
    for l in ${step_lines[@]+"${step_lines[@]}"}; do echo "  $l"; done
    echo "memcheck: $memcheck"
    data_sections 2>/dev/null
    echo
    if [ ${#failures[@]} -eq 0 ]; then
        echo "gpu check: PASS"
    else
        echo "gpu check: FAIL (${#failures[@]}):"
        for f in "${failures[@]}"; do echo "  - $f"; done
    fi
}

data_sections() {
    local k=$logs/gpu_test_kernels.log b=$logs/gpu_bench_cuda.log
    if grep -q '^maxerr' "$k"; then
        echo
        echo "max error per op over the test_kernels loops (relative L2 unless named; bound = the test's limit)"
        awk '/^maxerr/ { v[$2, $3] = $4; b[$3] = $5; if (!($3 in order)) { order[$3] = ++n; name[n] = $3 } }
             END {
                 printf "  %-20s %10s %10s %8s\n", "op", "cpu", "cuda", "bound"
                 for (i = 1; i <= n; i++) {
                     o = name[i]
                     c = ((("cpu", o) in v) ? v["cpu", o] : "-"); g = ((("cuda", o) in v) ? v["cuda", o] : "-")
                     printf "  %-20s %10s %10s %8s\n", o, c, g, b[o]
                 }
             }' "$k"
    fi
    for t in test_kernels test_cuda test_cuda_model test_cuda_kv test_cuda_sekv; do
        grep -h "^$t:" "$logs/gpu_$t.log"
    done | sed 's/^/  /'
    if grep -q '^decode-dev' "$b"; then
        echo
        echo "decode, g 4, d 128, 2 kv heads: device-resident GB/s of K+V read, and as a fraction of a"
        echo "device-to-device cudaMemcpy (bytes read + written) in the same run; host calls include the copies"
        awk 'function f(k,  i) { for (i = 1; i < NF; i++) if ($i == k) return $(i + 1); return "-" }
             function before(k,  i) { for (i = 2; i <= NF; i++) if ($i == k) return $(i - 1); return "-" }
             BEGIN { printf "  %-8s %12s %14s %10s %16s\n", "ctx", "dev GB/s", "d2d copy GB/s", "fraction", "cuda host GB/s" }
             /^decode-dev/ { ctx = f("ctx"); dev[ctx] = before("GB/s"); cp[ctx] = f("d2d-copy"); fr[ctx] = f("fraction"); if (!(ctx in seen)) { seen[ctx] = 1; list[++n] = ctx } }
             /^decode / && $2 == "cuda" { host[f("ctx")] = before("GB/s") }
             END { for (i = 1; i <= n; i++) { c = list[i]; printf "  %-8s %12s %14s %10s %16s\n", c, dev[c], cp[c], fr[c], (c in host ? host[c] : "-") } }' "$b"
        echo
        echo "causal prefill GFLOP/s (4 d flops per head, query and visible key)"
        awk 'function f(k,  i) { for (i = 1; i < NF; i++) if ($i == k) return $(i + 1); return "-" }
             function before(k,  i) { for (i = 2; i <= NF; i++) if ($i == k) return $(i - 1); return "-" }
             BEGIN { printf "  %-28s %10s %14s %10s\n", "shape", "cuda dev", "dev +col_mass", "cuda host" }
             /^prefill/ { key = sprintf("m %s H %s Hkv %s d %s", f("m"), f("H"), f("Hkv"), f("d")); if (!(key in seen)) { seen[key] = 1; list[++n] = key } }
             /^prefill-dev/ && /col_mass/ { dm[key] = before("GFLOP/s"); next }
             /^prefill-dev/ { dv[key] = before("GFLOP/s"); next }
             /^prefill / && $2 == "cuda" { host[key] = before("GFLOP/s") }
             END { for (i = 1; i <= n; i++) { k = list[i]; printf "  %-28s %10s %14s %10s\n", k, (k in dv ? dv[k] : "-"), (k in dm ? dm[k] : "-"), (k in host ? host[k] : "-") } }' "$b"
        grep -h '^gpu-memory' "$b"
    fi
    grep -h 'high-water' "$logs/gpu_test_cuda.log"
    grep -h '^maxerr\|device prefill' "$logs/gpu_test_cuda_model.log" | head -n 12
    model_table
}

model_table() {
    local db=$logs/gpu_model.db
    [ -f "$db" ] || return 0
    echo
    echo "random:llama3-8b (seeded random weights: latency and memory, not accuracy), NIAH depth 50%,"
    echo "budget 0.1, 8 new tokens, --backend cuda. device peak = allocator high-water mark over the"
    echo "method's compression + decode (weights included); prefill = the shared prefill by CUDA events;"
    echo "case peak = over the prefill"
    python3 - "$db" <<'PY' || echo "  (python3 with sqlite3 not available; the table is in $db)"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("""SELECT c.ctx, r.method, r.status, r.gpu_peak_bytes, c.gpu_peak_bytes, c.gpu_prefill_ms,
                            r.compress_s, r.decode_s, r.decode_tokens, r.fast_peak
                     FROM results r JOIN cases c ON c.id = r.case_id ORDER BY c.ctx, r.id""").fetchall()
g = lambda b: "-" if b is None else "%.2f GiB" % (b / 2**30) if b >= 2**30 else "%.1f MiB" % (b / 2**20)
print("  %-7s %-13s %-10s %13s %13s %12s %11s %13s %14s" % ("ctx", "method", "status", "device peak", "case peak",
      "prefill ms", "compress s", "decode ms/tok", "fast-tier KV"))
for ctx, m, st, pk, cpk, pms, cs, ds, dt, fp in rows:
    print("  %-7d %-13s %-10s %13s %13s %12s %11s %13s %14s" % (ctx, m, st, g(pk), g(cpk),
          "-" if pms is None else "%.0f" % pms, "-" if cs is None else "%.2f" % cs,
          "-" if not dt else "%.1f" % (1000 * ds / dt), g(fp)))
if not rows: print("  (no results recorded)")
PY
}

write_summary() { summary >"$logs/gpu_summary.txt.new" 2>&1 && mv -f "$logs/gpu_summary.txt.new" "$logs/gpu_summary.txt"; }

on_exit() {
    local rc=$?
    trap - EXIT
    echo
    summary | tee "$logs/gpu_summary.txt.new"
    mv -f "$logs/gpu_summary.txt.new" "$logs/gpu_summary.txt"
    [ ${#failures[@]} -gt 0 ] && [ "$rc" -eq 0 ] && rc=1
    exit "$rc"
}
trap on_exit EXIT
trap 'note_fail "interrupted (signal)"; exit 130' INT TERM

# stop REASON: the one line, then the summary (exit trap) and a non-zero exit.
stop() {
    failures+=("$1")
    echo "gpu check: FAIL: $1"
    exit 1
}

# ---------------------------------------------------------------- steps

# run_step NAME WANT_S LOG CMD...: CMD under `timeout`, at most WANT_S seconds and what is
# left of the budget; records pass / fail / cut / skipped. Returns 0 when it passed,
# 1 when it failed or was cut, 2 when skipped for lack of time.
step_rc=0
run_step() {
    local name=$1 want=$2 log=$3
    shift 3
    local lim=$want l
    l=$(left)
    [ "$l" -lt "$lim" ] && lim=$l
    if [ "$lim" -lt 5 ]; then
        step_rc=2
        record "$name" skipped 0 "no time left in the ${budget} s budget"
        note_fail "$name: skipped, no time left in the ${budget} s budget"
        write_summary
        return 2
    fi
    echo "== $name (at most ${lim} s; $(elapsed) s in)"
    if declare -F "$1" >/dev/null; then   # timeout runs programs, not this script's functions
        echo "gpu check: internal error: step $name runs the shell function $1" >&2
        exit 3
    fi
    local cmd=("$@")
    [ "$dry" = 1 ] && cmd=(bash -c 'echo "dry run: $*"; sleep "${KB_CHECK_DRY_SLEEP:-0}"' dry "$@")
    [ "$inject" = "$name" ] && cmd=(bash -c 'echo "failure injected into $0 (KB_CHECK_INJECT_FAIL)"; exit 97' "$name")
    local s0=$SECONDS
    timeout -k 5 "$lim" "${cmd[@]}" >"$log" 2>&1
    step_rc=$?
    local secs=$((SECONDS - s0))
    tail -n 12 "$log" | grep -v '^kb svd: bad shape'
    # 124: timeout stopped it; 137 (SIGKILL) also when it outlived the grace after that,
    # else something else killed it: on these machines, the kernel's out-of-memory killer
    [ "$step_rc" -eq 137 ] && [ "$secs" -lt "$lim" ] && step_rc=-9
    case $step_rc in
        0) record "$name" pass "$secs" "log: $(basename "$log")"; write_summary; return 0 ;;
        124 | 137) record "$name" cut "$secs" "stopped at its ${lim} s limit (rc $step_rc; log: $(basename "$log"))"
                   note_fail "$name: cut at its ${lim} s limit (log: $log)" ;;
        -9) step_rc=137
            record "$name" FAIL "$secs" "killed by SIGKILL before its limit: out of host memory? (log: $(basename "$log"))"
            note_fail "$name killed by SIGKILL after $secs s, before its limit: out of host memory? (log: $log)" ;;
        *) record "$name" FAIL "$secs" "rc $step_rc; log: $(basename "$log")"
           note_fail "$name failed (rc $step_rc; log: $log)" ;;
    esac
    write_summary
    return 1
}

# A check after a step that passed: turns it into a failure with REASON when COND fails.
demote() {
    local name=$1 reason=$2
    local i=$((${#step_lines[@]} - 1))
    step_lines[i]=$(printf '%-16s %-8s %5s s  %s' "$name" FAIL "-" "$reason")
    note_fail "$name: $reason"
    write_summary
}

# The backend falls back to the CPU when a device call fails: that must not pass quietly.
fallback_lines() {
    grep -m 5 -E 'failed on the device|did not converge|did not return|kb cuda: cuda[A-Z]|kb cuda model:|^(kernels|model)/cuda_.*\.cu:[0-9]+:|running on the CPU' "$1"
}

# A CUDA-side test binary: passed, ran the CUDA backend, no CPU fallback.
cuda_test() {
    local name=$1 want=$2 log=$logs/gpu_$1.log
    run_step "$name" "$want" "$log" "build-cuda/tests/$name" || return
    [ "$dry" = 1 ] && return
    if ! grep -q '^backend cuda' "$log"; then
        demote "$name" "did not test the CUDA backend: $(grep -m1 'cuda backend not tested' "$log" || echo "see $log")"
    elif fallback_lines "$log" >/dev/null; then
        demote "$name" "CUDA calls failed and ran on the CPU instead: $(fallback_lines "$log" | head -n 1)"
    fi
}

# ---------------------------------------------------------------- 0. versions and the device

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); host: $(uname -srm); $(nproc) cores; $(free -g 2>/dev/null | awk '/^Mem:/ { print $2 " GiB RAM" }')"
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/nvidia-smi: /'
        nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | sed 's/^/nvidia-smi: driver /'
    else
        echo "nvidia-smi: not found"
    fi
    if command -v nvcc >/dev/null; then echo "nvcc: $(command -v nvcc): $(nvcc --version | grep -o 'release [0-9.]*, V[0-9.]*')"; else echo "nvcc: not found (PATH=$PATH)"; fi
    echo "gcc: $(gcc --version 2>/dev/null | head -n 1 || echo 'not found')"
    command -v compute-sanitizer >/dev/null && echo "compute-sanitizer: $(command -v compute-sanitizer)"
} >"$logs/gpu_versions.txt"
cat "$logs/gpu_versions.txt"

nvflags_extra=""
if [ "$dry" != 1 ]; then
    for tool in make gcc nvcc timeout; do
        command -v "$tool" >/dev/null || stop "$tool not found on PATH ($PATH)"
    done
    probe=$(mktemp -d)/gpu_probe
    if ! nvcc -O1 -o "$probe" tests/gpu/probe.cu >"$logs/gpu_probe_build.log" 2>&1; then
        if grep -qi 'unsupported.*\(gnu\|compiler\)\|allow-unsupported-compiler' "$logs/gpu_probe_build.log"; then
            nvflags_extra=-allow-unsupported-compiler
            echo "nvcc rejects this gcc; retrying with $nvflags_extra" | tee -a "$logs/gpu_versions.txt"
            nvcc -O1 $nvflags_extra -o "$probe" tests/gpu/probe.cu >>"$logs/gpu_probe_build.log" 2>&1 ||
                stop "nvcc cannot build even the device probe (log: $logs/gpu_probe_build.log): $(grep -m1 -i error "$logs/gpu_probe_build.log")"
        else
            stop "nvcc cannot build the device probe (log: $logs/gpu_probe_build.log): $(grep -m1 -i error "$logs/gpu_probe_build.log")"
        fi
    fi
    timeout 60 "$probe" >"$logs/gpu_probe.log" 2>&1
    prc=$?
    cat "$logs/gpu_probe.log" | tee -a "$logs/gpu_versions.txt"
    [ "$prc" -eq 0 ] || stop "$(tail -n 1 "$logs/gpu_probe.log" | sed 's/^probe: //')"
fi

# ---------------------------------------------------------------- 1. build

if [ -n "${KB_DEPS:-}" ]; then
    # unpacked .debs: headers (cblas.h sits in the openblas-pthread folder: the alternatives
    # link is not made by unpacking), libraries, and the libraries' own dependencies
    # (liblapacke needs liblapack.so.3 and libblas.so.3 from openblas-pthread): found through
    # LD_LIBRARY_PATH at build and run time, and an RPATH (not RUNPATH) in the binaries
    lib="$KB_DEPS/usr/lib/x86_64-linux-gnu"
    export CFLAGS="-I$KB_DEPS/usr/include -I$KB_DEPS/usr/include/x86_64-linux-gnu -I$KB_DEPS/usr/include/x86_64-linux-gnu/openblas-pthread"
    export LDFLAGS="-L$lib -L$lib/openblas-pthread -Wl,--disable-new-dtags -Wl,-rpath,$lib:$lib/openblas-pthread -Wl,-rpath-link,$lib:$lib/openblas-pthread"
    export LD_LIBRARY_PATH="$lib:$lib/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [ "$dry" != 1 ]; then
    missing=""
    for h in sqlite3.h csv.h lapacke.h cblas.h; do
        echo "#include <$h>" | gcc ${CFLAGS:-} -I/usr/include/x86_64-linux-gnu -E -x c - >/dev/null 2>&1 || missing+=" $h"
    done
    [ -z "$missing" ] || stop "missing headers:$missing (Debian: libsqlite3-dev libcsv-dev liblapacke-dev libopenblas-dev; or KB_DEPS, see docs/gpu.md)"
fi

bins="kvbench build-cuda/tests/test_kernels build-cuda/tests/test_cuda build-cuda/tests/test_cuda_model
      build-cuda/tests/test_cuda_kv build-cuda/tests/test_cuda_sekv build-cuda/tests/bench_decode"
# -B: every object with the CUDA flags, whatever an earlier build left behind
# shellcheck disable=SC2086
run_step build 300 "$logs/gpu_build.log" make CUDA=1 WERROR=0 NVFLAGS_EXTRA="$nvflags_extra" -B -j"$(nproc)" $bins
if [ "$step_rc" -ne 0 ] && [ "$dry" != 1 ] && [ -z "$nvflags_extra" ] &&
    grep -qi 'unsupported.*\(gnu\|compiler\)\|allow-unsupported-compiler' "$logs/gpu_build.log"; then
    nvflags_extra=-allow-unsupported-compiler
    failures=()   # the first try is superseded by the retry
    # shellcheck disable=SC2086
    run_step build 300 "$logs/gpu_build_retry.log" make CUDA=1 WERROR=0 NVFLAGS_EXTRA="$nvflags_extra" -B -j"$(nproc)" $bins
fi
if [ "$step_rc" -ne 0 ]; then
    unset 'failures[-1]'   # said again, as the reason to stop
    stop "make CUDA=1 failed (log: $logs/gpu_build.log); nothing else can run"
fi
if [ "$dry" != 1 ]; then
    # shellcheck disable=SC2086
    nf=$(for b in $bins; do ldd "$b" 2>/dev/null | grep 'not found' | sed "s|^|$b: |"; done)
    [ -z "$nf" ] || stop "shared libraries not found: $(echo "$nf" | tr -s ' \t\n' ' ')(set KB_DEPS, see docs/gpu.md)"
fi

# ---------------------------------------------------------------- 2. the core test

cuda_test test_kernels 120

# ---------------------------------------------------------------- 3. the model run

haystack=${KVBENCH_HAYSTACK:-$HOME/.cache/kvbench/haystack/PaulGrahamEssays}
[ -e "$haystack" ] || [ ! -d .haystack ] || haystack=.haystack   # a copy carried with the tree
model_run() {   # NAME CTX METHODS
    local name=$1 ctx=$2 methods=$3 log=$logs/gpu_$1.log want
    want=$(($(left) - rest_s))
    [ "$want" -lt 60 ] && want=60
    run_step "$name" "$want" "$log" ./kvbench run --model random:llama3-8b --backend cuda --workload niah \
        --haystack "$haystack" --ctx "$ctx" --depths 50 --methods "$methods" --budget 0.1 --max-new 8 \
        --db "$logs/gpu_model.db"
    local rc=$?
    [ "$rc" -eq 2 ] || [ "$dry" = 1 ] && return
    if fallback_lines "$log" >/dev/null; then
        demote "$name" "the run fell back to the CPU: $(fallback_lines "$log" | head -n 1)"
    fi
}
if [ "$dry" != 1 ] && [ ! -e "$haystack" ]; then
    record model skipped 0 "no NIAH haystack at $haystack (carry .haystack, see docs/gpu.md)"
    note_fail "model: no NIAH haystack at $haystack (carry .haystack with the call, or set KVBENCH_HAYSTACK)"
else
    model_run model "$ctx_list" all
    [ -n "${KB_CHECK_LONG:-}" ] && model_run model_long "$KB_CHECK_LONG" "${KB_CHECK_LONG_METHODS:-fullkv,streamingllm,h2o,sekv}"
fi

# ---------------------------------------------------------------- 4. the other tests

cuda_test test_cuda 120
cuda_test test_cuda_model 120
cuda_test test_cuda_kv 120
cuda_test test_cuda_sekv 120

# ---------------------------------------------------------------- 5. the device benchmark

if run_step bench 90 "$logs/gpu_bench_cuda.log" build-cuda/tests/bench_decode --backend cuda --reps 5 &&
    [ "$dry" != 1 ] && fallback_lines "$logs/gpu_bench_cuda.log" >/dev/null; then
    demote bench "CUDA calls failed and ran on the CPU instead: $(fallback_lines "$logs/gpu_bench_cuda.log" | head -n 1)"
fi

# ---------------------------------------------------------------- 6. memcheck, with what is left

if [ "$dry" = 1 ] || command -v compute-sanitizer >/dev/null; then
    nf=${#failures[@]}
    run_step memcheck "$(left)" "$logs/gpu_memcheck.log" \
        compute-sanitizer --tool memcheck --error-exitcode 99 build-cuda/tests/test_cuda
    case $step_rc in
        0) memcheck="clean over test_cuda" ;;
        124 | 137) memcheck="did not finish in the time left (not counted as a failure)"
                   failures=("${failures[@]:0:$nf}") ;;
        *) memcheck="errors, or test_cuda failed under it (rc $step_rc; log: $logs/gpu_memcheck.log)" ;;
    esac
    [ "$step_rc" -eq 2 ] && { memcheck="no time left"; failures=("${failures[@]:0:$nf}"); }
else
    memcheck="not run (compute-sanitizer not found)"
fi
exit 0

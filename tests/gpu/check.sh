#!/usr/bin/env bash
# The one-call GPU check, for the lent machine with the accelerator (docs/gpu-device.md;
# `make gpu-pack` prepares what the call carries and prints the call). One deadline for the
# whole script (KB_CHECK_BUDGET_S, default 510 s, in a 540 s call): every step runs under
# `timeout` bounded by what is left, in the background (`cmd & wait`, so a SIGTERM stops
# it at once), and every other external call has its own `timeout`. A failing step is
# recorded and the next one runs; the script stops early only when the build fails or no
# device is usable. What comes back in $OUT is at most 4 files, rewritten after every step
# and on exit, so a cut call keeps what was measured:
#   gpu_summary.txt   versions, steps, errors per op, the paper's table (below);
#   gpu_model.db      the model run's results file (a consistent copy: SQLite's backup,
#                     so no -wal/-shm beside it), also refreshed every 20 s during the run;
#   gpu_logs.tar.gz   every step's log (the logs themselves live in KB_CHECK_WORK).
#
#   0. versions first: nvidia-smi (driver and its CUDA version), nvcc, gcc, then a probe
#      built alone with nvcc and linked with cuBLAS and cuSOLVER (tests/gpu/probe.cu:
#      runtime/driver versions, the device, the CUDA context's size); stops with one line
#      if the toolkit is newer than the driver, no device is usable or a library is missing;
#   1. build: make CUDA=1 WERROR=0 (kvbench, the CUDA-side tests, bench_decode), retried
#      with -allow-unsupported-compiler if nvcc rejects the host gcc; ldd of every binary;
#   2. the model run, first, as it is what the call is for: every method on
#      random:llama3-8b (the paper's shape; seeded random weights: latency and memory,
#      not accuracy), NIAH at KB_CHECK_CTX (default 8192,32768) in one `kvbench run
#      --backend cuda --fidelity 0` (the prefill streams into the methods; bf16 K/V rows
#      on the device), into gpu_model.db (each result committed as it ends, each case's
#      prefill time and peak right after its prefill); KB_CHECK_LONG=131072 adds a
#      second run at that length with KB_CHECK_LONG_METHODS (default
#      fullkv,streamingllm,h2o,sekv); then `kvbench sim` for the same shapes;
#   3. anchor: tests/gpu/anchor_hf.py, transformers' Llama in bf16 with SDPA on the same
#      random 8B config, FullKV at the same lengths (skipped when torch is missing);
#   4. test_kernels, test_cuda, test_cuda_model, test_cuda_kv, test_cuda_sekv, then
#      test_cuda_prefill_tc 8192 (the tensor-core prefill against float64 and the CPU twin
#      at 8K, with the device's tiles);
#   5. bench_decode --backend cuda (decode bandwidth vs a device copy, prefill GFLOP/s);
#   6. compute-sanitizer memcheck over test_cuda with whatever time is left.
# Every test runs with KVBENCH_TEST_SEED=$KB_CHECK_SEED (fixed; printed in the summary),
# so a failure replays locally under tests/gpu/emu.sh with the same seed.
#
# Environment: OUT (default a temporary directory), KB_CHECK_WORK (the logs and the live
# results file; default a temporary directory), KB_CHECK_BUDGET_S, KB_CHECK_SEED,
# KB_CHECK_CTX, KB_CHECK_LONG, KB_CHECK_LONG_METHODS, KB_CHECK_MODEL_REST_S (seconds kept
# after the model run for steps 3-6, default 170), KVBENCH_HAYSTACK (default
# ~/.cache/kvbench/haystack/PaulGrahamEssays, else .haystack in the tree, else any text:
# the weights are random), CUDA_HOME (default: where `command -v nvcc` lives), KB_DEPS
# (a prefix with unpacked .debs of the C libraries; default .deps when it exists).
# For tests of the machinery itself: KB_CHECK_DRY=1 runs every step as a short echo (plus
# KB_CHECK_DRY_SLEEP seconds) instead of its command; KB_CHECK_INJECT_FAIL=STEP makes
# that step fail (names: build model model_long sim anchor test_kernels test_cuda
# test_cuda_model test_cuda_kv test_cuda_sekv test_cuda_prefill_tc bench memcheck).
set -uo pipefail
[ "${1:-}" = "--help" ] && { sed -n '2,49p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
cd "$(dirname "$0")/../.." || exit 1

# The toolkit: CUDA_HOME, else the one whose nvcc is on PATH, else /usr/local/cuda
if [ -z "${CUDA_HOME:-}" ]; then
    nv=$(command -v nvcc || true)
    [ -z "$nv" ] && [ -x /usr/local/cuda/bin/nvcc ] && nv=/usr/local/cuda/bin/nvcc
    if [ -n "$nv" ]; then CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$nv")")"); else CUDA_HOME=/usr/local/cuda; fi
fi
export CUDA_HOME
export PATH="$CUDA_HOME/bin:$PATH"   # this toolkit's nvcc before any other
cudalib=$CUDA_HOME/lib64
[ -d "$cudalib" ] || cudalib=$CUDA_HOME/lib
out=${OUT:-$(mktemp -d)}
logs=${KB_CHECK_WORK:-$(mktemp -d)}
mkdir -p "$out" "$logs" || exit 1
budget=${KB_CHECK_BUDGET_S:-510}
seed=${KB_CHECK_SEED:-20261201}
export KVBENCH_TEST_SEED=$seed
dry=${KB_CHECK_DRY:-0}
inject=${KB_CHECK_INJECT_FAIL:-}
ctx_list=${KB_CHECK_CTX:-8192,32768}
rest_s=${KB_CHECK_MODEL_REST_S:-170}
t0=$SECONDS
reserve=10   # seconds kept for the summary at the end

cur_pid=""      # the step (or external call) running in the background now
step_lines=()   # "name  status  seconds  note", in order
failures=()     # one line each
memcheck="not run"

elapsed() { echo $((SECONDS - t0)); }
# bg CMD...: CMD in the background and wait for it, so that a signal reaches the trap at
# once (bash runs a trap only between foreground commands); the trap stops CMD.
bg() {
    "$@" &
    cur_pid=$!
    wait "$cur_pid"
    local r=$?
    cur_pid=""
    return $r
}
left() { echo $((budget - (SECONDS - t0) - reserve)); }
note_fail() { failures+=("$1"); echo "gpu check: failure: $1" >&2; }
record() { step_lines+=("$(printf '%-16s %-8s %5s s  %s' "$1" "$2" "$3" "$4")"); }

# ---------------------------------------------------------------- the summary

summary() {
    echo "== gpu check summary ($(elapsed) s of a ${budget} s budget; logs: gpu_logs.tar.gz)"
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
    for t in test_kernels test_cuda test_cuda_model test_cuda_kv test_cuda_sekv test_cuda_prefill_tc; do
        grep -h "^$t:" "$logs/gpu_$t.log"
    done | sed 's/^/  /'
    grep -h '^T=' "$logs/gpu_test_cuda_prefill_tc.log" 2>/dev/null | sed 's/^/  prefill /'
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
    [ -f "$db" ] || [ -f "$logs/gpu_anchor.json" ] || return 0
    echo
    echo "random:llama3-8b (seeded random weights: latency and memory, not accuracy), NIAH depth 50%, budget 0.1,"
    echo "8 new tokens, --backend cuda --fidelity 0 --kv-type bf16 (the paper's figure; tests/gpu/paper_table.py):"
    timeout 60 python3 tests/gpu/paper_table.py --db "$db" --log "$logs/gpu_model.log" --log "$logs/gpu_model_long.log" --sim "$logs/gpu_sim.log" \
        --anchor "$logs/gpu_anchor.json" \
        2>&1 || echo "  (the table could not be printed: python3 with sqlite3 missing? the data are in gpu_model.db)"
}

# The results file into $OUT: SQLite's online backup of the live file (a consistent copy
# with the committed results, in one file), renamed into place. Safe while kvbench writes.
snapshot_db() {
    local db=$logs/gpu_model.db
    [ -f "$db" ] || return 0
    local tmp=$out/.gpu_model.db.$BASHPID   # its own name: the 20 s loop may be copying too
    timeout 30 python3 - "$db" "$tmp" <<'PY' >/dev/null 2>&1 || { rm -f "$tmp"; return 0; }
import sqlite3, sys
src = sqlite3.connect(sys.argv[1], timeout=10)
dst = sqlite3.connect(sys.argv[2])
src.backup(dst)
dst.execute("PRAGMA journal_mode=DELETE")
dst.close()
PY
    mv -f "$tmp" "$out/gpu_model.db"
}
# The logs into one tarball in $OUT (the live results file stays out: its copy is there).
pack_logs() {
    timeout 30 tar -czf "$out/.gpu_logs.tar.gz.new" -C "$logs" --exclude='*.db' --exclude='*.db-*' \
        --exclude='gpu_probe' . 2>/dev/null && mv -f "$out/.gpu_logs.tar.gz.new" "$out/gpu_logs.tar.gz"
    rm -f "$out/.gpu_logs.tar.gz.new"
}
write_summary() {
    summary >"$out/.gpu_summary.txt.new" 2>&1 && mv -f "$out/.gpu_summary.txt.new" "$out/gpu_summary.txt"
    snapshot_db
    pack_logs
}

on_exit() {
    local rc=$?
    trap - EXIT
    [ -n "$cur_pid" ] && kill -TERM "$cur_pid" 2>/dev/null
    [ -n "${snap_pid:-}" ] && kill "$snap_pid" 2>/dev/null
    echo
    summary | tee "$out/.gpu_summary.txt.new"
    mv -f "$out/.gpu_summary.txt.new" "$out/gpu_summary.txt"
    snapshot_db
    pack_logs
    rm -f "$out"/.gpu_model.db.*
    [ ${#failures[@]} -gt 0 ] && [ "$rc" -eq 0 ] && rc=1
    exit "$rc"
}
trap on_exit EXIT
# a signal: stop the step running now (timeout passes it on), then the summary (exit trap)
trap 'note_fail "interrupted (signal)"; [ -n "$cur_pid" ] && kill -TERM "$cur_pid" 2>/dev/null; exit 130' INT TERM

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
    bg timeout -k 5 "$lim" "${cmd[@]}" >"$log" 2>&1
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
# Every message the CUDA code prints on such a path (grep kernels/*.cu model/*.cu methods
# harness for them): a line from the backend ("kb cuda...", "kb cuda kv rows...", "kb cuda
# sekv...", "kb cuda: waiting for the device..."), a method or run giving up on the device
# ("...failed on the device...", "sekv: the device tiers failed", "running on the CPU"), a
# source location from CK(). The tests provoke some refusals on purpose and announce them
# first ("(one refusal expected next)"): that many matching lines after it are skipped.
fallback_lines() {
    awk 'BEGIN { words["one"] = 1; words["two"] = 2; words["three"] = 3 }
         /^\((one|two|three) refusals? expected next\)/ { skip += words[substr($1, 2)]; next }
         /^kb cuda|failed on the device|device tiers failed|did not converge|did not return|running on the CPU|^(kernels|model)\/cuda_.*\.cu:[0-9]+:/ {
             if (skip > 0) { skip--; next }
             print; if (++n == 5) exit
         }' "$1"
}

# A CUDA-side test binary (ARGS passed on): passed, ran the CUDA backend, no CPU fallback.
cuda_test() {   # NAME WANT_S [ARGS...]
    local name=$1 want=$2 log=$logs/gpu_$1.log
    shift 2
    run_step "$name" "$want" "$log" "build-cuda/tests/$name" "$@" || return
    [ "$dry" = 1 ] && return
    if ! grep -q '^backend cuda' "$log"; then
        demote "$name" "did not test the CUDA backend: $(grep -m1 'cuda backend not tested' "$log" || echo "see $log")"
    elif [ -n "$(fallback_lines "$log")" ]; then
        demote "$name" "CUDA calls failed and ran on the CPU instead: $(fallback_lines "$log" | head -n 1)"
    fi
}

# ---------------------------------------------------------------- 0. versions and the device

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); host: $(uname -srm); $(nproc) cores; $(free -g 2>/dev/null | awk '/^Mem:/ { print $2 " GiB RAM" }')"
    if command -v nvidia-smi >/dev/null; then
        timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/nvidia-smi: /'
        timeout 20 nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | sed 's/^/nvidia-smi: driver /'
    else
        echo "nvidia-smi: not found"
    fi
    if command -v nvcc >/dev/null; then
        echo "nvcc: $(command -v nvcc): $(timeout 20 nvcc --version | grep -o 'release [0-9.]*, V[0-9.]*') (CUDA_HOME=$CUDA_HOME)"
    else
        echo "nvcc: not found (PATH=$PATH)"
    fi
    echo "gcc: $(timeout 10 gcc --version 2>/dev/null | head -n 1 || echo 'not found')"
    command -v compute-sanitizer >/dev/null && echo "compute-sanitizer: $(command -v compute-sanitizer)"
    command -v python3 >/dev/null && echo "python3: $(timeout 30 python3 -c 'import sys
try:
    import torch, transformers
    t = "torch %s (cuda %s), transformers %s" % (torch.__version__, torch.version.cuda, transformers.__version__)
except Exception as e:
    t = "no torch/transformers (%s)" % type(e).__name__
print(sys.version.split()[0] + "; " + t)' 2>/dev/null)"
} >"$logs/gpu_versions.txt"
cat "$logs/gpu_versions.txt"

# The C libraries: .deps (unpacked Debian packages, `make gpu-pack`) whenever it exists
[ -z "${KB_DEPS:-}" ] && [ -d .deps/usr/include ] && KB_DEPS=$PWD/.deps
nvflags_extra=""
probe_link="-L$cudalib -lcublas -lcusolver"
if [ "$dry" != 1 ]; then
    for tool in make gcc nvcc timeout; do
        command -v "$tool" >/dev/null || stop "$tool not found on PATH ($PATH)"
    done
    probe=$logs/gpu_probe
    # shellcheck disable=SC2086
    if ! bg timeout 180 nvcc -O1 -o "$probe" tests/gpu/probe.cu $probe_link >"$logs/gpu_probe_build.log" 2>&1; then
        if grep -qi 'unsupported.*\(gnu\|compiler\)\|allow-unsupported-compiler' "$logs/gpu_probe_build.log"; then
            nvflags_extra=-allow-unsupported-compiler
            echo "nvcc rejects this gcc; retrying with $nvflags_extra" | tee -a "$logs/gpu_versions.txt"
            # shellcheck disable=SC2086
            bg timeout 180 nvcc -O1 $nvflags_extra -o "$probe" tests/gpu/probe.cu $probe_link >>"$logs/gpu_probe_build.log" 2>&1 ||
                stop "nvcc cannot build even the device probe (log: gpu_probe_build.log): $(grep -m1 -i 'error\|cannot find' "$logs/gpu_probe_build.log")"
        else
            stop "nvcc cannot build the device probe with cuBLAS and cuSOLVER (log: gpu_probe_build.log): $(grep -m1 -i 'error\|cannot find' "$logs/gpu_probe_build.log")"
        fi
    fi
    bg timeout 60 env LD_LIBRARY_PATH="$cudalib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$probe" >"$logs/gpu_probe.log" 2>&1
    prc=$?
    tee -a "$logs/gpu_versions.txt" <"$logs/gpu_probe.log"
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
    echo "C libraries: $KB_DEPS" | tee -a "$logs/gpu_versions.txt"
fi
if [ "$dry" != 1 ]; then
    missing=""
    for h in sqlite3.h csv.h lapacke.h cblas.h; do
        echo "#include <$h>" | timeout 30 gcc ${CFLAGS:-} -I/usr/include/x86_64-linux-gnu -E -x c - >/dev/null 2>&1 || missing+=" $h"
    done
    [ -z "$missing" ] || stop "missing headers:$missing (Debian: libsqlite3-dev libcsv-dev liblapacke-dev libopenblas-dev; or carry .deps from make gpu-pack)"
fi

bins="kvbench build-cuda/tests/test_kernels build-cuda/tests/test_cuda build-cuda/tests/test_cuda_model
      build-cuda/tests/test_cuda_kv build-cuda/tests/test_cuda_sekv build-cuda/tests/test_cuda_prefill_tc
      build-cuda/tests/bench_decode"
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
    stop "make CUDA=1 failed (log: gpu_build.log); nothing else can run"
fi
if [ "$dry" != 1 ]; then
    # shellcheck disable=SC2086
    nf=$(for b in $bins; do timeout 20 ldd "$b" 2>/dev/null | grep 'not found' | sed "s|^|$b: |"; done)
    [ -z "$nf" ] || stop "shared libraries not found: $(echo "$nf" | tr -s ' \t\n' ' ')(carry .deps from make gpu-pack)"
fi

# ---------------------------------------------------------------- 2. the model run

# The weights are random, so any text serves as the haystack: the essays when present,
# else this tree's README.
haystack=${KVBENCH_HAYSTACK:-$HOME/.cache/kvbench/haystack/PaulGrahamEssays}
[ -e "$haystack" ] || [ ! -d .haystack ] || haystack=.haystack   # a copy carried with the tree
[ -e "$haystack" ] || haystack=README.md
snap_pid=""
model_run() {   # NAME CTX METHODS
    local name=$1 ctx=$2 methods=$3 log=$logs/gpu_$1.log want
    want=$(($(left) - rest_s))
    [ "$want" -lt 60 ] && want=60
    # the results file reaches $OUT during the run too: a call cut in the middle keeps them
    # (sleep in the background: a TERM ends the loop at once, not after the sleep)
    (trap 'kill "$sp" 2>/dev/null; exit 0' TERM; while :; do sleep 20 & sp=$!; wait "$sp"; snapshot_db; done) &
    snap_pid=$!
    run_step "$name" "$want" "$log" ./kvbench run --model random:llama3-8b --backend cuda --workload niah \
        --haystack "$haystack" --ctx "$ctx" --depths 50 --methods "$methods" --budget 0.1 --max-new 8 \
        --fidelity 0 --kv-type bf16 --db "$logs/gpu_model.db"
    local rc=$?
    kill "$snap_pid" 2>/dev/null
    wait "$snap_pid" 2>/dev/null
    snap_pid=""
    snapshot_db
    [ "$rc" -eq 2 ] || [ "$dry" = 1 ] && return
    if [ -n "$(fallback_lines "$log")" ]; then
        demote "$name" "the run fell back to the CPU: $(fallback_lines "$log" | head -n 1)"
    fi
}
model_run model "$ctx_list" all
[ -n "${KB_CHECK_LONG:-}" ] && model_run model_long "$KB_CHECK_LONG" "${KB_CHECK_LONG_METHODS:-fullkv,streamingllm,h2o,sekv}"
# the sim's prediction for the same shapes (host only, seconds)
sim_ctx=$ctx_list${KB_CHECK_LONG:+,$KB_CHECK_LONG}
run_step sim 60 "$logs/gpu_sim.log" ./kvbench sim --model random:llama3-8b --ctx "$sim_ctx" --methods all \
    --budget 0.1 --decode 8 --kv-type bf16 --quiet

# ---------------------------------------------------------------- 3. the transformers anchor

if [ "$dry" = 1 ] || bg timeout 90 python3 -c 'import torch, transformers' >"$logs/gpu_anchor.log" 2>&1; then
    run_step anchor 120 "$logs/gpu_anchor.log" python3 tests/gpu/anchor_hf.py --device cuda --ctx "$ctx_list" \
        --json "$logs/gpu_anchor.json"
else   # not a failure of kvbench: the table just lacks the ratios
    record anchor skipped 0 "python3 cannot import torch and transformers (log: gpu_anchor.log)"
    write_summary
fi

# ---------------------------------------------------------------- 4. the tests

cuda_test test_kernels 90
cuda_test test_cuda 60
cuda_test test_cuda_model 60
cuda_test test_cuda_kv 60
cuda_test test_cuda_sekv 60
# the tensor-core prefill at 8K (about 15-30 s, most of it the float64 reference on the CPU)
cuda_test test_cuda_prefill_tc 45 8192

# ---------------------------------------------------------------- 5. the device benchmark

if run_step bench 60 "$logs/gpu_bench_cuda.log" build-cuda/tests/bench_decode --backend cuda --reps 5 &&
    [ "$dry" != 1 ] && [ -n "$(fallback_lines "$logs/gpu_bench_cuda.log")" ]; then
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
        *) memcheck="errors, or test_cuda failed under it (rc $step_rc; log: gpu_memcheck.log)" ;;
    esac
    [ "$step_rc" -eq 2 ] && { memcheck="no time left"; failures=("${failures[@]:0:$nf}"); }
else
    memcheck="not run (compute-sanitizer not found)"
fi
exit 0

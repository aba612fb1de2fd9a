#!/usr/bin/env bash
# The prepared one-call GPU check, for the machine with the accelerator (about 3-6 min):
#   1. make CUDA=1 (kvbench, the kernel tests, the decode benchmark);
#   2. build-cuda/tests/test_kernels: every kernel test loop on the CPU and the CUDA
#      backend (fails if the CUDA backend is not usable there);
#      build-cuda/tests/test_cuda: the memory API, the device-resident entry points, head
#      dims and group sizes beyond test_kernels, CPU/CUDA SVD agreement;
#   3. compute-sanitizer memcheck over test_cuda, when the tool is there (time-boxed);
#   4. the decode/prefill benchmark on the CUDA backend (host calls with their copies,
#      then device-resident with CUDA events, next to a device-to-device cudaMemcpy) and
#      on the CPU;
#   5. every method on a model of the paper's shape (random:llama3-8b: 32 layers, 8 kv
#      heads of 128; seeded random weights, right for latency and memory, not accuracy) at
#      8K, 32K and 128K tokens of NIAH, --backend cuda, into $OUT/gpu_model.db: per method
#      the device's measured peak (allocator high-water mark), prefill and decode time;
#      each length runs only while the time box (KB_CHECK_BUDGET_S, default 450 s from the
#      start) has room, and what finished is kept (results are committed one by one);
#   6. one summary table: max error per op and backend, decode bandwidth as a fraction of
#      the copy, prefill GFLOP/s, peak device memory, the model table last.
# Logs go to $OUT (when set, else a temporary directory) as gpu_*.log; the summary is
# also written to gpu_summary.txt. Exits non-zero on any failure, naming it.
# The device machine has no network: for step 5, copy the haystack into the tree first
# (cp -r ~/.cache/kvbench/haystack/PaulGrahamEssays .haystack; 736 KB, ignored by git) and
# carry .haystack with the call, or set KVBENCH_HAYSTACK.
# If the image lacks the C libraries (sqlite3, libcsv, LAPACKE, OpenBLAS), unpack their
# .debs under a prefix and set KB_DEPS=/that/prefix.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
export PATH="$PATH:/usr/local/cuda/bin"
logs=${OUT:-$(mktemp -d)}
mkdir -p "$logs"
t_start=$SECONDS
fail() { echo "gpu check: FAIL: $*" >&2; echo "gpu check: FAIL: $*" >>"$logs/gpu_summary.txt"; exit 1; }
step() { echo "== $* ($((SECONDS - t_start)) s)"; }

if [ -n "${KB_DEPS:-}" ]; then
    lib="$KB_DEPS/usr/lib/x86_64-linux-gnu"
    export CFLAGS="-I$KB_DEPS/usr/include -I$KB_DEPS/usr/include/x86_64-linux-gnu"
    export LDFLAGS="-L$lib -L$lib/openblas-pthread -Wl,-rpath,$lib -Wl,-rpath,$lib/openblas-pthread"
fi
for tool in make gcc nvcc; do
    command -v "$tool" >/dev/null || fail "$tool not found on PATH ($PATH)"
done
missing=""
for h in sqlite3.h csv.h lapacke.h cblas.h; do
    echo "#include <$h>" | gcc ${CFLAGS:-} -I/usr/include/x86_64-linux-gnu -E -x c - >/dev/null 2>&1 || missing+=" $h"
done
[ -z "$missing" ] || fail "missing headers:$missing (libsqlite3-dev libcsv-dev liblapacke-dev libopenblas-dev; or set KB_DEPS)"
if command -v nvidia-smi >/dev/null; then nvidia-smi -L; fi
nvcc --version | tail -n 2

step "build (make CUDA=1)"
build() {
    # -B: rebuild every object with the CUDA flags, whatever an earlier build left behind
    make CUDA=1 -B -j"$(nproc)" kvbench build-cuda/tests/test_kernels build-cuda/tests/test_cuda \
        build-cuda/tests/test_cuda_model build-cuda/tests/test_cuda_kv build-cuda/tests/bench_decode \
        $(ls tests/test_cuda_sekv.c >/dev/null 2>&1 && echo build-cuda/tests/test_cuda_sekv)
}
build >"$logs/gpu_build.log" 2>&1 ||
    { tail -n 40 "$logs/gpu_build.log"; fail "make CUDA=1 failed (log: $logs/gpu_build.log)"; }

# run NAME LOG CMD...: runs a test binary, shows its tail, fails unless the CUDA backend ran and passed
run_test() {
    local name=$1 log=$2; shift 2
    timeout 300 "$@" >"$log" 2>&1
    local rc=$?
    grep -v '^kb svd: bad shape' "$log" | grep -v '^maxerr' | tail -n 15
    grep -q '^backend cuda' "$log" ||
        fail "$name did not test the CUDA backend: $(grep 'cuda backend not tested' "$log" || echo "see $log")"
    [ "$rc" -eq 0 ] || fail "$name failed (rc $rc; log: $log)"
    no_fallback "$name" "$log"
}
# The backend falls back to the CPU when a device call fails: that must not pass quietly.
no_fallback() {
    if grep -m 5 -E 'failed on the device|did not converge|did not return|kb cuda: cuda[A-Z]|kb cuda model:|^(kernels|model)/cuda_.*\.cu:[0-9]+:' "$2"; then
        fail "$1: CUDA calls failed and were computed on the CPU instead (see above; log: $2)"
    fi
}
step "kernel tests, CPU and CUDA backends (test_kernels)"
run_test test_kernels "$logs/gpu_test_kernels.log" build-cuda/tests/test_kernels
step "CUDA-only tests (test_cuda)"
run_test test_cuda "$logs/gpu_test_cuda.log" build-cuda/tests/test_cuda
step "device forward pass against the CPU engine (test_cuda_model)"
run_test test_cuda_model "$logs/gpu_test_cuda_model.log" build-cuda/tests/test_cuda_model
step "methods' device-resident K/V against the CPU (test_cuda_kv)"
run_test test_cuda_kv "$logs/gpu_test_cuda_kv.log" build-cuda/tests/test_cuda_kv
if [ -x build-cuda/tests/test_cuda_sekv ]; then
    step "SeKV's device tiers against the CPU (test_cuda_sekv)"
    run_test test_cuda_sekv "$logs/gpu_test_cuda_sekv.log" build-cuda/tests/test_cuda_sekv
fi

memcheck="not run (compute-sanitizer not found)"
if command -v compute-sanitizer >/dev/null; then
    step "compute-sanitizer memcheck over test_cuda (at most 120 s)"
    timeout 120 compute-sanitizer --tool memcheck --error-exitcode 99 build-cuda/tests/test_cuda \
        >"$logs/gpu_memcheck.log" 2>&1
    rc=$?
    tail -n 5 "$logs/gpu_memcheck.log"
    case $rc in
        0) memcheck="clean" ;;
        124) memcheck="did not finish in 120 s (not counted as a failure)" ;;
        *) fail "compute-sanitizer memcheck found errors or test_cuda failed under it (rc $rc; log: $logs/gpu_memcheck.log)" ;;
    esac
fi

step "benchmarks"
build-cuda/tests/bench_decode --backend cuda --reps 5 >"$logs/gpu_bench_cuda.log" 2>&1 ||
    { cat "$logs/gpu_bench_cuda.log"; fail "bench_decode --backend cuda failed"; }
build-cuda/tests/bench_decode --backend cpu --reps 3 >"$logs/gpu_bench_cpu.log" 2>&1 ||
    { cat "$logs/gpu_bench_cpu.log"; fail "bench_decode --backend cpu failed"; }
no_fallback "bench_decode --backend cuda" "$logs/gpu_bench_cuda.log"
cat "$logs/gpu_bench_cuda.log" "$logs/gpu_bench_cpu.log"

# 5. every method on random:llama3-8b, each length while the time box has room
budget_s=${KB_CHECK_BUDGET_S:-450}
model_db="$logs/gpu_model.db"
model_runs=""
haystack=${KVBENCH_HAYSTACK:-$HOME/.cache/kvbench/haystack/PaulGrahamEssays}
[ -e "$haystack" ] || [ ! -d .haystack ] || haystack=.haystack   # a copy carried with the tree
if [ ! -e "$haystack" ]; then
    model_runs="not run: no NIAH haystack at $haystack (make haystack here, or set KVBENCH_HAYSTACK)"
else
    for ctx in ${KB_CHECK_CTX:-8192 32768 131072}; do
        left=$((budget_s - (SECONDS - t_start)))
        if [ "$left" -lt 60 ]; then model_runs+=" ${ctx}:skipped(time box)"; continue; fi
        step "every method on random:llama3-8b, NIAH ${ctx} tokens, --backend cuda (at most ${left} s)"
        timeout "$left" ./kvbench run --model random:llama3-8b --backend cuda --workload niah --haystack "$haystack" \
            --ctx "$ctx" --depths 50 --methods all --budget 0.1 --max-new 8 --db "$model_db" \
            >"$logs/gpu_model_$ctx.log" 2>&1
        rc=$?
        tail -n 12 "$logs/gpu_model_$ctx.log"
        grep -q "running on the CPU" "$logs/gpu_model_$ctx.log" && fail "kvbench run fell back to the CPU (log: $logs/gpu_model_$ctx.log)"
        no_fallback "kvbench run ctx $ctx" "$logs/gpu_model_$ctx.log"
        case $rc in
            0) model_runs+=" ${ctx}:done" ;;
            124) model_runs+=" ${ctx}:cut-by-time-box" ;;
            137) model_runs+=" ${ctx}:killed(host memory? the prefill's K/V and the methods' host stores)" ;;
            *) fail "kvbench run --model random:llama3-8b --ctx $ctx failed (rc $rc; log: $logs/gpu_model_$ctx.log)" ;;
        esac
    done
fi

summary() {
    echo "== summary ($((SECONDS - t_start)) s; logs in $logs)"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/device: /'
    printf 'tests: %s; %s; %s; %s; %s; memcheck: %s\n' "$(grep '^test_kernels:' "$logs/gpu_test_kernels.log")" \
        "$(grep '^test_cuda:' "$logs/gpu_test_cuda.log")" "$(grep '^test_cuda_model:' "$logs/gpu_test_cuda_model.log")" \
        "$(grep '^test_cuda_kv:' "$logs/gpu_test_cuda_kv.log")" \
        "$(grep -s '^test_cuda_sekv:' "$logs/gpu_test_cuda_sekv.log" || echo "test_cuda_sekv: not built")" "$memcheck"
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
         }' "$logs/gpu_test_kernels.log"
    echo
    echo "decode, g 4, d 128, 2 kv heads: device-resident GB/s of K+V read, and as a fraction of a"
    echo "device-to-device cudaMemcpy (bytes read + written) in the same run; host calls include the copies"
    awk 'function f(k,  i) { for (i = 1; i < NF; i++) if ($i == k) return $(i + 1); return "-" }
         function before(k,  i) { for (i = 2; i <= NF; i++) if ($i == k) return $(i - 1); return "-" }
         BEGIN { printf "  %-8s %12s %14s %10s %16s %12s\n", "ctx", "dev GB/s", "d2d copy GB/s", "fraction", "cuda host GB/s", "cpu GB/s" }
         /^decode-dev/ { ctx = f("ctx"); dev[ctx] = before("GB/s"); cp[ctx] = f("d2d-copy"); fr[ctx] = f("fraction"); if (!(ctx in seen)) { seen[ctx] = 1; list[++n] = ctx } }
         /^decode / && $2 == "cuda" { host[f("ctx")] = before("GB/s") }
         /^decode / && $2 == "cpu" { cpu[f("ctx")] = before("GB/s") }
         END { for (i = 1; i <= n; i++) { c = list[i]; printf "  %-8s %12s %14s %10s %16s %12s\n", c, dev[c], cp[c], fr[c], (c in host ? host[c] : "-"), (c in cpu ? cpu[c] : "-") } }' \
        "$logs/gpu_bench_cuda.log" "$logs/gpu_bench_cpu.log"
    echo
    echo "causal prefill GFLOP/s (4 d flops per head, query and visible key)"
    awk 'function f(k,  i) { for (i = 1; i < NF; i++) if ($i == k) return $(i + 1); return "-" }
         function before(k,  i) { for (i = 2; i <= NF; i++) if ($i == k) return $(i - 1); return "-" }
         BEGIN { printf "  %-28s %10s %14s %10s %10s\n", "shape", "cuda dev", "dev +col_mass", "cuda host", "cpu" }
         /^prefill/ { key = sprintf("m %s H %s Hkv %s d %s", f("m"), f("H"), f("Hkv"), f("d")); if (!(key in seen)) { seen[key] = 1; list[++n] = key } }
         /^prefill-dev/ && /col_mass/ { dm[key] = before("GFLOP/s"); next }
         /^prefill-dev/ { dv[key] = before("GFLOP/s"); next }
         /^prefill / && $2 == "cuda" { host[key] = before("GFLOP/s") }
         /^prefill / && $2 == "cpu" { cpu[key] = before("GFLOP/s") }
         END { for (i = 1; i <= n; i++) { k = list[i]; printf "  %-28s %10s %14s %10s %10s\n", k, (k in dv ? dv[k] : "-"), (k in dm ? dm[k] : "-"), (k in host ? host[k] : "-"), (k in cpu ? cpu[k] : "-") } }' \
        "$logs/gpu_bench_cuda.log" "$logs/gpu_bench_cpu.log"
    echo
    grep -h '^gpu-memory' "$logs/gpu_bench_cuda.log"
    grep -h 'high-water' "$logs/gpu_test_cuda.log"
    grep -h '^maxerr\|device prefill' "$logs/gpu_test_cuda_model.log" 2>/dev/null | head -n 12
    echo
    echo "random:llama3-8b (seeded random weights: latency and memory, not accuracy), NIAH depth 50%,"
    echo "budget 0.1, 8 new tokens, --backend cuda;${model_runs:- not run}"
    echo "device peak = allocator high-water mark over the method's compression + decode (weights"
    echo "included); prefill = the shared prefill by CUDA events; case peak = over the prefill"
    if [ -f "$model_db" ]; then
        python3 - "$model_db" <<'PY' || echo "  (python3 with sqlite3 not available; the table is in $model_db)"
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
PY
    fi
}
echo
summary | tee "$logs/gpu_summary.txt"
echo "gpu check: PASS"

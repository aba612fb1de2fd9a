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
#   5. one summary table: max error per op and backend, decode bandwidth as a fraction of
#      the copy, prefill GFLOP/s, peak device memory.
# Logs go to $OUT (when set, else a temporary directory) as gpu_*.log; the summary is
# also written to gpu_summary.txt. Exits non-zero on any failure, naming it.
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
        build-cuda/tests/bench_decode
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
    if grep -m 5 -E 'failed on the device|did not converge|did not return|kb cuda: cuda[A-Z]|^kernels/cuda_.*\.cu:[0-9]+:' "$2"; then
        fail "$1: CUDA calls failed and were computed on the CPU instead (see above; log: $2)"
    fi
}
step "kernel tests, CPU and CUDA backends (test_kernels)"
run_test test_kernels "$logs/gpu_test_kernels.log" build-cuda/tests/test_kernels
step "CUDA-only tests (test_cuda)"
run_test test_cuda "$logs/gpu_test_cuda.log" build-cuda/tests/test_cuda

memcheck="not run (compute-sanitizer not found)"
if command -v compute-sanitizer >/dev/null; then
    step "compute-sanitizer memcheck over test_cuda (at most 150 s)"
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 99 build-cuda/tests/test_cuda \
        >"$logs/gpu_memcheck.log" 2>&1
    rc=$?
    tail -n 5 "$logs/gpu_memcheck.log"
    case $rc in
        0) memcheck="clean" ;;
        124) memcheck="did not finish in 150 s (not counted as a failure)" ;;
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

summary() {
    echo "== summary ($((SECONDS - t_start)) s; logs in $logs)"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/device: /'
    printf 'tests: %s; %s; memcheck: %s\n' "$(grep '^test_kernels:' "$logs/gpu_test_kernels.log")" \
        "$(grep '^test_cuda:' "$logs/gpu_test_cuda.log")" "$memcheck"
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
}
echo
summary | tee "$logs/gpu_summary.txt"
echo "gpu check: PASS"

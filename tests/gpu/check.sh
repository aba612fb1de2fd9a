#!/usr/bin/env bash
# The prepared one-call GPU check, for the machine with the accelerator:
#   1. make CUDA=1 (kvbench, the kernel tests, the decode benchmark);
#   2. build-cuda/tests/test_kernels: every test loop on the CPU and the CUDA backend
#      (fails if the CUDA backend is not usable there);
#   3. the decode/prefill benchmark on the CUDA backend and on the CPU;
#   4. one summary table. Logs go to $OUT (when set) as gpu_*.log.
# Exits non-zero on any failure. If the image lacks the C libraries (sqlite3, libcsv,
# LAPACKE, OpenBLAS), unpack their .debs under a prefix and set KB_DEPS=/that/prefix.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
export PATH="$PATH:/usr/local/cuda/bin"
logs=${OUT:-$(mktemp -d)}
fail() { echo "gpu check: FAIL: $*" >&2; exit 1; }

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

echo "== build (make CUDA=1)"
build() {
    # -B: rebuild every object with the CUDA flags, whatever an earlier build left behind
    make CUDA=1 -B -j"$(nproc)" kvbench build-cuda/tests/test_kernels build-cuda/tests/bench_decode
}
build >"$logs/gpu_build.log" 2>&1 ||
    { tail -n 40 "$logs/gpu_build.log"; fail "make CUDA=1 failed (log: $logs/gpu_build.log)"; }

echo "== kernel tests (CPU and CUDA backends)"
build-cuda/tests/test_kernels >"$logs/gpu_test.log" 2>&1
test_rc=$?
grep -v '^kb svd: bad shape' "$logs/gpu_test.log" | tail -n 30
grep -q '^backend cuda' "$logs/gpu_test.log" ||
    fail "the CUDA backend was not tested: $(grep 'cuda backend not tested' "$logs/gpu_test.log")"
[ "$test_rc" -eq 0 ] || fail "test_kernels failed (rc $test_rc)"

echo "== benchmarks"
build-cuda/tests/bench_decode --backend cuda --reps 5 >"$logs/gpu_bench_cuda.log" 2>&1 ||
    { cat "$logs/gpu_bench_cuda.log"; fail "bench_decode --backend cuda failed"; }
build-cuda/tests/bench_decode --backend cpu --reps 3 >"$logs/gpu_bench_cpu.log" 2>&1 ||
    { cat "$logs/gpu_bench_cpu.log"; fail "bench_decode --backend cpu failed"; }

echo
echo "== summary"
printf '%-8s %s\n' tests "$(grep '^test_kernels:' "$logs/gpu_test.log")"
grep -h -E '^(backend|decode|prefill)' "$logs/gpu_bench_cuda.log" "$logs/gpu_bench_cpu.log"
echo "(CUDA decode times include the host-to-device copies of K and V on every call)"
echo "gpu check: PASS"

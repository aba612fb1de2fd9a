#!/usr/bin/env bash
# The CUDA backend's own source (kernels/*.cu, model/*.cu) compiled as C++ against the CPU
# emulation in tests/gpu/emu/, linked with the CPU build's library, and run through the
# CUDA-side tests: build-emu/test_kernels (every kernel test loop, CPU and "cuda"
# backends), build-emu/test_cuda (memory API, device-resident entry points, CPU/CUDA
# agreement), build-emu/test_cuda_model (the device forward pass against the CPU engine
# and a float64 reference, the cuBLAS GEMM layout and bf16 rounding) and
# build-emu/test_cuda_kv (the methods' K/V on the device against the CPU backend) and
# build-emu/test_cuda_sekv (SeKV's tiers: rows on the device, spans rebuilt there from
# pinned factors, against the CPU backend) and build-emu/test_cuda_prefill_tc (the
# tensor-core prefill: bf16 cuBLAS GEMMs, online softmax over key tiles, against float64
# and the CPU twin at small sizes with small tiles).
# For machines without a GPU: it checks the kernels' logic (indexing, masking, barriers,
# shuffles, copies, the cuSOLVER and cuBLAS layouts), not the GPU compiler or speed.
#   usage: tests/gpu/emu.sh [--build-only]     (EMU_SAN=1: with ASan/UBSan, into build-emu-san/)
# Slow by design (every GPU thread is a fiber): about 5 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=build-emu
lib=build/libkvbench.a
san=""
if [ "${EMU_SAN:-0}" = 1 ]; then   # AddressSanitizer over the kernels' device-memory accesses
    out=build-emu-san
    lib=build-san/libkvbench.a
    san="-fsanitize=address,undefined -fno-omit-frame-pointer"
fi
build_only=0
if [ "${1:-}" = "--build-only" ]; then build_only=1; shift; fi
[ "${1:-}" = "--help" ] && { sed -n '2,10p' "$0"; exit 0; }
[ "$(uname -m)" = x86_64 ] || { echo "emu.sh: the fiber switch is x86-64 only" >&2; exit 1; }
mkdir -p "$out"
if [ -n "$san" ]; then make -s -j1 SAN=1 "$lib"; else make -s -j1 "$lib"; fi
cflags="$(make -s print-cflags | sed 's/ -DKB_BUILD_FLAGS=.*$//') $san"   # (that one is quoted)
ldlibs="-lsqlite3 -lcsv -llapacke -lopenblas -lm -pthread -lstdc++"
cxx="g++ -std=c++17 -O2 -g -Wall -Wextra -Werror -Wno-unknown-pragmas -I tests/gpu/emu -I/usr/include/x86_64-linux-gnu -DKB_CUDA=1 $san"
objs=()
for f in kernels/*.cu model/*.cu tests/gpu/emu/emu_runtime.cpp tests/gpu/emu/emu_cublas.cpp; do
    o="$out/$(basename "${f%.*}").o"
    if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ -n "$(find kernels model tests/gpu/emu -name '*.h' -newer "$o")" ]; then
        $cxx -x c++ -c "$f" -o "$o"
    fi
    objs+=("$o")
done
# The library files that differ with KB_CUDA (the backend table, the engine's dispatch to
# the device, the K/V stores' device copies, the run driver's device measurements) are
# compiled again here and linked ahead of the archive
for f in $(grep -l KB_CUDA kernels/*.c model/*.c methods/*.c methods/sekv/*.c harness/*/*.c results/*.c workloads/*.c plots/*.c); do
    # shellcheck disable=SC2086
    gcc $cflags -DKB_CUDA=1 '-DKB_BUILD_FLAGS="CUDA=1 (emulated)"' -c "$f" -o "$out/$(basename "${f%.*}").o"
    objs+=("$out/$(basename "${f%.*}").o")
done
for t in test_kernels test_cuda test_cuda_model test_cuda_kv test_cuda_sekv test_cuda_prefill_tc; do
    # KB_CUDA_EMU: the tests that need the emulation's fault injection (kbemu_fail_d2h)
    # shellcheck disable=SC2086
    gcc $cflags -DKB_CUDA=1 -DKB_CUDA_EMU=1 -o "$out/$t" "tests/$t.c" "${objs[@]}" "$lib" $ldlibs
done
# kvbench itself, for the end-to-end run below
# shellcheck disable=SC2086
gcc $cflags -DKB_CUDA=1 '-DKB_BUILD_FLAGS="CUDA=1 (emulated)"' -o "$out/kvbench" harness/cli/main.c "${objs[@]}" "$lib" $ldlibs
[ "$build_only" -eq 1 ] && exit 0
rc=0
for t in test_kernels test_cuda test_cuda_model test_cuda_kv test_cuda_sekv test_cuda_prefill_tc; do
    echo "== $out/$t (CUDA backend emulated on the CPU)"
    "$out/$t" || rc=1
done
# End to end: a text workload through `kvbench run --backend cuda` on a tiny random model,
# as tests/gpu/check.sh runs it (--fidelity 0: the prefill streams): every method runs,
# the run is recorded as cuda with bf16 K/V rows (the device default), the device's peaks
# are recorded per case and per method, the driver's peak is logged for each ("[device]"
# lines), and the log holds no device call given up for the CPU (check.sh's detector).
# The numbers are the emulation's: only their presence is checked.
echo "== $out/kvbench run --backend cuda (tiny random model, every method, emulated)"
e2e="$out/e2e.db"
rm -f "$e2e" "$e2e-wal" "$e2e-shm"
if "$out/kvbench" run --model random:tiny-llama --backend cuda --workload niah --ctx 450 --depths 50 \
    --methods all --budget 0.1 --max-new 4 --fidelity 0 --db "$e2e" 2>"$out/e2e.log"; then
    python3 - "$e2e" "$("$out/kvbench" methods | grep -c '^[a-z]')" <<'PY' || rc=1
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
bad = []
if db.execute("SELECT group_concat(DISTINCT backend) FROM runs").fetchone()[0] != "cuda": bad.append("run not recorded as cuda")
if ";kv_type=bf16;" not in db.execute("SELECT run_key FROM runs").fetchone()[0]: bad.append("K/V rows not bf16 by default")
# every registered method: ok (with its device peak) or infeasible at this tiny budget, never an error
n, peaks = db.execute("SELECT count(*), count(gpu_peak_bytes) FROM results WHERE status = 'ok'").fetchone()
total, other = db.execute("SELECT count(*), sum(status NOT IN ('ok', 'infeasible')) FROM results").fetchone()
if total != int(sys.argv[2]) or other or n < total - 2 or peaks != n:
    bad.append("%d results of %s methods, %d ok, %d with a device peak, %d neither ok nor infeasible" % (total, sys.argv[2], n, peaks, other or 0))
c = db.execute("SELECT gpu_peak_bytes, gpu_used_bytes, gpu_prefill_ms, gpu_driver_peak_bytes FROM cases").fetchall()
if len(c) != 1 or any(v is None or v <= 0 for v in c[0]): bad.append("case device measurements: %r" % (c,))
# the driver's view is stored beside the allocator's: per case (above) and per finished result
drv = db.execute("SELECT count(gpu_driver_peak_bytes) FROM results WHERE status = 'ok'").fetchone()[0]
if drv != n: bad.append("%d of %d finished results with the driver's device peak" % (drv, n))
print("e2e: " + ("; ".join(bad) if bad else "%d of %d methods ok, run recorded as cuda, device peaks per case and method" % (n, total)))
sys.exit(1 if bad else 0)
PY
    "$out/kvbench" report --db "$e2e" --table memory >"$out/e2e.mem"
    for t in "device peak, measured" "device peak, driver view" "device prefill peak, driver view"; do
        grep -q "^### $t" "$out/e2e.mem" || { echo "e2e: report --table memory lacks '$t'"; rc=1; }
    done
    nd=$(grep -cE '^\[device\] ctx 450 [a-z0-9-]+ @ 0.1: allocator peak [0-9]+ B, driver peak [1-9][0-9]* B' "$out/e2e.log")
    grep -qE '^\[device\] ctx 450 prefill: allocator peak [1-9][0-9]* B, driver peak [1-9][0-9]* B' "$out/e2e.log" &&
        [ "$nd" -ge 8 ] || { echo "e2e: the driver's peaks are not logged (prefill, and $nd of 8 methods)"; rc=1; }
    eval "$(sed -n '/^fallback_lines() {/,/^}/p' tests/gpu/check.sh)"
    fb=$(fallback_lines "$out/e2e.log")
    [ -z "$fb" ] || { echo "e2e: a device call fell back to the CPU: $fb"; rc=1; }
else
    echo "e2e: kvbench run --backend cuda failed"; rc=1
fi
exit $rc

#!/usr/bin/env bash
# The CUDA backend's own source (kernels/*.cu) compiled as C++ against the CPU emulation
# in tests/gpu/emu/, linked with the CPU build's library, and run through the CUDA-side
# tests: build-emu/test_kernels (every kernel test loop, CPU and "cuda" backends) and
# build-emu/test_cuda (memory API, device-resident entry points, CPU/CUDA agreement).
# For machines without a GPU: it checks the kernels' logic (indexing, masking, barriers,
# shuffles, copies, the cuSOLVER layout), not the GPU compiler or speed.
#   usage: tests/gpu/emu.sh [--build-only]     (EMU_SAN=1: with ASan/UBSan, into build-emu-san/)
# Slow by design (every GPU thread is a fiber): about 4 minutes on 2 cores.
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
for f in kernels/*.cu tests/gpu/emu/emu_runtime.cpp; do
    o="$out/$(basename "${f%.*}").o"
    if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ -n "$(find kernels tests/gpu/emu -name '*.h' -newer "$o")" ]; then
        $cxx -x c++ -c "$f" -o "$o"
    fi
    objs+=("$o")
done
# backend.c is the one library file that differs with KB_CUDA: linked ahead of the archive
# shellcheck disable=SC2086
gcc $cflags -DKB_CUDA=1 -c kernels/backend.c -o "$out/backend.o"
objs+=("$out/backend.o")
for t in test_kernels test_cuda; do
    # shellcheck disable=SC2086
    gcc $cflags -DKB_CUDA=1 -o "$out/$t" "tests/$t.c" "${objs[@]}" "$lib" $ldlibs
done
[ "$build_only" -eq 1 ] && exit 0
rc=0
for t in test_kernels test_cuda; do
    echo "== $out/$t (CUDA backend emulated on the CPU)"
    "$out/$t" || rc=1
done
exit $rc

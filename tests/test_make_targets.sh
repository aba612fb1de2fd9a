#!/usr/bin/env bash
# The Makefile's outputs (issue 14, item 9): `make SAN=1` links its sanitizer binary as
# build-san/kvbench and never writes ./kvbench (a later plain `make` kept the sanitizer
# build as the release binary); the release build links ./kvbench; SAN=1 includes UBSan's
# float-cast-overflow; `make fuzz` knows every target of tests/fuzz. Dry runs (make -n).
set -u
cd "$(dirname "$0")/.."
unset MAKEFLAGS MFLAGS MAKELEVEL SAN FUZZ CUDA   # not the settings of a make that runs this test
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
san=$(make -n -B SAN=1 all 2>&1)
grep -Eq -- "-o build-san/kvbench( |$)" <<<"$san" || fail "make SAN=1 does not link build-san/kvbench"
grep -Eq -- "-o kvbench( |$)" <<<"$san" && fail "make SAN=1 writes ./kvbench"
grep -q -- "float-cast-overflow" <<<"$san" || fail "make SAN=1 lacks -fsanitize=float-cast-overflow"
rel=$(make -n -B all 2>&1)
grep -Eq -- "-o kvbench( |$)" <<<"$rel" || fail "make does not link ./kvbench"
grep -q -- "-fsanitize" <<<"$rel" && fail "the release build is sanitized"
grep -q -- "-MMD -MP -MF build/kernels/host.o.d" <<<"$rel" || fail "objects do not record their headers (-MMD -MP)"
cuda=$(make -n -B CUDA=1 NVCC=nvcc all 2>&1)
grep -Eq -- "^nvcc .*-MMD -MP -MF build-cuda/kernels/[a-z_]+\.cu\.o\.d .*-c " <<<"$cuda" \
    || fail "make CUDA=1 does not record the headers of .cu files"
check=$(make -n SAN=1 check 2>&1)
grep -q "KVBENCH=[^ ]*/build-san/kvbench " <<<"$check" || fail "make SAN=1 check does not test build-san/kvbench"
fuzz=$(make -n -B FUZZ=1 build-fuzz/fuzz/fuzz_json 2>&1)
grep -q -- "-fsanitize=fuzzer" <<<"$fuzz" && grep -q "^clang" <<<"$fuzz" || fail "FUZZ=1 does not build libFuzzer targets with clang"
for f in tests/fuzz/fuzz_*.c; do
    n=${f##*/fuzz_}; n=${n%.c}
    [ -d "tests/fuzz/corpus/$n" ] || fail "fuzz target $n has no seed corpus"
done
[ $fails -eq 0 ] && echo "ok: SAN=1 -> build-san/kvbench (float-cast-overflow), release -> ./kvbench, fuzz targets seeded"
exit $((fails > 0))

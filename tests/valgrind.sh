#!/usr/bin/env bash
# Runs the fast C tests under valgrind memcheck (the model tests are left to ASan:
# under valgrind they take many minutes). Fails on any error or definite leak.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
fail=0
for t in test_kernels test_methods_a test_methods_b test_db test_db_migrate test_gguf test_tokenizer test_synthetic test_metrics test_sha256 \
    test_cuda_kv test_cuda_sekv test_shard test_method_door test_knormpress; do
    bin=$BUILD/tests/$t
    [ -x "$bin" ] || continue
    if KVBENCH_FUZZ_ROUNDS=200 KVBENCH_THREADS=2 valgrind -q --error-exitcode=99 --leak-check=full \
        --errors-for-leak-kinds=definite "$bin" >/tmp/kvbench-vg-$t.log 2>&1; then
        echo "PASS valgrind $t"
    else
        echo "FAIL valgrind $t"; tail -n 30 /tmp/kvbench-vg-$t.log | sed 's/^/    /'; fail=$((fail + 1))
    fi
done
[ "$fail" -eq 0 ]

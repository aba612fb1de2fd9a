#!/usr/bin/env bash
# make test-seeds N=200 [TESTS="test_a test_b.sh"] [MAX_S=S]: every seeded test (the C
# tests that call test_seed(), the shell tests that read KVBENCH_TEST_SEED) run over N
# fresh random seeds; prints each failing seed (replay: KVBENCH_TEST_SEED=S) and exits 1
# if any failed. MAX_S: leave out a test whose first run takes longer than S seconds
# (named in the summary, with its time), so the fast tests can take many seeds while the
# slow ones take fewer in a separate call.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
N=${N:-200}
export KVBENCH=${KVBENCH:-$PWD/kvbench} BUILD
tests=()
if [ -n "${TESTS:-}" ]; then
    read -ra tests <<<"$TESTS"
else
    for f in tests/test_*.c; do
        case $f in *cuda*) continue ;; esac   # the GPU tests skip without a device
        grep -q "test_seed()" "$f" && tests+=("$(basename "$f" .c)")
    done
    for f in tests/test_*.sh; do grep -q KVBENCH_TEST_SEED "$f" && tests+=("$(basename "$f")"); done
fi
seed() { echo $(( (RANDOM << 30 | RANDOM << 15 | RANDOM) + 1 )); }
bad=0 total=0 t_start=$SECONDS summary=()
for t in "${tests[@]}"; do
    if [[ $t == *.sh ]]; then cmd=(bash "tests/$t"); else cmd=("$BUILD/tests/$t"); fi
    [[ $t == *.sh ]] || [ -x "${cmd[0]}" ] || { echo "test-seeds: ${cmd[0]} is not built"; exit 2; }
    fails=() runs=0 t0=$SECONDS
    for ((i = 0; i < N; i++)); do
        s=$(seed)
        t1=$SECONDS
        KVBENCH_TEST_SEED=$s "${cmd[@]}" >"/tmp/test_seeds_$$.log" 2>&1 || {
            fails+=("$s")
            echo "FAIL $t seed $s"
            grep -m3 -i "fail" "/tmp/test_seeds_$$.log" | sed 's/^/    /'
        }
        runs=$((runs + 1))
        if [ "$i" = 0 ] && [ -n "${MAX_S:-}" ] && [ $((SECONDS - t1)) -gt "$MAX_S" ]; then
            summary+=("$t: left out, one run took $((SECONDS - t1)) s (MAX_S=$MAX_S)")
            break
        fi
    done
    rm -f "/tmp/test_seeds_$$.log"
    total=$((total + runs))
    bad=$((bad + ${#fails[@]}))
    summary+=("$t: $runs seeds, ${#fails[@]} failed${fails[*]:+: ${fails[*]}} ($((SECONDS - t0)) s)")
done
printf '%s\n' "${summary[@]}"
echo "test-seeds: ${#tests[@]} tests, $total runs, $bad failed, $((SECONDS - t_start)) s"
[ "$bad" = 0 ]

#!/usr/bin/env bash
# make test-seeds N=200 [TESTS="test_a test_b.sh"] [J=2] [MAX_S=S] [STOP_S=S] [SEED_ONLY=1]:
# every seeded test (the C tests that call test_seed(), the shell tests that read
# ${KVBENCH_TEST_SEED}) run over N fresh random seeds, J runs at a time; prints each failing
# seed (replay: KVBENCH_TEST_SEED=S) and a line per test as it ends; exits 1 if any failed.
#  SEED_ONLY=1 (default) sets KVBENCH_TEST_SEED_ONLY=1: a test then leaves out the parts
#    that do not read the seed (a fixed prompt on the shipped model, error paths on fixed
#    files: the same work every seed). `make check` runs them; so does SEED_ONLY=0.
#  MAX_S: leave out a test whose first run takes longer than S seconds (named in the summary).
#  STOP_S: start no new run after S seconds; TEST_S: no new run of a test after S seconds
#    on it (a share of a time budget for each test, so that a slow one does not take the
#    others' time). The summary says how many seeds each test reached; the exit status is
#    3 when none failed but some test is short of N.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
N=${N:-200}
J=${J:-2}
export KVBENCH=${KVBENCH:-$PWD/kvbench} BUILD
[ "${SEED_ONLY:-1}" = 1 ] && export KVBENCH_TEST_SEED_ONLY=1
tests=()
if [ -n "${TESTS:-}" ]; then
    read -ra tests <<<"$TESTS"
else
    for f in tests/test_*.c; do
        case $f in *cuda*) continue ;; esac   # the GPU tests skip without a device
        grep -q "test_seed()" "$f" && tests+=("$(basename "$f" .c)")
    done
    # reads the variable (tests/test_gpu_check.sh only greps a summary for its name)
    for f in tests/test_*.sh; do grep -q '${KVBENCH_TEST_SEED' "$f" && tests+=("$(basename "$f")"); done
fi
seed() { echo $(( (RANDOM << 30 | RANDOM << 15 | RANDOM) + 1 )); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0 total=0 short=0 t_start=$SECONDS summary=()
one() {   # one I SEED CMD...: run, and on failure record the seed and the failing lines
    local i=$1 s=$2
    shift 2
    KVBENCH_TEST_SEED=$s "$@" >"$tmp/$i.log" 2>&1 && return
    echo "$s" >"$tmp/$i.fail"
    { echo "FAIL $t seed $s"; grep -m3 -i "fail" "$tmp/$i.log" | sed 's/^/    /'; } >"$tmp/$i.part"
    mv "$tmp/$i.part" "$tmp/$i.msg"   # whole, for the loop that prints them
}
for t in "${tests[@]}"; do
    if [[ $t == *.sh ]]; then cmd=(bash "tests/$t"); else cmd=("$BUILD/tests/$t"); fi
    [[ $t == *.sh ]] || [ -x "${cmd[0]}" ] || { echo "test-seeds: ${cmd[0]} is not built"; exit 2; }
    rm -f "$tmp"/*
    t0=$SECONDS runs=0 note=""
    for ((i = 0; i < N; i++)); do
        if [ -n "${STOP_S:-}" ] && [ $((SECONDS - t_start)) -ge "$STOP_S" ]; then
            note=" (stopped at STOP_S=$STOP_S)"
            break
        fi
        if [ -n "${TEST_S:-}" ] && [ $((SECONDS - t0)) -ge "$TEST_S" ]; then
            note=" (stopped at TEST_S=$TEST_S)"
            break
        fi
        while [ "$(jobs -rp | wc -l)" -ge "$J" ]; do wait -n; done
        one "$i" "$(seed)" "${cmd[@]}" &
        runs=$((runs + 1))
        if [ "$i" = 0 ] && [ -n "${MAX_S:-}" ]; then
            wait
            [ $((SECONDS - t0)) -gt "$MAX_S" ] && { note=" (left out: one run took $((SECONDS - t0)) s, MAX_S=$MAX_S)"; break; }
        fi
        for m in "$tmp"/*.msg; do [ -f "$m" ] && cat "$m" && rm -f "$m"; done
    done
    wait
    for m in "$tmp"/*.msg; do [ -f "$m" ] && cat "$m"; done
    fails=$(cat "$tmp"/*.fail 2>/dev/null | tr '\n' ' ')
    nf=$(echo "$fails" | wc -w)
    total=$((total + runs))
    bad=$((bad + nf))
    [ "$runs" -lt "$N" ] && short=$((short + 1))
    line="$t: $runs seeds, $nf failed${fails:+: ${fails% }} ($((SECONDS - t0)) s)$note"
    echo "$line"
    summary+=("$line")
done
echo "----"
printf '%s\n' "${summary[@]}"
echo "test-seeds: ${#tests[@]} tests, $total runs, $bad failed, $short short of N=$N, $((SECONDS - t_start)) s"
[ "$bad" = 0 ] || exit 1
[ "$short" = 0 ] || exit 3

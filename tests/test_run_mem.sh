#!/usr/bin/env bash
# The synthetic run's memory check is an upper bound, and honours the limit the process
# runs under (issue 27 item 13: --ctx 4000000 passed the check and then took 11.8 GB):
#  - under ulimit -v, a context too large is refused before the first case: exit 2, one
#    stderr line naming the limit, the results file unchanged;
#  - under the same limit, every run of all methods, on a narrow and a wide shape, at
#    contexts on both sides of the limit, is either refused up front (exit 2) or
#    finishes (exit 0): none runs out of memory half-way, which a check that
#    underestimates lets through.
source "$(dirname "$0")/lib.sh"

LIMIT_KB=1200000   # 1.14 GiB of address space
SMALL=(--layers 2 --heads 2 --kv-heads 1 --head-dim 16 --steps 2 --depths 0.5 --quiet --threads 2)
"$KVBENCH" run --workload synthetic-niah --methods fullkv --ctx 64 "${SMALL[@]}" --db "$T/r.db" >/dev/null 2>&1 ||
    fail "could not make the results file"
was=$(dump "$T/r.db")
# what this test checks is the release build's (lib.sh: san_build)
if san_build; then
    echo "SKIP: sanitizer build (its shadow memory cannot start under ulimit -v)"; exit 0
fi

rc=0
(ulimit -v $LIMIT_KB; exec timeout 120 "$KVBENCH" run --workload synthetic-niah --ctx 4000000 "${SMALL[@]}" --db "$T/r.db") \
    >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" = 2 ] || fail "--ctx 4000000 under ulimit -v: exit $rc, expected 2: $(head -c 300 "$T/err")"
[ "$(wc -l <"$T/err")" = 1 ] || fail "--ctx 4000000: $(wc -l <"$T/err") stderr lines: $(head -c 400 "$T/err")"
grep -Eq -- "--ctx 4000000: a synthetic case needs about [0-9.]+ GiB .*more than the [0-9.]+ GiB of address space left under ulimit -v" \
    "$T/err" || fail "--ctx 4000000: $(cat "$T/err")"
grep -q '\[case' "$T/out" && fail "--ctx 4000000: a case started"
[ "$(dump "$T/r.db")" = "$was" ] || fail "--ctx 4000000 changed the results file"

# upper bound: refused up front or finished, never out of memory mid-run
n_ok=0 n_refused=0
for shape in "8 8 8 128:2048 4096" "2 2 1 16:4000 600000"; do
    read -r L H KV D <<<"${shape%%:*}"
    for ctx in ${shape#*:}; do
        rc=0
        (ulimit -v $LIMIT_KB; exec timeout 120 "$KVBENCH" run --workload synthetic-niah --methods all --ctx "$ctx" --layers "$L" \
            --heads "$H" --kv-heads "$KV" --head-dim "$D" --steps 2 --depths 0.5 --quiet --threads 2 \
            --db "$T/m-$L-$ctx.db") >/dev/null 2>"$T/err" || rc=$?
        case $rc in
            0) n_ok=$((n_ok + 1)) ;;
            2) grep -q "more than the .* left under ulimit -v" "$T/err" && n_refused=$((n_refused + 1)) ||
                   fail "L$L d$D ctx $ctx: exit 2 for another reason: $(cat "$T/err")" ;;
            *) fail "L$L H$H d$D ctx $ctx under ulimit -v ${LIMIT_KB}K: exit $rc after the check passed: $(tail -c 300 "$T/err")" ;;
        esac
    done
done
[ $n_ok -ge 2 ] && [ $n_refused -ge 1 ] || fail "the contexts do not straddle the limit: $n_ok finished, $n_refused refused"
[ $fails = 0 ] && echo "test_run_mem.sh: all checks passed ($n_ok runs finished, $n_refused refused up front)"
exit $((fails > 0))

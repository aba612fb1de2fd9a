#!/usr/bin/env bash
# The method door against plugins that get it wrong (issues 35 and 36): one bug planted
# per build of tests/fixtures/bad_plugin.c, each caught by a named check, and nothing
# that kvbench reads from a plugin crashes kvbench or is stored as a result:
#  - over budget (B+1 rows while decoding; every row kept): conformance fails, `run`
#    records status `error` with the reason, not a score;
#  - memory() reporting 0 B for resident rows: `run` records `error`;
#  - a wrong GQA query slice: conformance's attention check names the head;
#  - a crash in attend: conformance names the method, the rule, the scenario and the seed
#    (stdout a pipe: the seed line is there), and goes on; a hang is stopped and named;
#  - positions past the prompt, negative or twice (cs_load), twice in rows(), more
#    positions than the buffer: refused with a line, no crash (the sanitizer build too);
#  - cs_init(scored=0) under --decode hold: evicts the oldest row (was a NULL read);
#  - init that refuses without --params is not blamed on --params;
#  - --plugin of a directory, /dev/zero, an ABI-1 table claiming 4096 bytes, a table built
#    against helper structs of another version (KV_HELPERS_VERSION): exit 2, one line
#    naming the file; ABI-2 and ABI-3 tables still load.
# Plugins are built against the tree's headers; their calls resolve against the kvbench
# binary that loads them (it exports the library, -rdynamic).
source "$(dirname "$0")/lib.sh"
cc_plugin() {   # cc_plugin BUG -> $T/BUG.so
    cc -std=c11 -D_GNU_SOURCE -O1 -Wall -Werror -fPIC -shared -I. -DBUG="$1" -o "$T/$1.so" tests/fixtures/bad_plugin.c \
        || { fail "bad_plugin.c -DBUG=$1 did not build"; exit 1; }
}
for b in OK OVER1 KEEPALL GQA CRASH HANG PAST NEGATIVE DUPLOAD DUPROWS NPOS MEM0 INITFAIL; do cc_plugin "$b"; done

# conformance BUG EXPECT: exit 1, a failure line containing EXPECT, the summary says so
conformance_fails() {
    local rc=0
    "$KVBENCH" --plugin "$T/$1.so" conformance --seed 11 --trials "${TRIALS:-2}" >"$T/out" 2>&1 || rc=$?
    [ "$rc" = 1 ] || fail "$1: conformance exit $rc, expected 1: $(tail -3 "$T/out")"
    grep -q "^conformance: .*$2" "$T/out" || fail "$1: conformance did not say '$2': $(grep '^conformance' "$T/out" | head -3)"
    grep -q "FAILED" "$T/out" || fail "$1: the summary hides the failure: $(grep 'setups feasible' "$T/out" | head -2)"
    grep -q "two identical runs differ" "$T/out" && fail "$1: a false 'two identical runs differ'"
    true
}
conformance_fails OVER1 "fast-tier rows, limit"
conformance_fails KEEPALL "fast-tier rows, limit"
conformance_fails GQA "attend's output is off softmax attention"
conformance_fails PAST "ingest layer 0: bad: cs_load refused"
conformance_fails NEGATIVE "ingest layer 0: bad: cs_load refused"
conformance_fails DUPLOAD "ingest layer 0: bad: cs_load refused"
conformance_fails DUPROWS "held twice"
conformance_fails NPOS "positions into a buffer of"
conformance_fails MEM0 "memory() says 0 fast-tier rows"
# (a sanitizer build reports the segfault itself and exits 1)
conformance_fails CRASH "crashed: \(signal 11 (Segmentation fault)\|exit 1 without its result\); replay"
grep -q "^seed 11 " "$T/out" || fail "CRASH: the seed line is lost with stdout a pipe"
grep -q "^conformance: bad append: scenario 1 (L.*) crashed: .*; replay: kvbench conformance --method bad --seed 11" "$T/out" \
    || fail "CRASH: the crash does not name method, rule, scenario and seed: $(grep crashed "$T/out" | head -1)"
grep -q "^bad           hold   scenario 2 " "$T/out" || fail "CRASH: the scenarios after a crash did not run"

# a method that hangs is stopped and named (the limit shortened for the test)
KVBENCH_CONFORMANCE_SECONDS=2 TRIALS=1 conformance_fails HANG "scenario 1 (L.*) ran past 2 s (hung?); replay: kvbench conformance --method bad --seed 11"

# a correct plugin without scores under hold (cs_argmin once read a NULL score array)
"$KVBENCH" --plugin "$T/OK.so" conformance --seed 11 --trials 2 >"$T/out" 2>&1 || fail "OK: conformance failed: $(grep '^conformance' "$T/out" | head -3)"
grep -q "^bad           hold   f32  [0-9]* of [0-9]* random setups feasible, all within the rule" "$T/out" || fail "OK: $(tail -3 "$T/out")"
grep -q "^bad           append attention compared with float64 softmax at [1-9]" "$T/out" || fail "OK: attention not compared"

# run: an over-budget result is an error with its reason, never a score
R=(run --workload synthetic-niah --budget 0.2 --ctx 256 --layers 2 --steps 4 --depths 0.5 --seed 7 --quiet)
run_status() {   # run_status BUG DB [run args]: the one result's status|output
    local bug=$1 db=$2
    shift 2
    "$KVBENCH" --plugin "$T/$bug.so" "${R[@]}" --methods bad --db "$db" "$@" >"$T/rout" 2>"$T/rerr" \
        || fail "$bug: run failed: $(cat "$T/rerr")"
    q "$db" "SELECT status || '|' || output FROM results WHERE method = 'bad'"
}
got=$(run_status KEEPALL "$T/a.db")
case "$got" in "error|over budget after compression: layer 0 kv head 0: 256 fast-tier rows, limit 51"*) ;;
    *) fail "KEEPALL: run stored '$got'" ;; esac
got=$(run_status OVER1 "$T/b.db" --decode hold)
case "$got" in "error|over budget at decode step 0: layer 0 kv head 0: 52 fast-tier rows, limit 51 (B 51, hold"*) ;;
    *) fail "OVER1: run --decode hold stored '$got'" ;; esac
got=$(run_status MEM0 "$T/c.db")
case "$got" in "error|over budget after compression: memory() says 0 fast-tier rows, rows() "*) ;;
    *) fail "MEM0: run stored '$got'" ;; esac
got=$(run_status DUPROWS "$T/d.db")
case "$got" in "error|"*"held twice"*) ;; *) fail "DUPROWS: run stored '$got'" ;; esac
got=$(run_status PAST "$T/e.db")
case "$got" in "error|ingest layer 0: bad: cs_load refused layer 0 (-2)") ;; *) fail "PAST: run stored '$got'" ;; esac
got=$(run_status OK "$T/f.db" --decode hold)
case "$got" in "ok|"*) ;; *) fail "OK: run --decode hold stored '$got'" ;; esac
[ "$(q "$T/a.db" "SELECT count(*) FROM results WHERE status = 'ok' AND score IS NOT NULL AND method = 'bad'")" = 0 ] \
    || fail "an over-budget result has a score"

# the model driver checks too (after compression and every step)
if [ -f "$MODEL" ]; then
    "$KVBENCH" --plugin "$T/KEEPALL.so" run --workload niah --methods bad --budget 0.1 --ctx 256 --depths 50 \
        --max-new 4 --db "$T/m.db" >"$T/rout" 2>"$T/rerr" || fail "KEEPALL: model run failed: $(cat "$T/rerr")"
    got=$(q "$T/m.db" "SELECT status || '|' || output FROM results WHERE method = 'bad'")
    case "$got" in "error|over budget after compression: layer 0 kv head 0: "*" fast-tier rows, limit "*) ;;
        *) fail "KEEPALL: the model run stored '$got'" ;; esac
fi

# refusals: one line, exit 2, nothing changed
touch "$T/none.db"
config_error "$T/none.db" "method bad from $T/INITFAIL.so, with its default parameters: bad: this method refuses every setup" \
    --plugin "$T/INITFAIL.so" "${R[@]}" --methods bad --db "$T/none.db"
grep -q -- "--params" "$T/err" && fail "INITFAIL: blamed on --params: $(cat "$T/err")"
mkdir "$T/dir.so"
config_error "$T/none.db" "$T/dir.so: is a directory; --plugin takes a shared object" --plugin "$T/dir.so" methods
rc=0
timeout 10 "$KVBENCH" --plugin /dev/zero methods >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" = 2 ] || fail "--plugin /dev/zero: exit $rc (124: it hung)"
grep -q "^kvbench: /dev/zero: not a regular file" "$T/err" || fail "--plugin /dev/zero: $(cat "$T/err")"
sed 's/KV_METHOD_HEAD,/.abi = 1, .size = 4096,/' tests/fixtures/bad_plugin.c >"$T/big.c"
cc -std=c11 -D_GNU_SOURCE -O1 -Wall -Werror -fPIC -shared -I. -Imethods -DBUG=OK -o "$T/big.so" "$T/big.c" || fail "big.c"
config_error "$T/none.db" "$T/big.so: method table of 4096 bytes for ABI 1" --plugin "$T/big.so" methods
# helper structs of another version (kv_cacheset, kv_store: compiled into the plugin): refused,
# naming the file; tables of ABI 2 and 3 (built before the version existed) and 4 (before
# key_channels) still load
helpers_plugin() {   # helpers_plugin NAME HEAD: bad_plugin.c (no bug) with its table's head replaced
    sed "s/KV_METHOD_HEAD,/$2,/" tests/fixtures/bad_plugin.c >"$T/$1.c"
    cc -std=c11 -D_GNU_SOURCE -O1 -Wall -Werror -fPIC -shared -I. -DBUG=OK -o "$T/$1.so" "$T/$1.c" || fail "$1.c did not build"
}
helpers_plugin helpers ".abi = KV_METHOD_ABI, .size = sizeof(kv_method), .helpers = KV_HELPERS_VERSION + 1"
config_error "$T/none.db" "$T/helpers.so: bad: built against the helper structs of version $(($(sed -n 's/^#define KV_HELPERS_VERSION //p' kernels/method_types.h) + 1))" \
    --plugin "$T/helpers.so" methods
for abi in 2 3 4; do   # version 4 sets helpers itself (the member came with it)
    head=".abi = $abi, .size = KV_METHOD_SIZE_V$abi"
    [ "$abi" = 4 ] && head="$head, .helpers = KV_HELPERS_VERSION"
    helpers_plugin "abi$abi" "$head"
    "$KVBENCH" --plugin "$T/abi$abi.so" methods bad >"$T/out" 2>&1 || fail "an ABI-$abi table did not load: $(cat "$T/out")"
done
"$KVBENCH" --plugin "$T/abi3.so" conformance --seed 11 --trials 1 >"$T/out" 2>&1 || fail "ABI-3 plugin: conformance failed: $(grep '^conformance' "$T/out" | head -3)"

# conformance --params: the scenarios run with the given parameters; a refused value is exit 2
"$KVBENCH" conformance --params "snapkv:window=16" --seed 3 --trials 1 >"$T/out" 2>&1 || fail "conformance --params: $(tail -2 "$T/out")"
grep -q "^snapkv        parameters: init refuses bad values, runs with window=16" "$T/out" || fail "--params not used: $(head -3 "$T/out")"
grep -q "^conformance: 1 method," "$T/out" || fail "conformance --params checked other methods"
config_error "$T/none.db" "--params: snapkv: parameter window=0 is out of range" conformance --params "snapkv:window=0"

[ "$fails" = 0 ] && echo "test_plugin_door: all checks passed"
exit $((fails > 0))

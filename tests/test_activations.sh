#!/usr/bin/env bash
# --activations f32|q8 on the command line (the arithmetic itself: test_quant_q8,
# test_model_ref.sh):
#  - a bad value and q8 with --backend cuda exit 2 with one stderr line naming
#    --activations; the results file is unchanged;
#  - f32 is the default; a q8 run is a separate run (its own run key and config), and its
#    greedy answers come from the q8 path: the same cases, stored once each;
#  - generate takes the flag and prints its timings either way.
source "$(dirname "$0")/lib.sh"
if [ ! -f "$MODEL" ]; then echo "SKIP: $MODEL is absent (make model)"; exit 0; fi

R=(run --workload niah --ctx 512 --depths 50 --methods fullkv,snapkv --budget 0.2 --max-new 8 --fidelity 0 --quiet --db "$T/m.db")
"$KVBENCH" "${R[@]}" >/dev/null 2>&1 || fail "the default run failed"

bad() { config_error "$T/m.db" "$@"; }   # bad EXPECT ARGS...
bad "--activations 'q4': expected f32 or q8" "${R[@]}" --activations q4
bad "--activations q8 needs --backend cpu" "${R[@]}" --activations q8 --backend cuda
bad "--activations 'int8': expected f32 or q8" generate --prompt hi --activations int8
bad "--activations q8 needs --backend cpu" generate --prompt hi --activations q8 --backend cuda

"$KVBENCH" "${R[@]}" --activations f32 >"$T/f32" 2>&1 || fail "the explicit f32 run failed"
grep -q "^0 results written" "$T/f32" || fail "--activations f32 is not the default run: $(tail -1 "$T/f32")"
"$KVBENCH" "${R[@]}" --activations q8 >"$T/q8" 2>&1 || fail "the q8 run failed"
grep -q "results written, 0 already present" "$T/q8" || fail "the q8 run resumed into the f32 run: $(tail -1 "$T/q8")"
[ "$(sqlite3 "$T/m.db" "select count(*) from runs")" = 2 ] || fail "expected 2 runs (f32, q8)"
for a in f32 q8; do
    id=$(sqlite3 "$T/m.db" "select id from runs where run_key like '%;activations=$a;%'")
    [ -n "$id" ] || { fail "no run keyed activations=$a"; continue; }
    sqlite3 "$T/m.db" "select config_json from runs where id = $id" | grep -q "\"activations\":\"$a\"" \
        || fail "run $id's config does not record activations $a"
    [ "$(sqlite3 "$T/m.db" "select count(*) from results r join cases c on c.id = r.case_id where c.run_id = $id and r.status = 'ok'")" = 2 ] \
        || fail "run $id ($a) does not hold its 2 results"
done

for a in f32 q8; do
    "$KVBENCH" generate --prompt "Name three colours." --max-tokens 6 --activations $a >"$T/g.$a" 2>"$T/ge.$a" \
        || fail "generate --activations $a failed: $(cat "$T/ge.$a")"
    grep -q "decode [0-9.]* tok/s" "$T/ge.$a" || fail "generate --activations $a printed no timings: $(cat "$T/ge.$a")"
done

[ "$fails" = 0 ] && echo "test_activations: all checks passed" || { echo "test_activations: $fails failed"; exit 1; }

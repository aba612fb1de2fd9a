#!/usr/bin/env bash
# --kv-type on the command line (the storage itself: test_kvtype, test_conformance,
# test_kvtype_model):
#  - a bad value and generate --plain with 16-bit rows exit 2 with one stderr line naming
#    --kv-type; the results file is unchanged;
#  - without --kv-type, --backend cuda stores bf16 rows (the device default; here, without
#    a device, the run falls back to the CPU and keeps the type) and the CPU f32;
#  - runs that differ only in the K/V type are separate runs: neither resumes into the
#    other, and rerunning one adds nothing;
#  - the run records the type (run key, config, report header), and FullKV's K/V bytes
#    under f16 and bf16 are half of f32's on the same cases.
source "$(dirname "$0")/lib.sh"

SYN=(run --workload synthetic-niah --ctx 256 --layers 2 --depths 0.5 --methods fullkv,snapkv --quiet --db "$T/syn.db")
"$KVBENCH" "${SYN[@]}" >/dev/null 2>&1 || fail "the f32 run failed"

bad() { config_error "$T/syn.db" "$@"; }   # bad EXPECT ARGS...
bad "--kv-type 'fp8': expected f32, f16 or bf16" "${SYN[@]}" --kv-type fp8
bad "--kv-type 'half': expected f32, f16 or bf16" run --workload niah --ctx 1024 --db "$T/syn.db" --kv-type half
bad "--kv-type 'x': expected f32, f16 or bf16" generate --prompt hi --kv-type x
bad "--kv-type bf16 needs a method (--plain" generate --prompt hi --plain --kv-type bf16

# the default type follows the backend
"$KVBENCH" run --model random:tiny-llama --workload niah --ctx 300 --depths 50 --methods fullkv --max-new 2 \
    --fidelity 0 --quiet --backend cuda --db "$T/dflt.db" >/dev/null 2>&1 || fail "the --backend cuda run without --kv-type failed"
[ "$(sqlite3 "$T/dflt.db" "select count(*) from runs where run_key like '%;kv_type=bf16;%'")" = 1 ] ||
    fail "--backend cuda without --kv-type did not store bf16 rows: $(sqlite3 "$T/dflt.db" "select run_key from runs")"

# one run per type; a rerun of each adds nothing
for t in bf16 f16; do
    "$KVBENCH" "${SYN[@]}" --kv-type $t >"$T/out.$t" 2>&1 || fail "the $t run failed"
    grep -q "results written, 0 already present" "$T/out.$t" || fail "the $t run resumed into another type's run"
done
"$KVBENCH" "${SYN[@]}" --kv-type bf16 >"$T/again" 2>&1 || fail "the bf16 rerun failed"
grep -q "^0 results written" "$T/again" || fail "the bf16 rerun computed results again: $(tail -1 "$T/again")"
[ "$(sqlite3 "$T/syn.db" "select count(*) from runs")" = 3 ] || fail "expected 3 runs (f32, bf16, f16)"
for t in f32 f16 bf16; do
    id=$(sqlite3 "$T/syn.db" "select id from runs where run_key like '%;kv_type=$t;%'")
    [ -n "$id" ] || { fail "no run keyed kv_type=$t"; continue; }
    sqlite3 "$T/syn.db" "select config_json from runs where id = $id" | grep -q "\"kv_type\":\"$t\"" \
        || fail "run $id's config does not record kv_type $t"
    "$KVBENCH" report --db "$T/syn.db" --run "$id" | head -1 | grep -q "K/V $t" || fail "run $id's report header lacks 'K/V $t'"
done
# FullKV keeps every row: its K/V bytes (fast minus aux) halve with 16-bit rows, case by case
kvb() {
    sqlite3 "$T/syn.db" "select group_concat(r.fast_bytes - r.fast_aux_bytes, ',') from results r join cases c on
        c.id = r.case_id join runs u on u.id = c.run_id where r.method = 'fullkv' and u.run_key like '%;kv_type=$1;%'
        order by c.case_key"
}
f32=$(kvb f32) bf16=$(kvb bf16) f16=$(kvb f16)
[ -n "$f32" ] || fail "no fullkv results"
half=$(python3 -c "print(','.join(str(int(x) // 2) for x in '$f32'.split(',')))")
[ "$bf16" = "$half" ] && [ "$f16" = "$half" ] || fail "fullkv K/V bytes f32 $f32, bf16 $bf16, f16 $f16: expected $half"

[ "$fails" = 0 ] && echo "test_kv_type: all checks passed" || { echo "test_kv_type: $fails failed"; exit 1; }

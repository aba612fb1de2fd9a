#!/usr/bin/env bash
# run --jobs N with a plugin (issue 35): main() takes --plugin out of argv, so the copies
# --jobs starts were given no plugin and failed with "unknown method". The example plugin
# (examples/plugin/randomkeep.c, built here against the source tree's headers) runs through
# the model with --jobs 2, and its results equal those of --jobs 1 in every column but
# timings and memory.
source "$(dirname "$0")/lib.sh"
[ -f "$MODEL" ] || { echo "skipped: no model at $MODEL (make model)"; exit 0; }
${CC:-cc} -std=c11 -D_GNU_SOURCE -O1 -fPIC -shared -I. -o "$T/randomkeep.so" examples/plugin/randomkeep.c \
    || { fail "the example plugin did not build"; exit 1; }
R=(run --workload niah --ctx 512 --depths 0,50 --methods randomkeep --budget 0.2 --max-new 4 --fidelity 0 --quiet)
for j in 1 2; do
    "$KVBENCH" --plugin "$T/randomkeep.so" "${R[@]}" --jobs $j --db "$T/j$j.db" >"$T/out$j" 2>"$T/err$j" \
        || fail "--jobs $j with a plugin failed: $(head -c 600 "$T/err$j")"
done
n=$(q "$T/j2.db" "SELECT count(*) FROM results WHERE method = 'randomkeep' AND status = 'ok'")
[ "$n" = 2 ] || fail "--jobs 2: $n randomkeep results ok, expected 2"
COLS="c.case_key, r.method, r.budget, r.status, r.score, r.output, r.decode_tokens, r.kl"
rows() { q "$1" "SELECT $COLS FROM results r JOIN cases c ON c.id = r.case_id ORDER BY c.case_key, r.method, r.budget"; }
[ -n "$(rows "$T/j1.db")" ] && [ "$(rows "$T/j1.db")" = "$(rows "$T/j2.db")" ] \
    || fail "--jobs 2 and --jobs 1 differ: $(diff <(rows "$T/j1.db") <(rows "$T/j2.db") | head -5)"
[ "$fails" = 0 ] && echo "test_plugin_jobs: --jobs 2 --plugin runs the plugin's method, as --jobs 1 does"
exit $((fails > 0))

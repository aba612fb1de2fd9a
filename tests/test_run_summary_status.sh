#!/usr/bin/env bash
# The synthetic run's summary names an error as an error (issue 35): a method whose every
# result is `error` printed "infeasible" there. A plugin whose ingest always fails (an
# error, not a setup it cannot serve) runs beside snapkv: its rows are stored as error
# and its summary line says error; snapkv's line has a score.
source "$(dirname "$0")/lib.sh"
cat >"$T/broken.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include "methods/scorer.h"
static int fail_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    (void)st;
    snprintf(err, errlen, "planted failure at layer %d", p->layer);
    return -1;
}
static kv_state *init(const kv_setup *s, char *err, size_t errlen) {
    kv_cacheset *c = calloc(1, sizeof *c);
    if (cs_init(c, s, 1, 1, "broken", err, errlen)) return free(c), NULL;
    return (kv_state *)c;
}
static const kv_method m = {KV_METHOD_HEAD, .name = "broken", .init = init,
                            .ingest = fail_ingest, .append = cs_door_append, KV_CACHESET_DOOR, .free = cs_door_free};
const kv_method *const *kvbench_methods(int *n) { static const kv_method *const a[] = {&m}; *n = 1; return a; }
C
${CC:-cc} -std=c11 -D_GNU_SOURCE -O1 -Wall -Werror -fPIC -shared -I. -o "$T/broken.so" "$T/broken.c" \
    || { fail "the test plugin did not build"; exit 1; }
"$KVBENCH" --plugin "$T/broken.so" run --workload synthetic-niah --methods broken,snapkv --budget 0.2 --ctx 256 \
    --layers 1 --depths 0.5 --seed 3 --db "$T/s.db" >"$T/out" 2>"$T/err" || fail "run failed: $(cat "$T/err")"
[ "$(q "$T/s.db" "SELECT status FROM results WHERE method = 'broken'")" = error ] || fail "broken's result is not error"
line=$(grep -E "^synthetic-niah +broken " "$T/out")
[ -n "$line" ] || fail "no summary line for broken: $(tail -5 "$T/out")"
grep -qw error <<<"$line" && ! grep -q infeasible <<<"$line" || fail "an error printed as: $line"
grep -Eq "^synthetic-niah +snapkv +0\.2 +[0-9]\.[0-9]{3} " "$T/out" || fail "snapkv's summary line: $(grep snapkv "$T/out")"
[ "$fails" = 0 ] && echo "test_run_summary_status: an error row prints as error in the summary"
exit $((fails > 0))

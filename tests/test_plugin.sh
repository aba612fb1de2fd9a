#!/usr/bin/env bash
# A method from outside the tree, as a user builds one (docs/write-a-method.md):
#  - make install PREFIX=<temp> installs the binary, libkvbench.a and the method headers;
#  - examples/plugin builds against them: randomkeep.so and check_randomkeep (the method
#    linked into a program of its own against the installed library, running the
#    conformance checks);
#  - kvbench --plugin randomkeep.so lists the method, passes `kvbench conformance`, and
#    runs it; the run key carries the .so's sha256; a rerun resumes, a rebuilt .so with
#    other bytes starts a new run; KVBENCH_PLUGINS does what --plugin does, and a SLURM
#    script (slurm-script) exports it for its shards;
#  - refusals, one line and exit 2: a table of another ABI version, a taken name, a file
#    that exports no table, a missing file; a method that breaks the rules fails
#    `kvbench conformance` (exit 1).
# Release build only (make install would build the release binary otherwise).
source "$(dirname "$0")/lib.sh"
if [ "${BUILD:-build}" != build ]; then echo "skipped: release build only (BUILD=$BUILD)"; exit 0; fi
P=$T/prefix
make -s --no-print-directory install PREFIX="$P" >"$T/make" 2>&1 || { cat "$T/make"; fail "make install failed"; exit 1; }
for f in bin/kvbench lib/libkvbench.a include/kvbench/methods/method.h include/kvbench/methods/scorer.h; do
    [ -f "$P/$f" ] || fail "make install did not install $f"
done
make -s --no-print-directory -C examples/plugin PREFIX="$P" O="$T" >"$T/make" 2>&1 \
    || { cat "$T/make"; fail "examples/plugin did not build against the installed kvbench"; exit 1; }
K=$P/bin/kvbench

"$K" --plugin "$T/randomkeep.so" methods randomkeep >"$T/out" 2>"$T/err" || fail "methods: $(cat "$T/err")"
grep -q "^  plugin: $T/randomkeep.so" "$T/out" || fail "methods does not name the plugin: $(cat "$T/out")"
"$K" --plugin "$T/randomkeep.so" conformance --seed 5 --trials 2 >"$T/out" 2>&1 || fail "conformance failed: $(tail "$T/out")"
grep -q "^randomkeep from $T/randomkeep.so: [0-9]* checks, 0 failed" "$T/out" || fail "conformance: $(tail -3 "$T/out")"
grep -q "^conformance: 1 method," "$T/out" || fail "conformance checked other methods than the plugin's"
"$T/check_randomkeep" >"$T/out" 2>&1 || fail "check_randomkeep (linked against libkvbench.a) failed: $(tail -3 "$T/out")"

# A run: the plugin's sha256 in the run key; a rerun resumes; other bytes, a new run.
R=(run --workload synthetic-niah --methods randomkeep,snapkv --budget 0.2 --ctx 256 --layers 1 --depths 0.5 --seed 7
   --db "$T/p.db")
"$K" --plugin "$T/randomkeep.so" "${R[@]}" >"$T/out" 2>"$T/err" || fail "run with the plugin failed: $(cat "$T/err")"
sha=$(sha256sum "$T/randomkeep.so" | cut -c1-64)
key=$(q "$T/p.db" "SELECT run_key FROM runs WHERE id = 1")
case "$key" in *";code="*"+plugin.randomkeep.so.$sha;"*) ;; *) fail "the run key lacks the plugin's sha256 $sha: $key" ;; esac
[ "$(q "$T/p.db" "SELECT count(*) FROM results WHERE method = 'randomkeep' AND status = 'ok'")" = 1 ] \
    || fail "no randomkeep result"
KVBENCH_PLUGINS="$T/randomkeep.so" "$K" "${R[@]}" >"$T/out" 2>"$T/err" || fail "rerun (KVBENCH_PLUGINS) failed: $(cat "$T/err")"
grep -q "^0 results written, 2 already present" "$T/out" || fail "rerun did not resume: $(tail -1 "$T/out")"
mkdir "$T/v2"
make -s --no-print-directory -C examples/plugin PREFIX="$P" O="$T/v2" CFLAGS="-O1" "$T/v2/randomkeep.so" >"$T/make" 2>&1 \
    || fail "rebuild at -O1 failed: $(cat "$T/make")"
cmp -s "$T/randomkeep.so" "$T/v2/randomkeep.so" && fail "-O1 built the same bytes (the test needs other bytes)"
"$K" --plugin "$T/v2/randomkeep.so" "${R[@]}" >"$T/out" 2>"$T/err" || fail "run with the rebuilt plugin failed"
grep -q "^2 results written, 0 already present" "$T/out" || fail "a rebuilt plugin resumed the old run: $(tail -1 "$T/out")"
[ "$(q "$T/p.db" "SELECT count(*) FROM runs")" = 2 ] || fail "a rebuilt plugin did not start a new run"

# A sharded run's script hands the plugins to its shards (--plugin itself is taken out).
(cd "$T" && "$K" --plugin randomkeep.so slurm-script --shards 2 -- "$K" "${R[@]}" >"$T/s.sh" 2>"$T/err") \
    || fail "slurm-script with a plugin failed: $(cat "$T/err")"
grep -qx "export KVBENCH_PLUGINS='$T/randomkeep.so'" "$T/s.sh" || fail "the SLURM script does not load the plugin"

# Refusals. A plugin source with one table, NAME and ABI given.
plugin() {   # plugin OUT.so NAME ABI [EXTRA C]
    cat >"$T/p.c" <<C
#include <stdlib.h>
#include "methods/scorer.h"
static int keep_all(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    kv_cacheset *c = (kv_cacheset *)st;
    if (cs_begin_layer(c, p, "x", err, errlen)) return -1;
    int32_t keep[4096];
    for (int t = 0; t < p->n; t++) keep[t] = t;
    for (int j = 0; j < c->Hkv; j++) cs_load(c, p, j, keep, p->n, NULL);
    return 0;
}
static kv_state *init(const kv_setup *s, char *err, size_t errlen) {
    kv_cacheset *c = calloc(1, sizeof *c);
    if (cs_init(c, s, 1, 1, "$2", err, errlen)) return free(c), NULL;
    return (kv_state *)c;
}
static const kv_method m = {.abi = $3, .size = $3 == 1 ? KV_METHOD_SIZE_V1 : sizeof(kv_method), .name = "$2", .init = init, .ingest = keep_all,
                            .append = cs_door_append, KV_CACHESET_DOOR, .free = cs_door_free};
$4
C
    cc -std=c11 -D_GNU_SOURCE -O1 -Wall -Werror -Wno-unused-const-variable -fPIC -shared -I"$P/include/kvbench" -o "$1" "$T/p.c"
}
export_it='const kv_method *const *kvbench_methods(int *n) { static const kv_method *const a[] = {&m}; *n = 1; return a; }'
plugin "$T/abi.so" newer 99 "$export_it"
config_error "$T/p.db" "$T/abi.so: method table of ABI version 99" --plugin "$T/abi.so" methods
plugin "$T/clash.so" snapkv 1 "$export_it"
config_error "$T/p.db" "method 'snapkv' is already registered (built in)" --plugin "$T/clash.so" methods
config_error "$T/p.db" "randomkeep.so: method 'randomkeep' is already registered ($T/randomkeep.so)" \
    --plugin "$T/randomkeep.so" --plugin "$T/v2/randomkeep.so" methods
plugin "$T/none.so" lonely 1 ""
config_error "$T/p.db" "$T/none.so: exports no kvbench_methods()" --plugin "$T/none.so" methods
config_error "$T/p.db" "$T/missing.so: cannot read the plugin" --plugin "$T/missing.so" methods
KVBENCH_PLUGINS="$T/missing.so" config_error "$T/p.db" "$T/missing.so: cannot read the plugin" methods
config_error "$T/p.db" "unknown method 'nope'" conformance --method nope
config_error "$T/p.db" "unknown option '--bogus'" conformance --bogus
config_error "$T/p.db" "--trials '0': expected 1 to 1000" conformance --trials 0
# keeps every prompt row whatever the budget: conformance must say so
plugin "$T/greedy.so" greedy 1 "$export_it"
rc=0
"$K" --plugin "$T/greedy.so" conformance --seed 5 --trials 1 >"$T/out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "a method over its budget passed conformance (exit $rc)"
grep -q "fast-tier rows, limit" "$T/out" || fail "conformance did not name the budget violation: $(tail -3 "$T/out")"

[ "$fails" = 0 ] && echo "test_plugin: all checks passed"
exit $((fails > 0))

# The shared start of the shell tests (sourced, after their header comment): strict mode,
# the repository root as the working folder, $KVBENCH and $MODEL, a temporary folder $T
# removed on exit, a failure counter with fail(), and small helpers.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
KVBENCH=${KVBENCH:-./kvbench}
MODEL=${KVBENCH_MODEL:-$HOME/.cache/kvbench/SmolLM2-135M-Instruct.Q4_1.gguf}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
dump() { sqlite3 "$1" .dump | md5sum; }
q() { sqlite3 "$1" "$2"; }

# config_error DB EXPECT ARGS...: kvbench ARGS exits 2 with one stderr line containing
# EXPECT, and the results file DB is unchanged.
config_error() {
    local db=$1 expect=$2 was rc=0
    shift 2
    was=$(dump "$db")
    "$KVBENCH" "$@" >"$T/out" 2>"$T/err" || rc=$?
    [ "$rc" = 2 ] || fail "$*: exit $rc, expected 2"
    [ "$(wc -l <"$T/err")" = 1 ] || fail "$*: $(wc -l <"$T/err") stderr lines: $(head -c 400 "$T/err")"
    grep -qF -- "$expect" "$T/err" || fail "$*: stderr lacks '$expect': $(cat "$T/err")"
    [ "$(dump "$db")" = "$was" ] || fail "$* changed the results file"
}
# 1 when $KVBENCH is a sanitizer build (make SAN=1 puts "SAN=1" in its build flags; test_bad_input.sh,
# which does not source this file, greps the same): ASan
# reserves terabytes of shadow address space at start, so it cannot start under ulimit -v.
san_build() { grep -aq "SAN=1" "$KVBENCH"; }

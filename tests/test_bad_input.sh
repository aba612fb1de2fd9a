#!/usr/bin/env bash
# Bad input, as a careless or hostile user gives it (issue 14): each case asserts the
# exit code, exactly one stderr line matching what is wrong, and that the results file
# every case points at is unchanged (sqlite3 .dump before and after). Then the
# behaviours the same issue fixed: a plot --out with a newline runs nothing, read-only
# results files are readable, two identical runs both succeed, a foreign SQLite file is
# left alone, train-sekv refuses a bad --out at once.
set -u
cd "$(dirname "$0")/.."
KVBENCH=${KVBENCH:-./kvbench}
KV=$(realpath "$KVBENCH")
dir=$(mktemp -d /tmp/kvbench_bad_XXXXXX)
chmod 755 "$dir"
trap 'chmod -R u+w "$dir" 2>/dev/null; rm -rf "$dir"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

SHAPE=(--layers 2 --heads 2 --kv-heads 1 --head-dim 16 --steps 2 --depths 0.5 --quiet)
ref=$dir/ref.db
"$KV" run --workload synthetic-niah --methods fullkv,snapkv --ctx 64 "${SHAPE[@]}" --db "$ref" >/dev/null 2>&1 ||
    { echo "FAIL: cannot make the reference results file"; exit 1; }
dump() { sqlite3 "$1" .dump | sha256sum; }
ref_dump=$(dump "$ref")

# case NAME EXPECTED_RC 'STDERR REGEX' COMMAND...
case_() {
    local name=$1 want_rc=$2 want=$3
    shift 3
    local err=$dir/stderr rc
    (cd "$dir" && timeout 60 "$@") >/dev/null 2>"$err"
    rc=$?
    local lines; lines=$(wc -l <"$err")
    if [ "$rc" != "$want_rc" ]; then fail "$name: exit $rc, want $want_rc ($(head -c 300 "$err"))"
    elif [ "$lines" != 1 ]; then fail "$name: $lines stderr lines, want 1: $(head -c 600 "$err")"
    elif ! grep -Eq -- "$want" "$err"; then fail "$name: stderr '$(cat "$err")' does not match '$want'"
    else echo "ok   $name: $(cat "$err")"
    fi
    [ "$(dump "$ref")" = "$ref_dump" ] || { fail "$name: the results file changed"; ref_dump=$(dump "$ref"); }
}

printf 'abc \xff\xfe def. ' >"$dir/latin1.txt"
sqlite3 "$dir/foreign.db" "CREATE TABLE t(x); INSERT INTO t VALUES (1);"
foreign_dump=$(dump "$dir/foreign.db")
long=$dir/$(for i in $(seq 40); do printf 'abcdefghijk/'; done)x.db
NL=$'\n'

# item 4: control characters in plot paths
case_ "plot --out with a newline" 2 "--out contains a control character \(byte 0x0a" \
    "$KV" plot --db ref.db --out "p${NL}system('touch pwned')${NL}#"
case_ "plot --variant with a CR" 2 "--variant contains a control character \(byte 0x0d" \
    "$KV" plot --db "$ref" --variant $'single\r'
# item 6: train-sekv --out checked before anything is loaded
case_ "train-sekv --out in a missing directory" 2 "--out $dir/nope/p.params: cannot write there: No such file" \
    "$KV" train-sekv --corpus "$dir" --out "$dir/nope/p.params"
case_ "train-sekv --out a directory" 2 "--out $dir: is a directory" "$KV" train-sekv --corpus "$dir" --out "$dir"
# item 7: a context the machine cannot hold
case_ "synthetic --ctx 4000000" 2 "--ctx 4000000: a synthetic case needs about [0-9.]+ GiB .*more than this machine's" \
    "$KV" run --ctx 4000000 --db "$ref"
# item 8: someone else's SQLite file
case_ "run --db on a foreign SQLite file" 1 "not a kvbench results file \(an SQLite file with other tables\)" \
    "$KV" run --ctx 64 "${SHAPE[@]}" --db "$dir/foreign.db"
[ "$(dump "$dir/foreign.db")" = "$foreign_dump" ] || fail "the foreign file changed"
# item 10: messages that say what is wrong
case_ "unknown flag in last position" 2 "unknown option '--bogus'" "$KV" run --db "$ref" --bogus
case_ "unknown flag last, model run" 2 "unknown option '--bogus'" "$KV" run --workload niah --db "$ref" --bogus
case_ "known flag without its value" 2 "^kvbench run: --ctx needs a value$" "$KV" run --db "$ref" --ctx
case_ "unknown synthetic workload before a text-only flag" 2 "--workload 'synthetic-foo': unknown workload" \
    "$KV" run --workload synthetic-foo --limit 3 --db "$ref"
case_ "text-only flag in a synthetic run" 2 "--limit applies to text workloads" \
    "$KV" run --workload synthetic-niah --limit 3 --db "$ref"
case_ "text workload mixed into a synthetic run" 2 "'niah' is a text workload; synthetic and text workloads go in separate runs" \
    "$KV" run --workload synthetic-niah,niah --db "$ref"
case_ "long --db path keeps its reason" 1 "\.\.\..*/x\.db': its directory does not exist$" \
    "$KV" run --ctx 64 "${SHAPE[@]}" --db "$long"
case_ "long --db path, report" 1 "\.\.\..*/x\.db': no such file$" "$KV" report --db "$long"
if [ -f "${KVBENCH_MODEL:-${KVBENCH_CACHE:-$HOME/.cache/kvbench}/SmolLM2-135M-Instruct.Q4_1.gguf}" ]; then
    case_ "non-UTF-8 haystack" 1 "latin1.txt: not UTF-8 text \(byte 0xff at offset 4\)" \
        "$KV" run --workload niah --haystack "$dir/latin1.txt" --ctx 1024 --depths 50 --methods fullkv --db "$ref"
else
    echo "SKIP non-UTF-8 haystack: no model"
fi
# our own
case_ "report on a text file" 1 "not a kvbench results file: file is not a database" "$KV" report --db "$dir/latin1.txt"
case_ "report on a missing file" 1 "'$dir/missing.db': no such file" "$KV" report --db "$dir/missing.db"
case_ "report on a missing run" 1 "has no run 999" "$KV" report --db "$ref" --run 999
case_ "report --table unknown" 2 "unknown --table 'bogus'" "$KV" report --db "$ref" --table bogus
case_ "report --base with a bad budget" 2 "the budget after @ is not a positive number" "$KV" report --db "$ref" --table compare --base snapkv@0x
case_ "plot --figure unknown" 2 "--figure 'bogus' is unknown" "$KV" plot --db "$ref" --figure bogus
case_ "run --budget 0" 2 "--budget '0': expected a fraction" "$KV" run --budget 0 --db "$ref"
case_ "run --ctx 8" 2 "--ctx '8': a context must be at least 16 tokens" "$KV" run --ctx 8 --db "$ref"
case_ "run --params unknown method" 2 "--params: unknown method 'nosuch'" "$KV" run --params nosuch:x=1 --db "$ref"
case_ "run --params unknown key" 2 "snapkv: unknown parameter 'bogus'" "$KV" run --params snapkv:bogus=1 --db "$ref"
case_ "run --heads not a multiple" 2 "--heads 3 is not a multiple of --kv-heads 2" "$KV" run --heads 3 --kv-heads 2 --db "$ref"
case_ "run --seed negative" 2 "--seed '-1': expected an integer in 0..9223372036854775807" "$KV" run --seed -1 --db "$ref"
case_ "run --db a directory" 1 "is a directory, not a results file" "$KV" run --ctx 64 "${SHAPE[@]}" --db "$dir"
case_ "train-sekv --steps abc" 2 "--steps 'abc': expected an integer" "$KV" train-sekv --steps abc --out "$dir/p.params"
case_ "train-sekv --held-out too many" 2 "--held-out 30: needs at least twice as many documents \(--max-docs 40\)" \
    "$KV" train-sekv --held-out 30 --out "$dir/p.params"
case_ "methods --bogus" 2 "unknown option '--bogus'" "$KV" methods --bogus
case_ "info on a missing model" 1 "no model at $dir/none.gguf" "$KV" info --model "$dir/none.gguf"
case_ "info on a text file" 1 "latin1.txt" "$KV" info --model "$dir/latin1.txt"
case_ "unknown command" 2 "unknown command 'frobnicate'" "$KV" frobnicate

# item 4: nothing ran, no script was written
[ -e "$dir/pwned" ] && fail "plot --out with a newline ran gnuplot commands"
ls "$dir"/p* 2>/dev/null | grep -q '\.gp' && fail "plot --out with a newline wrote a script"
# ... and a hostile method name inside a results file never leaves a comment line
cp "$ref" "$dir/hostile.db"
sqlite3 "$dir/hostile.db" "UPDATE results SET method = 'snapkv' || char(10) || 'system(\"touch $dir/pwned2\")' WHERE method = 'snapkv';"
if command -v gnuplot >/dev/null; then
    (cd "$dir" && "$KV" plot --db hostile.db --figure budget --out hostile >/dev/null 2>&1)
    [ -e "$dir/pwned2" ] && fail "a method name from the results file ran as gnuplot"
    grep -q '^system' "$dir/hostile.gp" "$dir/hostile.dat" 2>/dev/null && fail "a method name broke a line of the script"
fi

# item 5: a WAL-mode results file in a directory the reader cannot write
mkdir -p "$dir/ro"
"$KV" run --workload synthetic-niah --methods fullkv --ctx 64 "${SHAPE[@]}" --db "$dir/ro/r.db" >/dev/null 2>&1
sqlite3 "$dir/ro/r.db" "PRAGMA journal_mode=WAL;" >/dev/null      # as main left files: WAL mode, no -wal
[ "$(od -An -tu1 -j18 -N1 "$dir/ro/r.db" | tr -d ' ')" = 2 ] || fail "setup: the file is not in WAL mode"
chmod 555 "$dir/ro"
as_reader() { if [ "$(id -u)" = 0 ]; then setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; else "$@"; fi; }
if out=$(as_reader "$KV" report --db "$dir/ro/r.db" 2>&1) && grep -q '| fullkv |' <<<"$out"; then
    echo "ok   report on a WAL file in a read-only directory"
else
    fail "report on a WAL file in a read-only directory: $out"
fi
if as_reader "$KV" report --db "$dir/ro/r.db" --table memory >/dev/null 2>&1; then echo "ok   report --table memory, read-only"
else fail "report --table memory on a read-only directory"; fi
# a file kvbench closed is left readable without a writable directory
chmod 755 "$dir/ro"
"$KV" run --workload synthetic-niah --methods snapkv --ctx 64 "${SHAPE[@]}" --db "$dir/ro/r.db" >/dev/null 2>&1
[ "$(od -An -tu1 -j18 -N1 "$dir/ro/r.db" | tr -d ' ')" = 1 ] || fail "kvbench left the closed file in WAL mode"
chmod 555 "$dir/ro"

# item 8: two identical runs on one file at once both succeed, each result once
both=$dir/both.db
args=(run --workload synthetic-niah,synthetic-multikey --methods all --ctx 64,96 --budget 0.25,0.5 "${SHAPE[@]}" --db "$both")
"$KV" "${args[@]}" >"$dir/o1" 2>&1 & p1=$!
"$KV" "${args[@]}" >"$dir/o2" 2>&1 & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
[ $r1 = 0 ] && [ $r2 = 0 ] || fail "two identical runs: exits $r1 and $r2: $(cat "$dir/o1" "$dir/o2" | grep -v '^$' | tail -3)"
n=$(sqlite3 "$both" "SELECT count(*) FROM results")
u=$(sqlite3 "$both" "SELECT count(*) FROM (SELECT DISTINCT case_id, method, budget FROM results)")
[ "$n" = "$u" ] && [ "$n" -gt 0 ] || fail "two identical runs: $n results, $u distinct"
echo "ok   two identical runs at once: both exit 0, $n results"

[ $fails -eq 0 ] && echo "all bad-input cases passed"
exit $((fails > 0))

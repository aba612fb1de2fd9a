#!/usr/bin/env bash
# Configuration errors stop a run before its first case, and are never stored:
#  - a bad --params value (each method's own init refuses it) or an unreadable, corrupt,
#    truncated or foreign SeKV params file exits 2 with one stderr line naming it;
#  - the results file is byte-for-byte what it was (its SQL dump), so no "infeasible"
#    row is left for a rerun to skip once the cause is fixed;
#  - fixing the parameter then runs and stores the results.
# Both run drivers: the synthetic one, and the model one when the model is cached.
set -euo pipefail
cd "$(dirname "$0")/.."
KVBENCH=${KVBENCH:-./kvbench}
MODEL=${KVBENCH_MODEL:-$HOME/.cache/kvbench/SmolLM2-135M-Instruct.Q4_1.gguf}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
dump() { sqlite3 "$1" .dump | md5sum; }

# A results file with results already in it.
SYN=(run --workload synthetic-niah --ctx 256 --layers 2 --depths 0.5 --quiet --db "$T/syn.db")
"$KVBENCH" "${SYN[@]}" --methods snapkv,chunkkv >/dev/null 2>&1 || fail "the first synthetic run failed"
before=$(dump "$T/syn.db")

# A params file trained for another model (random weights of SmolLM2's shape), a corrupt
# copy (one byte flipped inside: checksum) and a truncated one.
mkdir "$T/corpus"
head -c 6000 tests/test_run.sh >"$T/corpus/a.txt"
"$KVBENCH" train-sekv --model random:smollm2-135m --corpus "$T/corpus" --out "$T/foreign.params" --steps 1 \
    --max-docs 1 --ctx 256 --candidates 4 --keep 2 --cache none --threads 2 >/dev/null 2>&1 \
    || fail "could not train a params file on the random model"
cp "$T/foreign.params" "$T/corrupt.params"
printf '\x55' | dd of="$T/corrupt.params" bs=1 seek=5000 conv=notrunc 2>/dev/null
head -c 3000 "$T/foreign.params" >"$T/short.params"
echo "not a params file" >"$T/text.params"
# issue 27 item 14: a well-formed file (checksum and all) whose floats are NaN, or one +Inf
python3 - "$T/foreign.params" "$T/nan.params" "$T/inf.params" <<'PY'
import struct, sys
src = open(sys.argv[1], 'rb').read()
head, n = 60, struct.unpack_from('<Q', src, 52)[0]
def fnv(b):
    h = 0xcbf29ce484222325
    for x in b: h = ((h ^ x) * 0x100000001b3) & 0xffffffffffffffff
    return h
for out, floats in ((sys.argv[2], struct.pack('<f', float('nan')) * n),
                    (sys.argv[3], src[head:head + 4 * (n - 1)] + struct.pack('<f', float('inf')))):
    body = src[:head] + floats
    open(out, 'wb').write(body + struct.pack('<Q', fnv(body)))
PY

# bad PARAMS EXPECT DB ARGS...: exit 2, one stderr line containing EXPECT, DB unchanged.
bad() {
    local params=$1 expect=$2 db=$3 was
    shift 3
    was=$(dump "$db")
    local rc=0
    "$KVBENCH" "$@" --params "$params" >"$T/out" 2>"$T/err" || rc=$?
    [ "$rc" = 2 ] || fail "--params '$params': exit $rc, expected 2"
    [ "$(wc -l <"$T/err")" = 1 ] || fail "--params '$params': $(wc -l <"$T/err") stderr lines: $(head -c 400 "$T/err")"
    grep -qF -- "$expect" "$T/err" || fail "--params '$params': stderr lacks '$expect': $(cat "$T/err")"
    [ "$(dump "$db")" = "$was" ] || fail "--params '$params' changed the results file"
}

bad "sekv:zoom=abc" "sekv: parameter zoom='abc' is not an integer" "$T/syn.db" "${SYN[@]}" --methods sekv
bad "sekv:rank=7" "sekv: rank must be 8, 32 or 64" "$T/syn.db" "${SYN[@]}" --methods sekv
bad "sekv:tau=nan" "sekv: parameter tau='nan' is not a number" "$T/syn.db" "${SYN[@]}" --methods sekv
bad "snapkv:window=0" "snapkv: parameter window=0 is out of range" "$T/syn.db" "${SYN[@]}" --methods snapkv
bad "chunkkv:chunk=-3" "chunkkv: parameter chunk=-3 is out of range" "$T/syn.db" "${SYN[@]}" --methods chunkkv
bad "h2o:heavy_ratio=2" "h2o: parameter heavy_ratio=2 is out of range" "$T/syn.db" "${SYN[@]}" --methods h2o
bad "sekv:params_file=$T/none.params" "$T/none.params: cannot open SeKV params" "$T/syn.db" "${SYN[@]}" --methods sekv
bad "sekv:params_file=$T/text.params" "bad magic" "$T/syn.db" "${SYN[@]}" --methods sekv
bad "sekv:params_file=$T/corrupt.params" "checksum mismatch" "$T/syn.db" "${SYN[@]}" --methods sekv
bad "sekv:params_file=$T/short.params" "truncated" "$T/syn.db" "${SYN[@]}" --methods sekv
bad "sekv:params_file=$T/nan.params" "$T/nan.params: parameter 1 of" "$T/syn.db" "${SYN[@]}" --layers 30 --heads 9 --kv-heads 3 --methods sekv
bad "sekv:params_file=$T/inf.params" "is not finite (inf): refused" "$T/syn.db" "${SYN[@]}" --layers 30 --heads 9 --kv-heads 3 --methods sekv
# A method named in --params is checked even when --methods does not run it.
bad "sekv:rank=7" "sekv: rank must be 8, 32 or 64" "$T/syn.db" "${SYN[@]}" --methods snapkv
# A bad value for a run into a new file creates nothing.
bad "snapkv:window=0" "snapkv: parameter window=0 is out of range" "$T/syn.db" "${SYN[@]/$T\/syn.db/$T/new.db}" --methods snapkv
[ ! -e "$T/new.db" ] || fail "a refused configuration created the results file"
[ "$(dump "$T/syn.db")" = "$before" ] || fail "the results file changed"
[ "$(sqlite3 "$T/syn.db" "SELECT count(*) FROM results WHERE status <> 'ok'")" = 0 ] || fail "non-ok results stored"

# Fixed, the same run stores real results (nothing stale to skip).
"$KVBENCH" "${SYN[@]}" --methods snapkv --params "snapkv:window=16" >/dev/null 2>&1 || fail "the fixed run failed"
[ "$(sqlite3 "$T/syn.db" "SELECT count(*) FROM results WHERE method = 'snapkv' AND params = 'window=16' AND status = 'ok'")" = 1 ] \
    || fail "the fixed run did not store its result"

# A params file that is a FIFO (it once stood for a file broken after the check: the first
# read got the trained file, every later one junk) is refused at the check, as every file
# that is not a regular one is (issue 36: /dev/zero was read until memory ran out): exit 2,
# one line naming it, nothing stored, and nothing read from the FIFO (no writer needed).
mkfifo "$T/fifo.params"
rc=0
timeout 60 "$KVBENCH" "${SYN[@]}" --layers 30 --heads 9 --kv-heads 3 --methods sekv \
    --params "sekv:params_file=$T/fifo.params" >/dev/null 2>"$T/err" || rc=$?
[ "$rc" = 2 ] || fail "params file that is a FIFO: exit $rc, expected 2"
[ "$(wc -l <"$T/err")" = 1 ] && grep -q "$T/fifo.params: cannot open SeKV params: not a regular file" "$T/err" \
    || fail "params file that is a FIFO: $(cat "$T/err")"
[ "$(sqlite3 "$T/syn.db" "SELECT count(*) FROM results WHERE method = 'sekv'")" = 0 ] \
    || fail "params file that is a FIFO: a result was stored"

# The model driver: the same check before any case, with the model's identity (a params
# file trained for another model is refused).
if [ -f "$MODEL" ]; then
    M=(run --workload ruler:niah_single_1 --ctx 512 --budget 0.5 --quiet --db "$T/model.db")
    "$KVBENCH" "${M[@]}" --methods streamingllm >/dev/null 2>&1 || fail "the first model run failed"
    bad "sekv:zoom=abc" "sekv: parameter zoom='abc' is not an integer" "$T/model.db" "${M[@]}" --methods sekv
    bad "snapkv:window=0" "snapkv: parameter window=0 is out of range" "$T/model.db" "${M[@]}" --methods snapkv
    bad "sekv:params_file=$T/foreign.params" "model hash mismatch" "$T/model.db" "${M[@]}" --methods sekv
    bad "sekv:params_file=$T/corrupt.params" "checksum mismatch" "$T/model.db" "${M[@]}" --methods sekv
    [ "$(sqlite3 "$T/model.db" "SELECT count(*) FROM results")" = 1 ] || fail "the model run's file changed"
else
    echo "SKIP (model driver): $MODEL is absent (make model)"
fi

if [ "$fails" -gt 0 ]; then echo "test_config_errors: $fails failures"; exit 1; fi
echo "test_config_errors: all checks passed"

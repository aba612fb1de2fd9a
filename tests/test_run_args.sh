#!/usr/bin/env bash
# kvbench run parses its options once for both case sources (synthetic: syn_source.c;
# through the model: model_source.c) with one parser (run_args.c): every option both take has the same help lines in
# `kvbench run --help` and `kvbench run --workload niah --help`, and the same bad value
# gives the same one-line error (the line below, or starting with it) and exit 2 in both,
# before any work (no model is loaded,
# no results file is created).
set -u
cd "$(dirname "$0")/.."
KV=${KVBENCH:-./kvbench}
T=$(mktemp -d /tmp/kvbench_test_run_args_XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "test_run_args: $*"; fail=1; }

"$KV" run --help >"$T/syn" 2>&1 || bad "run --help: exit $?"
"$KV" run --workload niah --help >"$T/model" 2>&1 || bad "run --workload niah --help: exit $?"
# the help block of one option: its line and the indented lines after it
block() { awk -v f="$1" '$1 == f { on = 1; print; next } on && /^                     / { print; next } { on = 0 }' "$2"; }
shared="--methods --budget --params --db --seed --split --decode --kv-type --backend --threads --shard --quiet --help"
for f in $shared; do
    a=$(block "$f" "$T/syn"); b=$(block "$f" "$T/model")
    [ -n "$a" ] || bad "$f is not in run --help"
    [ "$a" = "$b" ] || bad "$f: the help differs between the drivers: <$a> vs <$b>"
    [ "$(grep -c -- "^  $f " "$T/model")" = 1 ] || bad "$f: not exactly once in the model run's help"
done

# one bad value per shared option, in each driver: the same line, exit 2, nothing written
n=0
while IFS='|' read -r args want; do
    [ -n "$args" ] || continue
    first=
    for pre in "" "--workload niah"; do
        # shellcheck disable=SC2086
        out=$("$KV" run $pre --db "$T/r.db" $args 2>&1 >/dev/null); rc=$?
        n=$((n + 1))
        [ "$rc" = 2 ] || bad "run $pre $args: exit $rc (want 2): $out"
        [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || bad "run $pre $args: not one line: $out"
        case "$out" in "kvbench run: $want"*) ;; *) bad "run $pre $args: '$out', want 'kvbench run: $want'" ;; esac
        [ -z "$first" ] || [ "$out" = "$first" ] || bad "$args: the drivers differ: '$first' vs '$out'"
        first=$out
    done
done <<'LIST'
--bogus 1|unknown option '--bogus' (see kvbench run --help)
stray|unexpected argument 'stray' (see kvbench run --help)
--seed -1|--seed '-1': expected an integer in 0..9223372036854775807
--split foo|--split 'foo': expected dev or test
--decode 8|--decode '8': expected append or hold (the step count is --steps N; through the model, --max-new N)
--kv-type f64|--kv-type 'f64': expected f32, f16 or bf16
--backend tpu|--backend 'tpu': expected cpu or cuda
--threads 0|--threads '0': expected an integer in 1..256
--shard 3/2|--shard '3/2': K must be in 0..1 (shards are counted from 0)
--methods nope|--methods: unknown method 'nope' (valid: all, 
--budget 0|--budget '0': expected a fraction in (0,1] or a token count (integer > 1)
--budget 0.1,,0.2|--budget '0.1,,0.2': empty item in the list
--params nope:x=1|--params: unknown method 'nope' (see kvbench methods)
--quiet=1|--quiet takes no value
--methods|--methods needs a value
LIST
[ -e "$T/r.db" ] && bad "a refused command created the results file"
[ $fail -eq 0 ] && echo "test_run_args: ok ($(echo $shared | wc -w) shared options with one help text, $n refusals alike in both drivers)"
exit $fail

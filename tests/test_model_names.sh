#!/usr/bin/env bash
# Short model names (model/model_names.c): `--model qwen2.5-coder-0.5b` (and smollm2-135m,
# qwen2.5-coder-1.5b) names the file its make target caches under KVBENCH_CACHE, for every
# command that reads --model (run, info, sim); a run under the short name is the same run
# as under the path (its key names the file, so it resumes, adding nothing); a short name
# not downloaded is one line naming the make target, exit 2, nothing stored.
source "$(dirname "$0")/lib.sh"
CACHE0=${KVBENCH_CACHE:-$HOME/.cache/kvbench}
QWEN=$CACHE0/Qwen2.5-Coder-0.5B-Instruct-AWQ.Q4_K_M.gguf
C=$T/cache
mkdir -p "$C"
[ -d "$CACHE0/haystack" ] && ln -s "$(readlink -f "$CACHE0/haystack")" "$C/haystack"   # the NIAH runs read it
export KVBENCH_CACHE=$C
unset KVBENCH_MODEL
"$KVBENCH" run --model random:tiny-llama --workload niah --ctx 300 --depths 50 --methods fullkv --max-new 2 \
    --db "$T/r.db" >/dev/null 2>&1 || fail "the seed run failed"

# not downloaded: one line with the make target, exit 2, the results file unchanged
config_error "$T/r.db" '`make model-qwen` fetches it' run --model qwen2.5-coder-0.5b --workload niah --ctx 300 \
    --depths 50 --methods fullkv --db "$T/r.db"
grep -qF -- "--model PATH" "$T/err" || fail "the missing-model line lacks the --model PATH alternative: $(cat "$T/err")"
grep -qF -- "$C/Qwen2.5-Coder-0.5B-Instruct-AWQ.Q4_K_M.gguf" "$T/err" || fail "the line does not name the file: $(cat "$T/err")"
config_error "$T/r.db" '`make model-qwen-1.5b` fetches it' run --model qwen2.5-coder-1.5b --workload niah --ctx 300 \
    --depths 50 --methods fullkv --db "$T/r.db"
rc=0; "$KVBENCH" info --model smollm2-135m >/dev/null 2>"$T/err" || rc=$?
[ "$rc" = 2 ] && grep -qF '`make model` fetches it' "$T/err" || fail "info, smollm2-135m not cached: exit $rc, $(cat "$T/err")"
rc=0; "$KVBENCH" sim --model qwen2.5-coder-0.5b --ctx 4096 >/dev/null 2>"$T/err" || rc=$?
[ "$rc" = 2 ] && grep -qF '`make model-qwen` fetches it' "$T/err" || fail "sim, qwen not cached: exit $rc, $(cat "$T/err")"
# a file of that name in the working folder is a path, not a short name
rc=0; (cd "$T" && : >qwen2.5-coder-0.5b && "$KVBENCH" info --model qwen2.5-coder-0.5b) >/dev/null 2>"$T/err" || rc=$?
grep -qF "make model-qwen" "$T/err" && fail "a file named like a short name was taken for the short name"

# cached (a link to the real file): every command reads it
if [ -f "$MODEL" ]; then
    ln -s "$(readlink -f "$MODEL")" "$C/SmolLM2-135M-Instruct.Q4_1.gguf"
    "$KVBENCH" info --model smollm2-135m >"$T/info" 2>&1 || fail "info --model smollm2-135m: $(cat "$T/info")"
    grep -q "Smollm2 135M" "$T/info" || fail "info --model smollm2-135m does not show the model: $(head -5 "$T/info")"
    "$KVBENCH" sim --model smollm2-135m --ctx 4096 >"$T/sim" 2>&1 || fail "sim --model smollm2-135m: $(tail -3 "$T/sim")"
    R=(run --workload niah --ctx 300 --depths 50 --methods fullkv --max-new 2 --db "$T/s.db")
    "$KVBENCH" "${R[@]}" --model "$MODEL" >/dev/null 2>&1 || fail "run --model PATH failed"
    n=$(q "$T/s.db" "select count(*) from results")
    out=$("$KVBENCH" "${R[@]}" --model smollm2-135m 2>&1) || fail "run --model smollm2-135m failed: $out"
    [ "$(q "$T/s.db" "select count(*) from runs")" = 1 ] || fail "the short name made a second run (its key differs from the path's)"
    [ "$(q "$T/s.db" "select count(*) from results")" = "$n" ] || fail "the short name's run added results"
else
    echo "test_model_names: $MODEL not found; the cached-name checks need the model"
fi
if [ -f "$QWEN" ]; then
    ln -s "$(readlink -f "$QWEN")" "$C/"
    "$KVBENCH" info --model qwen2.5-coder-0.5b >"$T/info" 2>&1 || fail "info --model qwen2.5-coder-0.5b: $(cat "$T/info")"
    grep -q "Qwen2.5 Coder 0.5B Instruct AWQ" "$T/info" || fail "info does not show Qwen's general.name: $(head -5 "$T/info")"
    grep -q "layers  *24" "$T/info" && grep -q "14 (kv heads 2" "$T/info" || fail "Qwen's shape: $(cat "$T/info")"
else
    echo "test_model_names: $QWEN not found (make model-qwen); its check is skipped"
fi
[ $fails = 0 ] && echo "test_model_names: ok"
exit $((fails > 0))

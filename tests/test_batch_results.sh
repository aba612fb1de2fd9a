#!/usr/bin/env bash
# Batched decode in kvbench run (--batch 1, the default: a case's method/budget pairs
# generate together, one batched forward pass per step) against one at a time (--batch 0):
# the results files must be equal in every column but the timings (tests/same_results.py:
# tokens, scores, fidelity metrics, memory columns, head statistics, zoom events), with
# the fidelity metrics on and off (streamed prefill), on the real model and on random
# models (Q8_0, Q4_0 and Q4_K weights) with f32 and 8-bit activations. Pairs leave the
# batch at different steps (stop tokens, max-new) or never join it (infeasible). The mode is in the run's config, not its identity;
# a batched result carries its method's own attention time (note attend_s).
source "$(dirname "$0")/lib.sh"

for i in $(seq 0 299); do
    printf 'The committee %s the old bridge %s. ' "$([ $((i % 3)) = 0 ] && echo repaired || echo visited)" \
        "$([ $((i % 4)) = 1 ] && echo "before the storm" || echo "in the morning")"
done >"$T/hay.txt"

compare() {   # name, the least number of ok results, then the run arguments
    local name=$1 least=$2
    shift 2
    "$KVBENCH" "$@" --db "$T/$name-batch.db" >/dev/null 2>"$T/e1" || fail "$name batched: $(cat "$T/e1")"
    "$KVBENCH" "$@" --batch 0 --db "$T/$name-one.db" >/dev/null 2>"$T/e2" || fail "$name one at a time: $(cat "$T/e2")"
    python3 tests/same_results.py "$T/$name-batch.db" "$T/$name-one.db" >"$T/cmp" 2>&1 ||
        fail "$name: batched and one-at-a-time runs stored different results: $(head -c 3000 "$T/cmp")"
    local n
    n=$(q "$T/$name-batch.db" "SELECT count(*) FROM results WHERE status = 'ok' AND decode_tokens > 0")
    [ "$n" -ge "$least" ] || fail "$name: only $n results ok with decode steps"
    [ "$(q "$T/$name-batch.db" "SELECT run_key FROM runs")" = "$(q "$T/$name-one.db" "SELECT run_key FROM runs")" ] ||
        fail "$name: the batch mode changed the run's identity"
    q "$T/$name-batch.db" "SELECT config_json FROM runs" | grep -q '"decode_pairs":"batched"' ||
        fail "$name: the batched run's config does not say so"
    q "$T/$name-one.db" "SELECT config_json FROM runs" | grep -q '"decode_pairs":"one at a time"' ||
        fail "$name: the one-at-a-time run's config does not say so"
    [ "$(q "$T/$name-batch.db" "SELECT count(*) FROM result_notes WHERE key = 'attend_s' AND CAST(text AS REAL) > 0")" = \
      "$(q "$T/$name-batch.db" "SELECT count(*) FROM results WHERE status = 'ok' AND decode_tokens > 0")" ] ||
        fail "$name: a batched result lacks its attention time"
    [ "$(q "$T/$name-one.db" "SELECT count(*) FROM sqlite_master WHERE name = 'result_notes'")" = 0 ] ||
    [ "$(q "$T/$name-one.db" "SELECT count(*) FROM result_notes WHERE key = 'attend_s'")" = 0 ] ||
        fail "$name: attend_s notes in a one-at-a-time run"
}

if [ -f "$MODEL" ]; then
    compare real 18 run --model "$MODEL" --workload niah --ctx 512 --depths 0,50 --methods all --budget 0.1 \
        --max-new 8 --fidelity 4 --haystack "$T/hay.txt" --threads 2 --quiet
    # generations of different lengths: pairs left the batch at different steps
    [ "$(q "$T/real-batch.db" "SELECT count(DISTINCT decode_tokens) FROM results WHERE status = 'ok'")" -ge 2 ] ||
        echo "note: every real-model pair generated the same number of tokens"
else
    echo "note: $MODEL is absent (make model): the real-model comparison is skipped"
fi
compare q8 15 run --model random:tiny-qwen2:q8_0 --activations q8 --workload niah --ctx 300 --depths 0,50 --methods all \
    --budget 0.1,0.3 --max-new 4 --fidelity 3 --haystack "$T/hay.txt" --threads 2 --quiet
# infeasible pairs never joined the batch, and are recorded the same
[ "$(q "$T/q8-batch.db" "SELECT count(*) FROM results WHERE status = 'infeasible'")" -ge 1 ] ||
    echo "note: no infeasible pair in the q8 comparison"
# K-quant weights (random Q4_K rows), both activations
compare q4k 8 run --model random:tiny-k:q4_k --workload niah --ctx 300 --depths 50 --methods all --budget 0.2 \
    --max-new 3 --fidelity 2 --haystack "$T/hay.txt" --threads 2 --quiet
compare q4k8 4 run --model random:tiny-k:q4_k --activations q8 --workload niah --ctx 300 --depths 50 \
    --methods fullkv,snapkv,h2o,streamingllm --budget 0.2 --max-new 3 --fidelity 2 --haystack "$T/hay.txt" \
    --threads 2 --quiet
compare streamed 8 run --model random:tiny-llama:q4_0 --workload niah --ctx 300 --depths 50 --methods all \
    --budget 0.3 --max-new 3 --fidelity 0 --haystack "$T/hay.txt" --threads 2 --quiet

touch "$T/bad.db"
config_error "$T/bad.db" "--batch '2': expected 1" run --model random:tiny-llama --workload niah --ctx 300 \
    --batch 2 --db "$T/bad.db"

[ "$fails" = 0 ] && echo "test_batch_results.sh: ok" || { echo "test_batch_results.sh: $fails failed"; exit 1; }

#!/usr/bin/env bash
# Layer-streaming prefill in kvbench run: the same NIAH cases, every method at two budgets,
# run with the prefill streamed (--fidelity 0) and kept whole (KVBENCH_TEST_KEEP_PREFILL=1),
# must store the same results (tokens, scores, memory columns, head statistics, zoom
# events; tests/same_results.py), on the real model (SeKV with its trained parameters and
# the surprisal it needs after the last layer) and on a random one. Each case records its
# peak RSS (the whole case: at least every result's peak). A run without SeKV (whose prefill
# skips the prompt's surprisal) stores the other methods' results unchanged. `kvbench methods` says which
# methods keep every layer until the forward pass ends.
source "$(dirname "$0")/lib.sh"

for i in $(seq 0 299); do
    printf 'The committee %s the old bridge %s. ' "$([ $((i % 3)) = 0 ] && echo repaired || echo visited)" \
        "$([ $((i % 4)) = 1 ] && echo "before the storm" || echo "in the morning")"
done >"$T/hay.txt"

# Without SeKV in a case no method reads the prompt's surprisal, and the prefill computes only
# the last chunk of logits: the other methods' results must be those of the run with SeKV.
QUICK=fullkv,snapkv,chunkkv,h2o
no_surprisal() {   # name (its streamed file holds --methods all), then the run arguments but --methods
    local name=$1
    shift
    "$KVBENCH" "$@" --methods "$QUICK" --fidelity 0 --db "$T/$name-quick.db" >/dev/null 2>"$T/e3" ||
        fail "$name without SeKV: $(cat "$T/e3")"
    python3 tests/same_results.py "$T/$name-stream.db" "$T/$name-quick.db" --methods="$QUICK" >"$T/cmp" 2>&1 ||
        fail "$name: $QUICK stored other results without SeKV in the run: $(cat "$T/cmp")"
}

compare() {   # name, the least number of ok results, then the run arguments
    local name=$1 least=$2
    shift 2
    "$KVBENCH" "$@" --fidelity 0 --db "$T/$name-stream.db" >/dev/null 2>"$T/e1" || fail "$name streamed: $(cat "$T/e1")"
    KVBENCH_TEST_KEEP_PREFILL=1 "$KVBENCH" "$@" --fidelity 0 --db "$T/$name-kept.db" >/dev/null 2>"$T/e2" ||
        fail "$name kept: $(cat "$T/e2")"
    python3 tests/same_results.py "$T/$name-stream.db" "$T/$name-kept.db" >"$T/cmp" 2>&1 ||
        fail "$name: streamed and kept prefills stored different results: $(cat "$T/cmp")"
    local n
    n=$(q "$T/$name-stream.db" "SELECT count(*) FROM results WHERE status = 'ok'")
    [ "$n" -ge "$least" ] || fail "$name: only $n results ok"
    # the case's peak covers its results' peaks, and is a plausible process size
    [ "$(q "$T/$name-stream.db" "SELECT count(*) FROM cases c WHERE c.rss_peak > 10000000 AND c.rss_peak >=
          (SELECT max(rss_peak) FROM results r WHERE r.case_id = c.id)")" = \
      "$(q "$T/$name-stream.db" "SELECT count(*) FROM cases")" ] ||
        fail "$name: case peak RSS missing or below a result's: $(q "$T/$name-stream.db" 'SELECT id, rss_peak FROM cases')"
}

if [ -f "$MODEL" ]; then
    compare real 30 run --model "$MODEL" --workload niah --ctx 512 --depths 30,80 --methods all --budget 0.1,0.5 \
        --max-new 6 --haystack "$T/hay.txt" --threads 2 --quiet
    no_surprisal real run --model "$MODEL" --workload niah --ctx 512 --depths 30,80 --budget 0.1,0.5 \
        --max-new 6 --haystack "$T/hay.txt" --threads 2 --quiet
    # SeKV ran (fit at 50%) and the uncapped variant too
    [ "$(q "$T/real-stream.db" "SELECT count(*) FROM results WHERE method = 'sekv' AND status = 'ok'")" -ge 1 ] ||
        fail "sekv did not run: $(q "$T/real-stream.db" "SELECT budget, status, output FROM results WHERE method = 'sekv'")"
else
    echo "note: $MODEL is absent (make model): the real-model comparison is skipped"
fi
compare random 9 run --model random:tiny-qwen2 --workload niah --ctx 300 --depths 50 --methods all --budget 0.3 \
    --max-new 3 --haystack "$T/hay.txt" --threads 2 --quiet
no_surprisal random run --model random:tiny-qwen2 --workload niah --ctx 300 --depths 50 --budget 0.3 \
    --max-new 3 --haystack "$T/hay.txt" --threads 2 --quiet

"$KVBENCH" methods sekv snapkv >"$T/m" 2>&1 || fail "kvbench methods failed"
grep -A3 "^sekv$" "$T/m" | grep -q "prefill: needs the prompt's surprisal" || fail "methods: sekv's prefill line: $(cat "$T/m")"
grep -A3 "^snapkv$" "$T/m" | grep -q "prefill: ingests each layer as the forward pass computes it" ||
    fail "methods: snapkv's prefill line"

[ "$fails" = 0 ] && echo "test_prefill_stream.sh: ok" || { echo "test_prefill_stream.sh: $fails failed"; exit 1; }

#!/usr/bin/env bash
# RoPE scaling and the long-context files of issue 24, past the original context.
# 1. The frequency tables of random:llama3.1-8b (llama3) and random:qwen2.5-7b (YaRN),
#    built from config.json-style parameters as a Hugging Face checkpoint gives them,
#    against transformers' formulas in tests/model_ref.py (and, for llama3, against the
#    rope_freqs tensor convert_hf_to_gguf.py would write).
# 2. Tiny random GGUFs with an original context of 256 (tests/model_tiny.py, fresh seed,
#    printed): llama3 (rope_freqs only), qwen2 + yarn, llama + yarn with beta keys, and a
#    Mistral-shaped llama with a sliding window. About 1K prompt tokens and 32 greedy
#    steps: logits within 1e-4 relative L2 of the float64 reference, identical greedy
#    tokens (model_ref.py --tol 1e-4), the prefill of prompt + generated equal to the last
#    decode step (test_model --dump-model, 1e-4).
# 3. What is refused, exit 2 with one line naming the file and the field: rope scaling
#    types dynamic and unknown, a rope_freqs tensor of the wrong length, and a context past
#    a declared sliding window (the engine caps the context there: no window mask).
# 4. The Llama-3.1-shaped file runs `kvbench run --workload niah` and records its result.
source "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
PY=.venv/bin/python
[ -x "$PY" ] || { echo "test_rope_scaling: no $PY: run tools/setup_venv.sh"; exit 1; }

for p in llama3.1-8b qwen2.5-7b; do
    "$BUILD"/tests/test_model --rope-table "$p" | "$PY" tests/model_ref.py --rope-table || fail "rope table of $p"
done

seed=${KVBENCH_TEST_SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "tiny models: seed $seed (KVBENCH_TEST_SEED to replay)"
for v in llama3 yarn yarnb mistral; do
    mkdir -p "$T/$v"
    "$PY" tests/model_tiny.py "$v" "$T/$v/model.gguf" "$T/$v" "$seed"
    echo "== tiny $v"
    "$BUILD"/tests/test_model --dump-model "$T/$v/model.gguf" "$T/$v" || { fail "$v: test_model --dump-model"; continue; }
    rs=()
    [ -f "$T/$v/rope_scaling.json" ] && rs=(--rope-scaling "$(cat "$T/$v/rope_scaling.json")")
    "$PY" tests/model_ref.py "$T/$v/model.gguf" "$T/$v" "${rs[@]}" --tol 1e-4 || fail "$v: model_ref.py"
done

# refused: exit 2, one stderr line naming the file and the field
refused() {   # refused VARIANT 'EXPECT'
    local v=$1 want=$2 rc=0
    "$PY" tests/model_tiny.py "$v" "$T/$v.gguf" "$T" "$seed"
    "$KVBENCH" info --model "$T/$v.gguf" >"$T/out" 2>"$T/err" || rc=$?
    if [ "$rc" != 2 ]; then fail "$v: exit $rc, want 2"
    elif [ "$(wc -l <"$T/err")" != 1 ]; then fail "$v: not one stderr line: $(cat "$T/err")"
    elif ! grep -qF -- "$T/$v.gguf: $want" "$T/err"; then fail "$v: '$(cat "$T/err")' lacks '$T/$v.gguf: $want'"
    else echo "ok   $v refused: $(cat "$T/err")"
    fi
}
refused dynamic "llama.rope.scaling.type 'dynamic' (dynamic NTK"
refused bogus "llama.rope.scaling.type 'bogus' is not supported"
refused badfreqs "tensor rope_freqs.weight has shape [7] but expected [8]"

# the sliding window: context capped at it, said by info, refused past it by run
info=$("$KVBENCH" info --model "$T/mistral/model.gguf")
grep -q "^context *2048 (the file's 4096, capped at its attention sliding window" <<<"$info" ||
    fail "mistral: info does not show the capped context: $(grep context <<<"$info")"
config_error /dev/null "is beyond the context of the model $T/mistral/model.gguf (2048 tokens) (capped at the sliding window" \
    run --model "$T/mistral/model.gguf" --workload niah --ctx 3000 --methods fullkv --db "$T/w.db"
[ ! -e "$T/w.db" ] || fail "a refused run wrote a results file"

# done-when: the Llama-3.1-shaped file (rope_freqs) runs a NIAH case on the CPU
"$KVBENCH" run --model "$T/llama3/model.gguf" --workload niah --ctx 1024 --depths 50 --methods fullkv \
    --db "$T/niah.db" --quiet >"$T/niah.out" 2>&1 || fail "niah run on the llama3 file: $(tail -3 "$T/niah.out")"
n=$(q "$T/niah.db" "SELECT count(*) FROM results" 2>/dev/null || echo 0)
[ "$n" = 1 ] || fail "niah run on the llama3 file recorded $n results, want 1"

[ "$fails" = 0 ] && echo "test_rope_scaling: ok" || { echo "test_rope_scaling: $fails failed"; exit 1; }

#!/usr/bin/env bash
# The engine against an independent float64 numpy forward pass (tests/model_ref.py).
# 1. SmolLM2: test_model --dump writes the engine's ids, surprisal, logits and greedy
#    tokens for two prompts (decode with f32 activations); model_ref.py recomputes them
#    from the GGUF. The same with --dump-q8 (the default 8-bit activations) is held to a
#    gross-error bound and prints how far 8-bit activations move the logits.
# 2. Tiny random models written by tests/model_tiny.py (fresh seed, printed): qwen2
#    (biases, NeoX rope, untied output), llama with linear rope scaling, and kquant (Q4_K,
#    Q5_K, Q6_K, Q5_0, Q5_1 weights; also decoded with 8-bit activations), checked the
#    same way. (The long-context scalings, llama3 and yarn: tests/test_rope_scaling.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=.venv/bin/python
MODEL=$("$BUILD"/tests/test_model --print-path)
[ -f "$MODEL" ] || { echo "test_model_ref: no model at $MODEL: run \`make model\`"; exit 1; }
[ -x "$PY" ] || { echo "test_model_ref: no $PY: run tools/setup_venv.sh"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# part 1 reads no seed (fixed prompts, the shipped model): make test-seeds leaves it out
if [ "${KVBENCH_TEST_SEED_ONLY:-}" = 1 ]; then
    echo "seed-only: left out the SmolLM2 prompts (part 1)"
else
    mkdir -p "$dir/q8"
    "$BUILD"/tests/test_model --dump "$dir"
    "$BUILD"/tests/test_model --dump-q8 "$dir/q8"
    "$PY" tests/model_ref.py "$MODEL" "$dir" --q8 "$dir/q8"
fi

seed=${KVBENCH_TEST_SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "tiny models: seed $seed (KVBENCH_TEST_SEED to replay)"
for v in qwen2 llama kquant; do
    mkdir -p "$dir/$v"
    "$PY" tests/model_tiny.py "$v" "$dir/$v/model.gguf" "$dir/$v" "$seed"
    echo "== tiny $v"
    "$BUILD"/tests/test_model --dump-model "$dir/$v/model.gguf" "$dir/$v"
    q8=()
    if [ "$v" = kquant ]; then   # and decode on 8-bit activations of both block layouts
        mkdir -p "$dir/$v/q8" && cp "$dir/$v/p0_ids.txt" "$dir/$v/q8/"
        "$BUILD"/tests/test_model --dump-model-q8 "$dir/$v/model.gguf" "$dir/$v/q8"
        q8=(--q8 "$dir/$v/q8")
    fi
    "$PY" tests/model_ref.py "$dir/$v/model.gguf" "$dir/$v" "${q8[@]}"
done

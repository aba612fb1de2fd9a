#!/usr/bin/env bash
# The C tokenizer against tests/tokenizer_ref.py (an independent Python BPE built from
# the GGUF vocabulary and merges with the `regex` module), id for id, on a fresh random
# corpus of >= 200 strings: the real model (pre-tokenizer smollm), then tokenizer-only
# GGUF variants with the same vocabulary and pre-tokenizers gpt2, llama-bpe, qwen2.
set -euo pipefail
if [ "${1:-}" = --help ]; then sed -n 2,5p "$0"; exit 0; fi
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=$BUILD/tests/test_tokenizer
PY=.venv/bin/python
MODEL=$("$BIN" --model-path)
if [ ! -f "$MODEL" ]; then echo "SKIP: $MODEL is absent (make model)"; exit 0; fi
if ! "$PY" -c "import gguf, regex" 2>/dev/null; then echo "SKIP: .venv lacks gguf/regex (tools/setup_venv.sh)"; exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
seed=${KVBENCH_TEST_SEED:-$(( $(date +%s%N) % 1000000007 ))}
echo "seed $seed (KVBENCH_TEST_SEED to replay)"
"$PY" tests/tokenizer_ref.py prepare --model "$MODEL" --seed "$seed" --dir "$tmp"
status=0
for pre in smollm gpt2 llama-bpe qwen2; do
    model=$tmp/$pre.gguf
    [ -f "$model" ] || model=$MODEL
    "$BIN" --encode-lines "$tmp/corpus.txt" --model "$model" > "$tmp/got.txt"
    "$PY" tests/tokenizer_ref.py compare --label "$pre" --corpus "$tmp/corpus.txt" --ref "$tmp/ref_$pre.txt" \
        --got "$tmp/got.txt" || status=1
done
exit $status

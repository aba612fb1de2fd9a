#!/usr/bin/env bash
# tokenizer.json against the `tokenizers` package (issue 24, part B): tests/hf_tok_ref.py
# writes tokenizer.json files (byte-level BPE with SmolLM2's vocabulary and merges and the
# smollm, gpt2, Llama-3 and Qwen2 pre-tokenizers; Mistral-style SentencePiece BPE trained
# on half the essays, in Mistral's Metaspace form and Llama-2's legacy normalizer form) and
# the ids tokenizers gives a corpus: every NIAH haystack essay whole and by paragraph, the
# NIAH and RULER prompts kvbench builds (--print-prompts), and tokenizer_ref.py's random
# strings (fresh seed, printed). kvbench's encoding of each line through the directory
# (test_tokenizer --encode-lines DIR) must be identical, id for id.
source "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
PY=.venv/bin/python
HAY=${KVBENCH_CACHE:-$HOME/.cache/kvbench}/haystack
[ -f "$MODEL" ] || { echo "SKIP: no model at $MODEL (make model)"; exit 0; }
[ -d "$HAY" ] || { echo "SKIP: no haystack at $HAY (make haystack)"; exit 0; }
"$PY" -c "import gguf, regex, tokenizers" 2>/dev/null || { echo "SKIP: .venv lacks gguf/regex/tokenizers"; exit 0; }
seed=${KVBENCH_TEST_SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "seed $seed (KVBENCH_TEST_SEED to replay)"
if [ "${KVBENCH_TEST_SEED_ONLY:-}" = 1 ]; then
    # make test-seeds: the texts of the prompts and essays read no seed, and the byte-level
    # variants (fixed vocabulary) encode them alike every seed: they get the random strings
    # alone. The spm variants (trained on a seeded order of the essays) keep every essay;
    # the prompts (NIAH and RULER text made of the same essays) are left out for all.
    echo "seed-only: left out the prompts, and the essays for the byte-level variants"
    "$PY" tests/hf_tok_ref.py prepare --model "$MODEL" --dir "$T" --seed "$seed" --seed-only
else
    "$KVBENCH" run --workload ruler --print-prompts 11 --ctx 2048 --model "$MODEL" >"$T/ruler.txt" 2>"$T/err" ||
        fail "ruler prompts: $(cat "$T/err")"
    "$KVBENCH" run --workload niah --print-prompts 3 --ctx 2048 --model "$MODEL" >"$T/niah.txt" 2>"$T/err" ||
        fail "niah prompts: $(cat "$T/err")"
    "$PY" tests/hf_tok_ref.py prepare --model "$MODEL" --dir "$T" --seed "$seed" --prompts "$T/ruler.txt" "$T/niah.txt"
fi
for v in smollm gpt2 llama-bpe qwen2 spm spm-legacy; do
    c=$T/corpus.txt
    [[ $v == spm* && -f $T/corpus_spm.txt ]] && c=$T/corpus_spm.txt
    "$BUILD"/tests/test_tokenizer --encode-lines "$c" --model "$T/$v" >"$T/got.txt" ||
        { fail "$v: kvbench could not load $T/$v"; continue; }
    "$PY" tests/tokenizer_ref.py compare --label "$v" --corpus "$c" --ref "$T/ref_$v.txt" --got "$T/got.txt" ||
        fail "$v: ids differ from tokenizers'"
done
[ "$fails" = 0 ] && echo "test_hf_tokenizer: ok" || { echo "test_hf_tokenizer: $fails failure(s)"; exit 1; }

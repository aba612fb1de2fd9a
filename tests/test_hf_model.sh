#!/usr/bin/env bash
# Hugging Face checkpoint directories as --model DIR (issue 24, part B). tests/hf_tiny.py
# writes tiny random checkpoints (fresh seed, printed) and, from the same arrays, the GGUF
# convert_hf_to_gguf.py would write; for llama (llama3 rope scaling, tied), qwen2 (q/k/v
# biases, YaRN, vocab padded past the tokenizer) and mistral (SentencePiece-style
# tokenizer), in f32, f16 and bf16, single and sharded files:
#  - the HF directory and the GGUF give IDENTICAL logits, surprisal and greedy tokens
#    (test_model --dump-model, compared byte for byte), at positions past the original
#    context of 256;
#  - tests/hf_ref.py: the same dump within model_ref's tolerance of its float64 pass
#    fed the safetensors in transformers' own layout (rotate_half), greedy tokens equal;
#  - linear rope scaling from config.json against the reference;
#  - kvbench info DIR; the run identity follows the files' content;
#  - bad directories exit 2 with one line naming the file and the field;
#  - kvbench run --workload niah on a directory (when the haystack is there).
source "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
PY=.venv/bin/python
if ! "$PY" -c "import gguf, safetensors, tokenizers" 2>/dev/null; then
    echo "SKIP: .venv lacks gguf/safetensors/tokenizers (tools/setup_venv.sh)"; exit 0
fi
seed=${KVBENCH_TEST_SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "seed $seed (KVBENCH_TEST_SEED to replay)"

for spec in llama:f32:1 llama:bf16:3 qwen2:f16:1 qwen2:bf16:2 mistral:bf16:2 mistral:f32:1; do
    IFS=: read -r v dt sh <<<"$spec"
    d=$T/$v-$dt-$sh
    mkdir -p "$d/dump_hf" "$d/dump_gguf"
    "$PY" tests/hf_tiny.py "$v" "$d" "$seed" "$dt" "$sh"
    cp "$d/p0_ids.txt" "$d/dump_hf/"
    cp "$d/p0_ids.txt" "$d/dump_gguf/"
    echo "== $v $dt, $sh file(s)"
    "$BUILD"/tests/test_model --dump-model "$d/hf" "$d/dump_hf" || fail "$spec: the HF directory did not run"
    "$BUILD"/tests/test_model --dump-model "$d/model.gguf" "$d/dump_gguf" || fail "$spec: the GGUF did not run"
    for f in "$d"/dump_hf/p0_*; do
        cmp -s "$f" "$d/dump_gguf/$(basename "$f")" || fail "$spec: $(basename "$f") differs between HF and GGUF"
    done
    "$PY" tests/hf_ref.py "$d/hf" "$d/model.gguf" "$d/dump_hf" || fail "$spec: the reference disagrees"
done

# linear scaling through config.json (no GGUF twin: the reference takes rope_scaling from config.json)
d=$T/lin
mkdir -p "$d/dump"
cp -r "$T/mistral-f32-1/hf" "$d/hf"
cp "$T/mistral-f32-1/p0_ids.txt" "$d/dump/"
"$PY" -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); c['rope_scaling']={'type':'linear','factor':2.0}; json.dump(c, open(p,'w'))" "$d/hf/config.json"
echo "== mistral f32, linear rope scaling 2"
"$BUILD"/tests/test_model --dump-model "$d/hf" "$d/dump" || fail "linear: the HF directory did not run"
"$PY" tests/hf_ref.py "$d/hf" "$T/mistral-f32-1/model.gguf" "$d/dump" || fail "linear: the reference disagrees"

# info, and the identity: another seed's weights in a directory of the same name
d=$T/llama-f32-1
"$KVBENCH" info --model "$d/hf" >"$T/info" || fail "info on an HF directory"
grep -q "^architecture   llama" "$T/info" && grep -q "^layers         2" "$T/info" ||
    fail "info on an HF directory: $(cat "$T/info")"
# Mistral-7B-v0.1's sliding window: stated as the GGUF key, so the engine's rule applies
rm -rf "$T/win"; cp -r "$T/mistral-f32-1/hf" "$T/win"
"$PY" -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); c['sliding_window']=512; json.dump(c, open(p,'w'))" "$T/win/config.json"
"$KVBENCH" info --model "$T/win" >"$T/info" || fail "info on a windowed HF directory"
grep -q "^context        512 (the file's 1024" "$T/info" || fail "sliding window: $(grep context "$T/info")"
mkdir -p "$T/other"
"$PY" tests/hf_tiny.py llama "$T/other" $((seed + 1)) f32 1

# bad directories: exit 2, one line naming the file and the field. They read no seed (each
# is refused on its config, tokenizer or header, before a weight is read): make test-seeds
# (KVBENCH_TEST_SEED_ONLY=1) leaves them out. (Not indented: the block is unchanged.)
if [ "${KVBENCH_TEST_SEED_ONLY:-}" = 1 ]; then echo "seed-only: left out the bad directories"; else
bad() {   # bad NAME EXPECT (on $T/bad)
    local rc=0
    "$KVBENCH" info --model "$T/bad" >/dev/null 2>"$T/err" || rc=$?
    if [ "$rc" != 2 ] || [ "$(wc -l <"$T/err")" != 1 ] || ! grep -qF -- "$2" "$T/err"; then
        fail "$1: exit $rc, stderr: $(head -c 400 "$T/err") (want '$2')"
    else echo "ok   $1: $(cat "$T/err")"; fi
}
fresh() { rm -rf "$T/bad"; cp -r "$T/$1/hf" "$T/bad"; }
setcfg() {   # setcfg FILE PYTHON-EXPR-ON-c
    "$PY" -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); $2; json.dump(c, open(p,'w'))" "$T/bad/$1"
}
fresh llama-bf16-3; rm "$T/bad/model-00002-of-00003.safetensors"
bad "missing shard" "$T/bad/model-00002-of-00003.safetensors: cannot open: No such file or directory (a shard named in model.safetensors.index.json)"
fresh llama-f32-1; setcfg tokenizer.json "c['model']['type']='WordPiece'"
bad "WordPiece tokenizer.json" "$T/bad/tokenizer.json: field 'model.type' = 'WordPiece' is not supported (BPE)"
fresh llama-f32-1; setcfg tokenizer.json "c['model']['type']='Unigram'"
bad "Unigram tokenizer.json" "$T/bad/tokenizer.json: field 'model.type' = 'Unigram' is not supported (BPE)"
fresh llama-f32-1; setcfg config.json "c['architectures']=['GemmaForCausalLM']"
bad "unknown architecture" "$T/bad/config.json: field 'architectures' = 'GemmaForCausalLM' is not supported"
fresh llama-f32-1; setcfg config.json "c['rope_scaling']={'rope_type':'dynamic','factor':2.0}"
bad "dynamic rope" "$T/bad/config.json: field 'rope_scaling.rope_type' = 'dynamic' is not supported (linear, llama3, yarn)"
fresh qwen2-f16-1; setcfg config.json "c['rope_scaling']={'type':'longrope','factor':2.0}"
bad "longrope" "$T/bad/config.json: field 'rope_scaling.type' = 'longrope' is not supported"
fresh qwen2-f16-1; setcfg config.json "c['use_sliding_window']=True"
bad "qwen2 sliding window" "$T/bad/config.json: field 'use_sliding_window' = true is not supported for qwen2"
fresh llama-f32-1; setcfg config.json "del c['num_hidden_layers']"
bad "missing field" "$T/bad/config.json: field 'num_hidden_layers' is missing"
fresh llama-f32-1; "$PY" - "$T/bad/model.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]; b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); k = "model.layers.0.mlp.up_proj.weight"; h[k]["dtype"] = "I32"
s = json.dumps(h).encode(); s += b" " * (-len(s) % 8)
open(p, "wb").write(struct.pack("<Q", len(s)) + s + b[8 + n:])
PY
bad "int32 weights" "$T/bad/model.safetensors: tensor model.layers.0.mlp.up_proj.weight has dtype I32, not supported (F32, F16, BF16)"
fresh llama-f32-1; rm "$T/bad/tokenizer.json"
bad "no tokenizer.json" "$T/bad/tokenizer.json: cannot open: No such file or directory"
fi

# the run identity follows the content (kvbench run --workload niah, when the haystack is there)
HAY=${KVBENCH_CACHE:-$HOME/.cache/kvbench}/haystack
if [ -d "$HAY" ]; then
    run() { "$KVBENCH" run --workload niah --model "$1" --methods fullkv,snapkv --ctx 400 --depths 50 --quiet --db "$2"; }
    run "$d/hf" "$T/a.db" >"$T/run.out" 2>&1 || fail "kvbench run --workload niah on an HF directory: $(tail -5 "$T/run.out")"
    run "$T/other/hf" "$T/b.db" >/dev/null 2>&1 || fail "kvbench run on the second HF directory"
    ma=$(q "$T/a.db" "select model from runs") mb=$(q "$T/b.db" "select model from runs")
    case "$ma" in hf:hf-*) ;; *) fail "run identity of an HF directory: '$ma'" ;; esac
    [ "$ma" != "$mb" ] || fail "two checkpoints with different weights share the identity $ma"
    [ "$(q "$T/a.db" "select count(*) from results")" -gt 0 ] || fail "no results from the HF directory"
    echo "niah on an HF directory: $(q "$T/a.db" "select count(*) from results") results; identities $ma, $mb"
else
    echo "SKIP niah run: no haystack at $HAY (make haystack)"
fi
[ "$fails" = 0 ] && echo "test_hf_model: ok" || { echo "test_hf_model: $fails failure(s)"; exit 1; }

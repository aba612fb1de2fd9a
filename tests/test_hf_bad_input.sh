#!/usr/bin/env bash
# Model files that crashed, hung, were accepted or were misreported (issue 36), each now
# refused: `kvbench info` and `kvbench run` exit 2 with one stderr line naming the file and
# the user's own key and value, and the results file the run points at is unchanged.
#  - model.safetensors.index.json mapping a tensor to ../../x.safetensors, to 5 or to ..
#    (a use-after-free before);
#  - config.json values checked under their own key: yarn original_max_position_embeddings
#    1e20 and 0.5, attention_factor 1e30, beta_fast -1, rms_norm_eps 1e-300 (0 as a float32),
#    sliding_window -5, an integer rope type, bos_token_id 5000 past a vocabulary of 263, a bos_token_id that is text,
#    heads that are not a multiple of the kv heads, a vocab_size of 16M over an embedding of
#    263 rows (refused before the tokenizer pads 16M placeholder tokens; a fuzz slow unit);
#  - overlapping safetensors tensors; a GGUF whose yarn attn_factor is 1e30;
#  - files that are not regular (a FIFO, /dev/zero) or too large: config.json,
#    tokenizer.json, chat_template.jinja, model.safetensors, a GGUF, and (exit 1, as every
#    workload data error) the haystack and a workload's JSONL.
# Every command runs under `timeout`, so a hang fails here instead of hanging the suite.
source "$(dirname "$0")/lib.sh"
PY=.venv/bin/python
if ! "$PY" -c "import gguf, safetensors, tokenizers" 2>/dev/null; then
    echo "SKIP: .venv lacks gguf/safetensors/tokenizers (tools/setup_venv.sh)"; exit 0
fi
# The weights' seed changes nothing refused here: make test-seeds leaves the test out.
if [ "${KVBENCH_TEST_SEED_ONLY:-}" = 1 ]; then echo "seed-only: left out every case (none reads the seed)"; exit 0; fi
seed=${KVBENCH_TEST_SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "seed $seed (KVBENCH_TEST_SEED to replay)"
"$PY" tests/hf_tiny.py llama "$T/llama" "$seed" f32 1
"$PY" tests/hf_tiny.py qwen2 "$T/qwen2" "$seed" f16 2
HF_TINY_GGUF_F32=qwen2.rope.scaling.attn_factor=1e30 "$PY" tests/hf_tiny.py qwen2 "$T/attn" "$seed" f32 1

db=$T/r.db
"$KVBENCH" run --workload synthetic-niah --methods fullkv --ctx 64 --layers 2 --heads 2 --kv-heads 1 --head-dim 16 \
    --steps 2 --depths 0.5 --quiet --db "$db" >/dev/null 2>&1 || { echo "FAIL: cannot make the results file"; exit 1; }
was=$(dump "$db")

# refused NAME RC EXPECT MODEL [CMD...]: each command (default: info, then run) exits RC
# with one stderr line containing EXPECT; the results file stays as it was.
refused() {
    local name=$1 want=$2 expect=$3 model=$4 rc
    shift 4
    local cmds=("$@")
    [ ${#cmds[@]} -gt 0 ] || cmds=(info run)
    for c in "${cmds[@]}"; do
        local args=(info --model "$model")
        [ "$c" = run ] && args=(run --workload niah --model "$model" --methods fullkv --ctx 512 --depths 50 --quiet --db "$db")
        [ "$c" = hay ] && args=(run --workload niah --haystack "$model" --methods fullkv --ctx 512 --depths 50 --quiet --db "$db")
        [ "$c" = longbench ] && args=(run --workload "longbench:$model" --tasks narrativeqa --methods fullkv --quiet --db "$db")
        rc=0
        timeout "${KVBENCH_TEST_TIMEOUT:-30}" "$KVBENCH" "${args[@]}" >/dev/null 2>"$T/err" || rc=$?
        if [ "$rc" != "$want" ] || [ "$(wc -l <"$T/err")" != 1 ] || ! grep -qF -- "$expect" "$T/err"; then
            fail "$name ($c): exit $rc (want $want), stderr: $(head -c 400 "$T/err") (want '$expect')"
        else echo "ok   $name ($c): $(cat "$T/err")"; fi
        [ "$(dump "$db")" = "$was" ] || { fail "$name ($c): the results file changed"; was=$(dump "$db"); }
    done
}
fresh() { rm -rf "$T/bad"; cp -r "$T/$1/hf" "$T/bad"; }
setj() {   # setj FILE PYTHON-ON-c
    "$PY" -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); $2; json.dump(c, open(p,'w'))" "$T/bad/$1"
}
B=$T/bad
IDX=$B/model.safetensors.index.json

# the index: a shard is a file of the directory
fresh qwen2; setj model.safetensors.index.json "c['weight_map']['model.norm.weight']='../../x.safetensors'"
refused "index entry ../../x.safetensors" 2 \
    "$IDX: field 'weight_map.model.norm.weight' = '../../x.safetensors' is not a file name in the directory" "$B"
fresh qwen2; setj model.safetensors.index.json "c['weight_map']['model.norm.weight']='/etc/passwd'"
refused "index entry /etc/passwd" 2 "$IDX: field 'weight_map.model.norm.weight' = '/etc/passwd' is not a file name" "$B" info
fresh qwen2; setj model.safetensors.index.json "c['weight_map']['model.norm.weight']='..'"
refused "index entry .." 2 "$IDX: field 'weight_map.model.norm.weight' = '..' is not a file name" "$B" info
fresh qwen2; setj model.safetensors.index.json "c['weight_map']['model.norm.weight']=5"
refused "index entry 5" 2 "$IDX: field 'weight_map.model.norm.weight' is not a string" "$B"

# config.json: the user's key and value, not the converted GGUF key
fresh qwen2; setj config.json "c['rope_scaling']['original_max_position_embeddings']=1e20"
refused "yarn original_max_position_embeddings 1e20" 2 \
    "$B/config.json: field 'rope_scaling.original_max_position_embeddings' = 1e+20 is not an integer in [1, 16777216]" "$B"
fresh qwen2; setj config.json "c['rope_scaling']['original_max_position_embeddings']=0.5"
refused "yarn original_max_position_embeddings 0.5" 2 \
    "$B/config.json: field 'rope_scaling.original_max_position_embeddings' = 0.5 is not an integer" "$B" info
fresh qwen2; setj config.json "c['rope_scaling']['attention_factor']=1e30"
refused "yarn attention_factor 1e30" 2 "$B/config.json: field 'rope_scaling.attention_factor' = 1e+30 is outside (0, 16]" "$B"
fresh qwen2; setj config.json "c['rope_scaling']['beta_fast']=-1"
refused "yarn beta_fast -1" 2 "$B/config.json: field 'rope_scaling.beta_fast' = -1 is not positive" "$B" info
fresh qwen2; setj config.json "c['rms_norm_eps']=1e-300"
refused "rms_norm_eps 1e-300 (0 as a float32)" 2 "$B/config.json: field 'rms_norm_eps' = 1e-300 is below 1e-30" "$B" info
fresh qwen2; setj config.json "c['rope_scaling']['type']=3"
refused "integer rope type" 2 "$B/config.json: field 'rope_scaling.type' must be a string" "$B" info
fresh llama; setj config.json "c['rope_scaling']['rope_type']=3"
refused "integer rope_type" 2 "$B/config.json: field 'rope_scaling.rope_type' must be a string" "$B" info
fresh llama; setj config.json "c['sliding_window']=-5"
refused "sliding_window -5" 2 "$B/config.json: field 'sliding_window' = -5 is not an integer in [1, 16777216]" "$B"
fresh llama; setj config.json "c['bos_token_id']=5000"
refused "bos_token_id 5000" 2 "$B/config.json: field 'bos_token_id' = 5000 is not a token of the vocabulary (263 tokens)" "$B"
fresh llama; setj config.json "c['eos_token_id']=[7000, 1]"
refused "eos_token_id [7000]" 2 "$B/config.json: field 'eos_token_id' = 7000 is not a token of the vocabulary" "$B" info
fresh llama; setj config.json "c['bos_token_id']='<s>'"
refused "bos_token_id text" 2 "$B/config.json: field 'bos_token_id' is not a token id" "$B" info
fresh llama; setj config.json "c['vocab_size']=16000000"
refused "vocab_size 16M past the embedding" 2 \
    "$B/config.json: field 'vocab_size' is 16000000 but model.embed_tokens.weight has 263 rows" "$B" info
fresh llama; setj config.json "c['num_key_value_heads']=3"
refused "kv heads 3 of 4" 2 "$B/config.json: field 'num_attention_heads' = 4 is not a multiple of 'num_key_value_heads' = 3" "$B" info

# safetensors: two tensors on the same bytes
fresh llama; "$PY" - "$B/model.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]; b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); a = "model.layers.0.mlp.up_proj.weight"; c = "model.layers.0.mlp.gate_proj.weight"
h[c]["data_offsets"] = h[a]["data_offsets"]
s = json.dumps(h).encode(); s += b" " * (-len(s) % 8)
open(p, "wb").write(struct.pack("<Q", len(s)) + s + b[8 + n:])
PY
refused "overlapping tensors" 2 "$B/model.safetensors: tensors model.layers.0.mlp.gate_proj.weight" "$B"
grep -q "overlap$" "$T/err" || fail "overlapping tensors: $(cat "$T/err")"

# a GGUF's yarn attn_factor out of range, by its key
refused "GGUF attn_factor 1e30" 2 "$T/attn/model.gguf: metadata key qwen2.rope.scaling.attn_factor = 1e+30 is outside (0, 16]" \
    "$T/attn/model.gguf"

# files that are not regular, or too large: refused at once, never read
fresh llama; rm "$B/config.json"; ln -s /dev/zero "$B/config.json"
refused "config.json is /dev/zero" 2 "$B/config.json: not a regular file (a character device)" "$B"
fresh llama; rm "$B/config.json"; mkfifo "$B/config.json"
refused "config.json is a FIFO" 2 "$B/config.json: not a regular file (a FIFO)" "$B"
fresh llama; rm "$B/tokenizer.json"; ln -s /dev/zero "$B/tokenizer.json"
refused "tokenizer.json is /dev/zero" 2 "$B/tokenizer.json: not a regular file (a character device)" "$B" info
fresh llama; rm "$B/model.safetensors"; mkfifo "$B/model.safetensors"
refused "model.safetensors is a FIFO" 2 "$B/model.safetensors: not a regular file (a FIFO)" "$B"
fresh llama; mkfifo "$B/chat_template.jinja"; setj tokenizer_config.json "del c['chat_template']"
refused "chat_template.jinja is a FIFO" 2 "$B/chat_template.jinja: not a regular file (a FIFO)" "$B" info
fresh llama; truncate -s 257M "$B/tokenizer.json"    # sparse: no disk
refused "tokenizer.json of 257 MiB" 2 "$B/tokenizer.json: is 257 MiB, larger than the 256 MiB kvbench reads" "$B" info
mkfifo "$T/model.gguf"
refused "a GGUF that is a FIFO" 2 "$T/model.gguf: not a regular file (a FIFO)" "$T/model.gguf"
# workload data: exit 1, as every error in a workload's data (the default model first)
if [ ! -f "$MODEL" ]; then echo "SKIP haystack and JSONL: no model at $MODEL (make model)"; else
mkfifo "$T/hay.txt"
refused "haystack FIFO" 1 "$T/hay.txt: not a regular file (a FIFO)" "$T/hay.txt" hay
mkdir "$T/lb"; ln -s /dev/zero "$T/lb/narrativeqa.jsonl"
refused "LongBench JSONL is /dev/zero" 1 "$T/lb/narrativeqa.jsonl: not a regular file (a character device)" "$T/lb" longbench
fi

[ "$fails" = 0 ] && echo "test_hf_bad_input: ok" || { echo "test_hf_bad_input: $fails failure(s)"; exit 1; }

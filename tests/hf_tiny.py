"""Writes a tiny random Hugging Face checkpoint directory and, from the same arrays, the
GGUF llama.cpp's convert_hf_to_gguf.py would make of it (the same metadata keys, norms in
F32, llama's Q/K rows permuted as LlamaModel.permute does, llama3 scaling as the rope_freqs
tensor computed as LlamaModel.generate_extra_tensors does), for tests/test_hf_model.sh.

usage: hf_tiny.py VARIANT OUT_DIR SEED DTYPE SHARDS
  VARIANT: llama (llama3 rope scaling, tied output), qwen2 (q/k/v biases, YaRN, untied),
           mistral (MistralForCausalLM, SentencePiece-style tokenizer, untied)
  DTYPE: f32 | f16 | bf16 (the 2-D weights; the safetensors files hold everything in it)
  SHARDS: 1 writes model.safetensors, N > 1 model-0000i-of-0000N.safetensors + the index
Writes OUT_DIR/hf/ (the checkpoint), OUT_DIR/model.gguf and OUT_DIR/p0_ids.txt (random
prompt ids, past the original context of 256). HF_TINY_GGUF_F32=KEY=VALUE,... adds float32
keys to the GGUF (a bad value for a test)."""
import json
import math
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter, RopeScalingType, TokenType
from safetensors import serialize_file
from safetensors.numpy import save_file
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

E, H, HKV, HD, FF, LAYERS = 64, 4, 2, 16, 96, 2
ORIG_CTX, N_PROMPT = 256, 960


def byte_level_tokenizer():
    """A GPT-2-style byte-level BPE: the 256 byte characters, a few merges, two specials."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    extra = [b for b in range(256) if b not in keep]
    table = {b: chr(b) for b in keep}
    table.update({b: chr(256 + i) for i, b in enumerate(extra)})
    vocab = {table[b]: b for b in range(256)}
    merges = [("\u0120", "t"), ("h", "e"), ("\u0120t", "he"), ("i", "n"), ("\u0120", "a")]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    tok = Tokenizer(models.BPE(vocab, merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>", "<|im_end|>"])
    return tok


def spm_tokenizer():
    """Mistral's SentencePiece-style BPE: <unk> <s> </s>, <0xXX> bytes, U+2581 spaces."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for ch in "\u2581abcdefghijklmnopqrstuvwxyz.,":
        vocab[ch] = len(vocab)
    merges = [("\u2581", "t"), ("h", "e"), ("\u2581t", "he"), ("i", "n"), ("\u2581", "a")]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.add_special_tokens(["<unk>", "<s>", "</s>"])
    return tok


def bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (as torch's .to(bfloat16))."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def permute(w, n_head):
    """convert_hf_to_gguf's LlamaModel.permute: transformers' halves -> llama.cpp's pairs."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_freqs(theta, dim, rs):
    """convert_hf_to_gguf LlamaModel.generate_extra_tensors: float32 freqs, bands in double."""
    freqs = 1.0 / (np.float32(theta) ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))
    factor, lo, hi, old = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
    lo_wl, hi_wl = old / lo, old / hi
    out = []
    for f in freqs.astype(np.float32):
        wl = 2 * math.pi / float(f)
        if wl < hi_wl:
            out.append(1.0)
        elif wl > lo_wl:
            out.append(factor)
        else:
            s = (old / wl - lo) / (hi - lo)
            out.append(1 / ((1 - s) / factor + s))
    return np.array(out, dtype=np.float32)


def main():
    variant, out, seed, dtype, shards = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    rng = np.random.default_rng(seed)
    hf = os.path.join(out, "hf")
    os.makedirs(hf, exist_ok=True)
    arch = "qwen2" if variant == "qwen2" else "llama"
    tok = spm_tokenizer() if variant == "mistral" else byte_level_tokenizer()
    n_tok = tok.get_vocab_size(with_added_tokens=True)
    V = n_tok + (3 if variant == "qwen2" else 0)        # qwen2: padded past the tokenizer, as Qwen2.5
    tied = variant == "llama"
    cfg = {"architectures": {"llama": ["LlamaForCausalLM"], "qwen2": ["Qwen2ForCausalLM"],
                             "mistral": ["MistralForCausalLM"]}[variant],
           "model_type": variant, "hidden_size": E, "intermediate_size": FF, "num_attention_heads": H,
           "num_key_value_heads": HKV, "num_hidden_layers": LAYERS, "vocab_size": V,
           "rms_norm_eps": 1e-5 if arch == "llama" else 1e-6, "rope_theta": 10000.0,
           "max_position_embeddings": 4 * ORIG_CTX, "tie_word_embeddings": tied, "hidden_act": "silu",
           "torch_dtype": {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[dtype]}
    if variant == "llama":
        cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": ORIG_CTX}
        cfg["bos_token_id"], cfg["eos_token_id"] = n_tok - 2, n_tok - 2
    if variant == "qwen2":
        cfg["rope_scaling"] = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": ORIG_CTX}
        cfg["use_sliding_window"], cfg["sliding_window"] = False, 4 * ORIG_CTX
    if variant == "mistral":
        cfg["sliding_window"] = None
        cfg["bos_token_id"], cfg["eos_token_id"] = 1, 2

    def mat(rows, cols):
        return rng.standard_normal((rows, cols)) * cols ** -0.5

    w = {"model.embed_tokens.weight": mat(V, E) * 2, "model.norm.weight": 1 + 0.1 * rng.standard_normal(E)}
    if not tied:
        w["lm_head.weight"] = mat(V, E)
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(E)
        w[p + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(E)
        w[p + "self_attn.q_proj.weight"] = mat(H * HD, E) * 3
        w[p + "self_attn.k_proj.weight"] = mat(HKV * HD, E) * 3
        w[p + "self_attn.v_proj.weight"] = mat(HKV * HD, E)
        w[p + "self_attn.o_proj.weight"] = mat(E, H * HD)
        w[p + "mlp.gate_proj.weight"] = mat(FF, E)
        w[p + "mlp.up_proj.weight"] = mat(FF, E)
        w[p + "mlp.down_proj.weight"] = mat(E, FF)
        if arch == "qwen2":
            for n, rows in (("q", H * HD), ("k", HKV * HD), ("v", HKV * HD)):
                w[p + f"self_attn.{n}_proj.bias"] = 0.3 * rng.standard_normal(rows)
    # the stored values: rounded to the dtype once, the GGUF gets exactly these
    stored, values = {}, {}
    for k, x in w.items():
        x = x.astype(np.float32)
        if dtype == "bf16":
            stored[k] = bf16_bits(x)
            values[k] = bf16_value(stored[k])
        else:
            stored[k] = x.astype(np.float16 if dtype == "f16" else np.float32)
            values[k] = stored[k].astype(np.float32)

    names = sorted(stored)
    groups = [names[i::shards] for i in range(shards)]
    index = {}
    for i, g in enumerate(groups):
        fname = "model.safetensors" if shards == 1 else f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        if dtype == "bf16":
            from safetensors import TensorSpec
            keep = {k: np.ascontiguousarray(stored[k]) for k in g}
            spec = {k: TensorSpec(dtype="bfloat16", shape=list(v.shape), data_ptr=v.ctypes.data, data_len=v.nbytes)
                    for k, v in keep.items()}
            serialize_file(spec, os.path.join(hf, fname), {"format": "pt"})
        else:
            save_file({k: np.ascontiguousarray(stored[k]) for k in g}, os.path.join(hf, fname), {"format": "pt"})
        index.update({k: fname for k in g})
    if shards > 1:
        with open(os.path.join(hf, "model.safetensors.index.json"), "w") as fh:
            json.dump({"metadata": {"total_size": sum(v.nbytes for v in stored.values())}, "weight_map": index}, fh)
    with open(os.path.join(hf, "config.json"), "w") as fh:
        json.dump(cfg, fh, indent=2)
    tok.save(os.path.join(hf, "tokenizer.json"))
    tcfg = {"add_bos_token": variant == "mistral",
            "eos_token": "</s>" if variant == "mistral" else "<|endoftext|>",
            "chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"}
    if variant == "mistral":
        tcfg["bos_token"] = "<s>"
        tcfg["chat_template"] = "{{ bos_token }}{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}"
    with open(os.path.join(hf, "tokenizer_config.json"), "w") as fh:
        json.dump(tcfg, fh)

    # ---- the GGUF, as convert_hf_to_gguf.py writes it ----
    g = GGUFWriter(os.path.join(out, "model.gguf"), arch)
    g.add_name("hf")
    g.add_context_length(cfg["max_position_embeddings"])
    g.add_embedding_length(E)
    g.add_block_count(LAYERS)
    g.add_feed_forward_length(FF)
    g.add_rope_freq_base(cfg["rope_theta"])
    g.add_head_count(H)
    g.add_head_count_kv(HKV)
    g.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    g.add_vocab_size(V)
    g.add_rope_dimension_count(HD)
    if variant == "qwen2":
        g.add_rope_scaling_type(RopeScalingType.YARN)
        g.add_rope_scaling_factor(4.0)
        g.add_rope_scaling_orig_ctx_len(ORIG_CTX)
    vocab = {v: k for k, v in tok.get_vocab(with_added_tokens=True).items()}
    added = {t.content: t for t in tok.get_added_tokens_decoder().values()}
    tokens, types = [], []
    for i in range(V):
        t = vocab.get(i)
        if t is None:
            tokens.append(f"[PAD{i}]")
            types.append(TokenType.UNUSED)
        elif t in added:
            tokens.append(t)
            types.append(TokenType.CONTROL if added[t].special else TokenType.USER_DEFINED)
        elif variant == "mistral" and t.startswith("<0x") and len(t) == 6:
            tokens.append(t)
            types.append(TokenType.BYTE)
        else:
            tokens.append(t)
            types.append(TokenType.NORMAL)
    tj = json.loads(tok.to_str())
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    g.add_tokenizer_model("llama" if variant == "mistral" else "gpt2")
    if variant != "mistral":
        g.add_tokenizer_pre("gpt2")
    g.add_token_list(tokens)
    g.add_token_types(types)
    g.add_token_merges(merges)
    eos = tokens.index(tcfg["eos_token"])
    g.add_eos_token_id(eos)
    ggml = {"f32": GGMLQuantizationType.F32, "f16": GGMLQuantizationType.F16, "bf16": GGMLQuantizationType.BF16}[dtype]

    def put(name, hf_name, perm=None):
        x = stored[hf_name]
        if perm:
            x = permute(x, perm)
        if x.ndim == 1:                      # norms and biases: F32, as the converter writes them
            g.add_tensor(name, values[hf_name])
        elif dtype == "bf16":
            g.add_tensor(name, x, raw_shape=x.shape, raw_dtype=ggml)
        else:
            g.add_tensor(name, x)

    put("token_embd.weight", "model.embed_tokens.weight")
    put("output_norm.weight", "model.norm.weight")
    if not tied:
        put("output.weight", "lm_head.weight")
    if variant == "llama":
        g.add_tensor("rope_freqs.weight", llama3_rope_freqs(cfg["rope_theta"], HD, cfg["rope_scaling"]))
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        put(f"blk.{l}.attn_norm.weight", p + "input_layernorm.weight")
        put(f"blk.{l}.ffn_norm.weight", p + "post_attention_layernorm.weight")
        put(f"blk.{l}.attn_q.weight", p + "self_attn.q_proj.weight", H if arch == "llama" else None)
        put(f"blk.{l}.attn_k.weight", p + "self_attn.k_proj.weight", HKV if arch == "llama" else None)
        put(f"blk.{l}.attn_v.weight", p + "self_attn.v_proj.weight")
        put(f"blk.{l}.attn_output.weight", p + "self_attn.o_proj.weight")
        put(f"blk.{l}.ffn_gate.weight", p + "mlp.gate_proj.weight")
        put(f"blk.{l}.ffn_up.weight", p + "mlp.up_proj.weight")
        put(f"blk.{l}.ffn_down.weight", p + "mlp.down_proj.weight")
        if arch == "qwen2":
            for n in "qkv":
                put(f"blk.{l}.attn_{n}.bias", p + f"self_attn.{n}_proj.bias")
    for kv in filter(None, os.environ.get("HF_TINY_GGUF_F32", "").split(",")):
        key, val = kv.split("=")
        g.add_float32(key, float(val))
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()
    ids = rng.integers(3, n_tok - 2, N_PROMPT)
    with open(os.path.join(out, "p0_ids.txt"), "w") as fh:
        fh.write(" ".join(str(int(i)) for i in ids) + "\n")


if __name__ == "__main__":
    main()

"""Writes the GGUF seeds of the fuzz_gguf target (tests/fuzz/corpus/gguf/): two small
valid models (llama with linear rope scaling, qwen2 with Q/K/V biases; one layer, a
byte-level BPE vocabulary), so the fuzzer starts from files the loader accepts.

usage: seed_gguf.py OUT_DIR
"""
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter, RopeScalingType, TokenType
from gguf.quants import quantize

E, H, HKV, HD, FF, CTX = 32, 2, 1, 16, 32, 64


def byte_tokens():
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    extra = [b for b in range(256) if b not in keep]
    table = {b: chr(b) for b in keep}
    table.update({b: chr(256 + i) for i, b in enumerate(extra)})
    return [table[b] for b in range(256)]


def write(path, arch, rng):
    w = GGUFWriter(path, arch)
    w.add_block_count(1)
    w.add_context_length(CTX)
    w.add_embedding_length(E)
    w.add_feed_forward_length(FF)
    w.add_head_count(H)
    w.add_head_count_kv(HKV)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    if arch == "llama":
        w.add_rope_scaling_type(RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(2.0)
    tokens = byte_tokens() + ["\u0120t", "he", "<|endoftext|>"]
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_merges(["\u0120 t", "h e"])
    w.add_token_types([TokenType.NORMAL] * (len(tokens) - 1) + [TokenType.CONTROL])
    w.add_bos_token_id(len(tokens) - 1)
    w.add_eos_token_id(len(tokens) - 1)
    V = len(tokens)

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols)) * cols ** -0.5).astype(np.float32)

    w.add_tensor("token_embd.weight", quantize(mat(V, E), GGMLQuantizationType.Q8_0),
                 raw_dtype=GGMLQuantizationType.Q8_0)
    w.add_tensor("output_norm.weight", np.ones(E, np.float32))
    p = "blk.0."
    w.add_tensor(p + "attn_norm.weight", np.ones(E, np.float32))
    w.add_tensor(p + "ffn_norm.weight", np.ones(E, np.float32))
    w.add_tensor(p + "attn_q.weight", mat(H * HD, E).astype(np.float16))
    w.add_tensor(p + "attn_k.weight", mat(HKV * HD, E))
    w.add_tensor(p + "attn_v.weight", mat(HKV * HD, E))
    if arch == "qwen2":
        for n, size in (("q", H * HD), ("k", HKV * HD), ("v", HKV * HD)):
            w.add_tensor(p + f"attn_{n}.bias", np.zeros(size, np.float32))
    w.add_tensor(p + "attn_output.weight", mat(E, H * HD))
    w.add_tensor(p + "ffn_gate.weight", mat(FF, E))
    w.add_tensor(p + "ffn_up.weight", mat(FF, E))
    w.add_tensor(p + "ffn_down.weight", mat(E, FF))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    rng = np.random.default_rng(14)
    for arch in ("llama", "qwen2"):
        write(f"{sys.argv[1]}/{arch}.gguf", arch, rng)

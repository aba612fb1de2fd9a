"""Writes a tiny random GGUF model with the gguf package's writer, to exercise the engine
paths SmolLM2 does not: qwen2 (Q/K/V biases, NeoX rope), an untied output matrix, linear
rope scaling, F16/Q8_0 weights; and a variant with yarn rope scaling that must be refused.
Also writes DIR/p0_ids.txt, random prompt ids for `test_model --dump-model`.

usage: model_tiny.py VARIANT OUT.gguf IDS_DIR SEED    (VARIANT: llama | qwen2 | yarn)
"""
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter, RopeScalingType, TokenType
from gguf.quants import quantize

E, H, HKV, HD, FF, LAYERS, CTX = 64, 4, 2, 16, 96, 2, 128


def byte_tokens():
    """GPT-2's byte -> printable unicode map, as the 256 base tokens."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    extra = [b for b in range(256) if b not in keep]
    table = {b: chr(b) for b in keep}
    table.update({b: chr(256 + i) for i, b in enumerate(extra)})
    return [table[b] for b in range(256)]


def main():
    variant, out, ids_dir, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    rng = np.random.default_rng(seed)
    arch = "qwen2" if variant == "qwen2" else "llama"
    w = GGUFWriter(out, arch)
    w.add_name(f"tiny-{variant}")
    w.add_block_count(LAYERS)
    w.add_context_length(CTX)
    w.add_embedding_length(E)
    w.add_feed_forward_length(FF)
    w.add_head_count(H)
    w.add_head_count_kv(HKV)
    w.add_rope_freq_base(1000.0 if arch == "qwen2" else 10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    if variant == "llama":
        w.add_rope_scaling_type(RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(2.0)
    if variant == "yarn":
        w.add_rope_scaling_type(RopeScalingType.YARN)
        w.add_rope_scaling_factor(4.0)
    tokens = byte_tokens() + ["\u0120t", "he", "\u0120the", "<|endoftext|>"]
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_merges(["\u0120 t", "h e", "\u0120t he"])
    w.add_token_types([TokenType.NORMAL] * (len(tokens) - 1) + [TokenType.CONTROL])
    w.add_bos_token_id(len(tokens) - 1)
    w.add_eos_token_id(len(tokens) - 1)
    V = len(tokens)

    def mat(rows, cols, scale=None):
        return (rng.standard_normal((rows, cols)) * (scale or cols ** -0.5)).astype(np.float32)

    def q8(name, x):
        w.add_tensor(name, quantize(x, GGMLQuantizationType.Q8_0), raw_dtype=GGMLQuantizationType.Q8_0)

    q8("token_embd.weight", mat(V, E, 1.0))
    w.add_tensor("output_norm.weight", (1 + 0.1 * rng.standard_normal(E)).astype(np.float32))
    if variant != "yarn":
        w.add_tensor("output.weight", mat(V, E))
    for l in range(LAYERS):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", (1 + 0.1 * rng.standard_normal(E)).astype(np.float32))
        w.add_tensor(p + "ffn_norm.weight", (1 + 0.1 * rng.standard_normal(E)).astype(np.float32))
        w.add_tensor(p + "attn_q.weight", mat(H * HD, E, 0.5).astype(np.float16))
        w.add_tensor(p + "attn_k.weight", mat(HKV * HD, E, 0.5))
        w.add_tensor(p + "attn_v.weight", mat(HKV * HD, E))
        if arch == "qwen2":
            for n, size in (("q", H * HD), ("k", HKV * HD), ("v", HKV * HD)):
                w.add_tensor(p + f"attn_{n}.bias", (0.5 * rng.standard_normal(size)).astype(np.float32))
        q8(p + "attn_output.weight", mat(E, H * HD))
        w.add_tensor(p + "ffn_gate.weight", mat(FF, E))
        w.add_tensor(p + "ffn_up.weight", mat(FF, E))
        q8(p + "ffn_down.weight", mat(E, FF))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    ids = rng.integers(0, V - 1, size=int(rng.integers(12, 40)))
    with open(f"{ids_dir}/p0_ids.txt", "w") as f:
        f.write(" ".join(str(i) for i in ids) + "\n")


if __name__ == "__main__":
    main()

"""Writes a tiny random GGUF model with the gguf package's writer, to exercise the engine
paths SmolLM2 does not: qwen2 (Q/K/V biases, NeoX rope), an untied output matrix, linear
rope scaling, F16/Q8_0 weights, and the long-context RoPE scalings past a short original
context (256), written the way llama.cpp's convert_hf_to_gguf.py writes them:
  kquant   llama with 256-wide rows in Q4_K, Q5_K, Q6_K (random blocks), Q5_0 and Q5_1, mixed
           within the Q/K/V and gate/up groups (8-bit activations of both block layouts)
  llama3   Llama-3.1-shaped: only the rope_freqs tensor (no rope.scaling keys)
  yarn     qwen2 with rope.scaling.type yarn, factor, original_context_length
  yarnb    llama with yarn and the yarn_beta_fast / yarn_beta_slow keys
  mistral  Mistral-7B-v0.1-shaped llama: rope base 1e6, group of 4, attention.sliding_window
and files the engine must refuse: dynamic (rope.scaling.type dynamic), bogus (an unknown
type), badfreqs (a rope_freqs tensor of the wrong length).
Writes DIR/p0_ids.txt, random prompt ids for `test_model --dump-model` (about 1K for the
long-context variants, past the original context), and for the scaled variants
DIR/rope_scaling.json, the config.json rope_scaling object the file stands for
(model_ref.py --rope-scaling: transformers' side of the comparison).

usage: model_tiny.py VARIANT OUT.gguf IDS_DIR SEED
"""
import json
import math
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter, RopeScalingType, TokenType
from gguf.quants import quantize

E, H, HKV, HD, FF, LAYERS, CTX = 64, 4, 2, 16, 96, 2, 128
LONG_CTX, ORIG_CTX, WINDOW = 4096, 256, 2048   # the long-context variants
LONG = ("llama3", "yarn", "yarnb", "mistral")
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": ORIG_CTX}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": ORIG_CTX}
YARNB = dict(YARN, beta_fast=16.0, beta_slow=2.0)


def byte_tokens():
    """GPT-2's byte -> printable unicode map, as the 256 base tokens."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    extra = [b for b in range(256) if b not in keep]
    table = {b: chr(b) for b in keep}
    table.update({b: chr(256 + i) for i, b in enumerate(extra)})
    return [table[b] for b in range(256)]


def llama3_rope_freqs(base, dim, rs):
    """The rope_freqs tensor as convert_hf_to_gguf.py's LlamaModel computes it for
    rope_type llama3: per pair, 1 (short wavelengths), factor (long ones) or the inverse of
    the smooth mix, from float32 frequencies."""
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    out = []
    for f in freqs:
        wavelen = 2 * math.pi / float(f)
        if wavelen < old / high:
            out.append(1.0)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def kquant_blocks(rng, rows, cols, qt):
    """Random K-quant rows (the gguf package has no K-quant quantizer): random codes and
    sub-block scales, with d (and dmin) set per block so each weight is about cols^-0.5
    in size and centred (random factors in [0.5, 1.5), never zero)."""
    s = cols ** -0.5
    nb = cols // 256
    size = {GGMLQuantizationType.Q4_K: 144, GGMLQuantizationType.Q5_K: 176, GGMLQuantizationType.Q6_K: 210}[qt]
    raw = rng.integers(0, 256, size=(rows, nb, size), dtype=np.uint8)

    def put(at, v):
        raw[:, :, at:at + 2] = (v * rng.uniform(0.5, 1.5, size=(rows, nb))).astype(np.float16)[..., None].view(np.uint8)

    if qt == GGMLQuantizationType.Q6_K:
        put(208, s / (64 * 32))
    else:
        put(0, 2 * s / (63 * (15 if qt == GGMLQuantizationType.Q4_K else 31)))
        put(2, s / 63)
    return raw.reshape(rows, nb * size)


def main():
    global E, FF, HD
    variant, out, ids_dir, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    rng = np.random.default_rng(seed)
    if variant == "kquant":   # rows of whole 256-blocks
        E, FF, HD = 256, 512, 64
    arch = "qwen2" if variant in ("qwen2", "yarn") else "llama"
    hkv = 1 if variant == "mistral" else HKV
    base = 1000.0 if arch == "qwen2" else 1e6 if variant == "mistral" else 10000.0
    w = GGUFWriter(out, arch)
    w.add_name(f"tiny-{variant}")
    w.add_block_count(LAYERS)
    w.add_context_length(LONG_CTX if variant in LONG else CTX)
    w.add_embedding_length(E)
    w.add_feed_forward_length(FF)
    w.add_head_count(H)
    w.add_head_count_kv(hkv)
    w.add_rope_freq_base(base)
    w.add_layer_norm_rms_eps(1e-6)
    rope = {"llama3": LLAMA3, "yarn": YARN, "yarnb": YARNB}.get(variant)
    if variant == "llama":
        w.add_rope_scaling_type(RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(2.0)
    if variant in ("yarn", "yarnb"):
        w.add_rope_scaling_type(RopeScalingType.YARN)
        w.add_rope_scaling_factor(rope["factor"])
        w.add_rope_scaling_orig_ctx_len(ORIG_CTX)
    if variant == "yarnb":
        w.add_rope_scaling_yarn_beta_fast(rope["beta_fast"])
        w.add_rope_scaling_yarn_beta_slow(rope["beta_slow"])
    if variant == "mistral":
        w.add_sliding_window(WINDOW)
    if variant in ("dynamic", "bogus"):
        w.add_string(f"{arch}.rope.scaling.type", variant)
        w.add_rope_scaling_factor(2.0)
    if variant == "llama3":
        w.add_tensor("rope_freqs.weight", llama3_rope_freqs(base, HD, rope))
    if variant == "badfreqs":
        w.add_tensor("rope_freqs.weight", np.ones(HD // 2 - 1, dtype=np.float32))
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

    T = GGMLQuantizationType

    def typed(name, rows, cols, qt):
        if qt in (T.Q5_0, T.Q5_1):
            w.add_tensor(name, quantize(mat(rows, cols), qt), raw_dtype=qt)
        else:
            w.add_tensor(name, kquant_blocks(rng, rows, cols, qt), raw_dtype=qt)

    if variant == "kquant":
        # layer 0: Q/K/V and gate/up each share a block layout (256); layer 1 mixes Q5_0 / Q5_1
        # (32) with Q4_K in both groups, so a job there falls back to f32 activations
        layers = [dict(q=T.Q4_K, k=T.Q4_K, v=T.Q6_K, o=T.Q5_K, gate=T.Q4_K, up=T.Q6_K, down=T.Q6_K),
                  dict(q=T.Q5_0, k=T.Q4_K, v=T.Q5_1, o=T.Q5_1, gate=T.Q5_0, up=T.Q4_K, down=T.Q5_K)]
        q8("token_embd.weight", mat(V, E, 1.0))
        w.add_tensor("output_norm.weight", (1 + 0.1 * rng.standard_normal(E)).astype(np.float32))
        typed("output.weight", V, E, T.Q6_K)
        for l, t in enumerate(layers):
            p = f"blk.{l}."
            w.add_tensor(p + "attn_norm.weight", (1 + 0.1 * rng.standard_normal(E)).astype(np.float32))
            w.add_tensor(p + "ffn_norm.weight", (1 + 0.1 * rng.standard_normal(E)).astype(np.float32))
            typed(p + "attn_q.weight", H * HD, E, t["q"])
            typed(p + "attn_k.weight", hkv * HD, E, t["k"])
            typed(p + "attn_v.weight", hkv * HD, E, t["v"])
            typed(p + "attn_output.weight", E, H * HD, t["o"])
            typed(p + "ffn_gate.weight", FF, E, t["gate"])
            typed(p + "ffn_up.weight", FF, E, t["up"])
            typed(p + "ffn_down.weight", E, FF, t["down"])

    if variant != "kquant":
        q8("token_embd.weight", mat(V, E, 1.0))
        w.add_tensor("output_norm.weight", (1 + 0.1 * rng.standard_normal(E)).astype(np.float32))
    if variant not in ("dynamic", "bogus", "badfreqs", "kquant"):
        w.add_tensor("output.weight", mat(V, E))
    for l in range(0 if variant == "kquant" else LAYERS):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", (1 + 0.1 * rng.standard_normal(E)).astype(np.float32))
        w.add_tensor(p + "ffn_norm.weight", (1 + 0.1 * rng.standard_normal(E)).astype(np.float32))
        w.add_tensor(p + "attn_q.weight", mat(H * HD, E, 0.5).astype(np.float16))
        w.add_tensor(p + "attn_k.weight", mat(hkv * HD, E, 0.5))
        w.add_tensor(p + "attn_v.weight", mat(hkv * HD, E))
        if arch == "qwen2":
            for n, size in (("q", H * HD), ("k", hkv * HD), ("v", hkv * HD)):
                w.add_tensor(p + f"attn_{n}.bias", (0.5 * rng.standard_normal(size)).astype(np.float32))
        q8(p + "attn_output.weight", mat(E, H * HD))
        w.add_tensor(p + "ffn_gate.weight", mat(FF, E))
        w.add_tensor(p + "ffn_up.weight", mat(FF, E))
        q8(p + "ffn_down.weight", mat(E, FF))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    n = int(rng.integers(900, 1100)) if variant in LONG else int(rng.integers(12, 40))
    ids = rng.integers(0, V - 1, size=n)
    with open(f"{ids_dir}/p0_ids.txt", "w") as f:
        f.write(" ".join(str(i) for i in ids) + "\n")
    if rope:
        with open(f"{ids_dir}/rope_scaling.json", "w") as f:
            json.dump(rope, f)


if __name__ == "__main__":
    main()

"""The engine's run of a Hugging Face directory against tests/model_ref.py's float64
forward pass, fed the directory's own weights in transformers' layout: the safetensors
files are read here (their JSON header and raw bytes, not through kvbench or the
safetensors package), Q/K rows stay as transformers has them and the reference rotates
halves (transformers' rotate_half) for every architecture. So the loader's llama Q/K
permutation, the dtype conversion and the tensor mapping are checked against an
independent reading of the checkpoint; the rope scaling follows
config.json's rope_scaling through model_ref's transformers formulas (the rest of the
settings from MODEL.gguf, the converter-style file of the same checkpoint); logits within
1e-4 relative L2.

usage: hf_ref.py HF_DIR MODEL.gguf DUMP_DIR"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import model_ref  # noqa: E402

NAMES = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
         "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
         "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
         "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
         "self_attn.v_proj.bias": "attn_v.bias", "mlp.gate_proj.weight": "ffn_gate.weight",
         "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}
TOP = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
       "lm_head.weight": "output.weight"}


def read_safetensors(path):
    with open(path, "rb") as fh:
        data = fh.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, f = e["data_offsets"]
        raw = data[base + b:base + f]
        if e["dtype"] == "BF16":
            x = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            x = np.frombuffer(raw, {"F32": np.float32, "F16": np.float16}[e["dtype"]])
        out[name] = x.astype(np.float64).reshape(e["shape"])
    return out


class HFReference(model_ref.Reference):
    """model_ref's forward pass with transformers' rotate_half pairs (i, i + n_rot/2) for
    every architecture: model_ref picks those for qwen2, so rope() runs as qwen2's."""

    def rope(self, x, pos):
        arch, self.arch = self.arch, "qwen2"
        try:
            return super().rope(x, pos)
        finally:
            self.arch = arch


def main():
    hf, gguf_path, dump = sys.argv[1:4]
    with open(os.path.join(hf, "config.json")) as fh:
        cfg = json.load(fh)
    model_ref.LOGIT_TOL = 1e-4                   # issue 24: relative L2 past the original context
    # rope scaling from config.json through transformers' formulas (model_ref checks a
    # rope_freqs tensor against them)
    ref = HFReference(gguf_path, cfg.get("rope_scaling"))
    files = sorted(f for f in os.listdir(hf) if f.endswith(".safetensors"))
    w = {}
    for f in files:
        for k, x in read_safetensors(os.path.join(hf, f)).items():
            if k in TOP:
                w[TOP[k]] = x
            else:
                parts = k.split(".", 3)          # model.layers.N.rest
                w[f"blk.{parts[2]}.{NAMES[parts[3]]}"] = x
    if cfg.get("tie_word_embeddings", True):
        w.pop("output.weight", None)
    ref.w = w
    ref.out = w.get("output.weight", w["token_embd.weight"])
    failures = model_ref.check_dump(ref, dump, False)
    print("hf_ref:", "FAIL" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

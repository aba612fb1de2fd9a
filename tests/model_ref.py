"""Independent float64 reference of the engine's forward pass (numpy + the gguf package).

Reads the weights with gguf.GGUFReader / gguf.quants.dequantize, runs the Llama forward
pass (RMSNorm, RoPE, GQA attention, SwiGLU, tied output) in float64 with its own KV cache,
and checks what `test_model --dump DIR` wrote for the same prompts:
  - the prefill's last logits: relative L2 error < 1e-3
  - per-position surprisal of the prompt: max |error| < 1e-3 nats
  - greedy decoding (32 steps or to a stop token): at every step the reference's argmax is
    the engine's token, so the reference's own greedy decode gives the same tokens, and
    each decode step's logits have relative L2 error < 1e-3 (a near-tie, relative gap < 1e-5,
    ends the comparison with a note instead).
With --q8 (a dump of `test_model --dump-q8`: decode with 8-bit activations, the default)
the decode steps are held to Q8_LOGIT_TOL instead, a gross-error check (a wrong block layout
or scale gives a relative error near 1; test_quant_q8 holds each mat-vec to its derived
bound), and a greedy token that differs from the reference's ends the comparison with a
note: the numbers printed are how far 8-bit activations move the logits.
usage: model_ref.py MODEL.gguf DUMP_DIR [--q8 Q8_DUMP_DIR]   (one load of the weights for both)
"""
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

LOGIT_TOL = 1e-3
SURPRISAL_TOL = 1e-3
NEAR_TIE = 1e-5      # relative logit gap below which f32 cannot be expected to pick the same token
Q8_LOGIT_TOL = 0.2   # --q8: decode steps (measured 1e-2..7e-2 on SmolLM2's two prompts)


def field(reader, key, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


class Reference:
    def __init__(self, path):
        r = GGUFReader(path)
        self.arch = field(r, "general.architecture")
        if self.arch not in ("llama", "qwen2"):
            raise SystemExit(f"{path}: architecture {self.arch} not handled by the reference")
        a = self.arch
        self.n_layer = field(r, f"{a}.block_count")
        self.n_head = field(r, f"{a}.attention.head_count")
        self.n_kv = field(r, f"{a}.attention.head_count_kv", self.n_head)
        n_embd = field(r, f"{a}.embedding_length")
        self.hd = field(r, f"{a}.attention.key_length", n_embd // self.n_head)
        self.n_rot = field(r, f"{a}.rope.dimension_count", self.hd)
        self.base = float(field(r, f"{a}.rope.freq_base", 10000.0))
        self.eps = float(field(r, f"{a}.attention.layer_norm_rms_epsilon"))
        self.w = {}
        for t in r.tensors:
            x = dequantize(t.data, t.tensor_type).astype(np.float64)
            shape = [int(v) for v in reversed(t.shape)]   # ne order -> [rows, cols]
            self.w[t.name] = x.reshape(shape) if len(shape) > 1 else x.reshape(-1)
        self.out = self.w.get("output.weight", self.w["token_embd.weight"])
        tokens = field(r, "tokenizer.ggml.tokens")
        self.stop = {field(r, "tokenizer.ggml.eos_token_id")} | {
            i for i, t in enumerate(tokens) if t in ("<|endoftext|>", "<|im_end|>", "<|eot_id|>")}
        scaling = field(r, f"{a}.rope.scaling.type")
        if scaling not in (None, "none", "linear"):
            raise SystemExit(f"{path}: rope scaling {scaling} not handled by the reference")
        self.pos_scale = 1.0 / float(field(r, f"{a}.rope.scaling.factor")) if scaling == "linear" else 1.0
        self.inv_freq = self.base ** (-np.arange(0, self.n_rot, 2, dtype=np.float64) / self.n_rot)

    def norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos):
        """x: [T, heads, hd], pos: [T]; llama pairs (2i, 2i+1), qwen2 pairs (i, i + n_rot/2)."""
        th = pos[:, None] * self.inv_freq[None, :]
        c, s = np.cos(th)[:, None, :], np.sin(th)[:, None, :]
        x = x.copy()
        half = self.n_rot // 2
        if self.arch == "qwen2":
            ia, ib = np.arange(half), np.arange(half) + half
        else:
            ia, ib = np.arange(0, self.n_rot, 2), np.arange(1, self.n_rot, 2)
        a, b = x[..., ia].copy(), x[..., ib].copy()
        x[..., ia] = a * c - b * s
        x[..., ib] = a * s + b * c
        return x

    def forward(self, ids, cache):
        """ids at positions len(cache) .. ; cache: list per layer of (K, V) [T, kv, hd]. Returns logits [T, V]."""
        T = len(ids)
        p0 = cache[0][0].shape[0] if cache else 0
        if not cache:
            cache.extend([(np.zeros((0, self.n_kv, self.hd)), np.zeros((0, self.n_kv, self.hd)))
                          for _ in range(self.n_layer)])
        pos = np.arange(p0, p0 + T, dtype=np.float64) * self.pos_scale
        x = self.w["token_embd.weight"][ids]
        g = self.n_head // self.n_kv
        for l in range(self.n_layer):
            W = lambda n: self.w[f"blk.{l}.{n}"]
            h = self.norm(x, W("attn_norm.weight"))
            q, k, v = h @ W("attn_q.weight").T, h @ W("attn_k.weight").T, h @ W("attn_v.weight").T
            if self.arch == "qwen2":
                q, k, v = q + W("attn_q.bias"), k + W("attn_k.bias"), v + W("attn_v.bias")
            q = self.rope(q.reshape(T, self.n_head, self.hd), pos)
            k = self.rope(k.reshape(T, self.n_kv, self.hd), pos)
            v = v.reshape(T, self.n_kv, self.hd)
            K, V = np.concatenate([cache[l][0], k]), np.concatenate([cache[l][1], v])
            cache[l] = (K, V)
            n = K.shape[0]
            att = np.empty((T, self.n_head, self.hd))
            mask = np.arange(n)[None, :] <= (p0 + np.arange(T))[:, None]
            for hq in range(self.n_head):
                s = q[:, hq, :] @ K[:, hq // g, :].T / np.sqrt(self.hd)
                s = np.where(mask, s, -np.inf)
                p = np.exp(s - s.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                att[:, hq, :] = p @ V[:, hq // g, :]
            x = x + att.reshape(T, -1) @ W("attn_output.weight").T
            h = self.norm(x, W("ffn_norm.weight"))
            gt, up = h @ W("ffn_gate.weight").T, h @ W("ffn_up.weight").T
            x = x + (gt / (1 + np.exp(-gt)) * up) @ W("ffn_down.weight").T
        return self.norm(x, self.w["output_norm.weight"]) @ self.out.T


def log_softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def rel(x, ref):
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


def check_dump(ref, dump, q8):
    """The checks above on one dump directory; returns the number of failures."""
    step_tol = Q8_LOGIT_TOL if q8 else LOGIT_TOL
    nv = ref.out.shape[0]
    failures = 0
    if q8:
        print(f"== 8-bit activations ({dump})")
    for p in range(2 if os.path.exists(f"{dump}/p1_ids.txt") else 1):
        ids = np.loadtxt(f"{dump}/p{p}_ids.txt", dtype=np.int64, ndmin=1)
        gen = np.loadtxt(f"{dump}/p{p}_gen.txt", dtype=np.int64, ndmin=1) if open(
            f"{dump}/p{p}_gen.txt").read().strip() else np.zeros(0, dtype=np.int64)
        surprisal = np.fromfile(f"{dump}/p{p}_surprisal.f32", dtype=np.float32).astype(np.float64)
        last = np.fromfile(f"{dump}/p{p}_last_logits.f32", dtype=np.float32).astype(np.float64)
        steps = np.fromfile(f"{dump}/p{p}_step_logits.f32", dtype=np.float32).astype(np.float64)
        steps = steps.reshape(-1, nv)
        cache = []
        logits = ref.forward(ids, cache)
        ref_surprisal = np.zeros(len(ids))
        ref_surprisal[1:] = -log_softmax(logits[:-1])[np.arange(len(ids) - 1), ids[1:]]
        e_last = rel(last, logits[-1])
        e_surp = float(np.abs(surprisal - ref_surprisal).max())
        print(f"prompt {p}: {len(ids)} tokens; last logits rel L2 {e_last:.2e}; "
              f"surprisal max |err| {e_surp:.2e} (mean surprisal {ref_surprisal[1:].mean():.2f} nats)")
        if not e_last < LOGIT_TOL:
            print(f"FAIL prompt {p}: last logits rel L2 {e_last:.3g} >= {LOGIT_TOL}")
            failures += 1
        if not e_surp < SURPRISAL_TOL:
            print(f"FAIL prompt {p}: surprisal max error {e_surp:.3g} >= {SURPRISAL_TOL}")
            failures += 1
        # Greedy decoding: the engine's tokens go through the reference's KV cache in one
        # pass; as every step's reference argmax must be the engine's token, this is the
        # reference's own greedy decode (row i of preds predicts generated token i).
        preds = np.concatenate([logits[-1:], ref.forward(gen, cache)]) if len(gen) else logits[-1:]
        worst, min_gap, compared, note = 0.0, np.inf, len(gen), ""
        for i, tok in enumerate(gen):
            top2 = np.sort(preds[i])[-2:]
            min_gap = min(min_gap, top2[1] - top2[0])
            mine = int(np.argmax(preds[i]))
            if mine != tok:
                compared, gap = i, preds[i][mine] - preds[i][tok]
                if q8:
                    note = f"; 8-bit activations pick another token at step {i} (reference gap {gap:.2g})"
                elif gap < NEAR_TIE * np.abs(preds[i]).max():
                    note = f"; near-tie ({gap:.2g}) at step {i}, later steps not compared"
                else:
                    print(f"FAIL prompt {p} step {i}: reference picks {mine}, engine {tok} (gap {gap:.3g})")
                    failures += 1
                break
            e = rel(steps[i], preds[i + 1])
            worst = max(worst, e)
            if not e < step_tol:
                print(f"FAIL prompt {p} step {i}: logits rel L2 {e:.3g} >= {step_tol}")
                failures += 1
        if compared == len(gen) < 32 and int(np.argmax(preds[len(gen)])) not in ref.stop:
            print(f"FAIL prompt {p}: engine stopped after {len(gen)} tokens, reference continues")
            failures += 1
        print(f"prompt {p}: {compared} of {len(gen)} greedy tokens identical{note}; worst step logits "
              f"rel L2 {worst:.2e}; smallest top1-top2 gap {min_gap:.3g}")
    return failures


def main():
    args = sys.argv[1:]
    if len(args) not in (2, 4) or (len(args) == 4 and args[2] != "--q8"):
        sys.exit("usage: model_ref.py MODEL.gguf DUMP_DIR [--q8 Q8_DUMP_DIR]")
    ref = Reference(args[0])
    failures = check_dump(ref, args[1], False)
    if len(args) == 4:
        failures += check_dump(ref, args[3], True)
    print("model_ref:", "FAIL" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

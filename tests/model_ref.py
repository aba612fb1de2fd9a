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
RoPE scaling follows transformers' modeling_rope_utils.py function by function (linear,
llama3, yarn; see rope_parameters below), from the file's rope.scaling.* keys or, with
--rope-scaling JSON, from a config.json-style rope_scaling object (how a llama3 file, whose
GGUF holds only the rope_freqs tensor convert_hf_to_gguf.py computed, is checked: the
tensor must then agree with transformers' frequencies).
usage: model_ref.py MODEL.gguf DUMP_DIR [--q8 Q8_DUMP_DIR] [--rope-scaling JSON] [--tol T]
       (one load of the weights for both dumps; --tol: the logit tolerance, default 1e-3)
"""
import json
import math
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


# ---- RoPE initialisation, after transformers' src/transformers/modeling_rope_utils.py.
# Each returns (inv_freq [dim/2], attention_factor), in float64.

def default_inv_freq(base, dim):
    """_compute_default_rope_parameters: 1 / base^(2i/dim)."""
    return 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)


def linear_parameters(base, dim, rs):
    """_compute_linear_scaling_rope_parameters: inv_freq / factor."""
    return default_inv_freq(base, dim) / rs["factor"], 1.0


def llama3_parameters(base, dim, rs):
    """_compute_llama3_parameters."""
    inv_freq = default_inv_freq(base, dim)
    factor = rs["factor"]
    low_freq_factor, high_freq_factor = rs["low_freq_factor"], rs["high_freq_factor"]
    old_context_len = rs["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    # wavelen < high_freq_wavelen: kept; wavelen > low_freq_wavelen: divided by factor
    inv_freq_llama = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    # between the two: a smooth mix
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return np.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama), 1.0


def get_mscale(scale, mscale=1.0):
    """_compute_yarn_parameters' get_mscale: the YaRN paper's attention temperature."""
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def find_correction_dim(num_rotations, dim, base, max_position_embeddings):
    """_compute_yarn_parameters' find_correction_dim: the dimension making num_rotations
    turns over the original context."""
    return (dim * math.log(max_position_embeddings / (num_rotations * 2 * math.pi))) / (2 * math.log(base))


def find_correction_range(low_rot, high_rot, dim, base, max_position_embeddings, truncate=True):
    """_compute_yarn_parameters' find_correction_range (truncate: floor and ceil)."""
    low = find_correction_dim(low_rot, dim, base, max_position_embeddings)
    high = find_correction_dim(high_rot, dim, base, max_position_embeddings)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, dim - 1)


def linear_ramp_factor(lo, hi, n):
    """_compute_yarn_parameters' linear_ramp_factor: 0 below lo, 1 above hi."""
    if lo == hi:
        hi += 0.001   # prevent singularity
    return np.clip((np.arange(n, dtype=np.float64) - lo) / (hi - lo), 0, 1)


def yarn_parameters(base, dim, rs, max_position_embeddings):
    """_compute_yarn_parameters, as transformers has it since PR #40320 (2025-08): the
    factor is rope_scaling's own, the correction range uses original_max_position_embeddings
    when given (else max_position_embeddings)."""
    factor = rs["factor"]
    attention_factor = rs.get("attention_factor")
    mscale, mscale_all_dim = rs.get("mscale"), rs.get("mscale_all_dim")
    original_max_position_embeddings = rs.get("original_max_position_embeddings") or max_position_embeddings
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
        else:
            attention_factor = get_mscale(factor)
    beta_fast = rs.get("beta_fast") or 32
    beta_slow = rs.get("beta_slow") or 1
    pos_freqs = base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    inv_freq_extrapolation = 1.0 / pos_freqs
    inv_freq_interpolation = 1.0 / (factor * pos_freqs)
    low, high = find_correction_range(beta_fast, beta_slow, dim, base, original_max_position_embeddings,
                                      rs.get("truncate", True))
    inv_freq_extrapolation_factor = 1 - linear_ramp_factor(low, high, dim // 2)
    inv_freq = (inv_freq_interpolation * (1 - inv_freq_extrapolation_factor)
                + inv_freq_extrapolation * inv_freq_extrapolation_factor)
    return inv_freq, attention_factor


def rope_parameters(base, dim, rs, max_position_embeddings):
    """ROPE_INIT_FUNCTIONS by rope_type (or the older "type")."""
    kind = (rs or {}).get("rope_type", (rs or {}).get("type", "default"))
    if kind == "default":
        return default_inv_freq(base, dim), 1.0
    if kind == "linear":
        return linear_parameters(base, dim, rs)
    if kind == "llama3":
        return llama3_parameters(base, dim, rs)
    if kind == "yarn":
        return yarn_parameters(base, dim, rs, max_position_embeddings)
    raise SystemExit(f"rope_type {kind} not handled by the reference")


def gguf_rope_scaling(r, a, path, ctx):
    """The config.json rope_scaling a GGUF's rope.scaling.* keys stand for (llama.cpp's
    reading: yarn's original context defaults to the trained one; its attn_factor
    multiplies get_mscale(factor))."""
    kind = field(r, f"{a}.rope.scaling.type")
    if kind in (None, "none"):
        return None
    if kind not in ("linear", "yarn"):
        raise SystemExit(f"{path}: rope scaling {kind} not handled by the reference")
    rs = {"rope_type": kind, "factor": float(field(r, f"{a}.rope.scaling.factor"))}
    if kind == "yarn":
        rs["original_max_position_embeddings"] = int(field(r, f"{a}.rope.scaling.original_context_length", ctx))
        for key, name in (("yarn_beta_fast", "beta_fast"), ("yarn_beta_slow", "beta_slow")):
            v = field(r, f"{a}.rope.scaling.{key}")
            if v is not None:
                rs[name] = float(v)
        af = field(r, f"{a}.rope.scaling.attn_factor")
        if af is not None:
            rs["attention_factor"] = float(af) * get_mscale(rs["factor"])
    return rs


class Reference:
    def __init__(self, path, rope_scaling=None):
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
        self.ctx = int(field(r, f"{a}.context_length"))
        self.rope_scaling = rope_scaling or gguf_rope_scaling(r, a, path, self.ctx)
        self.inv_freq, self.mscale = rope_parameters(self.base, self.n_rot, self.rope_scaling, self.ctx)
        ff = self.w.get("rope_freqs.weight")
        if ff is not None:
            # llama.cpp divides each pair's frequency by the tensor's entry (ggml rope's
            # freq_factors); with --rope-scaling the result must be transformers' frequencies
            from_tensor = default_inv_freq(self.base, self.n_rot) / ff
            if rope_scaling is None:
                self.inv_freq = from_tensor
            elif not np.allclose(from_tensor, self.inv_freq, rtol=1e-6, atol=0):
                raise SystemExit(f"{path}: rope_freqs does not give transformers' {rope_scaling} frequencies: "
                                 f"{from_tensor} vs {self.inv_freq}")
        print(f"rope: {self.rope_scaling or 'none'}; attention factor {self.mscale:.6g}")

    def norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos):
        """x: [T, heads, hd], pos: [T]; llama pairs (2i, 2i+1), qwen2 pairs (i, i + n_rot/2)."""
        th = pos[:, None] * self.inv_freq[None, :]
        # transformers' rotary embedding: cos and sin times attention_scaling
        c, s = self.mscale * np.cos(th)[:, None, :], self.mscale * np.sin(th)[:, None, :]
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
        pos = np.arange(p0, p0 + T, dtype=np.float64)
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


def check_rope_table(text):
    """`test_model --rope-table PRESET` output (header, inv_freq per pair, mscale) against
    rope_parameters for the same config.json parameters; 0 if equal to 1e-12 relative."""
    lines = text.split("\n")
    kind, base, dim, ctx, factor, low, high, orig = lines[0].split()
    base, dim, ctx, factor = float(base), int(dim), int(ctx), float(factor)
    rs = {"rope_type": kind, "factor": factor, "original_max_position_embeddings": int(orig)}
    if kind == "llama3":
        rs.update(low_freq_factor=float(low), high_freq_factor=float(high))
    got = np.array([float(x) for x in lines[1:1 + dim // 2]])
    got_mscale = float(lines[1 + dim // 2])
    want, mscale = rope_parameters(base, dim, rs if kind != "none" else None, ctx)
    e = float(np.abs(got / want - 1).max())
    print(f"rope table {rs}: max relative error {e:.2e} over {dim // 2} pairs; attention factor {got_mscale:.9g} "
          f"(transformers {mscale:.9g})")
    bad = not e < 1e-12 or not abs(got_mscale - mscale) < 1e-12
    if kind == "llama3":
        # the rope_freqs tensor convert_hf_to_gguf.py would write for the same parameters
        from model_tiny import llama3_rope_freqs
        e2 = float(np.abs(default_inv_freq(base, dim) / llama3_rope_freqs(base, dim, rs) / want - 1).max())
        print(f"rope table: convert_hf_to_gguf.py's rope_freqs gives it within {e2:.2e}")
        bad |= not e2 < 1e-6
    print("rope table:", "FAIL" if bad else "ok")
    return 1 if bad else 0


def main():
    args = sys.argv[1:]
    if args == ["--rope-table"]:
        return check_rope_table(sys.stdin.read())
    opts = {"--q8": None, "--rope-scaling": None, "--tol": None}
    while len(args) > 2 and args[-2] in opts:
        opts[args[-2]] = args[-1]
        args = args[:-2]
    if len(args) != 2:
        sys.exit("usage: model_ref.py MODEL.gguf DUMP_DIR [--q8 Q8_DUMP_DIR] [--rope-scaling JSON] [--tol T]")
    global LOGIT_TOL
    if opts["--tol"]:
        LOGIT_TOL = float(opts["--tol"])
    rs = json.loads(opts["--rope-scaling"]) if opts["--rope-scaling"] else None
    ref = Reference(args[0], rs)
    failures = check_dump(ref, args[1], False)
    if opts["--q8"]:
        failures += check_dump(ref, opts["--q8"], True)
    print("model_ref:", "FAIL" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

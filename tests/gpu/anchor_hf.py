#!/usr/bin/env python3
"""The speed and memory anchor for the GPU check (tests/gpu/check.sh, docs/gpu-device.md):
transformers' LlamaForCausalLM in kvbench's random:llama3-8b shape, bf16 weights, SDPA
attention, random weights, FullKV (its own DynamicCache). Per context length it measures

  prefill    one forward pass over the prompt (only the last position's logits), seconds
             and tok/s;
  decode     --decode greedy steps after it, one token each, seconds and tok/s;
  memory     torch.cuda.max_memory_allocated over the prefill and the decode (weights
             included), and max_memory_reserved (what the caching allocator took);

after one short warm-up pass. The same prompt length and 8 decode steps as the check's
`kvbench run`, so tests/gpu/paper_table.py prints kvbench's numbers as ratios to these.

  python3 tests/gpu/anchor_hf.py --device cuda --ctx 8192,32768 --json out.json
  python3 tests/gpu/anchor_hf.py --device cpu --config tiny --ctx 256,512   # runs here
  python3 tests/gpu/anchor_hf.py --dry-run ...    # plan and shapes only, no torch (CI)

Exit status: 0 done (or dry run), 2 bad arguments, 3 torch or transformers missing, 1 a
measurement failed (the JSON keeps the lengths that finished).
"""
import argparse
import json
import sys
import time

# kvbench's presets (model/random_model.c): layers, hidden, heads, kv heads, head dim,
# FFN, vocab, max positions, rope theta, rms eps, tied output
CONFIGS = {
    "llama3-8b": dict(num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                      head_dim=128, intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072,
                      rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False),
    # small enough for a CPU in seconds; the same code path
    "tiny": dict(num_hidden_layers=2, hidden_size=256, num_attention_heads=8, num_key_value_heads=2, head_dim=32,
                 intermediate_size=512, vocab_size=1024, max_position_embeddings=8192, rope_theta=10000.0,
                 rms_norm_eps=1e-5, tie_word_embeddings=False),
}


def fail(msg, code=2):
    print("anchor_hf: " + msg, file=sys.stderr)
    sys.exit(code)


def parse_ctx(s):
    out = []
    for part in s.split(","):
        part = part.strip()
        mult = 1
        if part[-1:] in ("k", "K"):
            part, mult = part[:-1], 1024
        try:
            v = int(part) * mult
        except ValueError:
            fail("--ctx '%s': expected comma-separated token counts (K = 1024)" % s)
        if v < 16 or v > 1 << 20:
            fail("--ctx '%s': each length must be in 16..1048576" % s)
        out.append(v)
    return out


def params(c):
    """Parameter count of the config (embedding, layers, norm, untied output)."""
    h, f, v, L = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["num_hidden_layers"]
    qd = c["num_attention_heads"] * c["head_dim"]
    kvd = c["num_key_value_heads"] * c["head_dim"]
    per_layer = h * qd + 2 * h * kvd + qd * h + 3 * h * f + 2 * h
    return v * h + L * per_layer + h + (0 if c["tie_word_embeddings"] else v * h)


def kv_bytes(c, n):
    """FullKV's bf16 cache for n tokens."""
    return 2 * c["num_hidden_layers"] * c["num_key_value_heads"] * c["head_dim"] * 2 * n


def measure(torch, model, c, n, decode, dev, seed):
    g = torch.Generator(device="cpu").manual_seed(seed + n)
    ids = torch.randint(0, c["vocab_size"], (1, n), generator=g).to(dev)
    cuda = dev.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    keep = {"logits_to_keep": 1}
    with torch.inference_mode():
        sync()
        t0 = time.perf_counter()
        try:
            out = model(input_ids=ids, use_cache=True, **keep)
        except TypeError:   # transformers before 4.50 called it num_logits_to_keep
            keep = {"num_logits_to_keep": 1}
            out = model(input_ids=ids, use_cache=True, **keep)
        sync()
        t1 = time.perf_counter()
        past = out.past_key_values
        tok = out.logits[:, -1:].argmax(-1)
        for _ in range(decode):
            out = model(input_ids=tok, past_key_values=past, use_cache=True)
            past = out.past_key_values
            tok = out.logits[:, -1:].argmax(-1)
        sync()
        t2 = time.perf_counter()
    r = {"ctx": n, "prefill_s": t1 - t0, "prefill_tok_s": n / (t1 - t0), "decode_tokens": decode,
         "decode_s": t2 - t1, "decode_tok_s": decode / (t2 - t1) if decode else None,
         "kv_bytes_bf16": kv_bytes(c, n + decode)}
    if cuda:
        r["max_memory_allocated"] = torch.cuda.max_memory_allocated()
        r["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    del out, past
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="cuda or cpu (default cuda)")
    ap.add_argument("--config", default=None, choices=sorted(CONFIGS), help="llama3-8b (cuda default) or tiny (cpu default)")
    ap.add_argument("--ctx", default="8192,32768", help="prompt lengths, K = 1024 (default 8192,32768)")
    ap.add_argument("--decode", type=int, default=8, help="decode steps after the prefill (default 8)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the measurements here (rewritten after each length)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and shapes; no torch")
    a = ap.parse_args()
    if a.device not in ("cuda", "cpu"):
        fail("--device '%s': expected cuda or cpu" % a.device)
    if a.decode < 0 or a.decode > 4096:
        fail("--decode %d: expected 0..4096" % a.decode)
    name = a.config or ("llama3-8b" if a.device == "cuda" else "tiny")
    c = CONFIGS[name]
    ctx = parse_ctx(a.ctx)
    if max(ctx) + a.decode > c["max_position_embeddings"]:
        fail("--ctx %d + --decode %d is past the config's %d positions" % (max(ctx), a.decode, c["max_position_embeddings"]))
    res = {"tool": "transformers LlamaForCausalLM, bf16, sdpa, FullKV (DynamicCache)", "config": name,
           "device": a.device, "params": params(c), "weights_bytes_bf16": 2 * params(c), "decode": a.decode,
           "dry_run": a.dry_run, "results": []}

    def save():
        if a.json:
            with open(a.json + ".new", "w") as f:
                json.dump(res, f, indent=1)
            import os
            os.replace(a.json + ".new", a.json)

    print("anchor_hf: %s, %.4gB parameters (%.4g GB in bf16), %s, contexts %s, %d decode steps" %
          (name, params(c) / 1e9, 2 * params(c) / 1e9, a.device, ",".join(map(str, ctx)), a.decode))
    if a.dry_run:
        for n in ctx:
            print("anchor_hf: plan ctx %d: FullKV cache %.2f GB (bf16), weights %.2f GB" %
                  (n, kv_bytes(c, n + a.decode) / 1e9, 2 * params(c) / 1e9))
        save()
        print("anchor_hf: dry run: nothing measured")
        return 0
    try:
        import torch
        import transformers
    except ImportError as e:
        fail("torch and transformers are needed (%s); --dry-run runs without them" % e, 3)
    if a.device == "cuda" and not torch.cuda.is_available():
        fail("--device cuda: torch sees no CUDA device", 3)
    res["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__,
                       "cuda": torch.version.cuda}
    torch.manual_seed(a.seed)
    cfg = transformers.LlamaConfig(bos_token_id=1, eos_token_id=2, attn_implementation="sdpa", **c)
    cfg._attn_implementation = "sdpa"
    dev = "cuda:0" if a.device == "cuda" else "cpu"
    t0 = time.perf_counter()
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)   # built in bf16 where it lives: no f32 copy of 8B
    with torch.device(dev):
        model = transformers.LlamaForCausalLM(cfg)
    torch.set_default_dtype(old)
    model.eval()
    res["build_s"] = time.perf_counter() - t0
    res["attn_implementation"] = getattr(model.config, "_attn_implementation", "?")
    if a.device == "cuda":
        res["weights_allocated"] = torch.cuda.memory_allocated()
    print("anchor_hf: model built in %.1f s (attention: %s)" % (res["build_s"], res["attn_implementation"]))
    rc = 0
    try:
        measure(torch, model, c, 128, 2, dev, a.seed)   # warm-up: kernels, cuBLAS handles
        for n in ctx:
            r = measure(torch, model, c, n, a.decode, dev, a.seed)
            res["results"].append(r)
            save()
            mem = "" if "max_memory_allocated" not in r else ", max_memory_allocated %.2f GiB" % (
                r["max_memory_allocated"] / 2**30)
            print("anchor_hf: ctx %d: prefill %.3f s (%.0f tok/s), decode %d tok in %.3f s (%.1f tok/s)%s" %
                  (n, r["prefill_s"], r["prefill_tok_s"], a.decode, r["decode_s"], r["decode_tok_s"] or 0, mem))
    except Exception as e:   # out of memory at a long length: keep the shorter ones
        print("anchor_hf: failed: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        res["error"] = "%s: %s" % (type(e).__name__, e)
        rc = 1
    save()
    return rc


if __name__ == "__main__":
    sys.exit(main())

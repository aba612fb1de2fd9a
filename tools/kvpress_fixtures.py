"""kvpress's kept rows on shared random inputs, for tests/test_kvpress_fixtures.c.

Runs pinned kvpress presses (the reference environment `make kvpress-fixtures` builds:
kvpress 0.5.5, torch 2.15.0, transformers 5.2.0, CPU) on random post-RoPE keys, values and
a causal attention matrix, one layer each, and writes per case the inputs and the rows
kvpress keeps per kv head to tests/fixtures/kvpress/CASE.txt. Nothing is downloaded: a press
only reads its module's config (head counts), so a stand-in module carries it.

File format (whitespace separated; floats as float32 printed exactly):
  method NAME params P n N H H Hkv HKV d D B B win W
  K  HKV*N*D floats ([kv head][token][channel])
  V  HKV*N*D floats
  P  H*W*N floats (the last W rows of the attention matrix, [head][row][key])
  kept J COUNT idx...   (one line per kv head, ascending)
"""
import sys, os, types
import torch
from kvpress import (SnapKVPress, TOVAPress, KeyDiffPress, LagKVPress, KnormPress, StreamingLLMPress, AdaKVPress)

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/kvpress"


def module(H, Hkv, d):
    cfg = types.SimpleNamespace(num_attention_heads=H, num_key_value_heads=Hkv, head_dim=d,
                                _attn_implementation="sdpa")
    return types.SimpleNamespace(config=cfg, head_dim=d, num_key_value_groups=H // Hkv, layer_idx=0)


def inputs(gen, H, Hkv, n, d):
    K = torch.randn(1, Hkv, n, d, generator=gen) * (0.3 + 2 * torch.rand(1, Hkv, n, 1, generator=gen))
    V = torch.randn(1, Hkv, n, d, generator=gen)
    Q = torch.randn(1, H, n, d, generator=gen) * 2
    Kr = K.repeat_interleave(H // Hkv, dim=1)
    logits = Q @ Kr.transpose(2, 3) / d ** 0.5
    logits = logits.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    A = torch.softmax(logits.double(), dim=-1).float()
    return K, V, A


def kept_rows(press, mod, K, V, A, n):
    """Kept positions per kv head: ScorerPress's top n_kept, or AdaKV's complement of its mask."""
    hs = torch.zeros(1, n, 1)
    if isinstance(press, AdaKVPress):
        press.compress(mod, hs, K, V, A, {})
        _, heads, seq = mod.masked_key_indices
        keep = torch.ones(K.shape[1], n, dtype=torch.bool)
        keep[heads, seq] = False
        return [torch.nonzero(keep[j]).flatten().tolist() for j in range(K.shape[1])]
    scores = press.score(mod, hs, K, V, A, {})
    from kvpress.utils import compute_n_kept
    idx = scores.topk(compute_n_kept(n, press.compression_ratio), dim=-1).indices[0]
    return [sorted(idx[j].tolist()) for j in range(K.shape[1])]


def fmt(t):
    return " ".join("%.9g" % x for x in t.flatten().tolist())


# (case, kvbench method, its params, press, n, B, window rows the kvbench method reads)
n = 64
CASES = [
    ("snapkv", "snapkv", "window=16,kernel=5,pool=1,agg=0", lambda cr: SnapKVPress(cr, window_size=16, kernel_size=5), 32, 16),
    ("tova", "tova", "sinks=0", lambda cr: TOVAPress(cr), 16, 1),
    ("keydiff", "keydiff", "sinks=0", lambda cr: KeyDiffPress(cr), 24, 0),
    ("knormpress", "knormpress", "sinks=0", lambda cr: KnormPress(cr), 16, 0),
    ("streamingllm", "streamingllm", "", lambda cr: StreamingLLMPress(cr, n_sink=4), 20, 0),
    # LagKV: n_sink 4, lag 8 -> 6 scored partitions, 16 rows always kept; 28 = 16 + 2 ranks x 6 (no tie at the cut)
    ("lagkv", "lagkv", "n_sink=4,lag_size=8,cross_scoring=0", lambda cr: LagKVPress(cr, n_sink=4, lag_size=8), 28, 0),
    ("adakv-snapkv", "adakv-snapkv", "window=16,kernel=5,pool=1,agg=0,alpha_safeguard=0.2",
     lambda cr: AdaKVPress(SnapKVPress(cr, window_size=16, kernel_size=5), alpha_safeguard=0.2), 32, 16),
]

os.makedirs(OUT, exist_ok=True)
for seed, (case, name, params, make, B, win) in enumerate(CASES):
    for shape, (H, Hkv, d) in enumerate([(4, 2, 16), (6, 3, 8)]):
        gen = torch.Generator().manual_seed(1000 + 10 * seed + shape)
        K, V, A = inputs(gen, H, Hkv, n, d)
        press = make(1 - B / n)
        kept = kept_rows(press, module(H, Hkv, d), K, V, A, n)
        w = max(win, 1)
        with open(os.path.join(OUT, "%s-%d.txt" % (case, shape)), "w") as f:
            f.write("method %s params %s n %d H %d Hkv %d d %d B %d win %d\n" % (name, params or "-", n, H, Hkv, d, B, w))
            f.write("K %s\nV %s\nP %s\n" % (fmt(K[0]), fmt(V[0]), fmt(A[0, :, n - w:, :])))
            for j, rows in enumerate(kept):
                f.write("kept %d %d %s\n" % (j, len(rows), " ".join(map(str, rows))))
        print(case, shape, [len(r) for r in kept])

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
  then, for the presses that read the model (door version 4: kv_needs.queries / wo):
  Q  H*N*D floats       (pre-RoPE queries, [head][token][channel]: the stand-in's q_proj of
                         random hidden states, as kvpress's get_prerope_query_states makes them)
  rope THETA            (rotate_half RoPE over all D channels, inv_freq = THETA^(-2i/D))
  Wo E E*H*D floats     (o_proj.weight, [E][H*D])
  kept J COUNT idx...   (one line per kv head, ascending)
  zeroed J COUNT idx... (ThinK, after the kept lines: the key channels kvpress zeroed in kv head J's
                         kept rows, ascending; one line per kv head)
"""
import sys, os, types
import torch
from kvpress import (SnapKVPress, TOVAPress, KeyDiffPress, LagKVPress, KnormPress, StreamingLLMPress, AdaKVPress,
                     ExpectedAttentionPress, CriticalKVPress, CriticalAdaKVPress, ThinKPress)

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/kvpress"


E, THETA = 24, 10000.0   # the stand-in's hidden size and RoPE base


def module(H, Hkv, d, gen=None):
    cfg = types.SimpleNamespace(num_attention_heads=H, num_key_value_heads=Hkv, head_dim=d, hidden_size=E,
                                _attn_implementation="sdpa")
    mod = types.SimpleNamespace(config=cfg, head_dim=d, num_key_value_groups=H // Hkv, layer_idx=0)
    if gen is not None:   # the model parts ExpectedAttention and CriticalKV read
        mod.q_proj = torch.nn.Linear(E, H * d, bias=False)
        mod.o_proj = torch.nn.Linear(H * d, E, bias=False)
        with torch.no_grad():
            mod.q_proj.weight.copy_(torch.randn(H * d, E, generator=gen) * (1.5 / E ** 0.5)
                                    + torch.randn(H * d, 1, generator=gen) * 0.3)
            mod.o_proj.weight.copy_(torch.randn(E, H * d, generator=gen) / (H * d) ** 0.5)

        def rotary_emb(x, position_ids):   # transformers' rotate_half RoPE, cos/sin in float32
            inv = THETA ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
            f = position_ids[0].double()[:, None] * inv[None]
            emb = torch.cat((f, f), dim=-1)
            return emb.cos().float()[None], emb.sin().float()[None]
        mod.rotary_emb = rotary_emb
    return mod


def inputs(gen, H, Hkv, n, d):
    K = torch.randn(1, Hkv, n, d, generator=gen) * (0.3 + 2 * torch.rand(1, Hkv, n, 1, generator=gen))
    V = torch.randn(1, Hkv, n, d, generator=gen)
    Q = torch.randn(1, H, n, d, generator=gen) * 2
    Kr = K.repeat_interleave(H // Hkv, dim=1)
    logits = Q @ Kr.transpose(2, 3) / d ** 0.5
    logits = logits.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    A = torch.softmax(logits.double(), dim=-1).float()
    return K, V, A


def kept_rows(press, mod, K, V, A, n, hs):
    """Kept positions per kv head: ScorerPress's top n_kept, or (AdaKV, CriticalAdaKV) the complement of the mask."""
    if isinstance(press, (AdaKVPress, CriticalAdaKVPress)):
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
    # door version 4: the prefill's queries (and Wo for CriticalKV); kvpress's defaults
    ("expected-attention", "expected-attention", "", lambda cr: ExpectedAttentionPress(cr), 24, 0),
    ("criticalkv", "criticalkv", "",
     lambda cr: CriticalKVPress(ExpectedAttentionPress(cr, use_vnorm=False)), 32, 0),
    # door version 5: SnapKV then ThinK (kvpress's snap_think, ComposedPress([SnapKVPress(), ThinKPress()]))
    ("snapkv-think", "snapkv-think", "window=16,kernel=5,pool=1,agg=0,key_channel_compression_ratio=0.4,channel_window=32",
     lambda cr: SnapKVPress(cr, window_size=16, kernel_size=5), 32, 16),
    # CriticalKV inside AdaKV's head budgets over ExpectedAttention; kvpress's defaults
    ("criticaladakv", "criticaladakv", "",
     lambda cr: CriticalAdaKVPress(ExpectedAttentionPress(cr, use_vnorm=False)), 24, 0),
]
MODEL_CASES = ("expected-attention", "criticalkv", "snapkv-think", "criticaladakv")
THINK = {"snapkv-think": ThinKPress(key_channel_compression_ratio=0.4, window_size=32)}


def zeroed_channels(think, snap, mod, K, V, A, n, hs):
    """ComposedPress's chain, press by press: SnapKV's compress, then ThinK's on what it kept;
    the key channels ThinK zeroed, per kv head (all zero over the kept rows)."""
    k, v = snap.compress(mod, hs, K.clone(), V.clone(), A, {})
    kw = {"hidden_states": hs, "position_embeddings": mod.rotary_emb(hs, torch.arange(n)[None])}
    with torch.no_grad():
        k, v = think.compress(mod, hs, k, v, None, kw)
    return [torch.nonzero((k[0, j] == 0).all(dim=0)).flatten().tolist() for j in range(K.shape[1])]

os.makedirs(OUT, exist_ok=True)
for seed, (case, name, params, make, B, win) in enumerate(CASES):
    for shape, (H, Hkv, d) in enumerate([(4, 2, 16), (6, 3, 8)]):
        gen = torch.Generator().manual_seed(1000 + 10 * seed + shape)
        K, V, A = inputs(gen, H, Hkv, n, d)
        press = make(1 - B / n)
        model = case in MODEL_CASES
        mod = module(H, Hkv, d, gen if model else None)   # drawn after the inputs: older cases unchanged
        hs = torch.randn(1, n, E, generator=gen) if model else torch.zeros(1, n, 1)
        kept = kept_rows(press, mod, K, V, A, n, hs)
        w = max(win, 1)
        with open(os.path.join(OUT, "%s-%d.txt" % (case, shape)), "w") as f:
            f.write("method %s params %s n %d H %d Hkv %d d %d B %d win %d\n" % (name, params or "-", n, H, Hkv, d, B, w))
            f.write("K %s\nV %s\nP %s\n" % (fmt(K[0]), fmt(V[0]), fmt(A[0, :, n - w:, :])))
            if model:
                with torch.no_grad():
                    Q = mod.q_proj(hs).view(1, n, H, d).transpose(1, 2)
                    f.write("Q %s\nrope %.9g\nWo %d %s\n" % (fmt(Q[0]), THETA, E, fmt(mod.o_proj.weight)))
            for j, rows in enumerate(kept):
                f.write("kept %d %d %s\n" % (j, len(rows), " ".join(map(str, rows))))
            if case in THINK:
                for j, ch in enumerate(zeroed_channels(THINK[case], press, mod, K, V, A, n, hs)):
                    f.write("zeroed %d %d %s\n" % (j, len(ch), " ".join(map(str, ch))))
        print(case, shape, [len(r) for r in kept])

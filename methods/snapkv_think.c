/* SnapKV then ThinK: kvpress's ComposedPress([SnapKVPress(), ThinKPress()]), the pair its
 * evaluation registry names snap_think (kvpress 0.5.5, kvpress/presses/think_press.py and
 * composed_press.py; ThinK: Xu et al. 2024, arXiv 2407.21018, code SalesforceAIResearch/ThinK).
 * Per layer:
 *  1. SnapKV keeps B rows per kv head (snap_select.c: the window's pooled votes, then the window);
 *  2. ThinK prunes key channels of those rows. Per kv head j and channel c:
 *       score[c] = mean over the group's query heads h of (mean over the last `channel_window`
 *                  prompt queries of q_hc^2, post-RoPE) x (mean over the rows SnapKV kept of k_c^2)
 *     and the floor(d * key_channel_compression_ratio) lowest-scoring channels (ties: the lower
 *     channel) are dropped from the key of every kept prompt row. kvpress zeroes them in place;
 *     here they are zeroed in the stored rows too, so attention is exactly attention over the
 *     narrowed keys, and memory() counts what a narrowed store holds: a prompt row is
 *     (d - p) + d elements, plus the kept channels' indices, 4 bytes each per (layer, kv head),
 *     as auxiliary state. kv_method.key_channels (door version 5) reports the channels kept.
 * The query window's statistics are taken in float64 from the prefill's f32 queries and keys
 * (kvpress: float32), so every element type prunes the same channels. Decoded tokens join at
 * full width (kvpress prunes only at prefill); under --decode hold SnapKV's rule evicts. */
#include "snap_select.h"
#include "window_score.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const kv_method kv_snapkv_think;
#define NAME "snapkv-think"

struct kv_state {
    kv_cacheset cs;     /* first: the cache set's door members rely on it */
    int window, kernel, pool, agg_max;
    int qwin;           /* channel_window: the last prompt queries ThinK reads */
    int kc;             /* key channels a prompt row keeps: d - floor(d * ratio) */
    int32_t *chan;      /* [L][Hkv][d]: the kept channels of (layer, kv head), ascending; the first kc */
    int ingested;       /* layers ingested (their channel lists are resident state) */
    size_t peak;
};

static const kv_param params[] = {
    {"key_channel_compression_ratio", "0.4",
     "ThinK: share of key channels pruned from the prompt rows [ThinK's code; kvpress's default 0 is a no-op]"},
    {"channel_window", "32",
     "ThinK: last prompt queries whose q^2 weighs the channels [kvpress's window_size; ThinK's code]"},
    {"window", "32", "SnapKV: observation window, kept as well [ThinK's code; kvpress 64]"},
    {"kernel", "5", "SnapKV: pooling kernel size, 1 = no pooling [ThinK's code and kvpress]"},
    {"pool", "1", "SnapKV: pooling: 0 = max, 1 = avg [ThinK's code and kvpress]"},
    {"agg", "0", "SnapKV: GQA aggregation of the group's scores: 0 = mean (kvpress), 1 = max [kvbench]"},
    {NULL, NULL, NULL},
};
static const kv_range ranges[] = {
    {"key_channel_compression_ratio", 0, 1, NAN}, {"channel_window", 1, 1e9, NAN}, {"window", 1, 1e9, NAN},
    {"kernel", 1, 1e9, NAN}, {"pool", 0, 1, NAN}, {"agg", 0, 1, NAN}, {NULL, 0, 0, 0},
};

static int read_params(const kv_setup *s, int *window, int *kernel, int *pool, int *agg, int *qwin, double *ratio,
                       char *err, size_t errlen) {
    const kv_method *m = &kv_snapkv_think;
    return kv_param_check(m, s->params, err, errlen) || kv_param_int(m, s->params, "window", window, err, errlen) ||
           kv_param_int(m, s->params, "kernel", kernel, err, errlen) ||
           kv_param_int(m, s->params, "pool", pool, err, errlen) || kv_param_int(m, s->params, "agg", agg, err, errlen) ||
           kv_param_int(m, s->params, "channel_window", qwin, err, errlen) ||
           kv_param_double(m, s->params, "key_channel_compression_ratio", ratio, err, errlen);
}

/* Channels pruned: kvpress's int(head_dim * ratio). */
static int pruned_channels(int d, double ratio) { return (int)floor(d * ratio); }

static kv_state *st_init(const kv_setup *s, char *err, size_t errlen) {
    int window, kernel, pool, agg, qwin;
    double ratio;
    if (read_params(s, &window, &kernel, &pool, &agg, &qwin, &ratio, err, errlen)) return NULL;
    kv_state *st = calloc(1, sizeof *st);
    if (!st) return snprintf(err, errlen, NAME ": out of memory"), NULL;
    if (cs_init(&st->cs, s, 1, 1, NAME, err, errlen)) return free(st), NULL;
    int d = st->cs.d;
    st->window = window < st->cs.budget ? window : st->cs.budget;
    st->kernel = kernel, st->pool = pool, st->agg_max = agg, st->qwin = qwin;
    st->kc = d - pruned_channels(d, ratio);
    st->chan = malloc((size_t)st->cs.L * st->cs.Hkv * d * sizeof *st->chan);
    if (!st->chan) return cs_free(&st->cs), free(st), snprintf(err, errlen, NAME ": out of memory"), NULL;
    for (size_t i = 0; i < (size_t)st->cs.L * st->cs.Hkv; i++)
        for (int c = 0; c < d; c++) st->chan[i * d + c] = c;
    return st;
}

static void st_needs(const kv_setup *s, kv_needs *out) {
    window_needs(&kv_snapkv_think, s, out);
    int window, kernel, pool, agg, qwin;
    double ratio;
    char err[200];
    if (!read_params(s, &window, &kernel, &pool, &agg, &qwin, &ratio, err, sizeof err) &&
        pruned_channels(s->head_dim, ratio) > 0)
        out->queries = qwin;   /* ratio 0: kvpress returns before reading queries */
}

/* Prompt rows resident (narrowed), over all slots. */
static long prompt_rows(const kv_state *st) {
    long n = 0;
    for (int i = 0; i < st->cs.L * st->cs.Hkv; i++) {
        const kv_store *kv = &st->cs.slot[i].kv;
        for (int r = 0; r < kv->n; r++) n += kv->pos[r] < st->cs.n_prompt;
    }
    return n;
}

static void st_memory(const kv_state *st, kv_mem *out) {
    cs_memory(&st->cs, out);
    size_t p = (size_t)(st->cs.d - st->kc), idx = p ? (size_t)st->ingested * st->cs.Hkv * st->kc * sizeof(int32_t) : 0;
    out->fast_bytes = out->fast_bytes - (size_t)prompt_rows(st) * p * kb_kvtype_bytes(st->cs.kv_type) + idx;
    out->fast_aux_bytes += idx;
    out->fast_peak = st->peak > out->fast_bytes ? st->peak : out->fast_bytes;
}

static void track(kv_state *st, size_t extra) {
    kv_mem m;
    st_memory(st, &m);
    if (m.fast_bytes + extra > st->peak) st->peak = m.fast_bytes + extra;
}

/* Full-width row bytes as the cache set holds them (K, V and the row's f32 score). */
static size_t full_row(const kv_state *st) { return (size_t)2 * st->cs.d * kb_kvtype_bytes(st->cs.kv_type) + 4; }

/* Rotates x (one head's d channels, token at position pos) by the model's RoPE, in double. */
static void rope_apply(const kv_rope *r, int d, int pos, double *x) {
    int half = r->n_rot / 2;
    for (int i = 0; i < half; i++) {
        int a = r->neox ? i : 2 * i, b = r->neox ? i + half : 2 * i + 1;
        double th = pos * r->inv_freq[i], c = cos(th) * r->mscale, s = sin(th) * r->mscale, xa = x[a], xb = x[b];
        x[a] = c * xa - s * xb, x[b] = s * xa + c * xb;
    }
    (void)d;
}

/* ThinK's channel scores of the layer's kv heads, score [Hkv][d], over SnapKV's kept rows of each
 * slot. 0, or -1 with err. */
static int channel_scores(const kv_state *st, const kv_prefill *p, double *score, char *err, size_t errlen) {
    const kv_cacheset *c = &st->cs;
    int d = c->d, g = c->g, n = p->n;
    if (!p->Q || p->q_rows < 1 || !p->rope || p->rope->n_rot > d || p->rope->n_rot % 2 || p->q_stride < (size_t)p->q_rows * d)
        return snprintf(err, errlen, NAME ": layer %d: the prefill gave no queries or RoPE (kv_prefill.Q, rope: this "
                        "driver or backend does not supply them)", p->layer), -1;
    int w = st->qwin < p->q_rows ? st->qwin : p->q_rows, r0 = p->q_rows - w;
    double *q = malloc((size_t)d * sizeof *q), *qn = calloc((size_t)d, sizeof *qn);
    if (!q || !qn) return free(q), free(qn), snprintf(err, errlen, NAME ": out of memory"), -1;
    for (int j = 0; j < c->Hkv; j++) {
        double *sc = score + (size_t)j * d;
        for (int ch = 0; ch < d; ch++) qn[ch] = 0;
        for (int h = j * g; h < (j + 1) * g; h++)
            for (int i = r0; i < p->q_rows; i++) {
                const float *qr = p->Q + (size_t)h * p->q_stride + (size_t)i * d;
                for (int ch = 0; ch < d; ch++) q[ch] = qr[ch];
                rope_apply(p->rope, d, n - p->q_rows + i, q);
                for (int ch = 0; ch < d; ch++) qn[ch] += q[ch] * q[ch];
            }
        const kv_store *kv = &cs_slot_c(c, p->layer, j)->kv;
        const float *K = p->K + (size_t)j * p->kv_stride;
        for (int ch = 0; ch < d; ch++) sc[ch] = 0;
        for (int r = 0; r < kv->n; r++)
            for (int ch = 0; ch < d; ch++) {
                double k = K[(size_t)kv->pos[r] * d + ch];
                sc[ch] += k * k;
            }
        for (int ch = 0; ch < d; ch++) sc[ch] = (qn[ch] / ((double)w * g)) * (kv->n ? sc[ch] / kv->n : 0);
    }
    free(q), free(qn);
    return 0;
}

/* chan[0..d-p): the channels kept, ascending: all but the p lowest scores (ties: the lower
 * channel goes first). */
static void keep_channels(const double *score, int d, int p, int32_t *chan) {
    int nk = 0;
    for (int ch = 0; ch < d; ch++) {
        int below = 0;   /* channels that go before ch */
        for (int o = 0; o < d; o++) below += score[o] < score[ch] || (score[o] == score[ch] && o < ch);
        if (below >= p) chan[nk++] = ch;
    }
}

static int st_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    kv_cacheset *c = &st->cs;
    if (p->layer >= 0 && p->layer < c->L && p->n == c->n_prompt) track(st, (size_t)p->n * c->Hkv * full_row(st));
    if (snap_select_layer(c, p, st->window, st->kernel, st->pool, st->agg_max, c->budget, NAME, err, errlen)) return -1;
    int d = c->d, pruned = d - st->kc, rc = 0;
    if (pruned > 0) {
        double *score = malloc((size_t)c->Hkv * d * sizeof *score);
        float *k = malloc((size_t)d * sizeof *k);
        if (!score || !k) rc = -1, snprintf(err, errlen, NAME ": out of memory");
        if (!rc) rc = channel_scores(st, p, score, err, errlen);
        for (int j = 0; j < c->Hkv && !rc; j++) {
            int32_t *chan = st->chan + ((size_t)p->layer * c->Hkv + j) * d;
            keep_channels(score + (size_t)j * d, d, pruned, chan);
            /* the kept rows' keys again, the pruned channels zero (what attention over the
             * narrowed key reads) */
            kv_store *kv = &cs_slot(c, p->layer, j)->kv;
            size_t row = (size_t)d * kb_kvtype_bytes(kv->type);
            for (int r = 0; r < kv->n; r++) {
                const float *src = p->K + (size_t)j * p->kv_stride + (size_t)kv->pos[r] * d;
                for (int ch = 0; ch < d; ch++) k[ch] = 0;
                for (int i = 0; i < st->kc; i++) k[chan[i]] = src[chan[i]];
                kb_kv_put(kv->type, (char *)kv->K + (size_t)r * row, k, d);
            }
            kv->dev_valid = 0;   /* rows rewritten: a device copy is out of date */
        }
        free(score), free(k);
    }
    if (!rc) st->ingested++, track(st, 0);
    return rc;
}

static void st_append(kv_state *st, int layer, const float *k, const float *v, const kv_token *t) {
    cs_door_append(st, layer, k, v, t);
    track(st, st->cs.hold ? full_row(st) : 0);   /* under hold a row was pushed before one went */
}

static int st_key_channels(const kv_state *st, int layer, int kv_head, int32_t *chan) {
    const kv_cacheset *c = &st->cs;
    if (layer < 0 || layer >= c->L || kv_head < 0 || kv_head >= c->Hkv) return -1;
    if (chan) memcpy(chan, st->chan + ((size_t)layer * c->Hkv + kv_head) * c->d, (size_t)st->kc * sizeof *chan);
    return st->kc;
}

static void st_describe(const kv_state *st, char *buf, size_t len) {
    snprintf(buf, len, "prompt keys keep %d of %d channels", st->kc, st->cs.d);
}

static void st_free(kv_state *st) {
    if (!st) return;
    free(st->chan);
    cs_door_free(st);
}

const kv_method kv_snapkv_think = {
    KV_METHOD_HEAD,
    .name = NAME,
    .summary = "SnapKV's kept rows, then ThinK prunes the key channels of least q^2 x k^2 from every prompt "
               "row; kvpress's snap_think, ComposedPress([SnapKVPress(), ThinKPress()]) (kvpress 0.5.5), prompt "
               "compressed once",
    .params = params,
    .ranges = ranges,
    .init = st_init,
    .needs = st_needs,
    .ingest = st_ingest,
    .append = st_append,
    .attend = cs_door_attend,
    .memory = st_memory,
    .head_stats = cs_door_head_stats,
    .rows = cs_door_rows,
    .describe = st_describe,
    .free = st_free,
    .key_channels = st_key_channels,
};

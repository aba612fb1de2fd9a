/* ChunkKV (reference §6): SnapKV-style window scores (window_scores, mean over the g
 * query heads of a kv group) summed over contiguous chunks of c prompt tokens and over the
 * kv heads, so all kv heads of a layer keep the same whole chunks: the top floor((B-w)/c)
 * chunks in original order, then the w window tokens (the paper's form; kvpress instead
 * lets the window's own chunks win). If n <= B everything is kept. A window larger than
 * the budget is clamped to B.
 *
 * Layer-wise index reuse: with reuse = N > 1, layers are grouped N at a time and only the
 * first layer of a group scores; the others keep the same positions.
 *
 * Decoding: tokens are appended at full resolution. Under --decode hold, once a layer
 * holds more than B rows per kv head, the oldest row of its lowest-scoring prompt chunk
 * is evicted (each prompt row carries its chunk's score; window rows and decoded tokens
 * rank highest, and among those the oldest goes first); heads share rows and scores, so
 * they evict the same row. Under append nothing is evicted. */
#include "cacheset.h"
#include "window_score.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

extern const kv_method kv_chunkkv;

struct kv_state {
    kv_cacheset cs;     /* first: kv_a_store relies on it */
    int window, chunk, kernel, pool, reuse;
    /* the selection of the last layer that scored, reused by the rest of its group */
    int scored_layer, nsel;
    int32_t *sel;       /* [n] kept positions, ascending */
    double *row_score;  /* [n] score of each position's chunk; +inf for the window */
};

static const kv_param params[] = {
    {"chunk", "10", "chunk size in tokens (paper: 10; 5-20 similar)"},
    {"window", "32", "observation window: last prompt queries that vote (kept as well)"},
    {"kernel", "7", "pooling kernel size (1 = no pooling)"},
    {"pool", "0", "pooling: 0 = max (SnapKV paper runs), 1 = avg (kvpress)"},
    {"reuse", "1", "layer-wise index reuse: groups of this many layers share the first one's chunks (1 = off)"},
    {NULL, NULL, NULL},
};

static void chunkkv_free(kv_state *st) {
    if (!st) return;
    cs_free(&st->cs);
    free(st->sel);
    free(st->row_score);
    free(st);
}

static kv_state *chunkkv_init(const kv_setup *s, char *err, size_t errlen) {
    const kv_method *m = &kv_chunkkv;
    int chunk, window, kernel, pool, reuse;
    if (kv_param_check(m, s->params, err, errlen) ||
        kv_param_int(m, s->params, "chunk", &chunk, err, errlen) ||
        kv_param_int(m, s->params, "window", &window, err, errlen) ||
        kv_param_int(m, s->params, "kernel", &kernel, err, errlen) ||
        kv_param_int(m, s->params, "pool", &pool, err, errlen) ||
        kv_param_int(m, s->params, "reuse", &reuse, err, errlen))
        return NULL;
    if (chunk < 1 || window < 1 || kernel < 1 || (pool != POOL_MAX && pool != POOL_AVG) || reuse < 1) {
        snprintf(err, errlen, "chunkkv: need chunk >= 1, window >= 1, kernel >= 1, pool 0|1, reuse >= 1 "
                 "(got %d, %d, %d, %d, %d)", chunk, window, kernel, pool, reuse);
        return NULL;
    }
    kv_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, errlen, "chunkkv: out of memory");
        return NULL;
    }
    if (cs_init(&st->cs, s, 1, 1, "chunkkv", err, errlen)) {
        free(st);
        return NULL;
    }
    st->window = window < st->cs.budget ? window : st->cs.budget;
    st->chunk = chunk;
    st->kernel = kernel;
    st->pool = pool;
    st->reuse = reuse;
    st->scored_layer = -1;
    st->sel = malloc((size_t)s->n_prompt * sizeof *st->sel);
    st->row_score = malloc((size_t)s->n_prompt * sizeof *st->row_score);
    if (!st->sel || !st->row_score) {
        snprintf(err, errlen, "chunkkv: out of memory");
        chunkkv_free(st);
        return NULL;
    }
    return st;
}

static void chunkkv_needs(const kv_setup *s, kv_needs *out) { window_needs(&kv_chunkkv, s, out); }

/* Scores this layer's chunks and chooses the kept positions (st->sel, st->row_score). */
static int choose_chunks(kv_state *st, const kv_prefill *p, int w) {
    kv_cacheset *c = &st->cs;
    int n = p->n, m = n - w, cs = st->chunk, nch = (m + cs - 1) / cs;
    float *tok = malloc(((size_t)c->Hkv * (m > 0 ? m : 1)) * sizeof *tok);
    float *chunk_score = malloc(((size_t)nch + 1) * sizeof *chunk_score);
    int32_t *top = malloc(((size_t)nch + 1) * sizeof *top);
    int rc = !tok || !chunk_score || !top;
    if (!rc && m > 0 && window_scores(p, c->H, c->Hkv, w, st->kernel, st->pool, 0, tok) != m) rc = 1;
    if (!rc) {
        for (int ch = 0; ch < nch; ch++) {             /* sum over the chunk's tokens and the kv heads */
            double sum = 0;
            for (int j = 0; j < c->Hkv; j++)
                for (int t = ch * cs; t < m && t < (ch + 1) * cs; t++) sum += tok[(size_t)j * m + t];
            chunk_score[ch] = (float)sum;
        }
        for (int t = 0; t < n; t++) st->row_score[t] = t < m ? chunk_score[t / cs] : INFINITY;
        st->nsel = 0;
        if (n <= c->budget) {
            for (int t = 0; t < n; t++) st->sel[st->nsel++] = t;
        } else {
            int nk = topk_sorted(chunk_score, nch, (c->budget - w) / cs, top);
            rc = nk < 0;
            for (int i = 0; i < nk; i++)
                for (int t = top[i] * cs; t < m && t < (top[i] + 1) * cs; t++) st->sel[st->nsel++] = t;
            for (int t = m; t < n; t++) st->sel[st->nsel++] = t;
        }
    }
    free(tok); free(chunk_score); free(top);
    return rc;
}

static int chunkkv_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    kv_cacheset *c = &st->cs;
    if (cs_begin_layer(c, p, "chunkkv", err, errlen)) return -1;
    int n = p->n, w = st->window < n ? st->window : n, m = n - w;
    int first = p->layer - p->layer % st->reuse;       /* the layer of this group that scores */
    if (p->layer == first) {
        if (m > 0 && (!p->win_probs || p->win < w)) {
            snprintf(err, errlen, "chunkkv: layer %d: prefill gave %d window rows, need %d", p->layer,
                     p->win_probs ? p->win : 0, w);
            return -1;
        }
        if (choose_chunks(st, p, w)) {
            snprintf(err, errlen, "chunkkv: out of memory in layer %d", p->layer);
            return -1;
        }
        st->scored_layer = p->layer;
    } else if (st->scored_layer != first) {
        snprintf(err, errlen, "chunkkv: layer %d reuses layer %d's chunks, but layer %d was not ingested first",
                 p->layer, first, first);
        return -1;
    }
    for (int j = 0; j < c->Hkv; j++)
        if (cs_load(c, p, j, st->sel, st->nsel, st->row_score)) {
            snprintf(err, errlen, "chunkkv: out of memory in layer %d", p->layer);
            return -1;
        }
    return 0;
}

static const kv_range ranges[] = {
    {"chunk", 1, 1e9, NAN}, {"window", 1, 1e9, NAN}, {"kernel", 1, 1e9, NAN}, {"pool", 0, 1, NAN},
    {"reuse", 1, 1e9, NAN}, {NULL, 0, 0, 0},
};

const kv_method kv_chunkkv = {
    KV_METHOD_HEAD,
    .name = "chunkkv",
    .summary = "SnapKV window scores summed over chunks of 10 tokens and the kv heads (one chunk set per "
               "layer), top floor((B-w)/c) chunks + window 32, max-pool 7; optional layer-wise index reuse; "
               "--decode hold evicts the oldest row of the lowest-scoring chunk over budget",
    .params = params,
    .ranges = ranges,
    .init = chunkkv_init,
    .needs = chunkkv_needs,
    .ingest = chunkkv_ingest,
    .append = cs_door_append,
    KV_CACHESET_DOOR,
    .free = chunkkv_free,
};

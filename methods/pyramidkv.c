/* PyramidKV (reference §5): SnapKV's observation-window selection (window_scores, mean
 * over the g query heads of a kv group) with per-layer budgets that fall linearly from the
 * bottom layer to the top (KVCache-Factory schedule, pyramid_budgets), so the lower
 * layers, whose attention is broad, keep more. C = kv_budget() per layer per kv head,
 * window included; a window larger than C is clamped to C.
 *
 * Decoding, as SnapKV here: tokens are appended at full resolution; under --decode hold,
 * once a kv head of a layer holds more than that layer's budget, the prompt row with the
 * lowest pooled score is evicted (window rows and decoded tokens rank highest, and among
 * those the oldest goes first); under append nothing is evicted. */
#include "snap_select.h"
#include "cacheset.h"
#include "pyramid.h"
#include "window_score.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int pyramid_budgets(int n, int C, int w, int beta, int L, int *keep) {
    if (n < 0 || w < 0 || C < w || beta < 1 || L < 1) return -1;
    int room = C - w;
    if (n < C || n < 2 * room || L == 1) {
        int k = n < C ? (n > w ? n - w : 0) : room;
        for (int l = 0; l < L; l++) keep[l] = k;
        return n < C ? PYRAMID_NONE : PYRAMID_UNIFORM;
    }
    int kmin = room / beta, kmax = 2 * room - kmin;
    if (kmax >= n - w) {
        kmax = n - w;
        kmin = 2 * room - kmax;
    }
    /* The exact line from kmax down to kmin, rounded so the layers sum to L*room: the
     * reference's floored integer step overshoots the total by up to L(L-1)/2 tokens.
     * Largest remainder rounding: floor every layer, then give the missing tokens to the
     * layers with the largest fractional parts (lower layer first on ties). */
    long total = 0, den = L - 1;
    for (int l = 0; l < L; l++) {
        keep[l] = (int)(((long)kmax * den - (long)l * (kmax - kmin)) / den);
        total += keep[l];
    }
    /* At most L-1 tokens are missing; a layer with a larger remainder sits above one with
     * a smaller one on the same floor, so the result stays non-increasing. */
    for (long missing = (long)L * room - total, last = -1, last_l = -1; missing > 0; missing--) {
        long best = -1;
        int best_l = -1;
        for (int l = 0; l < L; l++) {
            long frac = ((long)kmax * den - (long)l * (kmax - kmin)) % den;
            int after_last = frac < last || (frac == last && l > last_l);
            if ((last < 0 || after_last) && frac > best) best = frac, best_l = l;
        }
        keep[best_l]++;
        last = best, last_l = best_l;
    }
    return PYRAMID_PYRAMID;
}

extern const kv_method kv_pyramidkv;

struct kv_state {
    kv_cacheset cs;     /* first: kv_a_store relies on it */
    int C, window, kernel, pool, beta, branch;
    int *budget;        /* [L] rows a kv head of the layer may hold: keep + window, or C uncompressed */
};

static const kv_param params[] = {
    {"beta", "20", "pyramid steepness: the top layer keeps about (budget - window)/beta prompt tokens"},
    {"window", "8", "observation window: last prompt queries that vote (kept as well)"},
    {"kernel", "7", "pooling kernel size (1 = no pooling)"},
    {"pool", "0", "pooling: 0 = max (KVCache-Factory), 1 = avg (kvpress)"},
    {NULL, NULL, NULL},
};

static void pyramidkv_free(kv_state *st) {
    if (!st) return;
    cs_free(&st->cs);
    free(st->budget);
    free(st);
}

static kv_state *pyramidkv_init(const kv_setup *s, char *err, size_t errlen) {
    const kv_method *m = &kv_pyramidkv;
    int beta, window, kernel, pool;
    if (kv_param_check(m, s->params, err, errlen) ||
        kv_param_int(m, s->params, "beta", &beta, err, errlen) ||
        kv_param_int(m, s->params, "window", &window, err, errlen) ||
        kv_param_int(m, s->params, "kernel", &kernel, err, errlen) ||
        kv_param_int(m, s->params, "pool", &pool, err, errlen))
        return NULL;
    if (beta < 1 || window < 1 || kernel < 1 || (pool != POOL_MAX && pool != POOL_AVG)) {
        snprintf(err, errlen, "pyramidkv: need beta >= 1, window >= 1, kernel >= 1, pool 0|1 "
                 "(got %d, %d, %d, %d)", beta, window, kernel, pool);
        return NULL;
    }
    kv_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, errlen, "pyramidkv: out of memory");
        return NULL;
    }
    if (cs_init(&st->cs, s, 1, 1, "pyramidkv", err, errlen)) {
        free(st);
        return NULL;
    }
    st->C = st->cs.budget;
    st->window = window < st->C ? window : st->C;
    st->kernel = kernel;
    st->pool = pool;
    st->beta = beta;
    st->budget = malloc((size_t)s->n_layers * sizeof *st->budget);
    if (!st->budget) {
        snprintf(err, errlen, "pyramidkv: out of memory");
        pyramidkv_free(st);
        return NULL;
    }
    st->branch = pyramid_budgets(s->n_prompt, st->C, st->window, beta, s->n_layers, st->budget);
    for (int l = 0; l < s->n_layers; l++)
        st->budget[l] = st->branch == PYRAMID_NONE ? st->C : st->budget[l] + st->window;
    return st;
}

static void pyramidkv_needs(const kv_setup *s, kv_needs *out) { window_needs(&kv_pyramidkv, s, out); }

/* The layer's budget row count is C when not compressing (C >= n keeps every row), so
 * SnapKV's selection with that row count is the whole of PyramidKV's prefill. */
static int pyramidkv_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    /* a layer out of range is refused by snap_select_layer; only index budget[] when valid */
    int rows = p->layer >= 0 && p->layer < st->cs.L ? st->budget[p->layer] : st->C;
    return snap_select_layer(&st->cs, p, st->window, st->kernel, st->pool, 0, rows, "pyramidkv", err, errlen);
}

static void pyramidkv_append(kv_state *st, int layer, const float *k, const float *v, const kv_token *t) {
    cs_append_decoded(&st->cs, layer, k, v, t->pos, st->budget[layer]);
}

int pyramidkv_layer_budget(const kv_state *st, int layer) { return st->budget[layer]; }

static const kv_range ranges[] = {
    {"beta", 1, 1e9, NAN}, {"window", 1, 1e9, NAN}, {"kernel", 1, 1e9, NAN}, {"pool", 0, 1, NAN}, {NULL, 0, 0, 0},
};

const kv_method kv_pyramidkv = {
    KV_METHOD_HEAD,
    .name = "pyramidkv",
    .summary = "SnapKV voting with pyramidal per-layer budgets (KVCache-Factory: beta 20, window 8, "
               "max-pool 7), kv-head mean; --decode hold evicts the lowest-scoring prompt row over a layer's budget",
    .params = params,
    .ranges = ranges,
    .layer_budgets = 1,
    .init = pyramidkv_init,
    .needs = pyramidkv_needs,
    .ingest = pyramidkv_ingest,
    .append = pyramidkv_append,
    KV_CACHESET_DOOR,
    .free = pyramidkv_free,
};

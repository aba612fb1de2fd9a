/* SnapKV (reference §4): the last w prompt queries vote for which earlier tokens to
 * keep. Per kv head: window_scores (sum of the window's probability rows, 1-D pooling,
 * mean over the g query heads of the group), keep the top B - w prefix tokens in
 * original order, then the w window tokens. If n <= B everything is kept. A window
 * larger than the budget is clamped to B.
 *
 * Decoding (kv_setup.decode_rule): tokens are appended at full resolution. Under append
 * (the reference code's rule) nothing is evicted; under hold, once a kv head's cache
 * exceeds B the prompt row with the lowest pooled score is evicted (window rows and
 * decoded tokens rank highest, and among those the oldest goes first). */
#include "snap_select.h"
#include "cacheset.h"
#include "window_score.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

extern const kv_method kv_snapkv;

struct kv_state {
    kv_cacheset cs;     /* first: kv_a_store relies on it */
    int window, kernel, pool, agg_max;
};

static const kv_param params[] = {
    {"window", "32", "observation window: last prompt queries that vote (kept as well)"},
    {"kernel", "7", "pooling kernel size (1 = no pooling)"},
    {"pool", "0", "pooling: 0 = max (SnapKV paper runs), 1 = avg (kvpress)"},
    {"agg", "0", "GQA aggregation of the g query heads' scores: 0 = mean, 1 = max"},
    {NULL, NULL, NULL},
};

static kv_state *snapkv_init(const kv_setup *s, char *err, size_t errlen) {
    const kv_method *m = &kv_snapkv;
    int window, kernel, pool, agg;
    if (kv_param_check(m, s->params, err, errlen) ||
        kv_param_int(m, s->params, "window", &window, err, errlen) ||
        kv_param_int(m, s->params, "kernel", &kernel, err, errlen) ||
        kv_param_int(m, s->params, "pool", &pool, err, errlen) ||
        kv_param_int(m, s->params, "agg", &agg, err, errlen))
        return NULL;
    if (window < 1 || kernel < 1 || (pool != POOL_MAX && pool != POOL_AVG) || (agg != 0 && agg != 1)) {
        snprintf(err, errlen, "snapkv: need window >= 1, kernel >= 1, pool 0|1, agg 0|1 "
                 "(got %d, %d, %d, %d)", window, kernel, pool, agg);
        return NULL;
    }
    kv_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, errlen, "snapkv: out of memory");
        return NULL;
    }
    if (cs_init(&st->cs, s, 1, 1, "snapkv", err, errlen)) {
        free(st);
        return NULL;
    }
    st->window = window < st->cs.budget ? window : st->cs.budget;
    st->kernel = kernel;
    st->pool = pool;
    st->agg_max = agg;
    return st;
}

static void snapkv_needs(const kv_setup *s, kv_needs *out) { window_needs(&kv_snapkv, s, out); }

static int snapkv_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    return snap_select_layer(&st->cs, p, st->window, st->kernel, st->pool, st->agg_max, st->cs.budget, "snapkv",
                             err, errlen);
}

static const kv_range ranges[] = {
    {"window", 1, 1e9, NAN}, {"kernel", 1, 1e9, NAN}, {"pool", 0, 1, NAN}, {"agg", 0, 1, NAN}, {NULL, 0, 0, 0},
};

const kv_method kv_snapkv = {
    KV_METHOD_HEAD,
    .name = "snapkv",
    .summary = "observation-window voting with pooling, prompt compressed once (kv-head mean)",
    .params = params,
    .ranges = ranges,
    .init = snapkv_init,
    .needs = snapkv_needs,
    .ingest = snapkv_ingest,
    .append = cs_door_append,
    KV_CACHESET_DOOR,
    .free = cs_door_free,
};

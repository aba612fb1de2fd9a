/* AdaKV over SnapKV (kvpress's AdaKVPress(SnapKVPress), kvpress/presses/adakv_press.py at
 * NVIDIA/kvpress 8bb29b9; Feng et al. 2024, arXiv 2407.11550): SnapKV's scores (the last w
 * prompt queries' pooled window attention, mean over the kv head's query group; the w window
 * rows forced), but the layer's Hkv * B rows are chosen jointly over its kv heads, so a head
 * whose attention is concentrated gives rows to one whose attention is spread. Each kv head
 * first keeps its own top max(1, floor(alpha_safeguard * B)) rows (kvpress 0.5.5: 0.20). The selection is
 * scorer_load_adaptive (scorer.h). SnapKV's parameters and defaults are kvbench's snapkv
 * (w 32, max-pool 7: the SnapKV paper's runs); kvpress's SnapKVPress is window=64,kernel=5,
 * pool=1. Decoded tokens join at full resolution; under --decode hold the layer's lowest-score
 * row goes while the layer is over Hkv * B (head_budgets: the budget is the layer's sum). */
#include "scorer.h"
#include "window_score.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

extern const kv_method kv_adakv_snapkv;

struct kv_state {
    kv_cacheset cs;     /* first: the scorer base and the door members rely on it */
    int window, kernel, pool, agg_max;
    double alpha;
};

static const kv_param params[] = {
    {"window", "32", "observation window: last prompt queries that vote (kept as well; kvpress: 64)"},
    {"kernel", "7", "pooling kernel size (1 = no pooling; kvpress: 5)"},
    {"pool", "0", "pooling: 0 = max (SnapKV paper runs), 1 = avg (kvpress)"},
    {"agg", "0", "GQA aggregation of the g query heads' scores: 0 = mean (kvpress), 1 = max"},
    {"alpha_safeguard", "0.2", "each kv head keeps at least its top max(1, floor(alpha * B)) rows, none at 0 (kvpress 0.5.5: 0.20)"},
    {NULL, NULL, NULL},
};
static const kv_range ranges[] = {
    {"window", 1, 1e9, NAN}, {"kernel", 1, 1e9, NAN}, {"pool", 0, 1, NAN}, {"agg", 0, 1, NAN},
    {"alpha_safeguard", 0, 1, NAN}, {NULL, 0, 0, 0},
};

static kv_state *ada_init(const kv_setup *s, char *err, size_t errlen) {
    const kv_method *m = &kv_adakv_snapkv;
    int window, kernel, pool, agg;
    double alpha;
    if (kv_param_check(m, s->params, err, errlen) || kv_param_int(m, s->params, "window", &window, err, errlen) ||
        kv_param_int(m, s->params, "kernel", &kernel, err, errlen) ||
        kv_param_int(m, s->params, "pool", &pool, err, errlen) || kv_param_int(m, s->params, "agg", &agg, err, errlen) ||
        kv_param_double(m, s->params, "alpha_safeguard", &alpha, err, errlen))
        return NULL;
    if (window < 1 || kernel < 1 || (pool != POOL_MAX && pool != POOL_AVG) || (agg != 0 && agg != 1) ||
        !(alpha >= 0 && alpha <= 1)) {
        snprintf(err, errlen, "adakv-snapkv: need window >= 1, kernel >= 1, pool 0|1, agg 0|1, alpha_safeguard in "
                 "[0,1] (got %d, %d, %d, %d, %g)", window, kernel, pool, agg, alpha);
        return NULL;
    }
    kv_state *st = calloc(1, sizeof *st);
    if (!st) return snprintf(err, errlen, "adakv-snapkv: out of memory"), NULL;
    if (cs_init(&st->cs, s, 1, 1, "adakv-snapkv", err, errlen)) {
        free(st);
        return NULL;
    }
    st->window = window < st->cs.budget ? window : st->cs.budget;
    st->kernel = kernel, st->pool = pool, st->agg_max = agg, st->alpha = alpha;
    return st;
}

static void ada_needs(const kv_setup *s, kv_needs *out) { window_needs(&kv_adakv_snapkv, s, out); }

static int ada_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    kv_cacheset *c = &st->cs;
    if (cs_begin_layer(c, p, "adakv-snapkv", err, errlen)) return -1;
    int n = p->n, Hkv = c->Hkv, w = st->window < n ? st->window : n, m = n - w;
    if (n > c->budget && m > 0 && (!p->win_probs || p->win < w))
        return snprintf(err, errlen, "adakv-snapkv: layer %d: prefill gave %d window rows, need %d", p->layer,
                        p->win_probs ? p->win : 0, w), -1;
    float *pre = malloc((size_t)Hkv * (m > 0 ? m : 1) * sizeof *pre), *score = malloc((size_t)Hkv * n * sizeof *score);
    int rc = !pre || !score;
    if (!rc && n > c->budget && m > 0)
        rc = window_scores(p, c->H, Hkv, w, st->kernel, st->pool, st->agg_max, pre) != m;
    for (int j = 0; j < Hkv && !rc; j++)
        for (int t = 0; t < n; t++)
            score[(size_t)j * n + t] = n <= c->budget ? 0 : t < m ? pre[(size_t)j * m + t] : INFINITY;
    if (!rc) rc = scorer_load_adaptive(c, p, score, st->alpha) != 0;
    free(pre), free(score);
    if (rc) snprintf(err, errlen, "adakv-snapkv: out of memory in layer %d", p->layer);
    return rc ? -1 : 0;
}

const kv_method kv_adakv_snapkv = {
    KV_METHOD_HEAD,
    .name = "adakv-snapkv",
    .summary = "SnapKV's scores with AdaKV's head-adaptive budgets: Hkv*B rows per layer chosen jointly over the kv "
               "heads, each head first keeping its top 20% of B; kvpress's AdaKVPress(SnapKVPress) (kvpress 8bb29b9)",
    .params = params,
    .ranges = ranges,
    .init = ada_init,
    .needs = ada_needs,
    .ingest = ada_ingest,
    .append = scorer_adaptive_append,
    KV_CACHESET_DOOR,
    .free = cs_door_free,
    .head_budgets = 1,
};

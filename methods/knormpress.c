/* KnormPress (kvpress; Devoto et al. 2024, "A Simple and Effective L2 Norm-Based Strategy
 * for KV Cache Compression"): keys with a small L2 norm draw the most attention, so each
 * kv head keeps its first `sinks` prompt rows plus the B - sinks rows whose keys have the
 * smallest norm (score = -|k|, ties: the earlier row). sinks=0 is kvpress's KnormPress
 * exactly; the default 4 keeps the attention sinks as StreamingLLM does. The prompt is
 * compressed once; decoded tokens join at full resolution (under --decode hold the
 * largest-norm prompt row over the budget goes first). A whole method of the scorer
 * family: its scoring function plus its table (scorer.h). */
#include "scorer.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

extern const kv_method kv_knormpress;

struct kv_state {
    kv_cacheset cs;     /* first: the scorer base and the door members rely on it */
    int sinks;
};

static const kv_param params[] = {
    {"sinks", "4", "first prompt tokens always kept (0 = kvpress's KnormPress)"},
    {NULL, NULL, NULL},
};
static const kv_range ranges[] = {{"sinks", 0, 1e9, NAN}, {NULL, 0, 0, 0}};

static kv_state *knorm_init(const kv_setup *s, char *err, size_t errlen) {
    kv_state *st = calloc(1, sizeof *st);
    if (!st) return snprintf(err, errlen, "knormpress: out of memory"), NULL;
    if (kv_param_check(&kv_knormpress, s->params, err, errlen) ||
        kv_param_int(&kv_knormpress, s->params, "sinks", &st->sinks, err, errlen) ||
        (st->sinks < 0 && snprintf(err, errlen, "knormpress: sinks=%d must be >= 0", st->sinks)) ||
        cs_init(&st->cs, s, 1, 1, "knormpress", err, errlen)) {
        free(st);
        return NULL;
    }
    return st;
}

/* -|k_t|, the norm summed in double. */
static void knorm_score(const kv_state *st, const kv_prefill *p, int j, float *score) {
    const float *K = p->K + (size_t)j * p->kv_stride;
    int d = st->cs.d;
    for (int t = 0; t < p->n; t++) {
        double ss = 0;
        for (int c = 0; c < d; c++) ss += (double)K[(size_t)t * d + c] * K[(size_t)t * d + c];
        score[t] = (float)-sqrt(ss);
    }
}

static int knorm_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    return scorer_ingest(st, p, st->sinks, knorm_score, "knormpress", err, errlen);
}

const kv_method kv_knormpress = {
    KV_METHOD_HEAD,
    .name = "knormpress",
    .summary = "first 4 tokens + the tokens whose keys have the smallest L2 norm (kvpress's KnormPress with "
               "sinks=0), prompt compressed once",
    .params = params,
    .ranges = ranges,
    .init = knorm_init,
    .ingest = knorm_ingest,
    .append = cs_door_append,
    KV_CACHESET_DOOR,
    .free = cs_door_free,
};

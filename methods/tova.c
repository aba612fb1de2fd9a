/* TOVA (kvpress's TOVAPress, kvpress/presses/tova_press.py at NVIDIA/kvpress 8bb29b9;
 * Oren et al. 2024, arXiv 2401.06104): the prompt's last query decides. Score of row
 * t < n-1: the last prompt query's attention probability on t (softmax over all n keys),
 * averaged over ALL query heads of the layer (not over the kv head's group: kvpress's
 * `attn_weights.mean(1)` then repeats it to every kv head), so every kv head of a layer
 * keeps the same rows; the last row itself scores max + 1 and is always kept. Top B
 * (ties: the earlier row). kvpress has no sinks. TOVA's paper evicts one token per decode
 * step by the same rule; kvpress (and this method) compress the prompt once, and decoded
 * tokens join at full resolution (under --decode hold the lowest-scoring prompt row over
 * the budget goes first). Needs one window row of the prefill's attention. */
#include "scorer.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

extern const kv_method kv_tova;

struct kv_state {
    kv_cacheset cs;     /* first: the scorer base and the door members rely on it */
    int sinks;
};

static const kv_param params[] = {
    {"sinks", "0", "first prompt tokens always kept (0 = kvpress's TOVAPress, which has none)"},
    {NULL, NULL, NULL},
};
static const kv_range ranges[] = {{"sinks", 0, 1e9, NAN}, {NULL, 0, 0, 0}};

static kv_state *tova_init(const kv_setup *s, char *err, size_t errlen) {
    kv_state *st = calloc(1, sizeof *st);
    if (!st) return snprintf(err, errlen, "tova: out of memory"), NULL;
    if (kv_param_check(&kv_tova, s->params, err, errlen) ||
        kv_param_int(&kv_tova, s->params, "sinks", &st->sinks, err, errlen) ||
        (st->sinks < 0 && snprintf(err, errlen, "tova: sinks=%d must be >= 0", st->sinks)) ||
        cs_init(&st->cs, s, 1, 1, "tova", err, errlen)) {
        free(st);
        return NULL;
    }
    return st;
}

static void tova_needs(const kv_setup *s, kv_needs *out) {
    (void)s;
    out->col_mass = 0;
    out->window = 1;   /* the last prompt query's probability row */
}

/* mean over the H query heads of the last window row, in double; the last row max + 1. */
static void tova_score(const kv_state *st, const kv_prefill *p, int j, float *score) {
    (void)j;
    int n = p->n, H = st->cs.H;
    float best = -INFINITY;
    for (int t = 0; t < n - 1; t++) {
        double s = 0;
        for (int h = 0; h < H; h++) s += p->win_probs[((size_t)h * p->win + p->win - 1) * (size_t)n + t];
        score[t] = (float)(s / H);
        best = score[t] > best ? score[t] : best;
    }
    score[n - 1] = n > 1 ? best + 1 : 1;
}

static int tova_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    if (p->n > st->cs.budget && (!p->win_probs || p->win < 1))
        return snprintf(err, errlen, "tova: layer %d: the prefill gave no window row", p->layer), -1;
    return scorer_ingest(st, p, st->sinks, tova_score, "tova", err, errlen);
}

const kv_method kv_tova = {
    KV_METHOD_HEAD,
    .name = "tova",
    .summary = "the tokens the last prompt query attends most (mean over all query heads, the same rows in every "
               "kv head) + that last token; kvpress's TOVAPress (kvpress 8bb29b9), prompt compressed once",
    .params = params,
    .ranges = ranges,
    .init = tova_init,
    .needs = tova_needs,
    .ingest = tova_ingest,
    .append = cs_door_append,
    KV_CACHESET_DOOR,
    .free = cs_door_free,
};

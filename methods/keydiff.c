/* KeyDiff (kvpress's KeyDiffPress, kvpress/presses/keydiff_press.py at NVIDIA/kvpress
 * 8bb29b9, release 0.5.4/0.5.5; Park et al. 2025, arXiv 2504.15364): keys that point
 * away from the layer's average key direction are the distinctive ones. Per kv head, the
 * anchor is the mean of the prompt's unit-normalised keys, and a row scores
 * -cos(k_t, anchor): the B rows least similar to the anchor are kept (ties: the earlier
 * row). kvpress has no sinks (sinks=0, the default here); the paper's block-wise
 * iteration is kvpress's BlockPress wrapper, not this press. Prompt compressed once;
 * decoded tokens join at full resolution (under --decode hold the most anchor-like
 * prompt row over the budget goes first). */
#include "scorer.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

extern const kv_method kv_keydiff;

struct kv_state {
    kv_cacheset cs;     /* first: the scorer base and the door members rely on it */
    int sinks;
};

static const kv_param params[] = {
    {"sinks", "0", "first prompt tokens always kept (0 = kvpress's KeyDiffPress, which has none)"},
    {NULL, NULL, NULL},
};
static const kv_range ranges[] = {{"sinks", 0, 1e9, NAN}, {NULL, 0, 0, 0}};

static kv_state *keydiff_init(const kv_setup *s, char *err, size_t errlen) {
    kv_state *st = calloc(1, sizeof *st);
    if (!st) return snprintf(err, errlen, "keydiff: out of memory"), NULL;
    if (kv_param_check(&kv_keydiff, s->params, err, errlen) ||
        kv_param_int(&kv_keydiff, s->params, "sinks", &st->sinks, err, errlen) ||
        (st->sinks < 0 && snprintf(err, errlen, "keydiff: sinks=%d must be >= 0", st->sinks)) ||
        cs_init(&st->cs, s, 1, 1, "keydiff", err, errlen)) {
        free(st);
        return NULL;
    }
    return st;
}

/* -cos(k_t, anchor), anchor = mean_t k_t / max(|k_t|, 1e-12) (torch's F.normalize), all in
 * double; a zero key scores 0 (cosine_similarity's eps). */
static void keydiff_score(const kv_state *st, const kv_prefill *p, int j, float *score) {
    const float *K = p->K + (size_t)j * p->kv_stride;
    int d = st->cs.d, n = p->n;
    double *a = calloc((size_t)d, sizeof *a), *norm = malloc((size_t)n * sizeof *norm);
    if (!a || !norm) {   /* out of memory: an all-equal score keeps the earliest rows */
        for (int t = 0; t < n; t++) score[t] = 0;
        free(a), free(norm);
        return;
    }
    for (int t = 0; t < n; t++) {
        const float *k = K + (size_t)t * d;
        double ss = 0;
        for (int c = 0; c < d; c++) ss += (double)k[c] * k[c];
        norm[t] = sqrt(ss);
        double inv = 1.0 / (norm[t] > 1e-12 ? norm[t] : 1e-12);
        for (int c = 0; c < d; c++) a[c] += k[c] * inv;
    }
    double an = 0;
    for (int c = 0; c < d; c++) a[c] /= n, an += a[c] * a[c];
    an = sqrt(an);
    for (int t = 0; t < n; t++) {
        const float *k = K + (size_t)t * d;
        double dot = 0, den = norm[t] * an;
        for (int c = 0; c < d; c++) dot += k[c] * a[c];
        score[t] = (float)(den > 1e-8 ? -dot / den : 0);
    }
    free(a), free(norm);
}

static int keydiff_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    return scorer_ingest(st, p, st->sinks, keydiff_score, "keydiff", err, errlen);
}

const kv_method kv_keydiff = {
    KV_METHOD_HEAD,
    .name = "keydiff",
    .summary = "the tokens whose keys are least similar (cosine) to the mean unit key; kvpress's KeyDiffPress "
               "(kvpress 8bb29b9), prompt compressed once",
    .params = params,
    .ranges = ranges,
    .init = keydiff_init,
    .ingest = keydiff_ingest,
    .append = cs_door_append,
    KV_CACHESET_DOOR,
    .free = cs_door_free,
};

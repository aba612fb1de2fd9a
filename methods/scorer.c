#include "scorer.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct { float s; int32_t i; } scored;

/* Descending score, then ascending index; NaN ranks lowest. */
static int by_score_desc(const void *a, const void *b) {
    const scored *x = a, *y = b;
    float xs = isnan(x->s) ? -INFINITY : x->s, ys = isnan(y->s) ? -INFINITY : y->s;
    if (xs != ys) return xs > ys ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

static int by_index(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int topk_sorted(const float *score, int n, int k, int32_t *out) {
    if (k > n) k = n;
    if (k <= 0) return 0;
    if (k == n) {
        for (int i = 0; i < n; i++) out[i] = i;
        return n;
    }
    scored *all = malloc((size_t)n * sizeof *all);
    if (!all) return -1;
    for (int i = 0; i < n; i++) all[i] = (scored){score[i], i};
    qsort(all, (size_t)n, sizeof *all, by_score_desc);
    for (int i = 0; i < k; i++) out[i] = all[i].i;
    free(all);
    qsort(out, (size_t)k, sizeof *out, by_index);
    return k;
}

int scorer_load(kv_cacheset *c, const kv_prefill *p, int j, const float *score, int sinks, int recent, int rows) {
    int n = p->n, mid = n - sinks - recent;
    int32_t *keep = malloc((size_t)n * sizeof *keep);
    double *row_score = malloc((size_t)n * sizeof *row_score);
    int rc = -1;
    if (keep && row_score) {
        int nk = 0;
        for (int t = 0; t < sinks; t++) keep[nk++] = t, row_score[t] = INFINITY;
        int top = topk_sorted(score, mid, rows - sinks - recent, keep + nk);
        if (top >= 0) {
            for (int i = 0; i < top; i++) keep[nk + i] += sinks;
            nk += top;
            for (int t = sinks; t < sinks + mid; t++) row_score[t] = score[t - sinks];
            for (int t = n - recent; t < n; t++) keep[nk++] = t, row_score[t] = INFINITY;
            rc = cs_load(c, p, j, keep, nk, row_score);
        }
    }
    free(keep), free(row_score);
    return rc;
}

int scorer_ingest(kv_state *st, const kv_prefill *p, int sinks, kv_row_score score_fn, const char *name, char *err,
                  size_t errlen) {
    kv_cacheset *c = (kv_cacheset *)st;   /* the state begins with it */
    if (cs_begin_layer(c, p, name, err, errlen)) return -1;
    int n = p->n, B = c->budget, keep_all = n <= B;
    int s = keep_all ? n : sinks < B ? sinks : B;
    float *score = malloc((size_t)n * sizeof *score);
    int rc = !score;
    for (int j = 0; j < c->Hkv && !rc; j++) {
        if (!keep_all) score_fn(st, p, j, score);
        rc = scorer_load(c, p, j, keep_all ? score : score + s, s, 0, keep_all ? n : B);
    }
    free(score);
    if (rc) snprintf(err, errlen, "%s: out of memory loading layer %d", name, p->layer);
    return rc;
}

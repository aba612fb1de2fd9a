#include "scorer.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ------------------------------------------------------------ AdaKV's allocation */

typedef struct { int tier; float s; int32_t i; } ada_key;   /* i = j * n + t */

static int by_ada(const void *a, const void *b) {
    const ada_key *x = a, *y = b;
    if (x->tier != y->tier) return x->tier > y->tier ? -1 : 1;
    float xs = isnan(x->s) ? -INFINITY : x->s, ys = isnan(y->s) ? -INFINITY : y->s;
    if (xs != ys) return xs > ys ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

int scorer_adaptive_alloc(const kv_cacheset *c, int n, const float *score, double alpha, uint8_t *kept,
                          uint8_t *safe) {
    int Hkv = c->Hkv, B = c->budget, rc = -1;
    size_t N = (size_t)Hkv * n;
    int nsafe = (int)(B * alpha);
    if (alpha > 0 && nsafe < 1) nsafe = 1;   /* kvpress 0.5.5: at least one row per head */
    ada_key *all = malloc(N * sizeof *all);
    int32_t *top = malloc((size_t)n * sizeof *top);
    if (!all || !top) goto done;
    memset(kept, 0, N);
    memset(safe, 0, N);
    for (size_t i = 0; i < N; i++) all[i] = (ada_key){0, score[i], (int32_t)i};
    for (int j = 0; j < Hkv; j++) {   /* the safeguard: each head's own top floor(B * alpha) */
        int k = topk_sorted(score + (size_t)j * n, n, nsafe, top);
        if (k < 0) goto done;
        for (int i = 0; i < k; i++) all[(size_t)j * n + top[i]].tier = 1, safe[(size_t)j * n + top[i]] = 1;
    }
    qsort(all, N, sizeof *all, by_ada);
    for (size_t i = 0; i < (size_t)Hkv * B && i < N; i++) kept[all[i].i] = 1;
    rc = 0;
done:
    free(all), free(top);
    return rc;
}

int scorer_load_adaptive(kv_cacheset *c, const kv_prefill *p, const float *score, double alpha) {
    int n = p->n, Hkv = c->Hkv, B = c->budget, rc = -1;
    size_t N = (size_t)Hkv * n;
    if (n <= B) {
        for (int j = 0; j < Hkv; j++)
            if (scorer_load(c, p, j, score + (size_t)j * n, 0, 0, n)) return -1;
        return 0;
    }
    int32_t *keep = malloc((size_t)n * sizeof *keep);
    uint8_t *kept = malloc(N), *safe = malloc(N);
    double *row_score = malloc((size_t)n * sizeof *row_score);
    if (!keep || !kept || !safe || !row_score || scorer_adaptive_alloc(c, n, score, alpha, kept, safe)) goto done;
    for (int j = 0; j < Hkv; j++) {
        int nk = 0;
        for (int t = 0; t < n; t++) {
            row_score[t] = score[(size_t)j * n + t];
            if (kept[(size_t)j * n + t]) keep[nk++] = t;
        }
        if (cs_load(c, p, j, keep, nk, row_score)) goto done;
    }
    rc = 0;
done:
    free(keep), free(kept), free(safe), free(row_score);
    return rc;
}

void scorer_adaptive_append(kv_state *st, int layer, const float *k, const float *v, const kv_token *t) {
    kv_cacheset *c = (kv_cacheset *)st;
    long total = 0;
    for (int j = 0; j < c->Hkv; j++) {
        kv_slot *s = cs_slot(c, layer, j);
        cs_push(c, s, k + (size_t)j * c->d, v + (size_t)j * c->d, t->pos, INFINITY);
        total += s->kv.n;
    }
    for (; c->hold && total > (long)c->Hkv * c->budget; total--) {
        kv_slot *worst = NULL;
        int wi = 0;
        for (int j = 0; j < c->Hkv; j++) {
            kv_slot *s = cs_slot(c, layer, j);
            if (s->kv.n < 2) continue;   /* never empty a head: its newest row stays */
            int i = cs_argmin(s, s->kv.n);
            if (!worst || s->score[i] < worst->score[wi] ||
                (s->score[i] == worst->score[wi] && s->kv.pos[i] < worst->kv.pos[wi]))
                worst = s, wi = i;
        }
        if (!worst) break;
        cs_remove(c, worst, wi);
    }
}

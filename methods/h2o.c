/* H2O (reference §3): heavy hitters by cumulative attention plus a recent window.
 *
 * Greedy (default, the paper's algorithm): h = floor(heavy_ratio * B) heavy hitters and
 * r = B - h recent rows. A row's score is its attention column mass summed over all
 * queries so far. KV-head aggregation: the cache is shared by the g query heads of a
 * group, so a kv head's score is the SUM over those g heads (prefill col_mass and each
 * decode step's probabilities). Prefill keeps the last r plus the top-h of the rest;
 * each decode step attends over the cache including the new token, adds the new
 * probabilities, and if the cache exceeds B evicts the lowest-score row outside the
 * last r rows (ties: the oldest). Scores accumulate in double.
 *
 * The greedy form is the paper's decode-time policy: it evicts under both decode rules.
 *
 * one_shot=1 (KVCache-Factory's prefill-only form): keep the last `window` prompt rows
 * plus the top B - window of the rest by prefill column mass; no decode-time scoring.
 * Decoded tokens are appended at full resolution; under --decode hold, once the cache
 * exceeds B the lowest prefill-score prompt row outside that window is evicted (window
 * rows and decoded tokens rank highest, the oldest of those goes first); under append
 * nothing is evicted. */
#include "cacheset.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

extern const kv_method kv_h2o;

struct kv_state {
    kv_cacheset cs;     /* first: kv_a_store relies on it */
    int one_shot;
    int heavy, recent;  /* h and r (one_shot: recent = the kept prompt window) */
};

static const kv_param params[] = {
    {"heavy_ratio", "0.5", "share of the budget for heavy hitters; the rest is the recent window"},
    {"one_shot", "0", "1 = prefill-only selection (KVCache-Factory), no decode-time scoring"},
    {"window", "8", "one_shot only: last prompt tokens always kept"},
    {NULL, NULL, NULL},
};

static kv_state *h2o_init(const kv_setup *s, char *err, size_t errlen) {
    const kv_method *m = &kv_h2o;
    double ratio;
    int one_shot, window;
    if (kv_param_check(m, s->params, err, errlen) ||
        kv_param_double(m, s->params, "heavy_ratio", &ratio, err, errlen) ||
        kv_param_int(m, s->params, "one_shot", &one_shot, err, errlen) ||
        kv_param_int(m, s->params, "window", &window, err, errlen))
        return NULL;
    if (ratio < 0 || ratio > 1 || (one_shot != 0 && one_shot != 1) || window < 0) {
        snprintf(err, errlen, "h2o: need heavy_ratio in [0,1], one_shot 0 or 1, window >= 0 "
                 "(got %g, %d, %d)", ratio, one_shot, window);
        return NULL;
    }
    kv_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, errlen, "h2o: out of memory");
        return NULL;
    }
    if (cs_init(&st->cs, s, 1, 1, "h2o", err, errlen)) {
        free(st);
        return NULL;
    }
    int B = st->cs.budget;
    st->one_shot = one_shot;
    if (one_shot) {
        st->recent = window < B ? window : B;
        st->heavy = B - st->recent;
    } else {
        st->heavy = (int)floor(ratio * B);
        st->recent = B - st->heavy;
    }
    return st;
}

static void h2o_needs(const kv_setup *s, kv_needs *out) {
    (void)s;
    out->col_mass = 1;
    out->window = 0;
}

typedef struct { double s; int32_t i; } ranked;

static int by_score_desc(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->s != y->s) return x->s > y->s ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

static int by_index(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* keep = top-h of score[0..m) (ties: lower index) then m..n-1, ascending. Returns count. */
static int select_rows(const double *score, int n, int m, int h, ranked *tmp, int32_t *keep) {
    if (h > m) h = m;
    for (int i = 0; i < m; i++) tmp[i] = (ranked){score[i], i};
    qsort(tmp, (size_t)m, sizeof *tmp, by_score_desc);
    for (int i = 0; i < h; i++) keep[i] = tmp[i].i;
    qsort(keep, (size_t)h, sizeof *keep, by_index);
    int nk = h;
    for (int t = m; t < n; t++) keep[nk++] = t;
    return nk;
}

static int h2o_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    kv_cacheset *c = &st->cs;
    if (cs_begin_layer(c, p, "h2o", err, errlen)) return -1;
    if (!p->col_mass) {
        snprintf(err, errlen, "h2o: layer %d: prefill did not provide col_mass", p->layer);
        return -1;
    }
    int n = p->n, B = c->budget;
    double *score = malloc((size_t)n * sizeof *score);
    ranked *tmp = malloc((size_t)n * sizeof *tmp);
    int32_t *keep = malloc((size_t)n * sizeof *keep);
    int rc = !score || !tmp || !keep;
    for (int j = 0; j < c->Hkv && !rc; j++) {
        for (int t = 0; t < n; t++) {
            double s = 0;
            for (int hh = 0; hh < c->g; hh++) s += p->col_mass[(size_t)(j * c->g + hh) * n + t];
            score[t] = s;
        }
        int nk;
        if (n <= B) {
            for (int t = 0; t < n; t++) keep[t] = t;
            nk = n;
        } else {
            nk = select_rows(score, n, n - st->recent, st->heavy, tmp, keep);
        }
        if (st->one_shot)   /* the protected window ranks above every scored row */
            for (int t = n - st->recent; t < n; t++) score[t] = INFINITY;
        rc = cs_load(c, p, j, keep, nk, score);
    }
    free(score); free(tmp); free(keep);
    if (rc) snprintf(err, errlen, "h2o: out of memory loading layer %d", p->layer);
    return rc;
}

static void h2o_append(kv_state *st, int layer, const float *k, const float *v,
                       const kv_token *t) {
    kv_cacheset *c = &st->cs;
    if (st->one_shot) {
        cs_append_decoded(c, layer, k, v, t->pos, c->budget);
        return;
    }
    for (int j = 0; j < c->Hkv; j++)   /* scored by attend, which evicts */
        cs_push(c, cs_slot(c, layer, j), k + (size_t)j * c->d, v + (size_t)j * c->d, t->pos, 0);
}

static void h2o_attend(kv_state *st, int layer, const float *q, float *out) {
    kv_cacheset *c = &st->cs;
    if (st->one_shot) {
        cs_attend(c, layer, q, out);
        return;
    }
    size_t gd = (size_t)c->g * c->d;
    for (int j = 0; j < c->Hkv; j++) {
        kv_slot *s = cs_slot(c, layer, j);
        int n = s->kv.n;
        const float *probs = cs_attend_group(c, layer, j, q + j * gd, out + j * gd, 1);
        for (int i = 0; i < n; i++) {
            double a = 0;
            for (int hh = 0; hh < c->g; hh++) a += probs[(size_t)hh * n + i];
            s->score[i] += a;
        }
        if (n > c->budget) cs_remove(c, s, cs_argmin(s, n - st->recent));
    }
}

static const kv_range ranges[] = {
    {"heavy_ratio", 0, 1, NAN}, {"one_shot", 0, 1, NAN}, {"window", 0, 1e9, NAN}, {NULL, 0, 0, 0},
};

const kv_method kv_h2o = {
    KV_METHOD_HEAD,
    .name = "h2o",
    .summary = "heavy hitters (cumulative attention) + recent window, evicting every decode step under both "
               "--decode rules (the paper's policy); one_shot=1 evicts only under --decode hold",
    .params = params,
    .ranges = ranges,
    .evicts_decoding = 1,
    .init = h2o_init,
    .needs = h2o_needs,
    .ingest = h2o_ingest,
    .append = h2o_append,
    .attend = h2o_attend,
    .memory = cs_door_memory,
    .head_stats = cs_door_head_stats,
    .rows = cs_door_rows,
    .free = cs_door_free,
};

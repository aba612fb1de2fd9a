/* LagKV (kvpress's LagKVPress, kvpress/presses/lagkv_press.py at NVIDIA/kvpress 8bb29b9;
 * Liang et al. 2025, arXiv 2504.04704): each partition of lag_size prompt rows is scored
 * against the next partition, with no attention at all. Per kv head, for prompt length n:
 *   - n < n_sink + 2*lag_size: no partition to score; the sinks score 1 and row t >= n_sink
 *     scores (t - n_sink) / (n - n_sink), so the top B are the sinks and the latest rows.
 *   - else rows [n_sink, end) with end = n_sink + floor((n - n_sink)/lag)*lag form
 *     P = (end - n_sink)/lag partitions; partition i < P-1 is scored with partition i+1 as
 *     its reference: per channel c, min_c and max_c over the reference's rows, then for each
 *     row x the sample standard deviation (n-1 divisor, torch's .std) over channels of
 *     (x_c - min_c)/(max_c - min_c), softmaxed over the partition's lag rows; this for the
 *     keys and the values, averaged. Without cross_scoring that average is replaced by its
 *     rank inside the partition divided by lag (0 .. (lag-1)/lag). The sinks and the last
 *     lag + (n - end) rows (the last partition and the remainder) score 1.
 * Top B by score (ties, which the ranks make common across partitions: the earlier row;
 * torch's topk leaves their order unspecified). All in double. Defaults are kvpress's:
 * n_sink 4, lag_size 128, cross_scoring 0. Prompt compressed once; decoded tokens join at
 * full resolution. */
#include "scorer.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

extern const kv_method kv_lagkv;

struct kv_state {
    kv_cacheset cs;     /* first: the scorer base and the door members rely on it */
    int n_sink, lag, cross;
};

static const kv_param params[] = {
    {"n_sink", "4", "first prompt tokens always kept (kvpress's n_sink=4)"},
    {"lag_size", "128", "partition size: each partition is scored against the next (kvpress's lag_size=128)"},
    {"cross_scoring", "0", "1: keep the softmaxed scores instead of ranks inside a partition (kvpress's "
                           "cross_scoring=False)"},
    {NULL, NULL, NULL},
};
static const kv_range ranges[] = {
    {"n_sink", 0, 1e9, NAN}, {"lag_size", 1, 1e9, NAN}, {"cross_scoring", 0, 1, NAN}, {NULL, 0, 0, 0}};

static kv_state *lagkv_init(const kv_setup *s, char *err, size_t errlen) {
    const kv_method *m = &kv_lagkv;
    kv_state *st = calloc(1, sizeof *st);
    if (!st) return snprintf(err, errlen, "lagkv: out of memory"), NULL;
    if (kv_param_check(m, s->params, err, errlen) || kv_param_int(m, s->params, "n_sink", &st->n_sink, err, errlen) ||
        kv_param_int(m, s->params, "lag_size", &st->lag, err, errlen) ||
        kv_param_int(m, s->params, "cross_scoring", &st->cross, err, errlen) ||
        ((st->n_sink < 0 || st->lag < 1 || (st->cross != 0 && st->cross != 1)) &&
         snprintf(err, errlen, "lagkv: need n_sink >= 0, lag_size >= 1, cross_scoring 0|1 (got %d, %d, %d)",
                  st->n_sink, st->lag, st->cross)) ||
        cs_init(&st->cs, s, 1, 1, "lagkv", err, errlen)) {
        free(st);
        return NULL;
    }
    return st;
}

/* The softmaxed lag-relative spread of partition X (lag rows of d, stride d) against its
 * reference R (the next partition) into out[lag]. */
static void lag_spread(const float *X, const float *R, int lag, int d, double *lo, double *hi, double *out) {
    for (int c = 0; c < d; c++) lo[c] = INFINITY, hi[c] = -INFINITY;
    for (int r = 0; r < lag; r++)
        for (int c = 0; c < d; c++) {
            double x = R[(size_t)r * d + c];
            lo[c] = x < lo[c] ? x : lo[c];
            hi[c] = x > hi[c] ? x : hi[c];
        }
    double mx = -INFINITY;
    for (int r = 0; r < lag; r++) {
        double mean = 0, var = 0;
        for (int c = 0; c < d; c++) mean += (X[(size_t)r * d + c] - lo[c]) / (hi[c] - lo[c]);
        mean /= d;
        for (int c = 0; c < d; c++) {
            double z = (X[(size_t)r * d + c] - lo[c]) / (hi[c] - lo[c]) - mean;
            var += z * z;
        }
        out[r] = d > 1 ? sqrt(var / (d - 1)) : NAN;
        mx = out[r] > mx ? out[r] : mx;
    }
    double sum = 0;
    for (int r = 0; r < lag; r++) sum += out[r] = exp(out[r] - mx);
    for (int r = 0; r < lag; r++) out[r] /= sum;
}

static void lagkv_score(const kv_state *st, const kv_prefill *p, int j, float *score) {
    int n = p->n, d = st->cs.d, ns = st->n_sink, lag = st->lag;
    if (n < ns + 2 * lag) {
        for (int t = 0; t < n; t++) score[t] = t < ns ? 1.0f : (float)((double)(t - ns) / (n - ns));
        return;
    }
    int end = ns + (n - ns) / lag * lag, P = (end - ns) / lag;
    const float *K = p->K + (size_t)j * p->kv_stride, *V = p->V + (size_t)j * p->kv_stride;
    double *lo = malloc((size_t)d * sizeof *lo), *hi = malloc((size_t)d * sizeof *hi);
    double *ks = malloc((size_t)lag * sizeof *ks), *vs = malloc((size_t)lag * sizeof *vs);
    for (int t = 0; t < n; t++) score[t] = 1.0f;
    if (!lo || !hi || !ks || !vs) {   /* out of memory: sinks and the earliest rows */
        free(lo), free(hi), free(ks), free(vs);
        return;
    }
    for (int i = 0; i < P - 1; i++) {
        size_t a = (size_t)(ns + i * lag) * d, b = a + (size_t)lag * d;
        lag_spread(K + a, K + b, lag, d, lo, hi, ks);
        lag_spread(V + a, V + b, lag, d, lo, hi, vs);
        float *out = score + ns + i * lag;
        for (int r = 0; r < lag; r++) {
            double s = (ks[r] + vs[r]) / 2;
            if (st->cross) {
                out[r] = (float)s;
                continue;
            }
            int rank = 0;   /* ascending rank; equal scores rank by row, as a stable sort would */
            for (int q = 0; q < lag; q++) {
                double o = (ks[q] + vs[q]) / 2;
                rank += o < s || (o == s && q < r);
            }
            out[r] = (float)rank / (float)lag;
        }
    }
    free(lo), free(hi), free(ks), free(vs);
}

static int lagkv_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    return scorer_ingest(st, p, 0, lagkv_score, "lagkv", err, errlen);
}

const kv_method kv_lagkv = {
    KV_METHOD_HEAD,
    .name = "lagkv",
    .summary = "4 sinks + the last 128-255 tokens + per 128-token partition the tokens whose keys and values spread "
               "most against the next partition's range; kvpress's LagKVPress (kvpress 8bb29b9), no attention read",
    .params = params,
    .ranges = ranges,
    .init = lagkv_init,
    .ingest = lagkv_ingest,
    .append = cs_door_append,
    KV_CACHESET_DOOR,
    .free = cs_door_free,
};

/* SeKV segmentation, coarse entries and low-rank span factors (see sekv_spans.h). */
#include "sekv_spans.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int sekv_split_run(int m, int l_max, int *len) {
    if (m <= 0) return 0;
    int k = (m + l_max - 1) / l_max;
    for (int i = 0; i < k; i++) len[i] = m / k + (i < m % k);
    return k;
}

void sekv_seg_free(sekv_seg *s) {
    if (!s) return;
    free(s->kind);
    free(s->span);
    memset(s, 0, sizeof *s);
}

/* Turns the run [start, start+m) into spans (pieces >= l_min) and SHORT tokens. */
static void emit_piece(sekv_seg *o, int start, int m, int l_min) {
    if (m >= l_min) {
        o->span[o->n_spans++] = (sekv_span){start, m};
        return;
    }
    for (int t = start; t < start + m; t++) o->kind[t] = SEKV_SHORT;
    o->n_short += m;
}

static void emit_run(sekv_seg *o, int start, int m, int l_min, int l_max, int *pieces) {
    int k = sekv_split_run(m, l_max, pieces);
    for (int i = 0; i < k; i++) {
        emit_piece(o, start, pieces[i], l_min);
        start += pieces[i];
    }
}

/* The runs of SEKV_SPAN tokens between full-resolution tokens, cut into spans: into
 * lengths of l_min..l_max (emit_run), or into pieces of fixed_chunk tokens when it is > 0. */
static void emit_span_runs(sekv_seg *o, int n, int fixed_chunk, int l_min, int l_max, int *pieces) {
    for (int t = 0; t < n;) {
        if (o->kind[t] != SEKV_SPAN) {
            t++;
            continue;
        }
        int e = t;
        while (e < n && o->kind[e] == SEKV_SPAN) e++;
        if (fixed_chunk > 0)
            for (int s = t; s < e; s += fixed_chunk)
                emit_piece(o, s, e - s < fixed_chunk ? e - s : fixed_chunk, l_min);
        else
            emit_run(o, t, e - t, l_min, l_max, pieces);
        t = e;
    }
}

int sekv_segment_ex(const float *surprisal, int n, double alpha, int l_min, int l_max,
                    int fixed_chunk, int sinks, int local, sekv_seg *o) {
    memset(o, 0, sizeof *o);
    if (n < 1 || l_min < 1 || l_max < 1 || fixed_chunk < 0 || sinks < 0 || local < 0 ||
        !isfinite(alpha) || (!surprisal && fixed_chunk == 0))
        return -1;
    o->n = n;
    o->kind = calloc((size_t)n, 1);
    o->span = malloc((size_t)n * sizeof *o->span);
    int *pieces = malloc(((size_t)n + 1) * sizeof *pieces);
    if (!o->kind || !o->span || !pieces) {
        free(pieces);
        sekv_seg_free(o);
        return -1;
    }
    if (surprisal) {
        double sum = 0, sq = 0;
        for (int t = 0; t < n; t++) sum += surprisal[t];
        o->mu = sum / n;
        for (int t = 0; t < n; t++) sq += (surprisal[t] - o->mu) * (surprisal[t] - o->mu);
        o->sigma = sqrt(sq / n);
        o->threshold = o->mu + alpha * o->sigma;
    }
    for (int t = 0; t < n; t++) {
        int forced = t < sinks || t >= n - local;
        int anchor = t == 0 || (fixed_chunk == 0 && surprisal[t] > o->threshold);
        o->kind[t] = forced ? SEKV_FORCED : anchor ? SEKV_ANCHOR : SEKV_SPAN;
        o->n_forced += forced;
        o->n_anchors += !forced && anchor;
    }
    emit_span_runs(o, n, fixed_chunk, l_min, l_max, pieces);
    free(pieces);
    return 0;
}

int sekv_segment_even(const float *surprisal, int n, double alpha, int l_min, int l_max, int sinks,
                      int local, sekv_seg *o) {
    /* the surprisal segmentation only for its anchor count, mu, sigma and threshold */
    if (sekv_segment_ex(surprisal, n, alpha, l_min, l_max, 0, sinks, local, o)) return -1;
    int A = o->n_anchors, lo = sinks < n ? sinks : n, hi = n - local > lo ? n - local : lo, m = hi - lo;
    int *pieces = malloc(((size_t)n + 1) * sizeof *pieces);
    if (!pieces) {
        sekv_seg_free(o);
        return -1;
    }
    /* A anchors at lo + floor(i*m/A), i < A: the first opens the region (token 0 when
     * there are no sinks, as in the surprisal count; with sinks token 0 is forced there) */
    memset(o->kind, SEKV_SPAN, (size_t)n);
    o->n_anchors = o->n_short = o->n_spans = 0;
    for (int t = 0; t < n; t++)
        if (t < lo || t >= hi) o->kind[t] = SEKV_FORCED;
    for (int i = 0; i < A && m > 0; i++) {
        int t = lo + (int)((long long)i * m / A);
        if (o->kind[t] == SEKV_SPAN) o->kind[t] = SEKV_ANCHOR, o->n_anchors++;
    }
    emit_span_runs(o, n, 0, l_min, l_max, pieces);
    free(pieces);
    return 0;
}

int sekv_segment(const float *surprisal, int n, double alpha, int l_min, int l_max,
                 int fixed_chunk, sekv_seg *out) {
    return sekv_segment_ex(surprisal, n, alpha, l_min, l_max, fixed_chunk, 0, 0, out);
}

void sekv_coarse(const float *K, const float *V, const float *H, int len, int d, float *kbar,
                 float *vbar, float *w) {
    double tot = 0;
    for (int t = 0; t < len; t++) tot += H && H[t] > 0 ? H[t] : 0;
    if (w)
        for (int t = 0; t < len; t++) w[t] = (float)(tot > 0 ? (H[t] > 0 ? H[t] : 0) / tot : 1.0 / len);
    for (int i = 0; i < d; i++) {
        double a = 0, b = 0;
        for (int t = 0; t < len; t++) {
            double wt = tot > 0 ? (H[t] > 0 ? H[t] : 0) / tot : 1.0 / len;
            a += wt * K[(size_t)t * d + i];
            b += wt * V[(size_t)t * d + i];
        }
        kbar[i] = (float)a;
        vbar[i] = (float)b;
    }
}

int sekv_factorize(const float *A, int len, int d, int R, float *buf, sekv_factor *f) {
    int r = sekv_factor_rank(len, d, R);
    if (r < 1 || r > SEKV_RMAX) return -1;
    *f = (sekv_factor){len, d, r, buf, buf + (size_t)len * r, buf + (size_t)len * r + r};
    return sekv_svd(A, len, d, r, f->U, f->s, f->Vt);
}

void sekv_reconstruct(const sekv_factor *f, const float *m, float *out) {
    int r = f->r, d = f->d;
    for (int t = 0; t < f->len; t++) {
        float *o = out + (size_t)t * d;
        for (int i = 0; i < d; i++) o[i] = 0;
        for (int k = 0; k < r; k++) {   /* row t = sum_k U[t][k] m_k s_k Vt[k] (vectorises) */
            float c = f->U[(size_t)t * r + k] * f->s[k] * (m ? m[k] : 1.0f);
            const float *v = f->Vt + (size_t)k * d;
            for (int i = 0; i < d; i++) o[i] += c * v[i];
        }
    }
}

/* ExpectedAttention's score (kvpress's ExpectedAttentionPress.score, expected_attention_press.py
 * at NVIDIA/kvpress 8bb29b9; Devoto et al. 2025, arXiv 2510.00636), in double:
 *  1. per query head, the mean mu and covariance S (divided by m, not m - 1) of the pre-RoPE
 *     queries of tokens n_sink .. n-1 (m of them);
 *  2. R = the mean over positions n .. n+F-1 of the RoPE rotation (mscale cos I + mscale sin P,
 *     pair by pair as the model rotates; not itself a rotation), applied: mu' = R mu,
 *     S' = R S R^T;
 *  3. for the keys of rows n_sink .. n-1: z_t = k_t . mu' / sqrt(d) + k_t^T S' k_t / (2d) (the
 *     second term when use_cov), softmax over those rows per query head, mean over the kv head's
 *     group, then (p + epsilon) * ||v_t|| when use_vnorm;
 *  4. the sink rows score the layer's maximum (over every kv head) + 1.
 * kvpress asserts n > n_sink; here a prompt of n <= n_sink rows scores every row 1. Channels
 * past the rotated ones (partial RoPE, which kvpress does not handle) pass through R. */
#include "expected_attention.h"
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The parameters by kvpress's names, from method m's table (expected-attention, criticalkv). */
int ea_opts_read(const kv_method *m, const char *params, const char *eps_key, ea_opts *o, char *err, size_t errlen) {
    return kv_param_int(m, params, "n_future_positions", &o->n_future, err, errlen) ||
           kv_param_int(m, params, "n_sink", &o->n_sink, err, errlen) ||
           kv_param_int(m, params, "use_covariance", &o->use_cov, err, errlen) ||
           kv_param_int(m, params, "use_vnorm", &o->use_vnorm, err, errlen) ||
           kv_param_double(m, params, eps_key, &o->epsilon, err, errlen) ? -1 : 0;
}

int ea_query_rows(const ea_opts *o, int n) { return n > o->n_sink ? n - o->n_sink : 0; }

/* The averaged rotation as per-channel pairs: for pair i (channels a, b), x'_a = c x_a - s x_b,
 * x'_b = s x_a + c x_b, with c, s the means of mscale cos / sin over the F positions. */
static void avg_rope(const ea_opts *o, const kv_rope *r, int n, int d, int *pa, int *pb, double *c, double *s) {
    int half = r->n_rot / 2;
    for (int i = 0; i < half; i++) {
        pa[i] = r->neox ? i : 2 * i;
        pb[i] = r->neox ? i + half : 2 * i + 1;
        double sc = 0, ss = 0;
        for (int q = 0; q < o->n_future; q++) {
            double th = (double)(n + q) * r->inv_freq[i];
            sc += cos(th), ss += sin(th);
        }
        c[i] = r->mscale * sc / o->n_future, s[i] = r->mscale * ss / o->n_future;
    }
    (void)d;
}

/* M <- R M where R acts on rows (pairs) and leaves unrotated channels alone; M is d x cols. */
static void rot_rows(double *M, int cols, int half, const int *pa, const int *pb, const double *c, const double *s) {
    for (int i = 0; i < half; i++)
        for (int k = 0; k < cols; k++) {
            double xa = M[(size_t)pa[i] * cols + k], xb = M[(size_t)pb[i] * cols + k];
            M[(size_t)pa[i] * cols + k] = c[i] * xa - s[i] * xb;
            M[(size_t)pb[i] * cols + k] = s[i] * xa + c[i] * xb;
        }
}

int ea_layer_scores(const ea_opts *o, const kv_prefill *p, int H, int Hkv, int d, float *score, const char *name,
                    char *err, size_t errlen) {
    int n = p->n, ns = o->n_sink < n ? o->n_sink : n, m = n - ns, G = H / Hkv;
    if (m <= 0) {
        for (size_t i = 0; i < (size_t)Hkv * n; i++) score[i] = 1;
        return 0;
    }
    if (!p->Q || p->q_rows < m || !p->rope)
        return snprintf(err, errlen, "%s: layer %d: the prefill gave %d of the %d pre-RoPE query rows and %s RoPE "
                        "(this driver or backend does not supply kv_prefill.Q)", name, p->layer, p->Q ? p->q_rows : 0,
                        m, p->rope ? "its" : "no"), -1;
    int half = p->rope->n_rot / 2;
    if (half < 0 || 2 * half > d) return snprintf(err, errlen, "%s: RoPE of %d channels in a head of %d", name,
                                                  p->rope->n_rot, d), -1;
    double *mu = malloc((size_t)d * sizeof *mu), *S = malloc((size_t)d * d * sizeof *S);
    double *X = malloc((size_t)m * d * sizeof *X), *KS = malloc((size_t)m * d * sizeof *KS);
    double *Kd = malloc((size_t)m * d * sizeof *Kd), *z = malloc((size_t)m * sizeof *z);
    double *acc = malloc((size_t)m * sizeof *acc), *c = malloc((size_t)(half + 1) * sizeof *c);
    double *s = malloc((size_t)(half + 1) * sizeof *s);
    int *pa = malloc((size_t)(half + 1) * sizeof *pa), *pb = malloc((size_t)(half + 1) * sizeof *pb);
    int rc = 0;
    if (!mu || !S || !X || !KS || !Kd || !z || !acc || !c || !s || !pa || !pb) {
        rc = -1;
        snprintf(err, errlen, "%s: out of memory scoring layer %d", name, p->layer);
        goto done;
    }
    avg_rope(o, p->rope, n, d, pa, pb, c, s);
    const double sq = sqrt((double)d);
    double best = -INFINITY;
    for (int j = 0; j < Hkv; j++) {
        const float *K = p->K + (size_t)j * p->kv_stride + (size_t)ns * d;
        for (size_t i = 0; i < (size_t)m * d; i++) Kd[i] = K[i];
        memset(acc, 0, (size_t)m * sizeof *acc);
        for (int h = j * G; h < (j + 1) * G; h++) {
            const float *Q = p->Q + (size_t)h * p->q_stride + (size_t)(p->q_rows - m) * d;
            memset(mu, 0, (size_t)d * sizeof *mu);
            for (int t = 0; t < m; t++)
                for (int a = 0; a < d; a++) mu[a] += Q[(size_t)t * d + a];
            for (int a = 0; a < d; a++) mu[a] /= m;
            if (o->use_cov) {   /* S = X^T X / m over the centred rows, then R S R^T */
                for (int t = 0; t < m; t++)
                    for (int a = 0; a < d; a++) X[(size_t)t * d + a] = Q[(size_t)t * d + a] - mu[a];
                cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, d, m, 1.0 / m, X, d, X, d, 0.0, S, d);
                rot_rows(S, d, half, pa, pb, c, s);   /* R S; its transpose is S R^T (S symmetric) */
                for (int a = 0; a < d; a++)
                    for (int b = a + 1; b < d; b++) {
                        double t = S[(size_t)a * d + b];
                        S[(size_t)a * d + b] = S[(size_t)b * d + a], S[(size_t)b * d + a] = t;
                    }
                rot_rows(S, d, half, pa, pb, c, s);   /* R (S R^T) */
            }
            rot_rows(mu, 1, half, pa, pb, c, s);
            /* z = K mu' / sqrt(d) (+ diag(K S' K^T) / 2d), softmax over the m rows */
            if (o->use_cov) cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, d, d, 1.0, Kd, d, S, d, 0.0, KS, d);
            double zmax = -INFINITY;
            for (int t = 0; t < m; t++) {
                const double *k = Kd + (size_t)t * d;
                double dm = 0, dc = 0;
                for (int a = 0; a < d; a++) dm += k[a] * mu[a];
                if (o->use_cov)
                    for (int a = 0; a < d; a++) dc += KS[(size_t)t * d + a] * k[a];
                z[t] = dm / sq + dc / d / 2;
                zmax = z[t] > zmax ? z[t] : zmax;
            }
            double sum = 0;
            for (int t = 0; t < m; t++) sum += (z[t] = exp(z[t] - zmax));
            for (int t = 0; t < m; t++) acc[t] += z[t] / sum;
        }
        float *sc = score + (size_t)j * n;
        const float *V = p->V + (size_t)j * p->kv_stride + (size_t)ns * d;
        for (int t = 0; t < m; t++) {
            double v = acc[t] / G;
            if (o->use_vnorm) {
                double vv = 0;
                for (int a = 0; a < d; a++) vv += (double)V[(size_t)t * d + a] * V[(size_t)t * d + a];
                v = (v + o->epsilon) * sqrt(vv);
            }
            sc[ns + t] = (float)v;
            best = sc[ns + t] > best ? sc[ns + t] : best;
        }
    }
    for (int j = 0; j < Hkv; j++)   /* kvpress: F.pad(value = scores.max().item() + 1) */
        for (int t = 0; t < ns; t++) score[(size_t)j * n + t] = (float)(best + 1);
done:
    free(mu), free(S), free(X), free(KS), free(Kd), free(z), free(acc), free(c), free(s), free(pa), free(pb);
    return rc;
}

/* SeKV rank gate, routing scores and the mixed-resolution attention of one query head
 * (see sekv_spans.h). Plain loops: these are the reference the trainer differentiates. */
#include "sekv_spans.h"

#include <math.h>
#include <stdlib.h>

float sekv_gelu(float x) { return (float)(0.5 * x * (1.0 + erf(x * 0.7071067811865476))); }

float sekv_gelu_grad(float x) {
    double cdf = 0.5 * (1.0 + erf(x * 0.7071067811865476));
    double pdf = 0.3989422804014327 * exp(-0.5 * (double)x * x);
    return (float)(cdf + x * pdf);
}

static float sigmoidf_(double x) { return (float)(1.0 / (1.0 + exp(-x))); }

/* y [rows] = Wm [rows][cols] x + b, in double; y may then go through gelu. */
static void dense(const float *Wm, const float *b, const float *x, int rows, int cols, float *y) {
    for (int i = 0; i < rows; i++) {
        double acc = b ? b[i] : 0;
        const float *w = Wm + (size_t)i * cols;
        for (int j = 0; j < cols; j++) acc += (double)w[j] * x[j];
        y[i] = (float)acc;
    }
}

void sekv_gate_forward(const sekv_params *p, const float *s, int r, const float *kbar, float *m,
                       float *work) {
    int R = p->rank_cap, d = p->head_dim, hid = p->hidden;
    float *buf = work ? work : malloc(sekv_gate_work_floats(p) * sizeof *buf);
    if (!buf) {   /* out of memory: an open gate (the untrained behaviour) */
        for (int i = 0; i < R; i++) m[i] = i < r ? 1.0f : 0.0f;
        return;
    }
    float *x = buf, *a1 = x + R + d, *h1 = a1 + hid, *a2 = h1 + hid, *h2 = a2 + hid, *z3 = h2 + hid;
    for (int i = 0; i < R; i++) x[i] = i < r && s[0] > 0 ? s[i] / s[0] : 0.0f;
    double nk = 0;
    for (int i = 0; i < d; i++) nk += (double)kbar[i] * kbar[i];
    nk = sqrt(nk);
    for (int i = 0; i < d; i++) x[R + i] = nk > 0 ? (float)(kbar[i] / nk) : 0.0f;
    dense(p->g_w1, p->g_b1, x, hid, R + d, a1);
    for (int i = 0; i < hid; i++) h1[i] = sekv_gelu(a1[i]);
    dense(p->g_w2, p->g_b2, h1, hid, hid, a2);
    for (int i = 0; i < hid; i++) h2[i] = sekv_gelu(a2[i]);
    dense(p->g_w3, p->g_b3, h2, R, hid, z3);
    for (int i = 0; i < R; i++) m[i] = i < r ? sigmoidf_(z3[i]) : 0.0f;
    if (!work) free(buf);
}

void sekv_route_query(const float *W, const float *q, int d, int dp, float *qhat) {
    dense(W, NULL, q, dp, d, qhat);
}

void sekv_route_key(const float *W, const float *kbar, int d, int dp, float *khat) {
    dense(W, NULL, kbar, dp, d, khat);
    double n = 0;
    for (int i = 0; i < dp; i++) n += (double)khat[i] * khat[i];
    n = sqrt(n);
    for (int i = 0; i < dp; i++) khat[i] = n > 0 ? (float)(khat[i] / n) : 0.0f;
}

float sekv_route_logit(const float *qhat, const float *khat, int dp, int len) {
    double dot = 0;
    for (int i = 0; i < dp; i++) dot += (double)qhat[i] * khat[i];
    return (float)(dot / sqrt((double)dp) + log((double)len));
}

float sekv_route_score(const float *qhat, const float *khat, int dp, int len) {
    double dot = 0;
    for (int i = 0; i < dp; i++) dot += (double)qhat[i] * khat[i];
    return sigmoidf_(dot / sqrt((double)dp) + log((double)len));
}

static double dot_d(const float *a, const float *b, int d) {
    double s = 0;
    for (int i = 0; i < d; i++) s += (double)a[i] * b[i];
    return s;
}

/* Calls fn(ctx, k, v, bias) for every included entry, in entry order. */
typedef void (*entry_fn)(void *ctx, const float *k, const float *v, double bias);
static void for_entries(const sekv_mix_args *a, entry_fn fn, void *ctx) {
    int d = a->d;
    for (int i = 0; i < a->nf; i++) fn(ctx, a->Kf + (size_t)i * d, a->Vf + (size_t)i * d, 0);
    for (int s = 0; s < a->ns; s++) {
        double z = a->z[s];
        if (z < 1)
            fn(ctx, a->kbar + (size_t)s * d, a->vbar + (size_t)s * d,
               log((double)a->len[s]) + log(fmax(1 - z, 1e-6)));
        if (z > 0)
            for (int t = 0; t < a->len[s]; t++)
                fn(ctx, a->Kr[s] + (size_t)t * d, a->Vr[s] + (size_t)t * d, log(fmax(z, 1e-6)));
    }
}

typedef struct {
    const sekv_mix_args *a;
    int pass, n;
    double mx, sum, *acc, scale;
} mix_ctx;

static void mix_entry(void *c_, const float *k, const float *v, double bias) {
    mix_ctx *c = c_;
    double l = dot_d(c->a->q, k, c->a->d) * c->scale + bias;
    if (c->pass == 0) {
        if (l > c->mx) c->mx = l;
    } else if (c->pass == 1) {
        double e = exp(l - c->mx);
        c->sum += e;
        for (int i = 0; i < c->a->d; i++) c->acc[i] += e * v[i];
    } else if (c->a->probs) {
        c->a->probs[c->n] = (float)(exp(l - c->mx) / c->sum);
    }
    c->n++;
}

int sekv_mix_attend(const sekv_mix_args *a) {
    int d = a->d;
    double *acc = calloc((size_t)d, sizeof *acc);
    mix_ctx c = {.a = a, .mx = -INFINITY, .acc = acc, .scale = 1.0 / sqrt((double)d)};
    for_entries(a, mix_entry, &c);
    int n = c.n;
    if (n == 0 || !acc) {
        for (int i = 0; i < d; i++) a->out[i] = 0;
        free(acc);
        return acc ? 0 : -1;
    }
    c.pass = 1;
    c.n = 0;
    for_entries(a, mix_entry, &c);
    for (int i = 0; i < d; i++) a->out[i] = (float)(acc[i] / c.sum);
    c.pass = 2;
    c.n = 0;
    if (a->probs) for_entries(a, mix_entry, &c);
    free(acc);
    return n;
}

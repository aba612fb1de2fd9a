/* SeKV training: parameters in double, AdamW, the learning-rate and budget schedules,
 * gradient clipping (see sekv_train.h). */
#include "sekv_train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const sekv_tparam_names[8] = {"W", "tau", "g_w1", "g_b1", "g_w2", "g_b2", "g_w3", "g_b3"};

static void sizes(const sekv_tparams *t, size_t len[8]) {
    len[0] = (size_t)t->L * t->H * t->dp * t->d;
    len[1] = (size_t)t->L * t->H;
    len[2] = (size_t)t->hidden * (t->R + t->d);
    len[3] = (size_t)t->hidden;
    len[4] = (size_t)t->hidden * t->hidden;
    len[5] = (size_t)t->hidden;
    len[6] = (size_t)t->R * t->hidden;
    len[7] = (size_t)t->R;
}

int sekv_tparams_alloc(sekv_tparams *t, int L, int H, int d, int R) {
    memset(t, 0, sizeof *t);
    if (L < 1 || H < 1 || d < 1 || R < 1 || R > SEKV_RMAX) return -1;
    *t = (sekv_tparams){.L = L, .H = H, .d = d, .R = R, .dp = SEKV_DPRIME, .hidden = SEKV_HIDDEN};
    size_t len[8];
    sizes(t, len);
    for (int i = 0; i < 8; i++) t->n += len[i];
    double *a = calloc(t->n, sizeof *a);
    if (!a) return -1;
    double **dst[8] = {&t->W, &t->tau, &t->g_w1, &t->g_b1, &t->g_w2, &t->g_b2, &t->g_w3, &t->g_b3};
    for (int i = 0; i < 8; i++) {
        *dst[i] = a;
        a += len[i];
    }
    return 0;
}

void sekv_tparams_free(sekv_tparams *t) {
    if (!t) return;
    free(t->W);
    memset(t, 0, sizeof *t);
}

void sekv_tparams_zero(sekv_tparams *t) { memset(t->W, 0, t->n * sizeof *t->W); }

void sekv_tparams_arrays(const sekv_tparams *t, double *arr[8], size_t len[8]) {
    sizes(t, len);
    double *src[8] = {t->W, t->tau, t->g_w1, t->g_b1, t->g_w2, t->g_b2, t->g_w3, t->g_b3};
    for (int i = 0; i < 8; i++) arr[i] = src[i];
}

static void float_arrays(const sekv_params *p, float *arr[8]) {
    float *src[8] = {p->W, p->tau, p->g_w1, p->g_b1, p->g_w2, p->g_b2, p->g_w3, p->g_b3};
    for (int i = 0; i < 8; i++) arr[i] = src[i];
}

/* Every array of t to p (to_params) or of p to t, element by element. */
static void convert(const sekv_tparams *t, const sekv_params *p, int to_params) {
    double *a[8];
    float *f[8];
    size_t len[8];
    sekv_tparams_arrays(t, a, len);
    float_arrays(p, f);
    for (int i = 0; i < 8; i++)
        for (size_t k = 0; k < len[i]; k++)
            if (to_params) f[i][k] = (float)a[i][k];
            else a[i][k] = f[i][k];
}

int sekv_tparams_from(sekv_tparams *t, const sekv_params *p) {
    if (p->dp != SEKV_DPRIME || p->hidden != SEKV_HIDDEN) return -1;
    if (sekv_tparams_alloc(t, p->n_layers, p->n_heads, p->head_dim, p->rank_cap)) return -1;
    convert(t, p, 0);
    return 0;
}

void sekv_tparams_to(const sekv_tparams *t, sekv_params *p) { convert(t, p, 1); }

sekv_optim_cfg sekv_optim_defaults(int steps) {
    return (sekv_optim_cfg){.lr = 1e-3, .weight_decay = 0.01, .beta1 = 0.9, .beta2 = 0.999,
                            .eps = 1e-8, .warmup_frac = 0.1, .clip = 1.0, .steps = steps};
}

double sekv_lr_at(const sekv_optim_cfg *c, int s) {
    int warm = (int)(c->steps * c->warmup_frac);
    if (s < warm) return c->lr * (s + 1) / (double)warm;
    int rest = c->steps - warm > 1 ? c->steps - warm : 1;
    double prog = (double)(s - warm) / rest;
    prog = prog < 0 ? 0 : prog > 1 ? 1 : prog;
    return c->lr * 0.5 * (1.0 + cos(M_PI * prog));
}

double sekv_budget_at(double lambda, int s, int steps) {
    int ramp = steps / 2 > 1 ? steps / 2 : 1;
    return s >= ramp ? lambda : lambda * s / ramp;
}

double sekv_clip(sekv_tparams *g, double clip) {
    double ss = 0;
    for (size_t i = 0; i < g->n; i++) ss += g->W[i] * g->W[i];
    double norm = sqrt(ss);
    double f = clip / (norm + 1e-6);
    if (f < 1)
        for (size_t i = 0; i < g->n; i++) g->W[i] *= f;
    return norm;
}

void sekv_adamw(sekv_tparams *th, const sekv_tparams *g, sekv_tparams *m, sekv_tparams *v,
                const sekv_optim_cfg *c, double lr, int t) {
    double bc1 = 1 - pow(c->beta1, t), bc2 = 1 - pow(c->beta2, t);
    for (size_t i = 0; i < th->n; i++) {
        double gi = g->W[i];
        th->W[i] *= 1 - lr * c->weight_decay;
        m->W[i] = c->beta1 * m->W[i] + (1 - c->beta1) * gi;
        v->W[i] = c->beta2 * v->W[i] + (1 - c->beta2) * gi * gi;
        th->W[i] -= lr * (m->W[i] / bc1) / (sqrt(v->W[i] / bc2) + c->eps);
    }
}

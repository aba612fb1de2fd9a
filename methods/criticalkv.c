/* CriticalKV (kvpress's CriticalKVPress over ExpectedAttentionPress(use_vnorm=False), the pair
 * kvpress's evaluation registry names critical_expected_attention; kvpress 0.5.5,
 * kvpress/presses/criticalkv_press.py; Feng et al. 2025, arXiv 2502.03805). Two stages per kv
 * head of a layer over the ExpectedAttention scores s (expected_attention.c, sinks included):
 *  1. the top S = max(1, floor(B * first_stage_ratio)) rows by s are kept outright (0 when the
 *     ratio is 0; the floor of 1 is kvpress 0.5.5's, not at 8bb29b9);
 *  2. every other row scores (s + epsilon) * w_t, w_t = the mean over the kv head's query heads
 *     h of ||Wo_h v_t||_1 (Wo_h: the output projection's columns of head h, so Wo_h v_t is what
 *     row t's value adds to the layer's output per unit of attention), and the rest of the B
 *     rows go by it.
 * Ties: the earlier row. Needs the prefill's queries and the layer's Wo (door version 4). The
 * head-adaptive form (CriticalAdaKVPress) is criticaladakv.c. Prompt compressed once; decoded
 * tokens join at full resolution (under --decode hold the lowest-scoring prompt row over the
 * budget goes, stage-1 rows last). */
#include "criticalkv.h"
#include "expected_attention.h"
#include "scorer.h"
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

extern const kv_method kv_criticalkv;

struct kv_state {
    kv_cacheset cs;     /* first: the scorer base and the door members rely on it */
    ea_opts o;
    double epsilon, first_stage_ratio;
};

static const kv_param params[] = {
    {"first_stage_ratio", "0.5", "share of the budget kept by the score alone (stage 1)"},
    {"epsilon", "1e-4", "added to the score before the ||Wo v||_1 rescaling (stage 2)"},
    CK_EA_PARAMS,
    {NULL, NULL, NULL},
};
static const kv_range ranges[] = {
    {"first_stage_ratio", 0, 1, NAN}, {"epsilon", 0, 1e9, NAN}, CK_EA_RANGES, {NULL, 0, 0, 0},
};

static kv_state *ck_init(const kv_setup *s, char *err, size_t errlen) {
    kv_state *st = calloc(1, sizeof *st);
    if (!st) return snprintf(err, errlen, "criticalkv: out of memory"), NULL;
    if (kv_param_check(&kv_criticalkv, s->params, err, errlen) ||
        ea_opts_read(&kv_criticalkv, s->params, "press_epsilon", &st->o, err, errlen) ||
        kv_param_double(&kv_criticalkv, s->params, "epsilon", &st->epsilon, err, errlen) ||
        kv_param_double(&kv_criticalkv, s->params, "first_stage_ratio", &st->first_stage_ratio, err, errlen) ||
        cs_init(&st->cs, s, 1, 1, "criticalkv", err, errlen)) {
        free(st);
        return NULL;
    }
    return st;
}

void criticalkv_needs_of(const kv_method *m, const kv_setup *s, kv_needs *out) {
    ea_opts o = {0};
    char err[128];
    if (ea_opts_read(m, s->params, "press_epsilon", &o, err, sizeof err)) o.n_sink = 0;
    out->queries = ea_query_rows(&o, s->n_prompt);
    out->wo = 1;
}

static void ck_needs(const kv_setup *s, kv_needs *out) { criticalkv_needs_of(&kv_criticalkv, s, out); }

void criticalkv_wov_norm(const kv_cacheset *c, const kv_prefill *p, int j, double *w, float *y) {
    int n = p->n, d = c->d, G = c->H / c->Hkv, E = p->embd;
    size_t hd = (size_t)c->H * d;
    const float *V = p->V + (size_t)j * p->kv_stride;
    for (int t = 0; t < n; t++) w[t] = 0;
    for (int t0 = 0; t0 < n; t0 += CK_ROWS) {
        int m = n - t0 < CK_ROWS ? n - t0 : CK_ROWS;
        for (int h = j * G; h < (j + 1) * G; h++) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, E, d, 1.0f, V + (size_t)t0 * d, d,
                        p->Wo + (size_t)h * d, (int)hd, 0.0f, y, E);
            for (int t = 0; t < m; t++) {
                double sum = 0;
                for (int e = 0; e < E; e++) sum += fabsf(y[(size_t)t * E + e]);
                w[t0 + t] += sum;
            }
        }
    }
    for (int t = 0; t < n; t++) w[t] /= G;
}

static int ck_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    kv_cacheset *c = &st->cs;
    if (cs_begin_layer(c, p, "criticalkv", err, errlen)) return -1;
    int n = p->n, B = c->budget, rc = 0;
    if (n > B && (!p->Wo || p->embd < 1))
        return snprintf(err, errlen, "criticalkv: layer %d: the prefill gave no output projection Wo (this driver "
                        "or backend does not supply kv_prefill.Wo)", p->layer), -1;
    float *score = calloc((size_t)c->Hkv * n, sizeof *score);
    double *w = malloc((size_t)n * sizeof *w);
    int32_t *top = malloc((size_t)n * sizeof *top);
    float *y = n > B ? malloc((size_t)CK_ROWS * (p->embd > 0 ? p->embd : 1) * sizeof *y) : NULL;
    if (!score || !w || !top || (n > B && !y)) rc = -1, snprintf(err, errlen, "criticalkv: out of memory");
    if (!rc && n > B) rc = ea_layer_scores(&st->o, p, c->H, c->Hkv, c->d, score, "criticalkv", err, errlen);
    int S = (int)floor(B * st->first_stage_ratio);
    if (st->first_stage_ratio > 0 && S < 1) S = 1;
    for (int j = 0; j < c->Hkv && !rc && n > B; j++) {
        float *sc = score + (size_t)j * n;
        int ns = topk_sorted(sc, n, S, top);
        if (ns < 0) {
            rc = -1, snprintf(err, errlen, "criticalkv: out of memory");
            break;
        }
        criticalkv_wov_norm(c, p, j, w, y);
        for (int t = 0; t < n; t++) sc[t] = (float)(((double)sc[t] + st->epsilon) * w[t]);
        for (int i = 0; i < ns; i++) sc[top[i]] = FLT_MAX;   /* kvpress: finfo(float32).max */
    }
    for (int j = 0; j < c->Hkv && !rc; j++)
        if (scorer_load(c, p, j, score + (size_t)j * n, 0, 0, n <= B ? n : B))
            rc = -1, snprintf(err, errlen, "criticalkv: out of memory loading layer %d", p->layer);
    free(score), free(w), free(top), free(y);
    return rc;
}

const kv_method kv_criticalkv = {
    KV_METHOD_HEAD,
    .name = "criticalkv",
    .summary = "ExpectedAttention's top share of the budget, the rest by its score times the value's projected "
               "norm ||Wo v||_1; kvpress's CriticalKVPress(ExpectedAttentionPress(use_vnorm=False)) (kvpress "
               "0.5.5), prompt compressed once",
    .params = params,
    .ranges = ranges,
    .init = ck_init,
    .needs = ck_needs,
    .ingest = ck_ingest,
    .append = cs_door_append,
    KV_CACHESET_DOOR,
    .free = cs_door_free,
};

/* CriticalAdaKV (kvpress's CriticalAdaKVPress over ExpectedAttentionPress(use_vnorm=False);
 * kvpress 0.5.5, kvpress/presses/criticalkv_press.py; Feng et al. 2025, arXiv 2502.03805):
 * CriticalKV's two stages inside AdaKV's head-adaptive budgets. Per layer, over the
 * ExpectedAttention scores s [Hkv][n] (expected_attention.c, sinks included):
 *  1. AdaKV's allocation (scorer_adaptive_alloc): each kv head's top max(1, floor(B * alpha))
 *     rows are its safeguard; the layer's Hkv * B best rows over all kv heads (safeguard first)
 *     give each kv head j its budget B_j (the count of them in j);
 *  2. stage 1: kv head j keeps the safeguard and its top floor(B_j * first_stage_ratio) rows by
 *     s outright (kvpress sets them to finfo.max; no floor of 1 here, unlike criticalkv);
 *  3. stage 2: every other row scores (s + epsilon) * w_t, w_t = the mean over the group's query
 *     heads of ||Wo_h v_t||_1 (criticalkv_wov_norm), and kv head j keeps its top B_j rows,
 *     the stage-1 rows first.
 * kvpress multiplies the forced rows' finfo.max by w_t too (inf in float32); ranking them first
 * is the same choice, as no head forces more than its B_j. Ties: the earlier row. Needs the
 * prefill's queries and the layer's Wo (door version 4). Rows per kv head vary (head_budgets);
 * decoded tokens join at full resolution; under --decode hold the layer's lowest-score row goes
 * while the layer is over Hkv * B (forced rows score FLT_MAX). kvpress masks the pruned keys;
 * kvbench removes them. */
#include "criticalkv.h"
#include "expected_attention.h"
#include "scorer.h"
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

extern const kv_method kv_criticaladakv;

struct kv_state {
    kv_cacheset cs;     /* first: the scorer base and the door members rely on it */
    ea_opts o;
    double alpha, epsilon, first_stage_ratio;
};

static const kv_param params[] = {
    {"alpha_safeguard", "0.2", "each kv head keeps at least its top max(1, floor(alpha * B)) rows, none at 0"},
    {"first_stage_ratio", "0.5", "share of each kv head's budget kept by the score alone (stage 1)"},
    {"epsilon", "1e-4", "added to the score before the ||Wo v||_1 rescaling (stage 2)"},
    CK_EA_PARAMS,
    {NULL, NULL, NULL},
};
static const kv_range ranges[] = {
    {"alpha_safeguard", 0, 1, NAN}, {"first_stage_ratio", 0, 1, NAN}, {"epsilon", 0, 1e9, NAN},
    CK_EA_RANGES, {NULL, 0, 0, 0},
};

static kv_state *cak_init(const kv_setup *s, char *err, size_t errlen) {
    const kv_method *m = &kv_criticaladakv;
    kv_state *st = calloc(1, sizeof *st);
    if (!st) return snprintf(err, errlen, "criticaladakv: out of memory"), NULL;
    if (kv_param_check(m, s->params, err, errlen) || ea_opts_read(m, s->params, "press_epsilon", &st->o, err, errlen) ||
        kv_param_double(m, s->params, "alpha_safeguard", &st->alpha, err, errlen) ||
        kv_param_double(m, s->params, "epsilon", &st->epsilon, err, errlen) ||
        kv_param_double(m, s->params, "first_stage_ratio", &st->first_stage_ratio, err, errlen) ||
        cs_init(&st->cs, s, 1, 1, "criticaladakv", err, errlen)) {
        free(st);
        return NULL;
    }
    return st;
}

static void cak_needs(const kv_setup *s, kv_needs *out) { criticalkv_needs_of(&kv_criticaladakv, s, out); }

/* kv head j's rows after the allocation: stage 1, stage 2, the load. sc is its ExpectedAttention
 * score row (rewritten to the stage-2 score), kept/safe its allocation flags. */
static int cak_head(kv_state *st, const kv_prefill *p, int j, float *sc, const uint8_t *kept, const uint8_t *safe,
                    float *rank, int32_t *top, double *w, double *row_score, float *y) {
    kv_cacheset *c = &st->cs;
    int n = p->n, Bj = 0;
    for (int t = 0; t < n; t++) Bj += kept[t];
    for (int t = 0; t < n; t++) rank[t] = safe[t] ? INFINITY : sc[t];   /* kvpress: safeguard rows at finfo.max */
    int S1 = (int)(Bj * st->first_stage_ratio), ns = topk_sorted(rank, n, S1, top);
    if (ns < 0) return -1;
    for (int i = 0; i < ns; i++) rank[top[i]] = INFINITY;   /* stage 1 joins the safeguard */
    criticalkv_wov_norm(c, p, j, w, y);
    for (int t = 0; t < n; t++) {
        int forced = rank[t] == INFINITY;
        sc[t] = forced ? FLT_MAX : (float)(((double)sc[t] + st->epsilon) * w[t]);
        rank[t] = forced ? INFINITY : sc[t];
        row_score[t] = sc[t];
    }
    int nk = topk_sorted(rank, n, Bj, top);
    return nk < 0 ? -1 : cs_load(c, p, j, top, nk, row_score);
}

static int cak_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    kv_cacheset *c = &st->cs;
    if (cs_begin_layer(c, p, "criticaladakv", err, errlen)) return -1;
    int n = p->n, B = c->budget, Hkv = c->Hkv, rc = 0;
    if (n <= B) {   /* everything stays */
        float *zero = calloc((size_t)Hkv * n, sizeof *zero);
        rc = !zero || scorer_load_adaptive(c, p, zero, st->alpha);
        free(zero);
        if (rc) snprintf(err, errlen, "criticaladakv: out of memory loading layer %d", p->layer);
        return rc ? -1 : 0;
    }
    if (!p->Wo || p->embd < 1)
        return snprintf(err, errlen, "criticaladakv: layer %d: the prefill gave no output projection Wo (this driver "
                        "or backend does not supply kv_prefill.Wo)", p->layer), -1;
    size_t N = (size_t)Hkv * n;
    float *score = malloc(N * sizeof *score), *rank = malloc((size_t)n * sizeof *rank);
    float *y = malloc((size_t)CK_ROWS * p->embd * sizeof *y);
    uint8_t *kept = malloc(N), *safe = malloc(N);
    int32_t *top = malloc((size_t)n * sizeof *top);
    double *w = malloc((size_t)n * sizeof *w), *row_score = malloc((size_t)n * sizeof *row_score);
    if (!score || !rank || !y || !kept || !safe || !top || !w || !row_score)
        rc = -1, snprintf(err, errlen, "criticaladakv: out of memory");
    if (!rc) rc = ea_layer_scores(&st->o, p, c->H, Hkv, c->d, score, "criticaladakv", err, errlen);
    if (!rc && scorer_adaptive_alloc(c, n, score, st->alpha, kept, safe))
        rc = -1, snprintf(err, errlen, "criticaladakv: out of memory");
    for (int j = 0; j < Hkv && !rc; j++)
        if (cak_head(st, p, j, score + (size_t)j * n, kept + (size_t)j * n, safe + (size_t)j * n, rank, top, w,
                     row_score, y))
            rc = -1, snprintf(err, errlen, "criticaladakv: out of memory loading layer %d", p->layer);
    free(score), free(rank), free(y), free(kept), free(safe), free(top), free(w), free(row_score);
    return rc;
}

const kv_method kv_criticaladakv = {
    KV_METHOD_HEAD,
    .name = "criticaladakv",
    .summary = "CriticalKV's two stages inside AdaKV's head-adaptive budgets: Hkv*B rows per layer shared by the "
               "kv heads on ExpectedAttention's scores, then per head its top half by the score and the rest by the "
               "score times ||Wo v||_1; kvpress's CriticalAdaKVPress(ExpectedAttentionPress(use_vnorm=False)) "
               "(kvpress 0.5.5), prompt compressed once",
    .params = params,
    .ranges = ranges,
    .init = cak_init,
    .needs = cak_needs,
    .ingest = cak_ingest,
    .append = scorer_adaptive_append,
    KV_CACHESET_DOOR,
    .free = cs_door_free,
    .head_budgets = 1,
};

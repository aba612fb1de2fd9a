/* ExpectedAttention (kvpress's ExpectedAttentionPress, kvpress/presses/expected_attention_press.py
 * at NVIDIA/kvpress 8bb29b9, release 0.5.5; Devoto et al. 2025, arXiv 2510.00636): a row is
 * worth the attention that the prompt's future queries are expected to pay it, from a Gaussian
 * fitted to the prompt's own pre-RoPE queries and the RoPE rotation averaged over the next
 * n_future_positions positions (the rule: expected_attention.c). Top B per kv head; the first
 * n_sink rows always. kvpress's defaults; its evaluation registry runs it as
 * AdaKVPress(ExpectedAttentionPress(epsilon=1e-2)) (not this method). Needs the prefill's
 * queries (kv_needs.queries, door version 4). Prompt compressed once; decoded tokens join at
 * full resolution (under --decode hold the lowest-scoring prompt row over the budget goes). */
#include "expected_attention.h"
#include "scorer.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

extern const kv_method kv_expected_attention;

struct kv_state {
    kv_cacheset cs;     /* first: the scorer base and the door members rely on it */
    ea_opts o;
};

static const kv_param params[] = {
    {"n_future_positions", "512", "future positions whose RoPE rotation is averaged"},
    {"n_sink", "4", "first prompt tokens always kept, their queries left out of the statistics"},
    {"use_covariance", "1", "1: the queries' covariance term too; 0: the mean alone"},
    {"use_vnorm", "1", "1: scores times ||v|| (after + epsilon)"},
    {"epsilon", "0", "added to the score before the ||v|| rescaling"},
    {NULL, NULL, NULL},
};
static const kv_range ranges[] = {
    {"n_future_positions", 1, 1e7, NAN}, {"n_sink", 0, 1e9, NAN}, {"use_covariance", 0, 1, NAN},
    {"use_vnorm", 0, 1, NAN}, {"epsilon", 0, 1e9, NAN}, {NULL, 0, 0, 0},
};

static kv_state *ea_init(const kv_setup *s, char *err, size_t errlen) {
    kv_state *st = calloc(1, sizeof *st);
    if (!st) return snprintf(err, errlen, "expected-attention: out of memory"), NULL;
    if (kv_param_check(&kv_expected_attention, s->params, err, errlen) ||
        ea_opts_read(&kv_expected_attention, s->params, "epsilon", &st->o, err, errlen) ||
        cs_init(&st->cs, s, 1, 1, "expected-attention", err, errlen)) {
        free(st);
        return NULL;
    }
    return st;
}

static void ea_needs(const kv_setup *s, kv_needs *out) {
    ea_opts o = {0};
    char err[128];
    if (ea_opts_read(&kv_expected_attention, s->params, "epsilon", &o, err, sizeof err)) o.n_sink = 0;
    out->queries = ea_query_rows(&o, s->n_prompt);
}

static int ea_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    kv_cacheset *c = &st->cs;
    if (cs_begin_layer(c, p, "expected-attention", err, errlen)) return -1;
    int n = p->n, B = c->budget;
    float *score = malloc((size_t)c->Hkv * n * sizeof *score);
    if (!score) return snprintf(err, errlen, "expected-attention: out of memory"), -1;
    int rc = n > B ? ea_layer_scores(&st->o, p, c->H, c->Hkv, c->d, score, "expected-attention", err, errlen) : 0;
    if (n <= B)
        for (size_t i = 0; i < (size_t)c->Hkv * n; i++) score[i] = 0;
    for (int j = 0; j < c->Hkv && !rc; j++)
        if (scorer_load(c, p, j, score + (size_t)j * n, 0, 0, n <= B ? n : B))
            rc = -1, snprintf(err, errlen, "expected-attention: out of memory loading layer %d", p->layer);
    free(score);
    return rc;
}

const kv_method kv_expected_attention = {
    KV_METHOD_HEAD,
    .name = "expected-attention",
    .summary = "the tokens future queries are expected to attend (a Gaussian of the prompt's pre-RoPE queries, RoPE "
               "averaged over the next positions) times ||v||, + the first n_sink; kvpress's ExpectedAttentionPress "
               "(kvpress 8bb29b9), prompt compressed once",
    .params = params,
    .ranges = ranges,
    .init = ea_init,
    .needs = ea_needs,
    .ingest = ea_ingest,
    .append = cs_door_append,
    KV_CACHESET_DOOR,
    .free = cs_door_free,
};

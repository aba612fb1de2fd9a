/* KnormPress against a float64 reference on random keys: per kv head, the first `sinks`
 * rows plus the B - sinks rows of smallest key L2 norm (ties: the earlier row), sinks=0
 * being kvpress's KnormPress; under --decode hold a decoded token over the budget evicts
 * the largest-norm prompt row; n <= B keeps everything. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../methods/method.h"
#include "check.h"

typedef struct { double norm; int t; } ranked;

static int by_norm(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->norm != y->norm) return x->norm < y->norm ? -1 : 1;
    return x->t - y->t;
}
static int by_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* The reference kept positions of one kv head, ascending; returns the count. */
static int reference(const float *K, int n, int d, int B, int sinks, int *keep) {
    if (n <= B) {
        for (int t = 0; t < n; t++) keep[t] = t;
        return n;
    }
    if (sinks > B) sinks = B;
    ranked *r = malloc((size_t)n * sizeof *r);
    int m = 0, nk = 0;
    for (int t = 0; t < sinks; t++) keep[nk++] = t;
    for (int t = sinks; t < n; t++) {
        double ss = 0;
        for (int c = 0; c < d; c++) ss += (double)K[(size_t)t * d + c] * K[(size_t)t * d + c];
        r[m++] = (ranked){sqrt(ss), t};
    }
    qsort(r, (size_t)m, sizeof *r, by_norm);
    for (int i = 0; i < B - sinks; i++) keep[nk++] = r[i].t;
    qsort(keep, (size_t)nk, sizeof *keep, by_int);
    free(r);
    return nk;
}

int main(void) {
    test_seed();
    const kv_method *m = kv_method_find("knormpress");
    CHECK(m != NULL, "knormpress is not registered");
    if (!m) return check_done("test_knormpress");
    for (int trial = 0; trial < 40; trial++) {
        int Hkv = test_int(1, 3), g = test_int(1, 2), d = 8 << test_int(0, 2), n = test_int(5, 300);
        int B = test_int(1, n + 10), sinks = test_int(0, 3) ? test_int(0, 8) : 0, hold = test_int(0, 1);
        char params[32];
        snprintf(params, sizeof params, "sinks=%d", sinks);
        kv_setup s = {.n_layers = 1, .n_heads = Hkv * g, .n_kv_heads = Hkv, .head_dim = d, .n_prompt = n,
                      .max_decode = 2, .budget_tokens = B, .params = params,
                      .decode_rule = hold ? KV_DECODE_HOLD : KV_DECODE_APPEND};
        size_t N = (size_t)Hkv * (n + 1) * d;
        float *K = malloc(N * sizeof *K), *V = malloc(N * sizeof *V);
        /* keys of varied norms, so the selection is not decided by rounding */
        for (size_t i = 0; i < N; i++) K[i] = test_normal() * (float)(0.2 + 2 * test_unif()), V[i] = test_normal();
        char err[256] = "";
        kv_state *st = m->init(&s, err, sizeof err);
        CHECK(st, "init: %s", err);
        if (!st) continue;
        kv_prefill p = {.layer = 0, .n = n, .K = K, .V = V, .kv_stride = (size_t)(n + 1) * d};
        CHECK(m->ingest(st, &p, err, sizeof err) == 0, "ingest: %s", err);
        int *want = malloc((size_t)(n + 1) * sizeof *want);
        int32_t *got = malloc((size_t)(n + 1) * sizeof *got);
        for (int j = 0; j < Hkv; j++) {
            int nw = reference(K + (size_t)j * (n + 1) * d, n, d, B, sinks, want), ng = 0;
            m->rows(st, 0, j, got, n + 1, &ng);
            int same = ng == nw;
            for (int i = 0; same && i < nw; i++) same = got[i] == want[i];
            CHECK(same, "trial %d kv head %d (n %d B %d sinks %d): kept %d rows, reference %d, or other positions",
                  trial, j, n, B, sinks, ng, nw);
        }
        /* one decoded token: under hold, over the budget, the largest-norm prompt row goes */
        float *k = malloc((size_t)Hkv * d * sizeof *k), *v = malloc((size_t)Hkv * d * sizeof *v);
        for (int j = 0; j < Hkv; j++)
            memcpy(k + (size_t)j * d, K + ((size_t)j * (n + 1) + n) * d, (size_t)d * sizeof *k),
                memcpy(v + (size_t)j * d, V + ((size_t)j * (n + 1) + n) * d, (size_t)d * sizeof *v);
        kv_token tok = {.pos = n};
        m->append(st, 0, k, v, &tok);
        for (int j = 0; j < Hkv; j++) {
            int nw = reference(K + (size_t)j * (n + 1) * d, n, d, B, sinks, want), ng = 0;
            if (hold && nw + 1 > B) {   /* drop the largest-norm non-sink kept row */
                int drop = -1, s0 = n <= B ? n : sinks < B ? sinks : B;
                double worst = -1;
                for (int i = 0; i < nw; i++) {
                    if (want[i] < s0) continue;
                    const float *kr = K + ((size_t)j * (n + 1) + want[i]) * d;
                    double ss = 0;
                    for (int c = 0; c < d; c++) ss += (double)kr[c] * kr[c];
                    if (sqrt(ss) > worst) worst = sqrt(ss), drop = i;
                }
                if (drop < 0) drop = 0;   /* only +inf rows: the oldest */
                memmove(want + drop, want + drop + 1, (size_t)(nw - drop - 1) * sizeof *want);
                nw--;
            }
            want[nw++] = n;
            m->rows(st, 0, j, got, n + 1, &ng);
            int same = ng == nw;
            for (int i = 0; same && i < nw; i++) same = got[i] == want[i];
            CHECK(same, "trial %d kv head %d (n %d B %d sinks %d %s): after one decoded token %d rows, reference %d",
                  trial, j, n, B, sinks, hold ? "hold" : "append", ng, nw);
        }
        m->free(st);
        free(K), free(V), free(want), free(got), free(k), free(v);
    }
    return check_done("test_knormpress");
}

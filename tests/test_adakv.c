/* adakv-snapkv (AdaKV's head-adaptive budgets over SnapKV's scores, kvpress's
 * AdaKVPress(SnapKVPress)) against a float64 reference on random window attention rows:
 * per head the pooled window score (sum over the last w rows, 1-D max/avg pooling with
 * padding kernel/2, mean or max over the query group), the w window rows forced; each kv
 * head's top max(1, floor(alpha * B)) rows kept first (none when alpha = 0); then the layer's Hkv * B rows by score over
 * all kv heads jointly (ties: lower kv head, then earlier row). Kept positions must match
 * exactly per kv head; the layer holds Hkv * B rows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../methods/method.h"
#include "check.h"

typedef struct { int tier; float s; int i; } key;

static int by_key(const void *a, const void *b) {
    const key *x = a, *y = b;
    if (x->tier != y->tier) return x->tier > y->tier ? -1 : 1;
    if (x->s != y->s) return x->s > y->s ? -1 : 1;
    return x->i - y->i;
}

/* score[j][t] as float, window rows +inf. */
static void ref_scores(const float *wp, int H, int Hkv, int win, int n, int w, int kernel, int pool, int agg,
                       float *score) {
    int g = H / Hkv, m = n - w;
    double *sum = malloc((size_t)(m > 0 ? m : 1) * sizeof *sum);
    for (int j = 0; j < Hkv; j++) {
        for (int t = 0; t < n; t++) score[(size_t)j * n + t] = INFINITY;
        double *acc = calloc((size_t)(m > 0 ? m : 1), sizeof *acc);
        for (int t = 0; t < m; t++) acc[t] = agg ? -INFINITY : 0;
        for (int q = 0; q < g; q++) {
            int h = j * g + q;
            for (int t = 0; t < m; t++) {
                sum[t] = 0;
                for (int r = win - w; r < win; r++) sum[t] += wp[((size_t)h * win + r) * n + t];
            }
            for (int t = 0; t < m; t++) {
                double v = pool ? 0 : -INFINITY;
                for (int u = t - kernel / 2; u < t - kernel / 2 + kernel; u++) {
                    if (u < 0 || u >= m) continue;   /* padding: -inf for max, 0 for avg */
                    v = pool ? v + sum[u] : (sum[u] > v ? sum[u] : v);
                }
                if (pool) v /= kernel;
                acc[t] = agg ? (v > acc[t] ? v : acc[t]) : acc[t] + v / g;
            }
        }
        for (int t = 0; t < m; t++) score[(size_t)j * n + t] = (float)acc[t];
        free(acc);
    }
    free(sum);
}

int main(void) {
    test_seed();
    const kv_method *m = kv_method_find("adakv-snapkv");
    CHECK(m && m->head_budgets, "adakv-snapkv is not registered with head_budgets");
    if (!m) return check_done("test_adakv");
    int varied = 0;
    for (int trial = 0; trial < 60; trial++) {
        int Hkv = test_int(1, 4), g = test_int(1, 3), H = Hkv * g, d = 8, n = test_int(4, 300);
        int B = test_int(1, n + 5), window = test_int(1, 12), win = window + test_int(0, 3), kernel = test_int(1, 7);
        int pool = test_int(0, 1), agg = test_int(0, 1);
        double alpha = test_int(0, 3) ? test_unif() : 0.2;
        char params[128];
        snprintf(params, sizeof params, "window=%d,kernel=%d,pool=%d,agg=%d,alpha_safeguard=%.17g", window, kernel,
                 pool, agg, alpha);
        kv_setup s = {.n_layers = 1, .n_heads = H, .n_kv_heads = Hkv, .head_dim = d, .n_prompt = n, .max_decode = 1,
                      .budget_tokens = B, .params = params};
        kv_needs nd = {0};
        m->needs(&s, &nd);
        int w = window < B ? window : B;
        CHECK(nd.window == w, "needs window %d, want %d", nd.window, w);
        float *K = malloc((size_t)Hkv * n * d * sizeof *K), *wp = malloc((size_t)H * win * n * sizeof *wp);
        for (int i = 0; i < Hkv * n * d; i++) K[i] = test_normal();
        for (int r = 0; r < H * win; r++) {   /* skewed rows, heads of different sharpness */
            double sum = 0, sharp = 0.5 + 3 * test_unif();
            for (int t = 0; t < n; t++) sum += wp[(size_t)r * n + t] = (float)exp(sharp * test_normal());
            for (int t = 0; t < n; t++) wp[(size_t)r * n + t] = (float)(wp[(size_t)r * n + t] / sum);
        }
        char err[256] = "";
        kv_state *st = m->init(&s, err, sizeof err);
        CHECK(st, "init: %s", err);
        if (!st) continue;
        kv_prefill p = {.layer = 0, .n = n, .K = K, .V = K, .kv_stride = (size_t)n * d, .win_probs = wp, .win = win};
        CHECK(m->ingest(st, &p, err, sizeof err) == 0, "ingest: %s", err);
        /* the reference */
        unsigned char *kept = calloc((size_t)Hkv * n, 1);
        if (n <= B) memset(kept, 1, (size_t)Hkv * n);
        else {
            float *score = malloc((size_t)Hkv * n * sizeof *score);
            ref_scores(wp, H, Hkv, win, n, w < n ? w : n, kernel, pool, agg, score);
            key *all = malloc((size_t)Hkv * n * sizeof *all);
            for (int i = 0; i < Hkv * n; i++) all[i] = (key){0, score[i], i};
            int safe = (int)(B * alpha);
            if (alpha > 0 && safe < 1) safe = 1;
            for (int j = 0; j < Hkv; j++) {   /* each head's own top `safe` */
                key *h = malloc((size_t)n * sizeof *h);
                memcpy(h, all + (size_t)j * n, (size_t)n * sizeof *h);
                qsort(h, (size_t)n, sizeof *h, by_key);
                for (int i = 0; i < safe; i++) all[h[i].i].tier = 1;
                free(h);
            }
            qsort(all, (size_t)Hkv * n, sizeof *all, by_key);
            for (int i = 0; i < Hkv * B; i++) kept[all[i].i] = 1;
            free(score), free(all);
        }
        int32_t *got = malloc((size_t)n * sizeof *got);
        long total = 0;
        int lo = n, hi = 0;
        for (int j = 0; j < Hkv; j++) {
            int ng = 0, nw = 0, same = 1;
            m->rows(st, 0, j, got, n, &ng);
            for (int t = 0; t < n; t++) nw += kept[(size_t)j * n + t];
            same = ng == nw;
            for (int i = 0; same && i < ng; i++) same = kept[(size_t)j * n + got[i]];
            CHECK(same, "trial %d kv head %d (n %d B %d %s): kept %d rows, reference %d, or other positions", trial, j,
                  n, B, params, ng, nw);
            total += ng;
            lo = ng < lo ? ng : lo, hi = ng > hi ? ng : hi;
        }
        CHECK(total == (long)Hkv * (n < B ? n : B), "trial %d: the layer holds %ld rows, want %d x %d", trial, total,
              Hkv, n < B ? n : B);
        varied += lo != hi;
        m->free(st);
        free(K), free(wp), free(kept), free(got);
    }
    CHECK(varied > 0, "no trial gave kv heads different row counts");
    return check_done("test_adakv");
}

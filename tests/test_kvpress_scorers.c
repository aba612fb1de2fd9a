/* kvpress's scoring presses written as kvbench methods (tova, keydiff, lagkv, randompress)
 * against float64 references of kvpress's rules on fresh random K/V and attention rows:
 * per kv head the kept prompt positions must equal the reference's top B exactly. The
 * scores are compared as the methods rank them: computed in double, rounded to float,
 * ranked high to low with ties to the earlier row (the scorer base's documented rule),
 * after the first `sinks` rows. n <= B keeps everything. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../methods/method.h"
#include "check.h"

typedef struct { float s; int t; } ranked;

static int by_score(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->s != y->s) return x->s > y->s ? -1 : 1;
    return x->t - y->t;
}
static int by_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Top B of score[0..n) after the first `sinks` rows, ascending positions. */
static int top_b(const double *score, int n, int B, int sinks, int *keep) {
    if (n <= B) {
        for (int t = 0; t < n; t++) keep[t] = t;
        return n;
    }
    if (sinks > B) sinks = B;
    ranked *r = malloc((size_t)n * sizeof *r);
    int nk = 0, m = 0;
    for (int t = 0; t < sinks; t++) keep[nk++] = t;
    for (int t = sinks; t < n; t++) r[m++] = (ranked){(float)score[t], t};
    qsort(r, (size_t)m, sizeof *r, by_score);
    for (int i = 0; i < B - sinks; i++) keep[nk++] = r[i].t;
    qsort(keep, (size_t)nk, sizeof *keep, by_int);
    free(r);
    return nk;
}

/* ---- the references, one kv head (K, V: n rows of d) ---- */

/* KeyDiff: -cos(k_t, mean_u k_u/|k_u|). */
static void ref_keydiff(const float *K, int n, int d, double *score) {
    double *a = calloc((size_t)d, sizeof *a);
    for (int t = 0; t < n; t++) {
        double nn = 0;
        for (int c = 0; c < d; c++) nn += (double)K[t * d + c] * K[t * d + c];
        for (int c = 0; c < d; c++) a[c] += K[t * d + c] / sqrt(nn) / n;
    }
    for (int t = 0; t < n; t++) {
        double dot = 0, kk = 0, aa = 0;
        for (int c = 0; c < d; c++) dot += K[t * d + c] * a[c], kk += (double)K[t * d + c] * K[t * d + c], aa += a[c] * a[c];
        score[t] = -dot / sqrt(kk * aa);
    }
    free(a);
}

/* TOVA: the last window row, averaged over all H query heads; the last row max + 1. */
static void ref_tova(const float *wp, int H, int win, int n, double *score) {
    double mx = -INFINITY;
    for (int t = 0; t < n - 1; t++) {
        double s = 0;
        for (int h = 0; h < H; h++) s += wp[((size_t)h * win + win - 1) * n + t];
        score[t] = (float)(s / H);   /* the mean as torch holds it, then max + 1 on top */
        if (score[t] > mx) mx = score[t];
    }
    score[n - 1] = (float)mx + 1.0f;
}

/* LagKV's softmaxed spread of one partition X against its reference R. */
static void ref_spread(const float *X, const float *R, int lag, int d, double *out) {
    double *lo = malloc((size_t)d * sizeof *lo), *hi = malloc((size_t)d * sizeof *hi), *z = malloc((size_t)d * sizeof *z);
    for (int c = 0; c < d; c++) {
        lo[c] = hi[c] = R[c];
        for (int r = 1; r < lag; r++) {
            double x = R[r * d + c];
            if (x < lo[c]) lo[c] = x;
            if (x > hi[c]) hi[c] = x;
        }
    }
    double den = 0;
    for (int r = 0; r < lag; r++) {
        double mean = 0, var = 0;
        for (int c = 0; c < d; c++) z[c] = (X[r * d + c] - lo[c]) / (hi[c] - lo[c]), mean += z[c] / d;
        for (int c = 0; c < d; c++) var += (z[c] - mean) * (z[c] - mean);
        out[r] = sqrt(var / (d - 1));
    }
    double mx = out[0];
    for (int r = 1; r < lag; r++) mx = out[r] > mx ? out[r] : mx;
    for (int r = 0; r < lag; r++) den += exp(out[r] - mx);
    for (int r = 0; r < lag; r++) out[r] = exp(out[r] - mx) / den;
    free(lo), free(hi), free(z);
}

static void ref_lagkv(const float *K, const float *V, int n, int d, int ns, int lag, int cross, double *score) {
    if (n < ns + 2 * lag) {
        for (int t = 0; t < n; t++) score[t] = t < ns ? 1.0 : (float)((double)(t - ns) / (n - ns));
        return;
    }
    int P = (n - ns) / lag;
    double *ks = malloc((size_t)lag * sizeof *ks), *vs = malloc((size_t)lag * sizeof *vs);
    ranked *r = malloc((size_t)lag * sizeof *r);
    for (int t = 0; t < n; t++) score[t] = 1.0;
    for (int i = 0; i + 1 < P; i++) {
        int a = ns + i * lag;
        ref_spread(K + (size_t)a * d, K + (size_t)(a + lag) * d, lag, d, ks);
        ref_spread(V + (size_t)a * d, V + (size_t)(a + lag) * d, lag, d, vs);
        if (cross) {
            for (int q = 0; q < lag; q++) score[a + q] = (float)((ks[q] + vs[q]) / 2);
            continue;
        }
        /* the rank inside the partition, ascending (argsort of argsort), over lag */
        for (int q = 0; q < lag; q++) r[q] = (ranked){(float)(-(ks[q] + vs[q]) / 2), q};
        for (int q = 0; q < lag; q++) {   /* exact doubles: rank by the double score */
            int rank = 0;
            double s = (ks[q] + vs[q]) / 2;
            for (int o = 0; o < lag; o++) {
                double so = (ks[o] + vs[o]) / 2;
                rank += so < s || (so == s && o < q);
            }
            score[a + q] = (double)rank / lag;
        }
    }
    free(ks), free(vs), free(r);
}

/* Random: splitmix64 of (seed, layer, kv head, row), the top 24 bits over 2^24. */
static uint64_t sm(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static void ref_random(int seed, int layer, int j, int n, double *score) {
    for (int t = 0; t < n; t++)
        score[t] = (double)(sm(sm(sm((uint64_t)seed) ^ (uint64_t)layer) ^ ((uint64_t)j << 32 | (uint32_t)t)) >> 40) /
                   16777216.0;
}

enum { TOVA, KEYDIFF, LAGKV, RANDOM, N_METHODS };
static const char *const names[N_METHODS] = {"tova", "keydiff", "lagkv", "randompress"};

static void one_trial(int which, int trial) {
    const kv_method *m = kv_method_find(names[which]);
    CHECK(m != NULL, "%s is not registered", names[which]);
    if (!m) return;
    int Hkv = test_int(1, 3), g = test_int(1, 3), H = Hkv * g, d = 4 << test_int(0, 2), n = test_int(3, 320);
    int L = test_int(1, 2), B = test_int(1, n + 10), sinks = test_int(0, 2) ? 0 : test_int(1, 6), win = test_int(1, 3);
    int lag = test_int(2, 24), ns = test_int(0, 6), cross = test_int(0, 3) == 0, seed = test_int(0, 1000);
    char params[96];
    if (which == LAGKV) snprintf(params, sizeof params, "n_sink=%d,lag_size=%d,cross_scoring=%d", ns, lag, cross);
    else if (which == RANDOM) snprintf(params, sizeof params, "seed=%d,sinks=%d", seed, sinks);
    else snprintf(params, sizeof params, "sinks=%d", sinks);
    kv_setup s = {.n_layers = L, .n_heads = H, .n_kv_heads = Hkv, .head_dim = d, .n_prompt = n, .max_decode = 1,
                  .budget_tokens = B, .params = params};
    kv_needs nd = {0};
    m->needs(&s, &nd);
    CHECK(nd.window == (which == TOVA) && !nd.col_mass, "%s: needs window %d col_mass %d", names[which], nd.window,
          nd.col_mass);
    size_t N = (size_t)Hkv * n * d;
    float *K = malloc(N * sizeof *K), *V = malloc(N * sizeof *V), *wp = malloc((size_t)H * win * n * sizeof *wp);
    double *score = malloc((size_t)n * sizeof *score);
    int *want = malloc((size_t)n * sizeof *want);
    int32_t *got = malloc((size_t)(n + 1) * sizeof *got);
    char err[256] = "";
    kv_state *st = m->init(&s, err, sizeof err);
    CHECK(st, "%s init: %s", names[which], err);
    for (int l = 0; st && l < L; l++) {
        for (size_t i = 0; i < N; i++) K[i] = test_normal() * (float)(0.3 + 2 * test_unif()), V[i] = test_normal();
        for (int r = 0; r < H * win; r++) {   /* causal probability rows, skewed */
            double sum = 0;
            for (int t = 0; t < n; t++) sum += wp[(size_t)r * n + t] = (float)exp(3 * test_normal());
            for (int t = 0; t < n; t++) wp[(size_t)r * n + t] = (float)(wp[(size_t)r * n + t] / sum);
        }
        kv_prefill p = {.layer = l, .n = n, .K = K, .V = V, .kv_stride = (size_t)n * d,
                        .win_probs = nd.window ? wp : NULL, .win = nd.window ? win : 0};
        CHECK(m->ingest(st, &p, err, sizeof err) == 0, "%s ingest: %s", names[which], err);
        for (int j = 0; j < Hkv; j++) {
            const float *Kj = K + (size_t)j * n * d, *Vj = V + (size_t)j * n * d;
            int sk = sinks;
            if (which == TOVA) ref_tova(wp, H, win, n, score);
            else if (which == KEYDIFF) ref_keydiff(Kj, n, d, score);
            else if (which == LAGKV) ref_lagkv(Kj, Vj, n, d, ns, lag, cross, score), sk = 0;
            else ref_random(seed, l, j, n, score);
            int nw = top_b(score, n, B, sk, want), ng = -1;
            m->rows(st, l, j, got, n + 1, &ng);
            int same = ng == nw;
            for (int i = 0; same && i < nw; i++) same = got[i] == want[i];
            CHECK(same, "%s trial %d layer %d kv head %d (n %d B %d d %d %s): kept %d rows, reference %d, or other "
                  "positions", names[which], trial, l, j, n, B, d, params, ng, nw);
        }
    }
    if (st) m->free(st);
    free(K), free(V), free(wp), free(score), free(want), free(got);
}

/* Random's draw moves with the seed and differs between kv heads (a fixed case). */
static void random_varies(void) {
    const kv_method *m = kv_method_find("randompress");
    if (!m) return;
    int32_t a[20], b[20], c[20];
    int na = 0, nb = 0, nc = 0;
    const char *ps[2] = {"seed=1", "seed=2"};
    for (int k = 0; k < 2; k++) {
        kv_setup s = {.n_layers = 1, .n_heads = 2, .n_kv_heads = 2, .head_dim = 4, .n_prompt = 200, .max_decode = 1,
                      .budget_tokens = 20, .params = ps[k]};
        float *K = calloc(2 * 200 * 4, sizeof *K);
        for (int i = 0; i < 2 * 200 * 4; i++) K[i] = test_normal();
        char err[256];
        kv_state *st = m->init(&s, err, sizeof err);
        kv_prefill p = {.layer = 0, .n = 200, .K = K, .V = K, .kv_stride = 800};
        m->ingest(st, &p, err, sizeof err);
        m->rows(st, 0, 0, k ? b : a, 20, k ? &nb : &na);
        if (!k) m->rows(st, 0, 1, c, 20, &nc);
        m->free(st), free(K);
    }
    CHECK(na == 20 && nb == 20 && nc == 20 && memcmp(a, b, sizeof a) && memcmp(a, c, sizeof a),
          "randompress: the same rows for two seeds or two kv heads");
}

int main(void) {
    test_seed();
    for (int trial = 0; trial < 30; trial++)
        for (int w = 0; w < N_METHODS; w++) one_trial(w, trial);
    random_varies();
    return check_done("test_kvpress_scorers");
}

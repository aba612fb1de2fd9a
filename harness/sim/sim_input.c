/* Synthetic inputs for kvbench sim (see sim.h), all seeded: the same seed gives the same
 * bytes.
 *
 * Why these: the bytes a method keeps depend on the prompt only through the surprisal
 * stream (SeKV's spans), the sentence ends (SentenceKV) and, for SeKV, the keys' and
 * values' spectrum (its rank gate and truncated SVD); every other method keeps a count
 * of rows fixed by the budget. So the stream is real (the default model's surprisal on
 * text, in blocks), the K/V rows have the real heads' offset and singular-value spectrum,
 * and the statistics that only steer which rows are chosen (window probabilities,
 * column mass) are random but well-formed. */
#include "sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

typedef struct {
    uint64_t s;
    int have;
    float spare;
} rng;

static double uniform(rng *r) { return ((mix64(r->s += 0x9e3779b97f4a7c15ULL) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

static float gauss(rng *r) {
    if (r->have) return r->have = 0, r->spare;
    double u = uniform(r), v = uniform(r), m = sqrt(-2.0 * log(u));
    r->spare = (float)(m * sin(2 * M_PI * v)), r->have = 1;
    return (float)(m * cos(2 * M_PI * v));
}

static rng rng_of(uint64_t seed, uint64_t a, uint64_t b) { return (rng){mix64(seed ^ mix64(a * 0x100000001b3ULL + b)), 0, 0}; }

void sim_stream(const sim_stats *st, int n, uint64_t seed, float *surprisal, uint8_t *sent_end) {
    enum { BLOCK = 512 };
    rng r = rng_of(seed, 1, 0);
    int block = st->n < BLOCK ? st->n : BLOCK;
    for (int t = 0; t < n; t += block) {
        int off = (int)(uniform(&r) * (st->n - block + 1));
        for (int i = 0; i < block && t + i < n; i++) {
            surprisal[t + i] = st->surprisal[off + i];
            sent_end[t + i] = st->sent_end[off + i];
        }
    }
    if (n > 0) surprisal[0] = 0;
}

/* The measured spectrum resampled to d components, as standard deviations of a head with
 * mean per-element variance var. */
static void spectrum_sd(const float *spec, int d0, float var, int d, float *sd) {
    double sum = 0;
    for (int i = 0; i < d; i++) sum += spec[(int)((long)i * d0 / d)];
    for (int i = 0; i < d; i++) sd[i] = (float)sqrt(var * d * spec[(int)((long)i * d0 / d)] / (sum > 0 ? sum : 1));
}

/* Rows [n][d] of one head: offset mu + independent components with the spectrum's
 * standard deviations, along a permutation of the axes. The offset and permutation come
 * from the head's own stream `shape` (so a decode token's rows share the prompt's), the
 * samples from r. */
static void fill_head(float *X, int n, int d, const float *spec, int d0, float var, float mean_rms, rng shape,
                      rng *r) {
    float sd[1024], mu[1024];
    int perm[1024];
    spectrum_sd(spec, d0, var, d, sd);
    for (int i = 0; i < d; i++) perm[i] = i, mu[i] = mean_rms * gauss(&shape);
    for (int i = d - 1; i > 0; i--) {
        int j = (int)(uniform(&shape) * (i + 1)), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (int t = 0; t < n; t++)
        for (int i = 0; i < d; i++) X[(size_t)t * d + perm[i]] = mu[perm[i]] + sd[i] * gauss(r);
}

/* The stream of (layer, kv head j, K or V)'s offset and axes. */
static rng head_shape(uint64_t seed, int layer, int j, int is_v) { return rng_of(seed, 500009 + layer, 2 * j + is_v); }

double sim_layer_bytes(int n, int H, int Hkv, int d, const kv_needs *needs) {
    double b = 2.0 * n * Hkv * d * sizeof(float);
    if (needs && needs->col_mass) b += (double)H * n * sizeof(float);
    if (needs && needs->window > 0) b += (double)H * (needs->window < n ? needs->window : n) * n * sizeof(float);
    if (needs && needs->queries > 0) b += (double)H * (needs->queries < n ? needs->queries : n) * d * sizeof(float);
    if (needs && needs->wo) b += (double)H * d * H * d * sizeof(float);
    return b;
}

int sim_layer_make(sim_layer *ly, const sim_stats *st, int n, int H, int Hkv, int d, const kv_needs *needs,
                   int layer, uint64_t seed) {
    memset(ly, 0, sizeof *ly);
    ly->n = n, ly->H = H, ly->Hkv = Hkv, ly->d = d;
    size_t kv = (size_t)Hkv * n * d;
    ly->K = malloc(kv * sizeof(float));
    ly->V = malloc(kv * sizeof(float));
    if (!ly->K || !ly->V || d > 1024) goto oom;
    for (int j = 0; j < Hkv; j++) {
        rng rk = rng_of(seed, 2 + layer, 2 * j), rv = rng_of(seed, 2 + layer, 2 * j + 1);
        fill_head(ly->K + (size_t)j * n * d, n, d, st->k_spec, st->d, st->k_var, st->k_mean_rms,
                  head_shape(seed, layer, j, 0), &rk);
        fill_head(ly->V + (size_t)j * n * d, n, d, st->v_spec, st->d, st->v_var, st->v_mean_rms,
                  head_shape(seed, layer, j, 1), &rv);
    }
    rng r = rng_of(seed, 1000003 + layer, 0);
    if (needs && needs->col_mass) {
        if (!(ly->col_mass = malloc((size_t)H * n * sizeof(float)))) goto oom;
        /* a key at t is seen by n - t queries with weight ~ 1/(query position) each */
        for (int h = 0; h < H; h++)
            for (int t = 0; t < n; t++)
                ly->col_mass[(size_t)h * n + t] = (float)(log((double)n / (t + 1)) + 1.0) * expf(0.5f * gauss(&r));
    }
    if (needs && needs->window > 0) {
        int w = needs->window < n ? needs->window : n;
        ly->win = w;
        if (!(ly->win_probs = malloc((size_t)H * w * n * sizeof(float)))) goto oom;
        for (int h = 0; h < H; h++)
            for (int i = 0; i < w; i++) {
                float *p = ly->win_probs + ((size_t)h * w + i) * n;
                int q = n - w + i;   /* the query's position: keys 0..q are visible */
                double sum = 0;
                for (int t = 0; t <= q; t++) sum += p[t] = expf(gauss(&r));
                for (int t = 0; t <= q; t++) p[t] = (float)(p[t] / sum);
                for (int t = q + 1; t < n; t++) p[t] = 0;
            }
    }
    /* door version 4's model members, from their own streams (the draws above unchanged) */
    if (needs && needs->queries > 0) {
        rng rq = rng_of(seed, 2000003 + layer, 0);
        ly->q_rows = needs->queries < n ? needs->queries : n;
        if (!(ly->Q = malloc((size_t)H * ly->q_rows * d * sizeof(float)))) goto oom;
        for (size_t i = 0; i < (size_t)H * ly->q_rows * d; i++) ly->Q[i] = (float)gauss(&rq);
    }
    if (needs && needs->wo) {
        rng rw = rng_of(seed, 3000017 + layer, 0);
        size_t hd = (size_t)H * d;
        if (!(ly->Wo = malloc(hd * hd * sizeof(float)))) goto oom;
        for (size_t i = 0; i < hd * hd; i++) ly->Wo[i] = (float)(gauss(&rw) / sqrt((double)hd));
    }
    return 0;
oom:
    sim_layer_free(ly);
    return -1;
}

void sim_layer_free(sim_layer *ly) {
    free(ly->K), free(ly->V), free(ly->col_mass), free(ly->win_probs), free(ly->Q), free(ly->Wo);
    memset(ly, 0, sizeof *ly);
}

void sim_token(const sim_stats *st, int layer, int H, int Hkv, int d, uint64_t seed, uint64_t step, float *q,
               float *k, float *v) {
    rng r = rng_of(seed, 7 + layer, step);
    for (int h = 0; h < H; h++)   /* a query shares its kv group's key offset and axes */
        fill_head(q + (size_t)h * d, 1, d, st->k_spec, st->d, st->k_var, st->k_mean_rms,
                  head_shape(seed, layer, h / (H / Hkv), 0), &r);
    for (int j = 0; j < Hkv; j++) {
        fill_head(k + (size_t)j * d, 1, d, st->k_spec, st->d, st->k_var, st->k_mean_rms, head_shape(seed, layer, j, 0), &r);
        fill_head(v + (size_t)j * d, 1, d, st->v_spec, st->d, st->v_var, st->v_mean_rms, head_shape(seed, layer, j, 1), &r);
    }
}

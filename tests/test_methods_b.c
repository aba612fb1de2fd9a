/* PyramidKV, ChunkKV and SentenceKV against brute force in double.
 *
 * Each scenario draws random K/V/Q (fresh seed), computes the observation-window
 * probabilities itself in double, runs a method through prefill and 20 decode steps, and
 * checks after prefill and after every step: the rows each (layer, kv head) holds (or
 * attends, for SentenceKV) against an independent recomputation of the policy, the
 * attention output against a double softmax over exactly those rows, the budget, memory()
 * and head_stats(). Scores are recomputed here from the same float probabilities with the
 * operation order window_score.h specifies, so ranked choices are compared exactly. */
#include "check.h"
#include "../methods/cacheset.h"
#include "../methods/method.h"
#include "../methods/pyramid.h"
#include "../methods/sentencekv.h"
#include "../methods/window_score.h"
#include <math.h>

extern const kv_method kv_pyramidkv, kv_chunkkv, kv_sentencekv;

enum { STEPS = 20, EB = 4 };   /* decode steps; bytes per stored element (f32 rows, the default) */

typedef struct {
    int L, H, Hkv, g, d, n, win;
    size_t stride;       /* floats between kv heads: (n + STEPS) * d */
    float *K, *V;        /* [L][Hkv][n+STEPS][d] */
    float *Qw;           /* [L][H][win][d] queries of the last win prompt tokens */
    float *Qd;           /* [STEPS][L][H][d] */
    float *wp;           /* [L][H][win][n] window probabilities (float, computed in double) */
    float *surp;
    uint8_t *sent;       /* [n] prompt sentence ends */
    uint8_t dsent[STEPS];
} scen;

static float *krow(const scen *sc, int l, int j, int t) {
    return sc->K + ((size_t)l * sc->Hkv + j) * sc->stride + (size_t)t * sc->d;
}
static float *vrow(const scen *sc, int l, int j, int t) {
    return sc->V + ((size_t)l * sc->Hkv + j) * sc->stride + (size_t)t * sc->d;
}
static float *qdec(const scen *sc, int s, int l) { return sc->Qd + ((size_t)s * sc->L + l) * sc->H * sc->d; }

static void compute_window(scen *sc) {
    int n = sc->n, d = sc->d;
    double *p = malloc((size_t)n * sizeof *p);
    for (int l = 0; l < sc->L; l++)
        for (int h = 0; h < sc->H; h++)
            for (int r = 0; r < sc->win; r++) {
                int qp = n - sc->win + r;
                const float *q = sc->Qw + (((size_t)l * sc->H + h) * sc->win + r) * d;
                double mx = -INFINITY, sum = 0;
                for (int t = 0; t <= qp; t++) {
                    const float *k = krow(sc, l, h / sc->g, t);
                    double s = 0;
                    for (int c = 0; c < d; c++) s += (double)q[c] * k[c];
                    p[t] = s / sqrt((double)d);
                    if (p[t] > mx) mx = p[t];
                }
                for (int t = 0; t <= qp; t++) sum += (p[t] = exp(p[t] - mx));
                float *row = sc->wp + (((size_t)l * sc->H + h) * sc->win + r) * n;
                for (int t = 0; t < n; t++) row[t] = t <= qp ? (float)(p[t] / sum) : 0.0f;
            }
    free(p);
}

/* Random scenario; sentence ends roughly every 1/p_end tokens. */
static scen make_scen(int L, int H, int Hkv, int d, int n, double p_end) {
    scen sc = {.L = L, .H = H, .Hkv = Hkv, .g = H / Hkv, .d = d, .n = n, .win = n < 40 ? n : 40};
    sc.stride = (size_t)(n + STEPS) * d;
    size_t kv = (size_t)L * Hkv * sc.stride;
    sc.K = malloc(kv * sizeof(float));
    sc.V = malloc(kv * sizeof(float));
    sc.Qw = malloc((size_t)L * H * sc.win * d * sizeof(float));
    sc.Qd = malloc((size_t)STEPS * L * H * d * sizeof(float));
    sc.wp = malloc((size_t)L * H * sc.win * n * sizeof(float));
    sc.surp = malloc((size_t)n * sizeof(float));
    sc.sent = malloc((size_t)n);
    test_fill(sc.K, kv, 1.0f);
    test_fill(sc.V, kv, 1.0f);
    test_fill(sc.Qw, (size_t)L * H * sc.win * d, 1.5f);
    test_fill(sc.Qd, (size_t)STEPS * L * H * d, 1.5f);
    for (int t = 0; t < n; t++) {
        sc.surp[t] = t ? (float)(3 * test_unif()) : 0;
        sc.sent[t] = test_unif() < p_end;
    }
    for (int s = 0; s < STEPS; s++) sc.dsent[s] = 0;
    compute_window(&sc);
    return sc;
}

static void free_scen(scen *sc) {
    free(sc->K); free(sc->V); free(sc->Qw); free(sc->Qd); free(sc->wp); free(sc->surp); free(sc->sent);
}

static kv_prefill prefill_of(const scen *sc, int l) {
    return (kv_prefill){
        .layer = l, .n = sc->n, .K = krow(sc, l, 0, 0), .V = vrow(sc, l, 0, 0), .kv_stride = sc->stride,
        .win_probs = sc->wp + (size_t)l * sc->H * sc->win * sc->n, .win = sc->win,
        .surprisal = sc->surp, .sent_end = sc->sent,
    };
}

/* Window scores as window_score.h specifies: per query head, the sum of the last w rows in
 * double, pooled (max ignores padding; avg counts it as zeros, divides by kernel), mean over
 * the group, then rounded to float. score [Hkv][n-w]. */
static void ref_scores(const scen *sc, int l, int w, int kernel, int pool, float *score) {
    int n = sc->n, m = n - w, g = sc->g;
    double *sum = malloc((size_t)m * sizeof *sum), *acc = malloc((size_t)m * sizeof *acc);
    for (int j = 0; j < sc->Hkv; j++) {
        for (int i = 0; i < m; i++) acc[i] = 0;
        for (int hh = 0; hh < g; hh++) {
            int h = j * g + hh;
            for (int i = 0; i < m; i++) sum[i] = 0;
            for (int r = sc->win - w; r < sc->win; r++)
                for (int i = 0; i < m; i++) sum[i] += sc->wp[(((size_t)l * sc->H + h) * sc->win + r) * n + i];
            for (int i = 0; i < m; i++) {
                double v = pool == POOL_MAX ? -INFINITY : 0;
                for (int t = i - kernel / 2; t < i - kernel / 2 + kernel; t++) {
                    if (t < 0 || t >= m) continue;
                    v = pool == POOL_MAX ? fmax(v, sum[t]) : v + sum[t];
                }
                acc[i] += pool == POOL_MAX ? v : v / kernel;
            }
        }
        for (int i = 0; i < m; i++) score[(size_t)j * m + i] = (float)(acc[i] / g);
    }
    free(sum); free(acc);
}

/* The k best of m scores (higher first, ties to the lower index), ascending, by counting
 * how many beat each one. Returns min(k, m). */
static int ref_topk(const float *s, int m, int k, int32_t *out) {
    int nk = 0;
    for (int i = 0; i < m; i++) {
        int beaten = 0;
        for (int t = 0; t < m && beaten < k; t++) beaten += s[t] > s[i] || (s[t] == s[i] && t < i);
        if (beaten < k) out[nk++] = i;
    }
    return nk;
}

static int same_set(const int32_t *a, int na, const int32_t *b, int nb) {
    if (na != nb) return 0;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

/* Attention of the layer's H query heads over positions pos[j][0..np[j]) of each kv head,
 * in double; returns rel_l2 of out against it. */
static double attn_err(const scen *sc, int l, const float *q, int32_t *const *pos, const int *np,
                       const float *out) {
    int H = sc->H, d = sc->d;
    double *ref = calloc((size_t)H * d, sizeof *ref);
    int maxn = 0;
    for (int j = 0; j < sc->Hkv; j++) maxn = np[j] > maxn ? np[j] : maxn;
    double *p = malloc(((size_t)maxn + 1) * sizeof *p);
    for (int h = 0; h < H; h++) {
        int j = h / sc->g;
        double mx = -INFINITY, sum = 0;
        for (int i = 0; i < np[j]; i++) {
            const float *k = krow(sc, l, j, pos[j][i]);
            double s = 0;
            for (int c = 0; c < d; c++) s += (double)q[(size_t)h * d + c] * k[c];
            p[i] = s / sqrt((double)d);
            if (p[i] > mx) mx = p[i];
        }
        for (int i = 0; i < np[j]; i++) sum += (p[i] = exp(p[i] - mx));
        for (int i = 0; i < np[j]; i++) {
            const float *v = vrow(sc, l, j, pos[j][i]);
            for (int c = 0; c < d; c++) ref[(size_t)h * d + c] += p[i] / sum * v[c];
        }
    }
    double e = rel_l2(out, ref, (size_t)H * d);
    free(ref); free(p);
    return e;
}

/* The decode rule of the tests being run (main runs the decode tests under both). */
static int g_rule = KV_DECODE_HOLD;

static kv_setup setup_of(const scen *sc, int budget_tokens, double frac, const char *params) {
    return (kv_setup){.decode_rule = g_rule,.n_layers = sc->L, .n_heads = sc->H, .n_kv_heads = sc->Hkv, .head_dim = sc->d,
                      .n_prompt = sc->n, .max_decode = STEPS, .budget_frac = frac,
                      .budget_tokens = budget_tokens, .params = params};
}

static void ingest_all(const kv_method *m, kv_state *st, const kv_setup *s, const scen *sc) {
    kv_needs nd = {0};
    m->needs(s, &nd);
    CHECK(nd.window <= sc->win && nd.col_mass == 0, "%s needs window %d (have %d)", m->name, nd.window, sc->win);
    for (int l = 0; l < sc->L; l++) {
        kv_prefill p = prefill_of(sc, l);
        char err[256] = "";
        CHECK(m->ingest(st, &p, err, sizeof err) == 0, "%s ingest layer %d: %s", m->name, l, err);
    }
}

static void append_step(const kv_method *m, kv_state *st, const scen *sc, int s, int l) {
    int pos = sc->n + s, d = sc->d;
    float *k = malloc((size_t)sc->Hkv * d * sizeof *k), *v = malloc((size_t)sc->Hkv * d * sizeof *v);
    for (int j = 0; j < sc->Hkv; j++) {
        memcpy(k + (size_t)j * d, krow(sc, l, j, pos), (size_t)d * sizeof *k);
        memcpy(v + (size_t)j * d, vrow(sc, l, j, pos), (size_t)d * sizeof *v);
    }
    kv_token t = {.pos = pos, .surprisal = 1.0f, .sent_end = sc->dsent[s]};
    m->append(st, l, k, v, &t);
    free(k); free(v);
}

/* ------------------------------------------------------------ score-evicting caches */

/* The expected cache of one (layer, kv head) for PyramidKV and ChunkKV: positions in
 * order with an eviction score each (+inf for window and decoded rows). */
typedef struct {
    int n;
    int32_t pos[1024];
    double score[1024];
    long evicted;
} model_cache;

static void model_push(model_cache *mc, int pos, double score, int budget) {
    mc->pos[mc->n] = pos;
    mc->score[mc->n++] = score;
    if (mc->n > budget) {                      /* evict the lowest score, ties the older */
        int v = 0;
        for (int i = 1; i < mc->n; i++)
            if (mc->score[i] < mc->score[v]) v = i;
        for (int i = v; i + 1 < mc->n; i++) mc->pos[i] = mc->pos[i + 1], mc->score[i] = mc->score[i + 1];
        mc->n--;
        mc->evicted++;
    }
}

/* Checks rows, attention, memory and head stats of a cacheset-based method against the
 * models mc[L*Hkv] through prefill and STEPS decode steps; budget[l] per layer. */
static void run_scored(const kv_method *m, kv_state *st, const scen *sc, model_cache *mc, const int *budget,
                       const char *tag) {
    int L = sc->L, Hkv = sc->Hkv, d = sc->d;
    float *out = malloc((size_t)sc->H * d * sizeof *out);
    int32_t **pos = malloc((size_t)Hkv * sizeof *pos);
    int *np = malloc((size_t)Hkv * sizeof *np);
    size_t row = (size_t)2 * d * EB + sizeof(float);
    int hold = g_rule == KV_DECODE_HOLD;
    for (int s = -1; s < STEPS; s++) {
        if (s >= 0)
            for (int l = 0; l < L; l++) {
                append_step(m, st, sc, s, l);
                for (int j = 0; j < Hkv; j++) model_push(&mc[l * Hkv + j], sc->n + s, INFINITY, hold ? budget[l] : 1 << 20);
                test_poison(out, (size_t)sc->H * d);
                m->attend(st, l, qdec(sc, s, l), out);
                for (int j = 0; j < Hkv; j++) {
                    const kv_store *kv = kv_a_store(st, l, j);
                    pos[j] = kv->pos;
                    np[j] = kv->n;
                }
                double e = attn_err(sc, l, qdec(sc, s, l), pos, np, out);
                CHECK(e < 1e-5, "%s step %d layer %d: attention rel err %.3g", tag, s, l, e);
            }
        long rows = 0;
        int bad = 0;
        for (int l = 0; l < L; l++)
            for (int j = 0; j < Hkv; j++) {
                const kv_store *kv = kv_a_store(st, l, j);
                const model_cache *x = &mc[l * Hkv + j];
                rows += kv->n;
                if (!same_set(kv->pos, kv->n, x->pos, x->n) || kv->n > budget[l] + (hold ? 0 : s + 1)) {
                    if (!bad++)
                        CHECK(0, "%s step %d layer %d kv head %d: holds %d rows, expected %d (budget %d)", tag, s,
                              l, j, kv->n, x->n, budget[l]);
                }
                for (int hh = 0; hh < sc->g; hh++) {
                    kv_headstat hs = {-1, -1};
                    m->head_stats(st, l, j * sc->g + hh, &hs);
                    if (hs.kept != kv->n || hs.events != (double)x->evicted)
                        if (!bad++)
                            CHECK(0, "%s step %d layer %d head %d: head_stats kept %g events %g, expected %d %ld",
                                  tag, s, l, j * sc->g + hh, hs.kept, hs.events, kv->n, x->evicted);
                }
            }
        CHECK(!bad, "%s step %d: %d row/stat mismatches", tag, s, bad);
        kv_mem mem;
        memset(&mem, 0xff, sizeof mem);
        m->memory(st, &mem);
        CHECK(mem.fast_tokens == rows && mem.fast_bytes == (size_t)rows * row &&
              mem.fast_aux_bytes == (size_t)rows * sizeof(float) && mem.slow_bytes == 0 && mem.slow_peak == 0,
              "%s step %d: memory tokens %ld bytes %zu aux %zu slow %zu, expected %ld rows of %zu bytes", tag, s,
              mem.fast_tokens, mem.fast_bytes, mem.fast_aux_bytes, mem.slow_bytes, rows, row);
        CHECK(mem.fast_peak >= mem.fast_bytes && mem.fast_peak >= (size_t)sc->n * Hkv * row,
              "%s step %d: fast_peak %zu below resident %zu or one full layer", tag, s, mem.fast_peak,
              mem.fast_bytes);
    }
    free(out); free(pos); free(np);
}

/* ------------------------------------------------------------------ PyramidKV */

static void test_pyramid_schedule(void) {
    int keep[64];
    /* the reference's worked example: C=128, w=8, L=32 -> kmin 6, kmax 234; the line from
     * 234 down to 6 falls 228/31 = 7.35 per layer and sums to 32 * 120 = 3840 */
    CHECK(pyramid_budgets(100000, 128, 8, 20, 32, keep) == PYRAMID_PYRAMID, "example branch");
    CHECK(keep[0] == 234 && keep[31] == 6, "example: layer 0 keeps %d, layer 31 keeps %d", keep[0], keep[31]);
    long ex = 0;
    for (int l = 0; l < 32; l++) {
        ex += keep[l];
        double exact = 234.0 - l * 228.0 / 31.0;
        CHECK(fabs(keep[l] - exact) < 1.0, "example layer %d keeps %d, line gives %.2f", l, keep[l], exact);
    }
    CHECK(ex == 32 * 120, "example total %ld != 3840", ex);
    CHECK(pyramid_budgets(10, 5, 6, 20, 4, keep) == -1 && pyramid_budgets(10, 8, 2, 0, 4, keep) == -1 &&
          pyramid_budgets(10, 8, 2, 20, 0, keep) == -1, "bad arguments are refused");
    int bad = 0, seen[3] = {0, 0, 0};
    for (int trial = 0; trial < 20000; trial++) {
        int L = test_int(1, 48), C = test_int(1, 700), w = test_int(0, C < 64 ? C : 64);
        int beta = test_int(1, 40), n = test_int(1, 4000), room = C - w;
        int br = pyramid_budgets(n, C, w, beta, L, keep);
        int want = n < C ? PYRAMID_NONE : (n < 2 * room || L == 1) ? PYRAMID_UNIFORM : PYRAMID_PYRAMID;
        if (br != want) { bad++; continue; }
        seen[br]++;
        long sum = 0;
        int ok = 1;
        for (int l = 0; l < L; l++) {
            sum += keep[l];
            ok &= keep[l] >= 0 && keep[l] <= (n > w ? n - w : 0);
            if (l) ok &= keep[l] <= keep[l - 1];
        }
        if (br == PYRAMID_NONE) ok &= keep[0] == (n > w ? n - w : 0) && keep[L - 1] == keep[0];
        if (br == PYRAMID_UNIFORM) ok &= keep[0] == room && keep[L - 1] == room;
        if (br == PYRAMID_PYRAMID) {
            int kmin = room / beta, kmax = 2 * room - kmin;
            if (kmax >= n - w) kmax = n - w, kmin = 2 * room - kmax;
            /* ends exactly at kmax and kmin, within one token of the straight line between
             * them everywhere, and the total is exactly the uniform budget */
            ok &= keep[0] == kmax && keep[L - 1] == kmin && sum == (long)L * room;
            for (int l = 0; l < L; l++)
                ok &= fabs(keep[l] - (kmax - (double)l * (kmax - kmin) / (L - 1))) < 1.0;
        }
        if (!ok) {
            if (!bad) fprintf(stderr, "schedule n=%d C=%d w=%d beta=%d L=%d branch %d\n", n, C, w, beta, L, br);
            bad++;
        }
    }
    CHECK(!bad, "%d random schedules broke a property", bad);
    CHECK(seen[0] && seen[1] && seen[2], "all three branches drawn (%d %d %d)", seen[0], seen[1], seen[2]);
}

static void test_pyramid(int L, int H, int Hkv, int d, int n, int budget, double frac, const char *params,
                         int window, int beta, int kernel, int pool, int want_branch) {
    scen sc = make_scen(L, H, Hkv, d, n, 0.1);
    kv_setup s = setup_of(&sc, budget, frac, params);
    char err[256] = "", tag[96];
    snprintf(tag, sizeof tag, "pyramidkv H%d/%d n%d C%d", H, Hkv, n, kv_budget(&s));
    kv_state *st = kv_pyramidkv.init(&s, err, sizeof err);
    CHECK(st, "%s: init: %s", tag, err);
    if (!st) { free_scen(&sc); return; }
    int C = kv_budget(&s), w = window < C ? window : C, keep[64], budget_l[64];
    int br = pyramid_budgets(n, C, w, beta, L, keep);
    CHECK(br == want_branch, "%s: branch %d, wanted %d", tag, br, want_branch);
    model_cache *mc = calloc((size_t)L * Hkv, sizeof *mc);
    int m = n > w ? n - w : 0;
    float *score = malloc(((size_t)Hkv * m + 1) * sizeof *score);
    int32_t *top = malloc((size_t)n * sizeof *top);
    for (int l = 0; l < L; l++) {
        budget_l[l] = br == PYRAMID_NONE ? C : keep[l] + w;
        CHECK(pyramidkv_layer_budget(st, l) == budget_l[l], "%s layer %d budget %d, expected %d", tag, l,
              pyramidkv_layer_budget(st, l), budget_l[l]);
        if (m > 0) ref_scores(&sc, l, w, kernel, pool, score);
        for (int j = 0; j < Hkv; j++) {
            model_cache *x = &mc[l * Hkv + j];
            int nk = ref_topk(score + (size_t)j * m, m, keep[l], top);
            for (int i = 0; i < nk; i++) model_push(x, top[i], score[(size_t)j * m + top[i]], 1 << 20);
            for (int t = m; t < n; t++) model_push(x, t, INFINITY, 1 << 20);
            x->evicted = n - x->n;
        }
    }
    ingest_all(&kv_pyramidkv, st, &s, &sc);
    run_scored(&kv_pyramidkv, st, &sc, mc, budget_l, tag);
    kv_pyramidkv.free(st);
    free(mc); free(score); free(top);
    free_scen(&sc);
}

/* ------------------------------------------------------------------ ChunkKV */

static void test_chunkkv(int L, int H, int Hkv, int d, int n, int B, int c, int window, int kernel, int pool,
                         int reuse, const char *params) {
    scen sc = make_scen(L, H, Hkv, d, n, 0.1);
    kv_setup s = setup_of(&sc, B, 0, params);
    char err[256] = "", tag[96];
    snprintf(tag, sizeof tag, "chunkkv H%d/%d n%d B%d c%d reuse%d", H, Hkv, n, B, c, reuse);
    kv_state *st = kv_chunkkv.init(&s, err, sizeof err);
    CHECK(st, "%s: init: %s", tag, err);
    if (!st) { free_scen(&sc); return; }
    int w = window < B ? window : B, m = n > w ? n - w : 0, nch = (m + c - 1) / c;
    model_cache *mc = calloc((size_t)L * Hkv, sizeof *mc);
    float *score = malloc(((size_t)Hkv * m + 1) * sizeof *score), *cscore = malloc(((size_t)nch + 1) * 4);
    int32_t *top = malloc(((size_t)nch + 1) * sizeof *top);
    int budget[64];
    for (int l = 0; l < L; l++) {
        budget[l] = B;
        if (l % reuse == 0) {             /* the group's first layer scores; the rest copy it */
            ref_scores(&sc, l, w, kernel, pool, score);
            for (int ch = 0; ch < nch; ch++) {
                double sum = 0;
                for (int j = 0; j < Hkv; j++)
                    for (int t = ch * c; t < m && t < (ch + 1) * c; t++) sum += score[(size_t)j * m + t];
                cscore[ch] = (float)sum;
            }
            int nk = n <= B ? nch : ref_topk(cscore, nch, (B - w) / c, top);
            if (n <= B)
                for (int i = 0; i < nch; i++) top[i] = i;
            for (int j = 0; j < Hkv; j++) {
                model_cache *x = &mc[l * Hkv + j];
                for (int i = 0; i < nk; i++)
                    for (int t = top[i] * c; t < m && t < (top[i] + 1) * c; t++) model_push(x, t, cscore[top[i]], 1 << 20);
                for (int t = m; t < n; t++) model_push(x, t, INFINITY, 1 << 20);
                x->evicted = n - x->n;
            }
        } else {
            for (int j = 0; j < Hkv; j++) mc[l * Hkv + j] = mc[(l - l % reuse) * Hkv + j];
        }
    }
    ingest_all(&kv_chunkkv, st, &s, &sc);
    /* whole chunks plus the window, the same rows for every kv head of a layer */
    for (int l = 0; l < L; l++) {
        const kv_store *k0 = kv_a_store(st, l, 0);
        int whole = 1, shared = 1;
        for (int r = 0; r < k0->n; r++) {
            int t = k0->pos[r];
            if (t >= m) continue;
            int ch = t / c, cnt = 0;
            for (int q = 0; q < k0->n; q++) cnt += k0->pos[q] < m && k0->pos[q] / c == ch;
            whole &= cnt == ((ch + 1) * c <= m ? c : m - ch * c);
        }
        for (int j = 1; j < Hkv; j++) shared &= same_set(k0->pos, k0->n, kv_a_store(st, l, j)->pos, kv_a_store(st, l, j)->n);
        CHECK(whole && shared, "%s layer %d: rows are whole chunks (%d) shared by all kv heads (%d)", tag, l, whole, shared);
        if (l % reuse) {
            const kv_store *f = kv_a_store(st, l - l % reuse, 0);
            CHECK(same_set(k0->pos, k0->n, f->pos, f->n), "%s layer %d: reuses layer %d's positions", tag, l,
                  l - l % reuse);
        }
    }
    run_scored(&kv_chunkkv, st, &sc, mc, budget, tag);
    kv_chunkkv.free(st);
    free(mc); free(score); free(cscore); free(top);
    free_scen(&sc);
}

/* ------------------------------------------------------------------ SentenceKV */

typedef struct {
    int nrows, np;         /* rows; of those from the prompt */
    int32_t pos[1024];
    int ns, srow[1024], slen[1024];
    float *key;            /* [1024][d] */
    int cur, nq, ended, nsel;
    int32_t sel[1024];
    double qsum[64];
    long retrieved;
} sk_model;

static void sk_add_sentence(const scen *sc, int l, int j, sk_model *x, int r0, int len) {
    for (int c = 0; c < sc->d; c++) {
        double sum = 0;
        for (int r = r0; r < r0 + len; r++) sum += krow(sc, l, j, x->pos[r])[c];
        x->key[(size_t)x->ns * sc->d + c] = (float)(sum / len);
    }
    x->srow[x->ns] = r0;
    x->slen[x->ns++] = len;
}

/* The rows SentenceKV should attend this step: sinks, recent, and the tokens of the best
 * sentences for the mean query of the sentence being generated; under append chosen
 * among the prompt's rows, with every generated row on top. */
static void sk_select(const scen *sc, sk_model *x, int B, int S0, int R0) {
    int N = g_rule == KV_DECODE_HOLD ? x->nrows : x->np;
    int S = S0 < N ? S0 : N, rec = N - R0 > S ? N - R0 : S, ns = 0;
    for (int r = 0; r < S; r++) x->sel[ns++] = r;
    int quota = B - S - (N - rec);
    if (x->nrows - x->cur > 1 && quota > 0) {
        double *score = malloc(((size_t)x->ns + 1) * sizeof *score);
        int *done = calloc((size_t)x->ns + 1, sizeof *done), got = 0;
        for (int s = 0; s < x->ns; s++) {
            score[s] = 0;
            for (int c = 0; c < sc->d; c++) score[s] += x->qsum[c] / x->nq * x->key[(size_t)s * sc->d + c];
        }
        for (int it = 0; it < x->ns && got < quota; it++) {
            int best = -1;
            for (int s = 0; s < x->ns; s++)
                if (!done[s] && (best < 0 || score[s] > score[best])) best = s;
            done[best] = 1;
            int before = got;
            for (int r = x->srow[best]; r < x->srow[best] + x->slen[best] && got < quota; r++)
                if (r >= S && r < rec) x->sel[ns + got++] = r;
            x->retrieved += got > before;
        }
        /* ascending */
        for (int a = 1; a < got; a++)
            for (int b = a; b > 0 && x->sel[ns + b - 1] > x->sel[ns + b]; b--) {
                int32_t t = x->sel[ns + b];
                x->sel[ns + b] = x->sel[ns + b - 1];
                x->sel[ns + b - 1] = t;
            }
        ns += got;
        free(score); free(done);
    }
    for (int r = rec; r < x->nrows; r++) x->sel[ns++] = r;
    x->nsel = ns;
}

static void check_sentences(const kv_state *st, const scen *sc, sk_model *mx, const char *tag, const char *when) {
    int bad = 0, d = sc->d;
    float *key = malloc((size_t)d * sizeof *key);
    for (int l = 0; l < sc->L; l++)
        for (int j = 0; j < sc->Hkv; j++) {
            sk_model *x = &mx[l * sc->Hkv + j];
            int ns = sentencekv_sentence_count(st, l, j);
            if (ns != x->ns) {
                if (!bad++) CHECK(0, "%s %s layer %d kv %d: %d sentences, expected %d", tag, when, l, j, ns, x->ns);
                continue;
            }
            for (int s = 0; s < ns; s++) {
                int32_t first;
                int len;
                test_poison(key, (size_t)d);
                sentencekv_sentence(st, l, j, s, key, &first, &len);
                double ref[64];
                for (int c = 0; c < d; c++) ref[c] = x->key[(size_t)s * d + c];
                double e = rel_l2(key, ref, (size_t)d);
                if (first != x->pos[x->srow[s]] || len != x->slen[s] || e > 1e-6)
                    if (!bad++)
                        CHECK(0, "%s %s layer %d kv %d sentence %d: first %d len %d err %.3g, expected %d %d", tag,
                              when, l, j, s, first, len, e, x->pos[x->srow[s]], x->slen[s]);
            }
        }
    CHECK(!bad, "%s %s: %d sentence mismatches", tag, when, bad);
    free(key);
}

/* aligned: plant a 6-token sentence in the middle whose keys share a large offset, and let
 * the first two decode queries be its sentence vector: it must be retrieved first. */
static void test_sentencekv(int L, int H, int Hkv, int d, int n, int B, const char *params, int S0, int R0, int F,
                            int window, int kernel, int aligned) {
    scen sc = make_scen(L, H, Hkv, d, n, 0.08);
    int t0 = n / 2 - 2;
    if (aligned) {
        for (int t = t0 - 1; t < t0 + 6; t++) sc.sent[t] = t == t0 - 1 || t == t0 + 5;
        float u[64];
        test_fill(u, (size_t)d, 3.0f);
        for (int l = 0; l < L; l++)
            for (int j = 0; j < Hkv; j++)
                for (int t = t0; t < t0 + 6; t++)
                    for (int c = 0; c < d; c++) krow(&sc, l, j, t)[c] += u[c];
        compute_window(&sc);
    }
    sc.dsent[1] = sc.dsent[7] = sc.dsent[13] = 1;
    kv_setup s = setup_of(&sc, B, 0, params);
    char err[256] = "", tag[96];
    snprintf(tag, sizeof tag, "sentencekv H%d/%d n%d B%d", H, Hkv, n, B);
    kv_state *st = kv_sentencekv.init(&s, err, sizeof err);
    CHECK(st, "%s: init: %s", tag, err);
    if (!st) { free_scen(&sc); return; }
    if (S0 > B / 2) S0 = B / 2;                /* sinks + recent fit the budget */
    if (R0 > B - S0) R0 = B - S0;
    long P = (long)F * B;
    int w = window < P ? window : (int)P, m = n - w, filter = n > P;
    sk_model *mx = calloc((size_t)L * Hkv, sizeof *mx);
    float *score = malloc(((size_t)Hkv * m + 1) * sizeof *score);
    int32_t *top = malloc((size_t)n * sizeof *top);
    int *sid = malloc((size_t)n * sizeof *sid);
    sid[0] = 0;
    for (int t = 1; t < n; t++) sid[t] = sid[t - 1] + sc.sent[t - 1];
    for (int l = 0; l < L; l++) {
        if (filter) ref_scores(&sc, l, w, kernel, POOL_MAX, score);
        for (int j = 0; j < Hkv; j++) {
            sk_model *x = &mx[l * Hkv + j];
            x->key = malloc((size_t)1024 * d * sizeof *x->key);
            int nk = filter ? ref_topk(score + (size_t)j * m, m, (int)P - w, top) : 0;
            for (int i = 0; i < nk; i++) x->pos[x->nrows++] = top[i];
            for (int t = filter ? m : 0; t < n; t++) x->pos[x->nrows++] = t;
            for (int r0 = 0, r = 1; r <= x->nrows; r++)
                if (r == x->nrows || sid[x->pos[r]] != sid[x->pos[r0]]) {
                    sk_add_sentence(&sc, l, j, x, r0, r - r0);
                    r0 = r;
                }
            x->cur = x->np = x->nrows;
        }
    }
    ingest_all(&kv_sentencekv, st, &s, &sc);
    int hold = g_rule == KV_DECODE_HOLD;

    /* pre-filter: exactly the brute-force rows; sentence vectors are means of retained keys */
    int32_t *got = malloc((size_t)(n + STEPS) * sizeof *got);
    int bad = 0;
    for (int l = 0; l < L; l++)
        for (int j = 0; j < Hkv; j++) {
            sk_model *x = &mx[l * Hkv + j];
            int ng = sentencekv_rows(st, l, j, got);
            if (!same_set(got, ng, x->pos, x->nrows) && !bad++)
                CHECK(0, "%s layer %d kv %d: pre-filter kept %d rows, expected %d", tag, l, j, ng, x->nrows);
        }
    CHECK(!bad, "%s: pre-filter mismatches %d", tag, bad);
    check_sentences(st, &sc, mx, tag, "prefill");

    /* the aligned queries: each group's two first decode queries are its target's vector */
    int *target = malloc((size_t)L * Hkv * sizeof *target);
    for (int i = 0; i < L * Hkv; i++) {
        sk_model *x = &mx[i];
        target[i] = -1;
        for (int sI = 0; sI < x->ns && aligned; sI++)
            if (x->pos[x->srow[sI]] >= t0 && x->pos[x->srow[sI]] < t0 + 6) target[i] = sI;
        if (target[i] >= 0)
            for (int step = 0; step < 2; step++)
                for (int hh = 0; hh < sc.g; hh++)
                    memcpy(qdec(&sc, step, i / Hkv) + ((size_t)(i % Hkv) * sc.g + hh) * d,
                           x->key + (size_t)target[i] * d, (size_t)d * sizeof(float));
    }

    float *out = malloc((size_t)H * d * sizeof *out);
    int32_t **pos = malloc((size_t)Hkv * sizeof *pos);
    int *np = malloc((size_t)Hkv * sizeof *np), aligned_checks = 0;
    for (int j = 0; j < Hkv; j++) pos[j] = malloc((size_t)(n + STEPS) * sizeof **pos);
    for (int step = -1; step < STEPS; step++) {
        bad = 0;
        for (int l = 0; l < L && step >= 0; l++) {
            append_step(&kv_sentencekv, st, &sc, step, l);
            const float *q = qdec(&sc, step, l);
            for (int j = 0; j < Hkv; j++) {
                sk_model *x = &mx[l * Hkv + j];
                x->pos[x->nrows++] = n + step;
                for (int c = 0; c < d; c++) {
                    double sum = 0;
                    for (int hh = 0; hh < sc.g; hh++) sum += q[((size_t)j * sc.g + hh) * d + c];
                    x->qsum[c] += sum / sc.g;
                }
                x->nq++;
                sk_select(&sc, x, B, S0, R0);
            }
            test_poison(out, (size_t)H * d);
            kv_sentencekv.attend(st, l, q, out);
            for (int j = 0; j < Hkv; j++) {
                sk_model *x = &mx[l * Hkv + j];
                np[j] = sentencekv_selection(st, l, j, pos[j]);
                int ok = np[j] == x->nsel && np[j] <= B + (hold ? 0 : step + 1);
                for (int i = 0; ok && i < np[j]; i++) ok = pos[j][i] == x->pos[x->sel[i]];
                if (!ok && !bad++)
                    CHECK(0, "%s step %d layer %d kv %d: attended %d rows, expected %d (budget %d)", tag, step, l,
                          j, np[j], x->nsel, B);
                int base = hold ? x->nrows : x->np, want0 = (base < S0 + R0 ? base : S0 + R0) + (hold ? 0 : 1);
                if (step == 0 && np[j] != want0 && !bad++)
                    CHECK(0, "%s layer %d kv %d: a one-token sentence must attend sinks + recent only", tag, l, j);
                if (step == 1 && target[l * Hkv + j] >= 0) {
                    /* the target's rows outside sinks/recent are all attended */
                    int s0 = target[l * Hkv + j], rec = (hold ? x->nrows : x->np) - R0, all = 1, any = 0;
                    for (int r = x->srow[s0]; r < x->srow[s0] + x->slen[s0]; r++) {
                        if (r < S0 || r >= rec) continue;
                        int in = 0;
                        for (int i = 0; i < np[j]; i++) in |= pos[j][i] == x->pos[r];
                        all &= in;
                        any = 1;
                    }
                    aligned_checks += any;
                    CHECK(all, "%s layer %d kv %d: aligned query did not retrieve its sentence", tag, l, j);
                }
                kv_headstat hs;
                for (int hh = 0; hh < sc.g; hh++) {
                    kv_sentencekv.head_stats(st, l, j * sc.g + hh, &hs);
                    if ((hs.kept != np[j] || hs.events != (double)x->retrieved) && !bad++)
                        CHECK(0, "%s step %d layer %d head %d: head_stats kept %g events %g, expected %d %ld", tag,
                              step, l, j * sc.g + hh, hs.kept, hs.events, np[j], x->retrieved);
                }
            }
            double e = attn_err(&sc, l, q, pos, np, out);
            CHECK(e < 1e-5, "%s step %d layer %d: attention rel err %.3g", tag, step, l, e);
            for (int j = 0; j < Hkv && sc.dsent[step]; j++) {     /* a generated sentence ends */
                sk_model *x = &mx[l * Hkv + j];
                if (hold) sk_add_sentence(&sc, l, j, x, x->cur, x->nrows - x->cur);   /* append: no vector */
                x->cur = x->nrows;
                x->nq = 0;
                memset(x->qsum, 0, sizeof x->qsum);
            }
        }
        CHECK(!bad, "%s step %d: %d selection/stat mismatches", tag, step, bad);
        long rows = 0, work = 0, vecs = 0;
        for (int i = 0; i < L * Hkv; i++) {
            rows += mx[i].nrows;
            int npr = hold ? mx[i].nrows : mx[i].np;
            work += (npr < B ? npr : B) + mx[i].nrows - npr;
            vecs += mx[i].ns;
        }
        size_t row = (size_t)2 * d * EB, aux = (size_t)vecs * d * sizeof(float);   /* sentence vectors: f32 */
        kv_mem mem;
        memset(&mem, 0xff, sizeof mem);
        kv_sentencekv.memory(st, &mem);
        CHECK(mem.slow_bytes == (size_t)rows * row && mem.slow_peak >= mem.slow_bytes && mem.fast_tokens == work &&
              mem.fast_aux_bytes == aux && mem.fast_bytes == (size_t)work * row + aux &&
              mem.fast_peak >= mem.fast_bytes && mem.fast_peak >= (size_t)n * Hkv * row,
              "%s step %d: memory slow %zu fast %zu aux %zu tokens %ld; expected %ld slow rows, %ld working, %zu aux",
              tag, step, mem.slow_bytes, mem.fast_bytes, mem.fast_aux_bytes, mem.fast_tokens, rows, work, aux);
    }
    check_sentences(st, &sc, mx, tag, "after decode");
    long retrieved = 0;
    for (int i = 0; i < L * Hkv; i++) retrieved += mx[i].retrieved;
    if (B - S0 - R0 > 0) CHECK(retrieved > 0, "%s: no sentence was ever retrieved", tag);
    if (aligned) CHECK(aligned_checks > 0, "%s: the aligned sentence was never outside sinks/recent", tag);
    kv_sentencekv.free(st);
    for (int i = 0; i < L * Hkv; i++) free(mx[i].key);
    for (int j = 0; j < Hkv; j++) free(pos[j]);
    free(mx); free(score); free(top); free(sid); free(got); free(target); free(out); free(pos); free(np);
    free_scen(&sc);
}

/* ------------------------------------------------------------------ bad input */

static void test_bad_setups(void) {
    const kv_method *ms[] = {&kv_pyramidkv, &kv_chunkkv, &kv_sentencekv};
    kv_setup ok = {.n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 8, .n_prompt = 50, .max_decode = 4,
                   .budget_frac = 0.5};
    const char *bad_params[] = {"nope=1", "window", "window=x", "window=0", "kernel=0"};
    for (int i = 0; i < 3; i++) {
        const kv_method *m = ms[i];
        char err[256];
        kv_setup s = ok;
        s.budget_frac = 0;
        err[0] = 0;
        CHECK(!m->init(&s, err, sizeof err) && err[0] && !strchr(err, '\n'), "%s: zero budget: '%s'", m->name, err);
        s.budget_frac = 1.5;
        err[0] = 0;
        CHECK(!m->init(&s, err, sizeof err) && err[0], "%s: budget fraction 1.5: '%s'", m->name, err);
        s = ok;
        s.budget_tokens = -3;
        err[0] = 0;
        CHECK(!m->init(&s, err, sizeof err) && err[0], "%s: negative budget: '%s'", m->name, err);
        s = ok;
        s.n_kv_heads = 3;
        err[0] = 0;
        CHECK(!m->init(&s, err, sizeof err) && err[0], "%s: 4 heads over 3 kv heads: '%s'", m->name, err);
        for (size_t b = 0; b < sizeof bad_params / sizeof *bad_params; b++) {
            s = ok;
            s.params = bad_params[b];
            err[0] = 0;
            CHECK(!m->init(&s, err, sizeof err) && strstr(err, m->name), "%s: params '%s': '%s'", m->name,
                  bad_params[b], err);
        }
        for (const kv_param *p = m->params; p->name; p++)
            CHECK(p->deflt && p->help && p->help[0], "%s: parameter %s documented", m->name, p->name);
        s = ok;
        kv_state *st = m->init(&s, err, sizeof err);
        CHECK(st, "%s: valid setup refused: %s", m->name, err);
        if (st) {   /* a prefill that does not match the setup */
            kv_prefill p = {.layer = 5, .n = 50};
            err[0] = 0;
            CHECK(m->ingest(st, &p, err, sizeof err) == -1 && err[0], "%s: bad layer accepted", m->name);
            m->free(st);
        }
    }
    char err[256] = "";
    kv_setup s = ok;
    s.params = "beta=0";
    CHECK(!kv_pyramidkv.init(&s, err, sizeof err), "pyramidkv: beta 0 accepted");
    s.params = "pool=2";
    CHECK(!kv_pyramidkv.init(&s, err, sizeof err) && !kv_chunkkv.init(&s, err, sizeof err), "pool 2 accepted");
    s.params = "chunk=0";
    CHECK(!kv_chunkkv.init(&s, err, sizeof err), "chunkkv: chunk 0 accepted");
    s.params = "reuse=0";
    CHECK(!kv_chunkkv.init(&s, err, sizeof err), "chunkkv: reuse 0 accepted");
    s.params = "factor=0";
    CHECK(!kv_sentencekv.init(&s, err, sizeof err), "sentencekv: factor 0 accepted");
    s.params = "sinks=-1";
    CHECK(!kv_sentencekv.init(&s, err, sizeof err), "sentencekv: sinks -1 accepted");
}

int main(void) {
    test_seed();
    test_pyramid_schedule();
    /* pyramid, uniform, uncompressed and ratio budgets; GQA 4/2 and 9/3; odd n */
    for (g_rule = KV_DECODE_APPEND; g_rule <= KV_DECODE_HOLD; g_rule++) {
        test_pyramid(5, 4, 2, 16, 301, 64, 0, NULL, 8, 20, 7, POOL_MAX, PYRAMID_PYRAMID);
        test_pyramid(4, 9, 3, 8, 257, 150, 0, "pool=1,kernel=5", 8, 20, 5, POOL_AVG, PYRAMID_UNIFORM);
        test_pyramid(3, 4, 2, 16, 151, 400, 0, NULL, 8, 20, 7, POOL_MAX, PYRAMID_NONE);
        test_pyramid(6, 9, 3, 8, 333, 0, 0.15, "window=16,beta=10", 16, 10, 7, POOL_MAX, PYRAMID_PYRAMID);
        test_pyramid(4, 4, 2, 8, 201, 5, 0, NULL, 8, 20, 7, POOL_MAX, PYRAMID_PYRAMID);   /* window clamped to C */
        /* chunk sets, reuse, odd chunk sizes, a short last chunk, everything kept */
        test_chunkkv(4, 4, 2, 16, 301, 90, 10, 32, 7, POOL_MAX, 1, NULL);
        test_chunkkv(5, 9, 3, 8, 257, 75, 7, 16, 5, POOL_AVG, 2, "chunk=7,window=16,kernel=5,pool=1,reuse=2");
        test_chunkkv(3, 4, 2, 8, 123, 200, 10, 32, 7, POOL_MAX, 3, "reuse=3");
        test_chunkkv(3, 4, 2, 8, 199, 20, 10, 32, 7, POOL_MAX, 1, NULL);               /* window clamped to B */
        /* pre-filter, sentences, retrieval, generated sentences, tight budgets */
        test_sentencekv(3, 4, 2, 16, 401, 100, NULL, 32, 32, 3, 32, 7, 1);
        test_sentencekv(3, 9, 3, 8, 333, 80, "sinks=8,recent=16,factor=2,kernel=5", 8, 16, 2, 32, 5, 1);
        test_sentencekv(2, 4, 2, 8, 151, 100, NULL, 32, 32, 3, 32, 7, 0);             /* no pre-filter (n <= 3B) */
        test_sentencekv(2, 9, 3, 8, 211, 20, "window=8", 32, 32, 3, 8, 7, 0);        /* sinks + recent clamped */
    }
    g_rule = KV_DECODE_HOLD;
    test_bad_setups();
    return check_done("test_methods_b");
}

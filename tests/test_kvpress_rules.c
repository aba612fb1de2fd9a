/* The three shared methods that have no kvpress fixture (h2o, pyramidkv, chunkkv): each
 * side's selection rule run on ONE shared score vector, so that where kvbench and kvpress
 * keep different rows the difference is shown to be the documented rule, nothing else.
 *
 * kvpress's rules are written here in double from its source, NVIDIA/kvpress commit
 * 8bb29b9 (kvpress/presses/observed_attention_press.py, pyramidkv_press.py,
 * chunkkv_press.py, snapkv_press.py, scorer_press.py): torch's round() is half-to-even
 * (rint here), int() truncates, topk ties are unspecified (lower row here; the inputs are
 * random, so the only ties are the forced window rows, always all kept). kvbench's side is
 * the registered method itself, run through the door on the same random attention; its
 * kept rows must be the top-k of the shared vector (up to float rounding: a row within
 * 1e-5 relative of the cut may trade places, as kvbench scores in float). Then:
 *
 *  h2o     kvpress's ObservedAttentionPress scores key j by its column sum over the n
 *          prompt queries DIVIDED BY n - j (the queries that can see it), mean over the
 *          group, and keeps the top B with no window. kvbench's h2o:one_shot=1,window=0
 *          keeps the top B of the raw column sum. Fed kvpress's normalised vector as its
 *          column mass, kvbench's rule keeps kvpress's rows exactly (Jaccard 1.0); on the
 *          raw sums the sets differ: the normalisation is the whole difference.
 *  pyramidkv  both keep the top b[l] of SnapKV's score (window forced to the top), so the
 *          kept sets of a layer are nested; only the per-layer count b[l] differs.
 *          kvbench (KVCache-Factory's schedule) spreads C - w over the layers and adds
 *          the w window rows; kvpress spreads C with the window inside, so
 *          b_kvpress[l] - b_kvbench[l] = w(1 - 1/beta)(1 - 2l/(L-1)) up to rounding; kvpress
 *          rounds each layer (the sum drifts from L*C), kvbench's sum is exactly L*C; and
 *          kvpress falls back to a uniform C unless C/beta >= w.
 *  chunkkv both score a chunk by the same token scores summed over kv heads. kvpress cuts
 *          chunks from row 0 over the whole prompt with the window inside (window rows
 *          forced to max + 1, so the window's chunks win) and keeps
 *          int(chunks * (1 - cr)) chunks; kvbench cuts chunks over the prefix before the
 *          window, keeps floor((B - w)/c) of them and appends the window. When c divides
 *          both n and w (and kvpress's chunk count is B/c) the two keep the same rows;
 *          otherwise the chunks at the window's edge differ. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../methods/method.h"
#include "../methods/pyramid.h"
#include "check.h"

#define TOL 1e-5

typedef struct { double s; int t; } ranked;

static int by_score(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->s != y->s) return x->s > y->s ? -1 : 1;
    return x->t - y->t;
}
static int by_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* The top k of score[0..n) (ties: lower index), ascending positions into keep. */
static int top_k(const double *score, int n, int k, int *keep) {
    if (k > n) k = n;
    ranked *r = malloc((size_t)n * sizeof *r);
    for (int t = 0; t < n; t++) r[t] = (ranked){score[t], t};
    qsort(r, (size_t)n, sizeof *r, by_score);
    for (int i = 0; i < k; i++) keep[i] = r[i].t;
    qsort(keep, (size_t)k, sizeof *keep, by_int);
    free(r);
    return k;
}

/* `got` (ng distinct ids) is a top-k of score[0..n): every kept id scores at least the k-th
 * largest and every other at most it, up to TOL relative (float rounding on kvbench's side). */
static int is_top_k(const int32_t *got, int ng, const double *score, int n, int k) {
    if (k > n) k = n;
    if (ng != k) return 0;
    if (k == 0 || k == n) return 1;
    ranked *r = malloc((size_t)n * sizeof *r);
    for (int t = 0; t < n; t++) r[t] = (ranked){score[t], t};
    qsort(r, (size_t)n, sizeof *r, by_score);
    double cut = r[k - 1].s, tol = TOL * (fabs(cut) + 1e-30);
    free(r);
    char *in = calloc((size_t)n, 1);
    int ok = 1;
    for (int i = 0; i < ng; i++) {
        if (got[i] < 0 || got[i] >= n || in[got[i]]) ok = 0;
        else in[got[i]] = 1;
    }
    for (int t = 0; t < n && ok; t++) ok = in[t] ? score[t] >= cut - tol : score[t] <= cut + tol;
    free(in);
    return ok;
}

static double jaccard(const int *a, int na, const int *b, int nb) {
    int inter = 0;
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++) inter += a[i] == b[j];
    return na + nb - inter ? (double)inter / (na + nb - inter) : 1;
}

/* ---- shared inputs: random K/V and a causal softmax attention per query head ---- */

typedef struct {
    int H, Hkv, g, d, n, w;
    float *K, *V, *win, *col;   /* win: [H][w][n] (last w query rows); col: [H][n] column sums */
    double *colsum;             /* [H][n] the same sums in double */
} inputs;

static void make_inputs(inputs *in, int H, int Hkv, int d, int n, int w) {
    *in = (inputs){H, Hkv, H / Hkv, d, n, w, NULL, NULL, NULL, NULL, NULL};
    size_t N = (size_t)Hkv * n * d;
    in->K = malloc(N * sizeof *in->K), in->V = malloc(N * sizeof *in->V);
    test_fill(in->K, N, 1), test_fill(in->V, N, 1);
    in->win = malloc((size_t)H * (w > 0 ? w : 1) * n * sizeof *in->win);
    in->col = malloc((size_t)H * n * sizeof *in->col);
    in->colsum = calloc((size_t)H * n, sizeof *in->colsum);
    double *row = malloc((size_t)n * sizeof *row);
    for (int h = 0; h < H; h++) {
        double temp = 0.5 + 2.5 * test_unif();   /* peaky and flat heads */
        for (int i = 0; i < n; i++) {
            double mx = -INFINITY, z = 0;
            for (int j = 0; j <= i; j++) row[j] = temp * test_normal(), mx = row[j] > mx ? row[j] : mx;
            for (int j = 0; j <= i; j++) z += row[j] = exp(row[j] - mx);
            for (int j = 0; j < n; j++) {
                double a = j <= i ? row[j] / z : 0;
                in->colsum[(size_t)h * n + j] += a;
                if (i >= n - w) in->win[((size_t)h * w + (i - (n - w))) * n + j] = (float)a;
            }
        }
        for (int j = 0; j < n; j++) in->col[(size_t)h * n + j] = (float)in->colsum[(size_t)h * n + j];
    }
    free(row);
}

static void free_inputs(inputs *in) {
    free(in->K), free(in->V), free(in->win), free(in->col), free(in->colsum);
}

static kv_prefill prefill_of(const inputs *in, int layer, const float *col) {
    return (kv_prefill){.layer = layer, .n = in->n, .K = in->K, .V = in->V, .kv_stride = (size_t)in->n * in->d,
                        .col_mass = col, .win_probs = in->win, .win = in->w};
}

/* kvpress's SnapKVPress.score in double: the window rows' probabilities over the prefix
 * m = n - w, averaged over the rows, avg_pool1d (kernel k, padding k/2, zeros counted),
 * averaged over the group; window rows max + 1 (the max over every kv head). s: [Hkv][n]. */
static void snap_score(const inputs *in, int kernel, double *s) {
    int n = in->n, w = in->w, m = n - w;
    double *raw = malloc((size_t)(m > 0 ? m : 1) * sizeof *raw), mx = -INFINITY;
    for (int j = 0; j < in->Hkv; j++) {
        for (int i = 0; i < m; i++) s[(size_t)j * n + i] = 0;
        for (int hh = 0; hh < in->g; hh++) {
            int h = j * in->g + hh;
            for (int i = 0; i < m; i++) {
                double a = 0;
                for (int r = 0; r < w; r++) a += in->win[((size_t)h * w + r) * n + i];
                raw[i] = a / w;
            }
            for (int i = 0; i < m; i++) {
                double p = 0;
                for (int u = i - kernel / 2; u < i - kernel / 2 + kernel; u++) p += u >= 0 && u < m ? raw[u] : 0;
                s[(size_t)j * n + i] += p / kernel / in->g;
            }
        }
        for (int i = 0; i < m; i++) mx = s[(size_t)j * n + i] > mx ? s[(size_t)j * n + i] : mx;
    }
    for (int j = 0; j < in->Hkv; j++)
        for (int i = m; i < n; i++) s[(size_t)j * n + i] = mx + 1;
    free(raw);
}

static kv_state *init_method(const char *name, const inputs *in, int L, int B, const char *params) {
    const kv_method *m = kv_method_find(name);
    CHECK(m, "%s not registered", name);
    if (!m) return NULL;
    kv_setup s = {.n_layers = L, .n_heads = in->H, .n_kv_heads = in->Hkv, .head_dim = in->d, .n_prompt = in->n,
                  .max_decode = 1, .budget_tokens = B, .params = params};
    char err[256] = "";
    kv_state *st = m->init(&s, err, sizeof err);
    CHECK(st, "%s init (%s): %s", name, params, err);
    return st;
}

static int rows_of(const char *name, const kv_state *st, int layer, int j, int n, int32_t *got) {
    int ng = -1;
    kv_method_find(name)->rows(st, layer, j, got, 2 * n, &ng);
    return ng;
}

/* ------------------------------------------------------------------ h2o */

static int h2o_heads, h2o_heads_differ;
static double h2o_jac_sum;

static void h2o_case(void) {
    int Hkv = test_int(1, 3), g = test_int(1, 3), n = test_int(24, 120);
    inputs in;
    make_inputs(&in, Hkv * g, Hkv, 8, n, 1);
    /* kvpress: compression_ratio = 1 - B/n, n_kept = int(n * (1 - cr)) (ScorerPress.compress) */
    int B0 = test_int(2, n - 2);
    double cr = 1.0 - (double)B0 / n;
    int B = (int)(n * (1 - cr));
    if (B < 1) B = 1;
    double *kvp = malloc((size_t)n * sizeof *kvp), *raw = malloc((size_t)n * sizeof *raw);
    float *normed = malloc((size_t)in.H * n * sizeof *normed);
    for (int h = 0; h < in.H; h++)
        for (int j = 0; j < n; j++) normed[(size_t)h * n + j] = (float)(in.colsum[(size_t)h * n + j] / (n - j));
    int *ref_kvp = malloc((size_t)n * sizeof *ref_kvp), *ref_raw = malloc((size_t)n * sizeof *ref_raw);
    int32_t *got = malloc((size_t)2 * n * sizeof *got);
    kv_state *own = init_method("h2o", &in, 1, B, "one_shot=1,window=0");
    kv_state *fed = init_method("h2o", &in, 1, B, "one_shot=1,window=0");
    kv_prefill p_own = prefill_of(&in, 0, in.col), p_fed = prefill_of(&in, 0, normed);
    char err[256] = "";
    const kv_method *m = kv_method_find("h2o");
    int ok = own && fed && m->ingest(own, &p_own, err, sizeof err) == 0 && m->ingest(fed, &p_fed, err, sizeof err) == 0;
    CHECK(ok, "h2o ingest: %s", err);
    for (int j = 0; j < Hkv && ok; j++) {
        for (int t = 0; t < n; t++) {
            double a = 0, b = 0;
            for (int hh = 0; hh < g; hh++) {
                a += in.colsum[(size_t)(j * g + hh) * n + t] / (n - t);
                b += in.colsum[(size_t)(j * g + hh) * n + t];
            }
            kvp[t] = a / g;     /* ObservedAttentionPress: mean over the group */
            raw[t] = b;         /* kvbench: the sum over the group (same order as the mean) */
        }
        int nk = top_k(kvp, n, B, ref_kvp), nr = top_k(raw, n, B, ref_raw);
        int ng = rows_of("h2o", own, 0, j, n, got);
        CHECK(is_top_k(got, ng, raw, n, B), "h2o n %d B %d kv head %d: kvbench's rows are not the top %d of the raw "
              "column sums", n, B, j, B);
        ng = rows_of("h2o", fed, 0, j, n, got);
        CHECK(is_top_k(got, ng, kvp, n, B), "h2o n %d B %d kv head %d: fed kvpress's normalised score, kvbench does not "
              "keep kvpress's rows", n, B, j);
        double jac = jaccard(ref_raw, nr, ref_kvp, nk);
        h2o_heads++, h2o_heads_differ += jac < 1, h2o_jac_sum += jac;
    }
    if (own) m->free(own);
    if (fed) m->free(fed);
    free(kvp), free(raw), free(normed), free(ref_kvp), free(ref_raw), free(got);
    free_inputs(&in);
}

/* ------------------------------------------------------------------ pyramidkv */

/* kvpress PyramidKVPress.get_layer_budget (q_len = n, compression_ratio cr). Sets *pyr. */
static int kvpress_layer_budget(int n, double cr, int w, int beta, int L, int l, int *pyr, double *exact) {
    double mcp = w + n * (1 - cr);
    double min_num = (mcp - w) / beta, max_num = (mcp - w) * 2 - min_num;
    if (max_num >= n - w) {
        max_num = n - w;
        min_num = (mcp - w) * 2 - max_num;
    }
    if (!(n >= max_num && max_num >= min_num && min_num >= w)) {
        *pyr = 0;
        *exact = n * (1 - cr);
        return (int)rint(n * (1 - cr));
    }
    double steps = (max_num - min_num) / (L - 1);
    *pyr = 1;
    *exact = max_num - l * steps;
    return (int)rint(max_num - l * steps);
}

static int pyr_cases, pyr_fallback_cases, pyr_layers_differ, pyr_layers, pyr_closed;

static void pyramid_case(void) {
    int Hkv = test_int(1, 3), g = test_int(1, 2), L = test_int(2, 8), w = test_int(1, 6);
    int beta = test_unif() < 0.5 ? 20 : test_int(1, 4);
    int n = test_int(8 * w + 16, 200), C = test_int(2 * w + 2, n / 3);
    double cr = 1.0 - (double)C / n;
    char params[128];
    snprintf(params, sizeof params, "beta=%d,window=%d,kernel=5,pool=1", beta, w);
    inputs *in = calloc((size_t)L, sizeof *in);
    for (int l = 0; l < L; l++) make_inputs(&in[l], Hkv * g, Hkv, 8, n, w);
    kv_state *st = init_method("pyramidkv", &in[0], L, C, params);
    const kv_method *m = kv_method_find("pyramidkv");
    char err[256] = "";
    int ok = st != NULL;
    for (int l = 0; l < L && ok; l++) {
        kv_prefill p = prefill_of(&in[l], l, NULL);
        ok = m->ingest(st, &p, err, sizeof err) == 0;
        CHECK(ok, "pyramidkv ingest layer %d: %s", l, err);
    }
    /* kvbench's own schedule: its pyramid branch when n >= 2(C - w) (always here) */
    int *keep = malloc((size_t)L * sizeof *keep);
    int branch = pyramid_budgets(n, C, w, beta, L, keep);
    CHECK(branch == PYRAMID_PYRAMID, "pyramidkv n %d C %d w %d: branch %d", n, C, w, branch);
    double *s = malloc((size_t)Hkv * n * sizeof *s);
    int *ref_b = malloc((size_t)n * sizeof *ref_b), *ref_p = malloc((size_t)n * sizeof *ref_p);
    int32_t *got = malloc((size_t)2 * n * sizeof *got);
    long sum_b = 0, sum_p = 0;
    int all_pyr = 1, all_flat = 1, kvb_flat = 1;
    int room = C - w, kmin_b = room / beta, kmax_b = 2 * room - kmin_b;
    int b_clamped = kmax_b >= n - w;
    for (int l = 0; l < L && ok; l++) {
        int pyr;
        double exact_p;
        int bb = pyramidkv_layer_budget(st, l), bp = kvpress_layer_budget(n, cr, w, beta, L, l, &pyr, &exact_p);
        CHECK(bb == keep[l] + w, "pyramidkv layer %d: budget %d, schedule says %d + %d", l, bb, keep[l], w);
        sum_b += bb, sum_p += bp, all_pyr &= pyr, all_flat &= bp == (int)rint(n * (1 - cr));
        kvb_flat &= bb == pyramidkv_layer_budget(st, 0);
        if (pyr && !b_clamped && kmax_b < n - w && 2 * (n * (1 - cr)) - (n * (1 - cr)) / beta < n - w) {
            /* the documented difference: C spread with the window inside vs C - w spread + w */
            double line_b = kmax_b - (double)l * (kmax_b - kmin_b) / (L - 1) + w;
            double want = exact_p - line_b;
            double closed = w * (1 - 1.0 / beta) * (1 - 2.0 * l / (L - 1));
            CHECK(fabs((bp - bb) - want) < 1.5 + 1e-9, "pyramidkv layer %d: kvpress %d - kvbench %d, lines differ by %.3f",
                  l, bp, bb, want);
            CHECK(fabs(want - closed) < 1.0 + 1e-9, "pyramidkv layer %d: lines differ by %.3f, closed form %.3f", l, want,
                  closed);
            pyr_closed++;
        }
        snap_score(&in[l], 5, s);
        for (int j = 0; j < Hkv; j++) {
            const double *sj = s + (size_t)j * n;
            int nb = top_k(sj, n, bb, ref_b), np = top_k(sj, n, bp, ref_p);
            int ng = rows_of("pyramidkv", st, l, j, n, got);
            CHECK(is_top_k(got, ng, sj, n, bb), "pyramidkv L %d layer %d kv head %d: kvbench's %d rows are not the top %d "
                  "of SnapKV's score", L, l, j, ng, bb);
            /* same ranking, so the kept sets are nested: Jaccard = smaller / larger count */
            double jac = jaccard(ref_b, nb, ref_p, np), want = (double)(nb < np ? nb : np) / (nb > np ? nb : np);
            CHECK(fabs(jac - want) < 1e-12, "pyramidkv layer %d kv head %d: Jaccard %.4f, nested sets give %.4f", l, j,
                  jac, want);
            pyr_layers_differ += bb != bp, pyr_layers++;
        }
    }
    if (ok) {
        CHECK(sum_b == (long)L * C, "pyramidkv: kvbench's layers sum to %ld, not L*C = %ld", sum_b, (long)L * C);
        CHECK(labs(sum_p - (long)L * C) <= (L + 1) / 2, "pyramidkv: kvpress's layers sum to %ld, L*C = %ld", sum_p,
              (long)L * C);
        if (!all_pyr) {     /* kvpress's fallback (C/beta < w): a uniform C; kvbench stays a pyramid */
            CHECK(all_flat, "pyramidkv: kvpress fell back but its budgets are not uniform");
            CHECK((double)C / beta < w + 1e-9 || 2 * (double)C - (double)C / beta >= n - w,
                  "pyramidkv: kvpress fell back with C/beta %.2f >= w %d", (double)C / beta, w);
            pyr_fallback_cases++;
        }
        pyr_cases++;
    }
    if (st) m->free(st);
    for (int l = 0; l < L; l++) free_inputs(&in[l]);
    free(in), free(keep), free(s), free(ref_b), free(ref_p), free(got);
}

/* ------------------------------------------------------------------ chunkkv */

/* kvpress ChunkKVPress(SnapKVPress).compress: chunks of c from row 0 over all n rows,
 * score = the token scores summed over kv heads, averaged over the chunk (the trailing
 * partial chunk over its own length); top int(chunks * (1 - cr)) chunks (at least 1). */
static int kvpress_chunkkv(const double *s, int Hkv, int n, int c, double cr, int *keep) {
    int full = n / c, rem = n % c, nch = full + (rem > 0);
    double *cs = malloc((size_t)nch * sizeof *cs);
    for (int ch = 0; ch < nch; ch++) {
        int a = ch * c, b = ch < full ? a + c : n;
        double sum = 0;
        for (int t = a; t < b; t++) {
            double over_heads = 0;
            for (int j = 0; j < Hkv; j++) over_heads += s[(size_t)j * n + t];
            sum += over_heads;
        }
        cs[ch] = sum / (b - a);
    }
    int nk = (int)(nch * (1 - cr));
    if (nk < 1) nk = 1;
    int *top = malloc((size_t)nch * sizeof *top), cnt = 0;
    nk = top_k(cs, nch, nk, top);
    for (int i = 0; i < nk; i++)
        for (int t = top[i] * c; t < n && t < (top[i] + 1) * c; t++) keep[cnt++] = t;
    free(cs), free(top);
    return cnt;
}

/* kvbench's documented rule (methods/chunkkv.c): chunks of c over the prefix m = n - w,
 * score = sum over tokens and kv heads; top floor((B - w)/c) chunks, then the window. */
static int kvbench_chunkkv(const double *s, int Hkv, int n, int w, int c, int B, double *cscore, int *nchunks,
                           int *keep) {
    int m = n - w, nch = (m + c - 1) / c, cnt = 0;
    for (int ch = 0; ch < nch; ch++) {
        double sum = 0;
        for (int j = 0; j < Hkv; j++)
            for (int t = ch * c; t < m && t < (ch + 1) * c; t++) sum += s[(size_t)j * n + t];
        cscore[ch] = sum;
    }
    *nchunks = nch;
    int *top = malloc((size_t)(nch > 0 ? nch : 1) * sizeof *top);
    int nk = top_k(cscore, nch, (B - w) / c, top);
    for (int i = 0; i < nk; i++)
        for (int t = top[i] * c; t < m && t < (top[i] + 1) * c; t++) keep[cnt++] = t;
    for (int t = m; t < n; t++) keep[cnt++] = t;
    qsort(keep, (size_t)cnt, sizeof *keep, by_int);
    free(top);
    return cnt;
}

static int chunk_aligned, chunk_unaligned, chunk_unaligned_differ;
static double chunk_unaligned_jac;

static void chunk_case(int aligned) {
    int Hkv = test_int(1, 3), g = test_int(1, 2), c = test_int(2, 10);
    int w, n, B;
    if (aligned) {          /* c | w, c | n, c | B */
        w = c * test_int(1, 3);
        n = c * test_int(w / c + 4, w / c + 16);
        B = c * test_int(w / c + 1, n / c - 2);
    } else {
        do w = test_int(2, 24); while (w % c == 0);
        n = test_int(w + 5 * c, w + 12 * c + 20);
        B = test_int(w + 3 * c, n - c);
    }
    double cr = 1.0 - (double)B / n;
    char params[128];
    snprintf(params, sizeof params, "chunk=%d,window=%d,kernel=5,pool=1", c, w);
    inputs in;
    make_inputs(&in, Hkv * g, Hkv, 8, n, w);
    kv_state *st = init_method("chunkkv", &in, 1, B, params);
    const kv_method *m = kv_method_find("chunkkv");
    char err[256] = "";
    kv_prefill p = prefill_of(&in, 0, NULL);
    int ok = st && m->ingest(st, &p, err, sizeof err) == 0;
    CHECK(ok, "chunkkv ingest: %s", err);
    double *s = malloc((size_t)Hkv * n * sizeof *s), *cscore = malloc((size_t)n * sizeof *cscore);
    int *kb = malloc((size_t)n * sizeof *kb), *kp = malloc((size_t)n * sizeof *kp), nch = 0;
    int32_t *got = malloc((size_t)2 * n * sizeof *got);
    if (ok) {
        snap_score(&in, 5, s);
        int nb = kvbench_chunkkv(s, Hkv, n, w, c, B, cscore, &nch, kb);
        int np = kvpress_chunkkv(s, Hkv, n, c, cr, kp);
        qsort(kp, (size_t)np, sizeof *kp, by_int);
        /* kvbench's method keeps its rule's rows on every kv head (a near-tie chunk may trade) */
        for (int j = 0; j < Hkv; j++) {
            int ng = rows_of("chunkkv", st, 0, j, n, got);
            if (ng > 0) qsort(got, (size_t)ng, sizeof *got, by_int);
            int same = ng == nb;
            for (int i = 0; i < ng && same; i++) same = got[i] == kb[i];
            if (!same) {    /* accepted only as a valid top-k of the chunk scores */
                int32_t ids[4096];
                int ni = 0, rows_ok = 1, m_ = n - w;
                for (int i = 0; i < ng; i++)
                    if (got[i] < m_ && (i == 0 || got[i] / c != got[i - 1] / c) && ni < 4096) ids[ni++] = got[i] / c;
                for (int t = m_; t < n; t++) {
                    int in_ = 0;
                    for (int i = 0; i < ng; i++) in_ |= got[i] == t;
                    rows_ok &= in_;
                }
                same = rows_ok && is_top_k(ids, ni, cscore, nch, (B - w) / c);
            }
            CHECK(same, "chunkkv n %d w %d c %d B %d kv head %d: kvbench's rows are not its rule's", n, w, c, B, j);
        }
        double jac = jaccard(kb, nb, kp, np);
        int nk_p = (int)((n / c + (n % c > 0)) * (1 - cr));
        if (aligned && nk_p * c == B) {
            CHECK(jac == 1.0, "chunkkv aligned n %d w %d c %d B %d: Jaccard %.4f (kvbench %d rows, kvpress %d)", n, w, c,
                  B, jac, nb, np);
            chunk_aligned++;
        } else if (!aligned) {
            /* kvbench appends the whole window; kvpress keeps every chunk lying wholly inside
             * it (its rows score max + 1), the chunk across its edge only on its mean */
            int win_b = 0, inner_p = 0, inner = 0, first = (n - w + c - 1) / c;
            for (int i = 0; i < nb; i++) win_b += kb[i] >= n - w;
            for (int i = 0; i < np; i++) inner_p += kp[i] >= first * c;
            inner = n - first * c > 0 ? n - first * c : 0;
            CHECK(win_b == w && inner_p == inner, "chunkkv n %d w %d c %d B %d: window rows kept %d of %d (kvbench), "
                  "rows of whole window chunks %d of %d (kvpress)", n, w, c, B, win_b, w, inner_p, inner);
            chunk_unaligned++, chunk_unaligned_differ += jac < 1, chunk_unaligned_jac += jac;
        }
    }
    if (st) m->free(st);
    free_inputs(&in);
    free(s), free(cscore), free(kb), free(kp), free(got);
}

int main(void) {
    test_seed();
    for (int i = 0; i < 40; i++) h2o_case();
    CHECK(h2o_heads_differ > 0, "h2o: the raw and normalised column sums never kept different rows (%d heads)",
          h2o_heads);
    printf("h2o: %d kv heads; fed kvpress's normalised column sums, kvbench keeps kvpress's rows on all of them; on its "
           "own raw sums %d differ (mean Jaccard %.3f)\n", h2o_heads, h2o_heads_differ, h2o_jac_sum / h2o_heads);

    for (int i = 0; i < 40; i++) pyramid_case();
    CHECK(pyr_layers_differ > 0, "pyramidkv: kvpress and kvbench never gave a layer different budgets");
    CHECK(pyr_closed > 0 && pyr_fallback_cases > 0 && pyr_fallback_cases < pyr_cases,
          "pyramidkv: %d layers checked against the closed form, %d of %d cases fell back", pyr_closed,
          pyr_fallback_cases, pyr_cases);
    printf("pyramidkv: %d cases (%d where kvpress falls back to a uniform C), %d of %d (layer, kv head) budgets "
           "differ; every kept pair nested; %d layers match w(1-1/beta)(1-2l/(L-1))\n", pyr_cases, pyr_fallback_cases,
           pyr_layers_differ, pyr_layers, pyr_closed);

    for (int i = 0; i < 40; i++) chunk_case(1);
    for (int i = 0; i < 40; i++) chunk_case(0);
    CHECK(chunk_aligned > 0, "chunkkv: no aligned case was checked");
    CHECK(chunk_unaligned_differ > 0, "chunkkv: unaligned chunks never kept different rows (%d cases)", chunk_unaligned);
    printf("chunkkv: %d aligned cases Jaccard 1.0; %d unaligned, %d differ (mean Jaccard %.3f)\n", chunk_aligned,
           chunk_unaligned, chunk_unaligned_differ, chunk_unaligned ? chunk_unaligned_jac / chunk_unaligned : 1);
    return check_done("test_kvpress_rules");
}

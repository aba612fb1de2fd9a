/* FullKV, StreamingLLM, H2O, SnapKV and window_scores against brute force in double.
 *
 * Each scenario draws random K/V/Q, computes the prefill statistics (column mass and
 * observation-window probabilities) itself in double, runs a method through prefill and
 * 20 decode steps, and after every step checks the kept positions of every (layer, kv
 * head) against an independent recomputation of the policy, the attention output
 * against double attention over the rows the method attended, the budget, memory() and
 * head_stats(). Score-based choices are compared exactly where both sides sum the same
 * floats in the same order, and otherwise accept a different pick only on a near-tie. */
#include "check.h"
#include "../methods/cacheset.h"
#include "../methods/method.h"
#include "../methods/window_score.h"
#include <math.h>

extern const kv_method kv_fullkv, kv_streamingllm, kv_h2o, kv_snapkv;

enum { STEPS = 20, MAXROWS = 4096 };

typedef struct {
    int L, H, Hkv, g, d, n, steps, win;
    size_t stride;      /* floats between kv heads: (n + steps) * d */
    float *K, *V;       /* [L][Hkv][n+steps][d] */
    float *Qp;          /* [L][n][H][d] */
    float *Qd;          /* [steps][L][H][d] */
    float *cm;          /* [L][H][n] */
    float *wp;          /* [L][H][win][n] */
    float *surp;
    uint8_t *sent;
} scen;

static const float *krow(const scen *sc, int l, int j, int t) {
    return sc->K + ((size_t)l * sc->Hkv + j) * sc->stride + (size_t)t * sc->d;
}
static const float *vrow(const scen *sc, int l, int j, int t) {
    return sc->V + ((size_t)l * sc->Hkv + j) * sc->stride + (size_t)t * sc->d;
}

/* Softmax(q.k/sqrt(d)) of query q over positions pos[0..np) of kv head j, in double. */
static void ref_probs(const scen *sc, int l, int j, const float *q, const int32_t *pos, int np,
                      double *p) {
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < np; i++) {
        const float *k = krow(sc, l, j, pos[i]);
        double s = 0;
        for (int c = 0; c < sc->d; c++) s += (double)q[c] * k[c];
        p[i] = s / sqrt((double)sc->d);
        if (p[i] > mx) mx = p[i];
    }
    for (int i = 0; i < np; i++) sum += (p[i] = exp(p[i] - mx));
    for (int i = 0; i < np; i++) p[i] /= sum;
}

static scen make_scen(int L, int H, int Hkv, int d, int n) {
    scen sc = {.L = L, .H = H, .Hkv = Hkv, .g = H / Hkv, .d = d, .n = n, .steps = STEPS};
    sc.win = n < 40 ? n : 40;
    sc.stride = (size_t)(n + STEPS) * d;
    size_t kv = (size_t)L * Hkv * sc.stride;
    sc.K = malloc(kv * sizeof(float));
    sc.V = malloc(kv * sizeof(float));
    sc.Qp = malloc((size_t)L * n * H * d * sizeof(float));
    sc.Qd = malloc((size_t)STEPS * L * H * d * sizeof(float));
    sc.cm = malloc((size_t)L * H * n * sizeof(float));
    sc.wp = malloc((size_t)L * H * sc.win * n * sizeof(float));
    sc.surp = malloc((size_t)n * sizeof(float));
    sc.sent = calloc((size_t)n, 1);
    test_fill(sc.K, kv, 1.0f);
    test_fill(sc.V, kv, 1.0f);
    test_fill(sc.Qp, (size_t)L * n * H * d, 1.5f);
    test_fill(sc.Qd, (size_t)STEPS * L * H * d, 1.5f);
    for (int t = 0; t < n; t++) sc.surp[t] = t ? (float)(3 * test_unif()) : 0;
    int32_t *pos = malloc((size_t)n * sizeof *pos);
    double *p = malloc((size_t)n * sizeof *p), *mass = malloc((size_t)n * sizeof *mass);
    for (int t = 0; t < n; t++) pos[t] = t;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            for (int i = 0; i < n; i++) mass[i] = 0;
            float *wp = sc.wp + ((size_t)l * H + h) * sc.win * n;
            for (int t = 0; t < n; t++) {
                ref_probs(&sc, l, h / sc.g, sc.Qp + (((size_t)l * n + t) * H + h) * d, pos, t + 1, p);
                for (int i = 0; i <= t; i++) mass[i] += p[i];
                int r = t - (n - sc.win);
                if (r >= 0)
                    for (int i = 0; i < n; i++) wp[(size_t)r * n + i] = i <= t ? (float)p[i] : 0;
            }
            for (int i = 0; i < n; i++) sc.cm[((size_t)l * H + h) * n + i] = (float)mass[i];
        }
    free(pos); free(p); free(mass);
    return sc;
}

static void free_scen(scen *sc) {
    free(sc->K); free(sc->V); free(sc->Qp); free(sc->Qd); free(sc->cm); free(sc->wp);
    free(sc->surp); free(sc->sent);
}

static kv_prefill layer_prefill(const scen *sc, int l, const kv_needs *nd) {
    kv_prefill p = {
        .layer = l, .n = sc->n,
        .K = sc->K + (size_t)l * sc->Hkv * sc->stride, .V = sc->V + (size_t)l * sc->Hkv * sc->stride,
        .kv_stride = sc->stride,
        .col_mass = nd->col_mass ? sc->cm + (size_t)l * sc->H * sc->n : NULL,
        .win_probs = nd->window > 0 ? sc->wp + (size_t)l * sc->H * sc->win * sc->n : NULL,
        .win = nd->window > 0 ? sc->win : 0,
        .surprisal = sc->surp, .sent_end = sc->sent,
    };
    return p;
}

/* The decode rule of the trials being run (main runs every trial under both). */
static int g_rule = KV_DECODE_HOLD;

static kv_setup make_setup(const scen *sc, double frac, int tokens, const char *params) {
    kv_setup s = {
        .decode_rule = g_rule,
        .n_layers = sc->L, .n_heads = sc->H, .n_kv_heads = sc->Hkv, .head_dim = sc->d,
        .n_prompt = sc->n, .max_decode = sc->steps, .budget_frac = tokens > 0 ? 0 : frac,
        .budget_tokens = tokens, .params = params,
    };
    return s;
}

/* ------------------------------------------------------------ the policies, in double */

typedef enum { P_FULL, P_STREAM, P_H2O, P_H2O_ONESHOT, P_SNAP } policy;

typedef struct {
    policy pol;
    const kv_method *m;
    const char *params;
    double frac;
    int tokens;
    /* policy parameters as the test reads them */
    int sinks, window;          /* streaming (window 0 = auto); h2o one-shot window */
    double heavy_ratio;
    int w, kernel, pool, agg;   /* snapkv */
} trial;

typedef struct {
    int n;
    int32_t pos[MAXROWS];
} rowset;

/* Everything the test tracks per (layer, kv head). */
typedef struct {
    rowset set;                 /* expected = the method's, after each check */
    double *score;              /* [n + steps] by position (H2O, one-shot, SnapKV) */
} track;

static int budget_of(const trial *t, int n) {
    if (t->tokens > 0) return t->tokens;
    int b = (int)floor(t->frac * n);
    return b < 1 ? 1 : b;
}

/* Indices of the k largest of s[0..m) (desc score, asc index), into sel (ascending). */
static int ref_topk(const double *s, int m, int k, int32_t *sel) {
    if (k > m) k = m;
    if (k < 0) k = 0;
    char *taken = calloc((size_t)m + 1, 1);
    for (int c = 0; c < k; c++) {
        int best = -1;
        for (int i = 0; i < m; i++)
            if (!taken[i] && (best < 0 || s[i] > s[best])) best = i;
        if (best < 0) break;
        taken[best] = 1;
    }
    int nk = 0;
    for (int i = 0; i < m; i++)
        if (taken[i]) sel[nk++] = i;
    free(taken);
    return nk;
}

/* SnapKV window score of kv head j in double, straight from the definition. */
static void ref_window_scores(const scen *sc, int l, int j, int w, int kernel, int pool, int agg_max,
                              double *out) {
    int n = sc->n, m = n - w;
    double *s = malloc((size_t)m * sizeof *s);
    for (int i = 0; i < m; i++) out[i] = agg_max ? -INFINITY : 0;
    for (int hh = 0; hh < sc->g; hh++) {
        int h = j * sc->g + hh;
        const float *wp = sc->wp + ((size_t)l * sc->H + h) * sc->win * n;
        for (int i = 0; i < m; i++) {
            s[i] = 0;
            for (int r = sc->win - w; r < sc->win; r++) s[i] += wp[(size_t)r * n + i];
        }
        for (int i = 0; i < m; i++) {
            double v = pool == POOL_MAX ? -INFINITY : 0;
            for (int t = i - kernel / 2; t <= i + kernel / 2; t++) {
                if (t < 0 || t >= m) continue;           /* padding */
                v = pool == POOL_MAX ? fmax(v, s[t]) : v + s[t];
            }
            if (pool == POOL_AVG) v /= kernel;
            out[i] = agg_max ? fmax(out[i], v) : out[i] + v / sc->g;
        }
    }
    free(s);
}

/* Expected kept prompt positions after prefill, and the per-position scores. */
static void ref_prefill(const scen *sc, const trial *t, int l, int j, track *tr) {
    int n = sc->n, B = budget_of(t, n);
    rowset *e = &tr->set;
    e->n = 0;
    double *s = tr->score;
    int32_t sel[MAXROWS];
    switch (t->pol) {
    case P_FULL:
        for (int i = 0; i < n; i++) e->pos[e->n++] = i;
        break;
    case P_STREAM: {
        int S = t->sinks, W = t->window;
        if (W == 0) {
            if (S > B - 1) S = B - 1;
            W = B - S;
        }
        for (int i = 0; i < n; i++)
            if (i < S || i >= n - W) e->pos[e->n++] = i;
        break;
    }
    case P_H2O:
    case P_H2O_ONESHOT: {
        int r;
        if (t->pol == P_H2O) r = B - (int)floor(t->heavy_ratio * B);
        else r = t->window < B ? t->window : B;
        for (int i = 0; i < n; i++) {
            s[i] = 0;
            for (int hh = 0; hh < sc->g; hh++) s[i] += sc->cm[((size_t)l * sc->H + j * sc->g + hh) * n + i];
        }
        if (n <= B) {
            for (int i = 0; i < n; i++) e->pos[e->n++] = i;
        } else {
            int nk = ref_topk(s, n - r, B - r, sel);
            for (int i = 0; i < nk; i++) e->pos[e->n++] = sel[i];
            for (int i = n - r; i < n; i++) e->pos[e->n++] = i;
        }
        if (t->pol == P_H2O_ONESHOT)
            for (int i = n - r; i < n; i++) s[i] = INFINITY;
        break;
    }
    case P_SNAP: {
        int w = t->w < B ? t->w : B;
        if (w > n) w = n;
        int m = n - w;
        if (m > 0) ref_window_scores(sc, l, j, w, t->kernel, t->pool, t->agg, s);
        int nk = ref_topk(s, m, B - w, sel);
        for (int i = 0; i < nk; i++) e->pos[e->n++] = sel[i];
        for (int i = m; i < n; i++) {
            e->pos[e->n++] = i;
            s[i] = INFINITY;
        }
        break;
    }
    }
}

static void get_rows(const kv_state *st, int l, int j, rowset *out) {
    const kv_store *s = kv_a_store(st, l, j);
    out->n = s->n < MAXROWS ? s->n : MAXROWS;
    for (int i = 0; i < out->n; i++) out->pos[i] = s->pos[i];
}

static int same_rows(const rowset *a, const rowset *b) {
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (a->pos[i] != b->pos[i]) return 0;
    return 1;
}

/* The kept set may differ from the expected one only by swaps across a near-tie of the
 * scores (float vs double rounding): every differing position must score within tol of
 * the boundary (the lowest expected score among the scored rows). */
static int near_tie_swap(const rowset *got, const rowset *want, const double *s, double tol) {
    if (got->n != want->n) return 0;
    double edge = INFINITY;
    for (int i = 0; i < want->n; i++)
        if (isfinite(s[want->pos[i]]) && s[want->pos[i]] < edge) edge = s[want->pos[i]];
    int a = 0, b = 0;
    while (a < got->n || b < want->n) {
        int pg = a < got->n ? got->pos[a] : 1 << 30, pw = b < want->n ? want->pos[b] : 1 << 30;
        if (pg == pw) { a++; b++; continue; }
        int p = pg < pw ? pg : pw;
        if (pg < pw) a++; else b++;
        if (!(fabs(s[p] - edge) <= tol * fmax(1.0, fabs(edge)))) return 0;
    }
    return 1;
}

/* Index in pre of the one row got lacks; -1 if got == pre, -2 if got is not pre less one row. */
static int victim_of(const rowset *pre, const rowset *got) {
    if (same_rows(pre, got)) return -1;
    if (got->n != pre->n - 1) return -2;
    int v = -1;
    for (int a = 0, b = 0; a < pre->n; a++) {
        if (b < got->n && got->pos[b] == pre->pos[a]) { b++; continue; }
        if (v >= 0) return -2;
        v = a;
    }
    return v;
}

/* Attention outputs [H][d] of layer l vs double attention over each group's rows. */
static double out_err(const scen *sc, int l, const float *q, const float *out, rowset *const *sets) {
    double *ref = malloc((size_t)sc->H * sc->d * sizeof *ref), p[MAXROWS];
    for (int h = 0; h < sc->H; h++) {
        const rowset *r = sets[h / sc->g];
        ref_probs(sc, l, h / sc->g, q + (size_t)h * sc->d, r->pos, r->n, p);
        for (int c = 0; c < sc->d; c++) {
            double a = 0;
            for (int i = 0; i < r->n; i++) a += p[i] * vrow(sc, l, h / sc->g, r->pos[i])[c];
            ref[(size_t)h * sc->d + c] = a;
        }
    }
    double e = rel_l2(out, ref, (size_t)sc->H * sc->d);
    free(ref);
    return e;
}

/* memory() and head_stats() against the stores; `seen` = rows ever offered per kv head. */
static void check_accounting(const scen *sc, const trial *t, const kv_state *st, int seen,
                             const char *when) {
    const kv_method *m = t->m;
    long rows = 0;
    for (int l = 0; l < sc->L; l++)
        for (int j = 0; j < sc->Hkv; j++) rows += kv_a_store(st, l, j)->n;
    kv_mem mem;
    memset(&mem, 0xff, sizeof mem);
    m->memory(st, &mem);
    int scored = t->pol == P_H2O || t->pol == P_H2O_ONESHOT || t->pol == P_SNAP;
    size_t kvb = (size_t)rows * 2 * sc->d * sizeof(float);   /* f32 rows */
    CHECK(mem.fast_tokens == rows, "%s %s: fast_tokens %ld vs %ld rows", m->name, when, mem.fast_tokens, rows);
    CHECK(mem.fast_bytes - mem.fast_aux_bytes == kvb, "%s %s: K/V bytes %zu vs %zu", m->name, when,
          mem.fast_bytes - mem.fast_aux_bytes, kvb);
    CHECK(mem.fast_aux_bytes == (scored ? (size_t)rows * 4 : 0), "%s %s: aux bytes %zu", m->name, when,
          mem.fast_aux_bytes);
    CHECK(mem.fast_peak >= mem.fast_bytes && mem.slow_bytes == 0 && mem.slow_peak == 0,
          "%s %s: peak %zu bytes %zu slow %zu", m->name, when, mem.fast_peak, mem.fast_bytes, mem.slow_bytes);
    for (int l = 0; l < sc->L; l++)
        for (int h = 0; h < sc->H; h++) {
            kv_headstat hs = {-1, -1};
            m->head_stats(st, l, h, &hs);
            int kept = kv_a_store(st, l, h / sc->g)->n;
            CHECK(hs.kept == kept && hs.events == seen - kept, "%s %s: layer %d head %d kept %g events %g "
                  "(rows %d, seen %d)", m->name, when, l, h, hs.kept, hs.events, kept, seen);
        }
}

/* Runs one trial: prefill, then STEPS decode steps, checking after each. */
static void run_trial(const scen *sc, const trial *t) {
    const kv_method *m = t->m;
    char err[256] = "";
    kv_setup su = make_setup(sc, t->frac, t->tokens, t->params);
    kv_state *st = m->init(&su, err, sizeof err);
    CHECK(st != NULL, "%s init(%s): %s", m->name, t->params ? t->params : "", err);
    if (!st) return;
    int n = sc->n, B = budget_of(t, n), L = sc->L, Hkv = sc->Hkv, H = sc->H, d = sc->d;
    char tag[160];
    snprintf(tag, sizeof tag, "%s[%s] H=%d Hkv=%d n=%d B=%d %s", m->name, t->params ? t->params : "", H, Hkv, n, B,
             kv_decode_name(g_rule));
    /* prompt-compressing policies evict while decoding only under hold */
    int evicts = t->pol == P_STREAM || t->pol == P_H2O || g_rule == KV_DECODE_HOLD;

    kv_needs nd = {-1, -1, -1, -1};
    kv_method_find(m->name)->needs(&su, &nd);   /* resolved: a bare table may leave needs out */
    CHECK(nd.col_mass == (t->pol == P_H2O || t->pol == P_H2O_ONESHOT), "%s: needs col_mass %d", tag, nd.col_mass);
    CHECK(t->pol == P_SNAP ? nd.window == (t->w < B ? t->w : B) : nd.window == 0, "%s: needs window %d", tag, nd.window);
    if (nd.window > sc->win) {      /* the scenario provides fewer rows than asked */
        CHECK(0, "%s: asks for %d window rows, test has %d", tag, nd.window, sc->win);
        m->free(st);
        return;
    }

    track *tr = calloc((size_t)L * Hkv, sizeof *tr);
    for (int i = 0; i < L * Hkv; i++) tr[i].score = calloc((size_t)n + STEPS, sizeof(double));
    size_t row_bytes = 2 * (size_t)d * sizeof(float) + (t->pol == P_FULL || t->pol == P_STREAM ? 0 : 4);
    size_t want_peak = 0, resident = 0;
    for (int l = 0; l < L; l++) {
        kv_prefill p = layer_prefill(sc, l, &nd);
        if (resident + (size_t)n * Hkv * row_bytes > want_peak) want_peak = resident + (size_t)n * Hkv * row_bytes;
        CHECK(m->ingest(st, &p, err, sizeof err) == 0, "%s: ingest layer %d: %s", tag, l, err);
        for (int j = 0; j < Hkv; j++) {
            track *k = &tr[l * Hkv + j];
            ref_prefill(sc, t, l, j, k);
            rowset got;
            get_rows(st, l, j, &got);
            int ok = same_rows(&got, &k->set) ||
                     (t->pol == P_SNAP && near_tie_swap(&got, &k->set, k->score, 1e-6));
            CHECK(ok, "%s: prefill layer %d kv head %d keeps %d rows, expected %d", tag, l, j, got.n, k->set.n);
            CHECK(got.n <= (t->pol == P_FULL ? n : B), "%s: prefill over budget (%d)", tag, got.n);
            k->set = got;
            resident += (size_t)got.n * row_bytes;
        }
    }
    check_accounting(sc, t, st, n, "after prefill");
    kv_mem mem;
    m->memory(st, &mem);
    CHECK(mem.fast_peak == want_peak, "%s: prefill peak %zu, expected %zu", tag, mem.fast_peak, want_peak);

    float *kv = malloc((size_t)2 * Hkv * d * sizeof(float)), *out = malloc((size_t)H * d * sizeof(float));
    rowset *attended = malloc((size_t)Hkv * sizeof *attended);
    rowset **sets = malloc((size_t)Hkv * sizeof *sets);
    double p[MAXROWS];
    for (int s = 0; s < STEPS; s++) {
        int pos = n + s;
        for (int l = 0; l < L; l++) {
            for (int j = 0; j < Hkv; j++) {
                memcpy(kv + (size_t)j * d, krow(sc, l, j, pos), d * sizeof(float));
                memcpy(kv + (size_t)(Hkv + j) * d, vrow(sc, l, j, pos), d * sizeof(float));
            }
            const float *q = sc->Qd + ((size_t)s * L + l) * H * d;
            kv_token tok = {.pos = pos, .surprisal = 1.0f, .sent_end = 0};
            test_poison(out, (size_t)H * d);
            m->append(st, l, kv, kv + (size_t)Hkv * d, &tok);
            m->attend(st, l, q, out);
            for (int j = 0; j < Hkv; j++) {
                track *k = &tr[l * Hkv + j];
                rowset pre = k->set, got;            /* the cache before any eviction */
                pre.pos[pre.n++] = pos;
                get_rows(st, l, j, &got);
                double *sc_ = k->score;
                int predicted = -1, lo = 0;
                switch (t->pol) {
                case P_FULL: break;
                case P_STREAM: {
                    int S = t->sinks, W = t->window;
                    if (W == 0) { if (S > B - 1) S = B - 1; W = B - S; }
                    if (pre.n > S + W) predicted = pre.pos[S];
                    break;
                }
                case P_H2O: {
                    sc_[pos] = 0;
                    for (int hh = 0; hh < sc->g; hh++) {
                        ref_probs(sc, l, j, q + (size_t)(j * sc->g + hh) * d, pre.pos, pre.n, p);
                        for (int i = 0; i < pre.n; i++) sc_[pre.pos[i]] += p[i];
                    }
                    int r = B - (int)floor(t->heavy_ratio * B);
                    if (pre.n > B) {
                        lo = 0;
                        for (int i = 1; i < pre.n - r; i++)
                            if (sc_[pre.pos[i]] < sc_[pre.pos[lo]]) lo = i;
                        predicted = pre.pos[lo];
                    }
                    break;
                }
                case P_H2O_ONESHOT:
                case P_SNAP:
                    sc_[pos] = INFINITY;
                    if (pre.n > B && evicts) {
                        lo = 0;
                        for (int i = 1; i < pre.n; i++)
                            if (sc_[pre.pos[i]] < sc_[pre.pos[lo]]) lo = i;
                        predicted = pre.pos[lo];
                    }
                    break;
                }
                rowset want = pre;
                if (predicted >= 0) {
                    int w = 0;
                    for (int i = 0; i < pre.n; i++)
                        if (pre.pos[i] != predicted) want.pos[w++] = pre.pos[i];
                    want.n = w;
                }
                /* H2O and SnapKV's scores went through floats: another victim is accepted
                 * only when its score ties the predicted one's within 1e-5 */
                int victim = victim_of(&pre, &got);
                int ok = same_rows(&got, &want) ||
                         ((t->pol == P_H2O || t->pol == P_SNAP) && predicted >= 0 && victim >= 0 &&
                          fabs(sc_[pre.pos[victim]] - sc_[predicted]) <= 1e-5 * fmax(1.0, fabs(sc_[predicted])));
                CHECK(ok, "%s: step %d layer %d kv head %d: %d rows, expected %d (evict pos %d, evicted %d)", tag,
                      s, l, j, got.n, want.n, predicted, victim >= 0 ? pre.pos[victim] : victim);
                if (t->pol == P_H2O && victim >= 0) {      /* the victim is outside the recent window */
                    int r = B - (int)floor(t->heavy_ratio * B);
                    CHECK(victim < pre.n - r, "%s: evicted row %d of %d is in the recent %d", tag, victim, pre.n, r);
                }
                int cap = evicts ? B : B + s + 1;   /* append: the budget plus the decoded tokens */
                CHECK(t->pol == P_FULL || got.n <= cap, "%s: step %d over budget: %d > %d", tag, s, got.n, cap);
                attended[j] = t->pol == P_H2O ? pre : got;   /* H2O attends, then evicts */
                sets[j] = &attended[j];
                k->set = got;
            }
            double e = out_err(sc, l, q, out, sets);
            CHECK(e < 1e-5, "%s: step %d layer %d attention rel err %.3g", tag, s, l, e);
        }
        char when[32];
        snprintf(when, sizeof when, "step %d", s);
        check_accounting(sc, t, st, n + s + 1, when);
    }
    free(kv); free(out); free(attended); free(sets);
    for (int i = 0; i < L * Hkv; i++) free(tr[i].score);
    free(tr);
    m->free(st);
}

/* ------------------------------------------------------------ window_scores, topk */

static void test_window_scores(const scen *sc) {
    int H = sc->H, Hkv = sc->Hkv, n = sc->n;
    kv_needs nd = {.window = sc->win};
    kv_prefill p = layer_prefill(sc, sc->L - 1, &nd);
    const int ws[] = {5, 32}, ks[] = {1, 3, 7};
    double *ref = malloc((size_t)n * sizeof *ref);
    float *score = malloc((size_t)Hkv * n * sizeof *score);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int pool = 0; pool < 2; pool++)
                for (int agg = 0; agg < 2; agg++) {
                    int w = ws[a], m = n - w;
                    test_poison(score, (size_t)Hkv * n);
                    int got = window_scores(&p, H, Hkv, w, ks[b], pool, agg, score);
                    CHECK(got == m, "window_scores returned %d, expected %d", got, m);
                    double worst = 0;
                    for (int j = 0; j < Hkv; j++) {
                        ref_window_scores(sc, sc->L - 1, j, w, ks[b], pool, agg, ref);
                        double e = rel_l2(score + (size_t)j * m, ref, (size_t)m);
                        worst = e > worst ? e : worst;
                    }
                    CHECK(worst < 1e-6, "window_scores w=%d kernel=%d pool=%d agg=%d: rel err %.3g", w, ks[b],
                          pool, agg, worst);
                }
    CHECK(window_scores(&p, H, Hkv, n, 7, POOL_MAX, 0, score) == 0, "window_scores with w = n");
    free(ref);
    free(score);
}

static void test_topk(void) {
    float s[61];
    double sd[61];
    int32_t got[70], want[70];
    for (int rep = 0; rep < 20; rep++) {
        int n = test_int(1, 61), k = test_int(0, n + 3);
        for (int i = 0; i < n; i++) s[i] = (float)test_int(0, 9);   /* many ties */
        if (rep % 4 == 0) s[test_int(0, n - 1)] = NAN;
        for (int i = 0; i < n; i++) sd[i] = isnan(s[i]) ? -INFINITY : s[i];
        int a = topk_sorted(s, n, k, got), b = ref_topk(sd, n, k, want);
        int same = a == b;
        for (int i = 0; same && i < a; i++) same = got[i] == want[i];
        CHECK(same, "topk_sorted n=%d k=%d returned %d, expected %d", n, k, a, b);
    }
}

/* ------------------------------------------------------------ bad input */

static void expect_reject(const scen *sc, const kv_method *m, double frac, int tokens, const char *params,
                          const char *what) {
    char err[256] = "";
    kv_setup su = make_setup(sc, frac, tokens, params);
    su.budget_frac = frac;
    kv_state *st = m->init(&su, err, sizeof err);
    CHECK(st == NULL, "%s accepted %s", m->name, what);
    CHECK(err[0] && !strchr(err, '\n') && strncmp(err, m->name, strlen(m->name)) == 0,
          "%s: %s: error message '%s'", m->name, what, err);
    if (st) m->free(st);
}

static void test_rejects(const scen *sc) {
    const kv_method *all[] = {&kv_fullkv, &kv_streamingllm, &kv_h2o, &kv_snapkv};
    for (int i = 0; i < 4; i++) {
        expect_reject(sc, all[i], 0, 0, NULL, "budget fraction 0");
        expect_reject(sc, all[i], 1.5, 0, NULL, "budget fraction 1.5");
        expect_reject(sc, all[i], NAN, 0, NULL, "budget fraction NaN");
        expect_reject(sc, all[i], 0, -3, NULL, "budget -3 tokens");
        expect_reject(sc, all[i], 0.5, 0, "bogus=1", "an unknown parameter");
        expect_reject(sc, all[i], 0.5, 0, "nokeyvalue", "a parameter without '='");
    }
    expect_reject(sc, &kv_streamingllm, 0.5, 0, "sinks=-1", "sinks=-1");
    expect_reject(sc, &kv_streamingllm, 0.5, 0, "window=abc", "window=abc");
    expect_reject(sc, &kv_streamingllm, 0, 10, "sinks=4,window=7", "sinks+window over the budget");
    expect_reject(sc, &kv_h2o, 0.5, 0, "heavy_ratio=1.5", "heavy_ratio=1.5");
    expect_reject(sc, &kv_h2o, 0.5, 0, "one_shot=2", "one_shot=2");
    expect_reject(sc, &kv_snapkv, 0.5, 0, "pool=2", "pool=2");
    expect_reject(sc, &kv_snapkv, 0.5, 0, "kernel=0", "kernel=0");
    expect_reject(sc, &kv_snapkv, 0.5, 0, "window=0", "window=0");
    expect_reject(sc, &kv_snapkv, 0.5, 0, "agg=3", "agg=3");
    /* heads not divisible by kv heads */
    scen bad = *sc;
    bad.Hkv = 3;
    bad.H = 4;
    expect_reject(&bad, &kv_fullkv, 0.5, 0, NULL, "H=4 with Hkv=3");
    expect_reject(&bad, &kv_snapkv, 0.5, 0, NULL, "H=4 with Hkv=3");
}

int main(void) {
    test_seed();
    test_topk();
    /* L, H, Hkv, d, n; the last one spans two decode blocks of the CPU kernel (2048) */
    const int shapes[][5] = {{3, 4, 2, 16, 97}, {2, 9, 3, 8, 131}, {1, 4, 2, 16, 2101}};
    for (int c = 0; c < 3; c++) {
        scen sc = make_scen(shapes[c][0], shapes[c][1], shapes[c][2], shapes[c][3], shapes[c][4]);
        test_window_scores(&sc);
        test_rejects(&sc);
        const trial trials[] = {
            {P_FULL, &kv_fullkv, NULL, 0.3, 0, 0, 0, 0, 0, 0, 0, 0},
            {P_STREAM, &kv_streamingllm, NULL, 0.3, 0, 4, 0, 0, 0, 0, 0, 0},
            {P_STREAM, &kv_streamingllm, "sinks=4,window=10", 0, 20, 4, 10, 0, 0, 0, 0, 0},
            {P_STREAM, &kv_streamingllm, "sinks=0", 0, 7, 0, 0, 0, 0, 0, 0, 0},
            {P_STREAM, &kv_streamingllm, NULL, 0, 3, 4, 0, 0, 0, 0, 0, 0},   /* sinks clamp to B-1 */
            {P_STREAM, &kv_streamingllm, NULL, 1.0, 0, 4, 0, 0, 0, 0, 0, 0},
            {P_H2O, &kv_h2o, NULL, 0.3, 0, 0, 0, 0.5, 0, 0, 0, 0},
            {P_H2O, &kv_h2o, "heavy_ratio=0.7", 0, 25, 0, 0, 0.7, 0, 0, 0, 0},
            {P_H2O, &kv_h2o, NULL, 1.0, 0, 0, 0, 0.5, 0, 0, 0, 0},
            {P_H2O_ONESHOT, &kv_h2o, "one_shot=1", 0.3, 0, 0, 8, 0, 0, 0, 0, 0},
            {P_H2O_ONESHOT, &kv_h2o, "one_shot=1,window=8", 0, 10, 0, 8, 0, 0, 0, 0, 0},
            {P_SNAP, &kv_snapkv, NULL, 0, 48, 0, 0, 0, 32, 7, POOL_MAX, 0},
            {P_SNAP, &kv_snapkv, "window=8", 0.3, 0, 0, 0, 0, 8, 7, POOL_MAX, 0},
            {P_SNAP, &kv_snapkv, "window=8,kernel=3,pool=1", 0.3, 0, 0, 0, 0, 8, 3, POOL_AVG, 0},
            {P_SNAP, &kv_snapkv, "window=16,kernel=1,agg=1", 0, 30, 0, 0, 0, 16, 1, POOL_MAX, 1},
            {P_SNAP, &kv_snapkv, "window=8,pool=1", 1.0, 0, 0, 0, 0, 8, 7, POOL_AVG, 0},
            {P_SNAP, &kv_snapkv, NULL, 0, 20, 0, 0, 0, 32, 7, POOL_MAX, 0},   /* window clamps to B */
        };
        for (g_rule = KV_DECODE_APPEND; g_rule <= KV_DECODE_HOLD; g_rule++)
            for (size_t i = 0; i < sizeof trials / sizeof trials[0]; i++) run_trial(&sc, &trials[i]);
        free_scen(&sc);
    }
    return check_done("test_methods_a");
}

/* The methods' K/V on the device (kernels/cuda_kvmirror.cu, through methods/kvstore.c).
 *
 * Every build: the kv_store "valid" marks that tell a device copy which rows moved (push,
 * keep, remove), kvs_decode on the CPU backend bit for bit equal to the CPU decode, and
 * FullKV, H2O, SnapKV and SentenceKV through prefill and 20 decode steps with the CPU
 * backend, each step's output against a float64 attention over exactly the rows attended.
 * CUDA builds with a device (or the emulation, tests/gpu/emu.sh), in addition:
 *   - the device copy alone on fresh random rows: a mirror through random pushes,
 *     removals and compactions, a working set over changing selections, rows put from
 *     pinned memory on the copy stream, with bias and probs, against the CPU decode, and
 *     the rows each call uploaded (only the rows that moved, or the newly listed ones);
 *   - each method again with the CUDA backend selected: outputs step by step against the
 *     CPU run and the float64 reference, the same rows kept (attended, for SentenceKV),
 *     the tracked allocator's current bytes equal to the stores' device bytes at every
 *     step and at least their rows (SentenceKV: only the working set, not the slow tier),
 *     and back to the value before init after the method's free. With the CPU backend
 *     selected no device memory is used.
 * Every part runs with f32 rows and with 16-bit rows (f16, bf16: the setup's kv_type, the
 * device copy holding the rows in that type, half the bytes, widened to f32 by the decode
 * kernels), against the float64 attention over the rows as stored (rounded to the type). */
#include "../kernels/core.h"
#include "../kernels/kvtype.h"
#include "../methods/cacheset.h"
#include "../methods/kvstore.h"
#include "../methods/method.h"
#include "../methods/sentencekv.h"
#include "cuda_check.h"
#ifdef KB_CUDA
#include "../kernels/cuda_backend.h"
#include "../kernels/cuda_kvmirror.h"
#endif

#define TOL 1e-5

extern const kv_method kv_fullkv, kv_h2o, kv_snapkv, kv_sentencekv;

enum { L = 2, H = 4, HKV = 2, G = H / HKV, D = 32, STEPS = 20, WIN = 16 };

/* float64 attention of g heads over rows rows[0..n) of K, V (rows of d), optional bias;
 * out [g][d]; probs [g][n] when not NULL. */
static void ref_attend(int g, int d, const float *q, const float *K, const float *V, const int32_t *rows, int n,
                       const float *bias, double *out, double *probs) {
    double *p = malloc((n ? n : 1) * sizeof *p);
    for (int h = 0; h < g; h++) {
        double mx = -INFINITY, z = 0;
        for (int i = 0; i < n; i++) {
            const float *k = K + (size_t)(rows ? rows[i] : i) * d;
            double s = 0;
            for (int c = 0; c < d; c++) s += (double)q[(size_t)h * d + c] * k[c];
            p[i] = s / sqrt((double)d) + (bias ? bias[i] : 0);
            if (p[i] > mx) mx = p[i];
        }
        for (int i = 0; i < n; i++) z += (p[i] = exp(p[i] - mx));
        for (int c = 0; c < d; c++) out[(size_t)h * d + c] = 0;
        for (int i = 0; i < n; i++) {
            const float *v = V + (size_t)(rows ? rows[i] : i) * d;
            if (probs) probs[(size_t)h * n + i] = p[i] / z;
            for (int c = 0; c < d; c++) out[(size_t)h * d + c] += p[i] / z * v[c];
        }
    }
    free(p);
}

/* ---------------------------------------------------------------- the store's marks */

static void test_marks(void) {
    kv_store s;
    CHECK(kvs_init(&s, 8, 2, KB_F32) == 0, "kvs_init failed");
    float k[8], v[8];
    for (int i = 0; i < 12; i++) {
        test_fill(k, 8, 1.0f);
        test_fill(v, 8, 1.0f);
        kvs_push(&s, k, v, 100 + i);
    }
    CHECK(s.dev == NULL && s.dev_valid == 0, "a fresh store has no device copy (valid %d)", s.dev_valid);
    s.dev_valid = s.n;   /* as after a sync */
    kvs_push(&s, k, v, 112);
    CHECK(s.dev_valid == 12, "a push must leave the rows before it valid (valid %d)", s.dev_valid);
    s.dev_valid = s.n;
    int i = test_int(0, s.n - 1);
    kvs_remove(&s, i);
    CHECK(s.dev_valid == i, "remove(%d) must mark from row %d (valid %d)", i, i, s.dev_valid);
    s.dev_valid = s.n;
    int32_t keep[16], nk = 0, first = -1;
    for (int r = 0; r < s.n; r++)
        if (r < 3 || test_unif() < 0.5) keep[nk++] = r;
        else if (first < 0) first = nk;
    if (first < 0) first = nk;   /* an identity prefix: the rows past nk are gone */
    kvs_keep(&s, keep, nk);
    CHECK(s.dev_valid == first, "keep must mark from the first row that moved (%d), valid %d", first, s.dev_valid);
    CHECK(kvs_dev_bytes(&s) == 0 && kvs_dev_rows(&s) == 0, "no device copy without an attention on the device");
    kvs_free(&s);

    /* kvs_decode on the CPU backend: the CPU decode over the rows, bit for bit */
    kb_select("cpu", NULL);
    int n = test_int(5, 60), d = 24, g = 3;
    kvs_init(&s, d, 1, KB_F32);
    float *q = fmalloc((size_t)g * d), *o1 = fmalloc((size_t)g * d), *o2 = fmalloc((size_t)g * d);
    float *p1 = fmalloc((size_t)g * n), *p2 = fmalloc((size_t)g * n), *kk = fmalloc(d), *vv = fmalloc(d);
    for (int r = 0; r < n; r++) {
        test_fill(kk, d, 1.0f);
        test_fill(vv, d, 1.0f);
        kvs_push(&s, kk, vv, r);
    }
    test_fill(q, (size_t)g * d, 1.5f);
    test_poison(o1, (size_t)g * d);
    test_poison(p1, (size_t)g * n);
    kb_decode_args a = {.g = g, .d = d, .n = n, .q = q, .out = o1, .probs = p1};
    kvs_decode(&s, &a);
    kb_decode_args b = {.g = g, .d = d, .n = n, .q = q, .K = s.K, .V = s.V, .out = o2, .probs = p2};
    kb_cpu()->decode(&b);
    CHECK(memcmp(o1, o2, sizeof(float) * g * d) == 0 && memcmp(p1, p2, sizeof(float) * g * n) == 0,
          "kvs_decode on the CPU backend differs from the CPU decode");
    CHECK(kvs_dev_bytes(&s) == 0, "the CPU backend made a device copy");
    kvs_free(&s);
    free(q); free(o1); free(o2); free(p1); free(p2); free(kk); free(vv);
}

/* ---------------------------------------------------------------- the methods */

typedef struct {
    int n;
    size_t stride;    /* floats between kv heads: (n + STEPS) * D */
    float *K, *V;     /* [L][HKV][n + STEPS][D] */
    float *Qd;        /* [STEPS][L][H][D] */
    float *mass;      /* [L][H][n] prefill column mass */
    float *wp;        /* [L][H][WIN][n] probability rows of the last WIN prompt queries */
    float *surp;
    uint8_t *sent;
    uint8_t dsent[STEPS];
} scen;

static const float *krow(const scen *sc, int l, int j, int t) {
    return sc->K + ((size_t)l * HKV + j) * sc->stride + (size_t)t * D;
}
static const float *vrow(const scen *sc, int l, int j, int t) {
    return sc->V + ((size_t)l * HKV + j) * sc->stride + (size_t)t * D;
}

/* Random K/V/queries; the prefill statistics from the CPU prefill over random queries. */
static scen make_scen(int n) {
    scen sc = {.n = n, .stride = (size_t)(n + STEPS) * D};
    size_t kv = (size_t)L * HKV * sc.stride;
    sc.K = fmalloc(kv);
    sc.V = fmalloc(kv);
    sc.Qd = fmalloc((size_t)STEPS * L * H * D);
    sc.mass = calloc((size_t)L * H * n, sizeof(float));
    sc.wp = fmalloc((size_t)L * H * WIN * n);
    sc.surp = fmalloc(n);
    sc.sent = malloc(n);
    test_fill(sc.K, kv, 1.0f);
    test_fill(sc.V, kv, 1.0f);
    test_fill(sc.Qd, (size_t)STEPS * L * H * D, 1.5f);
    for (int t = 0; t < n; t++) {
        sc.surp[t] = t ? (float)(3 * test_unif()) : 0;
        sc.sent[t] = test_unif() < 0.15;
    }
    for (int s = 0; s < STEPS; s++) sc.dsent[s] = test_unif() < 0.2;
    float *Q = fmalloc((size_t)n * H * D), *out = fmalloc((size_t)n * H * D);
    for (int l = 0; l < L; l++) {
        test_fill(Q, (size_t)n * H * D, 1.0f);
        kb_prefill_args a = {
            .H = H, .Hkv = HKV, .d = D, .t0 = 0, .m = n, .Q = Q, .K = krow(&sc, l, 0, 0), .V = vrow(&sc, l, 0, 0),
            .kv_stride = sc.stride, .out = out, .col_mass = sc.mass + (size_t)l * H * n, .mass_ld = (size_t)n,
            .win_probs = sc.wp + (size_t)l * H * WIN * n, .win = WIN, .win_start = n - WIN, .win_ld = (size_t)n,
        };
        kb_cpu()->prefill(&a);
    }
    free(Q);
    free(out);
    return sc;
}

static void free_scen(scen *sc) {
    free(sc->K); free(sc->V); free(sc->Qd); free(sc->mass); free(sc->wp); free(sc->surp); free(sc->sent);
}

typedef struct {
    const kv_method *m;
    const char *params;
    double frac;
    int sentence;     /* SentenceKV: the slow-tier store and its working set */
} meth;

/* One run: each step's output and the rows each (layer, kv head) kept after it. */
typedef struct {
    int maxrows;
    float *out;       /* [STEPS][L][H][D] */
    int32_t *kept;    /* [STEPS][L][HKV][maxrows] */
    int *nkept;       /* [STEPS][L][HKV] */
} record;

static record new_record(int n) {
    record r = {.maxrows = n + STEPS + 1};
    r.out = fmalloc((size_t)STEPS * L * H * D);
    r.kept = malloc((size_t)STEPS * L * HKV * r.maxrows * sizeof *r.kept);
    r.nkept = calloc((size_t)STEPS * L * HKV, sizeof *r.nkept);
    return r;
}
static void free_record(record *r) { free(r->out); free(r->kept); free(r->nkept); }

/* The store of (layer, kv head) and the rows it attended or kept, as positions. */
static const kv_store *store_of(const meth *mc, const kv_state *st, int l, int j) {
    return mc->sentence ? sentencekv_store(st, l, j) : kv_a_store(st, l, j);
}
static int rows_of(const meth *mc, const kv_state *st, int l, int j, int32_t *pos) {
    if (mc->sentence) return sentencekv_selection(st, l, j, pos);
    const kv_store *s = kv_a_store(st, l, j);
    memcpy(pos, s->pos, (size_t)s->n * sizeof *pos);
    return s->n;
}

/* Device bytes against the stores after a step (on_dev: the CUDA backend is selected). */
static void check_memory(const meth *mc, const kv_state *st, int budget, size_t cur0, int on_dev, int step, int kt) {
    size_t devb = 0, rows_b = 0, cur = dev_current();
    for (int l = 0; l < L; l++)
        for (int j = 0; j < HKV; j++) {
            const kv_store *s = store_of(mc, st, l, j);
            int32_t pos[1024];
            int attended = mc->sentence ? sentencekv_selection(st, l, j, pos) : s->n;
            int dr = kvs_dev_rows(s);
            devb += kvs_dev_bytes(s);
            rows_b += (size_t)attended * 2 * D * kb_kvtype_bytes(kt);
            if (!on_dev) continue;
            if (mc->sentence) {
                /* a working set: the rows attended (at most the budget and the decoded
                 * tokens appended after it) with geometric headroom, never the slow tier */
                CHECK(dr >= attended && dr <= 2 * (budget + STEPS) && dr < s->n,
                      "%s step %d layer %d head %d: %d device rows for %d attended, budget %d, %d on the host",
                      mc->m->name, step, l, j, dr, attended, budget, s->n);
            } else {
                CHECK(dr >= s->n && dr <= s->cap, "%s step %d layer %d head %d: %d device rows, %d held (capacity %d)",
                      mc->m->name, step, l, j, dr, s->n, s->cap);
            }
        }
    if (on_dev) {
        CHECK(cur - cur0 == devb, "%s step %d: allocator grew by %zu bytes, the stores hold %zu", mc->m->name, step,
              cur - cur0, devb);
        CHECK(devb >= rows_b, "%s step %d: %zu device bytes for %zu bytes of attended rows", mc->m->name, step, devb,
              rows_b);
    } else {
        CHECK(devb == 0 && cur == cur0, "%s step %d: the CPU backend used device memory (%zu, %zu)", mc->m->name,
              step, devb, cur - cur0);
    }
}

static void run_method(const meth *mc, const scen *sc, int on_dev, int kt, record *rec) {
    const kv_method *m = mc->m;
    int n = sc->n;
    kv_setup su = {.n_layers = L, .n_heads = H, .n_kv_heads = HKV, .head_dim = D, .n_prompt = n,
                   .max_decode = STEPS, .budget_frac = mc->frac, .params = mc->params, .kv_type = kt};
    int budget = kv_budget(&su);
    char err[256] = "";
    size_t cur0 = dev_current();
    kv_state *st = m->init(&su, err, sizeof err);
    CHECK(st != NULL, "%s init: %s", m->name, err);
    if (!st) return;
    kv_needs nd = {0};
    kv_method_find(m->name)->needs(&su, &nd);   /* resolved: a bare table may leave needs out */
    CHECK(nd.window <= WIN, "%s asks for %d window rows", m->name, nd.window);
    for (int l = 0; l < L; l++) {
        kv_prefill p = {.layer = l, .n = n, .K = krow(sc, l, 0, 0), .V = vrow(sc, l, 0, 0), .kv_stride = sc->stride,
                        .col_mass = sc->mass + (size_t)l * H * n, .win_probs = sc->wp + (size_t)l * H * WIN * n,
                        .win = WIN, .surprisal = sc->surp, .sent_end = sc->sent};
        CHECK(m->ingest(st, &p, err, sizeof err) == 0, "%s ingest layer %d: %s", m->name, l, err);
    }
    float kv[2 * HKV * D];
    double ref[H * D], worst = 0;
    float *Kc = fmalloc((size_t)rec->maxrows * D), *Vc = fmalloc((size_t)rec->maxrows * D);
    for (int s = 0; s < STEPS; s++) {
        for (int l = 0; l < L; l++) {
            int t = n + s;
            for (int j = 0; j < HKV; j++) {
                memcpy(kv + (size_t)j * D, krow(sc, l, j, t), D * sizeof(float));
                memcpy(kv + (size_t)(HKV + j) * D, vrow(sc, l, j, t), D * sizeof(float));
            }
            kv_token tok = {.pos = t, .surprisal = 1.0f, .sent_end = sc->dsent[s]};
            m->append(st, l, kv, kv + (size_t)HKV * D, &tok);
            int32_t *att[HKV];
            int natt[HKV];
            for (int j = 0; j < HKV && !mc->sentence; j++) {   /* the cache attended: after append */
                att[j] = malloc((size_t)rec->maxrows * sizeof(int32_t));
                natt[j] = rows_of(mc, st, l, j, att[j]);
            }
            const float *q = sc->Qd + ((size_t)s * L + l) * H * D;
            float *out = rec->out + ((size_t)s * L + l) * H * D;
            test_poison(out, (size_t)H * D);
            m->attend(st, l, q, out);
            for (int j = 0; j < HKV; j++) {
                if (mc->sentence) {
                    att[j] = malloc((size_t)rec->maxrows * sizeof(int32_t));
                    natt[j] = rows_of(mc, st, l, j, att[j]);
                }
                for (int i = 0; i < natt[j]; i++) {   /* the attended rows by position, as stored */
                    for (int c = 0; c < D; c++) {
                        Kc[(size_t)i * D + c] = kb_kv_round(kt, krow(sc, l, j, att[j][i])[c]);
                        Vc[(size_t)i * D + c] = kb_kv_round(kt, vrow(sc, l, j, att[j][i])[c]);
                    }
                }
                ref_attend(G, D, q + (size_t)j * G * D, Kc, Vc, NULL, natt[j], NULL, ref + (size_t)j * G * D, NULL);
                free(att[j]);
                size_t at = ((size_t)s * L + l) * HKV + j;
                rec->nkept[at] = rows_of(mc, st, l, j, rec->kept + at * rec->maxrows);
            }
            double e = rel_l2(out, ref, (size_t)H * D);
            if (e > worst) worst = e;
            CHECK(e < TOL, "%s (%s, %s rows) step %d layer %d vs float64 attention over the rows attended: rel err %.3g",
                  m->name, on_dev ? "cuda" : "cpu", kb_kvtype_name(kt), s, l, e);
        }
        check_memory(mc, st, budget, cur0, on_dev, s, kt);
    }
    printf("%-10s %-4s %-4s prompt %d budget %d: worst rel err vs float64 %.3g\n", m->name, on_dev ? "cuda" : "cpu",
           kb_kvtype_name(kt), n, budget, worst);
    m->free(st);
    size_t cur = dev_current();
    CHECK(cur == cur0, "%s: %zu device bytes before init, %zu after free", m->name, cur0, cur);
    free(Kc);
    free(Vc);
}

static const meth methods[] = {
    {&kv_fullkv, NULL, 1.0, 0},
    {&kv_h2o, NULL, 0.25, 0},
    {&kv_snapkv, "window=8", 0.25, 0},
    {&kv_sentencekv, "sinks=4,recent=6,window=8", 0.1, 1},
};

/* Each method on the CPU backend and, when usable, on the CUDA backend: same rows, same outputs. */
static void test_methods(int cuda, int kt) {
    for (size_t k = 0; k < sizeof methods / sizeof *methods; k++) {
        const meth *mc = &methods[k];
        scen sc = make_scen(test_int(150, 230));
        record rc = new_record(sc.n), rg = new_record(sc.n);
        kb_select("cpu", NULL);
        run_method(mc, &sc, 0, kt, &rc);
        if (cuda) {
            kb_select("cuda", NULL);
            run_method(mc, &sc, 1, kt, &rg);
            kb_select("cpu", NULL);
            int bad_rows = 0;
            double worst = 0;
            for (int s = 0; s < STEPS; s++)
                for (int l = 0; l < L; l++) {
                    size_t o = ((size_t)s * L + l) * H * D;
                    double e = rel_f(rg.out + o, rc.out + o, (size_t)H * D);
                    if (e > worst) worst = e;
                    CHECK(e < TOL, "%s step %d layer %d: cuda vs cpu output rel err %.3g", mc->m->name, s, l, e);
                    for (int j = 0; j < HKV; j++) {
                        size_t at = ((size_t)s * L + l) * HKV + j;
                        int same = rg.nkept[at] == rc.nkept[at] &&
                                   memcmp(rg.kept + at * rg.maxrows, rc.kept + at * rc.maxrows,
                                          (size_t)rc.nkept[at] * sizeof(int32_t)) == 0;
                        if (!same && !bad_rows++)
                            CHECK(same, "%s step %d layer %d head %d: cuda kept %d rows, cpu %d, or other ones",
                                  mc->m->name, s, l, j, rg.nkept[at], rc.nkept[at]);
                    }
                }
            CHECK(bad_rows == 0, "%s: %d (step, layer, head) with different rows", mc->m->name, bad_rows);
            printf("%-10s cuda vs cpu (%s rows): worst rel err %.3g over %d steps, kept rows identical: %s\n",
                   mc->m->name, kb_kvtype_name(kt), worst, STEPS, bad_rows ? "no" : "yes");
        }
        free_record(&rc);
        free_record(&rg);
        free_scen(&sc);
    }
}

/* ---------------------------------------------------------------- the device copy alone */

#ifdef KB_CUDA

/* out (and probs) of a device call against the float64 attention over host rows. */
static void check_against(const char *what, int g, int d, const float *q, const float *K, const float *V,
                          const int32_t *rows, int n, const float *bias, const float *out, const float *probs) {
    double *ro = malloc(sizeof(double) * g * d), *rp = malloc(sizeof(double) * (size_t)g * (n ? n : 1));
    ref_attend(g, d, q, K, V, rows, n, bias, ro, rp);
    double e = rel_l2(out, ro, (size_t)g * d);
    CHECK(e < TOL, "%s: n=%d out vs float64 rel err %.3g", what, n, e);
    if (probs) {
        double pe = rel_l2(probs, rp, (size_t)g * n);
        CHECK(pe < TOL, "%s: n=%d probs vs float64 rel err %.3g", what, n, pe);
    }
    free(ro);
    free(rp);
}

/* A store's rows [0, n) as floats (16-bit rows widened exactly): what attention reads. */
static float *rows_f32(const kv_store *s, const void *rows) {
    float *f = fmalloc((size_t)(s->n ? s->n : 1) * D);
    kb_kv_get(s->type, f, rows, s->n * D);
    return f;
}

static void push_random(kv_store *s, int k) {
    float kk[D], vv[D];
    for (int i = 0; i < k; i++) {
        test_fill(kk, D, 1.0f);
        test_fill(vv, D, 1.0f);
        kvs_push(s, kk, vv, s->n);
    }
}

/* A mirror through random pushes, removals and compactions: each decode right, and only
 * the rows from the first that moved uploaded (all of them after the copy grew). */
static void test_mirror(int kt) {
    kv_store s;
    kvs_init(&s, D, 1, kt);
    push_random(&s, test_int(20, 80));
    float q[G * D], out[G * D], probs[G * 256], bias[256];
    long up = 0;
    int moved = 0;   /* the first row changed since the last decode, by the test's own count */
    for (int round = 0; round < 14; round++) {
        int op = round == 0 ? 0 : test_int(0, 2);
        if (op == 0) {
            moved = moved < s.n ? moved : s.n;
            push_random(&s, test_int(1, 5));
        } else if (op == 1 && s.n > 2) {
            int i = test_int(0, s.n - 1);
            moved = moved < i ? moved : i;
            kvs_remove(&s, i);
        } else if (s.n > 2) {
            int32_t keep[256];
            int nk = 0, first = -1;
            for (int r = 0; r < s.n; r++)
                if (test_unif() < 0.8) keep[nk++] = r;
                else if (first < 0) first = nk;
            if (first < 0) first = nk;
            moved = moved < first ? moved : first;
            kvs_keep(&s, keep, nk);
        }
        int use_bias = test_unif() < 0.5, use_probs = test_unif() < 0.5, rows_before = kvs_dev_rows(&s);
        test_fill(q, G * D, 1.5f);
        for (int i = 0; i < s.n; i++) bias[i] = test_unif() < 0.5 ? 0.0f : logf((float)test_int(1, 30));
        test_poison(out, G * D);
        test_poison(probs, (size_t)G * s.n);
        kb_decode_args a = {.g = G, .d = D, .n = s.n, .q = q, .bias = use_bias ? bias : NULL, .out = out,
                            .probs = use_probs ? probs : NULL};
        kvs_decode(&s, &a);
        CHECK(s.dev != NULL && !s.dev_off, "round %d: no device copy", round);
        float *Kf = rows_f32(&s, s.K), *Vf = rows_f32(&s, s.V);
        check_against(kb_kvtype_name(kt), G, D, q, Kf, Vf, NULL, s.n, a.bias, out, a.probs);
        free(Kf);
        free(Vf);
        CHECK(kb_kvdev_type(s.dev) == kt, "mirror of %s rows holds type %d", kb_kvtype_name(kt), kb_kvdev_type(s.dev));
        long now = kb_kvdev_uploaded(s.dev), want = rows_before < s.n ? s.n : s.n - moved;
        CHECK(now - up == want, "mirror round %d (op %d): uploaded %ld rows, expected %ld (%d rows, first moved %d)",
              round, op, now - up, want, s.n, moved);
        up = now;
        moved = s.n;
    }
    kvs_free(&s);
}

/* A working set over changing selections of a growing store, with a removal on the way:
 * right each time, resident rows never uploaded again. */
static void test_working_set(int kt) {
    kv_store s;
    kvs_init(&s, D, 1, kt);
    push_random(&s, test_int(60, 120));
    float q[G * D], out[G * D], probs[G * 64];
    int32_t sel[64], prev[64], nprev = 0, max_ns = 0;
    long up = 0;
    for (int round = 0; round < 12; round++) {
        int removed = 0;
        if (round == 7) {   /* rows from here on change under the same indices */
            kvs_remove(&s, test_int(0, s.n - 1));
            removed = 1;
        }
        push_random(&s, 1);
        int ns = 0, want_n = test_int(1, 40);   /* ascending: part of the last selection, some new rows, the newest row */
        for (int r = 0; r < s.n - 1 && ns < want_n - 1; r++) {
            int was = 0;
            for (int i = 0; i < nprev; i++) was |= prev[i] == r;
            if (test_unif() < (was ? 0.8 : 0.1)) sel[ns++] = r;
        }
        sel[ns++] = s.n - 1;
        int fresh = 0;
        for (int i = 0; i < ns; i++) {
            int was = 0;
            for (int k = 0; k < nprev; k++) was |= prev[k] == sel[i];
            fresh += !was;
        }
        int rows_before = kvs_dev_rows(&s), use_probs = round % 2;
        test_fill(q, G * D, 1.5f);
        test_poison(out, G * D);
        test_poison(probs, (size_t)G * ns);
        kb_decode_args a = {.g = G, .d = D, .n = ns, .q = q, .idx = sel, .out = out, .probs = use_probs ? probs : NULL};
        kvs_decode_subset(&s, &a);
        CHECK(s.dev != NULL && !s.dev_off, "working set round %d: no device copy", round);
        float *Kf = rows_f32(&s, s.K), *Vf = rows_f32(&s, s.V);
        check_against(kt == KB_F32 ? "working set" : kb_kvtype_name(kt), G, D, q, Kf, Vf, sel, ns, NULL, out, a.probs);
        free(Kf);
        free(Vf);
        long now = kb_kvdev_uploaded(s.dev);
        if (!removed && rows_before >= ns)
            CHECK(now - up <= fresh, "working set round %d: uploaded %ld rows, only %d were not listed last time",
                  round, now - up, fresh);
        if (ns > max_ns) max_ns = ns;
        CHECK(kvs_dev_rows(&s) >= ns && kvs_dev_rows(&s) <= 2 * max_ns,
              "working set round %d: %d device rows for at most %d listed (%d host rows)", round, kvs_dev_rows(&s),
              max_ns, s.n);
        up = now;
        memcpy(prev, sel, sizeof(int32_t) * ns);
        nprev = ns;
    }
    kvs_free(&s);
}

/* A mirror's first allocation takes the host store's capacity: rows a decode then appends
 * within it upload only themselves, not every row again. */
static void test_mirror_headroom(void) {
    int n = test_int(100, 900), extra = test_int(1, 64), cap = n + extra + test_int(0, 64), valid = 0;   /* <= 1024 rows: warm_backend */
    float *K = fmalloc((size_t)(n + extra) * D), *V = fmalloc((size_t)(n + extra) * D);
    test_fill(K, (size_t)(n + extra) * D, 1.0f);
    test_fill(V, (size_t)(n + extra) * D, 1.0f);
    kb_kvdev *m = kb_kvdev_new(D, "test rows");
    CHECK(m && kb_kvdev_sync(m, K, V, n, cap, &valid) == 0 && valid == n, "first sync of %d rows", n);
    if (!m) return;
    long up0 = kb_kvdev_uploaded(m);
    int rows0 = kb_kvdev_rows(m);
    CHECK(kb_kvdev_sync(m, K, V, n + extra, cap, &valid) == 0, "sync of %d more rows", extra);
    CHECK(rows0 == cap && kb_kvdev_rows(m) == rows0 && kb_kvdev_uploaded(m) - up0 == extra,
          "mirror of %d rows (host capacity %d) then %d more: %d device rows (then %d), %ld rows uploaded again "
          "(want %d)", n, cap, extra, rows0, kb_kvdev_rows(m), kb_kvdev_uploaded(m) - up0, extra);
    float q[G * D], out[G * D];
    test_fill(q, G * D, 1.5f);
    test_poison(out, G * D);
    kb_decode_args a = {.g = G, .d = D, .n = n + extra, .q = q, .out = out};
    CHECK(kb_kvdev_decode(m, &a) == 0, "decode over the grown mirror failed");
    check_against("mirror headroom", G, D, q, K, V, NULL, n + extra, NULL, out, NULL);
    kb_kvdev_free(m);
    free(K);
    free(V);
}

/* Several decodes in one call (kb_kvdev_decode_many, SeKV's batched heads) over three
 * copies: the same bits as one kb_kvdev_decode each, right against float64; probs refused. */
static void test_decode_many(void) {
    enum { NM = 3, NC = 7 };
    kb_kvdev *ms[NM];
    float *K[NM], *V[NM];
    int rows[NM], valid[NM];
    for (int c = 0; c < NM; c++) {
        rows[c] = test_int(20, 300);
        valid[c] = 0;
        K[c] = fmalloc((size_t)rows[c] * D);
        V[c] = fmalloc((size_t)rows[c] * D);
        test_fill(K[c], (size_t)rows[c] * D, 1.0f);
        test_fill(V[c], (size_t)rows[c] * D, 1.0f);
        ms[c] = kb_kvdev_new(D, "test rows");
        CHECK(ms[c] && kb_kvdev_sync(ms[c], K[c], V[c], rows[c], rows[c], &valid[c]) == 0, "sync of copy %d", c);
        if (!ms[c]) return;
    }
    kb_kvdev *who[NC];
    kb_decode_args as[NC];
    float *q[NC], *out[NC], *one[NC], *bias[NC];
    int32_t *idx[NC];
    for (int i = 0; i < NC; i++) {
        int c = test_int(0, NM - 1), g = test_unif() < 0.5 ? 1 : G, n = i == 3 ? 0 : test_int(1, 2 * rows[c]);
        who[i] = ms[c];
        q[i] = fmalloc((size_t)g * D), out[i] = fmalloc((size_t)g * D), one[i] = fmalloc((size_t)g * D);
        idx[i] = malloc(sizeof(int32_t) * (n ? n : 1));
        bias[i] = fmalloc(n ? n : 1);
        test_fill(q[i], (size_t)g * D, 1.5f);
        test_poison(out[i], (size_t)g * D);
        for (int k = 0; k < n; k++) {
            idx[i][k] = test_int(0, rows[c] - 1);
            bias[i][k] = test_unif() < 0.5 ? 0.0f : logf((float)test_int(1, 40));
        }
        int use_idx = n > rows[c] || test_unif() < 0.7;   /* no idx: rows 0 .. n-1 */
        as[i] = (kb_decode_args){.g = g, .d = D, .n = n, .q = q[i], .idx = use_idx ? idx[i] : NULL,
                                 .bias = test_unif() < 0.5 ? bias[i] : NULL, .out = out[i]};
    }
    kb_kvdev_batch *batch = kb_kvdev_batch_new();
    CHECK(batch && kb_kvdev_decode_many(batch, who, as, NC) == 0, "decode_many of %d calls failed", NC);
    for (int i = 0; i < NC; i++) {
        int c = 0;
        while (ms[c] != who[i]) c++;
        kb_decode_args a1 = as[i];
        a1.out = one[i];
        CHECK(kb_kvdev_decode(who[i], &a1) == 0, "single decode %d failed", i);
        CHECK(!memcmp(one[i], out[i], sizeof(float) * as[i].g * D), "decode_many call %d (g %d, n %d) differs from "
              "its single decode", i, as[i].g, as[i].n);
        if (as[i].n) check_against("decode_many", as[i].g, D, q[i], K[c], V[c], as[i].idx, as[i].n, as[i].bias, out[i], NULL);
    }
    float pr[G * 4];
    kb_decode_args bad = as[0];
    bad.probs = pr;
    fprintf(stderr, "(one refusal expected next)\n");
    CHECK(kb_kvdev_decode_many(batch, who, &bad, 1) == -1, "decode_many with probs was accepted");
    kb_kvdev_batch_free(batch);
    for (int i = 0; i < NC; i++) free(q[i]), free(out[i]), free(one[i]), free(idx[i]), free(bias[i]);
    for (int c = 0; c < NM; c++) kb_kvdev_free(ms[c]), free(K[c]), free(V[c]);
}

/* Rows put from pinned memory on the copy stream into reserved rows, then attended with
 * indices and biases; bad calls refused. */
static void test_put_async(void) {
    int rows = test_int(40, 160), n = test_int(10, 200);
    kb_kvdev *m = kb_kvdev_new(D, "test rows");
    CHECK(m && kb_kvdev_reserve(m, rows) == 0 && kb_kvdev_rows(m) == rows, "reserve of %d rows", rows);
    if (!m) return;
    float *K = kb_cuda_host_alloc(sizeof(float) * rows * D), *V = kb_cuda_host_alloc(sizeof(float) * rows * D);
    test_fill(K, (size_t)rows * D, 1.0f);
    test_fill(V, (size_t)rows * D, 1.0f);
    int cut = test_int(1, rows - 1);   /* two puts, as anchors then reconstructed rows */
    CHECK(kb_kvdev_put_async(m, 0, K, V, cut) == 0 &&
              kb_kvdev_put_async(m, cut, K + (size_t)cut * D, V + (size_t)cut * D, rows - cut) == 0,
          "put_async of %d rows failed", rows);
    int32_t *idx = malloc(sizeof(int32_t) * n);
    float *bias = fmalloc(n), q[G * D], out[G * D], *probs = fmalloc((size_t)G * n);
    for (int i = 0; i < n; i++) {
        idx[i] = test_int(0, rows - 1);
        bias[i] = test_unif() < 0.5 ? 0.0f : logf((float)test_int(1, 64));
    }
    test_fill(q, G * D, 1.5f);
    test_poison(out, G * D);
    test_poison(probs, (size_t)G * n);
    kb_decode_args a = {.g = G, .d = D, .n = n, .q = q, .idx = idx, .bias = bias, .out = out, .probs = probs};
    CHECK(kb_kvdev_decode(m, &a) == 0, "decode after put_async failed");
    check_against("put_async", G, D, q, K, V, idx, n, bias, out, probs);
    fprintf(stderr, "(two refusals expected next)\n");
    CHECK(kb_kvdev_put_async(m, rows - 1, K, V, 2) == -1, "a put past the reserved rows was accepted");
    idx[0] = rows;
    CHECK(kb_kvdev_decode(m, &a) == -1, "an index past the device rows was accepted");
    kb_kvdev_free(m);
    kb_cuda_host_free(K);
    kb_cuda_host_free(V);
    free(idx); free(bias); free(probs);
}


/* A copy of 16-bit rows takes 2 bytes an element on the device, exactly (the tracked
 * allocator's count and the copy's own). */
static void test_typed_bytes(int kt) {
    int rows = test_int(10, 300), eb = kb_kvtype_bytes(kt);
    size_t cur0 = dev_current();
    kb_kvdev *m = kb_kvdev_new_typed(D, kt, "test rows");
    CHECK(m && kb_kvdev_reserve(m, rows) == 0, "reserve of %d %s rows", rows, kb_kvtype_name(kt));
    if (!m) return;
    size_t want = (size_t)rows * 2 * D * eb;
    CHECK(kb_kvdev_bytes(m) == want && dev_current() - cur0 == want,
          "%d %s rows of %d: the copy holds %zu bytes, the allocator %zu, want %zu", rows, kb_kvtype_name(kt), D,
          kb_kvdev_bytes(m), dev_current() - cur0, want);
    void *K = NULL, *V = NULL;   /* rows for a kernel to write, in the copy's type: V's start rows * d * eb after K's */
    int r0 = test_int(0, rows - 1);
    CHECK(kb_kvdev_rows_dev(m, r0, rows - r0, &K, &V) == 0 && K && (char *)V - (char *)K == (ptrdiff_t)rows * D * eb,
          "device rows [%d, %d) of %d %s rows: K %p, V %p", r0, rows, rows, kb_kvtype_name(kt), K, V);
    kb_kvdev_free(m);
    CHECK(dev_current() == cur0, "freeing the copy left %zu bytes", dev_current() - cur0);
}

/* A copy from f32 host rows (kb_kvdev_new_from_f32, SeKV's): the rows hold values of kt
 * and the device stores kt, 2 bytes an element for 16-bit types, by the allocator's count;
 * decodes over the mirror and a working set against float64 over the host rows; the
 * asynchronous put, which cannot narrow, refuses 16-bit rows. */
static void test_from_f32(int kt) {
    int n = test_int(20, 300), eb = kb_kvtype_bytes(kt), valid = 0;
    float *K = fmalloc((size_t)n * D), *V = fmalloc((size_t)n * D), q[G * D], out[G * D];
    test_fill(K, (size_t)n * D, 1.0f);
    test_fill(V, (size_t)n * D, 1.0f);
    kb_kv_round_rows(kt, K, (size_t)n * D);   /* the values the type holds, as SeKV writes them */
    kb_kv_round_rows(kt, V, (size_t)n * D);
    size_t cur0 = dev_current();
    kb_kvdev *m = kb_kvdev_new_from_f32(D, kt, "test rows");
    CHECK(m && kb_kvdev_type(m) == kt, "a copy of %s rows from f32", kb_kvtype_name(kt));
    if (!m) return;
    CHECK(kb_kvdev_sync(m, K, V, n, n, &valid) == 0 && valid == n, "sync of %d f32 rows into %s", n, kb_kvtype_name(kt));
    size_t rows_b = (size_t)kb_kvdev_rows(m) * 2 * D * eb, grew = dev_current() - cur0;
    CHECK(kb_kvdev_rows(m) == n && grew == rows_b,
          "%d f32 rows into %s: the allocator grew by %zu bytes, the rows take %zu", n, kb_kvtype_name(kt), grew, rows_b);
    test_fill(q, G * D, 1.5f);
    test_poison(out, G * D);
    kb_decode_args a = {.g = G, .d = D, .n = n, .q = q, .out = out};
    CHECK(kb_kvdev_decode(m, &a) == 0, "decode over %s rows from f32", kb_kvtype_name(kt));
    char what[48];
    snprintf(what, sizeof what, "%s rows from f32, mirror", kb_kvtype_name(kt));
    check_against(what, G, D, q, K, V, NULL, n, NULL, out, NULL);
    int32_t sel[64];
    int ns = test_int(1, 64);
    for (int i = 0; i < ns; i++) sel[i] = test_int(0, n - 1);
    test_poison(out, G * D);
    kb_decode_args w = {.g = G, .d = D, .n = ns, .q = q, .idx = sel, .out = out};
    valid = 0;
    CHECK(kb_kvdev_decode_subset(m, K, V, n, &valid, &w) == 0, "working-set decode over %s rows from f32", kb_kvtype_name(kt));
    snprintf(what, sizeof what, "%s rows from f32, working set", kb_kvtype_name(kt));
    check_against(what, G, D, q, K, V, sel, ns, NULL, out, NULL);
    if (kt != KB_F32) {
        fprintf(stderr, "(one refusal expected next)\n");
        CHECK(kb_kvdev_put_async(m, 0, K, V, 1) == -1, "an asynchronous put of f32 rows into %s was accepted",
              kb_kvtype_name(kt));
    }
    kb_kvdev_free(m);
    CHECK(dev_current() == cur0, "freeing the copy left %zu bytes", dev_current() - cur0);
    free(K), free(V);
}

/* The backend's decode over host rows of type kt (gathered and copied in the type; the
 * backend keeps its buffers for the next call, so this runs before the byte counts), with
 * a head dim of 4k (the kernels' 4-wide loads) and one of not (element by element). */
static void test_host_rows(int kt, int d) {
    int n = test_int(1, 400), eb = kb_kvtype_bytes(kt);
    float *Kf = fmalloc((size_t)n * d), *Vf = fmalloc((size_t)n * d), *q = fmalloc((size_t)G * d);
    float *out = fmalloc((size_t)G * d), *probs = fmalloc((size_t)G * n);
    void *Ks = malloc((size_t)n * d * eb), *Vs = malloc((size_t)n * d * eb);
    int32_t *idx = malloc(sizeof(int32_t) * n);
    test_fill(Kf, (size_t)n * d, 1.0f);
    test_fill(Vf, (size_t)n * d, 1.0f);
    kb_kv_put(kt, Ks, Kf, n * d);
    kb_kv_put(kt, Vs, Vf, n * d);
    kb_kv_get(kt, Kf, Ks, n * d);   /* the reference reads the rows as stored */
    kb_kv_get(kt, Vf, Vs, n * d);
    for (int i = 0; i < n; i++) idx[i] = test_int(0, n - 1);
    test_fill(q, (size_t)G * d, 1.5f);
    test_poison(out, (size_t)G * d);
    test_poison(probs, (size_t)G * n);
    int use_idx = test_unif() < 0.5;
    kb_decode_args a = {G, d, n, q, Ks, Vs, use_idx ? idx : NULL, NULL, out, probs, kt};
    kb_get()->decode(&a);
    char what[48];
    snprintf(what, sizeof what, "host %s rows, d %d", kb_kvtype_name(kt), d);
    check_against(what, G, d, q, Kf, Vf, use_idx ? idx : NULL, n, NULL, out, probs);
    free(Kf); free(Vf); free(q); free(out); free(probs); free(Ks); free(Vs); free(idx);
}

#endif

int main(void) {
    test_seed();
    test_marks();
    const char *why = NULL;
    const kb_backend *cuda = kb_cuda(&why);
#ifdef KB_CUDA
    if (cuda) {
        printf("backend cuda\n");
        warm_backend(G, D);
        kb_select("cuda", NULL);
        for (int kt = KB_F32; kt <= KB_BF16; kt++) test_host_rows(kt, D), test_host_rows(kt, D - 2);
        size_t cur0 = dev_current();
        for (int kt = KB_F32; kt <= KB_BF16; kt++) {
            test_mirror(kt);
            test_working_set(kt);
            test_typed_bytes(kt);
            test_from_f32(kt);
        }
        test_mirror_headroom();
        test_decode_many();
        test_put_async();
        kb_select("cpu", NULL);
        CHECK(dev_current() == cur0, "the device copies left %zu bytes behind", dev_current() - cur0);
    }
#endif
    if (!cuda) printf("cuda backend not tested: %s\n", why ? why : "?");
    for (int kt = KB_F32; kt <= KB_BF16; kt++) test_methods(cuda != NULL, kt);
    return check_done("test_cuda_kv");
}

/* The attention core against float64 references written here: prefill (chunked and
 * whole, col_mass, win_probs), decode (idx, bias, probs, coarse entries), gather,
 * SVD (and the batched SVD where a backend has one), and the thread pool. Every backend
 * that is usable at runtime (CPU always, CUDA when built with it and a device is present)
 * runs the same loops. The largest error per backend and quantity is printed at the end
 * ("maxerr BACKEND OP VALUE BOUND" lines, tabulated by tests/gpu/check.sh). */
#include "../kernels/core.h"
#include "../kernels/cpu.h"
#include "../kernels/kvtype.h"
#include "check.h"
#include "ref_decode.h"
#ifdef KB_CUDA
#include "../kernels/cuda_backend.h"
#endif

#include <stdatomic.h>
#include <time.h>

#define TOL 1e-5

/* The largest error seen per (backend, quantity). */
enum { E_PF_OUT, E_PF_MASS, E_PF_WIN, E_DEC_OUT, E_DEC_PROBS, E_DEC_COARSE, E_GATHER, E_SVD_S, E_SVD_ORTH,
       E_SVD_RECON, E_NOPS };
static const char *err_name[E_NOPS] = {"prefill.out", "prefill.col_mass", "prefill.win_probs", "decode.out",
                                       "decode.probs", "decode.coarse", "gather.mismatch", "svd.values",
                                       "svd.orthogonality", "svd.reconstruction"};
static const double err_bound[E_NOPS] = {TOL, TOL, TOL, TOL, TOL, 2e-6, 0, 1e-5, 1e-4, 1e-4};
static double err_max[2][E_NOPS];
static int err_seen[2][E_NOPS];
static int cur_backend;   /* index into main's backends[] */

static void note_err(int op, double e) {
    if (e != e) e = INFINITY;
    if (!err_seen[cur_backend][op] || e > err_max[cur_backend][op]) err_max[cur_backend][op] = e;
    err_seen[cur_backend][op] = 1;
}

static float *fmalloc(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    return p;
}
static double *dcalloc(size_t n) {
    double *p = calloc(n ? n : 1, sizeof(double));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    return p;
}
static void to_double(double *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = src[i];
}

/* ------------------------------------------------------------ prefill */

typedef struct {
    int H, Hkv, d, T;
    size_t kv_stride;
    float *Q, *K, *V;          /* Q [T][H][d]; K, V: Hkv blocks of kv_stride floats */
} prompt;

static prompt make_prompt(int H, int Hkv, int d, int T) {
    prompt p = {H, Hkv, d, T, (size_t)(T + 3) * d, NULL, NULL, NULL};
    p.Q = fmalloc((size_t)T * H * d);
    p.K = fmalloc(p.kv_stride * Hkv);
    p.V = fmalloc(p.kv_stride * Hkv);
    test_fill(p.Q, (size_t)T * H * d, 1.0f);
    /* rows past T are NaN: reading beyond the causal range poisons the output */
    test_poison(p.K, p.kv_stride * Hkv);
    test_poison(p.V, p.kv_stride * Hkv);
    for (int j = 0; j < Hkv; j++) {
        test_fill(p.K + j * p.kv_stride, (size_t)T * d, 1.0f);
        test_fill(p.V + j * p.kv_stride, (size_t)T * d, 1.0f);
    }
    return p;
}
static void free_prompt(prompt *p) { free(p->Q); free(p->K); free(p->V); }

/* Float64 causal attention over the whole prompt: out [T][H][d], mass [H][T],
 * probs [H][T][T] (row q: probabilities over keys 0..q, zeros after). */
static void ref_prefill(const prompt *p, double *out, double *mass, double *probs) {
    int H = p->H, d = p->d, T = p->T, g = H / p->Hkv;
    double *s = dcalloc(T);
    for (int h = 0; h < H; h++) {
        const float *K = p->K + (size_t)(h / g) * p->kv_stride, *V = p->V + (size_t)(h / g) * p->kv_stride;
        for (int q = 0; q < T; q++) {
            const float *qv = p->Q + ((size_t)q * H + h) * d;
            double mx = -INFINITY, z = 0;
            for (int t = 0; t <= q; t++) {
                double dot = 0;
                for (int c = 0; c < d; c++) dot += (double)qv[c] * K[(size_t)t * d + c];
                s[t] = dot / sqrt((double)d);
                if (s[t] > mx) mx = s[t];
            }
            for (int t = 0; t <= q; t++) z += (s[t] = exp(s[t] - mx));
            double *o = out + ((size_t)q * H + h) * d;
            for (int c = 0; c < d; c++) o[c] = 0;
            for (int t = 0; t <= q; t++) {
                double w = s[t] / z;
                for (int c = 0; c < d; c++) o[c] += w * V[(size_t)t * d + c];
                mass[(size_t)h * T + t] += w;
                probs[((size_t)h * T + q) * T + t] = w;
            }
        }
    }
    free(s);
}

/* Runs the prompt through be->prefill in the given chunks, with col_mass [H][T+5]
 * (padding must stay untouched) and win_probs for the last `win` queries. */
typedef struct { float *out, *mass, *win; size_t mass_ld; int win_n; } prefill_result;

static prefill_result run_prefill(const kb_backend *be, const prompt *p, const int *chunks, int nchunks, int win) {
    int H = p->H, d = p->d, T = p->T;
    prefill_result r = {fmalloc((size_t)T * H * d), fmalloc((size_t)H * (T + 5)), fmalloc((size_t)H * win * T),
                        (size_t)T + 5, win};
    test_poison(r.out, (size_t)T * H * d);
    test_poison(r.win, (size_t)H * win * T);
    for (size_t i = 0; i < (size_t)H * r.mass_ld; i++) r.mass[i] = (i % r.mass_ld) < (size_t)T ? 0.0f : 777.0f;
    int t0 = 0;
    for (int c = 0; c < nchunks; c++) {
        kb_prefill_args a = {
            .H = H, .Hkv = p->Hkv, .d = d, .t0 = t0, .m = chunks[c],
            .Q = p->Q + (size_t)t0 * H * d, .K = p->K, .V = p->V, .kv_stride = p->kv_stride,
            .out = r.out + (size_t)t0 * H * d,
            .col_mass = r.mass, .mass_ld = r.mass_ld,
            .win_probs = win ? r.win : NULL, .win = win, .win_start = T - win, .win_ld = (size_t)T,
        };
        be->prefill(&a);
        t0 += chunks[c];
    }
    return r;
}
static void free_result(prefill_result *r) { free(r->out); free(r->mass); free(r->win); }

static int random_chunks(int T, int *chunks) {
    int n = 0;
    for (int t = 0; t < T; n++) {
        int c = test_unif() < 0.3 ? 1 : test_int(1, T - t);
        if (c > T - t) c = T - t;
        chunks[n] = c;
        t += c;
    }
    return n;
}

static void check_prefill_result(const char *be, const char *what, const prompt *p, const prefill_result *r,
                                 const double *out, const double *mass, const double *probs) {
    int H = p->H, d = p->d, T = p->T;
    double e = rel_l2(r->out, out, (size_t)T * H * d);
    note_err(E_PF_OUT, e);
    CHECK(e < TOL, "%s %s out H=%d Hkv=%d d=%d T=%d: rel err %.3g", be, what, H, p->Hkv, d, T, e);
    double me = 0, md = 0;
    int pad_ok = 1;
    for (int h = 0; h < H; h++) {
        for (int t = 0; t < T; t++) {
            double x = r->mass[h * r->mass_ld + t] - mass[(size_t)h * T + t];
            me += x * x;
            md += mass[(size_t)h * T + t] * mass[(size_t)h * T + t];
        }
        for (size_t t = T; t < r->mass_ld; t++) pad_ok &= r->mass[h * r->mass_ld + t] == 777.0f;
    }
    note_err(E_PF_MASS, pad_ok ? sqrt(me / md) : INFINITY);
    CHECK(sqrt(me / md) < TOL, "%s %s col_mass H=%d T=%d: rel err %.3g", be, what, H, T, sqrt(me / md));
    CHECK(pad_ok, "%s %s col_mass wrote past its T columns", be, what);
    if (r->win_n) {
        double *ref = dcalloc((size_t)H * r->win_n * T);
        for (int h = 0; h < H; h++)
            for (int w = 0; w < r->win_n; w++)
                memcpy(ref + ((size_t)h * r->win_n + w) * T, probs + ((size_t)h * T + (T - r->win_n + w)) * T,
                       (size_t)T * sizeof(double));
        int zeros = 1;   /* keys after the row's own position: exactly 0 */
        for (int h = 0; h < H; h++)
            for (int w = 0; w < r->win_n; w++)
                for (int t = T - r->win_n + w + 1; t < T; t++) zeros &= r->win[((size_t)h * r->win_n + w) * T + t] == 0.0f;
        CHECK(zeros, "%s %s win_probs: future keys not exactly 0", be, what);
        double we = rel_l2(r->win, ref, (size_t)H * r->win_n * T);
        note_err(E_PF_WIN, zeros ? we : INFINITY);
        CHECK(we < TOL, "%s %s win_probs H=%d T=%d win=%d: rel err %.3g", be, what, H, T, r->win_n, we);
        free(ref);
    }
}

static void test_prefill_case(const kb_backend *be, int H, int Hkv, int d, int T) {
    prompt p = make_prompt(H, Hkv, d, T);
    double *out = dcalloc((size_t)T * H * d), *mass = dcalloc((size_t)H * T), *probs = dcalloc((size_t)H * T * T);
    ref_prefill(&p, out, mass, probs);
    int win = test_int(0, T < 8 ? T : 8);

    int whole[1] = {T};
    prefill_result r1 = run_prefill(be, &p, whole, 1, win);
    check_prefill_result(be->name, "one chunk", &p, &r1, out, mass, probs);

    int *chunks = malloc(sizeof(int) * T);
    int nchunks = random_chunks(T, chunks);
    prefill_result r2 = run_prefill(be, &p, chunks, nchunks, win);
    check_prefill_result(be->name, "chunked", &p, &r2, out, mass, probs);
    double *one = dcalloc((size_t)T * H * d);
    to_double(one, r1.out, (size_t)T * H * d);
    double e = rel_l2(r2.out, one, (size_t)T * H * d);
    CHECK(e < TOL, "%s %d chunks vs one chunk: rel diff %.3g", be->name, nchunks, e);

    free(one); free(chunks); free_result(&r1); free_result(&r2);
    free(out); free(mass); free(probs); free_prompt(&p);
}

static void test_prefill(const kb_backend *be) {
    static const int Hs[] = {1, 2, 4, 6, 9}, ds[] = {8, 32, 64, 128};
    for (int it = 0; it < 10; it++) {
        int H = Hs[test_int(0, 4)], Hkv;
        do Hkv = test_int(1, H); while (H % Hkv);
        int d = ds[test_int(0, 3)];
        int T = 2 * test_int(0, it < 7 ? 40 : 110) + 1;   /* odd; the long ones span several tiles */
        test_prefill_case(be, H, Hkv, d, T);
    }
    test_prefill_case(be, 1, 1, 8, 1);   /* a single token */
}

/* A long prefix (t0 = 70000) with few queries: tiles shrink below 64 queries to bound
 * the logit tile, so several short tiles cover 130 queries. Checks the last chunk only. */
static void test_prefill_long_prefix(const kb_backend *be) {
    int H = 2, Hkv = 2, d = 8, t0 = 70000, m = 130, T = t0 + m;
    prompt p = make_prompt(H, Hkv, d, T);
    float *out = fmalloc((size_t)m * H * d), *mass = fmalloc((size_t)H * T);
    test_poison(out, (size_t)m * H * d);
    memset(mass, 0, (size_t)H * T * sizeof *mass);
    kb_prefill_args a = {.H = H, .Hkv = Hkv, .d = d, .t0 = t0, .m = m, .Q = p.Q + (size_t)t0 * H * d,
                         .K = p.K, .V = p.V, .kv_stride = p.kv_stride, .out = out, .col_mass = mass, .mass_ld = T};
    be->prefill(&a);
    double *ref = dcalloc((size_t)m * H * d), *rmass = dcalloc((size_t)H * T), *s = dcalloc(T);
    for (int h = 0; h < H; h++) {
        const float *K = p.K + h * p.kv_stride, *V = p.V + h * p.kv_stride;
        for (int q = 0; q < m; q++) {
            const float *qv = a.Q + ((size_t)q * H + h) * d;
            double mx = -INFINITY, z = 0;
            for (int t = 0; t <= t0 + q; t++) {
                double dot = 0;
                for (int c = 0; c < d; c++) dot += (double)qv[c] * K[(size_t)t * d + c];
                s[t] = dot / sqrt((double)d);
                if (s[t] > mx) mx = s[t];
            }
            for (int t = 0; t <= t0 + q; t++) z += (s[t] = exp(s[t] - mx));
            for (int t = 0; t <= t0 + q; t++) {
                for (int c = 0; c < d; c++) ref[((size_t)q * H + h) * d + c] += s[t] / z * V[(size_t)t * d + c];
                rmass[(size_t)h * T + t] += s[t] / z;
            }
        }
    }
    double e = rel_l2(out, ref, (size_t)m * H * d), me = rel_l2(mass, rmass, (size_t)H * T);
    note_err(E_PF_OUT, e);
    note_err(E_PF_MASS, me);
    CHECK(e < TOL, "%s long prefix out: rel err %.3g", be->name, e);
    CHECK(me < TOL, "%s long prefix col_mass: rel err %.3g", be->name, me);
    free(ref); free(rmass); free(s); free(out); free(mass); free_prompt(&p);
}

/* ------------------------------------------------------------ decode */

/* Float64 decode: out [g][d], probs [g][n]. */
static double f32_elem(const kb_decode_args *a, const void *base, size_t i) {
    (void)a;
    return ((const float *)base)[i];
}
static void ref_decode(const kb_decode_args *a, double *out, double *probs) { ref_decode_elems(a, f32_elem, out, probs); }

static void test_decode_case(const kb_backend *be, int g, int d, int n, int use_idx, int use_bias, int use_probs) {
    int rows = use_idx ? n + 7 : n;
    float *q = fmalloc((size_t)g * d), *K = fmalloc((size_t)rows * d), *V = fmalloc((size_t)rows * d);
    float *bias = fmalloc(n), *out = fmalloc((size_t)g * d), *probs = fmalloc((size_t)g * n);
    int32_t *idx = malloc(sizeof(int32_t) * (n ? n : 1));
    test_fill(q, (size_t)g * d, 1.5f);
    test_fill(K, (size_t)rows * d, 1.0f);
    test_fill(V, (size_t)rows * d, 1.0f);
    for (int i = 0; i < n; i++) {
        bias[i] = test_unif() < 0.5 ? 0.0f : logf((float)test_int(1, 64));
        if (use_bias == 2 && i < n / 2) bias[i] = -INFINITY;   /* masked entries */
        idx[i] = test_int(0, rows - 1);
    }
    test_poison(out, (size_t)g * d);
    test_poison(probs, (size_t)g * n);
    kb_decode_args a = {g, d, n, q, K, V, use_idx ? idx : NULL, use_bias ? bias : NULL, out, use_probs ? probs : NULL, KB_F32};
    be->decode(&a);
    double *rout = dcalloc((size_t)g * d), *rprobs = dcalloc((size_t)g * n);
    ref_decode(&a, rout, rprobs);
    if (n == 0) {
        int zero = 1;
        for (int i = 0; i < g * d; i++) zero &= out[i] == 0.0f;
        CHECK(zero, "%s decode n=0 must write zeros", be->name);
        note_err(E_DEC_OUT, zero ? 0.0 : INFINITY);
    } else {
        double e = rel_l2(out, rout, (size_t)g * d);
        note_err(E_DEC_OUT, e);
        CHECK(e < TOL, "%s decode g=%d d=%d n=%d idx=%d bias=%d: rel err %.3g", be->name, g, d, n, use_idx, use_bias, e);
    }
    if (use_probs && n > 0) {
        double e = rel_l2(probs, rprobs, (size_t)g * n);
        note_err(E_DEC_PROBS, e);
        CHECK(e < TOL, "%s decode probs g=%d n=%d: rel err %.3g", be->name, g, n, e);
    }
    free(q); free(K); free(V); free(bias); free(out); free(probs); free(idx); free(rout); free(rprobs);
}

/* A coarse entry with bias log c standing for c identical tokens gives the same output
 * as the c tokens themselves, and its probability is their summed probability. */
static void test_decode_coarse(const kb_backend *be) {
    int g = test_int(1, 4), d = 64, other = test_int(1, 50), c = test_int(2, 40);
    int n_full = other + c, n_coarse = other + 1;
    float *q = fmalloc((size_t)g * d), *K = fmalloc((size_t)(other + 1) * d), *V = fmalloc((size_t)(other + 1) * d);
    test_fill(q, (size_t)g * d, 1.0f);
    test_fill(K, (size_t)(other + 1) * d, 1.0f);
    test_fill(V, (size_t)(other + 1) * d, 1.0f);
    int32_t *idx_full = malloc(sizeof(int32_t) * n_full), *idx_coarse = malloc(sizeof(int32_t) * n_coarse);
    float *bias_full = fmalloc(n_full), *bias_coarse = fmalloc(n_coarse);
    /* the repeated token (row `other`) sits in the middle of the list */
    int at = test_int(0, other);
    for (int i = 0, o = 0; i < n_full; i++) {
        int rep = i >= at && i < at + c;
        idx_full[i] = rep ? other : o++;
        bias_full[i] = 0;
    }
    for (int i = 0, o = 0; i < n_coarse; i++) {
        idx_coarse[i] = i == at ? other : o++;
        bias_coarse[i] = i == at ? logf((float)c) : 0.0f;
    }
    float *out_full = fmalloc((size_t)g * d), *out_coarse = fmalloc((size_t)g * d);
    float *p_full = fmalloc((size_t)g * n_full), *p_coarse = fmalloc((size_t)g * n_coarse);
    test_poison(out_full, (size_t)g * d);
    test_poison(out_coarse, (size_t)g * d);
    kb_decode_args af = {g, d, n_full, q, K, V, idx_full, bias_full, out_full, p_full, KB_F32};
    kb_decode_args ac = {g, d, n_coarse, q, K, V, idx_coarse, bias_coarse, out_coarse, p_coarse, KB_F32};
    be->decode(&af);
    be->decode(&ac);
    double *ref = dcalloc((size_t)g * d), *pref = dcalloc((size_t)g * n_coarse);
    to_double(ref, out_full, (size_t)g * d);
    double e = rel_l2(out_coarse, ref, (size_t)g * d);
    note_err(E_DEC_COARSE, e);
    CHECK(e < 2e-6, "%s coarse entry (c=%d) vs %d identical tokens: rel diff %.3g", be->name, c, c, e);
    for (int hh = 0; hh < g; hh++)
        for (int i = 0, o = 0; i < n_full; i++) {
            int slot = (i >= at && i < at + c) ? at : (o < at ? o : o + 1);
            if (!(i >= at && i < at + c)) o++;
            pref[(size_t)hh * n_coarse + slot] += p_full[(size_t)hh * n_full + i];
        }
    double pe = rel_l2(p_coarse, pref, (size_t)g * n_coarse);
    note_err(E_DEC_COARSE, pe);
    CHECK(pe < 2e-6, "%s coarse entry probability vs summed token probabilities: rel diff %.3g", be->name, pe);
    free(q); free(K); free(V); free(idx_full); free(idx_coarse); free(bias_full); free(bias_coarse);
    free(out_full); free(out_coarse); free(p_full); free(p_coarse); free(ref); free(pref);
}

static void test_decode(const kb_backend *be) {
    static const int ds[] = {8, 32, 64, 128};
    test_decode_case(be, 3, 64, 0, 1, 1, 1);
    test_decode_case(be, 2, 32, 0, 0, 0, 0);
    test_decode_case(be, 4, 64, 1, 1, 1, 1);
    test_decode_case(be, 1, 8, 1, 0, 0, 0);
    for (int it = 0; it < 12; it++)
        test_decode_case(be, test_int(1, 6), ds[test_int(0, 3)], test_int(2, 300), it & 1, (it >> 1) & 1, (it >> 2) & 1);
    /* several blocks of entries, combined */
    test_decode_case(be, 4, 128, test_int(4097, 9000), 1, 1, 1);
    test_decode_case(be, 3, 64, test_int(2049, 5000), 0, 0, 0);
    test_decode_case(be, 2, 64, test_int(4200, 6000), 0, 2, 1);   /* a whole block at -inf */
    test_decode_case(be, 2, 32, test_int(2, 50), 1, 2, 1);
    test_decode_coarse(be);
    test_decode_coarse(be);
}

/* ------------------------------------------------------------ gather, svd */

static void test_gather(const kb_backend *be) {
    int rows = test_int(1, 300), n = test_int(0, 400), d = test_int(1, 130);
    float *src = fmalloc((size_t)rows * d), *dst = fmalloc((size_t)n * d);
    int32_t *idx = malloc(sizeof(int32_t) * (n ? n : 1));
    test_fill(src, (size_t)rows * d, 1.0f);
    test_poison(dst, (size_t)n * d);
    for (int i = 0; i < n; i++) idx[i] = test_int(0, rows - 1);
    be->gather(dst, src, idx, n, d);
    int same = 1;
    for (int i = 0; i < n; i++) same &= memcmp(dst + (size_t)i * d, src + (size_t)idx[i] * d, sizeof(float) * d) == 0;
    note_err(E_GATHER, same ? 0.0 : 1.0);
    CHECK(same, "%s gather n=%d d=%d rows differ from their source rows", be->name, n, d);
    free(src); free(dst); free(idx);
}

/* Eigenvalues of the symmetric n x n matrix M (destroyed) by cyclic Jacobi, descending. */
static void jacobi_eigenvalues(double *M, int n, double *ev) {
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0;
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++) off += M[p * n + q] * M[p * n + q];
        if (off < 1e-30) break;
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++) {
                double apq = M[p * n + q];
                if (fabs(apq) < 1e-300) continue;
                double theta = (M[q * n + q] - M[p * n + p]) / (2 * apq);
                double t = (theta >= 0 ? 1 : -1) / (fabs(theta) + sqrt(theta * theta + 1));
                double c = 1 / sqrt(t * t + 1), s = t * c;
                for (int k = 0; k < n; k++) {   /* columns p, q */
                    double mkp = M[k * n + p], mkq = M[k * n + q];
                    M[k * n + p] = c * mkp - s * mkq;
                    M[k * n + q] = s * mkp + c * mkq;
                }
                for (int k = 0; k < n; k++) {   /* rows p, q */
                    double mpk = M[p * n + k], mqk = M[q * n + k];
                    M[p * n + k] = c * mpk - s * mqk;
                    M[q * n + k] = s * mpk + c * mqk;
                }
            }
    }
    for (int i = 0; i < n; i++) ev[i] = M[i * n + i];
    for (int i = 0; i < n; i++)   /* sort descending */
        for (int j = i + 1; j < n; j++)
            if (ev[j] > ev[i]) { double x = ev[i]; ev[i] = ev[j]; ev[j] = x; }
}

/* A random rows x cols matrix; decay scales its columns so the spectrum decays, like
 * the K rows of one head. */
static void svd_input(float *A, int rows, int cols, int decay) {
    test_fill(A, (size_t)rows * cols, 1.0f);
    if (decay)
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) A[(size_t)i * cols + j] *= (float)exp(-0.15 * j);
}

/* Singular values of A (descending) from float64 eigenvalues of the k x k Gram matrix;
 * returns ||A||_F. */
static double svd_reference(const float *A, int rows, int cols, double *sig) {
    int k = rows < cols ? rows : cols;
    double *G = dcalloc((size_t)k * k);
    for (int p = 0; p < k; p++)
        for (int q = 0; q < k; q++) {
            double s = 0;
            if (cols <= rows) for (int i = 0; i < rows; i++) s += (double)A[(size_t)i * cols + p] * A[(size_t)i * cols + q];
            else for (int j = 0; j < cols; j++) s += (double)A[(size_t)p * cols + j] * A[(size_t)q * cols + j];
            G[p * k + q] = s;
        }
    jacobi_eigenvalues(G, k, sig);
    double normA = 0;
    for (int i = 0; i < k; i++) {
        sig[i] = sqrt(sig[i] > 0 ? sig[i] : 0);
        normA += sig[i] * sig[i];
    }
    free(G);
    return sqrt(normA);
}

/* One truncated factorization A ~= U diag(S) Vt against the float64 singular values sig:
 * S descending and non-negative, the sign rule, orthonormal factors, and the
 * Eckart-Young optimal reconstruction error. */
static void check_svd_factors(const char *be, const char *what, const float *A, int rows, int cols, int rank,
                              const float *U, const float *S, const float *Vt, const double *sig, double normA) {
    int k = rows < cols ? rows : cols;
    int desc = 1, signs = 1;
    double sv_err = 0, orth_u = 0, orth_v = 0;
    for (int r = 0; r < rank; r++) {
        if (r && S[r] > S[r - 1]) desc = 0;
        if (S[r] < 0) desc = 0;
        sv_err = fmax(sv_err, fabs(S[r] - sig[r]) / sig[0]);
        int best = 0;
        for (int j = 1; j < cols; j++)
            if (fabsf(Vt[(size_t)r * cols + j]) > fabsf(Vt[(size_t)r * cols + best])) best = j;
        signs &= Vt[(size_t)r * cols + best] > 0;
        for (int r2 = 0; r2 < rank; r2++) {
            double uu = 0, vv = 0;
            for (int i = 0; i < rows; i++) uu += (double)U[(size_t)i * rank + r] * U[(size_t)i * rank + r2];
            for (int j = 0; j < cols; j++) vv += (double)Vt[(size_t)r * cols + j] * Vt[(size_t)r2 * cols + j];
            orth_u = fmax(orth_u, fabs(uu - (r == r2)));
            orth_v = fmax(orth_v, fabs(vv - (r == r2)));
        }
    }
    CHECK(desc, "%s %s %dx%d: S not descending and non-negative", be, what, rows, cols);
    CHECK(signs, "%s %s %dx%d: a Vt row's largest entry is negative", be, what, rows, cols);
    CHECK(sv_err < 1e-5, "%s %s %dx%d: singular values off float64 by %.3g (rel to S0)", be, what, rows, cols, sv_err);
    CHECK(orth_u < 1e-4 && orth_v < 1e-4, "%s %s %dx%d: U^T U, Vt Vt^T off identity by %.3g, %.3g", be, what, rows,
          cols, orth_u, orth_v);
    /* ||A - U S Vt||_F vs the Eckart-Young optimum sqrt(sum of discarded sigma^2) */
    double err = 0, opt = 0;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            double x = A[(size_t)i * cols + j];
            for (int r = 0; r < rank; r++) x -= (double)U[(size_t)i * rank + r] * S[r] * Vt[(size_t)r * cols + j];
            err += x * x;
        }
    for (int r = rank; r < k; r++) opt += sig[r] * sig[r];
    err = sqrt(err);
    opt = sqrt(opt);
    CHECK(fabs(err - opt) < 1e-4 * normA, "%s %s %dx%d rank %d: error %.6g, optimum %.6g (|A| %.4g)", be, what, rows,
          cols, rank, err, opt, normA);
    note_err(E_SVD_S, desc && signs ? sv_err : INFINITY);
    note_err(E_SVD_ORTH, fmax(orth_u, orth_v));
    note_err(E_SVD_RECON, fabs(err - opt) / normA);
}

static void test_svd_case(const kb_backend *be, int rows, int cols, int decay) {
    int k = rows < cols ? rows : cols;
    float *A = fmalloc((size_t)rows * cols);
    double *sig = dcalloc(k);
    svd_input(A, rows, cols, decay);
    double normA = svd_reference(A, rows, cols, sig);
    for (int pass = 0; pass < 2; pass++) {
        int rank = pass == 0 ? k : test_int(1, k);
        float *U = fmalloc((size_t)rows * rank), *S = fmalloc(rank), *Vt = fmalloc((size_t)rank * cols);
        test_poison(U, (size_t)rows * rank);
        test_poison(S, rank);
        test_poison(Vt, (size_t)rank * cols);
        int rc = be->svd(A, rows, cols, rank, U, S, Vt);
        CHECK(rc == 0, "%s svd %dx%d rank %d returned %d", be->name, rows, cols, rank, rc);
        if (rc == 0) check_svd_factors(be->name, "svd", A, rows, cols, rank, U, S, Vt, sig, normA);
        free(U); free(S); free(Vt);
    }
    float U1, S1, V1;
    CHECK(be->svd(A, rows, cols, k + 1, &U1, &S1, &V1) == -1, "%s svd rank > min(rows, cols) must fail", be->name);
    free(A); free(sig);
}

/* batch blocks at once, each checked as a single SVD is. */
static void test_svd_batched_case(const kb_backend *be, int batch, int rows, int cols, int decay) {
    int k = rows < cols ? rows : cols, rank = test_int(1, k);
    size_t na = (size_t)rows * cols, nu = (size_t)rows * rank, nv = (size_t)rank * cols;
    float *A = fmalloc(batch * na), *U = fmalloc(batch * nu), *S = fmalloc((size_t)batch * rank), *Vt = fmalloc(batch * nv);
    for (int b = 0; b < batch; b++) svd_input(A + b * na, rows, cols, decay);
    test_poison(U, batch * nu);
    test_poison(S, (size_t)batch * rank);
    test_poison(Vt, batch * nv);
    int rc = be->svd_batched(A, batch, rows, cols, rank, U, S, Vt);
    CHECK(rc == 0, "%s svd_batched %d x %dx%d rank %d returned %d", be->name, batch, rows, cols, rank, rc);
    double *sig = dcalloc(k);
    for (int b = 0; rc == 0 && b < batch; b++) {
        double normA = svd_reference(A + b * na, rows, cols, sig);
        check_svd_factors(be->name, "svd_batched", A + b * na, rows, cols, rank, U + b * nu, S + (size_t)b * rank,
                          Vt + b * nv, sig, normA);
    }
    float U1, S1, V1;
    CHECK(be->svd_batched(A, batch, rows, cols, k + 1, &U1, &S1, &V1) == -1, "%s svd_batched rank > min must fail",
          be->name);
    free(A); free(U); free(S); free(Vt); free(sig);
}

static void test_svd_batched(const kb_backend *be) {
    if (!be->svd_batched) return;
    test_svd_batched_case(be, test_int(2, 9), test_int(1, 32), test_int(1, 32), 0);   /* gesvdjBatched sizes */
    test_svd_batched_case(be, test_int(2, 5), 32, 32, 1);
    test_svd_batched_case(be, test_int(2, 3), test_int(33, 90), 64, 1);               /* one by one */
    test_svd_batched_case(be, 1, test_int(5, 40), test_int(5, 40), 0);
    float dummy = 0;
    CHECK(be->svd_batched(&dummy, 0, 4, 4, 2, &dummy, &dummy, &dummy) == 0, "%s svd_batched of 0 blocks", be->name);
}

static void test_svd(const kb_backend *be) {
    test_svd_case(be, test_int(30, 80), test_int(5, 29), 0);   /* tall */
    test_svd_case(be, test_int(5, 29), test_int(30, 80), 0);   /* wide */
    test_svd_case(be, 64, 64, 1);
    test_svd_case(be, test_int(100, 300), 64, 1);
    test_svd_case(be, 1, 1, 0);
}

/* ------------------------------------------------------------ threads */

typedef struct { atomic_int *hits; int inner_n; } pf_ctx;

static void count_hit(void *ctx, int i) {
    pf_ctx *c = ctx;
    atomic_fetch_add(&c->hits[i], 1);
}
static void nested_hit(void *ctx, int i) {
    pf_ctx *c = ctx;
    atomic_int *inner = calloc(c->inner_n, sizeof *inner);
    pf_ctx ic = {inner, 0};
    kb_parallel_for(c->inner_n, count_hit, &ic);
    int ok = 1;
    for (int k = 0; k < c->inner_n; k++) ok &= atomic_load(&inner[k]) == 1;
    free(inner);
    if (ok) atomic_fetch_add(&c->hits[i], 1);
}

static void test_threads(void) {
    setenv("KVBENCH_THREADS", "3", 1);
    kb_set_threads(0);
    CHECK(kb_threads() == 3, "KVBENCH_THREADS=3 gave %d threads", kb_threads());
    kb_set_threads(5);
    CHECK(kb_threads() == 5, "kb_set_threads(5) gave %d", kb_threads());
    unsetenv("KVBENCH_THREADS");
    kb_set_threads(0);
    CHECK(kb_threads() >= 1, "default thread count %d", kb_threads());

    for (int threads = 1; threads <= 4; threads++) {
        kb_set_threads(threads);
        atomic_int hits[1000];
        for (int n = 0; n <= 1000; n = n ? n * 10 : 1) {
            for (int i = 0; i < 1000; i++) atomic_init(&hits[i], 0);
            pf_ctx c = {hits, 0};
            kb_parallel_for(n, count_hit, &c);
            int ok = 1;
            for (int i = 0; i < 1000; i++) ok &= atomic_load(&hits[i]) == (i < n);
            CHECK(ok, "parallel_for n=%d threads=%d: an index ran other than once", n, threads);
        }
        for (int i = 0; i < 1000; i++) atomic_init(&hits[i], 0);
        pf_ctx c = {hits, 37};
        kb_parallel_for(23, nested_hit, &c);
        int ok = 1;
        for (int i = 0; i < 23; i++) ok &= atomic_load(&hits[i]) == 1;
        CHECK(ok, "nested parallel_for threads=%d: inner loops incomplete", threads);
    }
}

/* Loops with gaps longer and shorter than the pool's spin: workers that went to sleep
 * must be woken, spinning ones must see the next loop, and no index may be lost or run
 * twice on either path (the hand-off is lock-free while spinning). */
static void test_thread_handoff(void) {
    for (int threads = 2; threads <= 3; threads++) {
        kb_set_threads(threads);
        atomic_int hits[64];
        int bad = 0;
        for (int loop = 0; loop < 3000; loop++) {
            int n = 1 + (loop * 7) % 64;
            for (int i = 0; i < 64; i++) atomic_init(&hits[i], 0);
            pf_ctx c = {hits, 0};
            kb_parallel_for(n, count_hit, &c);
            for (int i = 0; i < 64; i++) bad += atomic_load(&hits[i]) != (i < n);
            if (loop % 300 == 299) {   /* past the spin: everyone sleeps */
                struct timespec ts = {0, 2000000};
                nanosleep(&ts, NULL);
            }
        }
        CHECK(bad == 0, "hand-off with %d threads: %d indices ran other than once", threads, bad);
    }
    kb_set_threads(0);
}

/* kb_cpu_decode_many: groups of mixed shapes, types, index lists, biases and probs
 * decoded together give, bit for bit, what each gives decoded alone on one thread, at
 * any thread count (the task split changes with both). */
static void test_decode_many(void) {
    enum { NG = 6 };
    const int gs[NG] = {3, 1, 4, 2, 3, 7}, ds[NG] = {64, 40, 128, 64, 96, 32}, ns[NG] = {513, 0, 2049, 4100, 1, 300};
    const int types[NG] = {KB_F32, KB_F16, KB_BF16, KB_F16, KB_F32, KB_BF16};
    kb_decode_args one[NG], many[NG];
    void *store[NG][2];
    float *q[NG], *bias[NG];
    int32_t *idx[NG];
    for (int k = 0; k < NG; k++) {
        int g = gs[k], d = ds[k], n = ns[k], rows = n + 9;
        float *tmp = fmalloc((size_t)rows * d);
        for (int m = 0; m < 2; m++) {
            test_fill(tmp, (size_t)rows * d, m ? 1.0f : 3.0f);
            store[k][m] = malloc((size_t)rows * d * kb_kvtype_bytes(types[k]) + 1);
            kb_kv_put(types[k], store[k][m], tmp, rows * d);
        }
        free(tmp);
        q[k] = fmalloc((size_t)g * d);
        test_fill(q[k], (size_t)g * d, 1.0f);
        idx[k] = k % 2 ? malloc((size_t)(n + 1) * sizeof(int32_t)) : NULL;
        for (int i = 0; idx[k] && i < n; i++) idx[k][i] = (int32_t)((i * 7 + 3) % rows);
        bias[k] = k % 3 == 2 ? fmalloc((size_t)n + 1) : NULL;
        for (int i = 0; bias[k] && i < n; i++) bias[k][i] = i % 11 ? (float)log(1 + i % 4) : -INFINITY;
        one[k] = (kb_decode_args){g, d, n, q[k], store[k][0], store[k][1], idx[k], bias[k], fmalloc((size_t)g * d),
                                  k % 2 ? NULL : fmalloc((size_t)g * n + 1), types[k]};
        many[k] = one[k];
        many[k].out = fmalloc((size_t)g * d);
        many[k].probs = one[k].probs ? fmalloc((size_t)g * n + 1) : NULL;
    }
    kb_set_threads(1);
    for (int k = 0; k < NG; k++) kb_cpu_decode(&one[k]);
    for (int threads = 1; threads <= 3; threads++) {
        kb_set_threads(threads);
        for (int k = 0; k < NG; k++) {
            test_poison(many[k].out, (size_t)gs[k] * ds[k]);
            if (many[k].probs) test_poison(many[k].probs, (size_t)gs[k] * ns[k]);
        }
        kb_cpu_decode_many(many, NG);
        for (int k = 0; k < NG; k++) {
            int same = memcmp(one[k].out, many[k].out, sizeof(float) * gs[k] * ds[k]) == 0 &&
                       (!one[k].probs || memcmp(one[k].probs, many[k].probs, sizeof(float) * gs[k] * ns[k]) == 0);
            CHECK(same, "decode_many group %d (g=%d d=%d n=%d %s) differs from alone with %d threads", k, gs[k], ds[k],
                  ns[k], kb_kvtype_name(types[k]), threads);
        }
    }
    kb_set_threads(0);
    for (int k = 0; k < NG; k++) {
        free(store[k][0]); free(store[k][1]); free(q[k]); free(idx[k]); free(bias[k]);
        free(one[k].out); free(one[k].probs); free(many[k].out); free(many[k].probs);
    }
}

/* Same inputs, 1..3 threads: bit-identical prefill (out, col_mass, win_probs) and decode. */
static void test_thread_determinism(void) {
    int H = 6, Hkv = 2, d = 32, T = 301;
    prompt p = make_prompt(H, Hkv, d, T);
    int chunks[] = {100, 1, 200};
    kb_set_threads(1);
    prefill_result base = run_prefill(kb_cpu(), &p, chunks, 3, 5);
    int g = 4, dd = 128, n = 7000;
    float *q = fmalloc((size_t)g * dd), *K = fmalloc((size_t)n * dd), *V = fmalloc((size_t)n * dd);
    float *o1 = fmalloc((size_t)g * dd), *o2 = fmalloc((size_t)g * dd), *p1 = fmalloc((size_t)g * n), *p2 = fmalloc((size_t)g * n);
    test_fill(q, (size_t)g * dd, 1.0f);
    test_fill(K, (size_t)n * dd, 1.0f);
    test_fill(V, (size_t)n * dd, 1.0f);
    kb_decode_args a1 = {g, dd, n, q, K, V, NULL, NULL, o1, p1, KB_F32};
    kb_cpu()->decode(&a1);
    for (int threads = 2; threads <= 3; threads++) {
        kb_set_threads(threads);
        prefill_result r = run_prefill(kb_cpu(), &p, chunks, 3, 5);
        CHECK(memcmp(r.out, base.out, sizeof(float) * T * H * d) == 0, "prefill out differs with %d threads", threads);
        CHECK(memcmp(r.mass, base.mass, sizeof(float) * H * base.mass_ld) == 0, "col_mass differs with %d threads", threads);
        CHECK(memcmp(r.win, base.win, sizeof(float) * H * 5 * T) == 0, "win_probs differ with %d threads", threads);
        free_result(&r);
        kb_decode_args a2 = {g, dd, n, q, K, V, NULL, NULL, o2, p2, KB_F32};
        kb_cpu()->decode(&a2);
        CHECK(memcmp(o1, o2, sizeof(float) * g * dd) == 0 && memcmp(p1, p2, sizeof(float) * g * n) == 0,
              "decode differs with %d threads", threads);
    }
    kb_set_threads(0);
    free_result(&base); free_prompt(&p);
    free(q); free(K); free(V); free(o1); free(o2); free(p1); free(p2);
}

static void test_backends(void) {
    const char *why = NULL;
    CHECK(kb_get() == kb_cpu(), "default backend is not the CPU");
    CHECK(kb_select("tpu", &why) == -1 && why, "unknown backend name accepted");
    const kb_backend *cuda = kb_cuda(&why);
    CHECK(cuda || (why && *why), "kb_cuda NULL without a reason");
    CHECK((kb_select("cuda", NULL) == 0) == (cuda != NULL), "kb_select(cuda) disagrees with kb_cuda");
    CHECK(kb_select("cpu", NULL) == 0 && kb_get() == kb_cpu(), "kb_select(cpu) failed");
}

int main(void) {
    test_seed();
    test_backends();
    test_threads();
    test_thread_handoff();
    test_thread_determinism();
    test_decode_many();
    const char *why = NULL;
    const kb_backend *backends[2] = {kb_cpu(), kb_cuda(&why)};
    if (!backends[1]) printf("cuda backend not tested: %s\n", why);
#ifdef KB_CUDA
    /* the f32 contract of core.h: the device's f32 prefill kernels; its tensor-core path
     * (bf16 inputs) has its own bound in test_cuda_prefill_tc */
    if (backends[1]) kb_cuda_prefill_mode(0, 0, 0);
#endif
    for (int b = 0; b < 2; b++) {
        const kb_backend *be = backends[b];
        if (!be) continue;
        cur_backend = b;
        printf("backend %s\n", be->name);
        test_prefill(be);
        test_prefill_long_prefix(be);
        test_decode(be);
        for (int i = 0; i < 5; i++) test_gather(be);
        test_svd(be);
        test_svd_batched(be);
    }
    for (int b = 0; b < 2; b++)
        for (int op = 0; op < E_NOPS; op++)
            if (err_seen[b][op])
                printf("maxerr %-5s %-19s %.3g %.0e\n", backends[b]->name, err_name[op], err_max[b][op],
                       err_bound[op]);
    return check_done("test_kernels");
}

/* The tensor-core prefill (kernels/cuda_attn_tc.cu: bf16 Q/K/V, cuBLAS GEMMs with f32
 * accumulation, online softmax across key tiles) against a float64 reference and the
 * CPU twin, with the column mass and the window rows, in two chunks (t0 > 0).
 *   usage: test_cuda_prefill_tc [T [--no-f32]]   (default: a small T with small tiles,
 *   so that several query and key tiles meet at every size; tests/gpu/check.sh runs
 *   T = 8192 with the device's default tiles; --no-f32 skips the f32 device kernels,
 *   which the CPU emulation runs far slower than the GEMMs)
 * The bound is derived, not tuned. With u = 2^-8 + 2^-16 (a product of two bf16
 * roundings, each 2^-9) plus d 2^-24 (the f32 dot product), a logit's error is at most
 * e_k = scale u sum_c |q_c k_c|; with delta = max_k e_k over the keys a row sees, the
 * log-sum-exp moves at most delta too, so a normalised probability is within a factor
 * exp(+-2 delta) (times f32 exp/sum error gam = (n + 8) 2^-24 over n keys). Then:
 *   |p' - p|      <= p (exp(2 delta)(1 + gam) - 1)                  (window rows)
 *   |mass' - mass| <= sum_q of the same, + m 2^-24 mass               (column mass)
 *   |out' - out|  <= (exp(2 delta)(1 + gam)(1 + u + gam) - 1) sum_k p_k |v_k|
 * (the PV product rounds p and v to bf16 once more: u). Absolute 1e-30 for f32 underflow.
 * The CPU twin (f32) is held to the same bound against float64 plus its own f32 error,
 * and the f32 device path (KB_PREFILL_TC=0's kernels) to the CPU at 1e-5 as before. */
#include "../kernels/core.h"
#include "cuda_check.h"

#include <math.h>
#include <time.h>

#ifdef KB_CUDA

typedef struct {
    int H, Hkv, d, T, win;
    const float *Q, *K, *V;
    size_t stride;
    double *out, *bout, *mass, *bmass, *wp, *bwp;   /* reference and bound, [like the outputs] */
} Ref;

/* Query row q of every head: float64 probabilities, out, window rows, and the bounds.
 * The mass terms are kept per row (mrow [H][T]) and summed in order afterwards. */
typedef struct {
    Ref *r;
    double *mrow, *brow;   /* [T][H][T]: too big at 8K, so rows are done in blocks */
    int q0;
} RowJob;

static void ref_row(void *ctx, int qi) {
    RowJob *jb = ctx;
    Ref *r = jb->r;
    const int q = jb->q0 + qi, H = r->H, d = r->d, g = H / r->Hkv, n = q + 1, T = r->T;
    const double scale = 1.0 / sqrt((double)d), u = ldexp(1, -8) + ldexp(1, -16) + d * ldexp(1, -24);
    const double gam = (n + 8) * ldexp(1, -24);
    double *s = malloc(sizeof(double) * n), *e = malloc(sizeof(double) * n);
    for (int h = 0; h < H; h++) {
        const float *qv = r->Q + ((size_t)q * H + h) * d;
        const float *K = r->K + (size_t)(h / g) * r->stride, *V = r->V + (size_t)(h / g) * r->stride;
        double mx = -INFINITY, delta = 0;
        for (int k = 0; k < n; k++) {
            double acc = 0, aa = 0;
            for (int c = 0; c < d; c++) {
                acc += (double)qv[c] * K[(size_t)k * d + c];
                aa += fabs((double)qv[c] * K[(size_t)k * d + c]);
            }
            s[k] = acc * scale;
            e[k] = aa * scale * u + fabs(s[k]) * ldexp(1, -22);   /* + the scale's and the exp's f32 rounding */
            if (s[k] > mx) mx = s[k];
            if (e[k] > delta) delta = e[k];
        }
        double l = 0;
        for (int k = 0; k < n; k++) l += exp(s[k] - mx);
        const double fp = exp(2 * delta) * (1 + gam) - 1, fo = exp(2 * delta) * (1 + gam) * (1 + u + gam) - 1;
        double *mr = jb->mrow + ((size_t)qi * H + h) * T, *br = jb->brow + ((size_t)qi * H + h) * T;
        double *o = r->out + ((size_t)q * H + h) * d, *bo = r->bout + ((size_t)q * H + h) * d;
        for (int c = 0; c < d; c++) o[c] = bo[c] = 0;
        for (int k = 0; k < n; k++) {
            double p = exp(s[k] - mx) / l;
            mr[k] = p;
            br[k] = p * fp;
            for (int c = 0; c < d; c++) {
                o[c] += p * V[(size_t)k * d + c];
                bo[c] += p * fabs((double)V[(size_t)k * d + c]);
            }
        }
        for (int k = n; k < T; k++) mr[k] = br[k] = 0;
        for (int c = 0; c < d; c++) bo[c] = bo[c] * fo + 1e-30;
        if (q >= T - r->win)
            for (int k = 0; k < T; k++) {
                r->wp[((size_t)h * r->win + q - (T - r->win)) * T + k] = mr[k];
                r->bwp[((size_t)h * r->win + q - (T - r->win)) * T + k] = br[k] + 1e-30;
            }
    }
    free(s);
    free(e);
}

static void reference(Ref *r) {
    const int T = r->T, H = r->H, blk = 64;
    RowJob jb = {r, malloc(sizeof(double) * blk * H * T), malloc(sizeof(double) * blk * H * T), 0};
    for (size_t i = 0; i < (size_t)H * T; i++) r->mass[i] = r->bmass[i] = 0;
    for (jb.q0 = 0; jb.q0 < T; jb.q0 += blk) {
        int nb = T - jb.q0 < blk ? T - jb.q0 : blk;
        kb_parallel_for(nb, ref_row, &jb);
        for (int qi = 0; qi < nb; qi++)   /* in query order */
            for (int h = 0; h < H; h++)
                for (int k = 0; k < T; k++) {
                    r->mass[(size_t)h * T + k] += jb.mrow[((size_t)qi * H + h) * T + k];
                    r->bmass[(size_t)h * T + k] += jb.brow[((size_t)qi * H + h) * T + k];
                }
    }
    for (size_t i = 0; i < (size_t)H * T; i++) r->bmass[i] += T * ldexp(1, -24) * r->mass[i] + 1e-30;
    free(jb.mrow);
    free(jb.brow);
}

/* Largest |x - ref| / bound (> 1 fails), and the largest |x - ref| and relative l2 error. */
typedef struct {
    double ratio, abs, rel;
} Err;
static Err err_of(const float *x, const double *ref, const double *bound, size_t n) {
    Err e = {0, 0, 0};
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double a = fabs((double)x[i] - ref[i]);
        if (!(a == a)) a = INFINITY;
        if (a / bound[i] > e.ratio) e.ratio = a / bound[i];
        if (a > e.abs) e.abs = a;
        num += a * a;
        den += ref[i] * ref[i];
    }
    e.rel = den > 0 ? sqrt(num / den) : sqrt(num);
    return e;
}

/* The host-pointer prefill in two chunks on backend be; outputs as the core.h contract. */
static void run(const kb_backend *be, const Ref *r, float *out, float *mass, float *wp) {
    const int T = r->T, H = r->H, d = r->d, c1 = T / 3 + 1;
    for (size_t i = 0; i < (size_t)H * T; i++) mass[i] = 0;
    test_poison(out, (size_t)T * H * d);
    test_poison(wp, (size_t)H * r->win * T);
    for (int t0 = 0; t0 < T;) {
        int m = t0 == 0 ? c1 : T - c1;
        kb_prefill_args a = {.H = H, .Hkv = r->Hkv, .d = d, .t0 = t0, .m = m, .Q = r->Q + (size_t)t0 * H * d,
                             .K = r->K, .V = r->V, .kv_stride = r->stride, .out = out + (size_t)t0 * H * d,
                             .col_mass = mass, .mass_ld = (size_t)T, .win_probs = wp, .win = r->win,
                             .win_start = T - r->win, .win_ld = (size_t)T};
        be->prefill(&a);
        t0 += m;
    }
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int g_no_f32;

static void one_case(int H, int Hkv, int d, int T, int win, float qscale) {
    const size_t stride = (size_t)T * d + 5, nq = (size_t)T * H * d, nm = (size_t)H * T, nw = (size_t)H * win * T;
    float *Q = fmalloc(nq), *K = fmalloc(stride * Hkv), *V = fmalloc(stride * Hkv);
    test_fill(Q, nq, qscale);
    test_fill(K, stride * Hkv, 1.0f);
    test_fill(V, stride * Hkv, 1.0f);
    Ref r = {H, Hkv, d, T, win, Q, K, V, stride, malloc(sizeof(double) * nq), malloc(sizeof(double) * nq),
             malloc(sizeof(double) * nm), malloc(sizeof(double) * nm), malloc(sizeof(double) * nw),
             malloc(sizeof(double) * nw)};
    reference(&r);
    float *out[3], *mass[3], *wp[3];   /* cpu, cuda f32 kernels, cuda tensor cores */
    for (int b = 0; b < 3; b++) {
        out[b] = fmalloc(nq);
        mass[b] = fmalloc(nm);
        wp[b] = fmalloc(nw);
    }
    double ms[3] = {0, -1, 0}, t = now_ms();
    run(kb_cpu(), &r, out[0], mass[0], wp[0]);
    ms[0] = now_ms() - t;
    if (!g_no_f32) {
        kb_cuda_prefill_mode(0, 0, 0);
        t = now_ms();
        run(kb_cuda(NULL), &r, out[1], mass[1], wp[1]);
        ms[1] = now_ms() - t;
    }
    kb_cuda_prefill_mode(1, 0, 0);
    CHECK(kb_cuda_prefill_tc() == 1, "the tensor-core path is not selected");
    t = now_ms();
    run(kb_cuda(NULL), &r, out[2], mass[2], wp[2]);
    ms[2] = now_ms() - t;
    /* wall time of the host-pointer calls (copies in and out included), second run of a shape
     * not separated from the first: indicative only */
    printf("T=%d H=%d time: cpu %.1f ms, cuda f32 %.1f ms, cuda tensor cores %.1f ms\n", T, H, ms[0], ms[1], ms[2]);
    const char *name[3] = {"cpu f32", "cuda f32", "cuda tensor cores"};
    for (int b = 0; b < 3; b += 2) {
        Err eo = err_of(out[b], r.out, r.bout, nq), em = err_of(mass[b], r.mass, r.bmass, nm),
            ew = err_of(wp[b], r.wp, r.bwp, nw);
        printf("T=%d H=%d Hkv=%d d=%d win=%d qscale=%.2f %-17s vs float64: out max %.3g (rel l2 %.3g, %.2f of bound), "
               "mass max %.3g (%.2f), window max %.3g (%.2f)\n",
               T, H, Hkv, d, win, qscale, name[b], eo.abs, eo.rel, eo.ratio, em.abs, em.ratio, ew.abs, ew.ratio);
        CHECK(eo.ratio <= 1 && em.ratio <= 1 && ew.ratio <= 1, "%s T=%d: beyond the bf16 bound (out %.3g, mass %.3g, "
              "window %.3g of it)", name[b], T, eo.ratio, em.ratio, ew.ratio);
    }
    /* the tensor-core path also against the CPU twin: within the bound plus the CPU's own error */
    double tw = 0;
    for (size_t i = 0; i < nq; i++) {
        double a = fabs((double)out[2][i] - out[0][i]) / (r.bout[i] + fabs((double)out[0][i] - r.out[i]));
        if (!(a <= tw)) tw = a;
    }
    CHECK(tw <= 1, "T=%d: tensor cores vs the CPU twin: %.3g of the bound", T, tw);
    printf("T=%d tensor cores vs cpu: out %.3g, mass %.3g, window %.3g (rel l2)\n", T, rel_f(out[2], out[0], nq),
           rel_f(mass[2], mass[0], nm), rel_f(wp[2], wp[0], nw));
    if (!g_no_f32) {
        double e1 = rel_f(out[1], out[0], nq), m1 = rel_f(mass[1], mass[0], nm), w1 = rel_f(wp[1], wp[0], nw);
        printf("T=%d cuda f32 vs cpu: out %.3g, mass %.3g, window %.3g (rel l2)\n", T, e1, m1, w1);
        CHECK(e1 < 1e-5 && m1 < 1e-5 && w1 < 1e-5, "T=%d: the f32 device path vs the CPU: %.3g %.3g %.3g", T, e1, m1,
              w1);
    }
    for (int b = 0; b < 3; b++) { free(out[b]); free(mass[b]); free(wp[b]); }
    free(r.out); free(r.bout); free(r.mass); free(r.bmass); free(r.wp); free(r.bwp);
    free(Q); free(K); free(V);
}

#endif

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    test_seed();
    const char *why = NULL;
    const kb_backend *cuda = kb_cuda(&why);
    if (!cuda) {
#ifdef KB_CUDA
        CHECK(why && *why, "kb_cuda NULL without a reason");
#else
        CHECK(why && strstr(why, "CUDA=1"), "a CPU build must say it was built without CUDA (got: %s)",
              why ? why : "nothing");
#endif
        printf("cuda backend not tested: %s\n", why ? why : "?");
        return check_done("test_cuda_prefill_tc");
    }
#ifdef KB_CUDA
    int T = argc > 1 ? atoi(argv[1]) : 0;
    if ((argc > 1 && T < 8) || (argc > 2 && strcmp(argv[2], "--no-f32")) || argc > 3) {
        fprintf(stderr, "usage: test_cuda_prefill_tc [T >= 8 [--no-f32]]\n");
        return 2;
    }
    g_no_f32 = argc > 2;
    if (T) {   /* the device's tiles, Llama-3-8B's head shape (g = 4, d = 128) */
        one_case(8, 2, 128, T, 32, 1.0f);
        one_case(4, 1, 128, T, 16, 2.5f);   /* peakier rows */
    } else {   /* tiles of 24..64 rows by 16..40 keys: several of each, ragged ends */
        kb_cuda_prefill_mode(1, test_int(24, 64), test_int(16, 40));
        one_case(4, 2, 64, test_int(90, 160), test_int(1, 12), 1.0f);
        one_case(6, 2, 40, test_int(60, 120), 5, 2.5f);      /* d not a multiple of 8; g = 3 */
        one_case(8, 1, 128, test_int(40, 80), 3, 1.5f);      /* g = 8: tiles of 3..8 queries */
        kb_cuda_prefill_mode(1, 2048, 1024);
    }
#endif
    return check_done("test_cuda_prefill_tc");
}

/* sekv_svd (SeKV's span factorisation) against LAPACK's dgesvd in double on fresh random
 * matrices of many shapes and spectra: Gaussian, graded over six decades, exactly rank
 * deficient, repeated singular values, key-like rows (a shared direction plus noise), the
 * zero matrix. Checks singular values, orthonormal vectors, the rank-r error against the
 * optimum (Eckart-Young), the sign rule, bit-identical repeats on the worker threads, and
 * the refusals. */
#include "check.h"
#include "../kernels/core.h"
#include "../methods/sekv/sekv_spans.h"
#include <lapacke.h>
#include <math.h>
#include <string.h>

enum { GAUSS, GRADED, DEFICIENT, REPEATED, KEYLIKE, ZERO, N_KINDS };
static const char *kind_name[N_KINDS] = {"gaussian", "graded", "rank-deficient", "repeated", "key-like", "zero"};

/* A [len][d] = Q1 diag(sig) Q2^T with random orthonormal Q1, Q2 (Gram-Schmidt in double). */
static void orthonormal(double *Q, int rows, int k) {
    for (int c = 0; c < k; c++) {
        for (int pass = 0; pass < 3; pass++) {
            if (pass == 0)
                for (int i = 0; i < rows; i++) Q[(size_t)i * k + c] = test_normal();
            for (int p = 0; p < c; p++) {
                double dot = 0;
                for (int i = 0; i < rows; i++) dot += Q[(size_t)i * k + c] * Q[(size_t)i * k + p];
                for (int i = 0; i < rows; i++) Q[(size_t)i * k + c] -= dot * Q[(size_t)i * k + p];
            }
        }
        double nn = 0;
        for (int i = 0; i < rows; i++) nn += Q[(size_t)i * k + c] * Q[(size_t)i * k + c];
        for (int i = 0; i < rows; i++) Q[(size_t)i * k + c] /= sqrt(nn);
    }
}

static void with_spectrum(float *A, int len, int d, const double *sig, int k) {
    double *Q1 = malloc((size_t)len * k * sizeof *Q1), *Q2 = malloc((size_t)d * k * sizeof *Q2);
    orthonormal(Q1, len, k);
    orthonormal(Q2, d, k);
    for (int t = 0; t < len; t++)
        for (int j = 0; j < d; j++) {
            double s = 0;
            for (int i = 0; i < k; i++) s += Q1[(size_t)t * k + i] * sig[i] * Q2[(size_t)j * k + i];
            A[(size_t)t * d + j] = (float)s;
        }
    free(Q1), free(Q2);
}

static void make(int kind, float *A, int len, int d) {
    int k = len < d ? len : d;
    double *sig = malloc((size_t)k * sizeof *sig);
    switch (kind) {
    case GAUSS: test_fill(A, (size_t)len * d, 2.0f); break;
    case GRADED:
        for (int i = 0; i < k; i++) sig[i] = 50.0 * pow(10.0, -6.0 * i / (k > 1 ? k - 1 : 1));
        with_spectrum(A, len, d, sig, k);
        break;
    case DEFICIENT: {   /* rows are combinations of q < k random rows: rank q */
        int q = test_int(1, k > 1 ? k - 1 : 1);
        float *B = malloc((size_t)q * d * sizeof *B);
        test_fill(B, (size_t)q * d, 1.0f);
        for (int t = 0; t < len; t++)
            for (int j = 0; j < d; j++) {
                double s = 0;
                for (int i = 0; i < q; i++)
                    s += (t == i ? 1.0 : (double)((t * 7 + i * 3) % 5 - 2)) * B[(size_t)i * d + j];
                A[(size_t)t * d + j] = (float)s;
            }
        free(B);
        break;
    }
    case REPEATED:   /* values in groups of three equal ones: 4, 4, 4, 2, 2, 2, 1, ... */
        for (int i = 0; i < k; i++) sig[i] = 4.0 / (1 << (i / 3 < 20 ? i / 3 : 20));
        with_spectrum(A, len, d, sig, k);
        break;
    case KEYLIKE: {   /* a large shared direction (keys of one span look alike) plus noise */
        float *base = malloc((size_t)d * sizeof *base);
        test_fill(base, (size_t)d, 8.0f);
        for (int t = 0; t < len; t++)
            for (int j = 0; j < d; j++)
                A[(size_t)t * d + j] = base[j] * (1 + 0.1f * test_normal()) + 0.3f * test_normal();
        free(base);
        break;
    }
    case ZERO: memset(A, 0, (size_t)len * d * sizeof *A); break;
    }
    free(sig);
}

/* Reference: every singular value of A in double (dgesvd). */
static void ref_values(const float *A, int len, int d, double *sig) {
    int k = len < d ? len : d;
    double *a = malloc((size_t)len * d * sizeof *a), *sup = malloc((size_t)k * sizeof *sup);
    for (size_t i = 0; i < (size_t)len * d; i++) a[i] = A[i];
    int info = LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'N', 'N', len, d, a, d, sig, NULL, 1, NULL, 1, sup);
    CHECK(info == 0, "dgesvd failed (%d)", info);
    free(a), free(sup);
}

/* max |X X^T - I| over the rows of X [r][m] whose flag is set (NULL = all). */
static double orth_err(const float *X, int r, int m, size_t rs, size_t cs, const int *use) {
    double worst = 0;
    for (int p = 0; p < r; p++)
        for (int q = 0; q <= p; q++) {
            if (use && (!use[p] || !use[q])) continue;
            double s = 0;
            for (int i = 0; i < m; i++) s += (double)X[p * rs + i * cs] * X[q * rs + i * cs];
            worst = fmax(worst, fabs(s - (p == q)));
        }
    return worst;
}

static void check_one(int kind, int len, int d, int r) {
    int k = len < d ? len : d;
    float *A = malloc((size_t)len * d * sizeof *A), *U = malloc((size_t)len * r * sizeof *U);
    float *S = malloc((size_t)r * sizeof *S), *Vt = malloc((size_t)r * d * sizeof *Vt);
    float *U2 = malloc((size_t)len * r * sizeof *U2), *S2 = malloc((size_t)r * sizeof *S2),
          *Vt2 = malloc((size_t)r * d * sizeof *Vt2);
    double *sig = malloc((size_t)k * sizeof *sig);
    make(kind, A, len, d);
    ref_values(A, len, d, sig);
    test_poison(U, (size_t)len * r), test_poison(S, (size_t)r), test_poison(Vt, (size_t)r * d);
    const char *kn = kind_name[kind];
    int rc = sekv_svd(A, len, d, r, U, S, Vt);
    CHECK(rc == 0, "%s %dx%d r=%d: failed", kn, len, d, r);
    if (rc) goto out;
    double s0 = sig[0], anorm = 0;
    for (int i = 0; i < k; i++) anorm += sig[i] * sig[i];
    anorm = sqrt(anorm);
    double worst_s = 0;
    for (int i = 0; i < r; i++) worst_s = fmax(worst_s, fabs(S[i] - sig[i]));
    CHECK(worst_s <= 2e-6 * s0 + 1e-30, "%s %dx%d r=%d: singular values off by %g (s1 %g)", kn, len, d, r, worst_s, s0);
    for (int i = 1; i < r; i++) CHECK(S[i] <= S[i - 1], "%s: values not descending at %d", kn, i);
    /* Vectors: the Gram side is orthonormal always, the derived side where s is not tiny. */
    int *big = malloc((size_t)r * sizeof *big);
    for (int i = 0; i < r; i++) big[i] = S[i] > 1e-3 * s0;
    int tall = len >= d;
    double ov = orth_err(Vt, r, d, (size_t)d, 1, tall || kind == ZERO ? NULL : big);
    double ou = orth_err(U, r, len, 1, (size_t)r, tall ? big : NULL);
    if (kind != ZERO) CHECK(ov < 1e-5 && ou < 1e-5, "%s %dx%d r=%d: |VV^T-I| %g, |UU^T-I| %g", kn, len, d, r, ov, ou);
    else CHECK(ov < 1e-6, "zero matrix: Vt rows not orthonormal (%g)", ov);
    free(big);
    /* rank-r error against the optimum */
    double e2 = 0;
    for (int t = 0; t < len; t++)
        for (int j = 0; j < d; j++) {
            double s = 0;
            for (int i = 0; i < r; i++) s += (double)U[(size_t)t * r + i] * S[i] * Vt[(size_t)i * d + j];
            e2 += (s - A[(size_t)t * d + j]) * (s - A[(size_t)t * d + j]);
        }
    double opt = 0;
    for (int i = r; i < k; i++) opt += sig[i] * sig[i];
    double err = sqrt(e2), want = sqrt(opt);
    CHECK(fabs(err - want) <= 2e-6 * anorm + 1e-4 * want + 1e-30, "%s %dx%d r=%d: error %g, optimum %g (|A| %g)", kn,
          len, d, r, err, want, anorm);
    /* sign rule: the largest-magnitude entry of each Vt row is positive */
    for (int i = 0; i < r && kind != ZERO; i++) {
        int best = 0;
        for (int j = 1; j < d; j++)
            if (fabsf(Vt[(size_t)i * d + j]) > fabsf(Vt[(size_t)i * d + best])) best = j;
        CHECK(Vt[(size_t)i * d + best] > 0 || S[i] == 0, "%s: row %d of Vt has its largest entry negative", kn, i);
    }
    /* the same bits again */
    test_poison(U2, (size_t)len * r), test_poison(S2, (size_t)r), test_poison(Vt2, (size_t)r * d);
    sekv_svd(A, len, d, r, U2, S2, Vt2);
    CHECK(!memcmp(U, U2, (size_t)len * r * sizeof *U) && !memcmp(S, S2, (size_t)r * sizeof *S) &&
              !memcmp(Vt, Vt2, (size_t)r * d * sizeof *Vt),
          "%s %dx%d: a second call differs", kn, len, d);
out:
    free(A), free(U), free(S), free(Vt), free(U2), free(S2), free(Vt2), free(sig);
}

/* ------------------------------------------------------------ threads */

enum { NPAR = 24, PL = 64, PD = 64, PR = 32 };
typedef struct {
    float *A, *U, *S, *Vt;
} par_ctx;

static void par_task(void *c_, int i) {
    par_ctx *c = c_;
    sekv_svd(c->A + (size_t)i * PL * PD, PL, PD, PR, c->U + (size_t)i * PL * PR, c->S + (size_t)i * PR,
             c->Vt + (size_t)i * PR * PD);
}

static void test_threads(void) {
    par_ctx c = {malloc((size_t)NPAR * PL * PD * sizeof(float)), malloc((size_t)NPAR * PL * PR * sizeof(float)),
                 malloc((size_t)NPAR * PR * sizeof(float)), malloc((size_t)NPAR * PR * PD * sizeof(float))};
    float U[PL * PR], S[PR], Vt[PR * PD];
    for (int i = 0; i < NPAR; i++) make(i % 2 ? KEYLIKE : GAUSS, c.A + (size_t)i * PL * PD, PL, PD);
    kb_parallel_for(NPAR, par_task, &c);
    int same = 1;
    for (int i = 0; i < NPAR; i++) {
        sekv_svd(c.A + (size_t)i * PL * PD, PL, PD, PR, U, S, Vt);
        same &= !memcmp(U, c.U + (size_t)i * PL * PR, sizeof U) && !memcmp(S, c.S + (size_t)i * PR, sizeof S) &&
                !memcmp(Vt, c.Vt + (size_t)i * PR * PD, sizeof Vt);
    }
    CHECK(same, "factors computed on %d worker threads differ from serial ones", kb_threads());
    free(c.A), free(c.U), free(c.S), free(c.Vt);
}

static void test_refusals(void) {
    float A[16 * 8], U[16 * 8], S[8], Vt[8 * 8];
    test_fill(A, 16 * 8, 1.0f);
    CHECK(sekv_svd(A, 16, 8, 9, U, S, Vt) == -1, "rank above min(len, d) accepted");
    CHECK(sekv_svd(A, 0, 8, 1, U, S, Vt) == -1 && sekv_svd(A, 16, 8, 0, U, S, Vt) == -1, "empty shapes accepted");
    A[test_int(0, 16 * 8 - 1)] = NAN;
    CHECK(sekv_svd(A, 16, 8, 4, U, S, Vt) == -1, "NaN input accepted");
}

int main(void) {
    test_seed();
    static const int ds[] = {1, 7, 16, 64};
    for (int kind = 0; kind < N_KINDS; kind++)
        for (int di = 0; di < 4; di++)
            for (int rep = 0; rep < 3; rep++) {
                int d = ds[di];
                int len = rep == 0 ? test_int(1, 3) : rep == 1 ? test_int(d > 4 ? d - 4 : 1, d + 4) : test_int(4, 130);
                int k = len < d ? len : d;
                int r = rep == 2 ? test_int(1, k < SEKV_RMAX ? k : SEKV_RMAX) : (k < SEKV_RMAX ? k : SEKV_RMAX);
                check_one(kind, len, d, r);
            }
    /* SeKV's own shapes: 64-dim heads, spans up to l_max = 256, ranks 8 / 32 / 64 */
    static const int Rs[] = {8, 32, 64};
    for (int kind = 0; kind < N_KINDS; kind++)
        for (int ri = 0; ri < 3; ri++) {
            int len = test_int(4, 256), k = len < 64 ? len : 64;
            check_one(kind, len, 64, k < Rs[ri] ? k : Rs[ri]);
        }
    test_threads();
    test_refusals();
    return check_done("test_sekv_svd");
}

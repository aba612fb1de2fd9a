/* SeKV's span factorisation (see sekv_svd in sekv_spans.h): an exact truncated SVD of a
 * small row-major float matrix A [len][d], computed in double through the Gram matrix of
 * its smaller side (n = min(len, d)):
 *
 *   G = A^T A  [d][d]  when len >= d (right vectors first),  else  G = A A^T  [len][len];
 *   G = Q T Q^T        Householder reflections, T tridiagonal;
 *   top-r eigenvalues  bisection on Sturm counts, all r at once;
 *   their vectors      inverse iteration on T, re-orthogonalised against the vectors of
 *                      close eigenvalues (the scheme of LAPACK's dstein);
 *   x_i = Q z_i        back through the reflections (r vectors only);
 *   other side         y_i = A x_i / s_i (or x_i^T A / s_i) with s_i = |A x_i| in double,
 *                      which keeps small singular values accurate to ~eps * s_1 where
 *                      sqrt(lambda_i) would give only ~1e-8 * s_1.
 *
 * Only the r requested vectors are formed: on SeKV's 64 x 64 blocks at rank 32 this takes
 * about half the time of LAPACK's sgesdd, and it is plain C: thread safe, deterministic,
 * the same on every backend. Signs follow kb_svd_fix_signs: each row of Vt has its
 * largest-magnitude entry positive. A singular value of exactly 0 gets a zero vector on
 * the derived side (the reconstruction does not need it). */
#include "sekv_spans.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* x . y with four partial sums (a fixed order, so deterministic, and one the compiler
 * can vectorise). */
static double dot(const double *x, const double *y, int n) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += x[i] * y[i];
        s1 += x[i + 1] * y[i + 1];
        s2 += x[i + 2] * y[i + 2];
        s3 += x[i + 3] * y[i + 3];
    }
    for (; i < n; i++) s0 += x[i] * y[i];
    return (s0 + s1) + (s2 + s3);
}

/* G [n][n] = A^T A (len >= d) or A A^T, from Ad [len][d] in double; both triangles. */
static void gram(const double *Ad, int len, int d, double *G) {
    int n = len < d ? len : d;
    if (len >= d) {   /* outer products of rows, four at a time, lower triangle */
        memset(G, 0, (size_t)d * d * sizeof *G);
        int t = 0;
        for (; t + 4 <= len; t += 4) {
            const double *a0 = Ad + (size_t)t * d, *a1 = a0 + d, *a2 = a1 + d, *a3 = a2 + d;
            for (int i = 0; i < d; i++) {
                double x0 = a0[i], x1 = a1[i], x2 = a2[i], x3 = a3[i], *g = G + (size_t)i * d;
                for (int j = 0; j <= i; j++) g[j] += x0 * a0[j] + x1 * a1[j] + x2 * a2[j] + x3 * a3[j];
            }
        }
        for (; t < len; t++) {
            const double *a = Ad + (size_t)t * d;
            for (int i = 0; i < d; i++) {
                double x = a[i], *g = G + (size_t)i * d;
                for (int j = 0; j <= i; j++) g[j] += x * a[j];
            }
        }
    } else {          /* dot products of rows */
        for (int s = 0; s < len; s++)
            for (int t = 0; t <= s; t++) G[(size_t)s * len + t] = dot(Ad + (size_t)s * d, Ad + (size_t)t * d, d);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++) G[(size_t)j * n + i] = G[(size_t)i * n + j];
}

/* Householder tridiagonalisation of the symmetric G [n][n] (destroyed): diagonal a [n],
 * off-diagonal b [n-1] (b[k] couples k and k+1), reflector k in row k of hv [n][n] (unit,
 * nonzero from column k+1 on; all zero when the column was already reduced). p [n]
 * scratch. */
static void tridiagonalise(double *G, int n, double *a, double *b, double *hv, double *p) {
    memset(hv, 0, (size_t)n * n * sizeof *hv);
    for (int k = 0; k + 2 < n; k++) {
        double *v = hv + (size_t)k * n, nx = 0;
        for (int i = k + 1; i < n; i++) v[i] = G[(size_t)i * n + k], nx += v[i] * v[i];
        a[k] = G[(size_t)k * n + k];
        double beta = v[k + 1] > 0 ? -sqrt(nx) : sqrt(nx);
        v[k + 1] -= beta;
        double nv = 0;
        for (int i = k + 1; i < n; i++) nv += v[i] * v[i];
        if (nv <= DBL_MIN) {   /* the column is already reduced: no reflection */
            b[k] = G[(size_t)(k + 1) * n + k];
            for (int i = k + 1; i < n; i++) v[i] = 0;
            continue;
        }
        b[k] = beta;
        nv = 1 / sqrt(nv);
        for (int i = k + 1; i < n; i++) v[i] *= nv;
        /* G <- H G H on the trailing block, H = I - 2 v v^T: p = G v (rows of the
         * symmetric block added up, whole rows so the loops run long), w = p - (v.p) v,
         * G -= 2 (v w^T + w v^T). */
        for (int i = k + 1; i < n; i++) p[i] = 0;
        for (int i = k + 1; i < n; i++) {
            const double *g = G + (size_t)i * n;
            double vi = v[i];
            for (int j = k + 1; j < n; j++) p[j] += g[j] * vi;
        }
        double vp = dot(v + k + 1, p + k + 1, n - k - 1);
        for (int i = k + 1; i < n; i++) p[i] -= vp * v[i];
        for (int i = k + 1; i < n; i++) {
            double *g = G + (size_t)i * n, vi = 2 * v[i], pi = 2 * p[i];
            for (int j = k + 1; j < n; j++) g[j] -= vi * p[j] + pi * v[j];
        }
    }
    if (n >= 2) {
        a[n - 2] = G[(size_t)(n - 2) * n + n - 2];
        b[n - 2] = G[(size_t)(n - 1) * n + n - 2];
    }
    a[n - 1] = G[(size_t)(n - 1) * n + n - 1];
}

/* The r largest eigenvalues of the tridiagonal (a, b), descending, by bisection on Sturm
 * counts: the number of negative pivots of the LDL^T factorisation of T - x I is the
 * number of eigenvalues below x. Every eigenvalue is bisected at once (SEKV_SVD_STEPS
 * halvings of the Gershgorin interval), one lane each, so the divisions of the pivot
 * recurrences run side by side instead of waiting on each other. work: 4 r + n doubles. */
enum { SEKV_SVD_STEPS = 54 };   /* 2^-54 of the interval: ~eps |T|, as good as T itself. Less
                                   would do for well separated values, but small ones that
                                   differ by ~1e-12 |T| (a graded spectrum) need it for
                                   inverse iteration to tell their vectors apart */

static void top_eigenvalues(const double *a, const double *b, int n, int r, double *lam, double *work) {
    double *lo = work, *hi = lo + r, *cnt = hi + r, *qv = cnt + r, *b2 = qv + r;
    double gl = INFINITY, gu = -INFINITY, bmax = 0;
    for (int i = 0; i < n; i++) {
        double off = (i > 0 ? fabs(b[i - 1]) : 0) + (i + 1 < n ? fabs(b[i]) : 0);
        gl = fmin(gl, a[i] - off);
        gu = fmax(gu, a[i] + off);
        if (i + 1 < n) b2[i] = b[i] * b[i], bmax = fmax(bmax, b2[i]);
    }
    double pivmin = DBL_MIN * fmax(1, bmax), pad = 4 * DBL_EPSILON * fmax(fabs(gl), fabs(gu)) + pivmin;
    for (int k = 0; k < r; k++) lo[k] = gl - pad, hi[k] = gu + pad;
    for (int step = 0; step < SEKV_SVD_STEPS; step++) {
        double *x = lam;   /* lam holds the midpoints meanwhile */
        for (int k = 0; k < r; k++) x[k] = 0.5 * (lo[k] + hi[k]), cnt[k] = 0;
        for (int k = 0; k < r; k++) {
            double t = a[0] - x[k];
            t = fabs(t) < pivmin ? -pivmin : t;
            qv[k] = t;
            cnt[k] += t < 0 ? 1.0 : 0.0;
        }
        for (int i = 1; i < n; i++) {
            double ai = a[i], bi = b2[i - 1];
            for (int k = 0; k < r; k++) {
                double t = ai - x[k] - bi / qv[k];
                t = fabs(t) < pivmin ? -pivmin : t;
                qv[k] = t;
                cnt[k] += t < 0 ? 1.0 : 0.0;
            }
        }
        /* eigenvalue k (k-th largest) has n-1-k below it */
        for (int k = 0; k < r; k++) {
            if (cnt[k] <= n - 1 - k) lo[k] = x[k];
            else hi[k] = x[k];
        }
    }
    for (int k = 0; k < r; k++) lam[k] = 0.5 * (lo[k] + hi[k]);
}

/* LU factorisation with partial pivoting of the tridiagonal T - lambda I (a, b): row
 * interchanges swap, multipliers mult, upper factor with reciprocal diagonal u0 and two
 * superdiagonals u1, u2. Pivots smaller than tiny become +-tiny (inverse iteration wants
 * the near-singular solve). */
typedef struct {
    double *u0, *u1, *u2, *mult;
    unsigned char *swap;
} tri_lu;

static void shifted_factor(const double *a, const double *b, int n, double lambda, double tiny, tri_lu *f) {
    double cd = a[0] - lambda, ce = n > 1 ? b[0] : 0;
    for (int i = 0; i + 1 < n; i++) {
        double c = b[i], dn = a[i + 1] - lambda, en = i + 2 < n ? b[i + 1] : 0, piv;
        if (fabs(cd) >= fabs(c)) {
            f->swap[i] = 0;
            piv = cd;
            f->u1[i] = ce, f->u2[i] = 0;
            f->mult[i] = cd != 0 ? c / cd : 0;
            cd = dn - f->mult[i] * ce;
            ce = en;
        } else {
            f->swap[i] = 1;
            piv = c;
            f->u1[i] = dn, f->u2[i] = en;
            f->mult[i] = cd / c;
            cd = ce - f->mult[i] * dn;
            ce = -f->mult[i] * en;
        }
        f->u0[i] = 1 / (fabs(piv) < tiny ? (piv < 0 ? -tiny : tiny) : piv);
    }
    f->u0[n - 1] = 1 / (fabs(cd) < tiny ? (cd < 0 ? -tiny : tiny) : cd);
}

/* x <- (T - lambda I)^-1 x with the factors. */
static void shifted_solve(const tri_lu *f, int n, double *x) {
    for (int i = 0; i + 1 < n; i++) {
        if (f->swap[i]) {
            double t = x[i];
            x[i] = x[i + 1];
            x[i + 1] = t;
        }
        x[i + 1] -= f->mult[i] * x[i];
    }
    x[n - 1] *= f->u0[n - 1];
    if (n >= 2) x[n - 2] = (x[n - 2] - f->u1[n - 2] * x[n - 1]) * f->u0[n - 2];
    for (int i = n - 3; i >= 0; i--) x[i] = (x[i] - f->u1[i] * x[i + 1] - f->u2[i] * x[i + 2]) * f->u0[i];
}

static void normalise(double *x, int n) {
    double s = dot(x, x, n);
    s = s > 0 ? 1 / sqrt(s) : 0;
    for (int i = 0; i < n; i++) x[i] *= s;
}

/* Eigenvectors z_j [r][n] of the tridiagonal (a, b) for the eigenvalues lam[0..r)
 * (descending): inverse iteration from a fixed start, each solve followed by Gram-Schmidt
 * against the earlier vectors of its cluster, as in LAPACK's dstein. With eigenvalues
 * good to ~eps |T| a solve shrinks every other eigenvector by eps |T| / gap, so two
 * solves leave vectors of eigenvalues further apart than 1e-6 |T| orthogonal to ~1e-16;
 * closer ones form a cluster and get three. Eigenvalues closer than 10 eps |T| are
 * pulled apart so the solves differ. work: 5n doubles + n bytes after them. */
static void tridiag_vectors(const double *a, const double *b, int n, const double *lam, int r, double *Z,
                            double *work) {
    double tnorm = 0;
    for (int i = 0; i < n; i++) {
        double row = fabs(a[i]) + (i > 0 ? fabs(b[i - 1]) : 0) + (i + 1 < n ? fabs(b[i]) : 0);
        if (row > tnorm) tnorm = row;
    }
    double tiny = DBL_EPSILON * tnorm > DBL_MIN ? DBL_EPSILON * tnorm : DBL_MIN;
    double ortol = 1e-6 * tnorm, pertol = 10 * tiny;
    tri_lu f = {work, work + n, work + 2 * n, work + 3 * n, (unsigned char *)(work + 4 * n)};
    int c0 = 0;   /* first vector of the current cluster */
    double prev = 0;
    for (int j = 0; j < r; j++) {
        double lj = lam[j];
        if (j > 0) {
            if (prev - lj > ortol) c0 = j;
            if (prev - lj < pertol) lj = prev - pertol;
        }
        prev = lj;
        double *z = Z + (size_t)j * n;
        uint32_t seed = 0x9e3779b9u;   /* a fixed, deterministic start vector */
        for (int i = 0; i < n; i++) {
            seed = seed * 1664525u + 1013904223u;
            z[i] = (double)(seed >> 8) / (double)(1u << 24) - 0.5;
        }
        shifted_factor(a, b, n, lj, tiny, &f);
        for (int it = 0; it < (c0 < j ? 3 : 2); it++) {
            shifted_solve(&f, n, z);
            for (int q = c0; q < j; q++) {   /* modified Gram-Schmidt within the cluster */
                const double *y = Z + (size_t)q * n;
                double yz = dot(y, z, n);
                for (int i = 0; i < n; i++) z[i] -= yz * y[i];
            }
            normalise(z, n);
        }
    }
}

/* X [n][r] <- Q X: the reflections applied in reverse order (inner loops along the r
 * vectors). w [r] scratch. */
static void back_transform(const double *hv, int n, double *X, int r, double *w) {
    for (int k = n - 3; k >= 0; k--) {
        const double *v = hv + (size_t)k * n;
        for (int q = 0; q < r; q++) w[q] = 0;
        for (int i = k + 1; i < n; i++) {
            const double *x = X + (size_t)i * r;
            double vi = v[i];
            for (int q = 0; q < r; q++) w[q] += vi * x[q];
        }
        for (int i = k + 1; i < n; i++) {
            double *x = X + (size_t)i * r, vi = 2 * v[i];
            for (int q = 0; q < r; q++) x[q] -= vi * w[q];
        }
    }
}

int sekv_svd(const float *A, int len, int d, int r, float *U, float *S, float *Vt) {
    int n = len < d ? len : d;
    if (len < 1 || d < 1 || r < 1 || r > n) return -1;
    int tall = len >= d;   /* the Gram side is the right (d) side */
    int m = tall ? len : d;   /* the other side */
    size_t nn = (size_t)n * n;
    double *Ad = malloc(((size_t)len * d + 3 * nn + 9 * (size_t)n + (size_t)r * m + 2 * (size_t)r) * sizeof *Ad);
    int *order = malloc((size_t)r * sizeof *order);
    if (!Ad || !order) {
        free(Ad), free(order);
        return -1;
    }
    double *G = Ad + (size_t)len * d, *hv = G + nn, *Z = hv + nn, *a = Z + nn, *b = a + n, *lam = b + n;
    double *work = lam + n;              /* 6n: scratch of each stage */
    double *Y = work + 6 * (size_t)n;    /* tall: [len][r] = U s; wide: [r][d] = s Vt */
    double *X = Z;                       /* [n][r] after the transpose below */
    double *ss = Y + (size_t)r * m, *w = ss + r;
    for (size_t i = 0; i < (size_t)len * d; i++) Ad[i] = A[i];
    gram(Ad, len, d, G);
    /* Scale so the largest diagonal is 1 (no overflow or underflow in the recurrences). */
    double gmax = 0;
    for (int i = 0; i < n; i++) {
        double gi = G[(size_t)i * n + i];
        if (gi > gmax || isnan(gi)) gmax = gi;   /* a NaN sticks: nothing compares above it */
    }
    if (!isfinite(gmax)) {   /* NaN or Inf in A (a NaN reaches a diagonal entry) */
        free(Ad), free(order);
        return -1;
    }
    if (gmax == 0) {   /* A = 0: zero values, any orthonormal vectors */
        memset(U, 0, (size_t)len * r * sizeof *U);
        memset(Vt, 0, (size_t)r * d * sizeof *Vt);
        for (int i = 0; i < r; i++) S[i] = 0, Vt[(size_t)i * d + i] = 1;
        free(Ad), free(order);
        return 0;
    }
    for (size_t i = 0; i < nn; i++) G[i] /= gmax;
    tridiagonalise(G, n, a, b, hv, work);
    top_eigenvalues(a, b, n, r, lam, work);
    tridiag_vectors(a, b, n, lam, r, Z, work);
    for (int q = 0; q < r; q++)   /* Z [r][n] -> X [n][r], in place through G's memory */
        for (int i = 0; i < n; i++) G[(size_t)i * r + q] = Z[(size_t)q * n + i];
    memcpy(X, G, (size_t)n * r * sizeof *X);
    back_transform(hv, n, X, r, w);
    /* The other side, y_q = A x_q (tall) or x_q^T A, and s_q = |y_q|. */
    for (int q = 0; q < r; q++) ss[q] = 0;
    if (tall) {
        for (int t = 0; t < len; t++) {
            const double *row = Ad + (size_t)t * d;
            double *y = Y + (size_t)t * r;
            for (int q = 0; q < r; q++) y[q] = 0;
            for (int j = 0; j < d; j++) {
                const double *x = X + (size_t)j * r;
                double aj = row[j];
                for (int q = 0; q < r; q++) y[q] += aj * x[q];
            }
            for (int q = 0; q < r; q++) ss[q] += y[q] * y[q];
        }
    } else {
        memset(Y, 0, (size_t)r * d * sizeof *Y);
        for (int t = 0; t < len; t++) {
            const double *row = Ad + (size_t)t * d, *x = X + (size_t)t * r;
            for (int q = 0; q < r; q++) {
                double *y = Y + (size_t)q * d, xq = x[q];
                for (int j = 0; j < d; j++) y[j] += xq * row[j];
            }
        }
        for (int q = 0; q < r; q++) ss[q] = dot(Y + (size_t)q * d, Y + (size_t)q * d, d);
    }
    /* Descending singular values (|A x_q| may reorder what the eigenvalues tied). */
    for (int q = 0; q < r; q++) {
        ss[q] = sqrt(ss[q]);
        int p = q;
        for (; p > 0 && ss[order[p - 1]] < ss[q]; p--) order[p] = order[p - 1];
        order[p] = q;
    }
    for (int o = 0; o < r; o++) {
        int q = order[o];
        double s = ss[q], inv = s > 0 ? 1 / s : 0;
        S[o] = (float)s;
        /* right vector v (d) and left vector u (len), before the sign fix */
        double vbest = 0;
        int best = -1;
        for (int j = 0; j < d; j++) {
            double vj = tall ? X[(size_t)j * r + q] : Y[(size_t)q * d + j] * inv;
            if (best < 0 || fabs(vj) > fabs(vbest)) best = j, vbest = vj;
        }
        double sg = vbest < 0 ? -1 : 1;   /* the largest-magnitude entry of the Vt row positive */
        for (int j = 0; j < d; j++)
            Vt[(size_t)o * d + j] = (float)(sg * (tall ? X[(size_t)j * r + q] : Y[(size_t)q * d + j] * inv));
        for (int t = 0; t < len; t++)
            U[(size_t)t * r + o] = (float)(sg * (tall ? Y[(size_t)t * r + q] * inv : X[(size_t)t * r + q]));
    }
    free(Ad), free(order);
    return 0;
}

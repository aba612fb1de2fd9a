/* CPU gather and truncated SVD (LAPACK sgesdd, sgesvd as a fallback). */
#include "cpu.h"

#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kb_cpu_gather(float *dst, const float *src, const int32_t *idx, int n, int d) {
    for (int i = 0; i < n; i++)
        memcpy(dst + (size_t)i * d, src + (size_t)idx[i] * d, (size_t)d * sizeof *dst);
}

/* LAPACK's singular vectors have arbitrary signs; fix them so that each row of Vt has
 * its largest-magnitude entry positive (the first such entry on ties). This makes the
 * factors reproducible across LAPACK builds and across backends. */
void kb_svd_fix_signs(int rows, int cols, int rank, float *U, float *Vt) {
    for (int r = 0; r < rank; r++) {
        float *v = Vt + (size_t)r * cols;
        int best = 0;
        for (int c = 1; c < cols; c++)
            if (fabsf(v[c]) > fabsf(v[best])) best = c;
        if (v[best] >= 0) continue;
        for (int c = 0; c < cols; c++) v[c] = -v[c];
        for (int i = 0; i < rows; i++) U[(size_t)i * rank + r] = -U[(size_t)i * rank + r];
    }
}

int kb_cpu_svd(const float *A, int rows, int cols, int rank, float *U, float *S, float *Vt) {
    int k = rows < cols ? rows : cols;
    if (rows <= 0 || cols <= 0 || rank <= 0 || rank > k) {
        fprintf(stderr, "kb svd: bad shape rows=%d cols=%d rank=%d\n", rows, cols, rank);
        return -1;
    }
    size_t na = (size_t)rows * cols;
    float *a = kb_xmalloc((na + (size_t)rows * k + (size_t)k * cols + 2 * (size_t)k) * sizeof(float),
                          "svd workspace");
    float *u = a + na, *vt = u + (size_t)rows * k, *s = vt + (size_t)k * cols, *superb = s + k;
    memcpy(a, A, na * sizeof *a);
    lapack_int info = LAPACKE_sgesdd(LAPACK_ROW_MAJOR, 'S', rows, cols, a, cols, s, u, k, vt, cols);
    if (info != 0) {   /* sgesdd can fail to converge where sgesvd does not */
        memcpy(a, A, na * sizeof *a);
        info = LAPACKE_sgesvd(LAPACK_ROW_MAJOR, 'S', 'S', rows, cols, a, cols, s, u, k, vt, cols, superb);
    }
    if (info != 0) {
        fprintf(stderr, "kb svd: LAPACK failed (info %d) on a %dx%d matrix\n", (int)info, rows, cols);
        free(a);
        return -1;
    }
    for (int i = 0; i < rows; i++) memcpy(U + (size_t)i * rank, u + (size_t)i * k, (size_t)rank * sizeof *U);
    memcpy(S, s, (size_t)rank * sizeof *S);
    memcpy(Vt, vt, (size_t)rank * cols * sizeof *Vt);
    kb_svd_fix_signs(rows, cols, rank, U, Vt);
    free(a);
    return 0;
}

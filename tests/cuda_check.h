/* Helpers shared by the CUDA-side tests (test_cuda, test_cuda_kv, test_cuda_sekv), after
 * check.h: allocation, relative error against a float reference, the allocator's current
 * bytes, and a warm-up of the backend's own decode buffers. */
#ifndef KV_CUDA_CHECK_H
#define KV_CUDA_CHECK_H
#include "check.h"
#include "../kernels/core.h"
#ifdef KB_CUDA
#include "../kernels/cuda_backend.h"
#endif

static inline float *fmalloc(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    return p;
}

/* rel_l2 of x against a float reference. */
static inline double rel_f(const float *x, const float *ref, size_t n) {
    double *r = malloc((n ? n : 1) * sizeof *r);
    for (size_t i = 0; i < n; i++) r[i] = ref[i];
    double e = rel_l2(x, r, n);
    free(r);
    return e;
}

/* Bytes held through the backend's allocator now (0 without a CUDA backend). */
static inline size_t dev_current(void) {
    size_t cur = 0;
#ifdef KB_CUDA
    if (kb_cuda(NULL)) kb_cuda_mem_stats(&cur, NULL, NULL, NULL);
#endif
    return cur;
}

#ifdef KB_CUDA
/* The backend's own decode buffers grow with n once and stay: grow them now, for n up to
 * 1024 rows of d and g query heads, so that the allocator's current bytes afterwards move
 * with what the test allocates alone. */
static inline void warm_backend(int g, int d) {
    int n = 1024;
    size_t kb = sizeof(float) * n * d, qb = sizeof(float) * g * d;
    float *zero = calloc((size_t)n * d, sizeof(float));
    float *dq = kb_cuda_malloc(qb, "warm-up q"), *dk = kb_cuda_malloc(kb, "warm-up K");
    float *dout = kb_cuda_malloc(qb, "warm-up out");
    int ok = zero && dq && dk && dout && kb_cuda_copy_h2d_async(dk, zero, kb) == 0 &&
             kb_cuda_copy_h2d_async(dq, zero, qb) == 0 && kb_cuda_copy_wait() == 0;
    kb_decode_args a = {.g = g, .d = d, .n = n, .q = dq, .K = dk, .V = dk, .out = dout};
    ok = ok && kb_cuda_copy_fence() == 0 && kb_cuda_decode_dev(&a) == 0 && kb_cuda_sync() == 0;
    CHECK(ok, "warm-up decode on the device failed");
    kb_cuda_free(dq);
    kb_cuda_free(dk);
    kb_cuda_free(dout);
    free(zero);
}
#endif
#endif

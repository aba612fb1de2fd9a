// The building blocks of the device forward pass (model/cuda_model_ops.cu; C++ only,
// make CUDA=1): the cuBLAS GEMM on bf16 operands, and the small kernels around it.
// Every pointer is device memory; every call is queued on the default stream (in order
// with the attention kernels of kernels/) and returns 0, or -1 after printing the
// failing call (file:line, the CUDA or cuBLAS message).
#ifndef KV_CUDA_MODEL_OPS_H
#define KV_CUDA_MODEL_OPS_H
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

namespace kbm {

using bf16 = __nv_bfloat16;

// Y[n][rows] (row stride ldy) = X[n][cols] W^T + beta Y, for W [rows][cols] and X in bf16,
// Y in f32, f32 accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F). beta is 0 or 1 (the
// residual add: Y is not read when beta is 0).
int gemm(const bf16 *W, int rows, int cols, const bf16 *X, int n, float beta, float *Y, int ldy);
// y = bf16(x), round to nearest even.
int to_bf16(const float *x, bf16 *y, size_t n);
// X[t][:] = table[ids[t]][:] (rows of E), for t < n.
int embed(const bf16 *table, int E, const int32_t *ids, int n, float *X);
// out[r][:] = bf16(w * (x * 1/sqrt(mean(x^2) + eps))) for each of the n rows of X [n][E].
int rmsnorm(const float *X, int n, int E, const float *w, float eps, bf16 *out);

// After the fused Q/K/V GEMM: rows of Y [rows][ldy] hold q (H*d), k (Hkv*d), v (Hkv*d).
// Biases (may be null) are added, q and k rotated by the row's cos/sin (cs [rows][n_rot]:
// cos, sin of pair i at 2i, 2i+1), q goes to Q [rows][H][d], k and v to the cache
// Kc/Vc, kv head j, token t0 + r at (j * cache_n + t0 + r) * d.
struct QkvPost {
    const float *Y;
    int ldy, rows;
    const float *cs;
    int n_rot, neox;            // neox: pairs (i, i + n_rot/2); else adjacent (2i, 2i + 1)
    const float *bq, *bk, *bv;
    int H, Hkv, d;
    float *Q, *Kc, *Vc;
    size_t cache_n;
    int t0;
};
int qkv_post(const QkvPost &a);

// out[r][c] = bf16(silu(GU[r][c]) * GU[r][F + c]) for rows of GU [n][2F] (gate, then up).
int silu(const float *GU, int n, int F, bf16 *out);
// out[r] = logsumexp(logits[r][:]) - logits[r][next_ids[r]] (log-sum-exp in double), for
// rows of logits [rows][V].
int surprisal(const float *logits, int rows, int V, const int32_t *next_ids, float *out);

}  // namespace kbm

#endif

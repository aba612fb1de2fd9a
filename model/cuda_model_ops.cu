// The device forward pass's building blocks (see cuda_model_ops.h): cuBLAS for the GEMMs
// (one handle for the process, its workspace from the tracked allocator), and the small
// kernels: bf16 conversion, embedding rows, RMSNorm, bias + RoPE + the K/V cache write,
// SwiGLU, and the surprisal of a row of logits. Reductions run in a fixed order (a tree
// over the block's threads), so the same inputs give the same bits.
#include "cuda_model_ops.h"

#include <cublas_v2.h>

#include <cmath>

#include "../kernels/cuda_mem.h"
#include "../kernels/cuda_util.h"

#define CB(call)                                                                                       \
    do {                                                                                               \
        cublasStatus_t st_ = (call);                                                                   \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                            \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cublasGetStatusString(st_)); \
            return -1;                                                                                 \
        }                                                                                              \
    } while (0)

namespace {

using kbm::bf16;

constexpr int kThreads = 256;                          // a power of two (the tree reductions)
constexpr size_t kWorkspace = (size_t)32 << 20;        // cuBLAS's recommendation for Hopper

pthread_mutex_t g_blas_lock = PTHREAD_MUTEX_INITIALIZER;
cublasHandle_t g_blas = nullptr;

// The handle, made once, with a workspace from kb_cuda_malloc so that it counts in the
// backend's high-water mark (cuBLAS would otherwise allocate its own behind our back).
int blas(cublasHandle_t *h) {
    pthread_mutex_lock(&g_blas_lock);
    int rc = 0;
    if (!g_blas) {
        cublasHandle_t b = nullptr;
        cublasStatus_t st = cublasCreate(&b);
        void *ws = st == CUBLAS_STATUS_SUCCESS ? kb_cuda_malloc(kWorkspace, "cuBLAS workspace") : nullptr;
        if (ws) st = cublasSetWorkspace(b, ws, kWorkspace);
        if (ws && st == CUBLAS_STATUS_SUCCESS) st = cublasSetStream(b, kbcuda::kStream);
        if (st != CUBLAS_STATUS_SUCCESS || !ws) {
            fprintf(stderr, "kb cuda model: setting up cuBLAS: %s\n",
                    st != CUBLAS_STATUS_SUCCESS ? cublasGetStatusString(st) : "no memory for its workspace");
            if (b) cublasDestroy(b);
            kb_cuda_free(ws);
            rc = -1;
        } else {
            g_blas = b;
        }
    }
    *h = g_blas;
    pthread_mutex_unlock(&g_blas_lock);
    return rc;
}

int grid_for(size_t n) {
    size_t b = (n + kThreads - 1) / kThreads;
    return (int)(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

__global__ void to_bf16_kernel(const float *x, bf16 *y, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16(x[i]);
}

__global__ void embed_kernel(const bf16 *table, int E, const int32_t *ids, size_t total, float *X) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t t = i / E, c = i % E;
        X[i] = __bfloat162float(table[(size_t)ids[t] * E + c]);
    }
}

// One block per row.
__global__ void rmsnorm_kernel(const float *X, int E, const float *w, float eps, bf16 *out) {
    extern __shared__ float4 smem[];
    float *red = reinterpret_cast<float *>(smem);
    const int tid = threadIdx.x;
    const float *x = X + (size_t)blockIdx.x * E;
    float s = 0.0f;
    for (int c = tid; c < E; c += blockDim.x) s += x[c] * x[c];
    red[tid] = s;
    __syncthreads();
    for (int off = blockDim.x / 2; off > 0; off /= 2) {
        if (tid < off) red[tid] += red[tid + off];
        __syncthreads();
    }
    const float scale = 1.0f / sqrtf(red[0] / (float)E + eps);
    bf16 *o = out + (size_t)blockIdx.x * E;
    for (int c = tid; c < E; c += blockDim.x) o[c] = __float2bfloat16(w[c] * (x[c] * scale));
}

// Element c of a head (x: the head's GEMM output, b: its bias or null) after RoPE: each
// output element reads both members of its pair, so no thread writes what another reads.
__device__ __forceinline__ float rotated(const float *x, const float *b, int c, const float *cs, int n_rot, int neox) {
    if (c >= n_rot) return x[c] + (b ? b[c] : 0.0f);
    const int half = n_rot / 2;
    const int i = neox ? (c < half ? c : c - half) : c / 2;
    const int ia = neox ? i : 2 * i, ib = neox ? i + half : 2 * i + 1;
    const float a = x[ia] + (b ? b[ia] : 0.0f), bb = x[ib] + (b ? b[ib] : 0.0f);
    const float co = cs[2 * i], si = cs[2 * i + 1];
    return c == ia ? a * co - bb * si : a * si + bb * co;
}

// One block per row.
__global__ void qkv_post_kernel(kbm::QkvPost p) {
    const int r = blockIdx.x, qd = p.H * p.d, kvd = p.Hkv * p.d;
    const float *y = p.Y + (size_t)r * p.ldy, *cs = p.cs + (size_t)r * p.n_rot;
    for (int e = threadIdx.x; e < qd + 2 * kvd; e += blockDim.x) {
        if (e < qd) {
            const int h = e / p.d, c = e % p.d;
            p.Q[(size_t)r * qd + e] = rotated(y + h * p.d, p.bq ? p.bq + h * p.d : nullptr, c, cs, p.n_rot, p.neox);
        } else if (e < qd + kvd) {
            const int j = (e - qd) / p.d, c = (e - qd) % p.d;
            const float v = rotated(y + qd + j * p.d, p.bk ? p.bk + j * p.d : nullptr, c, cs, p.n_rot, p.neox);
            p.Kc[((size_t)j * p.cache_n + p.t0 + r) * p.d + c] = v;
        } else {
            const int j = (e - qd - kvd) / p.d, c = (e - qd - kvd) % p.d;
            const float v = y[qd + kvd + j * p.d + c] + (p.bv ? p.bv[j * p.d + c] : 0.0f);
            p.Vc[((size_t)j * p.cache_n + p.t0 + r) * p.d + c] = v;
        }
    }
}

__global__ void silu_kernel(const float *GU, int F, size_t total, bf16 *out) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / F, c = i % F;
        const float g = GU[r * 2 * F + c], u = GU[r * 2 * F + F + c];
        out[i] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
    }
}

// One block per row: the max (f32 tree), then the sum of exp(x - max) in double (tree).
__global__ void surprisal_kernel(const float *logits, int V, const int32_t *next_ids, float *out) {
    extern __shared__ float4 smem[];
    double *red = reinterpret_cast<double *>(smem);
    float *redf = reinterpret_cast<float *>(smem);
    const int tid = threadIdx.x;
    const float *x = logits + (size_t)blockIdx.x * V;
    float mx = -INFINITY;
    for (int c = tid; c < V; c += blockDim.x) mx = fmaxf(mx, x[c]);
    redf[tid] = mx;
    __syncthreads();
    for (int off = blockDim.x / 2; off > 0; off /= 2) {
        if (tid < off) redf[tid] = fmaxf(redf[tid], redf[tid + off]);
        __syncthreads();
    }
    mx = redf[0];
    __syncthreads();   // everyone has the max before red (the same memory) is overwritten
    double s = 0.0;
    for (int c = tid; c < V; c += blockDim.x) s += exp((double)x[c] - mx);
    red[tid] = s;
    __syncthreads();
    for (int off = blockDim.x / 2; off > 0; off /= 2) {
        if (tid < off) red[tid] += red[tid + off];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = (float)(mx + log(red[0]) - x[next_ids[blockIdx.x]]);
}

}  // namespace

namespace kbm {

int gemm(const bf16 *W, int rows, int cols, const bf16 *X, int n, float beta, float *Y, int ldy) {
    if (n <= 0) return 0;
    cublasHandle_t h;
    if (blas(&h)) return -1;
    const float alpha = 1.0f;
    // Row-major W [rows][cols] is the column-major cols x rows matrix W^T (ld cols), X
    // [n][cols] likewise X^T, and Y [n][rows] is Y^T (ld ldy): Y^T = op_T(W^T) X^T.
    CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, cols, &alpha, W, CUDA_R_16BF, cols, X, CUDA_R_16BF, cols,
                    &beta, Y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return 0;
}

int to_bf16(const float *x, bf16 *y, size_t n) {
    if (!n) return 0;
    KB_LAUNCH(to_bf16_kernel, grid_for(n), kThreads, 0)(x, y, n);
    CK_LAUNCH();
    return 0;
}

int embed(const bf16 *table, int E, const int32_t *ids, int n, float *X) {
    size_t total = (size_t)n * E;
    if (!total) return 0;
    KB_LAUNCH(embed_kernel, grid_for(total), kThreads, 0)(table, E, ids, total, X);
    CK_LAUNCH();
    return 0;
}

int rmsnorm(const float *X, int n, int E, const float *w, float eps, bf16 *out) {
    if (n <= 0) return 0;
    KB_LAUNCH(rmsnorm_kernel, n, kThreads, kThreads * sizeof(float))(X, E, w, eps, out);
    CK_LAUNCH();
    return 0;
}

int qkv_post(const QkvPost &a) {
    if (a.rows <= 0) return 0;
    KB_LAUNCH(qkv_post_kernel, a.rows, 128, 0)(a);
    CK_LAUNCH();
    return 0;
}

int silu(const float *GU, int n, int F, bf16 *out) {
    size_t total = (size_t)n * F;
    if (!total) return 0;
    KB_LAUNCH(silu_kernel, grid_for(total), kThreads, 0)(GU, F, total, out);
    CK_LAUNCH();
    return 0;
}

int surprisal(const float *logits, int rows, int V, const int32_t *next_ids, float *out) {
    if (rows <= 0) return 0;
    KB_LAUNCH(surprisal_kernel, rows, kThreads, kThreads * sizeof(double))(logits, V, next_ids, out);
    CK_LAUNCH();
    return 0;
}

}  // namespace kbm

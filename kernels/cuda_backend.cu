// The CUDA backend (built only with `make CUDA=1`).
//
// The kb_backend API is host-resident: every call copies its inputs to the device,
// runs, and copies the results back, through device buffers that grow as needed and
// a pinned staging buffer for gathered rows. Calls are serialised by one mutex, so the
// table may be used from kb_parallel_for workers.
//
//   decode  real kernels: logits (one warp per entry, all g heads), softmax per head
//           (block tree reductions), P.V in fixed chunks of entries combined in chunk
//           order. Entries listed through idx are gathered into the staging buffer on
//           the host first, so only the n rows used cross the bus. Deterministic.
//   gather  real kernel over the source rows [0, max idx].
//   prefill delegates to the CPU implementation (kb_cpu_prefill).
//   svd     delegates to the CPU implementation (kb_cpu_svd, LAPACK).
// A failing CUDA call reports file:line and the call falls back to the CPU function.
extern "C" {
#include "core.h"
#include "cpu.h"
}
#include "cuda_backend.h"

#include <cuda_runtime.h>
#include <pthread.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t err_ = (call);                                                                 \
        if (err_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

namespace {

const int kMaxG = 16;          // query heads per kv group the decode kernels handle
const int kMaxD = 1024;        // head dim (one thread per dimension in P.V)
const int kChunk = 256;        // entries per P.V block
const int kWarpsPerBlock = 8;  // entries per logits block

struct DevBuf {
    void *p = nullptr;
    size_t cap = 0;
};

// Grow b to at least bytes (contents are not kept).
int reserve(DevBuf &b, size_t bytes) {
    if (bytes <= b.cap) return 0;
    if (b.p) CK(cudaFree(b.p));
    b.p = nullptr;
    b.cap = 0;
    CK(cudaMalloc(&b.p, bytes));
    b.cap = bytes;
    return 0;
}

struct HostBuf {
    void *p = nullptr;
    size_t cap = 0;
};

int reserve_pinned(HostBuf &b, size_t bytes) {
    if (bytes <= b.cap) return 0;
    if (b.p) CK(cudaFreeHost(b.p));
    b.p = nullptr;
    b.cap = 0;
    CK(cudaMallocHost(&b.p, bytes));
    b.cap = bytes;
    return 0;
}

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
DevBuf d_q, d_k, d_v, d_bias, d_logit, d_part, d_out, d_idx;
HostBuf h_stage;

// ------------------------------------------------------------------ kernels

// logit[hh][i] = q[hh] . K[i] * scale + bias[i]; one warp per entry, q in shared memory.
__global__ void logits_kernel(const float *q, const float *K, const float *bias, int n, int g, int d,
                              float scale, float *logit) {
    extern __shared__ float sq[];
    for (int t = threadIdx.x; t < g * d; t += blockDim.x) sq[t] = q[t];
    __syncthreads();
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int i = blockIdx.x * kWarpsPerBlock + warp;
    if (i >= n) return;
    const float *k = K + (size_t)i * d;
    float b = bias ? bias[i] : 0.0f;
    for (int hh = 0; hh < g; hh++) {
        float s = 0.0f;
        for (int c = lane; c < d; c += 32) s += sq[hh * d + c] * k[c];
        for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0) logit[(size_t)hh * n + i] = s * scale + b;
    }
}

// Block-wide reduction over blockDim.x (a power of two) threads; fixed tree order.
template <bool IsMax>
__device__ float block_reduce(float v, float *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) {
            float o = sh[threadIdx.x + w];
            sh[threadIdx.x] = IsMax ? fmaxf(sh[threadIdx.x], o) : sh[threadIdx.x] + o;
        }
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

// One block per head: logit row -> probabilities in place.
__global__ void softmax_kernel(float *logit, int n) {
    extern __shared__ float sh[];
    float *row = logit + (size_t)blockIdx.x * n;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, row[i]);
    m = block_reduce<true>(m, sh);
    float z = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float e = m == -INFINITY ? 0.0f : expf(row[i] - m);
        row[i] = e;
        z += e;
    }
    z = block_reduce<false>(z, sh);
    float inv = 1.0f / z;
    for (int i = threadIdx.x; i < n; i += blockDim.x) row[i] *= inv;
}

// part[chunk][hh][t] = sum over the chunk's entries of p[hh][i] * V[i][t]; thread t.
__global__ void pv_kernel(const float *p, const float *V, int n, int g, int d, float *part) {
    int t = threadIdx.x;
    int i0 = blockIdx.x * kChunk, i1 = min(i0 + kChunk, n);
    float acc[kMaxG];
    for (int hh = 0; hh < kMaxG; hh++) acc[hh] = 0.0f;
    for (int i = i0; i < i1; i++) {
        float v = V[(size_t)i * d + t];
#pragma unroll
        for (int hh = 0; hh < kMaxG; hh++)
            if (hh < g) acc[hh] += p[(size_t)hh * n + i] * v;
    }
    for (int hh = 0; hh < g; hh++) part[((size_t)blockIdx.x * g + hh) * d + t] = acc[hh];
}

// out[hh][t] = sum over chunks in order; one block per head, thread t.
__global__ void combine_kernel(const float *part, int nchunks, int g, int d, float *out) {
    int hh = blockIdx.x, t = threadIdx.x;
    float s = 0.0f;
    for (int c = 0; c < nchunks; c++) s += part[((size_t)c * g + hh) * d + t];
    out[hh * d + t] = s;
}

__global__ void gather_kernel(float *dst, const float *src, const int32_t *idx, int n, int d) {
    size_t total = (size_t)n * d;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        size_t i = e / d, c = e % d;
        dst[e] = src[(size_t)idx[i] * d + c];
    }
}

// ------------------------------------------------------------------ host side

int decode_device(const kb_decode_args *a) {
    const int g = a->g, d = a->d, n = a->n;
    const size_t rows_bytes = (size_t)n * d * sizeof(float);
    const int nchunks = (n + kChunk - 1) / kChunk;
    if (reserve(d_q, (size_t)g * d * sizeof(float)) || reserve(d_k, rows_bytes) || reserve(d_v, rows_bytes) ||
        reserve(d_bias, (size_t)n * sizeof(float)) || reserve(d_logit, (size_t)g * n * sizeof(float)) ||
        reserve(d_part, (size_t)nchunks * g * d * sizeof(float)) || reserve(d_out, (size_t)g * d * sizeof(float)))
        return -1;
    float *dq = (float *)d_q.p, *dk = (float *)d_k.p, *dv = (float *)d_v.p, *dbias = (float *)d_bias.p;
    float *dlogit = (float *)d_logit.p, *dpart = (float *)d_part.p, *dout = (float *)d_out.p;

    CK(cudaMemcpy(dq, a->q, (size_t)g * d * sizeof(float), cudaMemcpyHostToDevice));
    if (a->idx) {   // gather the listed rows on the host so only n rows are copied
        if (reserve_pinned(h_stage, rows_bytes)) return -1;
        float *st = (float *)h_stage.p;
        kb_cpu_gather(st, a->K, a->idx, n, d);
        CK(cudaMemcpy(dk, st, rows_bytes, cudaMemcpyHostToDevice));
        kb_cpu_gather(st, a->V, a->idx, n, d);
        CK(cudaMemcpy(dv, st, rows_bytes, cudaMemcpyHostToDevice));
    } else {
        CK(cudaMemcpy(dk, a->K, rows_bytes, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dv, a->V, rows_bytes, cudaMemcpyHostToDevice));
    }
    if (a->bias) CK(cudaMemcpy(dbias, a->bias, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));

    int lblocks = (n + kWarpsPerBlock - 1) / kWarpsPerBlock;
    logits_kernel<<<lblocks, 32 * kWarpsPerBlock, (size_t)g * d * sizeof(float)>>>(
        dq, dk, a->bias ? dbias : nullptr, n, g, d, 1.0f / sqrtf((float)d), dlogit);
    CK(cudaGetLastError());
    softmax_kernel<<<g, 1024, 1024 * sizeof(float)>>>(dlogit, n);
    CK(cudaGetLastError());
    pv_kernel<<<nchunks, d>>>(dlogit, dv, n, g, d, dpart);
    CK(cudaGetLastError());
    combine_kernel<<<g, d>>>(dpart, nchunks, g, d, dout);
    CK(cudaGetLastError());
    CK(cudaMemcpy(a->out, dout, (size_t)g * d * sizeof(float), cudaMemcpyDeviceToHost));
    if (a->probs) CK(cudaMemcpy(a->probs, dlogit, (size_t)g * n * sizeof(float), cudaMemcpyDeviceToHost));
    return 0;
}

void cuda_decode(const kb_decode_args *a) {
    if (a->n <= 0 || a->g <= 0 || a->d <= 0) {
        kb_cpu_decode(a);   // writes the zeros for n = 0
        return;
    }
    if (a->g > kMaxG || a->d > kMaxD || (size_t)a->g * a->d * sizeof(float) > 48 * 1024) {
        kb_cpu_decode(a);   // shapes outside the kernels' limits
        return;
    }
    pthread_mutex_lock(&g_lock);
    int rc = decode_device(a);
    pthread_mutex_unlock(&g_lock);
    if (rc) {
        fprintf(stderr, "kb cuda: decode failed on the device; computing it on the CPU\n");
        kb_cpu_decode(a);
    }
}

int gather_device(float *dst, const float *src, const int32_t *idx, int n, int d) {
    int32_t rows = 0;
    for (int i = 0; i < n; i++) rows = idx[i] + 1 > rows ? idx[i] + 1 : rows;
    if (reserve(d_k, (size_t)rows * d * sizeof(float)) || reserve(d_v, (size_t)n * d * sizeof(float)) ||
        reserve(d_idx, (size_t)n * sizeof(int32_t)))
        return -1;
    float *dsrc = (float *)d_k.p, *ddst = (float *)d_v.p;
    int32_t *didx = (int32_t *)d_idx.p;
    CK(cudaMemcpy(dsrc, src, (size_t)rows * d * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(didx, idx, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice));
    size_t total = (size_t)n * d;
    int blocks = (int)((total + 255) / 256 < 65535 ? (total + 255) / 256 : 65535);
    gather_kernel<<<blocks, 256>>>(ddst, dsrc, didx, n, d);
    CK(cudaGetLastError());
    CK(cudaMemcpy(dst, ddst, total * sizeof(float), cudaMemcpyDeviceToHost));
    return 0;
}

void cuda_gather(float *dst, const float *src, const int32_t *idx, int n, int d) {
    if (n <= 0 || d <= 0) return;
    pthread_mutex_lock(&g_lock);
    int rc = gather_device(dst, src, idx, n, d);
    pthread_mutex_unlock(&g_lock);
    if (rc) {
        fprintf(stderr, "kb cuda: gather failed on the device; computing it on the CPU\n");
        kb_cpu_gather(dst, src, idx, n, d);
    }
}

const kb_backend cuda_table = {"cuda", kb_cpu_prefill, cuda_decode, cuda_gather, kb_cpu_svd};

pthread_once_t g_once = PTHREAD_ONCE_INIT;
const kb_backend *g_backend = nullptr;
char g_why[384] = "";

void probe_device() {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        snprintf(g_why, sizeof g_why, "no usable CUDA device (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
        return;
    }
    if (count == 0) {
        snprintf(g_why, sizeof g_why, "no CUDA device found");
        return;
    }
    cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, 0);
    if (e != cudaSuccess) {
        snprintf(g_why, sizeof g_why, "CUDA device 0 unreadable (%s)", cudaGetErrorString(e));
        return;
    }
    if (prop.major < 9) {
        snprintf(g_why, sizeof g_why, "CUDA device 0 (%.100s) is sm_%d%d; this build carries sm_90 code only",
                 prop.name, prop.major, prop.minor);
        return;
    }
    e = cudaSetDevice(0);
    if (e != cudaSuccess) {
        snprintf(g_why, sizeof g_why, "cudaSetDevice(0): %s", cudaGetErrorString(e));
        return;
    }
    g_backend = &cuda_table;
}

}  // namespace

extern "C" const kb_backend *kb_cuda_backend(const char **why) {
    pthread_once(&g_once, probe_device);
    if (!g_backend && why) *why = g_why;
    return g_backend;
}

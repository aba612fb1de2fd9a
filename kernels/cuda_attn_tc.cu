// Prefill attention on tensor cores: the same contract as cuda_attn.cu's f32 kernels
// (causal, GQA, out + log-sum-exp, and the exact H2O / SnapKV statistics), with the two
// products done by cuBLAS on bf16 operands with f32 accumulation (cublasGemmEx,
// CUBLAS_COMPUTE_32F), so the CPU emulation of tests/gpu/emu runs it through CPU code.
//
// Q, K and V are rounded to bf16 once: Q into [Hkv][m][g][d], so the g query heads of a
// kv group and a run of queries form one contiguous matrix of rows (q, i), row r being
// query q0 + r / g of head j*g + r % g; K and V into [Hkv][L][d]. Then, per kv group and
// tile of TQ queries, over the key tiles of TK keys the tile's rows can see:
//   S = scale * Q_tile K_tile^T          (GEMM, f32 [rows][TK])
//   softmax_tile: causal mask, the tile's max, the running max m and sum l updated,
//     O scaled by exp(m_old - m_new), P = bf16(exp(S - m_new)) (0 where masked)
//   O += P V_tile                        (GEMM, beta 1)
// and finally out = O / l, lse = m + log l. l sums the f32 probabilities; O the bf16 ones.
//
// The statistics need normalised probabilities, known only once a row's lse is: a second
// pass recomputes S for the tiles concerned and takes exp(S - lse). The column mass needs
// every (query, key) pair, so with col_mass the pass redoes the whole QK^T product: one
// more GEMM of the three (about +50% of the attention's tensor-core work, plus one read of
// S). With only window rows, it visits only the query tiles that hold window rows. A key
// column's mass is summed by one thread in query order (deterministic, no atomics).
extern "C" {
#include "core.h"
}
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include "cuda_backend.h"
#include "cuda_util.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

namespace {

using bf16 = __nv_bfloat16;
using kbcuda::DevBuf;

constexpr int kThreads = 128;   // a power of two (the tree reductions)

// Tile sizes: TQ queries (times g heads) by TK keys. Settable for the tests, which need
// several tiles at small sizes.
int g_tq_rows = 2048, g_tk = 1024;
int g_mode = -1;   // -1: not yet read from KB_PREFILL_TC; 0: f32 kernels; 1: tensor cores

#define CB(call)                                                                                       \
    do {                                                                                               \
        cublasStatus_t st_ = (call);                                                                   \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                            \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cublasGetStatusString(st_)); \
            return -1;                                                                                 \
        }                                                                                              \
    } while (0)

cublasHandle_t g_blas = nullptr;
void *g_ws = nullptr;
constexpr size_t kWorkspace = (size_t)4 << 20;

// The handle, made once under the backend lock, its workspace from the tracked allocator.
int blas(cublasHandle_t *h) {
    if (!g_blas) {
        cublasHandle_t b = nullptr;
        if (cublasCreate(&b) != CUBLAS_STATUS_SUCCESS) {
            fprintf(stderr, "kb cuda prefill: cublasCreate failed\n");
            return -1;
        }
        void *ws = kb_cuda_malloc(kWorkspace, "prefill cuBLAS workspace");
        if (!ws || cublasSetWorkspace(b, ws, kWorkspace) != CUBLAS_STATUS_SUCCESS ||
            cublasSetStream(b, kbcuda::kStream) != CUBLAS_STATUS_SUCCESS) {
            fprintf(stderr, "kb cuda prefill: setting up cuBLAS failed\n");
            cublasDestroy(b);
            kb_cuda_free(ws);
            return -1;
        }
        g_blas = b;
        g_ws = ws;
    }
    *h = g_blas;
    return 0;
}

int blocks_for(size_t n) {
    size_t b = (n + kThreads - 1) / kThreads;
    return (int)(b < 65535 ? b : 65535);
}

// Qb[j][q][i][c] = bf16(Q[q][j*g + i][c]): the original layout is [m][Hkv][g][d], so
// only the kv head moves outward.
__global__ void q_to_bf16(const float *Q, bf16 *Qb, int m, int Hkv, int g, int d) {
    const size_t n = (size_t)Hkv * m * g * d, gd = (size_t)g * d;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        size_t j = e / ((size_t)m * gd), rest = e % ((size_t)m * gd), q = rest / gd, c = rest % gd;
        Qb[e] = __float2bfloat16(Q[(q * Hkv + j) * gd + c]);
    }
}

// Kb[j][t][c] = bf16(K[j * stride + t * d + c]) for t < L.
__global__ void kv_to_bf16(const float *K, size_t stride, bf16 *Kb, int Hkv, int L, int d) {
    const size_t per = (size_t)L * d, n = (size_t)Hkv * per;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x)
        Kb[e] = __float2bfloat16(K[(e / per) * stride + e % per]);
}

// Block-wide max or sum of x over kThreads threads (red: kThreads floats).
__device__ float block_reduce(float x, float *red, bool is_max) {
    red[threadIdx.x] = x;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s /= 2) {
        if ((int)threadIdx.x < s) {
            float o = red[threadIdx.x + s];
            red[threadIdx.x] = is_max ? fmaxf(red[threadIdx.x], o) : red[threadIdx.x] + o;
        }
        __syncthreads();
    }
    float r = red[0];
    __syncthreads();
    return r;
}

// One block per row of the tile: mask, online-softmax update, P and O's rescale.
// Row r is query q0 + r / g at position t0 + q0 + r / g; the tile's keys are k0 .. k0+kn-1.
__global__ void __launch_bounds__(kThreads)
    softmax_tile(const float *S, bf16 *P, int ld, float *O, int d, float *mrun, float *lrun, int g, int pos0, int k0,
                 int kn) {
    extern __shared__ float4 smem[];   // kThreads floats (dynamic: the emulation's form)
    float *red = reinterpret_cast<float *>(smem);
    const int r = blockIdx.x;
    const int pos = pos0 + r / g, lim = min(kn, pos - k0 + 1);   // keys of the tile the row sees
    const float *s = S + (size_t)r * ld;
    float tmax = -INFINITY;
    for (int c = threadIdx.x; c < lim; c += kThreads) tmax = fmaxf(tmax, s[c]);
    tmax = block_reduce(tmax, red, true);
    const float mold = mrun[r], mnew = fmaxf(mold, tmax);   // finite: key 0 is in the first tile
    float sum = 0.0f;
    bf16 *p = P + (size_t)r * ld;
    for (int c = threadIdx.x; c < kn; c += kThreads) {
        float e = c < lim ? expf(s[c] - mnew) : 0.0f;
        sum += e;
        p[c] = __float2bfloat16(e);
    }
    sum = block_reduce(sum, red, false);
    const float alpha = mold == -INFINITY ? 0.0f : expf(mold - mnew);
    float *o = O + (size_t)r * d;
    for (int c = threadIdx.x; c < d; c += kThreads) o[c] = alpha == 0.0f ? 0.0f : o[c] * alpha;   // O may be stale
    if (threadIdx.x == 0) {
        lrun[r] = lrun[r] * alpha + sum;
        mrun[r] = mnew;
    }
}

__global__ void rows_init(float *mrun, float *lrun, int rows) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        mrun[r] = -INFINITY;
        lrun[r] = 0.0f;
    }
}

// out[q][h][:] = O[r][:] / l[r] and lse[h][q] = m + log l, for the nq queries from q0 of kv group j.
__global__ void finish_tile(const float *O, const float *mrun, const float *lrun, float *out, float *lse, int H, int m,
                            int j, int g, int d, int q0, int nq) {
    const size_t n = (size_t)nq * g * d;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        int r = (int)(e / d), c = (int)(e % d), q = q0 + r / g, h = j * g + r % g;
        out[((size_t)q * H + h) * d + c] = O[e] / lrun[r];
        if (c == 0) lse[(size_t)h * m + q] = mrun[r] + logf(lrun[r]);
    }
}

struct StatsArgs {
    float *col_mass;
    size_t mass_ld;
    float *win;
    int win_n, win_start;
    size_t win_ld;
    int w0, w1;   // window rows as chunk-relative queries
};

// Thread (key k0 + c, head j*g + blockIdx.y) walks the tile's nq queries in order:
// p = exp(S - lse) where the key is visible; window rows written, the mass summed.
__global__ void stats_tile(const float *S, int ld, const float *lse, StatsArgs a, int m, int j, int g, int t0,
                           int q0, int nq, int k0, int kn) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y, h = j * g + i, key = k0 + c;
    if (c >= kn) return;
    float acc = 0.0f;
    for (int qq = 0; qq < nq; qq++) {
        const int q = q0 + qq;
        const float v = key <= t0 + q ? expf(S[(size_t)(qq * g + i) * ld + c] - lse[(size_t)h * m + q]) : 0.0f;
        acc += v;
        if (q >= a.w0 && q < a.w1 && (size_t)key < a.win_ld)
            a.win[((size_t)h * a.win_n + (t0 + q - a.win_start)) * a.win_ld + key] = v;
    }
    if (a.col_mass) a.col_mass[(size_t)h * a.mass_ld + key] += acc;
}

DevBuf d_qb, d_kb, d_vb, d_s, d_p, d_o, d_ml;

}  // namespace

namespace kbcuda {

bool prefill_tc_on() {
    if (g_mode < 0) {
        const char *e = getenv("KB_PREFILL_TC");
        g_mode = e && !strcmp(e, "0") ? 0 : 1;
    }
    return g_mode == 1;
}

// Device pointers, lock held; lse [H][m] is written. Asynchronous.
int prefill_tc_launch(const kb_prefill_args *a, float *lse) {
    const int H = a->H, Hkv = a->Hkv, g = H / Hkv, d = a->d, m = a->m, t0 = a->t0, L = t0 + m;
    const int TQ = g_tq_rows / g > 0 ? g_tq_rows / g : 1, TK = g_tk, maxrows = TQ * g;
    const float scale = 1.0f / sqrtf((float)d), one = 1.0f, zero_f = 0.0f;
    cublasHandle_t hb;
    if (blas(&hb) || kbcuda::reserve(d_qb, (size_t)H * m * d * sizeof(bf16), "prefill bf16 queries") ||
        kbcuda::reserve(d_kb, (size_t)Hkv * L * d * sizeof(bf16), "prefill bf16 keys") ||
        kbcuda::reserve(d_vb, (size_t)Hkv * L * d * sizeof(bf16), "prefill bf16 values") ||
        kbcuda::reserve(d_s, (size_t)maxrows * TK * sizeof(float), "prefill logit tile") ||
        kbcuda::reserve(d_p, (size_t)maxrows * TK * sizeof(bf16), "prefill probability tile") ||
        kbcuda::reserve(d_o, (size_t)maxrows * d * sizeof(float), "prefill output tile") ||
        kbcuda::reserve(d_ml, (size_t)2 * maxrows * sizeof(float), "prefill running max and sum"))
        return -1;
    bf16 *Qb = (bf16 *)d_qb.p, *Kb = (bf16 *)d_kb.p, *Vb = (bf16 *)d_vb.p, *P = (bf16 *)d_p.p;
    float *S = (float *)d_s.p, *O = (float *)d_o.p, *mrun = (float *)d_ml.p, *lrun = mrun + maxrows;
    KB_LAUNCH(q_to_bf16, blocks_for((size_t)H * m * d), kThreads, 0)(a->Q, Qb, m, Hkv, g, d);
    CK_LAUNCH();
    KB_LAUNCH(kv_to_bf16, blocks_for((size_t)Hkv * L * d), kThreads, 0)(a->K, a->kv_stride, Kb, Hkv, L, d);
    CK_LAUNCH();
    KB_LAUNCH(kv_to_bf16, blocks_for((size_t)Hkv * L * d), kThreads, 0)(a->V, a->kv_stride, Vb, Hkv, L, d);
    CK_LAUNCH();

    // S = scale * Q_tile K_tile^T, column-major: C (kn x rows, ldc TK) = op(K) (kn x d) * Q (d x rows)
    auto logits = [&](int j, int q0, int rows, int k0, int kn) -> int {
        CB(cublasGemmEx(hb, CUBLAS_OP_T, CUBLAS_OP_N, kn, rows, d, &scale, Kb + ((size_t)j * L + k0) * d, CUDA_R_16BF,
                        d, Qb + ((size_t)j * m + q0) * g * d, CUDA_R_16BF, d, &zero_f, S, CUDA_R_32F, TK,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return 0;
    };
    for (int j = 0; j < Hkv; j++)
        for (int q0 = 0; q0 < m; q0 += TQ) {
            const int nq = m - q0 < TQ ? m - q0 : TQ, rows = nq * g, kend = t0 + q0 + nq;
            KB_LAUNCH(rows_init, (rows + kThreads - 1) / kThreads, kThreads, 0)(mrun, lrun, rows);
            CK_LAUNCH();
            for (int k0 = 0; k0 < kend; k0 += TK) {
                const int kn = kend - k0 < TK ? kend - k0 : TK;
                if (logits(j, q0, rows, k0, kn)) return -1;
                KB_LAUNCH(softmax_tile, rows, kThreads, kThreads * sizeof(float))(S, P, TK, O, d, mrun, lrun, g, t0 + q0, k0, kn);
                CK_LAUNCH();
                // O (d x rows, ldc d) += V_tile^T-as-stored (d x kn) * P (kn x rows, ldb TK)
                CB(cublasGemmEx(hb, CUBLAS_OP_N, CUBLAS_OP_N, d, rows, kn, &one, Vb + ((size_t)j * L + k0) * d,
                                CUDA_R_16BF, d, P, CUDA_R_16BF, TK, &one, O, CUDA_R_32F, d, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
            }
            KB_LAUNCH(finish_tile, blocks_for((size_t)rows * d), kThreads, 0)(O, mrun, lrun, a->out, lse, H, m, j, g, d,
                                                                           q0, nq);
            CK_LAUNCH();
        }

    // The statistics' second pass.
    StatsArgs st = {a->col_mass, a->mass_ld, nullptr, 0, 0, 0, 0, 0};
    if (a->win_probs && a->win > 0) {
        int w0 = a->win_start - t0 > 0 ? a->win_start - t0 : 0;
        int w1 = a->win_start + a->win - t0 < m ? a->win_start + a->win - t0 : m;
        if (w1 > w0) {
            st = {a->col_mass, a->mass_ld, a->win_probs, a->win, a->win_start, a->win_ld, w0, w1};
            for (int h = 0; h < H; h++)   // keys no tile visits (past the causal end, past L) are 0
                CK(cudaMemsetAsync(a->win_probs + ((size_t)h * a->win + (t0 + w0 - a->win_start)) * a->win_ld, 0,
                                   (size_t)(w1 - w0) * a->win_ld * sizeof(float), kbcuda::kStream));
        }
    }
    if (!st.col_mass && st.w1 <= st.w0) return 0;
    for (int j = 0; j < Hkv; j++)
        for (int q0 = 0; q0 < m; q0 += TQ) {
            const int nq = m - q0 < TQ ? m - q0 : TQ, rows = nq * g, kend = t0 + q0 + nq;
            if (!st.col_mass && (q0 + nq <= st.w0 || q0 >= st.w1)) continue;   // no window row here
            for (int k0 = 0; k0 < kend; k0 += TK) {
                const int kn = kend - k0 < TK ? kend - k0 : TK;
                if (logits(j, q0, rows, k0, kn)) return -1;
                KB_LAUNCH(stats_tile, dim3((kn + kThreads - 1) / kThreads, g), kThreads, 0)(S, TK, lse, st, m, j, g,
                                                                                           t0, q0, nq, k0, kn);
                CK_LAUNCH();
            }
        }
    return 0;
}

}  // namespace kbcuda

extern "C" void kb_cuda_prefill_mode(int tensor_cores, int tile_rows, int tile_keys) {
    kbcuda::lock();
    if (tensor_cores >= 0) g_mode = tensor_cores ? 1 : 0;
    if (tile_rows > 0) g_tq_rows = tile_rows;
    if (tile_keys > 0) g_tk = tile_keys;
    kbcuda::unlock();
}

extern "C" int kb_cuda_prefill_tc(void) {
    kbcuda::lock();
    int on = kbcuda::prefill_tc_on();
    kbcuda::unlock();
    return on;
}

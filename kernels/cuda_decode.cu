// Decode attention on the device: the g query heads of one kv group over an entry list
// (rows picked by idx, a per-entry bias such as log n for coarse entries), split over the
// entries and combined, like the CPU's blocks (flash-decoding).
//
//   dec_split    one block per chunk of entries: rows of the chunk, logits (a warp per
//                entry, all g heads from one read of the key row), per-head max and
//                exp-sum (a warp per head), and the chunk's unnormalised output
//                (threads over columns x groups of entries, groups summed in order).
//                With probs asked for, the exponentials go straight into probs.
//   dec_combine  per (head, 32 columns): the chunks rescaled to the global max and
//                summed in a fixed order; also each chunk's factor f / Z for probs.
//   dec_probs    probs *= the chunk's factor.
// Every reduction has a fixed order: the same inputs give the same bits.
// K/V rows are f32, f16 or bf16 (kernels/kvtype.h: a->kv_type); 16-bit rows are widened
// to f32 as they are read (exactly) and everything after that is f32, as on the CPU.
extern "C" {
#include "core.h"
#include "cpu.h"
#include "kvtype.h"
}
#include "cuda_backend.h"
#include "cuda_util.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

using kbcuda::DevBuf;

constexpr int kMaxG = 16;            // query heads per kv group
constexpr int kMaxGD = 8192;         // g * d (the queries sit in shared memory)
constexpr int kThreads = 256;        // dec_split: 8 warps
constexpr int kWarps = kThreads / 32;
constexpr int kMaxChunk = 512;       // entries per dec_split block
constexpr int kCombineWarps = 16;
constexpr unsigned kFull = 0xffffffffu;
constexpr size_t kSplitSmemMax = 100 * 1024;

// Chunks of 64 entries up to 32K entries, growing with n so that one call launches
// about 512 blocks, at most kMaxChunk entries each.
int chunk_size(int n) {
    int c = 64 * ((n + 32767) / 32768);
    return c < kMaxChunk ? c : kMaxChunk;
}

size_t split_smem(int g, int d, int chunk) {
    return sizeof(float) * ((size_t)g * d + (size_t)g * chunk + (size_t)kThreads * g) + sizeof(int) * chunk;
}

struct DecodeDev {
    const float *q;
    const void *K, *V;         // rows of the type KT of the kernel
    const int32_t *idx;
    const float *bias;
    int g, d, n, chunk;
    float scale;
    float *e;                   // probs [g][n] (exponentials, then probabilities) or null
    float *part, *bmax, *bsum;  // [chunk][g][d], [chunk][g], [chunk][g]
};

__device__ __forceinline__ float bits_f32(uint32_t x) {
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}
// The 16-bit formats widened to f32, exactly (kvtype.h's kb_bf16_to_f32, kb_f16_to_f32).
__device__ __forceinline__ float bf16_f32(uint32_t h) { return bits_f32(h << 16); }
__device__ __forceinline__ float f16_f32(uint32_t h) {
    uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return bits_f32(sign | 0x7f800000u | (m << 13));
    if (e) return bits_f32(sign | ((e + 112) << 23) | (m << 13));
    float sub = (float)m * 0x1p-24f;   // subnormal: exact in f32
    uint32_t sb;
    memcpy(&sb, &sub, sizeof sb);
    return bits_f32(sign | sb);
}
// Element i of rows of type KT, as f32.
template <int KT>
__device__ __forceinline__ float ld(const void *rows, size_t i) {
    if (KT == KB_F32) return static_cast<const float *>(rows)[i];
    uint32_t h = static_cast<const uint16_t *>(rows)[i];
    return KT == KB_BF16 ? bf16_f32(h) : f16_f32(h);
}
// Elements 4c .. 4c+3 of rows of type KT (16-byte aligned for f32, 8 for 16-bit).
template <int KT>
__device__ __forceinline__ float4 ld4(const void *rows, size_t c) {
    if (KT == KB_F32) return reinterpret_cast<const float4 *>(rows)[c];
    uint2 u = reinterpret_cast<const uint2 *>(rows)[c];
    if (KT == KB_BF16)
        return make_float4(bf16_f32(u.x & 0xffffu), bf16_f32(u.x >> 16), bf16_f32(u.y & 0xffffu), bf16_f32(u.y >> 16));
    return make_float4(f16_f32(u.x & 0xffffu), f16_f32(u.x >> 16), f16_f32(u.y & 0xffffu), f16_f32(u.y >> 16));
}

__device__ __forceinline__ float warp_sum(float x) {
    for (int off = 16; off > 0; off /= 2) x += __shfl_xor_sync(kFull, x, off);
    return x;
}
__device__ __forceinline__ float warp_max(float x) {
    for (int off = 16; off > 0; off /= 2) x = fmaxf(x, __shfl_xor_sync(kFull, x, off));
    return x;
}

// Mode = 2 * KT + Vec4 (one template argument: no comma inside KB_LAUNCH's arguments)
template <int Mode>
__global__ void __launch_bounds__(kThreads) dec_split(DecodeDev p) {
    constexpr bool Vec4 = Mode & 1;
    constexpr int KT = Mode >> 1;
    extern __shared__ float4 smem[];
    const int g = p.g, d = p.d, CH = p.chunk;
    float *qs = reinterpret_cast<float *>(smem);   // [g][d]
    float *s = qs + g * d;                          // [g][CH]
    float *red = s + g * CH;                        // [kThreads][g]
    int *rows = reinterpret_cast<int *>(red + kThreads * g);
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int i0 = blockIdx.x * CH, nb = min(CH, p.n - i0);

    for (int t = tid; t < g * d; t += kThreads) qs[t] = p.q[t];
    for (int ii = tid; ii < nb; ii += kThreads) rows[ii] = p.idx ? p.idx[i0 + ii] : i0 + ii;
    __syncthreads();

    // logits: a warp per entry, the key row read once for all g heads
    for (int ii = warp; ii < nb; ii += kWarps) {
        const size_t k0 = (size_t)rows[ii] * d;   // the key row's first element
        float acc[kMaxG];
#pragma unroll
        for (int hh = 0; hh < kMaxG; hh++) acc[hh] = 0.0f;
        if (Vec4) {
            for (int c4 = lane; c4 < d / 4; c4 += 32) {
                float4 kv = ld4<KT>(p.K, k0 / 4 + c4);
#pragma unroll
                for (int hh = 0; hh < kMaxG; hh++)
                    if (hh < g) {
                        float4 qv = reinterpret_cast<const float4 *>(qs + hh * d)[c4];
                        acc[hh] = fmaf(qv.x, kv.x, acc[hh]);
                        acc[hh] = fmaf(qv.y, kv.y, acc[hh]);
                        acc[hh] = fmaf(qv.z, kv.z, acc[hh]);
                        acc[hh] = fmaf(qv.w, kv.w, acc[hh]);
                    }
            }
        } else {
            for (int c = lane; c < d; c += 32) {
                float kv = ld<KT>(p.K, k0 + c);
#pragma unroll
                for (int hh = 0; hh < kMaxG; hh++)
                    if (hh < g) acc[hh] = fmaf(qs[hh * d + c], kv, acc[hh]);
            }
        }
        float b = p.bias ? p.bias[i0 + ii] : 0.0f;
#pragma unroll
        for (int hh = 0; hh < kMaxG; hh++)
            if (hh < g) {
                float dot = warp_sum(acc[hh]);
                if (lane == 0) s[hh * CH + ii] = dot * p.scale + b;
            }
    }
    __syncthreads();

    // per head: chunk max, exponentials (0 when every entry is at -inf), their sum
    for (int hh = warp; hh < g; hh += kWarps) {
        float *row = s + hh * CH;
        float mx = -INFINITY;
        for (int ii = lane; ii < nb; ii += 32) mx = fmaxf(mx, row[ii]);
        mx = warp_max(mx);
        float z = 0.0f;
        for (int ii = lane; ii < nb; ii += 32) {
            float e = mx == -INFINITY ? 0.0f : expf(row[ii] - mx);
            row[ii] = e;
            z += e;
        }
        z = warp_sum(z);
        if (lane == 0) {
            p.bmax[(size_t)blockIdx.x * g + hh] = mx;
            p.bsum[(size_t)blockIdx.x * g + hh] = z;
        }
        if (p.e)
            for (int ii = lane; ii < nb; ii += 32) p.e[(size_t)hh * p.n + i0 + ii] = row[ii];
    }
    __syncthreads();

    // unnormalised output: cw columns at a time, ng groups of entries each, groups summed in order
    const int cw = d < kThreads ? d : kThreads, ng = kThreads / cw;
    const int gr = tid / cw, cc = tid % cw;
    for (int c0 = 0; c0 < d; c0 += cw) {
        float acc[kMaxG];
#pragma unroll
        for (int hh = 0; hh < kMaxG; hh++) acc[hh] = 0.0f;
        const int col = c0 + cc;
        if (gr < ng && col < d) {
#pragma unroll 4
            for (int ii = gr; ii < nb; ii += ng) {
                float v = ld<KT>(p.V, (size_t)rows[ii] * d + col);
#pragma unroll
                for (int hh = 0; hh < kMaxG; hh++)
                    if (hh < g) acc[hh] = fmaf(s[hh * CH + ii], v, acc[hh]);
            }
        }
        if (gr < ng)
#pragma unroll
            for (int hh = 0; hh < kMaxG; hh++)
                if (hh < g) red[(gr * g + hh) * cw + cc] = acc[hh];
        __syncthreads();
        for (int t = tid; t < g * cw; t += kThreads) {
            int hh = t / cw, c = t % cw;
            if (c0 + c >= d) continue;
            float sum = 0.0f;
            for (int k = 0; k < ng; k++) sum += red[(k * g + hh) * cw + c];
            p.part[((size_t)blockIdx.x * g + hh) * d + c0 + c] = sum;
        }
        __syncthreads();
    }
}

// Block-wide reduction (max or sum) in a fixed tree order; every thread gets the result.
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

// grid (g, ceil(d / 32)), 32 * kCombineWarps threads: lane = column, warp = chunk group.
__global__ void __launch_bounds__(32 * kCombineWarps) dec_combine(const float *part, const float *bmax,
                                                                   const float *bsum, int nchunks, int g, int d,
                                                                   float *out, float *fz) {
    extern __shared__ float4 smem[];
    float *sh = reinterpret_cast<float *>(smem);   // [32 * kCombineWarps]
    const int hh = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int col = blockIdx.y * 32 + lane;
    float mx = -INFINITY;
    for (int c = threadIdx.x; c < nchunks; c += blockDim.x) mx = fmaxf(mx, bmax[(size_t)c * g + hh]);
    mx = block_reduce<true>(mx, sh);
    float z = 0.0f;
    for (int c = threadIdx.x; c < nchunks; c += blockDim.x) {
        float b = bmax[(size_t)c * g + hh];
        z += b == -INFINITY ? 0.0f : bsum[(size_t)c * g + hh] * expf(b - mx);
    }
    z = block_reduce<false>(z, sh);
    float acc = 0.0f;
    if (col < d) {
#pragma unroll 4
        for (int c = warp; c < nchunks; c += kCombineWarps) {
            float b = bmax[(size_t)c * g + hh];
            float f = b == -INFINITY ? 0.0f : expf(b - mx);
            acc = fmaf(f, part[((size_t)c * g + hh) * d + col], acc);
        }
    }
    sh[threadIdx.x] = acc;
    __syncthreads();
    if (warp == 0 && col < d) {
        float o = 0.0f;
        for (int w = 0; w < kCombineWarps; w++) o += sh[w * 32 + lane];
        out[(size_t)hh * d + col] = o * (1.0f / z);
    }
    if (fz && blockIdx.y == 0)
        for (int c = threadIdx.x; c < nchunks; c += blockDim.x) {
            float b = bmax[(size_t)c * g + hh];
            fz[(size_t)c * g + hh] = (b == -INFINITY ? 0.0f : expf(b - mx)) / z;
        }
}

// probs[hh][i] *= the factor of i's chunk; one block per chunk.
__global__ void dec_probs(float *probs, const float *fz, int n, int g, int chunk) {
    const int i0 = blockIdx.x * chunk, nb = min(chunk, n - i0);
    for (int t = threadIdx.x; t < g * nb; t += blockDim.x) {
        int hh = t / nb, ii = t % nb;
        probs[(size_t)hh * n + i0 + ii] *= fz[(size_t)blockIdx.x * g + hh];
    }
}

DevBuf d_part, d_stats;
bool g_smem_set = false;

bool kt_ok(int kt) { return kt == KB_F32 || kt == KB_F16 || kt == KB_BF16; }

bool shape_ok(const kb_decode_args *a) {
    return a->g >= 1 && a->g <= kMaxG && a->d >= 1 && (long)a->g * a->d <= kMaxGD;
}

// The three kernels for device pointers; lock held; asynchronous. n >= 1.
int decode_launch(const kb_decode_args *a) {
    const int g = a->g, d = a->d, n = a->n, chunk = chunk_size(n), nchunks = (n + chunk - 1) / chunk;
    if (kbcuda::reserve(d_part, (size_t)nchunks * g * d * sizeof(float), "decode partial outputs") ||
        kbcuda::reserve(d_stats, (size_t)nchunks * g * 3 * sizeof(float), "decode chunk statistics"))
        return -1;
    float *bmax = (float *)d_stats.p, *bsum = bmax + (size_t)nchunks * g, *fz = bsum + (size_t)nchunks * g;
    if (!g_smem_set) {   // above the default 48 KiB of dynamic shared memory
        const int mx = (int)kSplitSmemMax;
        CK(cudaFuncSetAttribute(dec_split<2 * KB_F32>, cudaFuncAttributeMaxDynamicSharedMemorySize, mx));
        CK(cudaFuncSetAttribute(dec_split<2 * KB_F32 + 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, mx));
        CK(cudaFuncSetAttribute(dec_split<2 * KB_F16>, cudaFuncAttributeMaxDynamicSharedMemorySize, mx));
        CK(cudaFuncSetAttribute(dec_split<2 * KB_F16 + 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, mx));
        CK(cudaFuncSetAttribute(dec_split<2 * KB_BF16>, cudaFuncAttributeMaxDynamicSharedMemorySize, mx));
        CK(cudaFuncSetAttribute(dec_split<2 * KB_BF16 + 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, mx));
        g_smem_set = true;
    }
    DecodeDev p = {a->q, a->K, a->V, a->idx, a->bias, g, d, n, chunk, 1.0f / sqrtf((float)d),
                   a->probs, (float *)d_part.p, bmax, bsum};
    size_t smem_bytes = split_smem(g, d, chunk);
    const int kt = a->kv_type;
    // vector loads: 4 elements per lane, rows aligned to 4 elements' bytes
    const bool vec4 = d % 4 == 0 && (uintptr_t)a->K % (4 * kb_kvtype_bytes(kt)) == 0 && (uintptr_t)a->q % 16 == 0;
    switch (2 * kt + vec4) {
        case 2 * KB_F32: KB_LAUNCH(dec_split<2 * KB_F32>, nchunks, kThreads, smem_bytes)(p); break;
        case 2 * KB_F32 + 1: KB_LAUNCH(dec_split<2 * KB_F32 + 1>, nchunks, kThreads, smem_bytes)(p); break;
        case 2 * KB_F16: KB_LAUNCH(dec_split<2 * KB_F16>, nchunks, kThreads, smem_bytes)(p); break;
        case 2 * KB_F16 + 1: KB_LAUNCH(dec_split<2 * KB_F16 + 1>, nchunks, kThreads, smem_bytes)(p); break;
        case 2 * KB_BF16: KB_LAUNCH(dec_split<2 * KB_BF16>, nchunks, kThreads, smem_bytes)(p); break;
        default: KB_LAUNCH(dec_split<2 * KB_BF16 + 1>, nchunks, kThreads, smem_bytes)(p); break;
    }
    CK_LAUNCH();
    KB_LAUNCH(dec_combine, dim3(g, (d + 31) / 32), 32 * kCombineWarps, 32 * kCombineWarps * sizeof(float))(
        p.part, bmax, bsum, nchunks, g, d, a->out, a->probs ? fz : nullptr);
    CK_LAUNCH();
    if (a->probs) {
        KB_LAUNCH(dec_probs, nchunks, 256, 0)(a->probs, fz, n, g, chunk);
        CK_LAUNCH();
    }
    return 0;
}

DevBuf d_q, d_k, d_v, d_bias, d_out, d_probs;
kbcuda::HostBuf h_stage;

// Host pointers: gather the listed rows on the host (only n rows cross the bus, in their
// stored type), copy in, launch, copy out. Lock held. n >= 1.
int decode_host(const kb_decode_args *a) {
    const int g = a->g, d = a->d, n = a->n;
    const size_t f = sizeof(float), rb = (size_t)d * kb_kvtype_bytes(a->kv_type), rows_bytes = (size_t)n * rb;
    if (kbcuda::reserve(d_q, (size_t)g * d * f, "decode queries") || kbcuda::reserve(d_k, rows_bytes, "decode keys") ||
        kbcuda::reserve(d_v, rows_bytes, "decode values") || kbcuda::reserve(d_out, (size_t)g * d * f, "decode output") ||
        (a->bias && kbcuda::reserve(d_bias, (size_t)n * f, "decode biases")) ||
        (a->probs && kbcuda::reserve(d_probs, (size_t)g * n * f, "decode probabilities")))
        return -1;
    CK(cudaMemcpy(d_q.p, a->q, (size_t)g * d * f, cudaMemcpyHostToDevice));
    if (a->idx) {
        if (kbcuda::reserve_pinned(h_stage, rows_bytes)) return -1;
        char *st = (char *)h_stage.p;
        for (const void *src : {a->K, a->V}) {
            for (int i = 0; i < n; i++) memcpy(st + (size_t)i * rb, (const char *)src + (size_t)a->idx[i] * rb, rb);
            CK(cudaMemcpy(src == a->K ? d_k.p : d_v.p, st, rows_bytes, cudaMemcpyHostToDevice));
        }
    } else {
        CK(cudaMemcpy(d_k.p, a->K, rows_bytes, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_v.p, a->V, rows_bytes, cudaMemcpyHostToDevice));
    }
    if (a->bias) CK(cudaMemcpy(d_bias.p, a->bias, (size_t)n * f, cudaMemcpyHostToDevice));
    kb_decode_args da = {g, d, n, (const float *)d_q.p, d_k.p, d_v.p, nullptr, a->bias ? (const float *)d_bias.p : nullptr,
                         (float *)d_out.p, a->probs ? (float *)d_probs.p : nullptr, a->kv_type};
    if (decode_launch(&da)) return -1;
    CK(cudaMemcpy(a->out, d_out.p, (size_t)g * d * f, cudaMemcpyDeviceToHost));   // waits for the kernels
    if (a->probs) CK(cudaMemcpy(a->probs, d_probs.p, (size_t)g * n * f, cudaMemcpyDeviceToHost));
    return 0;
}

}  // namespace

namespace kbcuda {

void decode_entry(const kb_decode_args *a) {
    if (a->n <= 0 || !shape_ok(a) || !kt_ok(a->kv_type)) {
        kb_cpu_decode(a);   // n = 0 writes zeros; shapes outside the kernels' limits run there
        return;
    }
    lock();
    int rc = decode_host(a);
    unlock();
    if (rc) {
        fprintf(stderr, "kb cuda: decode failed on the device; computing it on the CPU\n");
        kb_cpu_decode(a);
    }
}

}  // namespace kbcuda

extern "C" int kb_cuda_decode_dev(const kb_decode_args *a) {
    if (!kt_ok(a->kv_type)) {
        fprintf(stderr, "kb cuda decode: unknown K/V element type %d\n", a->kv_type);
        return -1;
    }
    if (!shape_ok(a)) {
        fprintf(stderr, "kb cuda decode: g=%d d=%d is outside the kernels' limits (g <= %d, g*d <= %d)\n", a->g,
                a->d, kMaxG, kMaxGD);
        return -1;
    }
    kbcuda::lock();
    int rc = 0;
    if (a->n <= 0) {
        cudaError_t e = cudaMemsetAsync(a->out, 0, (size_t)a->g * a->d * sizeof(float), 0);
        if (e != cudaSuccess) {
            fprintf(stderr, "kb cuda decode: cudaMemsetAsync: %s\n", cudaGetErrorString(e));
            rc = -1;
        }
    } else {
        rc = decode_launch(a);
    }
    kbcuda::unlock();
    return rc;
}

extern "C" int kb_cuda_sync(void) {
    CK(cudaDeviceSynchronize());
    return 0;
}

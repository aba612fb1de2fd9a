// Prefill attention on the device: causal, GQA, f32 throughout (the tensor-core path, the
// default, is cuda_attn_tc.cu; KB_PREFILL_TC=0 selects these kernels), and the H2O / SnapKV
// statistics (col_mass, win_probs) computed there too.
//
// Kernel 1, prefill_fwd: one block per (tile of queries, query head). Each query is owned
// by a group of R threads (4; 8 for head dims above 128); thread `part` of the group
// keeps the float4 groups part, part+R, part+2R, ... of the query (and of its output) in
// registers. Key and value tiles are staged through shared memory; a logit is the group's
// partial dot products summed by shuffles, so all R threads hold every logit and run the
// same online softmax (running max, rescaled sum and output; each key tile is summed on
// its own first, which keeps f32 error low over 10^5 keys). It writes out and the
// log-sum-exp of every query row.
//
// Kernel 2, prefill_stats (only when col_mass or win_probs is asked for): one block per
// (tile of keys, query head); a group of R threads per key holds the key's float4 groups
// in registers and the block walks the query rows in order, staging them in shared memory. Each
// probability is exp(logit - lse), the logit recomputed with the same partition and
// order as in kernel 1 (so bit-identical). A key column's mass is summed by its own group
// in query order: deterministic, with no atomics.
//
// Head dims up to 256 (template buckets 32/64/128/256, zero-padded). The host entry
// point copies the inputs in, runs both kernels, and copies the results back through
// device buffers that are cached and grow as needed; any failure falls back to the CPU.
extern "C" {
#include "core.h"
#include "cpu.h"
}
#include "cuda_backend.h"
#include "cuda_util.h"

#include <cmath>
#include <cstring>

namespace {

using kbcuda::DevBuf;

constexpr int kThreads = 128;
constexpr unsigned kFull = 0xffffffffu;

struct PrefillDev {
    const float *Q, *K, *V;
    size_t kv_stride;
    float *out, *lse;          // lse [H][m]
    float *col_mass;
    size_t mass_ld;
    float *win;
    int win_n, win_start;
    size_t win_ld;
    int H, g, d, t0, m;
    float scale;
};

// The layout for head-dim bucket D: R threads per query (or key) row, each holding G
// float4 groups of it (groups part, part+R, part+2R, ...); BQ rows per 128-thread block;
// BK keys per shared-memory tile in the forward kernel.
template <int D>
struct Tile {
    static constexpr int R = D >= 256 ? 8 : 4;
    static constexpr int BQ = kThreads / R;
    static constexpr int BK = D >= 256 ? 16 : 32;
    static constexpr int D4 = D / 4;
    static constexpr int G = D4 / R;
};

// The group's partial dot product: its G float4 groups of a against b[0], b[R], b[2R], ...
template <int G, int R>
__device__ __forceinline__ float dot_slice(const float4 (&a)[G], const float4 *b) {
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < G; i++) {
        float4 v = b[R * i];
        acc = fmaf(a[i].x, v.x, acc);
        acc = fmaf(a[i].y, v.y, acc);
        acc = fmaf(a[i].z, v.z, acc);
        acc = fmaf(a[i].w, v.w, acc);
    }
    return acc;
}

// Sum over the R lanes of a group (a butterfly); every lane gets the same bits, since each
// step adds the same two values, only in swapped order.
template <int R>
__device__ __forceinline__ float group_sum(float x) {
#pragma unroll
    for (int off = 1; off < R; off *= 2) x += __shfl_xor_sync(kFull, x, off);
    return x;
}

// Groups part, part+R, ... of a row of d floats (zeros past d) into registers.
template <int G, int R>
__device__ __forceinline__ void load_slice(float4 (&r)[G], const float *row, int part, int d) {
#pragma unroll
    for (int i = 0; i < G; i++) {
        int c = 4 * (part + R * i);
        r[i] = make_float4(c < d ? row[c] : 0.0f, c + 1 < d ? row[c + 1] : 0.0f, c + 2 < d ? row[c + 2] : 0.0f,
                           c + 3 < d ? row[c + 3] : 0.0f);
    }
}

template <int D>
__global__ void __launch_bounds__(kThreads) prefill_fwd(PrefillDev p) {
    constexpr int R = Tile<D>::R, BQ = Tile<D>::BQ, BK = Tile<D>::BK, G = Tile<D>::G, D4 = Tile<D>::D4;
    extern __shared__ float4 smem[];
    float4 *Ks = smem, *Vs = smem + BK * D4;
    float *Ksf = reinterpret_cast<float *>(Ks), *Vsf = reinterpret_cast<float *>(Vs);

    const int h = blockIdx.y, j = h / p.g;
    const int q0 = (gridDim.x - 1 - blockIdx.x) * BQ;   // the longest tiles start first
    const int qi = threadIdx.x / R, part = threadIdx.x % R;
    const int q = min(q0 + qi, p.m - 1);                 // rows past m redo the last one, unwritten
    const int pos = p.t0 + q;
    const int kend = p.t0 + min(q0 + BQ, p.m);           // keys any row of the tile can see
    const float *Kj = p.K + (size_t)j * p.kv_stride, *Vj = p.V + (size_t)j * p.kv_stride;

    float4 qr[G], o[G];
    load_slice<G, R>(qr, p.Q + ((size_t)q * p.H + h) * p.d, part, p.d);
#pragma unroll
    for (int i = 0; i < G; i++) o[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float mrun = -INFINITY, l = 0.0f;

    for (int k0 = 0; k0 < kend; k0 += BK) {
        __syncthreads();   // the previous tile is consumed
        for (int e = threadIdx.x; e < BK * D; e += kThreads) {
            int r = e / D, c = e % D, key = k0 + r;
            bool ok = key < kend && c < p.d;
            Ksf[e] = ok ? Kj[(size_t)key * p.d + c] : 0.0f;
            Vsf[e] = ok ? Vj[(size_t)key * p.d + c] : 0.0f;
        }
        __syncthreads();
        float s[BK];
        float tmax = -INFINITY;
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float dot = group_sum<R>(dot_slice<G, R>(qr, Ks + kk * D4 + part));
            s[kk] = k0 + kk <= pos ? dot * p.scale : -INFINITY;
            tmax = fmaxf(tmax, s[kk]);
        }
        const float mnew = fmaxf(mrun, tmax);
        // the tile's own sums first, then one rescaled add into the running ones: long
        // contexts add a few thousand tile sums instead of 10^5 single terms (f32 error)
        float tl = 0.0f;
        float4 to[G];
#pragma unroll
        for (int i = 0; i < G; i++) to[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float pk = s[kk] == -INFINITY ? 0.0f : expf(s[kk] - mnew);
            tl += pk;
            const float4 *v = Vs + kk * D4 + part;
#pragma unroll
            for (int i = 0; i < G; i++) {
                float4 vv = v[R * i];
                to[i].x = fmaf(pk, vv.x, to[i].x);
                to[i].y = fmaf(pk, vv.y, to[i].y);
                to[i].z = fmaf(pk, vv.z, to[i].z);
                to[i].w = fmaf(pk, vv.w, to[i].w);
            }
        }
        const float alpha = mrun == -INFINITY ? 0.0f : expf(mrun - mnew);
        l = fmaf(l, alpha, tl);
#pragma unroll
        for (int i = 0; i < G; i++) {
            o[i].x = fmaf(o[i].x, alpha, to[i].x);
            o[i].y = fmaf(o[i].y, alpha, to[i].y);
            o[i].z = fmaf(o[i].z, alpha, to[i].z);
            o[i].w = fmaf(o[i].w, alpha, to[i].w);
        }
        mrun = mnew;
    }
    if (q0 + qi >= p.m) return;
    const float inv = 1.0f / l;
    float *orow = p.out + ((size_t)q * p.H + h) * p.d;
#pragma unroll
    for (int i = 0; i < G; i++) {
        int c = 4 * (part + R * i);
        if (c < p.d) orow[c] = o[i].x * inv;
        if (c + 1 < p.d) orow[c + 1] = o[i].y * inv;
        if (c + 2 < p.d) orow[c + 2] = o[i].z * inv;
        if (c + 3 < p.d) orow[c + 3] = o[i].w * inv;
    }
    if (part == 0) p.lse[(size_t)h * p.m + q] = mrun + logf(l);
}

// One block per (BQ keys, head). Window rows [w0, w1) are chunk-relative query indices.
template <int D>
__global__ void __launch_bounds__(kThreads) prefill_stats(PrefillDev p, int w0, int w1) {
    constexpr int R = Tile<D>::R, BQ = Tile<D>::BQ, G = Tile<D>::G, D4 = Tile<D>::D4;
    extern __shared__ float4 smem[];
    float4 *Qs = smem;   // BQ query rows
    float *Qsf = reinterpret_cast<float *>(Qs), *ls = reinterpret_cast<float *>(Qs + BQ * D4);

    const int h = blockIdx.y, j = h / p.g;
    const int k0 = blockIdx.x * BQ, key = k0 + (int)threadIdx.x / R, part = threadIdx.x % R;
    const int L = p.t0 + p.m;
    float4 kr[G];
    if (key < L) {
        load_slice<G, R>(kr, p.K + (size_t)j * p.kv_stride + (size_t)key * p.d, part, p.d);
    } else {
#pragma unroll
        for (int i = 0; i < G; i++) kr[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    // Rows to visit: for the mass, those that see a key of this tile (pos >= k0);
    // window rows always, since their later keys must be written as 0.
    int lo = p.m, hi = 0;
    if (p.col_mass && k0 < L) {
        lo = max(0, k0 - p.t0);
        hi = p.m;
    }
    if (w1 > w0) {
        lo = min(lo, w0);
        hi = max(hi, w1);
    }
    float acc = 0.0f;
    for (int qt = lo; qt < hi; qt += BQ) {
        __syncthreads();
        for (int e = threadIdx.x; e < BQ * D; e += kThreads) {
            int r = e / D, c = e % D, qq = qt + r;
            Qsf[e] = qq < hi && c < p.d ? p.Q[((size_t)qq * p.H + h) * p.d + c] : 0.0f;
        }
        const int t = threadIdx.x;
        if (t < BQ) ls[t] = qt + t < hi ? p.lse[(size_t)h * p.m + qt + t] : 0.0f;
        __syncthreads();
        const int nr = min(BQ, hi - qt);
        for (int r = 0; r < nr; r++) {
            float dot = group_sum<R>(dot_slice<G, R>(kr, Qs + r * D4 + part));
            int qq = qt + r, pos = p.t0 + qq;
            float a = key < L && key <= pos ? expf(dot * p.scale - ls[r]) : 0.0f;
            acc += a;
            if (part == 0 && qq >= w0 && qq < w1 && (size_t)key < p.win_ld)
                p.win[((size_t)h * p.win_n + (pos - p.win_start)) * p.win_ld + key] = a;
        }
    }
    if (p.col_mass && part == 0 && key < L) p.col_mass[(size_t)h * p.mass_ld + key] += acc;
}

template <int D>
int launch(const PrefillDev &p, int w0, int w1, size_t keys) {
    constexpr int BQ = Tile<D>::BQ;
    const int ntiles = (p.m + BQ - 1) / BQ;
    const size_t fwd_smem = 2 * (size_t)Tile<D>::BK * D * sizeof(float);
    KB_LAUNCH(prefill_fwd<D>, dim3(ntiles, p.H), kThreads, fwd_smem)(p);
    CK_LAUNCH();
    if (p.col_mass || w1 > w0) {
        const size_t stats_smem = ((size_t)BQ * D + BQ) * sizeof(float);
        const int kblocks = (int)((keys + BQ - 1) / BQ);
        KB_LAUNCH(prefill_stats<D>, dim3(kblocks, p.H), kThreads, stats_smem)(p, w0, w1);
        CK_LAUNCH();
    }
    return 0;
}

DevBuf d_q, d_k, d_v, d_out, d_lse, d_mass, d_win;
kbcuda::HostBuf h_mass;   // the column mass on its way back (see prefill_host)

// Both kernels for args whose pointers are all device memory; lock held. Asynchronous.
int prefill_launch(const kb_prefill_args *a) {
    if (a->d > 256) {
        fprintf(stderr, "kb cuda prefill: head dim %d is above the kernels' 256\n", a->d);
        return -1;
    }
    if (kbcuda::reserve(d_lse, (size_t)a->H * a->m * sizeof(float), "prefill log-sum-exp")) return -1;
    if (kbcuda::prefill_tc_on()) return kbcuda::prefill_tc_launch(a, (float *)d_lse.p);   // cuda_attn_tc.cu
    PrefillDev p = {a->Q, a->K, a->V, a->kv_stride, a->out, (float *)d_lse.p, a->col_mass, a->mass_ld,
                    nullptr, 0, 0, 0, a->H, a->H / a->Hkv, a->d, a->t0, a->m, 1.0f / sqrtf((float)a->d)};
    const int L = a->t0 + a->m;
    int w0 = 0, w1 = 0;   // this chunk's window rows
    if (a->win_probs && a->win > 0) {
        w0 = a->win_start - a->t0 > 0 ? a->win_start - a->t0 : 0;
        w1 = a->win_start + a->win - a->t0 < a->m ? a->win_start + a->win - a->t0 : a->m;
        if (w1 > w0) {
            p.win = a->win_probs;
            p.win_n = a->win;
            p.win_start = a->win_start;
            p.win_ld = a->win_ld;
        } else {
            w0 = w1 = 0;
        }
    }
    size_t keys = (size_t)L;   // window rows are written up to win_ld, zeros past L
    if (w1 > w0 && a->win_ld > keys) keys = a->win_ld;
    if (a->d <= 32) return launch<32>(p, w0, w1, keys);
    if (a->d <= 64) return launch<64>(p, w0, w1, keys);
    if (a->d <= 128) return launch<128>(p, w0, w1, keys);
    return launch<256>(p, w0, w1, keys);
}

bool bad_shape(const kb_prefill_args *a) {
    return a->H <= 0 || a->Hkv <= 0 || a->H % a->Hkv || a->d <= 0 || a->t0 < 0;
}

// Host pointers: copy in, launch, copy out. Lock held.
int prefill_host(const kb_prefill_args *a) {
    const int H = a->H, Hkv = a->Hkv, d = a->d, m = a->m, L = a->t0 + m;
    const size_t f = sizeof(float), qbytes = (size_t)m * H * d * f, kvbytes = (size_t)Hkv * L * d * f;
    int ws = 0, nw = 0;   // window rows of this chunk, as absolute positions [ws, ws + nw)
    if (a->win_probs && a->win > 0) {
        ws = a->win_start > a->t0 ? a->win_start : a->t0;
        int we = a->win_start + a->win < L ? a->win_start + a->win : L;
        nw = we > ws ? we - ws : 0;
    }
    if (kbcuda::reserve(d_q, qbytes, "prefill queries") || kbcuda::reserve(d_k, kvbytes, "prefill keys") ||
        kbcuda::reserve(d_v, kvbytes, "prefill values") || kbcuda::reserve(d_out, qbytes, "prefill output") ||
        (a->col_mass && kbcuda::reserve(d_mass, (size_t)H * L * f, "prefill column mass")) ||
        (nw && kbcuda::reserve(d_win, (size_t)H * nw * L * f, "prefill window probabilities")) ||
        (a->col_mass && kbcuda::reserve_pinned(h_mass, (size_t)H * L * f)))
        return -1;
    float *dq = (float *)d_q.p, *dk = (float *)d_k.p, *dv = (float *)d_v.p, *dout = (float *)d_out.p;
    float *dmass = (float *)d_mass.p, *dwin = (float *)d_win.p;
    CK(cudaMemcpy(dq, a->Q, qbytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy2D(dk, (size_t)L * d * f, a->K, a->kv_stride * f, (size_t)L * d * f, Hkv, cudaMemcpyHostToDevice));
    CK(cudaMemcpy2D(dv, (size_t)L * d * f, a->V, a->kv_stride * f, (size_t)L * d * f, Hkv, cudaMemcpyHostToDevice));
    if (a->col_mass)
        CK(cudaMemcpy2D(dmass, (size_t)L * f, a->col_mass, a->mass_ld * f, (size_t)L * f, H, cudaMemcpyHostToDevice));

    kb_prefill_args da = *a;
    da.Q = dq;
    da.K = dk;
    da.V = dv;
    da.kv_stride = (size_t)L * d;
    da.out = dout;
    da.col_mass = a->col_mass ? dmass : nullptr;
    da.mass_ld = (size_t)L;
    da.win_probs = nw ? dwin : nullptr;
    da.win = nw;
    da.win_start = ws;
    da.win_ld = (size_t)L;
    if (prefill_launch(&da)) return -1;

    CK(cudaMemcpy(a->out, dout, qbytes, cudaMemcpyDeviceToHost));   // waits for the kernels
    if (nw) {
        size_t width = a->win_ld < (size_t)L ? a->win_ld : (size_t)L;
        for (int h = 0; h < H; h++) {
            float *dst = a->win_probs + ((size_t)h * a->win + (ws - a->win_start)) * a->win_ld;
            CK(cudaMemcpy2D(dst, a->win_ld * f, dwin + (size_t)h * nw * L, (size_t)L * f, width * f, nw,
                            cudaMemcpyDeviceToHost));
            for (int r = 0; r < nw && width < a->win_ld; r++)   // later keys are 0
                memset(dst + (size_t)r * a->win_ld + width, 0, (a->win_ld - width) * f);
        }
    }
    // The column mass is accumulated into (+=), so the caller's copy changes only once
    // nothing can fail any more: a failed copy leaves it as it was, and the CPU fallback
    // then adds this chunk once, not twice.
    if (a->col_mass) {
        float *hm = (float *)h_mass.p;
        CK(cudaMemcpy(hm, dmass, (size_t)H * L * f, cudaMemcpyDeviceToHost));
        for (int h = 0; h < H; h++) memcpy(a->col_mass + (size_t)h * a->mass_ld, hm + (size_t)h * L, (size_t)L * f);
    }
    return 0;
}

}  // namespace

namespace kbcuda {

// The table's prefill: on the device, or on the CPU when that fails or cannot apply.
void prefill_entry(const kb_prefill_args *a) {
    if (a->m <= 0) return;
    if (bad_shape(a) || a->d > 256) {
        kb_cpu_prefill(a);   // reports a bad shape; head dims above 256 run there
        return;
    }
    lock();
    int rc = prefill_host(a);
    unlock();
    if (rc) {
        fprintf(stderr, "kb cuda: prefill failed on the device; computing it on the CPU\n");
        kb_cpu_prefill(a);
    }
}

}  // namespace kbcuda

extern "C" int kb_cuda_prefill_dev(const kb_prefill_args *a) {
    if (a->m <= 0) return 0;
    if (bad_shape(a)) {
        fprintf(stderr, "kb cuda prefill: bad shape H=%d Hkv=%d d=%d t0=%d\n", a->H, a->Hkv, a->d, a->t0);
        return -1;
    }
    kbcuda::lock();
    int rc = prefill_launch(a);
    kbcuda::unlock();
    return rc;
}

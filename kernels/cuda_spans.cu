// SeKV's slow tier on the device (see cuda_spans.h): factors (or a span's rows) copied
// from pinned host memory to a staging buffer on the copy stream, then one kernel that
// rebuilds every selected span into its group's device rows (kb_kvdev_rows_dev), in the
// rows' element type.
extern "C" {
#include "core.h"
#include "kvtype.h"
}
#include "cuda_backend.h"
#include "cuda_spans.h"
#include "cuda_util.h"

#include <new>
#include <vector>

using kbcuda::DevBuf;
using kbcuda::HostBuf;
using kbcuda::release;

namespace {

constexpr int kThreads = 128;

// One span: f its factors in the staging buffer (K's U, s, Vt, then V's; r = 0: its rows,
// K's [len][d] then V's), m its gate masks (K's r, then V's r), out the device rows for K
// and V, elements of type.
struct Job {
    const float *f, *m;
    void *out[2];
    int len, r, d, type;
};

// f32 -> 16 bits exactly as kvtype.h's kb_f32_to_bf16 / kb_f32_to_f16 (nearest, ties to
// even; NaN quieted; f16 keeps subnormals), so the rows match the host's bit for bit.
__device__ __forceinline__ uint32_t f32_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}
__device__ __forceinline__ float bits_f32(uint32_t x) {
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}
__device__ __forceinline__ uint16_t to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}
__device__ __forceinline__ uint16_t to_f16(float f) {
    uint32_t x = f32_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {
        float a = __fadd_rn(bits_f32(ax), 0.5f);
        return (uint16_t)(sign | (f32_bits(a) - 0x3f000000u));
    }
    ax += 0xc8000fffu + ((ax >> 13) & 1);
    return (uint16_t)(sign | (ax >> 13));
}
__device__ __forceinline__ void store(void *rows, int e, float x, int type) {
    if (type == KB_BF16) static_cast<uint16_t *>(rows)[e] = to_bf16(x);
    else if (type == KB_F16) static_cast<uint16_t *>(rows)[e] = to_f16(x);
    else static_cast<float *>(rows)[e] = x;
}

// Block (span, side): out[t][i] = sum_k ((U[t][k] s_k) m_k) Vt[k][i], k ascending, each
// product and sum rounded on its own (no FMA): the operations of sekv_reconstruct in its
// order, so that a row is the host's to the bit before it is stored in the rows' type.
// r = 0 copies the span's rows. Side 0 writes K, side 1 V.
__global__ void __launch_bounds__(kThreads) rebuild_spans(const Job *jobs) {
    const Job j = jobs[blockIdx.x];
    const int side = blockIdx.y, len = j.len, r = j.r, d = j.d;
    void *out = j.out[side];
    if (r == 0) {
        const float *rows = j.f + (size_t)side * len * d;
        for (int e = threadIdx.x; e < len * d; e += blockDim.x) store(out, e, rows[e], j.type);
        return;
    }
    const size_t nf = (size_t)len * r + r + (size_t)r * d;
    const float *U = j.f + side * nf, *s = U + (size_t)len * r, *Vt = s + r, *m = j.m + side * r;
    for (int e = threadIdx.x; e < len * d; e += blockDim.x) {
        const int t = e / d, i = e - t * d;
        float o = 0;
        for (int k = 0; k < r; k++) {
            const float c = __fmul_rn(__fmul_rn(U[(size_t)t * r + k], s[k]), m[k]);
            o = __fadd_rn(o, __fmul_rn(c, Vt[(size_t)k * d + i]));
        }
        store(out, e, o, j.type);
    }
}

// Floats staged for one side (K or V) of a span: its factors, or its rows.
size_t side_floats(const kb_spans_span &s) {
    return s.rows ? (size_t)s.len * s.d : (size_t)s.len * s.r + s.r + (size_t)s.r * s.d;
}
int side_masks(const kb_spans_span &s) { return s.rows ? 0 : s.r; }

int bad(const char *why) {
    fprintf(stderr, "kb cuda spans: %s\n", why);
    return -1;
}

}  // namespace

// The staging buffers (fac, sm, jobs on the device; hsm, hjobs pinned) are reused by every
// step. The next stage may touch them only once the last rebuild kernel, and the copies
// fenced before it (which read hsm, hjobs and the spans' pinned factors), are done: `done`
// is recorded after that kernel, and the next stage waits for it. Callers that already
// waited (a decode copies its output back) find it complete and lose nothing.
struct kb_spans_dev {
    DevBuf fac, sm, jobs;       // staged factors (or rows), gate masks, the kernel's jobs
    HostBuf hsm, hjobs;         // pinned sources of the last two
    std::vector<size_t> fac_off, sm_off;   // floats, per staged span
    int staged = 0;
    cudaEvent_t done = nullptr; // after the last rebuild kernel
    bool pending = false;       // done was recorded and not yet waited for
    kb_kvdev_batch *batch = nullptr;   // the batched decodes' buffers
};

extern "C" kb_spans_dev *kb_spans_dev_new(void) {
    kb_spans_dev *x = new (std::nothrow) kb_spans_dev();
    if (!x) fprintf(stderr, "kb cuda spans: out of host memory\n");
    return x;
}

extern "C" void kb_spans_dev_free(kb_spans_dev *x) {
    if (!x) return;
    release(x->fac);
    release(x->sm);
    release(x->jobs);
    release(x->hsm);
    release(x->hjobs);
    if (x->done) cudaEventDestroy(x->done);
    kb_kvdev_batch_free(x->batch);
    delete x;
}

extern "C" size_t kb_spans_dev_bytes(const kb_spans_dev *x) {
    if (!x) return 0;
    size_t b = 0;
    for (const DevBuf *p : {&x->fac, &x->sm, &x->jobs}) b += p->p ? p->cap : 0;
    return b + kb_kvdev_batch_bytes(x->batch);
}

extern "C" kb_kvdev_batch *kb_spans_dev_batch(kb_spans_dev *x) {
    if (!x->batch) x->batch = kb_kvdev_batch_new();
    return x->batch;
}

extern "C" int kb_spans_dev_stage(kb_spans_dev *x, const kb_spans_span *sp, int n) {
    x->staged = 0;
    if (n < 0 || (n > 0 && !sp)) return bad("stage of a bad span list");
    if (n == 0) return 0;
    if (x->pending) {   // the last rebuild (and its copies) may still use the staging buffers
        CK(cudaEventSynchronize(x->done));
        x->pending = false;
    }
    x->fac_off.resize((size_t)n);
    x->sm_off.resize((size_t)n);
    size_t nfac = 0, nsm = 0;
    for (int i = 0; i < n; i++) {
        const kb_spans_span &s = sp[i];
        if (s.len < 1 || s.d < 1 || !s.buf || (!s.rows && (s.r < 1 || s.r > s.len || s.r > s.d || !s.mk || !s.mv)))
            return bad("stage of a span with a bad shape or no factors");
        x->fac_off[i] = nfac;
        x->sm_off[i] = nsm;
        nfac += 2 * side_floats(s);
        nsm += 2 * (size_t)side_masks(s);
    }
    const size_t f = sizeof(float);
    if (kbcuda::reserve(x->fac, nfac * f, "SeKV span factors") || kbcuda::reserve(x->sm, (nsm ? nsm : 1) * f, "SeKV gate masks") ||
        kbcuda::reserve_pinned(x->hsm, (nsm ? nsm : 1) * f))
        return -1;
    float *hsm = (float *)x->hsm.p;
    for (int i = 0; i < n; i++) {   // the gate masks of K and V (pageable: copied to pinned memory)
        const kb_spans_span &s = sp[i];
        float *o = hsm + x->sm_off[i];
        for (int k = 0; k < side_masks(s); k++) {
            o[k] = s.mk[k];
            o[s.r + k] = s.mv[k];
        }
    }
    for (int i = 0; i < n; i++)
        if (kb_cuda_copy_h2d_async((float *)x->fac.p + x->fac_off[i], sp[i].buf, 2 * side_floats(sp[i]) * f))
            return -1;
    if (nsm && kb_cuda_copy_h2d_async(x->sm.p, hsm, nsm * f)) return -1;
    x->staged = n;
    return 0;
}

extern "C" int kb_spans_dev_rebuild(kb_spans_dev *x, const kb_spans_span *sp, int n) {
    if (n == 0) return 0;
    if (n != x->staged || !sp) return bad("rebuild of spans that were not staged");
    x->staged = 0;
    const size_t jb = (size_t)n * sizeof(Job);
    if (kbcuda::reserve(x->jobs, jb, "SeKV rebuild jobs") || kbcuda::reserve_pinned(x->hjobs, jb)) return -1;
    Job *hj = (Job *)x->hjobs.p;
    for (int i = 0; i < n; i++) {
        const kb_spans_span &s = sp[i];
        if (!s.m) return bad("rebuild without device rows");
        void *K = nullptr, *V = nullptr;
        if (kb_kvdev_rows_dev(s.m, s.row, s.len, &K, &V)) return -1;
        hj[i] = Job{(const float *)x->fac.p + x->fac_off[i], (const float *)x->sm.p + x->sm_off[i], {K, V}, s.len,
                    s.rows ? 0 : s.r, s.d, kb_kvdev_type(s.m)};
    }
    if (kb_cuda_copy_h2d_async(x->jobs.p, hj, jb) || kb_cuda_copy_fence()) return -1;
    KB_LAUNCH(rebuild_spans, dim3(n, 2), kThreads, 0)((const Job *)x->jobs.p);
    CK_LAUNCH();
    if (!x->done) CK(cudaEventCreateWithFlags(&x->done, cudaEventDisableTiming));
    CK(cudaEventRecord(x->done, kbcuda::kStream));
    x->pending = true;
    return 0;
}

extern "C" int kb_cuda_host_pinned(const void *p) {
    cudaPointerAttributes at;
    CK(cudaPointerGetAttributes(&at, p));
    return at.type == cudaMemoryTypeHost;
}

// SeKV's slow tier on the device (see cuda_spans.h): factors copied from pinned host
// memory to a staging buffer on the copy stream, then one kernel that rebuilds every
// selected span into its group's device rows (kb_kvdev_rows_dev).
extern "C" {
#include "core.h"
}
#include "cuda_backend.h"
#include "cuda_spans.h"
#include "cuda_util.h"

#include <new>
#include <vector>

using kbcuda::DevBuf;
using kbcuda::HostBuf;

namespace {

constexpr int kThreads = 128;

// One span: f its factors in the staging buffer (K's U, s, Vt, then V's), sm its masked
// singular values (K's r, then V's r), out the device rows for K and V.
struct Job {
    const float *f, *sm;
    float *out[2];
    int len, r, d;
};

// Block (span, side): out[t][i] = sum_k U[t][k] (s_k m_k) Vt[k][i], k ascending as in
// sekv_reconstruct; side 0 rebuilds K, side 1 V.
__global__ void __launch_bounds__(kThreads) rebuild_spans(const Job *jobs) {
    const Job j = jobs[blockIdx.x];
    const int side = blockIdx.y, len = j.len, r = j.r, d = j.d;
    const size_t nf = (size_t)len * r + r + (size_t)r * d;
    const float *U = j.f + side * nf, *Vt = U + (size_t)len * r + r, *sm = j.sm + side * r;
    float *out = j.out[side];
    for (int e = threadIdx.x; e < len * d; e += blockDim.x) {
        const int t = e / d, i = e - t * d;
        float o = 0;
        for (int k = 0; k < r; k++) o += U[(size_t)t * r + k] * sm[k] * Vt[(size_t)k * d + i];
        out[e] = o;
    }
}

size_t factor_floats(const kb_spans_span &s) { return (size_t)s.len * s.r + s.r + (size_t)s.r * s.d; }

void release(DevBuf &b) {
    kb_cuda_free(b.p);
    b.p = nullptr;
    b.cap = 0;
}

void release(HostBuf &b) {
    kb_cuda_host_free(b.p);
    b.p = nullptr;
    b.cap = 0;
}

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
    DevBuf fac, sm, jobs;       // staged factors, masked singular values, the kernel's jobs
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
        if (s.len < 1 || s.d < 1 || s.r < 1 || s.r > s.len || s.r > s.d || !s.buf || !s.mk || !s.mv)
            return bad("stage of a span with a bad shape or no factors");
        x->fac_off[i] = nfac;
        x->sm_off[i] = nsm;
        nfac += 2 * factor_floats(s);
        nsm += 2 * (size_t)s.r;
    }
    const size_t f = sizeof(float);
    if (kbcuda::reserve(x->fac, nfac * f, "SeKV span factors") || kbcuda::reserve(x->sm, nsm * f, "SeKV gated s") ||
        kbcuda::reserve_pinned(x->hsm, nsm * f))
        return -1;
    float *hsm = (float *)x->hsm.p;
    for (int i = 0; i < n; i++) {   // s m for K and V (the gate folded into s)
        const kb_spans_span &s = sp[i];
        const size_t nf = factor_floats(s), us = (size_t)s.len * s.r;
        float *o = hsm + x->sm_off[i];
        for (int k = 0; k < s.r; k++) {
            o[k] = s.buf[us + k] * s.mk[k];
            o[s.r + k] = s.buf[nf + us + k] * s.mv[k];
        }
    }
    for (int i = 0; i < n; i++)
        if (kb_cuda_copy_h2d_async((float *)x->fac.p + x->fac_off[i], sp[i].buf, 2 * factor_floats(sp[i]) * f))
            return -1;
    if (kb_cuda_copy_h2d_async(x->sm.p, hsm, nsm * f)) return -1;
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
        float *K = nullptr, *V = nullptr;
        if (kb_kvdev_rows_dev(s.m, s.row, s.len, &K, &V)) return -1;
        hj[i] = Job{(const float *)x->fac.p + x->fac_off[i], (const float *)x->sm.p + x->sm_off[i], {K, V}, s.len,
                    s.r, s.d};
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

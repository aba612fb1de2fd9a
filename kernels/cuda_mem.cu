// The CUDA backend's memory: a tracked device allocator (current and peak bytes),
// pinned host memory, a second stream for asynchronous copies, event timers, the
// device-to-device copy yardstick, and the backend's lock (see cuda_util.h).
#include "cuda_mem.h"
#include "cuda_util.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace {

pthread_mutex_t g_backend_lock = PTHREAD_MUTEX_INITIALIZER;

pthread_mutex_t g_alloc_lock = PTHREAD_MUTEX_INITIALIZER;   // guards the three below
std::unordered_map<void *, size_t> *g_sizes = nullptr;
size_t g_cur = 0, g_peak = 0;
size_t g_drv_peak = 0;   // the most device memory in use the driver reported at a sample

// The driver's view now (cudaMemGetInfo: every process, the context, the libraries'
// own memory): total - free, folded into g_drv_peak. Lock held. 0 or -1.
int sample_locked(size_t *used) {
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) return -1;
    *used = tot - fr;
    g_drv_peak = std::max(g_drv_peak, *used);
    return 0;
}

pthread_mutex_t g_stream_lock = PTHREAD_MUTEX_INITIALIZER;
cudaStream_t g_copy_stream = nullptr;
cudaEvent_t g_copy_event = nullptr;

// The copy stream and its fence event, created on first use. 0 or -1.
int copy_stream(cudaStream_t *s) {
    pthread_mutex_lock(&g_stream_lock);
    cudaError_t e = cudaSuccess;
    if (!g_copy_stream) e = cudaStreamCreateWithFlags(&g_copy_stream, cudaStreamNonBlocking);
    if (e == cudaSuccess && !g_copy_event) e = cudaEventCreateWithFlags(&g_copy_event, cudaEventDisableTiming);
    *s = g_copy_stream;
    pthread_mutex_unlock(&g_stream_lock);
    if (e != cudaSuccess) {
        fprintf(stderr, "kb cuda: creating the copy stream: %s\n", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

}  // namespace

namespace kbcuda {

void lock() { pthread_mutex_lock(&g_backend_lock); }
void unlock() { pthread_mutex_unlock(&g_backend_lock); }

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

int reserve(DevBuf &b, size_t bytes, const char *what) {
    if (bytes <= b.cap && b.p) return 0;
    release(b);
    // a little headroom so that slowly growing shapes do not reallocate every call
    size_t want = bytes + bytes / 8;
    if (want < 256) want = 256;
    b.p = kb_cuda_malloc(want, what);
    if (!b.p) return -1;
    b.cap = want;
    return 0;
}

int reserve_pinned(HostBuf &b, size_t bytes) {
    if (bytes <= b.cap && b.p) return 0;
    release(b);
    size_t want = bytes + bytes / 8;
    if (want < 256) want = 256;
    b.p = kb_cuda_host_alloc(want);
    if (!b.p) return -1;
    b.cap = want;
    return 0;
}

}  // namespace kbcuda

extern "C" void *kb_cuda_malloc(size_t bytes, const char *what) {
    void *p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        fprintf(stderr, "kb cuda: cudaMalloc of %zu bytes for %s: %s (%zu of %zu MiB free)\n", bytes,
                what ? what : "a buffer", cudaGetErrorString(e), fr >> 20, tot >> 20);
        cudaGetLastError();   // clear the sticky-free error state of the runtime
        return nullptr;
    }
    pthread_mutex_lock(&g_alloc_lock);
    if (!g_sizes) g_sizes = new std::unordered_map<void *, size_t>();
    (*g_sizes)[p] = bytes;
    g_cur += bytes;
    g_peak = std::max(g_peak, g_cur);
    size_t used;
    sample_locked(&used);   // the driver's view at every allocation: where peaks are made
    pthread_mutex_unlock(&g_alloc_lock);
    return p;
}

// Work queued on the device may still read or write a buffer being freed (a grown cache
// buffer, a copy's rows): wait for it first instead of relying on cudaFree to do so, which
// the runtime does not promise (and stream-ordered allocators do not do). Frees are rare
// (buffers are cached and grow geometrically), so the wait costs nothing measurable.
static void wait_before_free(const char *what) {
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) fprintf(stderr, "kb cuda: waiting for the device before %s: %s\n", what, cudaGetErrorString(e));
}

extern "C" void kb_cuda_free(void *p) {
    if (!p) return;
    pthread_mutex_lock(&g_alloc_lock);
    auto it = g_sizes ? g_sizes->find(p) : std::unordered_map<void *, size_t>::iterator();
    bool known = g_sizes && it != g_sizes->end();
    if (known) {
        g_cur -= it->second;
        g_sizes->erase(it);
    }
    pthread_mutex_unlock(&g_alloc_lock);
    if (!known) {
        fprintf(stderr, "kb cuda: kb_cuda_free of %p, which kb_cuda_malloc did not return\n", p);
        return;
    }
    wait_before_free("cudaFree");
    cudaError_t e = cudaFree(p);
    if (e != cudaSuccess) fprintf(stderr, "kb cuda: cudaFree: %s\n", cudaGetErrorString(e));
}

extern "C" int kb_cuda_mem_stats(size_t *cur, size_t *peak, size_t *free_b, size_t *total_b) {
    pthread_mutex_lock(&g_alloc_lock);
    if (cur) *cur = g_cur;
    if (peak) *peak = g_peak;
    pthread_mutex_unlock(&g_alloc_lock);
    if (free_b || total_b) {
        size_t fr = 0, tot = 0;
        CK(cudaMemGetInfo(&fr, &tot));
        if (free_b) *free_b = fr;
        if (total_b) *total_b = tot;
    }
    return 0;
}

extern "C" void kb_cuda_mem_reset_peak(void) {
    pthread_mutex_lock(&g_alloc_lock);
    g_peak = g_cur;
    g_drv_peak = 0;
    size_t used;
    sample_locked(&used);
    pthread_mutex_unlock(&g_alloc_lock);
}

extern "C" int kb_cuda_mem_sample(size_t *peak) {
    pthread_mutex_lock(&g_alloc_lock);
    size_t used = 0;
    int rc = sample_locked(&used);
    if (peak) *peak = g_drv_peak;
    pthread_mutex_unlock(&g_alloc_lock);
    return rc;
}

extern "C" void *kb_cuda_host_alloc(size_t bytes) {
    void *p = nullptr;
    cudaError_t e = cudaMallocHost(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        fprintf(stderr, "kb cuda: cudaMallocHost of %zu bytes: %s\n", bytes, cudaGetErrorString(e));
        cudaGetLastError();
        return nullptr;
    }
    return p;
}

extern "C" void kb_cuda_host_free(void *p) {
    if (!p) return;
    wait_before_free("cudaFreeHost");   // a copy on the copy stream may still read it
    cudaError_t e = cudaFreeHost(p);
    if (e != cudaSuccess) fprintf(stderr, "kb cuda: cudaFreeHost: %s\n", cudaGetErrorString(e));
}

extern "C" int kb_cuda_copy_h2d_async(void *dst_dev, const void *src_host, size_t bytes) {
    cudaStream_t s;
    if (copy_stream(&s)) return -1;
    CK(cudaMemcpyAsync(dst_dev, src_host, bytes, cudaMemcpyHostToDevice, s));
    return 0;
}

extern "C" int kb_cuda_copy_d2h_async(void *dst_host, const void *src_dev, size_t bytes) {
    cudaStream_t s;
    if (copy_stream(&s)) return -1;
    CK(cudaMemcpyAsync(dst_host, src_dev, bytes, cudaMemcpyDeviceToHost, s));
    return 0;
}

extern "C" int kb_cuda_copy_fence(void) {
    cudaStream_t s;
    if (copy_stream(&s)) return -1;
    pthread_mutex_lock(&g_stream_lock);   // one event, recorded and waited on as a pair
    cudaError_t e = cudaEventRecord(g_copy_event, s);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(0, g_copy_event, 0);
    pthread_mutex_unlock(&g_stream_lock);
    CK(e);
    return 0;
}

extern "C" int kb_cuda_copy_wait(void) {
    cudaStream_t s;
    if (copy_stream(&s)) return -1;
    CK(cudaStreamSynchronize(s));
    return 0;
}

struct kb_cuda_timer {
    cudaEvent_t start, stop;
};

extern "C" kb_cuda_timer *kb_cuda_timer_new(void) {
    kb_cuda_timer *t = new kb_cuda_timer();
    cudaError_t e = cudaEventCreate(&t->start);
    if (e == cudaSuccess) {
        e = cudaEventCreate(&t->stop);
        if (e != cudaSuccess) cudaEventDestroy(t->start);
    }
    if (e != cudaSuccess) {
        fprintf(stderr, "kb cuda: cudaEventCreate: %s\n", cudaGetErrorString(e));
        delete t;
        return nullptr;
    }
    return t;
}

extern "C" int kb_cuda_timer_start(kb_cuda_timer *t) {
    CK(cudaEventRecord(t->start, 0));
    return 0;
}

extern "C" double kb_cuda_timer_stop(kb_cuda_timer *t) {
    float ms = 0;
    CK(cudaEventRecord(t->stop, 0));
    CK(cudaEventSynchronize(t->stop));
    CK(cudaEventElapsedTime(&ms, t->start, t->stop));
    return ms;
}

extern "C" void kb_cuda_timer_free(kb_cuda_timer *t) {
    if (!t) return;
    cudaEventDestroy(t->start);
    cudaEventDestroy(t->stop);
    delete t;
}

namespace {

int time_copies(void *dst, const void *src, size_t bytes, int reps, kb_cuda_timer *t, std::vector<double> &ms) {
    CK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));   // warm-up
    for (int r = 0; r < reps; r++) {
        if (kb_cuda_timer_start(t)) return -1;
        CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0));
        double x = kb_cuda_timer_stop(t);
        if (x < 0) return -1;
        ms.push_back(x);
    }
    return 0;
}

}  // namespace

extern "C" double kb_cuda_d2d_gbps(size_t bytes, int reps) {
    if (bytes == 0 || reps < 1) return -1;
    void *src = kb_cuda_malloc(bytes, "copy benchmark source");
    void *dst = src ? kb_cuda_malloc(bytes, "copy benchmark destination") : nullptr;
    kb_cuda_timer *t = dst ? kb_cuda_timer_new() : nullptr;
    std::vector<double> ms;
    int rc = -1;
    if (t && cudaMemset(src, 0x3c, bytes) == cudaSuccess) rc = time_copies(dst, src, bytes, reps, t, ms);
    kb_cuda_timer_free(t);
    kb_cuda_free(dst);
    kb_cuda_free(src);
    if (rc || ms.empty()) return -1;
    std::sort(ms.begin(), ms.end());
    double med = ms.size() % 2 ? ms[ms.size() / 2] : 0.5 * (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]);
    return med > 0 ? 2.0 * (double)bytes / (med * 1e-3) / 1e9 : -1;
}

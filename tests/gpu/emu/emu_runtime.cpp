// The CPU emulation's runtime: fibers for the threads of a block, barriers and warp
// shuffles between them, device memory bookkeeping, and cuSOLVER's Jacobi SVD by LAPACK.
// x86-64 only (the fiber switch is a few lines of assembly).
#include "cuda_runtime.h"
#include "cusolverDn.h"

#include <lapacke.h>

#include <chrono>
#include <cstdarg>
#include <map>
#include <mutex>
#include <random>
#include <vector>

namespace kbemu {

uint3 g_block;
dim3 g_grid, g_bdim;

void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuda emulation: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

namespace {

int g_launch_error = 0;

// ---- fibers

extern "C" void kbemu_switch(void **save_sp, void *to_sp);
asm(R"(
    .text
    .p2align 4
    .globl kbemu_switch
    .type kbemu_switch, @function
kbemu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size kbemu_switch, .-kbemu_switch
)");

constexpr size_t kStack = 256 * 1024;
constexpr unsigned kMaxThreads = 1024;

struct Fiber {
    void *sp = nullptr;
    char *stack = nullptr;
    uint3 tid{0, 0, 0};
    bool done = false;
};

std::vector<Fiber> &g_fibers = *new std::vector<Fiber>();   // stacks are reused for the whole run
void *g_sched_sp = nullptr;
Fiber *g_cur = nullptr;
const std::function<void()> *g_body = nullptr;
unsigned g_live = 0;
unsigned long g_progress = 0;   // barrier arrivals, releases and exits: a round without any is a deadlock

unsigned g_blk_arrived = 0, g_blk_gen = 0;
unsigned g_warp_arrived[kMaxThreads / 32], g_warp_gen[kMaxThreads / 32], g_warp_live[kMaxThreads / 32];
float g_slot[kMaxThreads / 32][32];
std::mt19937 g_rng(12345);

void yield() { kbemu_switch(&g_cur->sp, g_sched_sp); }

#if defined(__SANITIZE_ADDRESS__)
extern "C" void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
void unpoison(void *p, size_t n) { __asan_unpoison_memory_region(p, n); }
#else
void unpoison(void *, size_t) {}
#endif

void release_if_complete() {
    if (g_blk_arrived && g_blk_arrived == g_live) {
        g_blk_arrived = 0;
        g_blk_gen++;
        g_progress++;
    }
    for (unsigned w = 0; w < kMaxThreads / 32; w++)
        if (g_warp_arrived[w] && g_warp_arrived[w] == g_warp_live[w]) {
            g_warp_arrived[w] = 0;
            g_warp_gen[w]++;
            g_progress++;
        }
}

void warp_barrier(unsigned w) {
    unsigned gen = g_warp_gen[w];
    g_warp_arrived[w]++;
    g_progress++;
    release_if_complete();
    while (g_warp_gen[w] == gen) yield();
}

void fiber_main() {
    (*g_body)();
    g_cur->done = true;
    g_live--;
    g_warp_live[g_cur->tid.x / 32]--;
    g_progress++;
    release_if_complete();
    kbemu_switch(&g_cur->sp, g_sched_sp);
    fail("a finished fiber was resumed");
}

}  // namespace

const uint3 &thread_idx() { return g_cur->tid; }

void syncthreads() {
    unsigned gen = g_blk_gen;
    g_blk_arrived++;
    g_progress++;
    release_if_complete();
    while (g_blk_gen == gen) yield();
}

float shfl_xor(float v, int lane_mask) {
    unsigned t = g_cur->tid.x, w = t / 32, lane = t % 32, src = lane ^ (unsigned)lane_mask;
    if (src >= 32 || w * 32 + src >= g_bdim.x) fail("shuffle from lane %u, outside the warp", src);
    g_slot[w][lane] = v;
    warp_barrier(w);
    float r = g_slot[w][src];
    warp_barrier(w);   // nobody overwrites a slot before every lane has read
    return r;
}

void run_block(unsigned n, const std::function<void()> &body) {
    if (g_bdim.y != 1 || g_bdim.z != 1) fail("only 1-D blocks are emulated");
    if (n > kMaxThreads) fail("%u threads per block", n);
    if (g_fibers.size() < n) g_fibers.resize(n);
    g_body = &body;
    g_live = n;
    g_blk_arrived = 0;
    for (unsigned w = 0; w < kMaxThreads / 32; w++) {
        g_warp_arrived[w] = 0;
        g_warp_live[w] = w * 32 < n ? std::min(32u, n - w * 32) : 0;
    }
    for (unsigned i = 0; i < n; i++) {
        Fiber &f = g_fibers[i];
        if (!f.stack) f.stack = static_cast<char *>(aligned_alloc(64, kStack));
        unpoison(f.stack, kStack);   // frames of the last block's fibers never returned
        // initial frame for kbemu_switch: six saved registers, then fiber_main as the
        // return address, then a dummy return address for fiber_main itself
        uintptr_t top = ((uintptr_t)(f.stack + kStack)) & ~(uintptr_t)15;
        void **sp = reinterpret_cast<void **>(top - 64);
        for (int r = 0; r < 6; r++) sp[r] = nullptr;
        sp[6] = reinterpret_cast<void *>(&fiber_main);
        sp[7] = nullptr;
        f.sp = sp;
        f.tid = uint3{i, 0, 0};
        f.done = false;
    }
    std::vector<unsigned> order(n);
    for (unsigned i = 0; i < n; i++) order[i] = i;
    while (g_live > 0) {
        std::shuffle(order.begin(), order.end(), g_rng);
        unsigned long before = g_progress;
        for (unsigned i : order) {
            if (g_fibers[i].done) continue;
            g_cur = &g_fibers[i];
            kbemu_switch(&g_sched_sp, g_fibers[i].sp);
        }
        if (g_progress == before && g_live > 0)
            fail("deadlock in block (%u,%u,%u): %u threads wait at a barrier others never reach", g_block.x,
                 g_block.y, g_block.z, g_live);
    }
    g_cur = nullptr;
}

int take_launch_error() {
    int e = g_launch_error;
    g_launch_error = 0;
    return e;
}
void set_launch_error(int e) { g_launch_error = e; }

}  // namespace kbemu

// ---------------------------------------------------------------- runtime API

namespace {

std::mutex g_mem_lock;
std::map<uintptr_t, size_t> g_device;   // base -> bytes
std::map<uintptr_t, size_t> g_pinned;   // cudaMallocHost blocks: base -> bytes

// 1 if [p, p + bytes) lies inside one device allocation, 0 if it touches none, -1 if mixed.
int on_device(const void *p, size_t bytes) {
    std::lock_guard<std::mutex> g(g_mem_lock);
    uintptr_t a = (uintptr_t)p;
    auto it = g_device.upper_bound(a);
    if (it != g_device.begin()) {
        --it;
        if (a >= it->first && a < it->first + it->second) return a + bytes <= it->first + it->second ? 1 : -1;
    }
    auto next = g_device.upper_bound(a);
    if (next != g_device.end() && a + bytes > next->first) return -1;
    return 0;
}

}  // namespace

int kbemu::device_range(const void *p, size_t bytes) { return on_device(p, bytes); }

namespace {

cudaError_t check_side(const void *p, size_t bytes, bool device, const char *what) {
    if (bytes == 0) return cudaSuccess;
    int d = on_device(p, bytes);
    if (d == (device ? 1 : 0)) return cudaSuccess;
    fprintf(stderr, "cuda emulation: %s %p (%zu bytes) is %s\n", what, p, bytes,
            d < 0 ? "partly outside its device allocation" : device ? "not device memory" : "device memory");
    return cudaErrorInvalidValue;
}

cudaError_t copy_sides(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    bool dd = kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyHostToDevice;
    bool sd = kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyDeviceToHost;
    cudaError_t e = check_side(dst, bytes, dd, "copy destination");
    if (e == cudaSuccess) e = check_side(src, bytes, sd, "copy source");
    return e;
}

struct Event {
    std::chrono::steady_clock::time_point t;
};

}  // namespace

struct kbemu_stream {
    int dummy;
};
struct kbemu_event {
    Event e;
};

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument (emulation)";
    case cudaErrorMemoryAllocation: return "out of memory (emulation)";
    default: return "unknown error (emulation)";
    }
}
cudaError_t cudaGetLastError() { return kbemu::take_launch_error(); }
// The emulation stands for CUDA 12.4 on both sides.
cudaError_t cudaRuntimeGetVersion(int *v) {
    *v = 12040;
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int *v) {
    *v = 12040;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int *n) {
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "CPU emulation of an sm_90 device");
    p->major = 9;
    p->totalGlobalMem = (size_t)4 << 30;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int dev) { return dev == 0 ? cudaSuccess : cudaErrorInvalidValue; }

cudaError_t cudaMalloc(void **p, size_t bytes) {
    void *v = nullptr;   // the exact size, so that AddressSanitizer (EMU_SAN=1) sees any overrun
    if (posix_memalign(&v, 256, bytes ? bytes : 1)) return cudaErrorMemoryAllocation;
    float *f = static_cast<float *>(v);
    for (size_t i = 0; i < bytes / sizeof(float); i++) f[i] = NAN;   // uninitialised reads show
    std::lock_guard<std::mutex> g(g_mem_lock);
    g_device[(uintptr_t)f] = bytes;
    *p = f;
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    std::lock_guard<std::mutex> g(g_mem_lock);
    auto it = g_device.find((uintptr_t)p);
    if (it == g_device.end()) return cudaErrorInvalidValue;
    g_device.erase(it);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t bytes) {
    *p = malloc(bytes ? bytes : 1);
    if (!*p) return cudaErrorMemoryAllocation;
    std::lock_guard<std::mutex> g(g_mem_lock);
    g_pinned[(uintptr_t)*p] = bytes ? bytes : 1;
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void *p) {
    if (!p) return cudaSuccess;
    std::lock_guard<std::mutex> g(g_mem_lock);
    auto it = g_pinned.find((uintptr_t)p);
    if (it == g_pinned.end()) return cudaErrorInvalidValue;   // not from cudaMallocHost
    g_pinned.erase(it);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p) {
    int dev = on_device(p, 1);
    std::lock_guard<std::mutex> g(g_mem_lock);
    uintptr_t x = (uintptr_t)p;
    auto it = g_pinned.upper_bound(x);
    bool pinned = it != g_pinned.begin() && (--it, x >= it->first && x < it->first + it->second);
    a->type = dev == 1 ? cudaMemoryTypeDevice : pinned ? cudaMemoryTypeHost : cudaMemoryTypeUnregistered;
    a->device = dev == 1 || pinned ? 0 : -2;
    a->devicePointer = dev == 1 || pinned ? (void *)p : nullptr;
    a->hostPointer = dev == 1 ? nullptr : (void *)p;
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b) {
    *free_b = (size_t)3 << 30;
    *total_b = (size_t)4 << 30;
    return cudaSuccess;
}
// Fault injection for tests (kbemu_fail_d2h, C linkage, emulation builds only): the n-th
// device-to-host copy from now on fails (a 2-D copy counts once), as a real copy may;
// 0 disarms. Returns how many copies the previous setting still waited for (0: it fired).
static int g_fail_d2h = 0;
extern "C" int kbemu_fail_d2h(int n) {
    int left = g_fail_d2h;
    g_fail_d2h = n;
    return left;
}
static bool injected_d2h_failure(cudaMemcpyKind kind) {
    if (kind != cudaMemcpyDeviceToHost || g_fail_d2h <= 0) return false;
    return --g_fail_d2h == 0;
}

static cudaError_t copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    cudaError_t e = copy_sides(dst, src, bytes, kind);
    if (e == cudaSuccess && bytes) memmove(dst, src, bytes);
    return e;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    if (injected_d2h_failure(kind)) return cudaErrorUnknown;
    return copy(dst, src, bytes, kind);
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
    return cudaMemcpy(dst, src, bytes, kind);
}
cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                         cudaMemcpyKind kind) {
    if (width > dpitch || width > spitch) return cudaErrorInvalidValue;
    if (injected_d2h_failure(kind)) return cudaErrorUnknown;
    for (size_t r = 0; r < height; r++) {
        cudaError_t e = copy((char *)dst + r * dpitch, (const char *)src + r * spitch, width, kind);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int value, size_t bytes) {
    cudaError_t e = check_side(p, bytes, true, "memset destination");
    if (e == cudaSuccess) memset(p, value, bytes);
    return e;
}
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t) { return cudaMemset(p, value, bytes); }
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) {
    *s = new kbemu_stream{0};
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t e, unsigned) { return e ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaEventCreate(cudaEvent_t *e) {
    *e = new kbemu_event{};
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) { return cudaEventCreate(e); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) {
    e->e.t = std::chrono::steady_clock::now();
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    *ms = std::chrono::duration<float, std::milli>(b->e.t - a->e.t).count();
    return cudaSuccess;
}

// ---------------------------------------------------------------- cuSOLVER

struct kbemu_solver {
    bool stream_set;   // as the cuBLAS emulation: an SVD before cusolverDnSetStream fails
};
struct kbemu_gesvdj {
    int sweeps, sort;
};

cusolverStatus_t cusolverDnCreate(cusolverDnHandle_t *h) {
    *h = new kbemu_solver{false};
    return CUSOLVER_STATUS_SUCCESS;
}
cusolverStatus_t cusolverDnSetStream(cusolverDnHandle_t h, cudaStream_t) {
    if (!h) return CUSOLVER_STATUS_INVALID_VALUE;
    h->stream_set = true;
    return CUSOLVER_STATUS_SUCCESS;
}
cusolverStatus_t cusolverDnDestroy(cusolverDnHandle_t h) {
    delete h;
    return CUSOLVER_STATUS_SUCCESS;
}
cusolverStatus_t cusolverDnCreateGesvdjInfo(gesvdjInfo_t *p) {
    *p = new kbemu_gesvdj{100, 1};
    return CUSOLVER_STATUS_SUCCESS;
}
cusolverStatus_t cusolverDnDestroyGesvdjInfo(gesvdjInfo_t p) {
    delete p;
    return CUSOLVER_STATUS_SUCCESS;
}
cusolverStatus_t cusolverDnXgesvdjSetMaxSweeps(gesvdjInfo_t p, int sweeps) {
    p->sweeps = sweeps;
    return CUSOLVER_STATUS_SUCCESS;
}
cusolverStatus_t cusolverDnXgesvdjSetSortEig(gesvdjInfo_t p, int sort) {
    p->sort = sort;
    return CUSOLVER_STATUS_SUCCESS;
}

namespace {

// One column-major m x n matrix: S (k), U (m x ucols, ldu), V (n x vcols, ldv) as
// cuSOLVER lays them out. full: all m (n) columns of U (V), else k. 0 or LAPACK's info.
int svd_colmajor(int m, int n, const float *A, int lda, float *S, float *U, int ldu, float *V, int ldv, bool full) {
    int k = std::min(m, n);
    std::vector<float> a((size_t)m * n), u((size_t)m * (full ? m : k)), vt((size_t)(full ? n : k) * n), superb(k);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) a[(size_t)j * m + i] = A[(size_t)j * lda + i];
    char job = full ? 'A' : 'S';
    int ldvt = full ? n : k;
    int info = LAPACKE_sgesvd(LAPACK_COL_MAJOR, job, job, m, n, a.data(), m, S, u.data(), m, vt.data(), ldvt,
                              superb.data());
    if (info) return info;
    int ucols = full ? m : k, vcols = full ? n : k;
    for (int j = 0; j < ucols; j++)
        for (int i = 0; i < m; i++) U[(size_t)j * ldu + i] = u[(size_t)j * m + i];
    for (int j = 0; j < vcols; j++)   // V = VT^T
        for (int i = 0; i < n; i++) V[(size_t)j * ldv + i] = vt[(size_t)i * ldvt + j];
    return 0;
}

cusolverStatus_t check_device(const void *p, size_t bytes) {
    return check_side(p, bytes, true, "cuSOLVER argument") == cudaSuccess ? CUSOLVER_STATUS_SUCCESS
                                                                          : CUSOLVER_STATUS_INVALID_VALUE;
}

}  // namespace

cusolverStatus_t cusolverDnSgesvdj_bufferSize(cusolverDnHandle_t, cusolverEigMode_t, int, int m, int n, const float *,
                                              int, const float *, const float *, int, const float *, int, int *lwork,
                                              gesvdjInfo_t) {
    *lwork = 2 * m * n + 64;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnSgesvdj(cusolverDnHandle_t h, cusolverEigMode_t jobz, int econ, int m, int n, float *A,
                                   int lda, float *S, float *U, int ldu, float *V, int ldv, float *work, int lwork,
                                   int *info, gesvdjInfo_t) {
    if (!h || !h->stream_set) return CUSOLVER_STATUS_INVALID_VALUE;
    int k = std::min(m, n);
    if (jobz != CUSOLVER_EIG_MODE_VECTOR || econ != 1 || lda < m || ldu < m || ldv < n || lwork < 2 * m * n + 64)
        return CUSOLVER_STATUS_INVALID_VALUE;
    if (check_device(A, (size_t)lda * n * 4) || check_device(S, (size_t)k * 4) || check_device(U, (size_t)ldu * k * 4) ||
        check_device(V, (size_t)ldv * k * 4) || check_device(work, (size_t)lwork * 4) || check_device(info, 4))
        return CUSOLVER_STATUS_INVALID_VALUE;
    *info = svd_colmajor(m, n, A, lda, S, U, ldu, V, ldv, false) ? k + 1 : 0;
    for (size_t i = 0; i < (size_t)lda * n; i++) A[i] = NAN;   // gesvdj destroys A
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnSgesvdjBatched_bufferSize(cusolverDnHandle_t, cusolverEigMode_t, int m, int n,
                                                     const float *, int, const float *, const float *, int,
                                                     const float *, int, int *lwork, gesvdjInfo_t, int batch) {
    *lwork = batch * (m * n + 64);
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnSgesvdjBatched(cusolverDnHandle_t h, cusolverEigMode_t jobz, int m, int n, float *A, int lda,
                                          float *S, float *U, int ldu, float *V, int ldv, float *work, int lwork,
                                          int *info, gesvdjInfo_t p, int batch) {
    if (!h || !h->stream_set) return CUSOLVER_STATUS_INVALID_VALUE;
    int k = std::min(m, n);
    if (jobz != CUSOLVER_EIG_MODE_VECTOR || m > 32 || n > 32 || lda < m || ldu < m || ldv < n ||
        lwork < batch * (m * n + 64) || !p->sort)
        return CUSOLVER_STATUS_INVALID_VALUE;
    if (check_device(A, (size_t)lda * n * batch * 4) || check_device(S, (size_t)k * batch * 4) ||
        check_device(U, (size_t)ldu * m * batch * 4) || check_device(V, (size_t)ldv * n * batch * 4) ||
        check_device(work, (size_t)lwork * 4) || check_device(info, (size_t)batch * 4))
        return CUSOLVER_STATUS_INVALID_VALUE;
    for (int b = 0; b < batch; b++) {
        float *a = A + (size_t)b * lda * n;
        info[b] = svd_colmajor(m, n, a, lda, S + (size_t)b * k, U + (size_t)b * ldu * m, ldu, V + (size_t)b * ldv * n,
                               ldv, true)
                      ? k + 1
                      : 0;
        for (size_t i = 0; i < (size_t)lda * n; i++) a[i] = NAN;
    }
    return CUSOLVER_STATUS_SUCCESS;
}

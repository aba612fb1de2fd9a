// The CUDA backend's table and device probe (built only with `make CUDA=1`).
//
// The kb_backend API is host-resident: every call copies its inputs to the device,
// runs, and copies the results back, through cached device buffers that grow as needed
// (from the tracked allocator of cuda_mem.cu). Calls are serialised by one lock, so the
// table may be used from kb_parallel_for workers. A failing CUDA call reports file:line
// and the call is computed on the CPU instead.
//
//   prefill      cuda_attn.cu    tiled online-softmax kernel + statistics kernel
//   decode       cuda_decode.cu  split over the entries, combined in order
//   gather       here            a copy kernel over the source rows [0, max idx]
//   svd(_batched) cuda_svd.cu    cuSOLVER gesvdj / gesvdjBatched
// Device-resident variants and the memory API: cuda_backend.h, cuda_mem.h.
extern "C" {
#include "core.h"
#include "cpu.h"
}
#include "cuda_backend.h"
#include "cuda_util.h"

#include <cstring>

namespace {

using kbcuda::DevBuf;

__global__ void gather_kernel(float *dst, const float *src, const int32_t *idx, int n, int d) {
    size_t total = (size_t)n * d;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        size_t i = e / d, c = e % d;
        dst[e] = src[(size_t)idx[i] * d + c];
    }
}

DevBuf d_src, d_dst, d_idx;

int gather_device(float *dst, const float *src, const int32_t *idx, int n, int d) {
    int32_t rows = 0;
    for (int i = 0; i < n; i++) rows = idx[i] + 1 > rows ? idx[i] + 1 : rows;
    const size_t f = sizeof(float);
    if (kbcuda::reserve(d_src, (size_t)rows * d * f, "gather source") ||
        kbcuda::reserve(d_dst, (size_t)n * d * f, "gather destination") ||
        kbcuda::reserve(d_idx, (size_t)n * sizeof(int32_t), "gather indices"))
        return -1;
    float *dsrc = (float *)d_src.p, *ddst = (float *)d_dst.p;
    int32_t *didx = (int32_t *)d_idx.p;
    CK(cudaMemcpy(dsrc, src, (size_t)rows * d * f, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(didx, idx, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice));
    size_t total = (size_t)n * d;
    int blocks = (int)((total + 255) / 256 < 65535 ? (total + 255) / 256 : 65535);
    KB_LAUNCH(gather_kernel, blocks, 256, 0)(ddst, dsrc, didx, n, d);
    CK_LAUNCH();
    CK(cudaMemcpy(dst, ddst, total * f, cudaMemcpyDeviceToHost));
    return 0;
}

void cuda_gather(float *dst, const float *src, const int32_t *idx, int n, int d) {
    if (n <= 0 || d <= 0) return;
    kbcuda::lock();
    int rc = gather_device(dst, src, idx, n, d);
    kbcuda::unlock();
    if (rc) {
        fprintf(stderr, "kb cuda: gather failed on the device; computing it on the CPU\n");
        kb_cpu_gather(dst, src, idx, n, d);
    }
}

const kb_backend cuda_table = {"cuda", kbcuda::prefill_entry, kbcuda::decode_entry, cuda_gather, kb_cuda_svd,
                               kb_cuda_svd_batched};

pthread_once_t g_once = PTHREAD_ONCE_INIT;
const kb_backend *g_backend = nullptr;
char g_why[384] = "";

void probe_device() {
    int count = 0, rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);   // 0 without a driver
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        char dv[32] = "no driver";
        if (drv) snprintf(dv, sizeof dv, "driver CUDA %d.%d", drv / 1000, drv % 1000 / 10);
        snprintf(g_why, sizeof g_why, "no usable CUDA device (cudaGetDeviceCount: %s; runtime CUDA %d.%d, %s)",
                 cudaGetErrorString(e), rt / 1000, rt % 1000 / 10, dv);
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
    if (e == cudaSuccess) e = cudaFree(nullptr);   // create the context now, not inside a timed call
    if (e != cudaSuccess) {
        snprintf(g_why, sizeof g_why, "CUDA device 0 (%.100s): %s", prop.name, cudaGetErrorString(e));
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

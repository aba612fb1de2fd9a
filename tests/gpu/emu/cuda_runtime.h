// A CPU emulation of the small part of CUDA that kernels/*.cu use, so that the backend's
// real kernel source runs (slowly) on a machine without a GPU, under the same tests.
// tests/gpu/emu.sh compiles kernels/*.cu as C++ with this directory first on the include
// path. It stands in for a GPU only for logic: indexing, masking, reductions, shuffles,
// barriers, copies and their directions, the cuSOLVER factor layout. It says nothing
// about speed, memory-model races the fiber scheduler cannot produce, or the compiler.
//
// Emulation:
//   a block is run as blockDim fibers on one OS thread, switched at __syncthreads and at
//   warp shuffles (each fiber resumes in a random order per round, so a missing barrier
//   shows up as wrong results); blocks run one after another;
//   shared memory is one buffer per translation unit, filled with NaN before each block;
//   device memory is host memory filled with NaN on allocation; cudaMemcpy checks that
//   each side of a copy is on the device or the host as its kind says.
#ifndef KB_CUDA_EMU_RUNTIME_H
#define KB_CUDA_EMU_RUNTIME_H
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#define KB_CUDA_EMU 1

using std::max;
using std::min;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__

struct alignas(16) float4 {
    float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
struct alignas(8) uint2 {
    unsigned x, y;
};
struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};

// ---------------------------------------------------------------- device side

namespace kbemu {
extern uint3 g_block;
extern dim3 g_grid, g_bdim;
const uint3 &thread_idx();
void syncthreads();
float shfl_xor(float v, int lane_mask);
// Runs body on nthreads fibers (the threads of one block); returns when all are done.
void run_block(unsigned nthreads, const std::function<void()> &body);
void fail(const char *fmt, ...);   // report and abort
int take_launch_error();
void set_launch_error(int e);
// 1 if [p, p + bytes) lies inside one device allocation, 0 if it touches none, -1 if
// mixed (for the emulated libraries' argument checks).
int device_range(const void *p, size_t bytes);
}  // namespace kbemu

#define threadIdx (kbemu::thread_idx())
#define blockIdx (kbemu::g_block)
#define blockDim (kbemu::g_bdim)
#define gridDim (kbemu::g_grid)
inline void __syncthreads() { kbemu::syncthreads(); }
// IEEE f32 products and sums, rounded to nearest, never fused (this file is compiled
// without FMA contraction, as ISO C++ is)
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
    if (mask != 0xffffffffu) kbemu::fail("__shfl_xor_sync with a partial mask is not emulated");
    return kbemu::shfl_xor(v, lane_mask);
}

// The dynamic shared memory of this translation unit's kernels (declared there as
// `extern __shared__ float4 smem[]`, which becomes a reference to this array).
namespace {
constexpr size_t kEmuSmemBytes = 227 * 1024;
__attribute__((unused)) float4 smem[kEmuSmemBytes / sizeof(float4)];
}  // namespace

template <class K>
struct EmuLaunch {
    K kernel;
    dim3 grid, block;
    size_t shared;
    template <class... A>
    void operator()(A... args) const {
        if (shared > kEmuSmemBytes || block.x * block.y * block.z > 1024 || block.x * block.y * block.z == 0) {
            kbemu::set_launch_error(1);   // cudaErrorInvalidValue, as a real launch would report
            return;
        }
        for (unsigned z = 0; z < grid.z; z++)
            for (unsigned y = 0; y < grid.y; y++)
                for (unsigned x = 0; x < grid.x; x++) {
                    kbemu::g_block = uint3{x, y, z};
                    kbemu::g_grid = grid;
                    kbemu::g_bdim = block;
                    float *f = reinterpret_cast<float *>(smem);
                    for (size_t i = 0; i < kEmuSmemBytes / sizeof(float); i++) f[i] = NAN;
                    kbemu::run_block(block.x * block.y * block.z, [&] { kernel(args...); });
                }
    }
};
#define KB_LAUNCH(kernel, grid, block, shm) \
    EmuLaunch<decltype(&kernel)> { &kernel, dim3(grid), dim3(block), (size_t)(shm) }

// ---------------------------------------------------------------- runtime API

typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorUnknown = 999 };
typedef struct kbemu_stream *cudaStream_t;
typedef struct kbemu_event *cudaEvent_t;
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
#define cudaStreamNonBlocking 0x01
#define cudaEventDisableTiming 0x02
enum cudaMemoryType {
    cudaMemoryTypeUnregistered = 0,
    cudaMemoryTypeHost = 1,
    cudaMemoryTypeDevice = 2,
    cudaMemoryTypeManaged = 3
};
struct cudaPointerAttributes {
    cudaMemoryType type;
    int device;
    void *devicePointer, *hostPointer;
};
struct cudaDeviceProp {
    char name[256];
    int major, minor;
    size_t totalGlobalMem;
};

const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError();
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaRuntimeGetVersion(int *v);
cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b);
// Device memory, pinned host memory (cudaMallocHost, anywhere inside the block) or other
// host memory (cudaMemoryTypeUnregistered, success as in CUDA 11+).
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p);

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s);
cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                         cudaMemcpyKind kind);
cudaError_t cudaMemset(void *p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
template <class F>
cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int value) {
    return value >= 0 && value <= (int)kEmuSmemBytes ? cudaSuccess : cudaErrorInvalidValue;
}

#endif

// Internals shared by the CUDA backend's .cu files (C++ only; not for C callers).
//
// Every CUDA, cuBLAS and cuSOLVER call is checked: CK/CS print file:line, the call and
// the library's message, then make the enclosing function return -1. The backend's
// host-pointer entry points turn that -1 into a CPU fallback.
#ifndef KB_CUDA_UTIL_H
#define KB_CUDA_UTIL_H
#include <cuda_runtime.h>
#include <pthread.h>

#include <cstddef>
#include <cstdio>

extern "C" {
#include "core.h"
}

#define CK(call)                                                                                      \
    do {                                                                                              \
        cudaError_t err_ = (call);                                                                    \
        if (err_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_));  \
            return -1;                                                                                \
        }                                                                                             \
    } while (0)

// After a kernel launch: launch errors now, execution errors at the next synchronising call.
#define CK_LAUNCH() CK(cudaGetLastError())

// kernel<<<grid, block, smem>>>(args), spelled as KB_LAUNCH(kernel, grid, block, smem)(args)
// so that the CPU emulation of tests/gpu/emu can compile the same source.
#ifndef KB_LAUNCH
#define KB_LAUNCH(kernel, grid, block, smem) kernel<<<(grid), (block), (smem)>>>
#endif

namespace kbcuda {

// The stream every kernel, cudaMemcpy and library call of the backend runs on: the legacy
// default stream (kernels are launched without a stream argument). cuBLAS and cuSOLVER
// handles are bound to it explicitly, so their work stays in order with the kernels even
// if a handle's default ever changes (or the build uses per-thread default streams). The
// copy stream of cuda_mem.cu is the only other one, and is fenced explicitly.
const cudaStream_t kStream = 0;

// One lock around all device work of the backend: the kb_backend table may be called
// from kb_parallel_for workers, and the cached buffers below are shared.
void lock();
void unlock();

// A device buffer that grows as needed (contents are not kept across growth), allocated
// through the tracked allocator (kb_cuda_malloc) so it counts in the peak.
struct DevBuf {
    void *p = nullptr;
    size_t cap = 0;
};
int reserve(DevBuf &b, size_t bytes, const char *what);

// The same for pinned host memory.
struct HostBuf {
    void *p = nullptr;
    size_t cap = 0;
};
int reserve_pinned(HostBuf &b, size_t bytes);

// Frees a buffer back to its allocator and empties it (an empty one: nothing).
void release(DevBuf &b);
void release(HostBuf &b);

// The table's entries (host pointers): on the device, or on the CPU when that fails.
void prefill_entry(const kb_prefill_args *a);   // cuda_attn.cu
void decode_entry(const kb_decode_args *a);     // cuda_decode.cu

// The tensor-core prefill (cuda_attn_tc.cu): whether it is selected (KB_PREFILL_TC, or
// kb_cuda_prefill_mode), and the launch for device pointers (lse [H][m] written).
bool prefill_tc_on();
int prefill_tc_launch(const kb_prefill_args *a, float *lse);

}  // namespace kbcuda

#endif

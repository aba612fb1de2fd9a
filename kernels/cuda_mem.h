/* Device memory, pinned host memory, the copy stream and event timers of the CUDA
 * backend (kernels/cuda_mem.cu; only in `make CUDA=1` builds: callers use #ifdef KB_CUDA).
 * Every function reports a failing CUDA call on stderr and returns NULL or -1. Call
 * kb_cuda(NULL) first: these assume a usable device. */
#ifndef KB_CUDA_MEM_H
#define KB_CUDA_MEM_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif

/* Device memory through the backend's allocator, which keeps the bytes held now and
 * their high-water mark (all of the backend's own buffers come from here too).
 * what names the buffer in the error message. kb_cuda_free(NULL) does nothing; it (and
 * kb_cuda_host_free) first waits for the work queued on the device, which may use p. */
void *kb_cuda_malloc(size_t bytes, const char *what);
void kb_cuda_free(void *p);

/* cur, peak: bytes held through kb_cuda_malloc now, and at most since the start or the
 * last kb_cuda_mem_reset_peak; free_b, total_b: cudaMemGetInfo for the whole device
 * (includes the CUDA context, cuSOLVER and other processes). Any pointer may be NULL.
 * Returns 0, or -1 when cudaMemGetInfo fails. */
int kb_cuda_mem_stats(size_t *cur, size_t *peak, size_t *free_b, size_t *total_b);
void kb_cuda_mem_reset_peak(void);   /* peak = current; the driver's peak = a sample now */
/* The driver's view of the peak, apart from the allocator's: device memory in use
 * (cudaMemGetInfo's total - free: the CUDA context, cuBLAS and cuSOLVER, every process)
 * sampled at every kb_cuda_malloc, at each call of this, and at the reset; *peak (may be
 * NULL) = the most sampled since the last kb_cuda_mem_reset_peak. 0, or -1 when
 * cudaMemGetInfo fails. */
int kb_cuda_mem_sample(size_t *peak);

/* Pinned (page-locked) host memory: needed for truly asynchronous host<->device copies. */
void *kb_cuda_host_alloc(size_t bytes);
void kb_cuda_host_free(void *p);

/* Copies on the backend's second stream, which does not synchronise with the default
 * stream that the kernels run on: a copy overlaps whatever the device is computing
 * (host memory must be pinned for that; pageable memory makes the call synchronous).
 * kb_cuda_copy_fence: device work launched later on the default stream (every kernel of
 * the backend) waits for the copies enqueued so far; the host does not wait.
 * kb_cuda_copy_wait: the host waits for them. */
int kb_cuda_copy_h2d_async(void *dst_dev, const void *src_host, size_t bytes);
int kb_cuda_copy_d2h_async(void *dst_host, const void *src_dev, size_t bytes);
int kb_cuda_copy_fence(void);
int kb_cuda_copy_wait(void);

/* Device time between start and stop by CUDA events on the default stream.
 * kb_cuda_timer_stop waits for the stop event and returns milliseconds, or -1. */
typedef struct kb_cuda_timer kb_cuda_timer;
kb_cuda_timer *kb_cuda_timer_new(void);
int kb_cuda_timer_start(kb_cuda_timer *t);
double kb_cuda_timer_stop(kb_cuda_timer *t);
void kb_cuda_timer_free(kb_cuda_timer *t);

/* Device-to-device cudaMemcpy of bytes (buffers from kb_cuda_malloc), the median of reps
 * timed copies after one warm-up; returns GB/s counting the bytes read plus written
 * (2 * bytes per copy), or -1. The yardstick for the decode kernels' bandwidth. */
double kb_cuda_d2d_gbps(size_t bytes, int reps);

#ifdef __cplusplus
}
#endif
#endif

/* Entry points of the CUDA backend (kernels/cuda_*.cu, built with make CUDA=1 only;
 * C callers guard their use with #ifdef KB_CUDA). */
#ifndef KB_CUDA_BACKEND_H
#define KB_CUDA_BACKEND_H
#include "core.h"
#include "cuda_mem.h"
#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA table, or NULL with *why set when no device is usable. */
const kb_backend *kb_cuda_backend(const char **why);

/* Device-resident attention: the same contracts as kb_backend.prefill/decode (core.h),
 * but every pointer in the args is device memory (e.g. from kb_cuda_malloc) and nothing
 * crosses the bus. In prefill, col_mass is accumulated into (+=) and win_probs rows are
 * written over keys 0 .. win_ld-1 as on the host. Limits: head dim <= 256 (prefill);
 * g <= 16 and g * d <= 8192 (decode).
 * Asynchronous: the kernels are queued on the default stream, in order with every other
 * call of the backend; kb_cuda_sync waits for them (a cudaMemcpy on the default stream
 * does too). Returns 0 when queued, or -1 (reason on stderr). Errors during execution
 * surface at kb_cuda_sync. */
int kb_cuda_prefill_dev(const kb_prefill_args *a);
int kb_cuda_decode_dev(const kb_decode_args *a);
int kb_cuda_sync(void);   /* 0, or -1 with the CUDA error on stderr */

/* The prefill's path: 1 = tensor cores (bf16 Q/K/V, cuBLAS GEMMs with f32 accumulation,
 * kernels/cuda_attn_tc.cu; the default), 0 = the f32 kernels of cuda_attn.cu. The
 * environment's KB_PREFILL_TC=0 selects the f32 path at the first prefill.
 * kb_cuda_prefill_mode sets it (tensor_cores < 0: unchanged) and, for the tests, the
 * tile sizes (query rows per tile, counting the g heads, and keys per tile; <= 0:
 * unchanged; defaults 2048 and 1024). */
void kb_cuda_prefill_mode(int tensor_cores, int tile_rows, int tile_keys);
int kb_cuda_prefill_tc(void);

/* The parts of the table, callable directly (host pointers, as in core.h). */
int kb_cuda_svd(const float *A, int rows, int cols, int rank, float *U, float *S, float *Vt);
int kb_cuda_svd_batched(const float *A, int batch, int rows, int cols, int rank, float *U, float *S,
                        float *Vt);

#ifdef __cplusplus
}
#endif
#endif

/* The built-in engine's forward pass on the device (model/cuda_model.cu, built with
 * make CUDA=1 only: C callers guard their use with #ifdef KB_CUDA).
 *
 * Weights live on the device in bf16 (norms and biases in f32), uploaded once per model
 * (dequantised row by row from the GGUF data, or taken from the f32 copy where one
 * exists); GEMMs run in cuBLAS with bf16 operands and f32 accumulation, everything else
 * (residual stream, attention, norms, logits) in f32. model_prefill and model_decode
 * take this path when the selected backend (kb_get) is the CUDA one; the contracts are
 * theirs (model.h). All device memory comes from kb_cuda_malloc (tracked peak). */
#ifndef KV_CUDA_MODEL_H
#define KV_CUDA_MODEL_H
#include <stddef.h>
#include <stdint.h>
#include "model.h"
#ifdef __cplusplus
extern "C" {
#endif

/* 1 when the selected backend is the CUDA one (then model_prefill/model_decode run here). */
int cuda_model_selected(void);

/* Uploads m's weights if they are not on the device yet (the prefill and decode calls do
 * this too; calling it first keeps the upload out of the first prefill's time).
 * 0, or -1 with err. */
int cuda_model_load(kv_model *m, char *err, size_t errlen);
/* For a random: model already uploaded (or uploaded now): frees the host's weights
 * (4.5 GB for random:llama3-8b in Q4_0), which the device path no longer reads; the CPU engine then
 * refuses m (host_weights_gone). Returns the bytes freed (0 for other models), or -1 when
 * the upload fails. */
long long cuda_model_drop_host_weights(kv_model *m);
/* Frees m's device weights and decode buffers; call before model_free (a later call for
 * the same m uploads again). Without it the device copy lives until the process ends; a
 * different model that lands at the same address is recognised and not confused with it. */
void cuda_model_release(const kv_model *m);

/* model_prefill and model_decode on the device (see model.h). Prefill: layer by layer,
 * m->prefill_chunk tokens at a time; each layer's K/V, column mass and window rows are
 * copied into out as the layer completes; surprisal from logits 256 rows at a time. */
int cuda_model_prefill(kv_model *m, const int32_t *ids, int n, const kv_needs *needs, kv_prefill_out *out,
                       char *err, size_t errlen);
/* The dense part on the device; each layer's attention goes through meth->append and
 * meth->attend on the host, with q, k, v [H|Hkv][d] copied back and the output copied in. */
int cuda_model_decode(kv_model *m, const kv_method *meth, kv_state *st, int id, int pos, const kv_token *info,
                      float *logits);

typedef struct {
    size_t weight_bytes;    /* device bytes of m's weights */
    double prefill_ms;      /* the last prefill's device time (CUDA events), -1 before any */
    size_t used_bytes;      /* cudaMemGetInfo total - free at the last prefill's peak (its
                               buffers all held), 0 before any */
} cuda_model_info;
/* 0, or -1 when m has nothing on the device. */
int cuda_model_info_get(const kv_model *m, cuda_model_info *out);

/* The engine's GEMM on host arrays, for tests: W [rows][cols] and X [n][cols] are rounded
 * to bf16 on the device, then Y [n][rows] = X W^T + beta Y (beta 0 or 1; Y read only for
 * beta 1). 0, or -1. */
int cuda_model_gemm_check(const float *W, int rows, int cols, const float *X, int n, float beta, float *Y);

#ifdef __cplusplus
}
#endif
#endif

/* The shared attention core: every method and the model engine attend through this.
 *
 * Shapes: H query heads, Hkv kv heads, g = H / Hkv, head dim d. Query head h reads
 * kv head h / g (contiguous grouping, as in HF repeat_kv and GGUF llama).
 * Logits are q.k / sqrt(d) (+ a per-entry bias in decode); softmax in f32.
 */
#ifndef KB_CORE_H
#define KB_CORE_H
#include <stddef.h>
#include <stdint.h>
#include "kvtype.h"

/* Prefill attention for m queries at absolute positions t0 .. t0+m-1 over keys
 * 0 .. t0+m-1 (causal). Layouts:
 *   Q, out: [m][H][d]                      (token-major, as a projection produces)
 *   K, V:   kv head j, token t at K + j*kv_stride + t*d
 * Optional statistics (NULL to skip):
 *   col_mass [H][mass_ld]: col_mass[h][t] += A[h][q][t] summed over this chunk's queries
 *            (H2O's cumulative attention; the caller zeroes it once).
 *   win_probs [H][win][win_ld]: for each query at absolute position p with
 *            win_start <= p < win_start + win, row p - win_start receives its full
 *            probability row over keys 0..p (later keys are written as 0).
 */
typedef struct {
    int H, Hkv, d;
    int t0, m;
    const float *Q;
    const float *K, *V;
    size_t kv_stride;
    float *out;
    float *col_mass;
    size_t mass_ld;
    float *win_probs;
    int win, win_start;
    size_t win_ld;
} kb_prefill_args;

/* Decode attention of the g query heads of one kv group over an explicit entry list.
 * Entry i is row r = idx ? idx[i] : i of K and V (rows of d elements of kv_type, a
 * kb_kvtype of kvtype.h, contiguous; 0 = f32). 16-bit rows are read as they are and
 * converted to f32 row by row; q, bias, out and probs are always f32. The CUDA backend's
 * kernels read every type the same way (16-bit rows widened as they are read).
 * bias[i] is added to entry i's logit: log(n) for a coarse entry standing for n
 * tokens (the size correction), 0 for a full-resolution token; NULL means all 0.
 * One softmax over all n entries. probs (optional) receives [g][n] probabilities.
 * n may be 0: out is then all zeros. */
typedef struct {
    int g, d, n;
    const float *q;        /* [g][d] */
    const void *K, *V;
    const int32_t *idx;
    const float *bias;
    float *out;            /* [g][d] */
    float *probs;          /* [g][n] or NULL */
    int kv_type;           /* of K and V's elements: KB_F32 (0), KB_F16, KB_BF16 */
} kb_decode_args;

typedef struct kb_backend {
    const char *name;
    void (*prefill)(const kb_prefill_args *a);
    void (*decode)(const kb_decode_args *a);
    /* dst[i][:] = src[idx[i]][:], rows of d floats; dst and src must not overlap. */
    void (*gather)(float *dst, const float *src, const int32_t *idx, int n, int d);
    /* Truncated SVD of A [rows][cols] (row-major): A ~= U diag(S) Vt with
     * U [rows][rank], S [rank] (descending), Vt [rank][cols]; rank <= min(rows, cols).
     * Returns 0, or -1 on failure (LAPACK error). */
    int (*svd)(const float *A, int rows, int cols, int rank, float *U, float *S, float *Vt);
    /* Optional, NULL where the backend has none (the CPU: call svd per block instead):
     * batch independent truncated SVDs with the svd contract, blocks stored one after
     * another: A [batch][rows][cols], U [batch][rows][rank], S [batch][rank],
     * Vt [batch][rank][cols]. Returns 0, or -1 on failure. */
    int (*svd_batched)(const float *A, int batch, int rows, int cols, int rank, float *U, float *S,
                       float *Vt);
} kb_backend;

const kb_backend *kb_cpu(void);
/* The CUDA backend; NULL when built without CUDA=1 or when no device is usable.
 * why (optional) receives a one-line reason when NULL. */
const kb_backend *kb_cuda(const char **why);
/* The backend in use (default CPU); kb_select("cpu"|"cuda") returns 0 or -1. */
const kb_backend *kb_get(void);
int kb_select(const char *name, const char **why);

/* Worker threads used by the CPU backend and the engine (default: online CPUs). */
void kb_set_threads(int n);
int kb_threads(void);
/* Run fn(ctx, i) for i in [0, n) on the worker threads; returns when all are done. */
void kb_parallel_for(int n, void (*fn)(void *ctx, int i), void *ctx);

#endif

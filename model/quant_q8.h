/* Mat-vec with quantized activations, as llama.cpp does it: the input vector is
 * quantized once to 8-bit blocks, then each weight row's dot product is integer
 * multiply-adds per block, scaled once per block. Weight types with an int8 path:
 *   Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 on blocks of 32 (q8_block: a scale and the block's sum;
 *     the default model's layers are Q4_1, its embeddings and tied output Q8_0);
 *   Q4_K, Q5_K, Q6_K on blocks of 256 (q8k_block: a scale and the sums of each 16 codes,
 *     which the K-quants' per-sub-block mins and offsets multiply).
 * Other types (F32, F16, BF16) keep quant_dot on f32. quant_q8_act picks the block
 * layout a weight type needs. */
#ifndef KV_QUANT_Q8_H
#define KV_QUANT_Q8_H
#include <stddef.h>
#include <stdint.h>

/* x[i] ~ d * q[i] for the 32 elements of the block; s = d * sum(q) (the block's sum of
 * the quantized values, which the min of Q4_1 / Q5_1 and the offset of Q4_0 / Q5_0
 * multiply). */
typedef struct q8_block {
    float d, s;
    int8_t q[32];
} q8_block;

/* x[i] ~ d * q[i] for the 256 elements; bsums[k] = sum of q[16k .. 16k+15]. */
typedef struct q8k_block {
    float d;
    int8_t q[256];
    int16_t bsums[16];
} q8k_block;

/* 1 if quant_matvec_q8 handles weights of this type. */
int quant_q8_supported(int type);
/* The activation block length a weight type takes: 32 (q8_block), 256 (q8k_block), or 0
 * (no int8 path). */
int quant_q8_act_block(int type);
/* Bytes that quant_q8_act needs for n activations, whatever the weight type. */
size_t quant_q8_act_bytes(int64_t n);
/* x (n floats, a multiple of quant_q8_act_block(type)) quantized into buf (4-byte
 * aligned, quant_q8_act_bytes(n) long) in the layout type's rows are multiplied with;
 * returns buf, or NULL for a type without an int8 path. */
const void *quant_q8_act(int type, const float *x, int64_t n, void *buf);
/* Quantize n floats (a multiple of 32) into n/32 blocks: d = max|x| / 127,
 * q = round(x / d), so |x - d q| <= d/2. A block holding a NaN or an infinity gets
 * d = s = NaN, so every dot product that reads it is NaN (as with f32 activations). */
void quant_q8_row(const float *x, q8_block *y, int64_t n);
/* The same per block of 256 (n a multiple of 256) into n/256 q8k_blocks, with bsums. */
void quant_q8k_row(const float *x, q8k_block *y, int64_t n);
/* y[r] = dot(row r, x) for r < n_rows, rows row_bytes apart starting at w, each of n
 * elements; x from quant_q8_act(type, ...): q8_blocks, or q8k_blocks for the K-quants.
 * SIMD where built (AVX2, AVX-VNNI), else portable. */
void quant_matvec_q8(int type, const void *w, size_t row_bytes, int n_rows, const void *x, int64_t n, float *y);
/* Several activation rows against the same weight rows: y[j * ystride + i] =
 * quant_matvec_q8 of row i with x[j], for i < n_rows, j < nx, bit for bit. Each weight
 * block is unpacked once for a group of x rows (batched decode). */
void quant_matvec_q8_multi(int type, const void *w, size_t row_bytes, int n_rows, const void *const *x, int nx,
                           int64_t n, float *y, size_t ystride);
/* The portable (no intrinsics) path, always built; tests compare both. */
void quant_matvec_q8_generic(int type, const void *w, size_t row_bytes, int n_rows, const void *x, int64_t n,
                             float *y);

#endif

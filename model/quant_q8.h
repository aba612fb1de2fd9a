/* Mat-vec with quantized activations, as llama.cpp does it: the input vector is
 * quantized once to 8-bit blocks of 32 (q8_1: a scale and the block's sum), then each
 * weight row's dot product is integer multiply-adds per block, scaled once per block.
 * Weight types with an int8 path: Q4_0, Q4_1, Q8_0 (the default model's layers are
 * Q4_1, its embeddings and tied output Q8_0). Other types keep quant_dot on f32. */
#ifndef KV_QUANT_Q8_H
#define KV_QUANT_Q8_H
#include <stddef.h>
#include <stdint.h>

/* x[i] ~ d * q[i] for the 32 elements of the block; s = d * sum(q) (the block's sum of
 * the quantized values, which the min of Q4_1 and the offset of Q4_0 multiply). */
typedef struct q8_block {
    float d, s;
    int8_t q[32];
} q8_block;

/* 1 if quant_matvec_q8 handles weights of this type. */
int quant_q8_supported(int type);
/* Quantize n floats (a multiple of 32) into n/32 blocks: d = max|x| / 127,
 * q = round(x / d), so |x - d q| <= d/2. A block holding a NaN or an infinity gets
 * d = s = NaN, so every dot product that reads it is NaN (as with f32 activations). */
void quant_q8_row(const float *x, q8_block *y, int64_t n);
/* y[r] = dot(row r, x) for r < n_rows, rows row_bytes apart starting at w, each of n
 * elements; x from quant_q8_row. SIMD where built (AVX2, AVX-VNNI), else portable. */
void quant_matvec_q8(int type, const void *w, size_t row_bytes, int n_rows, const q8_block *x,
                     int64_t n, float *y);
/* The portable (no intrinsics) path, always built; tests compare both. */
void quant_matvec_q8_generic(int type, const void *w, size_t row_bytes, int n_rows, const q8_block *x,
                             int64_t n, float *y);

#endif

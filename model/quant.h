/* ggml tensor types and dequantization to f32. */
#ifndef KV_QUANT_H
#define KV_QUANT_H
#include <stddef.h>
#include <stdint.h>

enum {
    GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q5_0 = 6, GGML_Q5_1 = 7,
    GGML_Q8_0 = 8, GGML_Q4_K = 12, GGML_Q5_K = 13, GGML_Q6_K = 14, GGML_BF16 = 30
};

/* 0 if the type is supported here, with its block size and bytes per block. */
int quant_info(int type, int *block, int *block_bytes);
const char *quant_name(int type);                 /* "Q4_1", or "type N" */
size_t quant_row_bytes(int type, int64_t n);      /* n must be a multiple of the block */
float f16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);                     /* round to nearest even */
/* Dequantize n elements (a multiple of the block size) from src into dst.
 * An unsupported type fills dst with NaN (and quant_dot returns NaN). */
void dequant_row(int type, const void *src, float *dst, int64_t n);
/* dot(row, x) for one quantized row of n elements, without materialising the row. */
float quant_dot(int type, const void *row, const float *x, int64_t n);
/* The portable (no intrinsics) path of quant_dot, always built; tests compare both. */
float quant_dot_generic(int type, const void *row, const float *x, int64_t n);
/* Several activation rows against the same weight rows: y[j * ystride + i] =
 * quant_dot(type, row i, x[j], n) for i < n_rows, j < nx, bit for bit (each row's
 * arithmetic is quant_dot's, in the same order), rows row_bytes apart from w. Each weight
 * block is unpacked once for a group of x rows (batched decode). */
void quant_dot_multi(int type, const void *w, size_t row_bytes, int n_rows, const float *const *x, int nx, int64_t n,
                     float *y, size_t ystride);

#endif

/* f32 -> ggml block types, the reference rounding of ggml's quantize_row_*_ref: for the
 * random models, which generate their weights directly in a quantized type. */
#ifndef KV_QUANTIZE_H
#define KV_QUANTIZE_H
#include <stdint.h>

/* 1 if quantize_row can write this type (F32, Q8_0, Q4_0). */
int quantize_supported(int type);
/* n elements (a multiple of the type's block) from x into dst, in the GGUF block layout
 * that dequant_row reads. */
void quantize_row(int type, const float *x, void *dst, int64_t n);

#endif

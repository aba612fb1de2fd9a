/* f32 -> Q8_0 / Q4_0 blocks as ggml's reference quantizers write them (see quantize.h):
 * Q8_0: d = amax / 127, q = round(x / d); Q4_0: d = -(the signed value of largest
 * magnitude) / 8, q = min(15, trunc(x / d + 8.5)), element j in the low nibble of byte j,
 * element j + 16 in its high nibble. */
#include "quantize.h"
#include "quant.h"
#include <math.h>
#include <string.h>

int quantize_supported(int type) { return type == GGML_F32 || type == GGML_Q8_0 || type == GGML_Q4_0; }

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

static void q8_0_block(const float *x, uint8_t *b) {
    float amax = 0;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
    put16(b, f32_to_f16(d));
    for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
}

static void q4_0_block(const float *x, uint8_t *b) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
    float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
    put16(b, f32_to_f16(d));
    for (int j = 0; j < 16; j++) {
        int q0 = (int)(int8_t)(x[j] * id + 8.5f), q1 = (int)(int8_t)(x[j + 16] * id + 8.5f);
        q0 = q0 < 15 ? q0 : 15;
        q1 = q1 < 15 ? q1 : 15;
        b[2 + j] = (uint8_t)(q0 | q1 << 4);
    }
}

void quantize_row(int type, const float *x, void *dst, int64_t n) {
    uint8_t *b = dst;
    switch (type) {
    case GGML_F32: memcpy(dst, x, (size_t)n * sizeof(float)); return;
    case GGML_Q8_0:
        for (int64_t i = 0; i < n; i += 32, b += 34) q8_0_block(x + i, b);
        return;
    case GGML_Q4_0:
        for (int64_t i = 0; i < n; i += 32, b += 18) q4_0_block(x + i, b);
        return;
    }
}

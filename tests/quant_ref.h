/* Float64 references of the quantized weight blocks (model-format.md section 2) and
 * random rows and activations for the quantized dot-product tests (test_quant_q8.c,
 * test_quant_multi.c). Include after check.h. */
#ifndef KV_QUANT_REF_H
#define KV_QUANT_REF_H
#include "../model/quant.h"
#include "../model/quant_q8.h"

static inline double f16d(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return f16_to_f32(h);
}

/* The 6-bit scale and min of sub-block j of a Q4_K / Q5_K super-block (section 2.4). */
static inline void ref_kscale(const uint8_t *sc, int j, int *scale, int *min) {
    if (j < 4) *scale = sc[j] & 63, *min = sc[j + 4] & 63;
    else *scale = (sc[j + 4] & 15) | ((sc[j - 4] >> 6) << 4), *min = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
}

/* One weight block (32 or 256 elements) in double: w[i] = s[i] * code[i] + o[i]. */
static inline void ref_block(int type, const uint8_t *r, double *w, double *s, double *o, int *code) {
    int block;
    quant_info(type, &block, NULL);
    for (int i = 0; i < block; i++) {
        switch (type) {
        case GGML_Q8_0: code[i] = (int8_t)r[2 + i], s[i] = f16d(r), o[i] = 0; break;
        case GGML_Q4_0: case GGML_Q4_1: {
            int has_min = type == GGML_Q4_1;
            const uint8_t *qs = r + (has_min ? 4 : 2);
            code[i] = i < 16 ? qs[i] & 15 : qs[i - 16] >> 4;
            s[i] = f16d(r), o[i] = has_min ? f16d(r + 2) : -8.0 * s[i];
            break;
        }
        case GGML_Q5_0: case GGML_Q5_1: {
            int has_min = type == GGML_Q5_1;
            uint32_t h;
            memcpy(&h, r + (has_min ? 4 : 2), 4);
            const uint8_t *qs = r + (has_min ? 8 : 6);
            code[i] = (i < 16 ? qs[i] & 15 : qs[i - 16] >> 4) | (int)((h >> i) & 1) << 4;
            s[i] = f16d(r), o[i] = has_min ? f16d(r + 2) : -16.0 * s[i];
            break;
        }
        case GGML_Q4_K: case GGML_Q5_K: {
            int five = type == GGML_Q5_K, c = i / 64, hi = (i % 64) >= 32, l = i % 32, sc, mn;
            const uint8_t *qs = r + (five ? 48 : 16);
            ref_kscale(r + 4, 2 * c + hi, &sc, &mn);
            code[i] = hi ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 15;
            if (five) code[i] += 16 * ((r[16 + l] >> (2 * c + hi)) & 1);
            s[i] = f16d(r) * sc, o[i] = -f16d(r + 2) * mn;
            break;
        }
        case GGML_Q6_K: {
            int h = i / 128, k = (i % 128) / 32, l = i % 32;
            const uint8_t *ql = r + 64 * h, *qh = r + 128 + 32 * h;
            int nib = k == 0 ? ql[l] & 15 : k == 1 ? ql[l + 32] & 15 : k == 2 ? ql[l] >> 4 : ql[l + 32] >> 4;
            code[i] = nib | ((qh[l] >> (2 * k)) & 3) << 4;
            s[i] = f16d(r + 208) * (int8_t)r[192 + 8 * h + l / 16 + 2 * k], o[i] = -32.0 * s[i];
            break;
        }
        default: abort();
        }
        w[i] = s[i] * code[i] + o[i];
    }
}

static inline void put_f16(uint8_t *p, float v) {
    uint16_t h = f32_to_f16(v);
    memcpy(p, &h, 2);
}

/* A random row: random code bytes, f16 scales and mins across orders of magnitude
 * (never zero: |d| >= 2^-13). */
static inline void random_row(int type, uint8_t *r, int64_t n) {
    int block, bytes;
    quant_info(type, &block, &bytes);
    int d_at = type == GGML_Q6_K ? 208 : 0;
    int has_min = type == GGML_Q4_1 || type == GGML_Q5_1 || type == GGML_Q4_K || type == GGML_Q5_K;
    for (int64_t b = 0; b < n / block; b++, r += bytes) {
        for (int i = 0; i < bytes; i++) r[i] = (uint8_t)test_next();
        put_f16(r + d_at, (float)(ldexp(test_unif() + 0.5, test_int(-12, 0)) * (test_unif() < 0.5 ? -1 : 1)));
        if (has_min) put_f16(r + 2, (float)(ldexp(test_unif() - 0.5, test_int(-10, 0))));
    }
}

/* Activations: normal, with a per-block scale across orders of magnitude and a few
 * outliers (the case that makes a block's d large for its other elements). */
static inline void random_x(float *x, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++) {
        float s = (float)ldexp(1.0, test_int(-8, 6));
        for (int j = 0; j < 32; j++) x[32 * b + j] = s * test_normal();
        if (test_unif() < 0.3) x[32 * b + test_int(0, 31)] *= 20;
    }
}

/* Activation code i of a quantized vector (q8_blocks or q8k_blocks) and its scale. */
static inline double act_at(const void *xq, int act_block, int64_t i, double *d) {
    if (act_block == 32) {
        const q8_block *b = (const q8_block *)xq + i / 32;
        *d = b->d;
        return b->q[i % 32];
    }
    const q8k_block *b = (const q8k_block *)xq + i / 256;
    *d = b->d;
    return b->q[i % 256];
}

#endif

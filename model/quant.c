/* ggml tensor types: block layouts, f16/bf16 conversion, dequantization and the fused
 * dequant+dot used by every matrix-vector product of the engine. Layouts follow
 * model-format.md section 2. Blocks are packed with no padding, so every multi-byte
 * field is read with memcpy. */
#include "quant.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define QUANT_AVX2 1
#endif

typedef struct { int type; const char *name; int block, bytes; } qtype;
static const qtype QTYPES[] = {
    {GGML_F32, "F32", 1, 4},       {GGML_F16, "F16", 1, 2},       {GGML_BF16, "BF16", 1, 2},
    {GGML_Q4_0, "Q4_0", 32, 18},   {GGML_Q4_1, "Q4_1", 32, 20},   {GGML_Q5_0, "Q5_0", 32, 22},
    {GGML_Q5_1, "Q5_1", 32, 24},   {GGML_Q8_0, "Q8_0", 32, 34},   {GGML_Q4_K, "Q4_K", 256, 144},
    {GGML_Q5_K, "Q5_K", 256, 176}, {GGML_Q6_K, "Q6_K", 256, 210},
};
#define N_QTYPES (int)(sizeof QTYPES / sizeof QTYPES[0])

static const qtype *qfind(int type) {
    for (int i = 0; i < N_QTYPES; i++)
        if (QTYPES[i].type == type) return &QTYPES[i];
    return NULL;
}

int quant_info(int type, int *block, int *block_bytes) {
    const qtype *q = qfind(type);
    if (!q) return -1;
    if (block) *block = q->block;
    if (block_bytes) *block_bytes = q->bytes;
    return 0;
}

const char *quant_name(int type) {
    static _Thread_local char buf[24];
    const qtype *q = qfind(type);
    if (q) return q->name;
    snprintf(buf, sizeof buf, "type %d", type);
    return buf;
}

size_t quant_row_bytes(int type, int64_t n) {
    const qtype *q = qfind(type);
    if (!q || n < 0 || n % q->block) return 0;
    return (size_t)(n / q->block) * (size_t)q->bytes;
}

/* ---- scalar conversions ---- */

static inline uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline float bits_f32(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }

/* Exact binary16 -> binary32 by bit manipulation (subnormals renormalised). */
static inline float f16_portable(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023u;
    if (exp == 31) return bits_f32(sign | 0x7f800000u | man << 13);
    if (exp) return bits_f32(sign | (exp + 112) << 23 | man << 13);
    if (!man) return bits_f32(sign);
    uint32_t e = 113;                      /* 2^(p-24) for the top set bit p of man */
    while (!(man & 1024u)) { man <<= 1; e--; }
    return bits_f32(sign | e << 23 | (man & 1023u) << 13);
}

float f16_to_f32(uint16_t h) {
#ifdef QUANT_AVX2
    return _cvtsh_ss(h);
#else
    return f16_portable(h);
#endif
}

float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00u | ((ax >> 13) & 0x3ffu);   /* quiet NaN */
    if (ax >= 0x477ff000u) return sign | 0x7c00u;      /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) {                            /* below 2^-14: f16 subnormal */
        uint32_t e = ax >> 23;
        if (e < 102) return sign;                      /* below 2^-25: rounds to 0 */
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;     /* value = m * 2^(e-150) */
        int shift = 126 - (int)e;                      /* result = m * 2^(e-126) ulps */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return sign | (uint16_t)q;
    }
    uint32_t q = (ax >> 13) - (112u << 10), rem = ax & 0x1fffu;   /* rebias exponent */
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1))) q++;         /* carry is correct */
    return sign | (uint16_t)q;
}

/* ---- one block -> f32 (scalar, exact per section 2) ---- */

static void deq_q4_0(const uint8_t *b, float *y) {
    float d = f16_portable(rd16(b));
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((b[2 + j] & 15) - 8) * d;
        y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
    }
}

static void deq_q4_1(const uint8_t *b, float *y) {
    float d = f16_portable(rd16(b)), m = f16_portable(rd16(b + 2));
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(b[4 + j] & 15) * d + m;
        y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
    }
}

static void deq_q5_0(const uint8_t *b, float *y) {
    float d = f16_portable(rd16(b));
    uint32_t h;
    memcpy(&h, b + 2, 4);
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
        int lo = (qs[j] & 15) | (int)((h >> j) & 1) << 4;
        int hi = (qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
        y[j] = (float)(lo - 16) * d;
        y[j + 16] = (float)(hi - 16) * d;
    }
}

static void deq_q5_1(const uint8_t *b, float *y) {
    float d = f16_portable(rd16(b)), m = f16_portable(rd16(b + 2));
    uint32_t h;
    memcpy(&h, b + 4, 4);
    const uint8_t *qs = b + 8;
    for (int j = 0; j < 16; j++) {
        int lo = (qs[j] & 15) | (int)((h >> j) & 1) << 4;
        int hi = (qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
        y[j] = (float)lo * d + m;
        y[j + 16] = (float)hi * d + m;
    }
}

static void deq_q8_0(const uint8_t *b, float *y) {
    float d = f16_portable(rd16(b));
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

/* 6-bit scale and min of sub-block s of a Q4_K/Q5_K super-block. */
static inline void kscale(const uint8_t *sc, int s, int *scale, int *min) {
    if (s < 4) {
        *scale = sc[s] & 63;
        *min = sc[s + 4] & 63;
    } else {
        *scale = (sc[s + 4] & 15) | ((sc[s - 4] >> 6) << 4);
        *min = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
    }
}

static void deq_q4_k(const uint8_t *b, float *y) {
    float d = f16_portable(rd16(b)), dmin = f16_portable(rd16(b + 2));
    const uint8_t *scales = b + 4, *qs = b + 16;
    for (int c = 0; c < 4; c++) {
        int sc0, mn0, sc1, mn1;
        kscale(scales, 2 * c, &sc0, &mn0);
        kscale(scales, 2 * c + 1, &sc1, &mn1);
        float d0 = d * (float)sc0, m0 = dmin * (float)mn0;
        float d1 = d * (float)sc1, m1 = dmin * (float)mn1;
        for (int l = 0; l < 32; l++) {
            y[64 * c + l] = d0 * (float)(qs[32 * c + l] & 15) - m0;
            y[64 * c + 32 + l] = d1 * (float)(qs[32 * c + l] >> 4) - m1;
        }
    }
}

static void deq_q5_k(const uint8_t *b, float *y) {
    float d = f16_portable(rd16(b)), dmin = f16_portable(rd16(b + 2));
    const uint8_t *scales = b + 4, *qh = b + 16, *qs = b + 48;
    for (int c = 0; c < 4; c++) {
        int sc0, mn0, sc1, mn1;
        kscale(scales, 2 * c, &sc0, &mn0);
        kscale(scales, 2 * c + 1, &sc1, &mn1);
        float d0 = d * (float)sc0, m0 = dmin * (float)mn0;
        float d1 = d * (float)sc1, m1 = dmin * (float)mn1;
        for (int l = 0; l < 32; l++) {
            int lo = (qs[32 * c + l] & 15) + 16 * ((qh[l] >> (2 * c)) & 1);
            int hi = (qs[32 * c + l] >> 4) + 16 * ((qh[l] >> (2 * c + 1)) & 1);
            y[64 * c + l] = d0 * (float)lo - m0;
            y[64 * c + 32 + l] = d1 * (float)hi - m1;
        }
    }
}

/* Element 128h + 32k + l of half h: nibble k / 2 of ql[32 (k & 1) + l], bits 2k..2k+1 of
 * qh[l] above it, minus 32, times d * scales[2k + l / 16] (that product first, as
 * section 2.4 writes it). Loops in output order, so the compiler vectorises them. */
static void deq_q6_k(const uint8_t *b, float *y) {
    float d = f16_portable(rd16(b + 208));
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
        const int8_t *sc = (const int8_t *)(b + 192 + 8 * h);
        for (int k = 0; k < 4; k++) {
            const uint8_t *L = ql + 32 * (k & 1);
            float *o = y + 128 * h + 32 * k;
            for (int g = 0; g < 2; g++) {
                float c = d * (float)sc[2 * k + g];
                for (int j = 16 * g; j < 16 * g + 16; j++) {
                    int nib = k < 2 ? L[j] & 15 : L[j] >> 4;
                    o[j] = c * (float)((nib | ((qh[j] >> (2 * k)) & 3) << 4) - 32);
                }
            }
        }
    }
}

typedef void (*deq_fn)(const uint8_t *, float *);
static deq_fn block_fn(int type) {
    switch (type) {
    case GGML_Q4_0: return deq_q4_0;
    case GGML_Q4_1: return deq_q4_1;
    case GGML_Q5_0: return deq_q5_0;
    case GGML_Q5_1: return deq_q5_1;
    case GGML_Q8_0: return deq_q8_0;
    case GGML_Q4_K: return deq_q4_k;
    case GGML_Q5_K: return deq_q5_k;
    case GGML_Q6_K: return deq_q6_k;
    default: return NULL;
    }
}

void dequant_row(int type, const void *src, float *dst, int64_t n) {
    const uint8_t *s = src;
    int block, bytes;
    if (quant_info(type, &block, &bytes) != 0) {   /* misuse: make it visible */
        for (int64_t i = 0; i < n; i++) dst[i] = NAN;
        return;
    }
    int64_t nb = n / block;
    switch (type) {
    case GGML_F32: memcpy(dst, s, (size_t)nb * 4); return;
    case GGML_F16: for (int64_t i = 0; i < nb; i++) dst[i] = f16_portable(rd16(s + 2 * i)); return;
    case GGML_BF16: for (int64_t i = 0; i < nb; i++) dst[i] = bf16_to_f32(rd16(s + 2 * i)); return;
    default: break;
    }
    deq_fn fn = block_fn(type);
    for (int64_t b = 0; b < nb; b++) fn(s + b * bytes, dst + b * block);
}

/* ---- fused dot products, portable ----
 * Partial sums live in LANES independent f32 accumulators (plain loops gcc vectorises;
 * no reassociation flags needed), summed in double once per row. */

#define LANES 16
static double lanes_sum(const float *acc, int n) {
    double s = 0;
    for (int j = 0; j < n; j++) s += acc[j];
    return s;
}

/* Q4_1, and Q4_0 as Q4_1 with m = -8d: sum((q*d + m)*x) = d*sum(q*x) + m*sum(x). */
static double dot_q4(const uint8_t *r, const float *x, int64_t nb, int has_min) {
    float acc[LANES] = {0};
    int bytes = has_min ? 20 : 18;
    for (int64_t b = 0; b < nb; b++, r += bytes, x += 32) {
        float d = f16_portable(rd16(r));
        float m = has_min ? f16_portable(rd16(r + 2)) : -8.0f * d;
        const uint8_t *qs = r + (has_min ? 4 : 2);
        for (int j = 0; j < 16; j++)
            acc[j] += d * ((float)(qs[j] & 15) * x[j] + (float)(qs[j] >> 4) * x[j + 16]) + m * (x[j] + x[j + 16]);
    }
    return lanes_sum(acc, LANES);
}

static double dot_q8_0(const uint8_t *r, const float *x, int64_t nb) {
    float acc[32] = {0};
    for (int64_t b = 0; b < nb; b++, r += 34, x += 32) {
        const int8_t *q = (const int8_t *)(r + 2);
        float d = f16_portable(rd16(r));
        for (int j = 0; j < 32; j++) acc[j] += d * ((float)q[j] * x[j]);
    }
    return lanes_sum(acc, 32);
}

static double dot_q4_k(const uint8_t *r, const float *x, int64_t nb) {
    float acc[32] = {0};
    for (int64_t b = 0; b < nb; b++, r += 144, x += 256) {
        float d = f16_portable(rd16(r)), dmin = f16_portable(rd16(r + 2));
        const uint8_t *scales = r + 4, *qs = r + 16;
        for (int c = 0; c < 4; c++) {
            int sc0, mn0, sc1, mn1;
            kscale(scales, 2 * c, &sc0, &mn0);
            kscale(scales, 2 * c + 1, &sc1, &mn1);
            float a0 = d * (float)sc0, b0 = dmin * (float)mn0, a1 = d * (float)sc1, b1 = dmin * (float)mn1;
            const uint8_t *q = qs + 32 * c;
            const float *x0 = x + 64 * c, *x1 = x0 + 32;
            for (int l = 0; l < 32; l++)
                acc[l] += a0 * ((float)(q[l] & 15) * x0[l]) - b0 * x0[l] + a1 * ((float)(q[l] >> 4) * x1[l]) -
                          b1 * x1[l];
        }
    }
    return lanes_sum(acc, 32);
}

static double dot_q6_k(const uint8_t *r, const float *x, int64_t nb) {
    float acc[LANES] = {0};
    for (int64_t b = 0; b < nb; b++, r += 210, x += 256) {
        float d = f16_portable(rd16(r + 208));
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = r + 64 * h, *qh = r + 128 + 32 * h;
            const int8_t *sc = (const int8_t *)(r + 192 + 8 * h);
            const float *xh = x + 128 * h;
            for (int g = 0; g < 2; g++) {   /* 16 outputs per scale: l = 16g + j */
                const uint8_t *L = ql + 16 * g, *H = qh + 16 * g;
                const float *xg = xh + 16 * g;
                float c0 = d * (float)sc[g], c1 = d * (float)sc[g + 2], c2 = d * (float)sc[g + 4],
                      c3 = d * (float)sc[g + 6];
                for (int j = 0; j < 16; j++)
                    acc[j] += c0 * ((float)(((L[j] & 15) | ((H[j] >> 0 & 3) << 4)) - 32) * xg[j]) +
                              c1 * ((float)(((L[j + 32] & 15) | ((H[j] >> 2 & 3) << 4)) - 32) * xg[j + 32]) +
                              c2 * ((float)(((L[j] >> 4) | ((H[j] >> 4 & 3) << 4)) - 32) * xg[j + 64]) +
                              c3 * ((float)(((L[j + 32] >> 4) | ((H[j] >> 6 & 3) << 4)) - 32) * xg[j + 96]);
            }
        }
    }
    return lanes_sum(acc, LANES);
}

static double dot_f32(const float *w, const float *x, int64_t n) {
    float acc[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += w[i + j] * x[i + j];
    double total = lanes_sum(acc, LANES);
    for (; i < n; i++) total += (double)(w[i] * x[i]);
    return total;
}

static double dot_f16(const uint8_t *w, const float *x, int64_t n) {
    double total = 0;
    for (int64_t i = 0; i < n; i++) total += (double)(f16_portable(rd16(w + 2 * i)) * x[i]);
    return total;
}

/* Any other type: one block at a time through a stack buffer. */
static double dot_via_blocks(int type, const uint8_t *r, const float *x, int64_t n) {
    int block = 0, bytes = 0;
    if (quant_info(type, &block, &bytes) != 0) return NAN;
    float buf[256];
    double total = 0;
    if (type == GGML_BF16) {
        for (int64_t i = 0; i < n; i++) total += (double)(bf16_to_f32(rd16(r + 2 * i)) * x[i]);
        return total;
    }
    deq_fn fn = block_fn(type);
    for (int64_t b = 0; b < n / block; b++, r += bytes, x += block) {
        fn(r, buf);
        total += dot_f32(buf, x, block);
    }
    return total;
}

float quant_dot_generic(int type, const void *row, const float *x, int64_t n) {
    const uint8_t *r = row;
    switch (type) {
    case GGML_F32: return (float)dot_f32(row, x, n);
    case GGML_F16: return (float)dot_f16(r, x, n);
    case GGML_Q4_0: return (float)dot_q4(r, x, n / 32, 0);
    case GGML_Q4_1: return (float)dot_q4(r, x, n / 32, 1);
    case GGML_Q8_0: return (float)dot_q8_0(r, x, n / 32);
    case GGML_Q4_K: return (float)dot_q4_k(r, x, n / 256);
    case GGML_Q6_K: return (float)dot_q6_k(r, x, n / 256);
    default:
        if (quant_info(type, NULL, NULL) != 0) return NAN;
        return (float)dot_via_blocks(type, r, x, n);
    }
}

/* ---- AVX2 fast paths for the types on the decode hot path ----
 * Eight f32 lanes accumulate across blocks (per-block sums scaled by d with FMA);
 * one horizontal sum per row. */
#ifdef QUANT_AVX2
static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

static inline __m256 i8x8_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }

/* One 32-element Q4_0/Q4_1 block: d*sum(q*x) + m*sum(x), as 8 lanes. Bytes 0..7
 * zero-extended to 32-bit lanes give elements 0..7 (low nibbles) and 16..23 (high),
 * bytes 8..15 give 8..15 and 24..31: two shuffles per block. */
static inline __m256 avx2_q4_block(const uint8_t *r, const float *x, int has_min) {
    const __m256i low4 = _mm256_set1_epi32(15);
    float d = _cvtsh_ss(rd16(r));
    float m = has_min ? _cvtsh_ss(rd16(r + 2)) : -8.0f * d;
    const uint8_t *qs = r + (has_min ? 4 : 2);
    __m256i a = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)qs));
    __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + 8)));
    __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8);
    __m256 x2 = _mm256_loadu_ps(x + 16), x3 = _mm256_loadu_ps(x + 24);
    __m256 sq = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(a, low4)), x0);
    sq = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(b, low4)), x1, sq);
    sq = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(a, 4)), x2, sq);
    sq = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4)), x3, sq);
    __m256 sx = _mm256_add_ps(_mm256_add_ps(x0, x1), _mm256_add_ps(x2, x3));
    return _mm256_fmadd_ps(_mm256_set1_ps(d), sq, _mm256_mul_ps(_mm256_set1_ps(m), sx));
}

/* Two accumulators so consecutive blocks do not wait on each other's add. */
static float avx2_q4(const uint8_t *r, const float *x, int64_t nb, int has_min) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int bytes = has_min ? 20 : 18;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2, r += 2 * bytes, x += 64) {
        acc0 = _mm256_add_ps(acc0, avx2_q4_block(r, x, has_min));
        acc1 = _mm256_add_ps(acc1, avx2_q4_block(r + bytes, x + 32, has_min));
    }
    if (b < nb) acc0 = _mm256_add_ps(acc0, avx2_q4_block(r, x, has_min));
    return hsum8(_mm256_add_ps(acc0, acc1));
}

static inline __m256 avx2_q8_block(const uint8_t *r, const float *x) {
    const uint8_t *q = r + 2;
    __m256 s = _mm256_mul_ps(i8x8_ps(_mm_loadl_epi64((const __m128i *)q)), _mm256_loadu_ps(x));
    s = _mm256_fmadd_ps(i8x8_ps(_mm_loadl_epi64((const __m128i *)(q + 8))), _mm256_loadu_ps(x + 8), s);
    s = _mm256_fmadd_ps(i8x8_ps(_mm_loadl_epi64((const __m128i *)(q + 16))), _mm256_loadu_ps(x + 16), s);
    s = _mm256_fmadd_ps(i8x8_ps(_mm_loadl_epi64((const __m128i *)(q + 24))), _mm256_loadu_ps(x + 24), s);
    return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(rd16(r))), s);
}

static float avx2_q8_0(const uint8_t *r, const float *x, int64_t nb) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2, r += 68, x += 64) {
        acc0 = _mm256_add_ps(acc0, avx2_q8_block(r, x));
        acc1 = _mm256_add_ps(acc1, avx2_q8_block(r + 34, x + 32));
    }
    if (b < nb) acc0 = _mm256_add_ps(acc0, avx2_q8_block(r, x));
    return hsum8(_mm256_add_ps(acc0, acc1));
}

/* 32 codes (bytes) times x[0..31] in 8 f32 lanes, widened eight bytes at a time;
 * *sx gets the sum of x in 8 lanes. */
static inline __m256 codes32_dot(__m256i codes, const float *x, __m256 *sx) {
    __m128i c0 = _mm256_castsi256_si128(codes), c1 = _mm256_extracti128_si256(codes, 1);
    __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8), x2 = _mm256_loadu_ps(x + 16), x3 = _mm256_loadu_ps(x + 24);
    __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(c0)), x0);
    s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(c0, 8))), x1, s);
    s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(c1)), x2, s);
    s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(c1, 8))), x3, s);
    *sx = _mm256_add_ps(_mm256_add_ps(x0, x1), _mm256_add_ps(x2, x3));
    return s;
}

/* 32 signed codes (bytes) times x[0..31] in 8 f32 lanes, widened eight bytes at a time. */
static inline __m256 scodes32_dot(__m256i codes, const float *x) {
    __m128i c0 = _mm256_castsi256_si128(codes), c1 = _mm256_extracti128_si256(codes, 1);
    __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c0)), _mm256_loadu_ps(x));
    s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(c0, 8))), _mm256_loadu_ps(x + 8), s);
    s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c1)), _mm256_loadu_ps(x + 16), s);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(c1, 8))), _mm256_loadu_ps(x + 24), s);
}

/* One Q5_0 / Q5_1 block: its 32 codes built as bytes in element order (nibbles, and 16
 * where bit j of qh is set: each byte of qh copied to 8 lanes that test their own bit),
 * then widened eight at a time to f32 lanes. Q5_1: d*sum(q*x) + m*sum(x) as in Q4_1.
 * Q5_0: d*sum((q-16)*x), the codes made signed first as Q8_0's are: no sum of x to
 * subtract (16 d sum(x) cancelled most of d sum(q x) when the weights are small), and
 * fewer operations per block. */
static inline __m256 avx2_q5_block(const uint8_t *r, const float *x, int has_min) {
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    float d = _cvtsh_ss(rd16(r));
    float m = has_min ? _cvtsh_ss(rd16(r + 2)) : -16.0f * d;
    uint32_t h;
    memcpy(&h, r + (has_min ? 4 : 2), 4);
    __m128i raw = _mm_loadu_si128((const __m128i *)(r + (has_min ? 8 : 6)));
    __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(15));
    __m256i hv = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                                                                  0x0101010101010101LL, 0));
    __m256i codes = _mm256_or_si256(nib, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hv, bit), bit),
                                                          _mm256_set1_epi8(16)));
    if (!has_min) return _mm256_mul_ps(_mm256_set1_ps(d), scodes32_dot(_mm256_sub_epi8(codes, _mm256_set1_epi8(16)), x));
    __m256 sx, sq = codes32_dot(codes, x, &sx);
    return _mm256_fmadd_ps(_mm256_set1_ps(d), sq, _mm256_mul_ps(_mm256_set1_ps(m), sx));
}

static float avx2_q5(const uint8_t *r, const float *x, int64_t nb, int has_min) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int bytes = has_min ? 24 : 22;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2, r += 2 * bytes, x += 64) {
        acc0 = _mm256_add_ps(acc0, avx2_q5_block(r, x, has_min));
        acc1 = _mm256_add_ps(acc1, avx2_q5_block(r + bytes, x + 32, has_min));
    }
    if (b < nb) acc0 = _mm256_add_ps(acc0, avx2_q5_block(r, x, has_min));
    return hsum8(_mm256_add_ps(acc0, acc1));
}

/* Q4_K: per sub-block of 32, a * sum(q x) - b * sum(x) with a = d sc, b = dmin mn; eight
 * bytes of nibbles at a time widened to f32 lanes (cheaper here than building bytes). */
static float avx2_q4_k(const uint8_t *r, const float *x, int64_t nb) {
    const __m256i low4 = _mm256_set1_epi32(15);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, r += 144, x += 256) {
        float d = _cvtsh_ss(rd16(r)), dmin = _cvtsh_ss(rd16(r + 2));
        const uint8_t *qs = r + 16;
        for (int c = 0; c < 4; c++) {
            int sc0, mn0, sc1, mn1;
            kscale(r + 4, 2 * c, &sc0, &mn0);
            kscale(r + 4, 2 * c + 1, &sc1, &mn1);
            const float *x0 = x + 64 * c, *x1 = x0 + 32;
            __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), t0 = _mm256_setzero_ps(), t1 = _mm256_setzero_ps();
            for (int g = 0; g < 4; g++) {
                __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + 32 * c + 8 * g)));
                __m256 xa = _mm256_loadu_ps(x0 + 8 * g), xb = _mm256_loadu_ps(x1 + 8 * g);
                s0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(q, low4)), xa, s0);
                s1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(q, 4)), xb, s1);
                t0 = _mm256_add_ps(t0, xa);
                t1 = _mm256_add_ps(t1, xb);
            }
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)sc0), s0, acc0);
            acc1 = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)sc1), s1, acc1);
            acc0 = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * (float)mn0), t0, acc0);
            acc1 = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * (float)mn1), t1, acc1);
        }
    }
    return hsum8(_mm256_add_ps(acc0, acc1));
}

/* Q5_K: as Q4_K, with a chunk's 64 codes built as bytes (nibbles, and bit 2c or 2c+1 of
 * qh[l] as 16) before they are widened. */
static float avx2_q5_k(const uint8_t *r, const float *x, int64_t nb) {
    const __m256i low4 = _mm256_set1_epi8(15), bit4 = _mm256_set1_epi8(16);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, r += 176, x += 256) {
        float d = _cvtsh_ss(rd16(r)), dmin = _cvtsh_ss(rd16(r + 2));
        const uint8_t *qs = r + 48;
        __m256i qh = _mm256_loadu_si256((const __m256i *)(r + 16));
        for (int c = 0; c < 4; c++) {
            int sc0, mn0, sc1, mn1;
            kscale(r + 4, 2 * c, &sc0, &mn0);
            kscale(r + 4, 2 * c + 1, &sc1, &mn1);
            __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(raw, low4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
            lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(qh, 4), bit4));   /* bit 2c */
            hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(qh, 3), bit4));   /* bit 2c+1 */
            qh = _mm256_srli_epi16(qh, 2);
            __m256 t0, t1, s0 = codes32_dot(lo, x + 64 * c, &t0), s1 = codes32_dot(hi, x + 64 * c + 32, &t1);
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)sc0), s0, acc0);
            acc1 = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)sc1), s1, acc1);
            acc0 = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * (float)mn0), t0, acc0);
            acc1 = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * (float)mn1), t1, acc1);
        }
    }
    return hsum8(_mm256_add_ps(acc0, acc1));
}

/* Q6_K: per sub-block of 16 (two groups of eight lanes), d sc * sum((q - 32) x). */
static float avx2_q6_k(const uint8_t *r, const float *x, int64_t nb) {
    const __m256i low4 = _mm256_set1_epi32(15), three = _mm256_set1_epi32(3), off = _mm256_set1_epi32(32);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, r += 210, x += 256) {
        float d = _cvtsh_ss(rd16(r + 208));
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = r + 64 * h, *qh = r + 128 + 32 * h;
            const int8_t *sc = (const int8_t *)(r + 192 + 8 * h);
            for (int k = 0; k < 4; k++) {
                const uint8_t *L = ql + 32 * (k & 1);
                const float *xk = x + 128 * h + 32 * k;
                for (int g = 0; g < 2; g++) {   /* elements 16g .. 16g+15 share sc[g + 2k] */
                    __m256 s = _mm256_setzero_ps();
                    for (int e = 0; e < 2; e++) {
                        int l = 16 * g + 8 * e;
                        __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(L + l)));
                        q = k < 2 ? _mm256_and_si256(q, low4) : _mm256_srli_epi32(q, 4);
                        __m256i hb = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qh + l)));
                        hb = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hb, 2 * k), three), 4);
                        q = _mm256_sub_epi32(_mm256_or_si256(q, hb), off);
                        s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), _mm256_loadu_ps(xk + l), s);
                    }
                    if (g) acc1 = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)sc[g + 2 * k]), s, acc1);
                    else acc0 = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)sc[g + 2 * k]), s, acc0);
                }
            }
        }
    }
    return hsum8(_mm256_add_ps(acc0, acc1));
}

static float avx2_f32(const float *w, const float *x, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    }
    float s = hsum8(_mm256_add_ps(a0, a1));
    for (; i < n; i++) s += w[i] * x[i];
    return s;
}

static float avx2_f16(const uint8_t *w, const float *x, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        acc = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i))),
                              _mm256_loadu_ps(x + i), acc);
    float s = hsum8(acc);
    for (; i < n; i++) s += _cvtsh_ss(rd16(w + 2 * i)) * x[i];
    return s;
}
#endif

float quant_dot(int type, const void *row, const float *x, int64_t n) {
#ifdef QUANT_AVX2
    const uint8_t *r = row;
    switch (type) {
    case GGML_F32: return avx2_f32(row, x, n);
    case GGML_F16: return avx2_f16(r, x, n);
    case GGML_Q4_0: return avx2_q4(r, x, n / 32, 0);
    case GGML_Q4_1: return avx2_q4(r, x, n / 32, 1);
    case GGML_Q5_0: return avx2_q5(r, x, n / 32, 0);
    case GGML_Q5_1: return avx2_q5(r, x, n / 32, 1);
    case GGML_Q8_0: return avx2_q8_0(r, x, n / 32);
    case GGML_Q4_K: return avx2_q4_k(r, x, n / 256);
    case GGML_Q5_K: return avx2_q5_k(r, x, n / 256);
    case GGML_Q6_K: return avx2_q6_k(r, x, n / 256);
    default: break;
    }
#endif
    return quant_dot_generic(type, row, x, n);
}

/* ---- several activation rows at once (batched decode) ----
 * quant_dot_multi: each weight block is unpacked once (its codes to f32 lanes, its
 * scales to broadcasts) and then multiplied with every activation row of a group, each
 * row with its own accumulators. Per row the arithmetic is the single-row kernel's above,
 * op for op and in the same order (the same per-block chains, the same two accumulators
 * fed by the same blocks, the same final sums), so every value is bit-identical to
 * quant_dot on that row. */
#define MULTI_GROUP 16   /* activation rows per pass over a weight row (accumulators on the stack) */
#ifdef QUANT_AVX2
/* One block of 32 as four f32 code vectors in element order, and its d and m (Q8_0: m unused). */
typedef struct { __m256 c[4]; float d, m; } blk32;

static inline void unpack_q4(const uint8_t *r, int has_min, blk32 *u) {
    const __m256i low4 = _mm256_set1_epi32(15);
    u->d = _cvtsh_ss(rd16(r));
    u->m = has_min ? _cvtsh_ss(rd16(r + 2)) : -8.0f * u->d;
    const uint8_t *qs = r + (has_min ? 4 : 2);
    __m256i a = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)qs));
    __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + 8)));
    u->c[0] = _mm256_cvtepi32_ps(_mm256_and_si256(a, low4));
    u->c[1] = _mm256_cvtepi32_ps(_mm256_and_si256(b, low4));
    u->c[2] = _mm256_cvtepi32_ps(_mm256_srli_epi32(a, 4));
    u->c[3] = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
}

static inline void unpack_q5(const uint8_t *r, int has_min, blk32 *u) {
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    u->d = _cvtsh_ss(rd16(r));
    u->m = has_min ? _cvtsh_ss(rd16(r + 2)) : 0.0f;   /* Q5_0 has no min term (signed codes) */
    uint32_t h;
    memcpy(&h, r + (has_min ? 4 : 2), 4);
    __m128i raw = _mm_loadu_si128((const __m128i *)(r + (has_min ? 8 : 6)));
    __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(15));
    __m256i hv = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                                                                  0x0101010101010101LL, 0));
    __m256i codes = _mm256_or_si256(nib, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hv, bit), bit),
                                                          _mm256_set1_epi8(16)));
    if (!has_min) codes = _mm256_sub_epi8(codes, _mm256_set1_epi8(16));   /* Q5_0: signed q - 16, as avx2_q5_block */
    __m128i half[2] = {_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1)};
    for (int k = 0; k < 4; k++) {
        __m128i b = k & 1 ? _mm_srli_si128(half[k >> 1], 8) : half[k >> 1];
        u->c[k] = _mm256_cvtepi32_ps(has_min ? _mm256_cvtepu8_epi32(b) : _mm256_cvtepi8_epi32(b));
    }
}

static inline void unpack_q8(const uint8_t *r, blk32 *u) {
    u->d = _cvtsh_ss(rd16(r));
    u->m = 0;
    for (int k = 0; k < 4; k++) u->c[k] = i8x8_ps(_mm_loadl_epi64((const __m128i *)(r + 2 + 8 * k)));
}

/* Q4_0, Q4_1, Q5_0, Q5_1 (kind 4 / 5) and Q8_0 (kind 8) rows: block i feeds accumulator
 * i & 1, as in avx2_q4 / avx2_q5 / avx2_q8_0 (pairs of blocks, an odd last block to acc0).
 * nr (1 or 2) weight rows, row_bytes apart, at once: each activation block is loaded once
 * for both (and its sum, which is the same expression in both rows' arithmetic). */
static inline __attribute__((always_inline)) void avx2_b32_multi(const uint8_t *r, size_t row_bytes, int nr, int kind,
                                                                 int has_min, int bytes, const float *const *x, int nx,
                                                                 int64_t nb, float *out, size_t ostride) {
    __m256 acc[2][MULTI_GROUP][2];
    for (int k = 0; k < nr; k++)
        for (int j = 0; j < nx; j++) acc[k][j][0] = acc[k][j][1] = _mm256_setzero_ps();
    int scale_only = kind == 8 || (kind == 5 && !has_min);   /* Q8_0, Q5_0: d * s, no sum of x */
    for (int64_t b = 0; b < nb; b++, r += bytes) {
        blk32 u[2];
        __m256 vd[2], vm[2];
        for (int k = 0; k < nr; k++) {
            if (kind == 4) unpack_q4(r + k * row_bytes, has_min, &u[k]);
            else if (kind == 5) unpack_q5(r + k * row_bytes, has_min, &u[k]);
            else unpack_q8(r + k * row_bytes, &u[k]);
            vd[k] = _mm256_set1_ps(u[k].d), vm[k] = _mm256_set1_ps(u[k].m);
        }
        int a = (int)(b & 1);
        for (int j = 0; j < nx; j++) {
            const float *xj = x[j] + 32 * b;
            __m256 x0 = _mm256_loadu_ps(xj), x1 = _mm256_loadu_ps(xj + 8), x2 = _mm256_loadu_ps(xj + 16),
                   x3 = _mm256_loadu_ps(xj + 24);
            __m256 sx = scale_only ? x0 : _mm256_add_ps(_mm256_add_ps(x0, x1), _mm256_add_ps(x2, x3));
            for (int k = 0; k < nr; k++) {
                __m256 s = _mm256_mul_ps(u[k].c[0], x0);
                s = _mm256_fmadd_ps(u[k].c[1], x1, s);
                s = _mm256_fmadd_ps(u[k].c[2], x2, s);
                s = _mm256_fmadd_ps(u[k].c[3], x3, s);
                __m256 blk = scale_only ? _mm256_mul_ps(vd[k], s) : _mm256_fmadd_ps(vd[k], s, _mm256_mul_ps(vm[k], sx));
                acc[k][j][a] = _mm256_add_ps(acc[k][j][a], blk);
            }
        }
    }
    for (int k = 0; k < nr; k++)
        for (int j = 0; j < nx; j++) out[j * ostride + k] = hsum8(_mm256_add_ps(acc[k][j][0], acc[k][j][1]));
}

/* Q4_K as avx2_q4_k: per chunk c of 64, the low and high nibbles' f32 codes unpacked once. */
static void avx2_q4_k_multi(const uint8_t *r, const float *const *x, int nx, int64_t nb, float *out, size_t ostride) {
    const __m256i low4 = _mm256_set1_epi32(15);
    __m256 acc[MULTI_GROUP][2];
    for (int j = 0; j < nx; j++) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, r += 144) {
        float d = _cvtsh_ss(rd16(r)), dmin = _cvtsh_ss(rd16(r + 2));
        const uint8_t *qs = r + 16;
        for (int c = 0; c < 4; c++) {
            int sc0, mn0, sc1, mn1;
            kscale(r + 4, 2 * c, &sc0, &mn0);
            kscale(r + 4, 2 * c + 1, &sc1, &mn1);
            __m256 lo[4], hi[4];
            for (int g = 0; g < 4; g++) {
                __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + 32 * c + 8 * g)));
                lo[g] = _mm256_cvtepi32_ps(_mm256_and_si256(q, low4));
                hi[g] = _mm256_cvtepi32_ps(_mm256_srli_epi32(q, 4));
            }
            __m256 a0 = _mm256_set1_ps(d * (float)sc0), a1 = _mm256_set1_ps(d * (float)sc1);
            __m256 m0 = _mm256_set1_ps(dmin * (float)mn0), m1 = _mm256_set1_ps(dmin * (float)mn1);
            for (int j = 0; j < nx; j++) {
                const float *x0 = x[j] + 256 * b + 64 * c, *x1 = x0 + 32;
                __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), t0 = _mm256_setzero_ps(), t1 = _mm256_setzero_ps();
                for (int g = 0; g < 4; g++) {
                    __m256 xa = _mm256_loadu_ps(x0 + 8 * g), xb = _mm256_loadu_ps(x1 + 8 * g);
                    s0 = _mm256_fmadd_ps(lo[g], xa, s0);
                    s1 = _mm256_fmadd_ps(hi[g], xb, s1);
                    t0 = _mm256_add_ps(t0, xa);
                    t1 = _mm256_add_ps(t1, xb);
                }
                acc[j][0] = _mm256_fmadd_ps(a0, s0, acc[j][0]);
                acc[j][1] = _mm256_fmadd_ps(a1, s1, acc[j][1]);
                acc[j][0] = _mm256_fnmadd_ps(m0, t0, acc[j][0]);
                acc[j][1] = _mm256_fnmadd_ps(m1, t1, acc[j][1]);
            }
        }
    }
    for (int j = 0; j < nx; j++) out[j * ostride] = hsum8(_mm256_add_ps(acc[j][0], acc[j][1]));
}

/* Q5_K as avx2_q5_k: per chunk c, the 64 codes built as bytes and widened once. */
static void avx2_q5_k_multi(const uint8_t *r, const float *const *x, int nx, int64_t nb, float *out, size_t ostride) {
    const __m256i low4 = _mm256_set1_epi8(15), bit4 = _mm256_set1_epi8(16);
    __m256 acc[MULTI_GROUP][2];
    for (int j = 0; j < nx; j++) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, r += 176) {
        float d = _cvtsh_ss(rd16(r)), dmin = _cvtsh_ss(rd16(r + 2));
        const uint8_t *qs = r + 48;
        __m256i qh = _mm256_loadu_si256((const __m256i *)(r + 16));
        for (int c = 0; c < 4; c++) {
            int sc0, mn0, sc1, mn1;
            kscale(r + 4, 2 * c, &sc0, &mn0);
            kscale(r + 4, 2 * c + 1, &sc1, &mn1);
            __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(raw, low4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
            lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(qh, 4), bit4));
            hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(qh, 3), bit4));
            qh = _mm256_srli_epi16(qh, 2);
            __m256 cl[4], ch[4];
            __m128i l0 = _mm256_castsi256_si128(lo), l1 = _mm256_extracti128_si256(lo, 1);
            __m128i h0 = _mm256_castsi256_si128(hi), h1 = _mm256_extracti128_si256(hi, 1);
            cl[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(l0));
            cl[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(l0, 8)));
            cl[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(l1));
            cl[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(l1, 8)));
            ch[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(h0));
            ch[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(h0, 8)));
            ch[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(h1));
            ch[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(h1, 8)));
            __m256 a0 = _mm256_set1_ps(d * (float)sc0), a1 = _mm256_set1_ps(d * (float)sc1);
            __m256 m0 = _mm256_set1_ps(dmin * (float)mn0), m1 = _mm256_set1_ps(dmin * (float)mn1);
            for (int j = 0; j < nx; j++) {
                const float *xa = x[j] + 256 * b + 64 * c, *xb = xa + 32;
                __m256 p0 = _mm256_loadu_ps(xa), p1 = _mm256_loadu_ps(xa + 8), p2 = _mm256_loadu_ps(xa + 16), p3 = _mm256_loadu_ps(xa + 24);
                __m256 s0 = _mm256_mul_ps(cl[0], p0);
                s0 = _mm256_fmadd_ps(cl[1], p1, s0);
                s0 = _mm256_fmadd_ps(cl[2], p2, s0);
                s0 = _mm256_fmadd_ps(cl[3], p3, s0);
                __m256 t0 = _mm256_add_ps(_mm256_add_ps(p0, p1), _mm256_add_ps(p2, p3));
                __m256 q0 = _mm256_loadu_ps(xb), q1 = _mm256_loadu_ps(xb + 8), q2 = _mm256_loadu_ps(xb + 16), q3 = _mm256_loadu_ps(xb + 24);
                __m256 s1 = _mm256_mul_ps(ch[0], q0);
                s1 = _mm256_fmadd_ps(ch[1], q1, s1);
                s1 = _mm256_fmadd_ps(ch[2], q2, s1);
                s1 = _mm256_fmadd_ps(ch[3], q3, s1);
                __m256 t1 = _mm256_add_ps(_mm256_add_ps(q0, q1), _mm256_add_ps(q2, q3));
                acc[j][0] = _mm256_fmadd_ps(a0, s0, acc[j][0]);
                acc[j][1] = _mm256_fmadd_ps(a1, s1, acc[j][1]);
                acc[j][0] = _mm256_fnmadd_ps(m0, t0, acc[j][0]);
                acc[j][1] = _mm256_fnmadd_ps(m1, t1, acc[j][1]);
            }
        }
    }
    for (int j = 0; j < nx; j++) out[j * ostride] = hsum8(_mm256_add_ps(acc[j][0], acc[j][1]));
}

/* Q6_K as avx2_q6_k: per (h, k), the 32 codes (minus 32) as four f32 vectors. */
static void avx2_q6_k_multi(const uint8_t *r, const float *const *x, int nx, int64_t nb, float *out, size_t ostride) {
    const __m256i low4 = _mm256_set1_epi32(15), three = _mm256_set1_epi32(3), off = _mm256_set1_epi32(32);
    __m256 acc[MULTI_GROUP][2];
    for (int j = 0; j < nx; j++) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, r += 210) {
        float d = _cvtsh_ss(rd16(r + 208));
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = r + 64 * h, *qh = r + 128 + 32 * h;
            const int8_t *sc = (const int8_t *)(r + 192 + 8 * h);
            for (int k = 0; k < 4; k++) {
                const uint8_t *L = ql + 32 * (k & 1);
                __m256 cv[4];   /* [2g + e]: elements 16g + 8e .. +7 */
                for (int l = 0; l < 32; l += 8) {
                    __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(L + l)));
                    q = k < 2 ? _mm256_and_si256(q, low4) : _mm256_srli_epi32(q, 4);
                    __m256i hb = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qh + l)));
                    hb = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hb, 2 * k), three), 4);
                    cv[l / 8] = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_or_si256(q, hb), off));
                }
                __m256 c0 = _mm256_set1_ps(d * (float)sc[2 * k]), c1 = _mm256_set1_ps(d * (float)sc[1 + 2 * k]);
                for (int j = 0; j < nx; j++) {
                    const float *xk = x[j] + 256 * b + 128 * h + 32 * k;
                    __m256 s = _mm256_fmadd_ps(cv[0], _mm256_loadu_ps(xk), _mm256_setzero_ps());
                    s = _mm256_fmadd_ps(cv[1], _mm256_loadu_ps(xk + 8), s);
                    acc[j][0] = _mm256_fmadd_ps(c0, s, acc[j][0]);
                    __m256 t = _mm256_fmadd_ps(cv[2], _mm256_loadu_ps(xk + 16), _mm256_setzero_ps());
                    t = _mm256_fmadd_ps(cv[3], _mm256_loadu_ps(xk + 24), t);
                    acc[j][1] = _mm256_fmadd_ps(c1, t, acc[j][1]);
                }
            }
        }
    }
    for (int j = 0; j < nx; j++) out[j * ostride] = hsum8(_mm256_add_ps(acc[j][0], acc[j][1]));
}

/* Weight rows from r (nr of them when the type's kernel takes two at once, else one)
 * against nx <= MULTI_GROUP activation rows; returns the rows done, 0 when the type has no
 * multi-row kernel. */
static int avx2_row_multi(int type, const uint8_t *r, size_t row_bytes, int nr, const float *const *x, int nx, int64_t n,
                          float *out, size_t ostride) {
#define B32(kind, has_min, bytes)                                                                              \
    (nr == 2 ? (avx2_b32_multi(r, row_bytes, 2, kind, has_min, bytes, x, nx, n / 32, out, ostride), 2)         \
             : (avx2_b32_multi(r, row_bytes, 1, kind, has_min, bytes, x, nx, n / 32, out, ostride), 1))
    switch (type) {
    case GGML_Q4_0: return B32(4, 0, 18);
    case GGML_Q4_1: return B32(4, 1, 20);
    case GGML_Q5_0: return B32(5, 0, 22);
    case GGML_Q5_1: return B32(5, 1, 24);
    case GGML_Q8_0: return B32(8, 0, 34);
    case GGML_Q4_K: avx2_q4_k_multi(r, x, nx, n / 256, out, ostride); return 1;
    case GGML_Q5_K: avx2_q5_k_multi(r, x, nx, n / 256, out, ostride); return 1;
    case GGML_Q6_K: avx2_q6_k_multi(r, x, nx, n / 256, out, ostride); return 1;
    default: return 0;
    }
#undef B32
}
#endif

/* Activation rows per group: as many as keep the group's rows (n floats each) within
 * about 64 KB, so they stay in cache while a weight row meets each of them. */
static int multi_group(int64_t n) {
    int64_t g = 65536 / (n * (int64_t)sizeof(float) + 1);
    return g < 4 ? 4 : g > MULTI_GROUP ? MULTI_GROUP : (int)g;
}

void quant_dot_multi(int type, const void *w, size_t row_bytes, int n_rows, const float *const *x, int nx, int64_t n,
                     float *y, size_t ystride) {
    const uint8_t *rows = w;
    int g = multi_group(n);
    for (int j0 = 0; j0 < nx; j0 += g) {
        int gn = nx - j0 < g ? nx - j0 : g;
        for (int i = 0; i < n_rows;) {
            const uint8_t *r = rows + (size_t)i * row_bytes;
            float *out = y + (size_t)j0 * ystride + i;
#ifdef QUANT_AVX2
            int done = avx2_row_multi(type, r, row_bytes, n_rows - i >= 2 ? 2 : 1, x + j0, gn, n, out, ystride);
            if (done) {
                i += done;
                continue;
            }
#endif
            for (int j = 0; j < gn; j++) out[(size_t)j * ystride] = quant_dot(type, r, x[j0 + j], n);
            i++;
        }
    }
}

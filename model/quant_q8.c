/* Activations quantized to 8 bits per block of 32, and integer dot products against
 * Q4_0 / Q4_1 / Q8_0 weight rows (llama.cpp's vec_dot_q4_0_q8_0, q4_1_q8_1, q8_0_q8_0).
 * Per block: isum = sum(qw * qx) exactly in integers, then
 *   Q4_1: d_w d_x isum + m_w s_x            (w = d_w qw + m_w, qw in 0..15)
 *   Q4_0: the same with m_w = -8 d_w        (w = d_w (qw - 8))
 *   Q8_0: d_w d_x isum                      (qw in -128..127)
 * The only approximation is the activation rounding, |x - d_x qx| <= d_x / 2. */
#include "quant_q8.h"
#include "quant.h"
#include <float.h>
#include <math.h>
#include <string.h>
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define Q8_AVX2 1
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__)
#define Q8_AVX512 1
#endif
#endif

int quant_q8_supported(int type) { return type == GGML_Q4_0 || type == GGML_Q4_1 || type == GGML_Q8_0; }

void quant_q8_row(const float *x, q8_block *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, x += 32, y++) {
        float amax = 0;
        int finite = 1;
        for (int j = 0; j < 32; j++) {
            float a = fabsf(x[j]);
            finite &= a <= FLT_MAX;   /* false for inf and NaN */
            amax = a > amax ? a : amax;
        }
        if (!finite) {
            y->d = y->s = NAN;
            memset(y->q, 0, 32);
            continue;
        }
        int sum = 0;
        if (amax >= 0x1p-100f) {       /* 127 / amax is a normal float */
            float id = 127.0f / amax;
            for (int j = 0; j < 32; j++) sum += y->q[j] = (int8_t)lrintf(x[j] * id);
        } else {                       /* tiny or zero block: the scale in double */
            double id = amax > 0 ? 127.0 / amax : 0.0;
            for (int j = 0; j < 32; j++) sum += y->q[j] = (int8_t)lrint(x[j] * id);
        }
        y->d = amax / 127.0f;
        y->s = y->d * (float)sum;
    }
}

static inline float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return f16_to_f32(h);
}

/* ---- portable ---- */

static float gen_q4_row(const uint8_t *r, const q8_block *x, int64_t nb, int has_min) {
    float sumf = 0, summs = 0;
    for (int64_t b = 0; b < nb; b++, r += has_min ? 20 : 18) {
        float dw = f16_at(r), m = has_min ? f16_at(r + 2) : -8.0f * dw;
        const uint8_t *qs = r + (has_min ? 4 : 2);
        int isum = 0;
        for (int j = 0; j < 16; j++) isum += (qs[j] & 15) * x[b].q[j] + (qs[j] >> 4) * x[b].q[j + 16];
        sumf += dw * x[b].d * (float)isum;
        summs += m * x[b].s;
    }
    return sumf + summs;
}

static float gen_q8_0_row(const uint8_t *r, const q8_block *x, int64_t nb) {
    float sumf = 0;
    for (int64_t b = 0; b < nb; b++, r += 34) {
        const int8_t *qw = (const int8_t *)(r + 2);
        int isum = 0;
        for (int j = 0; j < 32; j++) isum += qw[j] * x[b].q[j];
        sumf += f16_at(r) * x[b].d * (float)isum;
    }
    return sumf;
}

static float nan_row(void) { return NAN; }

void quant_matvec_q8_generic(int type, const void *w, size_t row_bytes, int n_rows, const q8_block *x,
                             int64_t n, float *y) {
    const uint8_t *r = w;
    for (int i = 0; i < n_rows; i++, r += row_bytes)
        switch (type) {
        case GGML_Q4_0: y[i] = gen_q4_row(r, x, n / 32, 0); break;
        case GGML_Q4_1: y[i] = gen_q4_row(r, x, n / 32, 1); break;
        case GGML_Q8_0: y[i] = gen_q8_0_row(r, x, n / 32); break;
        default: y[i] = nan_row(); break;   /* misuse: visible */
        }
}

/* ---- AVX2 (+ VNNI where the CPU has it) ----
 * Per block, 32 weight bytes (unsigned) times 32 activation bytes (signed) summed in
 * fours to eight int32 lanes, converted once and scaled by d_w d_x with one FMA into
 * an f32 accumulator; one horizontal sum per row. */
#ifdef Q8_AVX2
static inline __m256i dot_u8s8(__m256i u, __m256i s) {
#if defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#elif defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    /* u <= 255, |s| <= 127 here: |u0 s0 + u1 s1| <= 2 * 15 * 127 (Q4) or 2 * 128 * 127
     * (Q8_0 via the sign trick), below maddubs's int16 saturation */
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

static inline float f16_fast(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* 16 bytes of nibbles -> 32 bytes 0..15 in element order (low nibbles are 0..15). */
static inline __m256i nibbles32(const uint8_t *qs) {
    __m128i raw = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(15));
}

static inline __m256 q4_block(const uint8_t *r, const q8_block *x, int has_min, float *summs) {
    float dw = f16_fast(r);
    float m = has_min ? f16_fast(r + 2) : -8.0f * dw;
    *summs += m * x->s;
    __m256i p = dot_u8s8(nibbles32(r + (has_min ? 4 : 2)), _mm256_loadu_si256((const __m256i *)x->q));
    return _mm256_mul_ps(_mm256_set1_ps(dw * x->d), _mm256_cvtepi32_ps(p));
}

#ifndef Q8_AVX512   /* the rows go through the AVX-512 path there; its odd blocks through q4_block */
static float avx2_q4_row(const uint8_t *r, const q8_block *x, int64_t nb, int has_min) {
    const int bytes = has_min ? 20 : 18;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float s0 = 0, s1 = 0;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2, r += 2 * bytes) {   /* two chains: blocks do not wait on each other */
        acc0 = _mm256_add_ps(acc0, q4_block(r, x + b, has_min, &s0));
        acc1 = _mm256_add_ps(acc1, q4_block(r + bytes, x + b + 1, has_min, &s1));
    }
    if (b < nb) acc0 = _mm256_add_ps(acc0, q4_block(r, x + b, has_min, &s0));
    return hsum8(_mm256_add_ps(acc0, acc1)) + (s0 + s1);
}

#endif

static inline __m256 q8_0_block(const uint8_t *r, const q8_block *x) {
    float dw = f16_fast(r);
    __m256i w = _mm256_loadu_si256((const __m256i *)(r + 2));
    __m256i xq = _mm256_loadu_si256((const __m256i *)x->q);
    /* signed x signed as |w| (unsigned) times x with w's sign */
    __m256i p = dot_u8s8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xq, w));
    return _mm256_mul_ps(_mm256_set1_ps(dw * x->d), _mm256_cvtepi32_ps(p));
}

#ifndef Q8_AVX512
static float avx2_q8_0_row(const uint8_t *r, const q8_block *x, int64_t nb) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2, r += 68) {
        acc0 = _mm256_add_ps(acc0, q8_0_block(r, x + b));
        acc1 = _mm256_add_ps(acc1, q8_0_block(r + 34, x + b + 1));
    }
    if (b < nb) acc0 = _mm256_add_ps(acc0, q8_0_block(r, x + b));
    return hsum8(_mm256_add_ps(acc0, acc1));
}
#endif
#endif

/* ---- AVX-512 VNNI ----
 * Two blocks per 512-bit multiply-add (lanes 0-7 the first block, 8-15 the second),
 * scaled by a vector holding each block's d_w d_x in its half; an odd last block goes
 * through the AVX2 path. */
#ifdef Q8_AVX512
static inline __m512 scale2(float a, float b) {
    return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1);
}

static inline __m512i x_pair(const q8_block *x) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)x[0].q)),
                              _mm256_loadu_si256((const __m256i *)x[1].q), 1);
}

/* The nibbles of two blocks (16 bytes each) as 64 bytes 0..15 in element order. */
static inline __m512i nibbles64(const uint8_t *qa, const uint8_t *qb) {
    __m256i raw = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)qb), _mm_loadu_si128((const __m128i *)qa));
    __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1);   /* a b a>>4 b>>4 */
    w = _mm512_shuffle_i64x2(w, w, _MM_SHUFFLE(3, 1, 2, 0));                                     /* a a>>4 b b>>4 */
    return _mm512_and_si512(w, _mm512_set1_epi8(15));
}

static float avx512_q4_row(const uint8_t *r, const q8_block *x, int64_t nb, int has_min) {
    const int bytes = has_min ? 20 : 18, off = has_min ? 4 : 2;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    float s0 = 0, s1 = 0;
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4, r += 4 * bytes) {   /* two chains of two blocks */
        const uint8_t *r1 = r + bytes, *r2 = r + 2 * bytes, *r3 = r + 3 * bytes;
        float d0 = f16_fast(r), d1 = f16_fast(r1), d2 = f16_fast(r2), d3 = f16_fast(r3);
        s0 += (has_min ? f16_fast(r + 2) : -8.0f * d0) * x[b].s + (has_min ? f16_fast(r1 + 2) : -8.0f * d1) * x[b + 1].s;
        s1 += (has_min ? f16_fast(r2 + 2) : -8.0f * d2) * x[b + 2].s + (has_min ? f16_fast(r3 + 2) : -8.0f * d3) * x[b + 3].s;
        __m512i p0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), nibbles64(r + off, r1 + off), x_pair(x + b));
        __m512i p1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), nibbles64(r2 + off, r3 + off), x_pair(x + b + 2));
        acc0 = _mm512_fmadd_ps(scale2(d0 * x[b].d, d1 * x[b + 1].d), _mm512_cvtepi32_ps(p0), acc0);
        acc1 = _mm512_fmadd_ps(scale2(d2 * x[b + 2].d, d3 * x[b + 3].d), _mm512_cvtepi32_ps(p1), acc1);
    }
    __m256 tail = _mm256_setzero_ps();
    for (; b < nb; b++, r += bytes) tail = _mm256_add_ps(tail, q4_block(r, x + b, has_min, &s0));
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + hsum8(tail) + (s0 + s1);
}

/* signed x signed: |w| (unsigned) times x with w's sign (AVX-512 has no vpsignb) */
static inline __m512i q8_0_pair(const uint8_t *ra, const uint8_t *rb, const q8_block *x) {
    __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(ra + 2))),
                                   _mm256_loadu_si256((const __m256i *)(rb + 2)), 1);
    __m512i xs = _mm512_mask_sub_epi8(x_pair(x), _mm512_movepi8_mask(w), _mm512_setzero_si512(), x_pair(x));
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(w), xs);
}

static float avx512_q8_0_row(const uint8_t *r, const q8_block *x, int64_t nb) {
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4, r += 4 * 34) {
        __m512i p0 = q8_0_pair(r, r + 34, x + b), p1 = q8_0_pair(r + 68, r + 102, x + b + 2);
        acc0 = _mm512_fmadd_ps(scale2(f16_fast(r) * x[b].d, f16_fast(r + 34) * x[b + 1].d), _mm512_cvtepi32_ps(p0), acc0);
        acc1 = _mm512_fmadd_ps(scale2(f16_fast(r + 68) * x[b + 2].d, f16_fast(r + 102) * x[b + 3].d), _mm512_cvtepi32_ps(p1),
                               acc1);
    }
    __m256 tail = _mm256_setzero_ps();
    for (; b < nb; b++, r += 34) tail = _mm256_add_ps(tail, q8_0_block(r, x + b));
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + hsum8(tail);
}
#endif

/* The widest row functions built: one dispatch below for both SIMD widths. */
#if defined(Q8_AVX512)
#define simd_q4_row avx512_q4_row
#define simd_q8_0_row avx512_q8_0_row
#elif defined(Q8_AVX2)
#define simd_q4_row avx2_q4_row
#define simd_q8_0_row avx2_q8_0_row
#endif

void quant_matvec_q8(int type, const void *w, size_t row_bytes, int n_rows, const q8_block *x, int64_t n,
                     float *y) {
#ifdef Q8_AVX2
    const uint8_t *r = w;
    switch (type) {
    case GGML_Q4_0:
        for (int i = 0; i < n_rows; i++, r += row_bytes) y[i] = simd_q4_row(r, x, n / 32, 0);
        return;
    case GGML_Q4_1:
        for (int i = 0; i < n_rows; i++, r += row_bytes) y[i] = simd_q4_row(r, x, n / 32, 1);
        return;
    case GGML_Q8_0:
        for (int i = 0; i < n_rows; i++, r += row_bytes) y[i] = simd_q8_0_row(r, x, n / 32);
        return;
    default: break;
    }
#endif
    quant_matvec_q8_generic(type, w, row_bytes, n_rows, x, n, y);
}

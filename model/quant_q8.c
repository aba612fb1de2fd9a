/* Activations quantized to 8 bits per block (32, or 256 for the K-quants), and integer
 * dot products against quantized weight rows (llama.cpp's vec_dot_q4_0_q8_0, q4_1_q8_1,
 * q5_0_q8_0, q5_1_q8_1, q8_0_q8_0, q4_K_q8_K, q5_K_q8_K, q6_K_q8_K).
 * Per block of 32: isum = sum(qw * qx) exactly in integers, then
 *   Q4_1, Q5_1: d_w d_x isum + m_w s_x     (w = d_w qw + m_w, qw in 0..15 / 0..31)
 *   Q4_0, Q5_0: the same with m_w = -8 d_w / -16 d_w
 *   Q8_0: d_w d_x isum                     (qw in -128..127)
 * Per super-block of 256 (sub-blocks j of 32, or of 16 for Q6_K):
 *   Q4_K, Q5_K: d d_x sum_j sc_j isum_j - dmin d_x sum_j mn_j bsum_j
 *                                          (w = d sc_j qw - dmin mn_j)
 *   Q6_K: d d_x sum_j sc_j (isum_j - 32 bsum_j)      (w = d sc_j (qw - 32), qw in 0..63)
 * where bsum_j is the sum of the activation codes of sub-block j, all in integers.
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

int quant_q8_act_block(int type) {
    switch (type) {
    case GGML_Q4_0: case GGML_Q4_1: case GGML_Q5_0: case GGML_Q5_1: case GGML_Q8_0: return 32;
    case GGML_Q4_K: case GGML_Q5_K: case GGML_Q6_K: return 256;
    default: return 0;
    }
}

int quant_q8_supported(int type) { return quant_q8_act_block(type) != 0; }

size_t quant_q8_act_bytes(int64_t n) {
    size_t b32 = (size_t)(n / 32 + 1) * sizeof(q8_block), b256 = (size_t)(n / 256 + 1) * sizeof(q8k_block);
    return b32 > b256 ? b32 : b256;
}

const void *quant_q8_act(int type, const float *x, int64_t n, void *buf) {
    switch (quant_q8_act_block(type)) {
    case 32: quant_q8_row(x, buf, n); return buf;
    case 256: quant_q8k_row(x, buf, n); return buf;
    default: return NULL;
    }
}

/* Codes of k values: q = round(x / d) with d = max|x| / 127; returns d, or NaN (codes
 * 0) when a value is NaN or infinite, so every dot product that reads them is NaN. */
static float q8_codes(const float *x, int k, int8_t *q) {
    float amax = 0;
    int finite = 1;
    for (int j = 0; j < k; j++) {
        float a = fabsf(x[j]);
        finite &= a <= FLT_MAX;   /* false for inf and NaN */
        amax = a > amax ? a : amax;
    }
    if (!finite) {
        memset(q, 0, (size_t)k);
        return NAN;
    }
    if (amax >= 0x1p-100f) {       /* 127 / amax is a normal float */
        float id = 127.0f / amax;
        for (int j = 0; j < k; j++) q[j] = (int8_t)lrintf(x[j] * id);
    } else {                       /* tiny or zero block: the scale in double */
        double id = amax > 0 ? 127.0 / amax : 0.0;
        for (int j = 0; j < k; j++) q[j] = (int8_t)lrint(x[j] * id);
    }
    return amax / 127.0f;
}

void quant_q8_row(const float *x, q8_block *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, x += 32, y++) {
        y->d = q8_codes(x, 32, y->q);
        int sum = 0;
        for (int j = 0; j < 32; j++) sum += y->q[j];
        y->s = y->d * (float)sum;
    }
}

void quant_q8k_row(const float *x, q8k_block *y, int64_t n) {
    for (int64_t b = 0; b < n / 256; b++, x += 256, y++) {
        y->d = q8_codes(x, 256, y->q);
        for (int k = 0; k < 16; k++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += y->q[16 * k + j];
            y->bsums[k] = (int16_t)sum;
        }
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

/* Q5_0 / Q5_1: the fifth bit of element j is bit j of the 32-bit qh. */
static inline int q5_code(const uint8_t *qs, uint32_t qh, int j) {
    return (j < 16 ? qs[j] & 15 : qs[j - 16] >> 4) | (int)((qh >> j) & 1) << 4;
}

static float gen_q5_row(const uint8_t *r, const q8_block *x, int64_t nb, int has_min) {
    float sumf = 0, summs = 0;
    for (int64_t b = 0; b < nb; b++, r += has_min ? 24 : 22) {
        float dw = f16_at(r), m = has_min ? f16_at(r + 2) : -16.0f * dw;
        uint32_t qh;
        memcpy(&qh, r + (has_min ? 4 : 2), 4);
        const uint8_t *qs = r + (has_min ? 8 : 6);
        int isum = 0;
        for (int j = 0; j < 32; j++) isum += q5_code(qs, qh, j) * x[b].q[j];
        sumf += dw * x[b].d * (float)isum;
        summs += m * x[b].s;
    }
    return sumf + summs;
}

/* The eight 6-bit scales and mins of a Q4_K / Q5_K super-block (12 bytes): sub-blocks
 * 0-3 in the low 6 bits of bytes 0-3 and 4-7; 4-7 in the nibbles of bytes 8-11, with
 * their top two bits in the top bits of bytes 0-7. */
static inline void k_scales(const uint8_t *s, int sc[8], int mn[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
        sc[j + 4] = (s[j + 8] & 15) | (s[j] >> 6) << 4;
        mn[j + 4] = (s[j + 8] >> 4) | (s[j + 4] >> 6) << 4;
    }
}

/* Q4_K (144 bytes: d, dmin, scales, 128 bytes of nibbles) and Q5_K (176: the same with
 * 32 bytes of fifth bits before the nibbles): element 64c + l is the low nibble of
 * byte 32c + l, element 64c + 32 + l its high nibble; the fifth bits of both are bits
 * 2c and 2c + 1 of qh[l]. */
static float gen_q45k_row(const uint8_t *r, const q8k_block *x, int64_t nb, int five) {
    float sumf = 0, summs = 0;
    for (int64_t b = 0; b < nb; b++, r += five ? 176 : 144) {
        const uint8_t *qh = r + 16, *qs = r + (five ? 48 : 16);
        const int8_t *xq = x[b].q;
        int sc[8], mn[8], isum = 0, msum = 0;
        k_scales(r + 4, sc, mn);
        for (int c = 0; c < 4; c++) {
            int s0 = 0, s1 = 0;
            for (int l = 0; l < 32; l++) {
                int lo = qs[32 * c + l] & 15, hi = qs[32 * c + l] >> 4;
                if (five) lo |= (qh[l] >> (2 * c) & 1) << 4, hi |= (qh[l] >> (2 * c + 1) & 1) << 4;
                s0 += lo * xq[64 * c + l];
                s1 += hi * xq[64 * c + 32 + l];
            }
            isum += sc[2 * c] * s0 + sc[2 * c + 1] * s1;
        }
        for (int j = 0; j < 8; j++) msum += mn[j] * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
        sumf += f16_at(r) * x[b].d * (float)isum;
        summs += f16_at(r + 2) * x[b].d * (float)msum;
    }
    return sumf - summs;
}

/* Q6_K (210 bytes: 128 bytes of low nibbles ql, 64 of 2-bit highs qh, 16 int8 scales,
 * d): in half h, element 128h + 32k + l (k < 4, l < 32) is nibble k / 2 of
 * ql[64h + 32 (k & 1) + l] with bits 2k, 2k + 1 of qh[32h + l] above it, minus 32; its
 * scale is scales[8h + 2k + l / 16], the scale of its sub-block of 16. */
static float gen_q6k_row(const uint8_t *r, const q8k_block *x, int64_t nb) {
    float sumf = 0;
    for (int64_t b = 0; b < nb; b++, r += 210) {
        const int8_t *sc = (const int8_t *)(r + 192);
        int isum = 0;
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < 4; k++)
                for (int g = 0; g < 2; g++) {
                    int sub = 0;
                    for (int j = 0; j < 16; j++) {
                        int l = 16 * g + j, byte = r[64 * h + 32 * (k & 1) + l];
                        int code = ((k < 2 ? byte & 15 : byte >> 4) | (r[128 + 32 * h + l] >> (2 * k) & 3) << 4) - 32;
                        sub += code * x[b].q[128 * h + 32 * k + l];
                    }
                    isum += sc[8 * h + 2 * k + g] * sub;
                }
        sumf += f16_at(r + 208) * x[b].d * (float)isum;
    }
    return sumf;
}

static float nan_row(void) { return NAN; }

void quant_matvec_q8_generic(int type, const void *w, size_t row_bytes, int n_rows, const void *xv,
                             int64_t n, float *y) {
    const uint8_t *r = w;
    const q8_block *x = xv;
    const q8k_block *xk = xv;
    for (int i = 0; i < n_rows; i++, r += row_bytes)
        switch (type) {
        case GGML_Q4_0: y[i] = gen_q4_row(r, x, n / 32, 0); break;
        case GGML_Q4_1: y[i] = gen_q4_row(r, x, n / 32, 1); break;
        case GGML_Q5_0: y[i] = gen_q5_row(r, x, n / 32, 0); break;
        case GGML_Q5_1: y[i] = gen_q5_row(r, x, n / 32, 1); break;
        case GGML_Q8_0: y[i] = gen_q8_0_row(r, x, n / 32); break;
        case GGML_Q4_K: y[i] = gen_q45k_row(r, xk, n / 256, 0); break;
        case GGML_Q5_K: y[i] = gen_q45k_row(r, xk, n / 256, 1); break;
        case GGML_Q6_K: y[i] = gen_q6k_row(r, xk, n / 256); break;
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
    /* u <= 255, |s| <= 127 here: |u0 s0 + u1 s1| <= 2 * 31 * 127 (Q4, Q5) or 2 * 128 * 127
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

/* byte j of the result is 16 where bit j of h is set, else 0 (each byte of h copied
 * to its 8 lanes, then each lane tests its own bit) */
static inline __m256i bits_x16(uint32_t h) {
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h),
                                    _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                                      0x0101010101010101LL, 0));
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(16));
}

static inline __m256 q5_block(const uint8_t *r, const q8_block *x, int has_min, float *summs) {
    float dw = f16_fast(r);
    float m = has_min ? f16_fast(r + 2) : -16.0f * dw;
    uint32_t qh;
    memcpy(&qh, r + (has_min ? 4 : 2), 4);
    *summs += m * x->s;
    __m256i w = _mm256_or_si256(nibbles32(r + (has_min ? 8 : 6)), bits_x16(qh));
    __m256i p = dot_u8s8(w, _mm256_loadu_si256((const __m256i *)x->q));
    return _mm256_mul_ps(_mm256_set1_ps(dw * x->d), _mm256_cvtepi32_ps(p));
}

static float avx2_q5_row(const uint8_t *r, const q8_block *x, int64_t nb, int has_min) {
    const int bytes = has_min ? 24 : 22;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float s0 = 0, s1 = 0;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2, r += 2 * bytes) {
        acc0 = _mm256_add_ps(acc0, q5_block(r, x + b, has_min, &s0));
        acc1 = _mm256_add_ps(acc1, q5_block(r + bytes, x + b + 1, has_min, &s1));
    }
    if (b < nb) acc0 = _mm256_add_ps(acc0, q5_block(r, x + b, has_min, &s0));
    return hsum8(_mm256_add_ps(acc0, acc1)) + (s0 + s1);
}

/* 32 unsigned codes (<= 63) times 32 activations, pairs summed to int16 (no saturation:
 * 2 * 63 * 127 < 2^15), then pairs times the sub-block scales to 8 int32 lanes: scale_lo
 * for codes 0-15, scale_hi for 16-31. Exact. */
static inline __m256i scaled_dot(__m256i u, const int8_t *xq, int scale_lo, int scale_hi) {
    __m256i p = _mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)xq));
    return _mm256_madd_epi16(p, _mm256_set_m128i(_mm_set1_epi16((short)scale_hi), _mm_set1_epi16((short)scale_lo)));
}

static float avx2_q45k_row(const uint8_t *r, const q8k_block *x, int64_t nb, int five) {
    const __m256i low4 = _mm256_set1_epi8(15), bit4 = _mm256_set1_epi8(16);
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (int64_t b = 0; b < nb; b++, r += five ? 176 : 144) {
        const uint8_t *qs = r + (five ? 48 : 16);
        int sc[8], mn[8], msum = 0;
        k_scales(r + 4, sc, mn);
        for (int j = 0; j < 8; j++) msum += mn[j] * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
        summs += f16_fast(r + 2) * x[b].d * (float)msum;
        __m256i qh = five ? _mm256_loadu_si256((const __m256i *)(r + 16)) : _mm256_setzero_si256();
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(raw, low4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
            if (five) {   /* bits 2c and 2c+1 of qh (shifted down by 2 each chunk) to bit 4 */
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(qh, 4), bit4));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(qh, 3), bit4));
                qh = _mm256_srli_epi16(qh, 2);
            }
            isum = _mm256_add_epi32(isum, scaled_dot(lo, x[b].q + 64 * c, sc[2 * c], sc[2 * c]));
            isum = _mm256_add_epi32(isum, scaled_dot(hi, x[b].q + 64 * c + 32, sc[2 * c + 1], sc[2 * c + 1]));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16_fast(r) * x[b].d), _mm256_cvtepi32_ps(isum), acc);
    }
    return hsum8(acc) - summs;
}

/* Q6_K on the unsigned codes 0..63, the -32 folded in once per super-block through the
 * activation sums: sum_j sc_j (isum_j - 32 bsum_j). */
static float avx2_q6k_row(const uint8_t *r, const q8k_block *x, int64_t nb) {
    const __m256i low4 = _mm256_set1_epi8(15), top2 = _mm256_set1_epi8(0x30);   /* the two high bits, at 4-5 */
    __m256 acc = _mm256_setzero_ps();
    float offs = 0;
    for (int64_t b = 0; b < nb; b++, r += 210) {
        const int8_t *sc = (const int8_t *)(r + 192);
        int off = 0;
        for (int j = 0; j < 16; j++) off += sc[j] * x[b].bsums[j];
        float d = f16_fast(r + 208) * x[b].d;
        offs += d * (float)(32 * off);
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i l0 = _mm256_loadu_si256((const __m256i *)(r + 64 * h));
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(r + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(r + 128 + 32 * h));
            __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), top2)),
                _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), top2)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(qh, top2)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                                _mm256_and_si256(_mm256_srli_epi16(qh, 2), top2)),
            };
            const int8_t *s = sc + 8 * h;
            for (int k = 0; k < 4; k++)
                isum = _mm256_add_epi32(isum, scaled_dot(q[k], x[b].q + 128 * h + 32 * k, s[2 * k], s[2 * k + 1]));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
    }
    return hsum8(acc) - offs;
}
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

void quant_matvec_q8(int type, const void *w, size_t row_bytes, int n_rows, const void *xv, int64_t n, float *y) {
#ifdef Q8_AVX2
    const uint8_t *r = w;
    const q8_block *x = xv;
    const q8k_block *xk = xv;
    switch (type) {
    case GGML_Q4_0:
        for (int i = 0; i < n_rows; i++, r += row_bytes) y[i] = simd_q4_row(r, x, n / 32, 0);
        return;
    case GGML_Q4_1:
        for (int i = 0; i < n_rows; i++, r += row_bytes) y[i] = simd_q4_row(r, x, n / 32, 1);
        return;
    case GGML_Q5_0:
        for (int i = 0; i < n_rows; i++, r += row_bytes) y[i] = avx2_q5_row(r, x, n / 32, 0);
        return;
    case GGML_Q5_1:
        for (int i = 0; i < n_rows; i++, r += row_bytes) y[i] = avx2_q5_row(r, x, n / 32, 1);
        return;
    case GGML_Q8_0:
        for (int i = 0; i < n_rows; i++, r += row_bytes) y[i] = simd_q8_0_row(r, x, n / 32);
        return;
    case GGML_Q4_K:
        for (int i = 0; i < n_rows; i++, r += row_bytes) y[i] = avx2_q45k_row(r, xk, n / 256, 0);
        return;
    case GGML_Q5_K:
        for (int i = 0; i < n_rows; i++, r += row_bytes) y[i] = avx2_q45k_row(r, xk, n / 256, 1);
        return;
    case GGML_Q6_K:
        for (int i = 0; i < n_rows; i++, r += row_bytes) y[i] = avx2_q6k_row(r, xk, n / 256);
        return;
    default: break;
    }
#endif
    quant_matvec_q8_generic(type, w, row_bytes, n_rows, xv, n, y);
}

/* ---- several activation rows at once (batched decode) ----
 * quant_matvec_q8_multi: each weight block's codes are unpacked once into byte vectors
 * (and the K-quants' scales into multiplier vectors), then multiplied with the 8-bit
 * blocks of every activation row of a group. The integer block sums are exact, so each
 * lane holds the same integer as in the single-row kernel; every float operation after
 * them (scales, accumulators, offsets, final sums) is the single-row kernel's, in the same
 * order, so each value is bit-identical to quant_matvec_q8 on that row. */
#define Q8_MULTI_GROUP 16
#ifdef Q8_AVX2
/* Q4_0/Q4_1 (kind 4), Q5_0/Q5_1 (kind 5), Q8_0 (kind 8) as avx2_q4_row / avx2_q5_row /
 * avx2_q8_0_row: block i feeds accumulator (and offset sum) i & 1. nr (1 or 2) weight
 * rows, row_bytes apart, at once: each activation block is loaded once for both. */
static inline __attribute__((always_inline)) void avx2_b32_multi(const uint8_t *r, size_t row_bytes, int nr, int kind,
                                                                 int has_min, int bytes, const q8_block *const *x,
                                                                 int nx, int64_t nb, float *out, size_t ostride) {
    __m256 acc[2][Q8_MULTI_GROUP][2];
    float sm[2][Q8_MULTI_GROUP][2];
    for (int k = 0; k < nr; k++)
        for (int j = 0; j < nx; j++) acc[k][j][0] = acc[k][j][1] = _mm256_setzero_ps(), sm[k][j][0] = sm[k][j][1] = 0;
    for (int64_t b = 0; b < nb; b++, r += bytes) {
        float dw[2], m[2] = {0, 0};
        __m256i w[2], wabs[2];
        for (int k = 0; k < nr; k++) {
            const uint8_t *rk = r + k * row_bytes;
            dw[k] = f16_fast(rk);
            if (kind == 8) w[k] = _mm256_loadu_si256((const __m256i *)(rk + 2));
            else if (kind == 4) {
                m[k] = has_min ? f16_fast(rk + 2) : -8.0f * dw[k];
                w[k] = nibbles32(rk + (has_min ? 4 : 2));
            } else {
                m[k] = has_min ? f16_fast(rk + 2) : -16.0f * dw[k];
                uint32_t qh;
                memcpy(&qh, rk + (has_min ? 4 : 2), 4);
                w[k] = _mm256_or_si256(nibbles32(rk + (has_min ? 8 : 6)), bits_x16(qh));
            }
            wabs[k] = kind == 8 ? _mm256_sign_epi8(w[k], w[k]) : w[k];
        }
        int a = (int)(b & 1);
        for (int j = 0; j < nx; j++) {
            const q8_block *xb = x[j] + b;
            __m256i xq = _mm256_loadu_si256((const __m256i *)xb->q);
            for (int k = 0; k < nr; k++) {
                if (kind != 8) sm[k][j][a] += m[k] * xb->s;
                __m256i p = dot_u8s8(wabs[k], kind == 8 ? _mm256_sign_epi8(xq, w[k]) : xq);
                acc[k][j][a] = _mm256_add_ps(acc[k][j][a], _mm256_mul_ps(_mm256_set1_ps(dw[k] * xb->d), _mm256_cvtepi32_ps(p)));
            }
        }
    }
    for (int k = 0; k < nr; k++)
        for (int j = 0; j < nx; j++) {
            float v = hsum8(_mm256_add_ps(acc[k][j][0], acc[k][j][1]));
            out[j * ostride + k] = kind == 8 ? v : v + (sm[k][j][0] + sm[k][j][1]);
        }
}

/* Q4_K / Q5_K as avx2_q45k_row. */
static void avx2_q45k_multi(const uint8_t *r, const q8k_block *const *x, int nx, int64_t nb, int five, float *out,
                            size_t ostride) {
    const __m256i low4 = _mm256_set1_epi8(15), bit4 = _mm256_set1_epi8(16);
    __m256 acc[Q8_MULTI_GROUP];
    float summs[Q8_MULTI_GROUP];
    for (int j = 0; j < nx; j++) acc[j] = _mm256_setzero_ps(), summs[j] = 0;
    for (int64_t b = 0; b < nb; b++, r += five ? 176 : 144) {
        const uint8_t *qs = r + (five ? 48 : 16);
        int sc[8], mn[8];
        k_scales(r + 4, sc, mn);
        __m256i qh = five ? _mm256_loadu_si256((const __m256i *)(r + 16)) : _mm256_setzero_si256();
        __m256i codes[8], scv[8];   /* [2c]: low nibbles of chunk c, [2c + 1]: high */
        for (int c = 0; c < 4; c++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(raw, low4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
            if (five) {
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(qh, 4), bit4));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(qh, 3), bit4));
                qh = _mm256_srli_epi16(qh, 2);
            }
            codes[2 * c] = lo, codes[2 * c + 1] = hi;
        }
        for (int s = 0; s < 8; s++) scv[s] = _mm256_set1_epi16((short)sc[s]);
        float dw = f16_fast(r), dmin = f16_fast(r + 2);
        for (int j = 0; j < nx; j++) {
            const q8k_block *xb = x[j] + b;
            int msum = 0;
            for (int s = 0; s < 8; s++) msum += mn[s] * (xb->bsums[2 * s] + xb->bsums[2 * s + 1]);
            summs[j] += dmin * xb->d * (float)msum;
            __m256i isum = _mm256_setzero_si256();
            for (int s = 0; s < 8; s++) {
                __m256i p = _mm256_maddubs_epi16(codes[s], _mm256_loadu_si256((const __m256i *)(xb->q + 32 * s)));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, scv[s]));
            }
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * xb->d), _mm256_cvtepi32_ps(isum), acc[j]);
        }
    }
    for (int j = 0; j < nx; j++) out[j * ostride] = hsum8(acc[j]) - summs[j];
}

/* Q6_K as avx2_q6k_row. */
static void avx2_q6k_multi(const uint8_t *r, const q8k_block *const *x, int nx, int64_t nb, float *out, size_t ostride) {
    const __m256i low4 = _mm256_set1_epi8(15), top2 = _mm256_set1_epi8(0x30);
    __m256 acc[Q8_MULTI_GROUP];
    float offs[Q8_MULTI_GROUP];
    for (int j = 0; j < nx; j++) acc[j] = _mm256_setzero_ps(), offs[j] = 0;
    for (int64_t b = 0; b < nb; b++, r += 210) {
        const int8_t *sc = (const int8_t *)(r + 192);
        __m256i codes[8], scv[8];   /* [4h + k]: elements 128h + 32k .. +31 */
        for (int h = 0; h < 2; h++) {
            __m256i l0 = _mm256_loadu_si256((const __m256i *)(r + 64 * h));
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(r + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(r + 128 + 32 * h));
            codes[4 * h] = _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), top2));
            codes[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), top2));
            codes[4 * h + 2] =
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(qh, top2));
            codes[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                                               _mm256_and_si256(_mm256_srli_epi16(qh, 2), top2));
            for (int k = 0; k < 4; k++)
                scv[4 * h + k] = _mm256_set_m128i(_mm_set1_epi16((short)sc[8 * h + 2 * k + 1]),
                                                  _mm_set1_epi16((short)sc[8 * h + 2 * k]));
        }
        float dw = f16_fast(r + 208);
        for (int j = 0; j < nx; j++) {
            const q8k_block *xb = x[j] + b;
            int off = 0;
            for (int s = 0; s < 16; s++) off += sc[s] * xb->bsums[s];
            float d = dw * xb->d;
            offs[j] += d * (float)(32 * off);
            __m256i isum = _mm256_setzero_si256();
            for (int s = 0; s < 8; s++) {
                __m256i p = _mm256_maddubs_epi16(codes[s], _mm256_loadu_si256((const __m256i *)(xb->q + 32 * s)));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, scv[s]));
            }
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc[j]);
        }
    }
    for (int j = 0; j < nx; j++) out[j * ostride] = hsum8(acc[j]) - offs[j];
}

/* Weight rows from r (nr of them when the type's kernel takes two at once, else one)
 * against nx <= Q8_MULTI_GROUP activation rows; returns the rows done, 0 when the type has
 * no multi-row kernel in this build (the AVX-512 rows of Q4_0, Q4_1, Q8_0 go one by one). */
static int avx2_row_multi(int type, const uint8_t *r, size_t row_bytes, int nr, const void *const *xv, int nx, int64_t n,
                          float *out, size_t ostride) {
    const q8_block *const *x = (const q8_block *const *)xv;
    const q8k_block *const *xk = (const q8k_block *const *)xv;
#define B32(kind, has_min, bytes)                                                                              \
    (nr == 2 ? (avx2_b32_multi(r, row_bytes, 2, kind, has_min, bytes, x, nx, n / 32, out, ostride), 2)         \
             : (avx2_b32_multi(r, row_bytes, 1, kind, has_min, bytes, x, nx, n / 32, out, ostride), 1))
    switch (type) {
#ifndef Q8_AVX512
    case GGML_Q4_0: return B32(4, 0, 18);
    case GGML_Q4_1: return B32(4, 1, 20);
    case GGML_Q8_0: return B32(8, 0, 34);
#endif
    case GGML_Q5_0: return B32(5, 0, 22);
    case GGML_Q5_1: return B32(5, 1, 24);
    case GGML_Q4_K: avx2_q45k_multi(r, xk, nx, n / 256, 0, out, ostride); return 1;
    case GGML_Q5_K: avx2_q45k_multi(r, xk, nx, n / 256, 1, out, ostride); return 1;
    case GGML_Q6_K: avx2_q6k_multi(r, xk, nx, n / 256, out, ostride); return 1;
    default: return 0;
    }
#undef B32
}
#endif

/* Activation rows per group: their 8-bit blocks within about 64 KB. */
static int q8_multi_group(int64_t n) {
    int64_t g = 65536 / (n + 1);
    return g < 4 ? 4 : g > Q8_MULTI_GROUP ? Q8_MULTI_GROUP : (int)g;
}

void quant_matvec_q8_multi(int type, const void *w, size_t row_bytes, int n_rows, const void *const *x, int nx,
                           int64_t n, float *y, size_t ystride) {
    const uint8_t *rows = w;
    int g = q8_multi_group(n);
    for (int j0 = 0; j0 < nx; j0 += g) {
        int gn = nx - j0 < g ? nx - j0 : g;
        for (int i = 0; i < n_rows;) {
            const uint8_t *r = rows + (size_t)i * row_bytes;
            float *out = y + (size_t)j0 * ystride + i;
#ifdef Q8_AVX2
            int done = avx2_row_multi(type, r, row_bytes, n_rows - i >= 2 ? 2 : 1, x + j0, gn, n, out, ystride);
            if (done) {
                i += done;
                continue;
            }
#endif
            for (int j = 0; j < gn; j++) quant_matvec_q8(type, r, row_bytes, 1, x[j0 + j], n, out + (size_t)j * ystride);
            i++;
        }
    }
}

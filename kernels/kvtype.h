/* K/V element types: a method's cache rows are stored as f32, f16 or bf16 (kvbench run
 * --kv-type); attention computes in f32, converting each row as it reads it.
 *
 * Conversions to 16 bits round to nearest, ties to even; NaN stays NaN (quieted), values
 * past the type's range become +-inf, f16 keeps subnormals. The scalar forms here are the
 * definition; kb_kv_put/kb_kv_get may use F16C for f16 (bit-identical, checked by
 * tests/test_kvtype.c). bf16 rows use the same integer arithmetic 8 lanes at a time (GCC
 * vector extensions), not AVX-512 BF16: its vcvtneps2bf16 flushes subnormal inputs to
 * zero, so using it would make the stored bits depend on the machine. */
#ifndef KB_KVTYPE_H
#define KB_KVTYPE_H
#include <stdint.h>
#include <string.h>

typedef enum { KB_F32 = 0, KB_F16 = 1, KB_BF16 = 2 } kb_kvtype;

/* "f32" / "f16" / "bf16" ("?" for anything else). */
const char *kb_kvtype_name(int t);
/* 0 and *out on a known name (case-insensitive), -1 otherwise. */
int kb_kvtype_parse(const char *s, int *out);
/* Bytes per stored element: 4 for f32, 2 for f16 and bf16. */
static inline int kb_kvtype_bytes(int t) { return t == KB_F32 ? 4 : 2; }

static inline uint32_t kb_f32_bits(float f) { uint32_t x; memcpy(&x, &f, sizeof x); return x; }
static inline float kb_bits_f32(uint32_t x) { float f; memcpy(&f, &x, sizeof f); return f; }

static inline uint16_t kb_f32_to_bf16(float f) {
    uint32_t x = kb_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);   /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1);   /* round to nearest even; overflow carries into inf */
    return (uint16_t)(x >> 16);
}
static inline float kb_bf16_to_f32(uint16_t h) { return kb_bits_f32((uint32_t)h << 16); }

static inline uint16_t kb_f32_to_f16(float f) {
    uint32_t x = kb_f32_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));   /* quiet NaN */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);   /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) {   /* below 2^-14: subnormal or zero; the FPU rounds at 2^-24 */
        float a = kb_bits_f32(ax) + 0.5f;
        return (uint16_t)(sign | (kb_f32_bits(a) - 0x3f000000u));
    }
    ax += 0xc8000fffu + ((ax >> 13) & 1);   /* rebias 127 -> 15 (mod 2^32), round to even */
    return (uint16_t)(sign | (ax >> 13));
}
static inline float kb_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return kb_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e) return kb_bits_f32(sign | ((e + 112) << 23) | (m << 13));
    return kb_bits_f32(sign | kb_f32_bits((float)m * 0x1p-24f));
}

/* x as the type stores it (f32: x itself). */
static inline float kb_kv_round(int t, float x) {
    if (t == KB_F16) return kb_f16_to_f32(kb_f32_to_f16(x));
    if (t == KB_BF16) return kb_bf16_to_f32(kb_f32_to_bf16(x));
    return x;
}

/* dst (n elements of type t) = src; src (n elements of type t) -> dst floats. */
void kb_kv_put(int t, void *dst, const float *src, int n);
void kb_kv_get(int t, float *dst, const void *src, int n);

/* kb_kv_get inlined, for the attention loops that convert a row per entry: F16C for f16
 * 8 at a time, the bf16 shift 8 lanes at a time (both exact, so any path gives the
 * same floats). */
#if defined(__F16C__) && !defined(__CUDACC__)
#include <immintrin.h>
#endif
static inline void kb_kv_get_inline(int t, float *dst, const void *src, int n) {
    const uint16_t *h = (const uint16_t *)src;
    int i = 0;
    if (t == KB_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
    if (t == KB_BF16) {
#if defined(__GNUC__) && !defined(__CUDACC__)
        typedef uint16_t u16x8_ __attribute__((vector_size(16)));
        typedef uint32_t u32x8_ __attribute__((vector_size(32)));
        for (; i + 8 <= n; i += 8) {
            u16x8_ v;
            memcpy(&v, h + i, sizeof v);
            u32x8_ x = __builtin_convertvector(v, u32x8_) << 16;
            memcpy(dst + i, &x, sizeof x);
        }
#endif
        for (; i < n; i++) dst[i] = kb_bf16_to_f32(h[i]);
        return;
    }
#if defined(__F16C__) && !defined(__CUDACC__)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
#endif
    for (; i < n; i++) dst[i] = kb_f16_to_f32(h[i]);
}
/* x[i] = kb_kv_round(t, x[i]) for i < n. */
void kb_kv_round_rows(int t, float *x, size_t n);
/* Element i of row base (type t) as a float. */
static inline float kb_kv_at(int t, const void *base, size_t i) {
    if (t == KB_F16) return kb_f16_to_f32(((const uint16_t *)base)[i]);
    if (t == KB_BF16) return kb_bf16_to_f32(((const uint16_t *)base)[i]);
    return ((const float *)base)[i];
}

#endif

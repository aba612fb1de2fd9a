#include "kvtype.h"
#include <strings.h>
#ifdef __F16C__
#include <immintrin.h>
#endif

static const char *const names[] = {"f32", "f16", "bf16"};

/* 8 lanes of GCC vector extensions: the bf16 conversions as the scalar forms compute them,
 * lane by lane (-march=native maps them onto AVX2/AVX-512 integer ops). */
typedef uint16_t u16x8 __attribute__((vector_size(16)));
typedef uint32_t u32x8 __attribute__((vector_size(32)));
typedef int32_t i32x8 __attribute__((vector_size(32)));

static inline void bf16_put8(uint16_t *h, const float *src) {
    u32x8 x;
    memcpy(&x, src, sizeof x);
    i32x8 nan = (x & 0x7fffffffu) > 0x7f800000u;
    u32x8 r = (x + 0x7fffu + ((x >> 16) & 1)) >> 16, q = (x >> 16) | 0x40;
    r = (r & ~(u32x8)nan) | (q & (u32x8)nan);
    u16x8 o = __builtin_convertvector(r, u16x8);
    memcpy(h, &o, sizeof o);
}

const char *kb_kvtype_name(int t) { return t >= 0 && t <= KB_BF16 ? names[t] : "?"; }

int kb_kvtype_parse(const char *s, int *out) {
    for (int t = 0; s && t <= KB_BF16; t++)
        if (!strcasecmp(s, names[t])) {
            *out = t;
            return 0;
        }
    return -1;
}

void kb_kv_put(int t, void *dst, const float *src, int n) {
    if (t == KB_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
    uint16_t *h = dst;
    int i = 0;
    if (t == KB_BF16) {
        for (; i + 8 <= n; i += 8) bf16_put8(h + i, src + i);
        for (; i < n; i++) h[i] = kb_f32_to_bf16(src[i]);
        return;
    }
#ifdef __F16C__
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; i < n; i++) h[i] = kb_f32_to_f16(src[i]);
}

void kb_kv_get(int t, float *dst, const void *src, int n) { kb_kv_get_inline(t, dst, src, n); }

void kb_kv_round_rows(int t, float *x, size_t n) {
    if (t == KB_F32) return;
    for (size_t i = 0; i < n; i++) x[i] = kb_kv_round(t, x[i]);
}

/* 8-wide float helpers for the CPU kernels (GCC vector extensions; -march=native maps
 * them onto AVX2/AVX-512, and plain SSE builds still work).
 *
 * Without -ffast-math gcc will not vectorise a float sum, so the reductions here keep
 * 8 lanes explicitly; the lane order is fixed, so results are deterministic. The exp
 * is a Cephes-style polynomial (about 1 ulp), vectorised where libm's expf is not. */
#ifndef KB_VEC_H
#define KB_VEC_H
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

static inline v8f v8_load(const float *p) { v8f v; memcpy(&v, p, sizeof v); return v; }
static inline void v8_store(float *p, v8f v) { memcpy(p, &v, sizeof v); }
static inline v8f v8_set1(float x) { return (v8f){x, x, x, x, x, x, x, x}; }
/* The first n (< 8) floats of p, the rest filled with pad. */
static inline v8f v8_load_part(const float *p, int n, float pad) {
    v8f v = v8_set1(pad);
    for (int i = 0; i < n; i++) v[i] = p[i];
    return v;
}
static inline v8f v8_select(v8i mask, v8f a, v8f b) {   /* mask ? a : b, lane-wise */
    return (v8f)(((v8i)a & mask) | ((v8i)b & ~mask));
}
static inline v8f v8_max(v8f a, v8f b) { return v8_select(a > b, a, b); }
static inline float v8_hsum(v8f v) {
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}
static inline float v8_hmax(v8f v) {
    float m = v[0];
    for (int i = 1; i < 8; i++) m = v[i] > m ? v[i] : m;
    return m;
}

/* exp(x); inputs below -87.3 give 0, above 88.3 are clamped. */
static inline v8f v8_exp(v8f x) {
    const v8f hi = v8_set1(88.3762626647949f), lo = v8_set1(-87.3365447505531f);
    v8i underflow = x < lo;
    x = v8_select(x > hi, hi, x);
    x = v8_select(underflow, lo, x);
    /* x = n ln2 + r, |r| <= ln2/2; rounding by the 1.5*2^23 trick */
    const v8f magic = v8_set1(12582912.0f);
    v8f n = (x * v8_set1(1.44269504088896341f) + magic) - magic;
    v8f r = x - n * v8_set1(0.693359375f) - n * v8_set1(-2.12194440e-4f);
    v8f p = v8_set1(1.9875691500e-4f);
    p = p * r + v8_set1(1.3981999507e-3f);
    p = p * r + v8_set1(8.3334519073e-3f);
    p = p * r + v8_set1(4.1665795894e-2f);
    p = p * r + v8_set1(1.6666665459e-1f);
    p = p * r + v8_set1(5.0000001201e-1f);
    p = p * r * r + r + v8_set1(1.0f);
    v8i e = (__builtin_convertvector(n, v8i) + 127) << 23;
    return v8_select(underflow, v8_set1(0.0f), p * (v8f)e);
}

static inline float kb_dot(const float *a, const float *b, int n) {
    v8f s0 = v8_set1(0), s1 = v8_set1(0);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 += v8_load(a + i) * v8_load(b + i);
        s1 += v8_load(a + i + 8) * v8_load(b + i + 8);
    }
    for (; i + 8 <= n; i += 8) s0 += v8_load(a + i) * v8_load(b + i);
    if (i < n) s1 += v8_load_part(a + i, n - i, 0) * v8_load_part(b + i, n - i, 0);
    return v8_hsum(s0 + s1);
}

static inline float kb_max(const float *x, int n) {
    v8f m = v8_set1(-INFINITY);
    int i = 0;
    for (; i + 8 <= n; i += 8) m = v8_max(m, v8_load(x + i));
    if (i < n) m = v8_max(m, v8_load_part(x + i, n - i, -INFINITY));
    return v8_hmax(m);
}

/* x[i] = exp(x[i] - m); returns the sum. */
static inline float kb_exp_sum(float *x, int n, float m) {
    v8f s = v8_set1(0), vm = v8_set1(m);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f e = v8_exp(v8_load(x + i) - vm);
        v8_store(x + i, e);
        s += e;
    }
    if (i < n) {
        v8f e = v8_exp(v8_load_part(x + i, n - i, -INFINITY) - vm);
        for (int k = 0; k < n - i; k++) x[i + k] = e[k];
        s += e;
    }
    return v8_hsum(s);
}

static inline void kb_scale(float *x, int n, float s) {
    for (int i = 0; i < n; i++) x[i] *= s;
}

/* y += a * x */
static inline void kb_axpy(float *restrict y, float a, const float *restrict x, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}
#endif

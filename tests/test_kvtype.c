/* 16-bit K/V storage (kernels/kvtype.h, methods/kvstore.c, the CPU decode over 16-bit rows):
 *   - f32 -> f16 and f32 -> bf16 against a float64 round-to-nearest-even reference
 *     (frexp/nearbyint, not bit tricks) on random bit patterns, exact ties, subnormals,
 *     the range limits, +-0, +-inf and NaN; the stored bits read back through an
 *     independent decoder (ldexp of sign, exponent and mantissa);
 *   - kb_kv_put / kb_kv_get (F16C when the build has it) bit-equal to the scalar forms;
 *   - decode attention over f16 and bf16 rows (with indices, biases, probabilities,
 *     several blocks) against a float64 attention over the values the rows hold,
 *     into poisoned outputs;
 *   - a 16-bit kv_store: push rounds each element, keep and remove move rows bit for bit,
 *     kvs_bytes counts 2 bytes an element (4 for f32), and kvs_decode reads the rows in
 *     place (no f32 copy: same output as decoding the raw 16-bit arrays). */
#include "../kernels/core.h"
#include "../kernels/cpu.h"
#include "../kernels/kvtype.h"
#include "../methods/kvstore.h"
#include "check.h"
#include "ref_decode.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* x rounded to nearest even to the type's precision and range, in double. */
static double ref_round(float xf, int type) {
    double x = xf;
    if (isnan(x) || isinf(x) || x == 0) return x;
    int bits = type == KB_F16 ? 11 : 8, emin = type == KB_F16 ? -14 : -126;   /* significand, min normal exp */
    double maxv = type == KB_F16 ? 65504.0 : ldexp(2.0 - ldexp(1.0, -7), 127);
    int e;
    frexp(fabs(x), &e);
    int lead = e - 1 < emin ? emin : e - 1;
    double ulp = ldexp(1.0, lead - (bits - 1));
    double r = nearbyint(x / ulp) * ulp;   /* the default rounding mode: nearest, ties to even */
    return fabs(r) > maxv ? copysign(INFINITY, x) : r;
}

/* The value of stored bits h, from the format's definition. */
static double ref_value(uint16_t h, int type) {
    int ebits = type == KB_F16 ? 5 : 8, mbits = type == KB_F16 ? 10 : 7, bias = type == KB_F16 ? 15 : 127;
    int sign = h >> 15, e = (h >> mbits) & ((1 << ebits) - 1), m = h & ((1 << mbits) - 1);
    double v;
    if (e == (1 << ebits) - 1) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp(m, 1 - bias - mbits);
    else v = ldexp(m + (1 << mbits), e - bias - mbits);
    return sign ? -v : v;
}

static uint16_t to16(int type, float x) { return type == KB_F16 ? kb_f32_to_f16(x) : kb_f32_to_bf16(x); }
static float from16(int type, uint16_t h) { return type == KB_F16 ? kb_f16_to_f32(h) : kb_bf16_to_f32(h); }

static int same(double a, double b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return a == b && signbit(a) == signbit(b);
}

static int bad_conv;
static void check_one(int type, float x) {
    uint16_t h = to16(type, x);
    double want = ref_round(x, type), got = ref_value(h, type);
    if (!same(got, want) && bad_conv++ < 5)
        CHECK(0, "%s: %.9g (0x%08x) stored as 0x%04x = %.9g, expected %.9g", kb_kvtype_name(type), x, kb_f32_bits(x), h,
              got, want);
    if (!same(from16(type, h), got) && bad_conv++ < 5)
        CHECK(0, "%s: 0x%04x read back as %.9g, expected %.9g", kb_kvtype_name(type), h, from16(type, h), got);
    if (!isnan(x) && !same(kb_kv_round(type, x), want) && bad_conv++ < 5)
        CHECK(0, "%s: kb_kv_round(%.9g) = %.9g, expected %.9g", kb_kvtype_name(type), x, kb_kv_round(type, x), want);
}

static void test_conversions(int type) {
    bad_conv = 0;
    int n = 0;
    for (int i = 0; i < 400000; i++, n++) {   /* random bit patterns, every exponent */
        uint32_t b = (uint32_t)test_next();
        check_one(type, kb_bits_f32(b));
    }
    /* around the type's own values: exact ties (halfway), just above and below them */
    for (int i = 0; i < 200000; i++, n++) {
        uint16_t h = (uint16_t)test_next();
        double v = ref_value(h, type), next = ref_value((uint16_t)(h + 1), type);
        if (isnan(v) || isinf(v) || isnan(next) || isinf(next) || (h & 0x7fff) == 0x7fff) continue;
        float mid = (float)((v + next) / 2);   /* exact in f32 for both types */
        check_one(type, mid);
        check_one(type, nextafterf(mid, INFINITY));
        check_one(type, nextafterf(mid, -INFINITY));
    }
    const float edge[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 65504.0f, 65519.99f, 65520.0f, -65520.0f,
                          0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f, 0x1p-14f, 0x1.ff8p-15f, 0x1p-126f, 0x1p-149f,
                          -0x1p-149f, 3.4028235e38f, 3.39e38f, 1.0f, 1.00390625f, 1.01171875f, -2.5f};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++, n++) check_one(type, edge[i]);
    CHECK(bad_conv == 0, "%s: %d conversions wrong", kb_kvtype_name(type), bad_conv);
    printf("%-4s rounding: %d values against the float64 round-to-nearest-even reference\n", kb_kvtype_name(type), n);
}

/* kb_kv_put / kb_kv_get (vector paths, odd lengths) equal the scalar forms bit for bit. */
static void test_rows(int type) {
    int n = 1 + test_int(0, 300);
    float *x = malloc(sizeof(float) * n), *back = malloc(sizeof(float) * n);
    uint16_t *h = malloc(sizeof(uint16_t) * n);
    for (int i = 0; i < n; i++) x[i] = test_int(0, 9) ? test_normal() * (float)ldexp(1.0, test_int(-30, 20))
                                                      : kb_bits_f32((uint32_t)test_next());
    kb_kv_put(type, h, x, n);
    kb_kv_get(type, back, h, n);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        bad += h[i] != to16(type, x[i]);
        bad += !same(back[i], from16(type, h[i]));
    }
    CHECK(bad == 0, "%s: %d of %d row elements differ from the scalar conversion", kb_kvtype_name(type), bad, n);
    free(x), free(back), free(h);
}

/* Float64 attention over the values stored rows hold. */
static double stored_elem(const kb_decode_args *a, const void *base, size_t i) {
    return ref_value(((const uint16_t *)base)[i], a->kv_type);
}
static void ref_decode(const kb_decode_args *a, double *out, double *probs) { ref_decode_elems(a, stored_elem, out, probs); }

static void test_decode(int type, int g, int d, int n, int use_idx) {
    int rows = use_idx ? n / 2 + 1 : n;
    float *q = malloc(sizeof(float) * g * d), *Kf = malloc(sizeof(float) * rows * d), *Vf = malloc(sizeof(float) * rows * d);
    float *bias = malloc(sizeof(float) * n), *out = malloc(sizeof(float) * g * d), *probs = malloc(sizeof(float) * g * n);
    uint16_t *K = malloc(sizeof(uint16_t) * rows * d), *V = malloc(sizeof(uint16_t) * rows * d);
    int32_t *idx = malloc(sizeof(int32_t) * n);
    test_fill(q, (size_t)g * d, 1.0f), test_fill(Kf, (size_t)rows * d, 1.0f), test_fill(Vf, (size_t)rows * d, 1.0f);
    kb_kv_put(type, K, Kf, rows * d), kb_kv_put(type, V, Vf, rows * d);
    for (int i = 0; i < n; i++) {
        bias[i] = test_unif() < 0.5 ? 0.0f : logf((float)test_int(1, 64));
        idx[i] = test_int(0, rows - 1);
    }
    test_poison(out, (size_t)g * d), test_poison(probs, (size_t)g * n);
    kb_decode_args a = {.g = g, .d = d, .n = n, .q = q, .K = K, .V = V, .idx = use_idx ? idx : NULL, .bias = bias,
                        .out = out, .probs = probs, .kv_type = type};
    kb_cpu()->decode(&a);
    double *rout = calloc((size_t)g * d, sizeof(double)), *rprobs = calloc((size_t)g * n, sizeof(double));
    ref_decode(&a, rout, rprobs);
    /* out: each element within the f32 summation bound gamma_n = n u (plus a few roundings
     * for the probabilities' own error) of sum_i p_i |v_ic|, whatever order the kernel adds
     * in; a wrong row or scale errs by about that sum itself. probs: each is a softmax of d-term
     * dot products, so a small relative L2 error whatever n is. */
    double u = ldexp(1.0, -24), worst = 0;
    for (int hh = 0; hh < g; hh++)
        for (int c = 0; c < d; c++) {
            double S = 0;
            for (int i = 0; i < n; i++) {
                size_t r = (size_t)(use_idx ? idx[i] : i) * d;
                S += rprobs[(size_t)hh * n + i] * fabs(ref_value(((const uint16_t *)V)[r + c], type));
            }
            double e = fabs(out[hh * d + c] - rout[hh * d + c]) / ((n + 16) * u * S);
            if (!(e <= worst)) worst = e;   /* NaN (poison left) counts as the worst */
        }
    double eo = rel_l2(out, rout, (size_t)g * d), ep = rel_l2(probs, rprobs, (size_t)g * n);
    CHECK(worst <= 1 && ep < 2e-6, "%s decode g=%d d=%d n=%d idx=%d: out error %.3g of its bound (rel L2 %.3g), probs rel %.3g",
          kb_kvtype_name(type), g, d, n, use_idx, worst, eo, ep);
    free(q), free(Kf), free(Vf), free(bias), free(out), free(probs), free(K), free(V), free(idx), free(rout), free(rprobs);
}

/* A 16-bit store: rounding on push, rows moved bit for bit, bytes, decode in place. */
static void test_store(int type) {
    int d = 24, n = 40;
    kv_store s, f;
    CHECK(kvs_init(&s, d, 3, type) == 0 && kvs_init(&f, d, 3, KB_F32) == 0, "kvs_init");
    float *k = malloc(sizeof(float) * d), *v = malloc(sizeof(float) * d), *got = malloc(sizeof(float) * d);
    float *Kr = malloc(sizeof(float) * n * d), *Vr = malloc(sizeof(float) * n * d);
    int32_t pos[64];
    for (int t = 0; t < n; t++) {
        test_fill(k, d, 3.0f), test_fill(v, d, 3.0f);
        for (int c = 0; c < d; c++) Kr[t * d + c] = (float)ref_round(k[c], type), Vr[t * d + c] = (float)ref_round(v[c], type);
        kvs_push(&s, k, v, 100 + t), kvs_push(&f, k, v, 100 + t);
        pos[t] = 100 + t;
    }
    int keep[40], nk = 0;
    for (int t = 0; t < n; t++)
        if (test_unif() < 0.6) keep[nk++] = t;
    kvs_keep(&s, keep, nk), kvs_keep(&f, keep, nk);
    int rm = test_int(0, nk - 1);
    kvs_remove(&s, rm), kvs_remove(&f, rm);
    for (int i = rm; i < nk - 1; i++) keep[i] = keep[i + 1];
    nk--;
    int bad = 0;
    for (int i = 0; i < nk; i++) {
        int t = keep[i];
        bad += s.pos[i] != pos[t];
        kvs_get_k(&s, i, got);
        for (int c = 0; c < d; c++) bad += !same(got[c], Kr[t * d + c]);
        kvs_get_v(&s, i, got);
        for (int c = 0; c < d; c++) bad += !same(got[c], Vr[t * d + c]);
    }
    CHECK(s.n == nk && bad == 0, "%s store: %d rows (want %d), %d wrong elements or positions", kb_kvtype_name(type),
          s.n, nk, bad);
    CHECK(kvs_bytes(&s) == (size_t)nk * d * 2 * 2 && kvs_bytes(&f) == (size_t)nk * d * 2 * 4,
          "%s store: %zu bytes, f32 %zu, for %d rows of %d", kb_kvtype_name(type), kvs_bytes(&s), kvs_bytes(&f), nk, d);
    /* kvs_decode over the store equals the kernel over its own 16-bit arrays (no copy) */
    float q[2 * 24], o1[2 * 24], o2[2 * 24];
    test_fill(q, 2 * d, 1.0f), test_poison(o1, 2 * d), test_poison(o2, 2 * d);
    kb_decode_args a = {.g = 2, .d = d, .n = s.n, .q = q, .out = o1};
    kvs_decode(&s, &a);
    CHECK(a.K == s.K && a.V == s.V && a.kv_type == type, "%s store: decode did not read the store's own rows",
          kb_kvtype_name(type));
    kb_decode_args b = {.g = 2, .d = d, .n = s.n, .q = q, .K = s.K, .V = s.V, .out = o2, .kv_type = type};
    kb_cpu()->decode(&b);
    CHECK(!memcmp(o1, o2, sizeof o1), "%s store: kvs_decode differs from the kernel on its rows", kb_kvtype_name(type));
    kvs_free(&s), kvs_free(&f);
    free(k), free(v), free(got), free(Kr), free(Vr);
}

int main(void) {
    test_seed();
    int t;
    CHECK(kb_kvtype_parse("bf16", &t) == 0 && t == KB_BF16 && kb_kvtype_parse("F16", &t) == 0 && t == KB_F16 &&
              kb_kvtype_parse("f32", &t) == 0 && t == KB_F32 && kb_kvtype_parse("fp16", &t) == -1 &&
              kb_kvtype_parse("", &t) == -1,
          "kb_kvtype_parse");
    CHECK(kb_kvtype_bytes(KB_F32) == 4 && kb_kvtype_bytes(KB_F16) == 2 && kb_kvtype_bytes(KB_BF16) == 2, "bytes");
    for (int type = KB_F16; type <= KB_BF16; type++) {
        test_conversions(type);
        for (int i = 0; i < 50; i++) test_rows(type);
        const int shapes[][3] = {{1, 64, 1}, {3, 64, 100}, {2, 72, 700}, {1, 8, 5000}, {4, 128, 2600}};
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int use_idx = 0; use_idx < 2; use_idx++) test_decode(type, shapes[i][0], shapes[i][1], shapes[i][2], use_idx);
        for (int i = 0; i < 10; i++) test_store(type);
        printf("%-4s rows, decode (against float64 over the stored values) and store checked\n", kb_kvtype_name(type));
    }
    return check_done("test_kvtype");
}

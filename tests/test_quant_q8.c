/* Quantized-activation mat-vec (model/quant_q8.c) against float64 references built here
 * from the block layouts (model-format.md section 2), on fresh random inputs.
 *
 * Tolerances, derived rather than tuned:
 *  - Quantizer: q = round(x * 127 / amax) gives |x - d q| <= d/2 with d = amax / 127; the
 *    float rounding of 127/amax, of x * (127/amax) and of d adds at most a few units of
 *    2^-24 relative to 127, so we allow d * (1/2 + 2^-16).
 *  - Dot vs the same dot in double over the dequantized activations xq = d q: the
 *    integer block sums are exact, so the only error is f32 rounding of the per-lane
 *    products (2 roundings: d_w d_x, then times the int sum) and of summing at most
 *    8 nb + 2 nb terms (8 lanes per block, plus the min/offset terms):
 *    |err| <= (10 nb + 4) u M with u = 2^-24 and M = sum_i (|d_w qw_i| + |m_w|) |xq_i|,
 *    a bound on the sum of the magnitudes of all terms; we allow (10 nb + 4) * 2u * M.
 *  - Dot vs the double dot with the original x: the above plus the activation rounding,
 *    sum_i |w_i| |x_i - xq_i| <= sum_b (d_b (1/2 + 2^-16)) sum_{i in b} |w_i|.
 *  - Portable and SIMD paths: each within the rounding bound of the exact xq dot, so
 *    within twice it of each other. */
#include "check.h"
#include "../model/quant.h"
#include "../model/quant_q8.h"
#include <float.h>

static double f16d(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return f16_to_f32(h);
}

/* Block b of a row: dequantized weights in double, plus the terms the bound needs:
 * scale d (per code), offset m, and the integer codes as the kernel multiplies them. */
static void ref_block(int type, const uint8_t *r, double *w, double *d, double *m, int *code) {
    if (type == GGML_Q8_0) {
        *d = f16d(r), *m = 0;
        for (int j = 0; j < 32; j++) code[j] = (int8_t)r[2 + j], w[j] = *d * code[j];
        return;
    }
    int has_min = type == GGML_Q4_1;
    *d = f16d(r);
    *m = has_min ? f16d(r + 2) : -8.0 * *d;
    const uint8_t *qs = r + (has_min ? 4 : 2);
    for (int j = 0; j < 16; j++) {
        code[j] = qs[j] & 15, code[j + 16] = qs[j] >> 4;
        w[j] = *d * code[j] + *m, w[j + 16] = *d * code[j + 16] + *m;
    }
}

static void put_f16(uint8_t *p, float v) {
    uint16_t h = f32_to_f16(v);
    memcpy(p, &h, 2);
}

/* A random row: random code bytes, f16 scales and mins across orders of magnitude. */
static void random_row(int type, uint8_t *r, int64_t n) {
    int block, bytes;
    quant_info(type, &block, &bytes);
    for (int64_t b = 0; b < n / 32; b++, r += bytes) {
        for (int i = 0; i < bytes; i++) r[i] = (uint8_t)test_next();
        put_f16(r, (float)(ldexp(test_unif() + 0.5, test_int(-12, 0)) * (test_unif() < 0.5 ? -1 : 1)));
        if (type == GGML_Q4_1) put_f16(r + 2, (float)(ldexp(test_unif() - 0.5, test_int(-10, 0))));
    }
}

/* Activations: normal, with a per-block scale across orders of magnitude and a few
 * outliers (the case that makes a block's d large for its other elements). */
static void random_x(float *x, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++) {
        float s = (float)ldexp(1.0, test_int(-8, 6));
        for (int j = 0; j < 32; j++) x[32 * b + j] = s * test_normal();
        if (test_unif() < 0.3) x[32 * b + test_int(0, 31)] *= 20;
    }
}

static void check_quantizer(void) {
    enum { N = 32 * 64 };
    static float x[N];
    static q8_block q[N / 32];
    random_x(x, N);
    for (int b = 0; b < 3; b++) x[32 * 7 + b] = 0;   /* one block with zeros mixed in */
    quant_q8_row(x, q, N);
    double worst = 0;
    int bad_range = 0, no_full = 0, bad_sum = 0;
    for (int b = 0; b < N / 32; b++) {
        int sum = 0, full = 0;
        for (int j = 0; j < 32; j++) {
            double e = fabs((double)x[32 * b + j] - (double)q[b].d * q[b].q[j]) / q[b].d;
            if (e > worst) worst = e;
            bad_range += q[b].q[j] < -127;
            full |= q[b].q[j] == 127 || q[b].q[j] == -127;
            sum += q[b].q[j];
        }
        no_full += !full;   /* the largest |x| of the block maps to +-127 */
        bad_sum += fabs(q[b].s - (double)q[b].d * sum) > 2 * FLT_EPSILON * fabs((double)q[b].d * sum);
    }
    CHECK(worst <= 0.5 + 0x1p-16, "quantizer error %.6g of d (bound 1/2)", worst);
    CHECK(!bad_range && !no_full && !bad_sum, "quantizer: %d codes below -127, %d blocks without +-127, %d bad sums",
          bad_range, no_full, bad_sum);

    float z[64] = {0};
    z[40] = 1e-41f;   /* subnormal: still coded as 127, d within its subnormal spacing */
    quant_q8_row(z, q, 64);
    CHECK(q[0].d == 0 && q[0].s == 0 && q[0].q[5] == 0, "all-zero block: d %g s %g", q[0].d, q[0].s);
    CHECK(q[1].q[8] == 127 && fabs(q[1].d * 127.0 - 1e-41) <= 127 * 0x1p-149, "subnormal block: q %d d %g", q[1].q[8], q[1].d);
    z[3] = NAN;
    z[50] = INFINITY;
    quant_q8_row(z, q, 64);
    CHECK(isnan(q[0].d) && isnan(q[1].d), "a NaN / inf block must carry NaN scales (%g, %g)", q[0].d, q[1].d);
}

/* One type and length: several rows (with a padded stride), both paths, three refs. */
static void check_type(int type, int64_t n, int rows) {
    int block, bytes;
    quant_info(type, &block, &bytes);
    size_t rb = quant_row_bytes(type, n), stride = rb + 2 * (size_t)bytes;   /* padding between rows */
    int64_t nb = n / 32;
    uint8_t *w = malloc(stride * rows);
    float *x = malloc(n * sizeof *x), *y = malloc(rows * sizeof *y), *yg = malloc(rows * sizeof *yg);
    q8_block *xq = malloc(nb * sizeof *xq);
    for (int r = 0; r < rows; r++) random_row(type, w + r * stride, n);
    random_x(x, n);
    quant_q8_row(x, xq, n);
    test_poison(y, rows), test_poison(yg, rows);
    quant_matvec_q8(type, w, stride, rows, xq, n, y);
    quant_matvec_q8_generic(type, w, stride, rows, xq, n, yg);
    double worst_q = 0, worst_x = 0, worst_pair = 0, act_share = 0;
    int nonfinite = 0;
    for (int r = 0; r < rows; r++) {
        double ref_q = 0, ref_x = 0, M = 0, Q = 0, wv[32], d, m;
        int code[32];
        const uint8_t *row = w + r * stride;
        for (int64_t b = 0; b < nb; b++) {
            ref_block(type, row + b * bytes, wv, &d, &m, code);
            double dx = xq[b].d, wabs = 0;
            for (int j = 0; j < 32; j++) {
                double xqj = dx * xq[b].q[j];
                ref_q += wv[j] * xqj;
                ref_x += wv[j] * (double)x[32 * b + j];
                M += (fabs(d * code[j]) + fabs(m)) * fabs(xqj);
                wabs += fabs(wv[j]);
            }
            Q += dx * (0.5 + 0x1p-16) * wabs;
        }
        double R = (10.0 * nb + 4) * FLT_EPSILON * M;
        nonfinite += !isfinite(y[r]) || !isfinite(yg[r]);
        double eq = fmax(fabs(y[r] - ref_q), fabs(yg[r] - ref_q)) / R;
        double ex = fmax(fabs(y[r] - ref_x), fabs(yg[r] - ref_x)) / (Q + R);
        double ep = fabs((double)y[r] - yg[r]) / (2 * R);
        worst_q = eq > worst_q ? eq : worst_q;
        worst_x = ex > worst_x ? ex : worst_x;
        worst_pair = ep > worst_pair ? ep : worst_pair;
        act_share += fabs(ref_x - ref_q) / Q / rows;
    }
    CHECK(!nonfinite, "%s n=%lld: %d non-finite outputs", quant_name(type), (long long)n, nonfinite);
    CHECK(worst_q <= 1, "%s n=%lld: dot vs double over xq: %.3g of the rounding bound", quant_name(type),
          (long long)n, worst_q);
    CHECK(worst_x <= 1, "%s n=%lld: dot vs double over x: %.3g of the bound", quant_name(type), (long long)n,
          worst_x);
    CHECK(worst_pair <= 1, "%s n=%lld: SIMD vs portable: %.3g of the bound", quant_name(type), (long long)n,
          worst_pair);
    printf("%-5s n=%5lld rows %3d: worst |err| / bound: vs xq %.2g, vs x %.2g, SIMD vs portable %.2g "
           "(activation error averages %.2g of its bound)\n",
           quant_name(type), (long long)n, rows, worst_q, worst_x, worst_pair, act_share);
    free(w), free(x), free(y), free(yg), free(xq);
}

/* Non-finite activations propagate; an unsupported type reads as NaN. */
static void check_poison_paths(void) {
    uint8_t w[20 * 2];
    float x[64], y[1];
    q8_block xq[2];
    random_row(GGML_Q4_1, w, 64);
    random_x(x, 64);
    x[40] = NAN;
    quant_q8_row(x, xq, 64);
    quant_matvec_q8(GGML_Q4_1, w, 40, 1, xq, 64, y);
    CHECK(isnan(y[0]), "a NaN activation must give NaN, got %g", y[0]);
    quant_matvec_q8_generic(GGML_Q4_1, w, 40, 1, xq, 64, y);
    CHECK(isnan(y[0]), "portable: a NaN activation must give NaN, got %g", y[0]);
    y[0] = 0;
    quant_matvec_q8(GGML_Q6_K, w, 40, 1, xq, 64, y);
    CHECK(isnan(y[0]), "an unsupported type must give NaN, got %g", y[0]);
    CHECK(quant_q8_supported(GGML_Q4_1) && quant_q8_supported(GGML_Q8_0) && quant_q8_supported(GGML_Q4_0) &&
              !quant_q8_supported(GGML_F32) && !quant_q8_supported(GGML_Q6_K),
          "supported types");
}

int main(void) {
    test_seed();
    check_quantizer();
    const int types[] = {GGML_Q4_0, GGML_Q4_1, GGML_Q8_0};
    const int64_t lens[] = {32, 96, 576, 1536};
    for (int t = 0; t < 3; t++)
        for (int l = 0; l < 4; l++) check_type(types[t], lens[l], 37);
    check_poison_paths();
    return check_done("test_quant_q8");
}

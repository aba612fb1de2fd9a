/* Quantized-activation mat-vec (model/quant_q8.c) against float64 references built here
 * from the block layouts (model-format.md section 2), on fresh random inputs, for every
 * weight type with an int8 path: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 on activation blocks of 32,
 * Q4_K, Q5_K, Q6_K on activation blocks of 256.
 *
 * Each weight element is w = s * c + o: an integer code c the kernel multiplies, its
 * scale s (d, or d * sc for a K-quant sub-block) and an offset o the kernel adds through
 * the activation sums (m, -8d, -16d, -dmin * mn, or -32 d sc for Q6_K, whose kernels may
 * work on the unsigned codes).
 *
 * Tolerances, derived rather than tuned:
 *  - Quantizer: q = round(x * 127 / amax) gives |x - d q| <= d/2 with d = amax / 127; the
 *    float rounding of 127/amax, of x * (127/amax) and of d adds at most a few units of
 *    2^-24 relative to 127, so we allow d * (1/2 + 2^-16).
 *  - Dot vs the same dot in double over the dequantized activations xq = d q: the
 *    integer block sums are exact, so the only error is f32 rounding: of d_w d_x, of the
 *    int -> float conversion of a block's or a lane's sum, of their product, and of
 *    summing at most 8 terms per 32 elements plus the offset terms:
 *    |err| <= (10 nb + 4) u M with u = 2^-24, nb = n / 32 and
 *    M = sum_i (|s_i c_i| + |o_i|) |xq_i|, a bound on the sum of the magnitudes of all
 *    terms; we allow (10 nb + 4) * 2u * M (a K-quant super-block counts as 8 blocks,
 *    which over-counts its roundings).
 *  - Dot vs the double dot with the original x: the above plus the activation rounding,
 *    sum_i |w_i| |x_i - xq_i| <= sum_b (d_b (1/2 + 2^-16)) sum_{i in b} |w_i|.
 *  - Portable and SIMD paths: each within the rounding bound of the exact xq dot, so
 *    within twice it of each other. */
#include "check.h"
#include "../model/quant.h"
#include "../model/quant_q8.h"
#include "quant_ref.h"
#include <float.h>

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

/* The 256-blocks: the same bound per element, the largest |x| at +-127, exact bsums. */
static void check_quantizer_k(void) {
    enum { N = 256 * 8 };
    static float x[N];
    static q8k_block q[N / 256];
    random_x(x, N);
    for (int b = 0; b < 5; b++) x[256 * 3 + 40 + b] = 0;
    quant_q8k_row(x, q, N);
    double worst = 0;
    int bad_range = 0, no_full = 0, bad_sum = 0;
    for (int b = 0; b < N / 256; b++) {
        int full = 0;
        for (int k = 0; k < 16; k++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) {
                int c = q[b].q[16 * k + j];
                double e = fabs((double)x[256 * b + 16 * k + j] - (double)q[b].d * c) / q[b].d;
                if (e > worst) worst = e;
                bad_range += c < -127;
                full |= c == 127 || c == -127;
                sum += c;
            }
            bad_sum += q[b].bsums[k] != sum;
        }
        no_full += !full;
    }
    CHECK(worst <= 0.5 + 0x1p-16, "q8_K quantizer error %.6g of d (bound 1/2)", worst);
    CHECK(!bad_range && !no_full && !bad_sum, "q8_K quantizer: %d codes below -127, %d blocks without +-127, %d bad sums",
          bad_range, no_full, bad_sum);
    x[256 * 5 + 7] = NAN;
    x[256 * 6 + 9] = -INFINITY;
    quant_q8k_row(x, q, N);
    CHECK(isnan(q[5].d) && isnan(q[6].d) && !isnan(q[4].d), "q8_K: a NaN / inf block must carry a NaN scale");
}


/* One type and length: several rows (with a padded stride), both paths, three refs. */
static void check_type(int type, int64_t n, int rows) {
    int block, bytes, ab = quant_q8_act_block(type);
    quant_info(type, &block, &bytes);
    size_t rb = quant_row_bytes(type, n), stride = rb + 2 * (size_t)bytes;   /* padding between rows */
    int64_t nb = n / 32;
    uint8_t *w = malloc(stride * rows);
    float *x = malloc(n * sizeof *x), *y = malloc(rows * sizeof *y), *yg = malloc(rows * sizeof *yg);
    void *xq = malloc(quant_q8_act_bytes(n));
    for (int r = 0; r < rows; r++) random_row(type, w + r * stride, n);
    random_x(x, n);
    CHECK(quant_q8_act(type, x, n, xq) == xq, "%s: quant_q8_act should quantize", quant_name(type));
    test_poison(y, rows), test_poison(yg, rows);
    quant_matvec_q8(type, w, stride, rows, xq, n, y);
    quant_matvec_q8_generic(type, w, stride, rows, xq, n, yg);
    double worst_q = 0, worst_x = 0, worst_pair = 0, act_share = 0;
    int nonfinite = 0;
    double *wv = malloc(block * sizeof *wv), *sv = malloc(block * sizeof *sv), *ov = malloc(block * sizeof *ov);
    int *code = malloc(block * sizeof *code);
    for (int r = 0; r < rows; r++) {
        double ref_q = 0, ref_x = 0, M = 0, Q = 0;
        const uint8_t *row = w + r * stride;
        for (int64_t b = 0; b < n / block; b++) {
            ref_block(type, row + b * bytes, wv, sv, ov, code);
            for (int a = 0; a < block / ab; a++) {   /* the activation blocks under this weight block */
                double dx = 0, wabs = 0;
                for (int j = a * ab; j < (a + 1) * ab; j++) {
                    double xqj = act_at(xq, ab, b * block + j, &dx);
                    xqj *= dx;
                    ref_q += wv[j] * xqj;
                    ref_x += wv[j] * (double)x[b * block + j];
                    M += (fabs(sv[j] * code[j]) + fabs(ov[j])) * fabs(xqj);
                    wabs += fabs(wv[j]);
                }
                Q += dx * (0.5 + 0x1p-16) * wabs;
            }
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
    free(w), free(x), free(y), free(yg), free(xq), free(wv), free(sv), free(ov), free(code);
}

/* Non-finite activations propagate; a type without an int8 path reads as NaN. */
static void check_poison_paths(void) {
    const int types[] = {GGML_Q4_1, GGML_Q5_0, GGML_Q4_K, GGML_Q6_K};
    for (int t = 0; t < 4; t++) {
        uint8_t w[210 * 2];
        float x[512], y[1];
        void *xq = malloc(quant_q8_act_bytes(512));
        int block;
        quant_info(types[t], &block, NULL);
        int64_t n = 2 * (int64_t)block;
        size_t rb = quant_row_bytes(types[t], n);
        random_row(types[t], w, n);
        random_x(x, n);
        x[block + 7] = NAN;
        quant_q8_act(types[t], x, n, xq);
        quant_matvec_q8(types[t], w, rb, 1, xq, n, y);
        CHECK(isnan(y[0]), "%s: a NaN activation must give NaN, got %g", quant_name(types[t]), y[0]);
        quant_matvec_q8_generic(types[t], w, rb, 1, xq, n, y);
        CHECK(isnan(y[0]), "%s portable: a NaN activation must give NaN, got %g", quant_name(types[t]), y[0]);
        free(xq);
    }
    uint8_t w[64];
    float y[1] = {0};
    q8_block xq[2];
    memset(xq, 0, sizeof xq);
    quant_matvec_q8(GGML_F16, w, 64, 1, xq, 32, y);
    CHECK(isnan(y[0]), "a type without an int8 path must give NaN, got %g", y[0]);
    float x[32] = {1};
    CHECK(quant_q8_act(GGML_F32, x, 32, xq) == NULL && quant_q8_act(GGML_BF16, x, 32, xq) == NULL,
          "quant_q8_act of a type without an int8 path should be NULL");
    const int with[] = {GGML_Q4_0, GGML_Q4_1, GGML_Q5_0, GGML_Q5_1, GGML_Q8_0, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K};
    int bad = 0;
    for (int t = 0; t < 8; t++) bad += !quant_q8_supported(with[t]) || quant_q8_act_block(with[t]) != (t < 5 ? 32 : 256);
    CHECK(!bad && !quant_q8_supported(GGML_F32) && !quant_q8_supported(GGML_F16) && !quant_q8_supported(GGML_BF16) &&
              quant_q8_act_block(GGML_F32) == 0,
          "supported types and their activation blocks");
}

int main(void) {
    test_seed();
    check_quantizer();
    check_quantizer_k();
    const int types[] = {GGML_Q4_0, GGML_Q4_1, GGML_Q5_0, GGML_Q5_1, GGML_Q8_0};
    const int64_t lens[] = {32, 96, 576, 1536};
    for (int t = 0; t < 5; t++)
        for (int l = 0; l < 4; l++) check_type(types[t], lens[l], 37);
    const int ktypes[] = {GGML_Q4_K, GGML_Q5_K, GGML_Q6_K};
    const int64_t klens[] = {256, 768, 1536, 4864};   /* 4864: Qwen2.5-0.5B's ffn_down */
    for (int t = 0; t < 3; t++)
        for (int l = 0; l < 4; l++) check_type(ktypes[t], klens[l], 23);
    check_poison_paths();
    return check_done("test_quant_q8");
}

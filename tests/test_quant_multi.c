/* The multi-row mat-vec kernels of batched decode (quant_dot_multi in model/quant.c,
 * quant_matvec_q8_multi in model/quant_q8.c) on fresh random blocks of every weight type:
 *  - bit for bit against the single-row kernels (quant_dot, quant_matvec_q8) on each
 *    activation row: batched decode relies on it for results equal to one-at-a-time;
 *  - against float64 dot products of the same blocks, built here from the layouts
 *    (quant_ref.h), so a wrong value that both paths share is caught too.
 * Batches of 1, 3, 16, 17 and 33 rows (one group, a group and a remainder, several groups),
 * rows a padded stride apart, outputs poisoned with NaN and written with a stride.
 *
 * Tolerances: f32 activations: each row's value sums n products in f32 through lanes and
 * per-block partial sums; each product of a code, an activation and a scale is rounded at
 * most 3 times (scale product, multiply, add) and every term goes through at most
 * n / 8 + 12 additions, so |err| <= (n / 8 + 16) u M with u = 2^-24 and
 * M = sum_i (|s_i c_i| + |o_i|) |x_i|; we allow twice that. int8 activations: the bound of
 * test_quant_q8.c, (10 n / 32 + 4) 2u M over the dequantized activations. */
#include "check.h"
#include "quant_ref.h"
#include <float.h>

/* float64 dot of row (type, n elements) with x (f32) or with xq (the 8-bit blocks, as
 * d * q); *mag gets M, the sum of the magnitudes of the terms. */
static double ref_dot(int type, const uint8_t *row, const float *x, const void *xq, int64_t n, double *mag) {
    int block, bytes, ab = quant_q8_act_block(type);
    quant_info(type, &block, &bytes);
    double w[256], s[256], o[256], sum = 0, M = 0;
    int code[256];
    for (int64_t b = 0; b < n / block; b++) {
        ref_block(type, row + b * bytes, w, s, o, code);
        for (int j = 0; j < block; j++) {
            double xv = x[b * block + j];
            if (xq) {
                double d;
                xv = act_at(xq, ab, b * block + j, &d) * d;
            }
            sum += w[j] * xv;
            M += (fabs(s[j] * code[j]) + fabs(o[j])) * fabs(xv);
        }
    }
    *mag = M;
    return sum;
}

static int same_bits(float a, float b) { return !memcmp(&a, &b, sizeof a); }

/* One type, length and batch: nx activation rows against rows weight rows, both modes. */
static void check_multi(int type, int64_t n, int rows, int nx) {
    int block, bytes;
    quant_info(type, &block, &bytes);
    size_t stride = quant_row_bytes(type, n) + (size_t)bytes;   /* a block of padding between rows */
    size_t ys = (size_t)rows + 3;                               /* output stride with a gap */
    uint8_t *w = malloc(stride * rows);
    float *x = malloc(sizeof(float) * n * nx), *y = malloc(sizeof(float) * ys * nx), one;
    char *xqb = malloc(quant_q8_act_bytes(n) * nx);
    const float **xp = malloc(sizeof *xp * nx);
    const void **xqp = malloc(sizeof *xqp * nx);
    for (int r = 0; r < rows; r++) random_row(type, w + r * stride, n);
    for (int j = 0; j < nx; j++) {
        random_x(x + n * j, n);
        xp[j] = x + n * j;
        xqp[j] = quant_q8_act(type, xp[j], n, xqb + quant_q8_act_bytes(n) * j);
    }
    for (int mode = 0; mode < 2; mode++) {   /* 0: f32 activations, 1: int8 */
        test_poison(y, ys * nx);
        if (mode) quant_matvec_q8_multi(type, w, stride, rows, xqp, nx, n, y, ys);
        else quant_dot_multi(type, w, stride, rows, xp, nx, n, y, ys);
        int differ = 0, gap_written = 0;
        double worst = 0;
        for (int j = 0; j < nx; j++) {
            for (int r = 0; r < rows; r++) {
                const uint8_t *row = w + r * stride;
                if (mode) quant_matvec_q8(type, row, stride, 1, xqp[j], n, &one);
                else one = quant_dot(type, row, xp[j], n);
                differ += !same_bits(y[j * ys + r], one);
                double M, ref = ref_dot(type, row, xp[j], mode ? xqp[j] : NULL, n, &M);
                double bound = mode ? (10.0 * n / 32 + 4) * FLT_EPSILON * M : ((double)n / 8 + 16) * FLT_EPSILON * M;
                double e = fabs(y[j * ys + r] - ref) / bound;
                worst = e > worst || e != e ? e : worst;
            }
            for (size_t g = rows; g < ys; g++) gap_written += !isnan(y[j * ys + g]);
        }
        CHECK(!differ, "%s n=%lld nx=%d %s: %d of %d values differ from the single-row kernel", quant_name(type),
              (long long)n, nx, mode ? "q8" : "f32", differ, rows * nx);
        CHECK(worst <= 1, "%s n=%lld nx=%d %s: vs float64: %.3g of the bound", quant_name(type), (long long)n, nx,
              mode ? "q8" : "f32", worst);
        CHECK(!gap_written, "%s n=%lld nx=%d %s: %d writes outside the rows", quant_name(type), (long long)n, nx,
              mode ? "q8" : "f32", gap_written);
        if (nx == 33)
            printf("%-5s n=%5lld %s: 33 rows bit-identical to single-row, worst vs float64 %.2g of the bound\n",
                   quant_name(type), (long long)n, mode ? "q8 " : "f32", worst);
    }
    free(w), free(x), free(y), free(xqb), free(xp), free(xqp);
}

/* A NaN in one activation row reaches that row's outputs only. */
static void check_nan_isolated(int type) {
    int block;
    quant_info(type, &block, NULL);
    int64_t n = 2 * (int64_t)block;
    size_t rb = quant_row_bytes(type, n);
    uint8_t w[2 * 210 * 3];
    float x[3][512], y[3 * 3];
    _Alignas(16) char xqb[3][sizeof(q8k_block) * 3];
    const float *xp[3] = {x[0], x[1], x[2]};
    const void *xqp[3];
    for (int r = 0; r < 3; r++) random_row(type, w + r * rb, n);
    for (int j = 0; j < 3; j++) random_x(x[j], n);
    x[1][block + 5] = NAN;
    for (int j = 0; j < 3; j++) xqp[j] = quant_q8_act(type, x[j], n, xqb[j]);
    for (int mode = 0; mode < 2; mode++) {
        test_poison(y, 9);
        if (mode) quant_matvec_q8_multi(type, w, rb, 3, xqp, 3, n, y, 3);
        else quant_dot_multi(type, w, rb, 3, xp, 3, n, y, 3);
        int ok = 1;
        for (int r = 0; r < 3; r++) ok &= isnan(y[3 + r]) && isfinite(y[r]) && isfinite(y[6 + r]);
        CHECK(ok, "%s %s: a NaN activation must give NaN in its own row only", quant_name(type), mode ? "q8" : "f32");
    }
}

int main(void) {
    test_seed();
    const int types[] = {GGML_Q4_0, GGML_Q4_1, GGML_Q5_0, GGML_Q5_1, GGML_Q8_0, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K};
    const int nxs[] = {1, 3, 16, 17, 33};
    for (int t = 0; t < 8; t++) {
        int k = quant_q8_act_block(types[t]) == 256;
        const int64_t lens[2][3] = {{32, 96, 1536}, {256, 768, 4864}};   /* 4864: Qwen2.5-0.5B's ffn_down */
        for (int l = 0; l < 3; l++)
            for (int b = 0; b < 5; b++) check_multi(types[t], lens[k][l], l == 2 ? 5 : 11, nxs[b]);
        check_nan_isolated(types[t]);
    }
    return check_done("test_quant_multi");
}

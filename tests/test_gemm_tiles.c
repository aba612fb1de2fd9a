/* Prefill's GEMM straight from quantized rows (gemm_xwt, tile by tile) against a float64
 * reference on the dequantized rows, for F32, Q8_0, Q4_0 and Q4_1 weights whose row count
 * is not a multiple of the tile, with beta 0 and 1, bit-identical across thread counts; and the
 * random models' quantizer (quantize_row) against ggml's rounding rules, element by
 * element, recomputed here in double. */
#include "../model/engine.h"
#include "../model/quant.h"
#include "../model/quantize.h"
#include "../kernels/core.h"
#include "check.h"

/* W [rows][cols] of type `type`, random; Q4_1 blocks are written by hand (d, m f16). */
static uint8_t *random_weight(int type, int rows, int cols, size_t *row_bytes) {
    *row_bytes = quant_row_bytes(type, cols);
    uint8_t *w = malloc(*row_bytes * rows);
    float *x = malloc(sizeof(float) * cols);
    for (int r = 0; r < rows; r++) {
        uint8_t *dst = w + *row_bytes * r;
        test_fill(x, cols, 0.5f);
        if (type == GGML_Q4_1) {
            for (int b = 0; b < cols / 32; b++) {
                uint8_t *blk = dst + 20 * b;
                uint16_t d = f32_to_f16(0.01f + 0.05f * (float)test_unif()), m = f32_to_f16(-0.3f * (float)test_unif());
                memcpy(blk, &d, 2), memcpy(blk + 2, &m, 2);
                for (int j = 0; j < 16; j++) blk[4 + j] = (uint8_t)(test_next() & 0xff);
            }
        } else quantize_row(type, x, dst, cols);
    }
    free(x);
    return w;
}

static void test_gemm(int type, int rows, int cols, int n, float beta) {
    gguf_tensor t;
    memset(&t, 0, sizeof t);
    t.type = type;
    weight w = {.t = &t, .rows = rows, .cols = cols};
    uint8_t *data = random_weight(type, rows, cols, &w.row_bytes);
    t.data = data;
    float *X = malloc(sizeof(float) * n * cols), *Y = malloc(sizeof(float) * n * rows),
          *Y0 = malloc(sizeof(float) * n * rows), *Wf = malloc(sizeof(float) * rows * cols);
    test_fill(X, (size_t)n * cols, 1.0f);
    if (beta != 0) test_fill(Y, (size_t)n * rows, 1.0f);
    else test_poison(Y, (size_t)n * rows);
    memcpy(Y0, Y, sizeof(float) * n * rows);
    for (int r = 0; r < rows; r++) dequant_row(type, data + w.row_bytes * r, Wf + (size_t)r * cols, cols);
    gemm_xwt(X, n, &w, beta, Y);
    /* the same bits with another thread count (tiles at fixed offsets) */
    float *Y1 = malloc(sizeof(float) * n * rows);
    memcpy(Y1, Y0, sizeof(float) * n * rows);
    int threads = kb_threads();
    kb_set_threads(threads == 1 ? 2 : 1);
    gemm_xwt(X, n, &w, beta, Y1);
    kb_set_threads(threads);
    CHECK(!memcmp(Y, Y1, sizeof(float) * n * rows), "%s %dx%d, n %d: %d and %d threads give different bits",
          quant_name(type), rows, cols, n, threads, threads == 1 ? 2 : 1);
    free(Y1);
    double worst = 0;
    for (int i = 0; i < n; i++)
        for (int r = 0; r < rows; r++) {
            double ref = beta != 0 ? (double)beta * Y0[(size_t)i * rows + r] : 0, mag = 0;
            for (int k = 0; k < cols; k++) {
                double p = (double)X[(size_t)i * cols + k] * Wf[(size_t)r * cols + k];
                ref += p;
                mag += fabs(p);
            }
            double e = fabs(Y[(size_t)i * rows + r] - ref) / (mag + 1e-30);
            if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
        }
    CHECK(worst < 1e-5, "%s %dx%d, n %d, beta %g, %d threads: worst error %.3g of the sum of |terms|",
          quant_name(type), rows, cols, n, beta, kb_threads(), worst);
    free(X), free(Y), free(Y0), free(Wf), free(data);
}

/* ggml's reference rounding, in double, against quantize_row's blocks. */
static void test_quantize(int type) {
    enum { N = 32 * 37 };
    float x[N], back[N];
    test_fill(x, N, 0.7f);
    x[5] = 0.0f;
    for (int j = 64; j < 96; j++) x[j] = 0.0f;   /* an all-zero block: d = 0, q = 0 / 8 */
    uint8_t q[N / 32 * 34];
    memset(q, 0xA5, sizeof q);
    quantize_row(type, x, q, N);
    dequant_row(type, q, back, N);
    int bad = 0;
    size_t bb = type == GGML_Q8_0 ? 34 : 18;
    for (int b = 0; b < N / 32; b++) {
        const float *xb = x + 32 * b;
        double amax = 0, max = 0;
        for (int j = 0; j < 32; j++)
            if (fabs(xb[j]) > amax) amax = fabs(xb[j]), max = xb[j];
        double d = type == GGML_Q8_0 ? amax / 127 : max / -8;
        uint16_t dh;
        memcpy(&dh, q + bb * b, 2);
        if (fabs(f16_to_f32(dh) - d) > 1e-3 * fabs(d) + 1e-7) bad++;
        double df = f16_to_f32(dh);
        for (int j = 0; j < 32; j++) {
            /* the integer ggml picks, from the f32 reciprocal of the f32 scale */
            float id = (float)d ? 1.0f / (float)d : 0.0f;
            int want = type == GGML_Q8_0 ? (int)lround((double)(xb[j] * id))
                                         : (int)fmin(15, (int)(int8_t)(xb[j] * id + 8.5f)) - 8;
            double expect = want * df;
            if (fabs(back[32 * b + j] - expect) > 1e-6 * fabs(expect) + 1e-9) bad++;
            /* and the round trip is within half a step (Q4_0: a step at the clamped end), plus
             * the f16 rounding of the scale times |q| <= 127 */
            double tol = type == GGML_Q8_0 ? 0.57 * fabs(df) + 1e-6 : fabs(df) * 1.01 + 1e-6;
            if (fabs(back[32 * b + j] - xb[j]) > tol) bad++;
        }
    }
    CHECK(bad == 0, "%s: %d elements or scales off ggml's reference rounding", quant_name(type), bad);
}

int main(void) {
    test_seed();
    test_quantize(GGML_Q8_0);
    test_quantize(GGML_Q4_0);
    const int types[] = {GGML_F32, GGML_Q8_0, GGML_Q4_0, GGML_Q4_1};
    for (int th = 1; th <= 3; th += 2) {
        kb_set_threads(th);
        for (int k = 0; k < 4; k++) {
            test_gemm(types[k], 150, 96, 7, 0.0f);    /* 150 rows: tiles of 64, 64, 22 */
            test_gemm(types[k], 33, 64, 1, 1.0f);     /* fewer rows than a tile, accumulate */
            test_gemm(types[k], 200, 256, 40, 1.0f);
            test_gemm(types[k], 1000, 64, 9, 0.0f);   /* tiles of 128: 7 whole, one of 104 */
            gemm_test_no_scratch = 1;   /* no memory for a tile: a row at a time */
            test_gemm(types[k], 150, 96, 7, 0.0f);
            test_gemm(types[k], 33, 64, 5, 1.0f);
            gemm_test_no_scratch = 0;
        }
    }
    return check_done("test_gemm_tiles");
}

/* quant_dot throughput: a matrix-vector product of each weight type at the shapes of
 * the default model (576 x 1536) and of Qwen2.5-0.5B (896 x 4864, which the K-quants
 * need: rows of 256-blocks), fast path (AVX2 where built) and portable path; for the
 * types with an int8 path also the 8-bit activation path (quant_q8_act once, then
 * quant_matvec_q8), and the ratio f32 time / q8 time side by side; single-threaded. Also
 * dequant_row of the whole matrix (what prefill does to each tile before its sgemm). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../model/quant.h"
#include "../model/quant_q8.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef float (*dot_fn)(int, const void *, const float *, int64_t);

static double run(dot_fn fn, int type, const uint8_t *w, size_t rb, int rows, const float *x, int n, float *y) {
    double best = 1e30;
    for (int rep = 0; rep < 40; rep++) {
        double t0 = now();
        for (int r = 0; r < rows; r++) y[r] = fn(type, w + (size_t)r * rb, x, n);
        double t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    if (argc > 1) {
        printf("usage: bench_quant   (quant_dot on 1536x576, 576x1536, 4864x896 and 896x4864 matrices of each type;\n"
               "                     prints us per matvec, f32 and 8-bit activations side by side)\n");
        return strcmp(argv[1], "--help") ? 2 : 0;
    }
    int types[] = {GGML_Q4_1, GGML_Q8_0, GGML_Q4_0, GGML_Q5_0, GGML_Q5_1, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K, GGML_F32};
    int shapes[][2] = {{576, 1536}, {1536, 576}, {896, 4864}, {4864, 896}};
    srand(1);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (int s = 0; s < 4; s++) {
            int n = shapes[s][0], rows = shapes[s][1], type = types[ti];
            size_t rb = quant_row_bytes(type, n);
            if (!rb) continue;   /* n not a multiple of the block (K-quants on 576 or 896) */
            if (type == GGML_F32 && s >= 2) continue;   /* F32: the small shapes say enough */
            uint8_t *w = malloc(rb * rows);
            float *x = malloc(n * sizeof *x), *y = malloc(rows * sizeof *y);
            for (size_t i = 0; i < rb * rows; i++) w[i] = (uint8_t)rand();
            int block, bytes;
            quant_info(type, &block, &bytes);
            if (type == GGML_F32)
                for (size_t i = 0; i < (size_t)n * rows; i++) ((float *)w)[i] = (float)rand() / RAND_MAX;
            else
                for (size_t b = 0; b < rb * rows / bytes; b++) {   /* sane f16 scales */
                    uint16_t h = f32_to_f16(0.01f);
                    memcpy(w + b * bytes + (type == GGML_Q6_K ? 208 : 0), &h, 2);
                    if (type == GGML_Q4_1 || type == GGML_Q5_1 || type == GGML_Q4_K || type == GGML_Q5_K)
                        memcpy(w + b * bytes + 2, &h, 2);
                }
            for (int i = 0; i < n; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;
            double tf = run(quant_dot, type, w, rb, rows, x, n, y);
            double tg = run(quant_dot_generic, type, w, rb, rows, x, n, y);
            float *tile = malloc((size_t)rows * n * sizeof *tile);   /* prefill's dequantised tile */
            double td = 1e30;
            for (int rep = 0; rep < 10; rep++) {
                double t0 = now();
                for (int r = 0; r < rows; r++) dequant_row(type, w + (size_t)r * rb, tile + (size_t)r * n, n);
                td = now() - t0 < td ? now() - t0 : td;
            }
            free(tile);
            printf("%-5s %4d x %4d: quant_dot %7.1f us (%5.2f GB/s of weights), portable %7.1f us, dequant_row %7.1f us",
                   quant_name(type), rows, n, tf * 1e6, rb * rows / tf * 1e-9, tg * 1e6, td * 1e6);
            if (quant_q8_supported(type)) {   /* 8-bit activations: quantize x, then int8 dots */
                void *xq = malloc(quant_q8_act_bytes(n));
                double tq = 1e30, tqg = 1e30;
                for (int rep = 0; rep < 40; rep++) {
                    double t0 = now();
                    quant_q8_act(type, x, n, xq);
                    quant_matvec_q8(type, w, rb, rows, xq, n, y);
                    double t1 = now();
                    quant_matvec_q8_generic(type, w, rb, rows, xq, n, y);
                    double t2 = now();
                    tq = t1 - t0 < tq ? t1 - t0 : tq;
                    tqg = t2 - t1 < tqg ? t2 - t1 : tqg;
                }
                printf("; q8 activations %6.1f us (%5.2f GB/s), portable %7.1f us; f32 / q8 %4.2fx", tq * 1e6,
                       rb * rows / tq * 1e-9, tqg * 1e6, tf / tq);
                free(xq);
            }
            printf("\n");
            free(w), free(x), free(y);
        }
    return 0;
}

/* Fuzz target: the weight types' dot products (model/quant.c, model/quant_q8.c) on
 * arbitrary block bytes and activations. Byte 0 picks the type, byte 1 the number of
 * blocks; the weight blocks and then the activations (raw f32 bits: NaN, inf,
 * subnormals, huge values) are read from the rest of the input, cycled when it is short.
 * Runs dequant_row, quant_dot and quant_dot_generic, and for the types with an int8 path
 * quant_q8_act, quant_matvec_q8 and quant_matvec_q8_generic. Aborts when
 *  - a non-finite activation does not make the int8 dot NaN (both paths), or
 *  - on finite, moderate inputs, the SIMD and portable paths (f32, and int8) differ by
 *    more than a rounding bound built from each block's largest possible term. */
#include "fuzz.h"
#include "../../model/quant.h"
#include "../../model/quant_q8.h"
#include <float.h>
#include <math.h>

static const int TYPES[] = {GGML_Q4_0, GGML_Q4_1, GGML_Q5_0, GGML_Q5_1, GGML_Q8_0,
                            GGML_Q4_K, GGML_Q5_K, GGML_Q6_K, GGML_F16};

static double f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return f16_to_f32(h);
}

/* An upper bound on |scale * code| + |offset| for any element of the block. */
static double block_term_max(int type, const uint8_t *b) {
    switch (type) {
    case GGML_Q4_0: case GGML_Q5_0: case GGML_Q8_0: return 128 * fabs(f16_at(b));
    case GGML_Q4_1: case GGML_Q5_1: return 32 * fabs(f16_at(b)) + fabs(f16_at(b + 2));
    case GGML_Q4_K: case GGML_Q5_K: return 64 * 32 * fabs(f16_at(b)) + 64 * fabs(f16_at(b + 2));
    case GGML_Q6_K: return 128 * 96 * fabs(f16_at(b + 208));
    case GGML_F16: return fabs(f16_at(b));
    default: return INFINITY;
    }
}

static void fill(uint8_t *dst, size_t n, const uint8_t *src, size_t len, size_t *at) {
    for (size_t i = 0; i < n; i++, (*at)++) dst[i] = src[*at % len];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
    if (len < 3) return 0;
    int type = TYPES[data[0] % (sizeof TYPES / sizeof TYPES[0])], block, bytes;
    quant_info(type, &block, &bytes);
    int nb = 1 + data[1] % (block == 256 ? 4 : 16);
    int64_t n = (int64_t)nb * block;
    const uint8_t *src = data + 2;
    size_t slen = len - 2, at = 0;
    uint8_t *w = malloc((size_t)nb * bytes);   /* exact sizes: ASan sees any over-read */
    float *x = malloc((size_t)n * sizeof *x), *wf = malloc((size_t)n * sizeof *wf);
    void *xq = malloc(quant_q8_act_bytes(n));
    if (!w || !x || !wf || !xq) abort();
    fill(w, (size_t)nb * bytes, src, slen, &at);
    fill((uint8_t *)x, (size_t)n * sizeof *x, src, slen, &at);

    dequant_row(type, w, wf, n);
    float d_fast = quant_dot(type, w, x, n), d_port = quant_dot_generic(type, w, x, n);
    /* finite, moderate inputs: both f32 paths within the rounding bound */
    int x_ok = 1, x_finite = 1;
    double T = 0, Tq = 0;
    for (int64_t i = 0; i < n; i++) {
        x_finite &= isfinite(x[i]);
        x_ok &= isfinite(x[i]) && fabsf(x[i]) < 1e15f;
    }
    for (int b = 0; b < nb && x_ok; b++) {
        double m = block_term_max(type, w + (size_t)b * bytes), sx = 0;
        for (int i = 0; i < block; i++) sx += fabs(x[(int64_t)b * block + i]);
        T += m * sx;
    }
    double bound = (10.0 * ((double)n / 32 + 1) + 4) * 2 * FLT_EPSILON * T + 1e-30;
    if (x_ok && isfinite(T) && T < 1e30 && !(fabs((double)d_fast - d_port) <= bound)) {
        fprintf(stderr, "fuzz_quant: %s n=%lld: quant_dot %.9g, portable %.9g, bound %.3g\n", quant_name(type),
                (long long)n, d_fast, d_port, bound);
        abort();
    }

    if (quant_q8_supported(type)) {
        float y = 0, yg = 0;
        if (quant_q8_act(type, x, n, xq) != xq) abort();
        quant_matvec_q8(type, w, (size_t)nb * bytes, 1, xq, n, &y);
        quant_matvec_q8_generic(type, w, (size_t)nb * bytes, 1, xq, n, &yg);
        if (!x_finite && !(isnan(y) && isnan(yg))) {
            fprintf(stderr, "fuzz_quant: %s: a non-finite activation gave %g / %g, not NaN\n", quant_name(type), y, yg);
            abort();
        }
        /* the quantized activations are at most max|x| in size: the same bound holds */
        for (int b = 0; b < nb && x_ok; b++) {
            double m = block_term_max(type, w + (size_t)b * bytes), amax = 0;
            for (int i = 0; i < block; i++) amax = fmax(amax, fabs(x[(int64_t)b * block + i]));
            Tq += m * amax * block;
        }
        double bq = (10.0 * ((double)n / 32 + 1) + 4) * 2 * FLT_EPSILON * Tq + 1e-30;
        if (x_ok && isfinite(Tq) && Tq < 1e30 && !(fabs((double)y - yg) <= bq)) {
            fprintf(stderr, "fuzz_quant: %s n=%lld: int8 dot %.9g, portable %.9g, bound %.3g\n", quant_name(type),
                    (long long)n, y, yg, bq);
            abort();
        }
    }
    free(w), free(x), free(wf), free(xq);
    return 0;
}

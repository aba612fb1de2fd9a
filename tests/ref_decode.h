/* Float64 decode attention over an explicit entry list (the kb_decode_args contract of
 * kernels/core.h), the reference of test_kernels and test_kvtype: out [g][d], probs
 * [g][n]. elem(a, base, i) is element i of K or V as a double: the caller's own reading
 * of the stored type, so each test keeps its independent decoder. */
#ifndef KB_TEST_REF_DECODE_H
#define KB_TEST_REF_DECODE_H
#include "../kernels/core.h"
#include <math.h>
#include <stddef.h>

typedef double (*ref_elem_fn)(const kb_decode_args *a, const void *base, size_t i);

static void ref_decode_elems(const kb_decode_args *a, ref_elem_fn elem, double *out, double *probs) {
    int g = a->g, d = a->d, n = a->n;
    for (int hh = 0; hh < g; hh++) {
        double mx = -INFINITY, z = 0, *s = probs + (size_t)hh * n;
        for (int i = 0; i < n; i++) {
            size_t r = (size_t)(a->idx ? a->idx[i] : i) * d;
            double dot = 0;
            for (int c = 0; c < d; c++) dot += (double)a->q[hh * d + c] * elem(a, a->K, r + c);
            s[i] = dot / sqrt((double)d) + (a->bias ? a->bias[i] : 0.0);
            if (s[i] > mx) mx = s[i];
        }
        for (int i = 0; i < n; i++) z += (s[i] = exp(s[i] - mx));
        for (int c = 0; c < d; c++) out[hh * d + c] = 0;
        for (int i = 0; i < n; i++) {
            s[i] /= z;
            size_t r = (size_t)(a->idx ? a->idx[i] : i) * d;
            for (int c = 0; c < d; c++) out[hh * d + c] += s[i] * elem(a, a->V, r + c);
        }
    }
}
#endif

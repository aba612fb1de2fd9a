/* SnapKV-style observation-window scoring (see window_score.h).
 *
 * Pooling follows torch.nn.functional with stride 1 and padding kernel/2 over the prefix
 * only: output i covers inputs [i - kernel/2, i - kernel/2 + kernel - 1]; max-pool ignores
 * the padding, avg-pool counts it as zeros and divides by kernel (count_include_pad, the
 * PyTorch default SnapKV/KVCache-Factory use). */
#include "window_score.h"
#include <math.h>
#include <stdlib.h>

static void pool_1d(const double *x, int n, int kernel, int pool, double *y) {
    int lo_off = kernel / 2;
    for (int i = 0; i < n; i++) {
        int a = i - lo_off, b = a + kernel - 1;
        if (a < 0) a = 0;
        if (b > n - 1) b = n - 1;
        if (pool == POOL_MAX) {
            double m = -INFINITY;
            for (int t = a; t <= b; t++) m = x[t] > m ? x[t] : m;
            y[i] = m;
        } else {
            double s = 0;
            for (int t = a; t <= b; t++) s += x[t];
            y[i] = s / kernel;
        }
    }
}

int window_scores(const kv_prefill *p, int H, int Hkv, int w, int kernel, int pool,
                  int agg_max, float *score) {
    int n = p->n, m = n - w;
    if (m <= 0) return 0;
    if (kernel < 1) kernel = 1;
    int g = H / Hkv;
    double *sum = malloc((size_t)m * sizeof *sum), *pooled = malloc((size_t)m * sizeof *pooled);
    double *acc = malloc((size_t)m * sizeof *acc);
    if (!sum || !pooled || !acc) {
        free(sum); free(pooled); free(acc);
        return -1;
    }
    for (int j = 0; j < Hkv; j++) {
        for (int i = 0; i < m; i++) acc[i] = agg_max ? -INFINITY : 0;
        for (int hh = 0; hh < g; hh++) {
            int h = j * g + hh;
            for (int i = 0; i < m; i++) sum[i] = 0;
            /* the last w of the p->win rows provided */
            for (int r = p->win - w; r < p->win; r++) {
                const float *row = p->win_probs + ((size_t)h * p->win + r) * (size_t)n;
                for (int i = 0; i < m; i++) sum[i] += row[i];
            }
            pool_1d(sum, m, kernel, pool, pooled);
            for (int i = 0; i < m; i++)
                acc[i] = agg_max ? (pooled[i] > acc[i] ? pooled[i] : acc[i]) : acc[i] + pooled[i];
        }
        for (int i = 0; i < m; i++)
            score[(size_t)j * m + i] = (float)(agg_max ? acc[i] : acc[i] / g);
    }
    free(sum); free(pooled); free(acc);
    return m;
}

void window_needs(const kv_method *m, const kv_setup *s, kv_needs *out) {
    int window = 0, B = kv_budget(s);
    char err[8];
    out->col_mass = 0;
    out->window = 0;
    if (kv_param_int(m, s->params, "window", &window, err, sizeof err) == 0 && window > 0)
        out->window = window < B ? window : B;
}

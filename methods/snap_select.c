#include "snap_select.h"
#include "window_score.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int snap_select_layer(kv_cacheset *c, const kv_prefill *p, int window, int kernel, int pool, int agg_max,
                      int rows, const char *name, char *err, size_t errlen) {
    if (cs_begin_layer(c, p, name, err, errlen)) return -1;
    int n = p->n, w = window < n ? window : n, m = n - w;
    if (m > 0 && (!p->win_probs || p->win < w)) {
        snprintf(err, errlen, "%s: layer %d: prefill gave %d window rows, need %d", name, p->layer,
                 p->win_probs ? p->win : 0, w);
        return -1;
    }
    float *score = malloc(((size_t)c->Hkv * (m > 0 ? m : 1)) * sizeof *score);
    double *row_score = malloc((size_t)n * sizeof *row_score);
    int32_t *keep = malloc((size_t)n * sizeof *keep);
    int rc = !score || !row_score || !keep;
    if (!rc && m > 0 && window_scores(p, c->H, c->Hkv, w, kernel, pool, agg_max, score) != m) rc = 1;
    for (int j = 0; j < c->Hkv && !rc; j++) {
        const float *sj = score + (size_t)j * m;
        int nk = topk_sorted(sj, m, rows - w, keep);
        if (nk < 0) {
            rc = 1;
            break;
        }
        for (int t = 0; t < m; t++) row_score[t] = sj[t];
        for (int t = m; t < n; t++) {
            row_score[t] = INFINITY;
            keep[nk++] = t;
        }
        rc = cs_load(c, p, j, keep, nk, row_score);
    }
    free(score); free(row_score); free(keep);
    if (rc) snprintf(err, errlen, "%s: out of memory in layer %d", name, p->layer);
    return rc;
}

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
    int rc = !score;
    if (!rc && m > 0 && window_scores(p, c->H, c->Hkv, w, kernel, pool, agg_max, score) != m) rc = 1;
    /* the top rows - w prefix tokens by pooled score, then the w window tokens (+inf) */
    for (int j = 0; j < c->Hkv && !rc; j++) rc = scorer_load(c, p, j, score + (size_t)j * m, 0, w, rows) != 0;
    free(score);
    if (rc) snprintf(err, errlen, "%s: out of memory in layer %d", name, p->layer);
    return rc;
}

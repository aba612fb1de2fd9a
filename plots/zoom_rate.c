/* Zoom rates per (layer, head) from a results file: see zoom_rate.h. */
#include "zoom_rate.h"
#include "../results/query.h"
#include "paper_rows.h"
#include "report_tables.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void zr_free(zr_panel *p, int n) {
    for (int i = 0; p && i < n; i++) free(p[i].rate), free(p[i].expanded);
    free(p);
}

/* Per result and (layer, head): head_stats' expansions and the rate sum of its zoom
 * events divided by the result's decode steps. Results with default params or a named
 * parameter file only (an ablation is another method). */
int zr_load(sqlite3 *h, int64_t run_id, const char *variant, const char *model, zr_panel **out, int *n, char *why,
            size_t wn) {
    *out = NULL, *n = 0;
    int zt = kvq_has_table(h, "zoom_events");
    if (zt && !kvq_has_column(h, "zoom_events", "spans")) {
        snprintf(why, wn, "the file's zoom events predate zoom rates (no zoom_events.spans column): rerun those results");
        return -1;
    }
    /* the methods with a zoom claim in their paper, in registry order */
    const char *zm[16];
    int nz = pr_methods(KV_CLAIM_ZOOM, zm, 16);
    sqlite3_stmt *q = kvq_zoom_rates(h, zt, run_id, variant, model, zm, nz);
    if (!q) {
        snprintf(why, wn, "reading zoom rates: %s", sqlite3_errmsg(h));
        return -1;
    }
    zr_panel *p = NULL;
    int np = 0, rc = 0;
    int64_t last_id = -1;
    while (sqlite3_step(q) == SQLITE_ROW) {
        const char *mo = (const char *)sqlite3_column_text(q, 8);
        char m[160], suffix[128];   /* the row's name, as the report tables give it */
        rt_params_suffix((const char *)sqlite3_column_text(q, 9), suffix, sizeof suffix);
        snprintf(m, sizeof m, "%s%s", (const char *)sqlite3_column_text(q, 0), suffix);
        double b = sqlite3_column_double(q, 1);
        int64_t id = sqlite3_column_int64(q, 2);
        int steps = sqlite3_column_int(q, 3), l = sqlite3_column_int(q, 4), hd = sqlite3_column_int(q, 5);
        if (!np || strcmp(p[np - 1].method, m) || p[np - 1].budget != b || strcmp(p[np - 1].model, mo)) {
            zr_panel *g = realloc(p, (size_t)(np + 1) * sizeof *g);
            if (!g) { rc = -1; break; }
            p = g;
            memset(&p[np], 0, sizeof p[np]);
            snprintf(p[np].method, sizeof p[np].method, "%s", m);
            snprintf(p[np].model, sizeof p[np].model, "%s", mo);
            p[np++].budget = b;
            last_id = -1;
        }
        zr_panel *c = &p[np - 1];
        if (l >= c->L || hd >= c->H) {   /* grow to the largest shape seen */
            int L = l >= c->L ? l + 1 : c->L, H = hd >= c->H ? hd + 1 : c->H;
            double *r = calloc((size_t)L * H, sizeof *r), *e = calloc((size_t)L * H, sizeof *e);
            if (!r || !e) { free(r), free(e), rc = -1; break; }
            for (int i = 0; i < c->L; i++)
                for (int j = 0; j < c->H; j++)
                    r[i * H + j] = c->rate[i * c->H + j], e[i * H + j] = c->expanded[i * c->H + j];
            free(c->rate), free(c->expanded);
            c->rate = r, c->expanded = e, c->L = L, c->H = H;
        }
        if (id != last_id) c->n_results++, last_id = id;
        c->rate[l * c->H + hd] += sqlite3_column_double(q, 7) / steps;
        c->expanded[l * c->H + hd] += sqlite3_column_double(q, 6);
    }
    sqlite3_finalize(q);
    if (rc) {
        zr_free(p, np);
        snprintf(why, wn, "out of memory");
        return -1;
    }
    for (int i = 0; i < np; i++)
        for (int k = 0; k < p[i].L * p[i].H; k++) p[i].rate[k] /= p[i].n_results;
    *out = p, *n = np;
    return 0;
}

static int by_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

void zr_summarize(const zr_panel *p, zr_summary *s) {
    int n = p->L * p->H, quiet = 0;
    double tot = 0;
    memset(s, 0, sizeof *s);
    s->heads = n;
    for (int k = 0; k < n; k++) quiet += p->rate[k] < 0.05, tot += p->expanded[k];
    s->quiet = n ? (double)quiet / n : NAN;
    for (int t = 0; t < 3; t++) {   /* thirds: layers [t L / 3, (t + 1) L / 3) */
        int lo = t * p->L / 3, hi = (t + 1) * p->L / 3, m = 0;
        double sum = 0;
        for (int l = lo; l < hi; l++)
            for (int j = 0; j < p->H; j++) sum += p->rate[l * p->H + j], m++;
        s->third[t] = m ? sum / m : NAN;
    }
    double *e = malloc((size_t)(n ? n : 1) * sizeof *e);
    if (!e || !(tot > 0)) {
        s->top10 = NAN;
        free(e);
        return;
    }
    memcpy(e, p->expanded, (size_t)n * sizeof *e);
    qsort(e, (size_t)n, sizeof *e, by_desc);
    int top = (int)ceil(0.1 * n);
    double sum = 0;
    for (int k = 0; k < top; k++) sum += e[k];
    s->top10 = sum / tot;
    free(e);
}

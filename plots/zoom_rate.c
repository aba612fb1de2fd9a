/* Zoom rates per (layer, head) from a results file: see zoom_rate.h. */
#include "zoom_rate.h"
#include "paper_rows.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int has_table(sqlite3 *h, const char *sql) {
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(h, sql, -1, &q, NULL) != SQLITE_OK) return 0;
    int ok = sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int(q, 0) > 0;
    sqlite3_finalize(q);
    return ok;
}

void zr_free(zr_panel *p, int n) {
    for (int i = 0; p && i < n; i++) free(p[i].rate), free(p[i].expanded);
    free(p);
}

/* Per result and (layer, head): head_stats' expansions and the rate sum of its zoom
 * events divided by the result's decode steps. Results with default params only (an
 * ablation is another method). */
int zr_load(sqlite3 *h, int64_t run_id, const char *variant, const char *model, zr_panel **out, int *n, char *why,
            size_t wn) {
    *out = NULL, *n = 0;
    int zt = has_table(h, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'zoom_events'");
    if (zt && !has_table(h, "SELECT count(*) FROM pragma_table_info('zoom_events') WHERE name = 'spans'")) {
        snprintf(why, wn, "the file's zoom events predate zoom rates (no zoom_events.spans column): rerun those results");
        return -1;
    }
    /* the methods with a zoom claim in their paper, in registry order (names are
     * [a-z0-9_.-], so they sit in the SQL text as they are) */
    const char *zm[16];   /* at most 16 names of at most 48 characters fit in[] and order[] */
    int nz = pr_methods(KV_CLAIM_ZOOM, zm, 16);
    char in[1024] = "''", order[1536] = "0";
    for (int i = 0, a = 0, b = 0; i < nz; i++) {
        a += snprintf(in + a, sizeof in - (size_t)a, "%s'%s'", i ? ", " : "", zm[i]);
        b += snprintf(order + b, sizeof order - (size_t)b, "%sWHEN '%s' THEN %d", i ? " " : "CASE r.method ", zm[i], i);
    }
    if (nz) snprintf(order + strlen(order), sizeof order - strlen(order), " ELSE %d END", nz);
    char sql[4096];
    snprintf(sql, sizeof sql,
             "SELECT r.method, r.budget, r.id, r.decode_tokens, hs.layer, hs.head, hs.events, %s, ifnull(ru.model, '?')"
             " FROM head_stats hs JOIN results r ON r.id = hs.result_id JOIN cases c ON c.id = r.case_id"
             " JOIN runs ru ON ru.id = c.run_id%s"
             " WHERE (?1 <= 0 OR c.run_id = ?1) AND r.method IN (%s)"
             " AND (r.params IS NULL OR r.params = '') AND r.status = 'ok' AND r.decode_tokens > 0"
             " AND hs.events IS NOT NULL AND (?2 IS NULL OR c.variant = ?2) AND (?3 IS NULL OR ifnull(ru.model, '?') = ?3)%s"
             " ORDER BY ifnull(ru.model, '?'), %s, r.budget, r.id,"
             " hs.layer, hs.head",
             zt ? "coalesce(z.s, 0)" : "0",
             zt ? " LEFT JOIN (SELECT result_id, layer, head, total(expanded * 1.0 / spans) AS s FROM zoom_events"
                  " GROUP BY 1, 2, 3) z ON z.result_id = r.id AND z.layer = hs.layer AND z.head = hs.head"
                : "",
             in, zt ? " AND NOT EXISTS (SELECT 1 FROM zoom_events e WHERE e.result_id = r.id AND e.spans IS NULL)" : "",
             order);
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(h, sql, -1, &q, NULL) != SQLITE_OK) {
        snprintf(why, wn, "reading zoom rates: %s", sqlite3_errmsg(h));
        return -1;
    }
    sqlite3_bind_int64(q, 1, run_id);
    if (variant) sqlite3_bind_text(q, 2, variant, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(q, 2);
    if (model) sqlite3_bind_text(q, 3, model, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(q, 3);
    zr_panel *p = NULL;
    int np = 0, rc = 0;
    int64_t last_id = -1;
    while (sqlite3_step(q) == SQLITE_ROW) {
        const char *m = (const char *)sqlite3_column_text(q, 0), *mo = (const char *)sqlite3_column_text(q, 8);
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

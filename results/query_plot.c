/* Queries behind kvbench plot: the NIAH heatmap, the line figures, the sim memory figure
 * and SeKV's zoom rates. */
#include "query.h"
#include <stdio.h>
#include <string.h>

/* Prepares sql with ?1 = run_id and ?2 = variant (left NULL when variant is NULL). */
static sqlite3_stmt *prep(sqlite3 *h, const char *sql, int64_t run_id, const char *variant) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return NULL;
    }
    sqlite3_bind_int64(st, 1, run_id);
    if (variant) sqlite3_bind_text(st, 2, variant, -1, SQLITE_TRANSIENT);
    return st;
}

/* A NIAH case: a context length and a depth, of the variant asked for. */
#define NIAH_CASES " c.run_id = ?1 AND c.ctx > 0 AND c.depth IS NOT NULL AND (?2 IS NULL OR c.variant = ?2)"

sqlite3_stmt *kvq_niah_axis(sqlite3 *h, int axis, int64_t run_id, const char *variant) {
    static const char *sql[2] = {
        "SELECT DISTINCT c.ctx FROM cases c JOIN results r ON r.case_id = c.id WHERE" NIAH_CASES " ORDER BY 1",
        "SELECT DISTINCT c.depth FROM cases c JOIN results r ON r.case_id = c.id WHERE" NIAH_CASES " ORDER BY 1",
    };
    return prep(h, sql[axis != 0], run_id, variant);
}

sqlite3_stmt *kvq_niah_panels(sqlite3 *h, int64_t run_id, const char *variant) {
    return prep(h, "SELECT DISTINCT r.method, r.budget FROM results r JOIN cases c ON c.id = r.case_id WHERE" NIAH_CASES,
                run_id, variant);
}

sqlite3_stmt *kvq_niah_cells(sqlite3 *h, enum kvq_niah metric, int64_t run_id, const char *variant) {
    /* the cell value and which results it averages */
    static const char *const value[] = {
        [KVQ_NIAH_SCORE] = "100.0 * avg(CASE WHEN r.status = 'ok' THEN r.score ELSE 0 END)",
        [KVQ_NIAH_NLL] = "avg(r.ans_nll)",
        [KVQ_NIAH_KL] = "avg(r.kl)",
        [KVQ_NIAH_TOP1] = "100.0 * avg(CASE WHEN r.status = 'ok' THEN r.top1 ELSE 0 END)",
    };
    static const char *const where[] = {
        [KVQ_NIAH_SCORE] = "(r.status <> 'ok' OR r.score IS NOT NULL)",
        [KVQ_NIAH_NLL] = "r.status = 'ok' AND r.ans_nll IS NOT NULL",
        [KVQ_NIAH_KL] = "r.status = 'ok' AND r.kl IS NOT NULL",
        [KVQ_NIAH_TOP1] = "(r.status <> 'ok' OR r.top1 IS NOT NULL)",
    };
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT r.method, r.budget, c.ctx, c.depth, %s FROM results r JOIN cases c ON c.id = r.case_id"
             " WHERE c.run_id = ?1 AND %s AND c.ctx > 0 AND c.depth IS NOT NULL"
             " AND (?2 IS NULL OR c.variant = ?2) GROUP BY 1, 2, 3, 4",
             value[metric], where[metric]);
    return prep(h, sql, run_id, variant);
}

sqlite3_stmt *kvq_fig_points(sqlite3 *h, enum kvq_fig fig, int64_t run_id, const char *variant) {
    static const struct {
        const char *x, *y, *where;
    } q[] = {
        [KVQ_FIG_MEMORY] = {"c.ctx", "r.fast_peak / 1048576.0", "r.status = 'ok' AND c.ctx > 0 AND r.fast_peak IS NOT NULL"},
        [KVQ_FIG_LATENCY] = {"c.ctx", "1000.0 * r.decode_s / r.decode_tokens",
                             "r.status = 'ok' AND c.ctx > 0 AND r.decode_tokens > 0"},
        [KVQ_FIG_BUDGET] = {"r.budget", "CASE WHEN r.status = 'ok' THEN r.score ELSE 0 END",
                            "(r.status <> 'ok' OR r.score IS NOT NULL)"},
    };
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT r.method, r.budget, %s, %s FROM results r JOIN cases c ON c.id = r.case_id"
             " WHERE c.run_id = ?1 AND (?2 IS NULL OR c.variant = ?2) AND %s ORDER BY 1, 2, 3",
             q[fig].x, q[fig].y, q[fig].where);
    return prep(h, sql, run_id, variant);
}

sqlite3_stmt *kvq_sim_memory(sqlite3 *h, int64_t run_id) {
    return prep(h,
                "SELECT r.method, r.budget, c.ctx, s.total_peak, r.fast_decode_peak FROM results r"
                " JOIN cases c ON c.id = r.case_id JOIN sim_mem s ON s.case_id = r.case_id AND s.method = r.method"
                " AND s.budget = r.budget WHERE c.run_id = ?1 AND r.status = 'ok' ORDER BY 1, 2, 3",
                run_id, NULL);
}

sqlite3_stmt *kvq_unfinished(sqlite3 *h, int64_t run_id) {
    return prep(h,
                "SELECT DISTINCT r.method || ' ' || r.status FROM results r JOIN cases c ON c.id = r.case_id"
                " WHERE c.run_id = ?1 AND r.status <> 'ok' ORDER BY 1",
                run_id, NULL);
}

sqlite3_stmt *kvq_zoom_rates(sqlite3 *h, int with_zoom, int64_t run_id, const char *variant, const char *model,
                             const char *const *methods, int n_methods) {
    /* the methods in the caller's order (names are [a-z0-9_.-], checked here, so they
     * sit in the SQL text as they are) */
    char in[1024] = "''", order[1536] = "0";
    for (int i = 0, a = 0, b = 0; i < n_methods; i++) {
        if (strlen(methods[i]) > 48 || strspn(methods[i], "abcdefghijklmnopqrstuvwxyz0123456789_.-") != strlen(methods[i]))
            return NULL;
        a += snprintf(in + a, sizeof in - (size_t)a, "%s'%s'", i ? ", " : "", methods[i]);
        b += snprintf(order + b, sizeof order - (size_t)b, "%sWHEN '%s' THEN %d", i ? " " : "CASE r.method ", methods[i], i);
        if (a >= (int)sizeof in || b >= (int)sizeof order) return NULL;
    }
    if (n_methods) snprintf(order + strlen(order), sizeof order - strlen(order), " ELSE %d END", n_methods);
    char sql[4096];
    snprintf(sql, sizeof sql,
             "SELECT r.method, r.budget, r.id, r.decode_tokens, hs.layer, hs.head, hs.events, %s, ifnull(ru.model, '?'), ifnull(r.params, '')"
             " FROM head_stats hs JOIN results r ON r.id = hs.result_id JOIN cases c ON c.id = r.case_id"
             " JOIN runs ru ON ru.id = c.run_id%s"
             " WHERE (?1 <= 0 OR c.run_id = ?1) AND r.method IN (%s)"
             " AND (ifnull(r.params, '') = '' OR (r.params LIKE 'params_file=%%' AND instr(r.params, ',') = 0))"
             " AND r.status = 'ok' AND r.decode_tokens > 0"
             " AND hs.events IS NOT NULL AND (?2 IS NULL OR c.variant = ?2) AND (?3 IS NULL OR ifnull(ru.model, '?') = ?3)%s"
             " ORDER BY ifnull(ru.model, '?'), %s, ifnull(r.params, ''), r.budget, r.id, hs.layer, hs.head",
             with_zoom ? "coalesce(z.s, 0)" : "0",
             with_zoom ? " LEFT JOIN (SELECT result_id, layer, head, total(expanded * 1.0 / spans) AS s FROM zoom_events"
                         " GROUP BY 1, 2, 3) z ON z.result_id = r.id AND z.layer = hs.layer AND z.head = hs.head"
                       : "",
             /* one pass over zoom_events for the whole query: a correlated NOT EXISTS ran once
              * per head_stats row (108 s against 3 s on a 2M-event file) */
             in, with_zoom ? " AND r.id NOT IN (SELECT result_id FROM zoom_events WHERE spans IS NULL)" : "",
             order);
    sqlite3_stmt *st = prep(h, sql, run_id, variant);
    if (st && model) sqlite3_bind_text(st, 3, model, -1, SQLITE_TRANSIENT);
    return st;
}

/* Queries behind kvbench report: the grouped table of one run and the records the
 * paper-style tables are built from. */
#include "query.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sqlite3_stmt *prep_run(sqlite3 *h, const char *sql, int64_t run_id) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return NULL;
    }
    sqlite3_bind_int64(st, 1, run_id);
    return st;
}

static const char *rows_sql[] = {
    [KVQ_BY_VARIANT] = "SELECT DISTINCT r.method, r.budget FROM results r JOIN cases c ON c.id = r.case_id WHERE c.run_id = ?",
    [KVQ_BY_BUDGET] = "SELECT DISTINCT r.method, NULL FROM results r JOIN cases c ON c.id = r.case_id WHERE c.run_id = ?",
    [KVQ_BY_CTX] = "SELECT DISTINCT r.method, r.budget FROM results r JOIN cases c ON c.id = r.case_id WHERE c.run_id = ?",
};
static const char *cols_sql[] = {
    [KVQ_BY_VARIANT] = "SELECT ifnull(c.variant, '-'), NULL FROM cases c JOIN results r ON r.case_id = c.id"
                       " WHERE c.run_id = ? GROUP BY 1 ORDER BY min(c.id)",
    [KVQ_BY_BUDGET] = "SELECT r.budget, r.budget FROM cases c JOIN results r ON r.case_id = c.id"
                      " WHERE c.run_id = ? GROUP BY 1 ORDER BY 1",
    [KVQ_BY_CTX] = "SELECT c.ctx, c.ctx FROM cases c JOIN results r ON r.case_id = c.id"
                   " WHERE c.run_id = ? GROUP BY 1 ORDER BY 1",
};
/* One line per result; %s: the fidelity columns (schema v3) or NULLs. */
#define CELL_ROWS                                                                                    \
    " r.status, r.score, r.fast_peak,"                                                                \
    " CASE WHEN r.decode_tokens > 0 THEN 1000.0 * r.decode_s / r.decode_tokens END, c.id, %s"         \
    " FROM results r JOIN cases c ON c.id = r.case_id WHERE c.run_id = ? ORDER BY c.id, r.id"
static const char *cells_sql[] = {
    [KVQ_BY_VARIANT] = "SELECT r.method, r.budget, ifnull(c.variant, '-')," CELL_ROWS,
    [KVQ_BY_BUDGET] = "SELECT r.method, NULL, r.budget," CELL_ROWS,
    [KVQ_BY_CTX] = "SELECT r.method, r.budget, c.ctx," CELL_ROWS,
};

sqlite3_stmt *kvq_report_rows(sqlite3 *h, enum kvq_by by, int64_t run_id) { return prep_run(h, rows_sql[by], run_id); }

sqlite3_stmt *kvq_report_cols(sqlite3 *h, enum kvq_by by, int64_t run_id) { return prep_run(h, cols_sql[by], run_id); }

sqlite3_stmt *kvq_report_cells(sqlite3 *h, enum kvq_by by, int64_t run_id) {
    char sql[1024];
    snprintf(sql, sizeof sql, cells_sql[by],
             kvq_has_column(h, "results", "kl") ? "r.ans_nll, r.kl, r.top1" : "NULL, NULL, NULL");
    return prep_run(h, sql, run_id);
}

char *kvq_method_params(sqlite3 *h, int64_t run_id, const char *method) {
    sqlite3_stmt *st = prep_run(h,
                                "SELECT ifnull(r.params, '') FROM results r JOIN cases c ON c.id = r.case_id"
                                " WHERE c.run_id = ?1 AND r.method = ?2 LIMIT 1",
                                run_id);
    if (!st) return NULL;
    sqlite3_bind_text(st, 2, method, -1, SQLITE_TRANSIENT);
    char *out = sqlite3_step(st) == SQLITE_ROW ? strdup((const char *)sqlite3_column_text(st, 0)) : NULL;
    sqlite3_finalize(st);
    return out;
}

sqlite3_stmt *kvq_report_left_out(sqlite3 *h, int64_t run_id) {
    return prep_run(h,
                    "SELECT sum(r.status = 'infeasible'), sum(r.status = 'error') FROM results r"
                    " JOIN cases c ON c.id = r.case_id WHERE c.run_id = ?",
                    run_id);
}

sqlite3_stmt *kvq_report_records(sqlite3 *h, int64_t run_id) {
    /* results.gpu_peak_bytes exists from schema version 2 on, fast_decode_peak, rss_peak,
     * the fidelity columns and the load average from 3 on, cases.gpu_driver_peak_bytes
     * from 4 on; older files read as NULL */
    int have_gpu = kvq_has_column(h, "results", "gpu_peak_bytes"), have_v3 = kvq_has_column(h, "results", "fast_decode_peak"),
        have_fid = kvq_has_column(h, "results", "kl"), have_drv = kvq_has_column(h, "cases", "gpu_driver_peak_bytes");
    char sql[1536];
    snprintf(sql, sizeof sql,
             "SELECT ifnull(ru.model, '?'), ifnull(c.workload, ifnull(ru.workload, '?')), c.variant, ifnull(c.ctx, 0),"
             " c.depth, r.method, r.params, r.budget, r.status, r.score, r.fast_peak, r.slow_peak, r.fast_tokens,"
             " r.prefill_s, r.compress_s, r.decode_s, r.decode_tokens, r.tokens_per_s, %s, c.case_key, c.id, %s, %s,"
             " ifnull(ru.git_commit, '?'), ifnull(ru.run_key, ''), %s, %s, %s"
             " FROM results r JOIN cases c ON c.id = r.case_id JOIN runs ru ON ru.id = c.run_id"
             " WHERE ?1 <= 0 OR c.run_id = ?1 ORDER BY c.id, r.id",
             have_gpu ? "r.gpu_peak_bytes" : "NULL",
             have_fid ? "r.ans_nll, r.kl, r.top1, c.load_start, c.load_end" : "NULL, NULL, NULL, NULL, NULL",
             have_v3 ? "r.fast_decode_peak, r.rss_peak" : "NULL, NULL",
             have_gpu ? "c.gpu_peak_bytes" : "NULL",
             have_drv ? "c.gpu_driver_peak_bytes, c.gpu_prefill_ms" : have_gpu ? "NULL, c.gpu_prefill_ms" : "NULL, NULL",
             have_drv ? "r.gpu_driver_peak_bytes" : "NULL");
    return prep_run(h, sql, run_id);
}

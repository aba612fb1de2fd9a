/* Queries about runs: which there are, their identities, and one run's summary. */
#include "query.h"
#include <stddef.h>

static sqlite3_stmt *prep(sqlite3 *h, const char *sql) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return NULL;
    }
    return st;
}

static sqlite3_stmt *prep_run(sqlite3 *h, const char *sql, int64_t run_id) {
    sqlite3_stmt *st = prep(h, sql);
    if (st) sqlite3_bind_int64(st, 1, run_id);
    return st;
}

#define RUN_COLUMNS "SELECT id, run_key, workload, model, git_commit, backend, build_flags, created, seed FROM runs"

sqlite3_stmt *kvq_run_count(sqlite3 *h) { return prep(h, "SELECT count(*), max(id) FROM runs"); }

sqlite3_stmt *kvq_run(sqlite3 *h, int64_t run_id) { return prep_run(h, RUN_COLUMNS " WHERE id = ?", run_id); }

sqlite3_stmt *kvq_runs(sqlite3 *h) { return prep(h, RUN_COLUMNS " ORDER BY id"); }

sqlite3_stmt *kvq_run_ids(sqlite3 *h) { return prep(h, "SELECT id FROM runs ORDER BY id"); }

sqlite3_stmt *kvq_runs_with_results(sqlite3 *h) {
    return prep(h, "SELECT ifnull(git_commit, '?'), ifnull(run_key, '') FROM runs ru WHERE"
                   " EXISTS (SELECT 1 FROM cases c JOIN results r ON r.case_id = c.id WHERE c.run_id = ru.id)");
}

sqlite3_stmt *kvq_run_summary(sqlite3 *h, int64_t run_id) {
    return prep_run(h,
                    "SELECT r.method, r.budget, count(*), sum(r.status = 'ok'),"
                    " avg(CASE WHEN r.status = 'ok' THEN r.score ELSE 0 END), avg(CASE WHEN r.status = 'ok' THEN r.fast_peak END),"
                    " avg(CASE WHEN r.status = 'ok' THEN r.prefill_s END), avg(CASE WHEN r.status = 'ok' THEN r.compress_s END),"
                    " avg(CASE WHEN r.status = 'ok' AND r.decode_tokens > 0 THEN 1000.0 * r.decode_s / r.decode_tokens END),"
                    " avg(CASE WHEN r.status = 'ok' THEN r.fast_decode_peak END), avg(CASE WHEN r.status = 'ok' THEN r.rss_peak END),"
                    " avg(CASE WHEN r.status = 'ok' THEN r.ans_nll END), avg(CASE WHEN r.status = 'ok' THEN r.kl END)"
                    " FROM results r JOIN cases c ON c.id = r.case_id WHERE c.run_id = ? GROUP BY 1, 2",
                    run_id);
}

/* Queries behind kvbench sim --check-run: a model run's measured peaks and what each
 * case's results held. */
#include "query.h"
#include <stddef.h>

static sqlite3_stmt *prep_id(sqlite3 *h, const char *sql, int64_t id, int bind) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return NULL;
    }
    if (bind) sqlite3_bind_int64(st, 1, id);
    return st;
}

sqlite3_stmt *kvq_case_results(sqlite3 *h, int64_t case_id) {
    return prep_id(h, "SELECT method, budget, params FROM results WHERE case_id = ?", case_id, 1);
}

sqlite3_stmt *kvq_case_stores(sqlite3 *h, int64_t case_id) {
    return prep_id(h, "SELECT method, fast_decode_peak + slow_peak FROM results WHERE case_id = ? AND status = 'ok'",
                   case_id, 1);
}

sqlite3_stmt *kvq_rss_results(sqlite3 *h) {
    return prep_id(h,
                   "SELECT c.id, c.prompt_tokens, c.rss_peak, ru.config_json, r.method, r.budget,"
                   " r.fast_decode_peak, r.slow_peak, r.rss_peak FROM results r JOIN cases c ON c.id = r.case_id"
                   " JOIN runs ru ON ru.id = c.run_id WHERE r.status = 'ok' AND r.rss_peak IS NOT NULL"
                   " AND c.prompt_tokens > 0 ORDER BY c.id, r.id",
                   0, 0);
}

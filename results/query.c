/* Which columns and tables a results file has: files from older schema versions lack
 * the newer ones, and the readers ask before they name them. */
#include "query.h"
#include <stddef.h>

static int count_positive(sqlite3 *h, const char *sql, const char *a, const char *b) {
    sqlite3_stmt *st = NULL;
    int have = 0;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, a, -1, SQLITE_STATIC);
        if (b) sqlite3_bind_text(st, 2, b, -1, SQLITE_STATIC);
        have = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) > 0;
    }
    sqlite3_finalize(st);
    return have;
}

int kvq_has_column(sqlite3 *h, const char *table, const char *column) {
    return count_positive(h, "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2", table, column);
}

int kvq_has_table(sqlite3 *h, const char *table) {
    return count_positive(h, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1", table, NULL);
}

/* Table sim_mem: see sim_mem.h. */
#include "sim_mem.h"
#include <sqlite3.h>

int kvdb_sim_mem_table(kv_db *db) {
    return sqlite3_exec(kvdb_sqlite(db),
                        "CREATE TABLE IF NOT EXISTS sim_mem(case_id INTEGER NOT NULL, method TEXT NOT NULL,"
                        " budget REAL NOT NULL, weights REAL, act_prefill REAL, act_decode REAL, stats REAL,"
                        " fast_prefill_peak REAL, total_steady REAL, total_peak REAL, measured_layers INTEGER,"
                        " n_layers INTEGER, batched INTEGER, kv_read REAL, slow_read REAL, cpu_ms REAL, gpu_ms REAL,"
                        " PRIMARY KEY(case_id, method, budget))",
                        NULL, NULL, NULL) == SQLITE_OK
               ? 0
               : -1;
}

int kvdb_sim_mem_put(kv_db *db, const kvdb_sim_mem *r) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(kvdb_sqlite(db), "INSERT OR REPLACE INTO sim_mem VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", -1,
                           &st, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return -1;
    }
    double vals[] = {r->weights, r->act_prefill, r->act_decode, r->stats, r->fast_prefill_peak, r->total_steady,
                     r->total_peak};
    sqlite3_bind_int64(st, 1, r->case_id);
    sqlite3_bind_text(st, 2, r->method, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 3, r->budget);
    for (int k = 0; k < 7; k++) sqlite3_bind_double(st, 4 + k, vals[k]);
    sqlite3_bind_int(st, 11, r->measured_layers);
    sqlite3_bind_int(st, 12, r->n_layers);
    sqlite3_bind_int(st, 13, r->batched);
    sqlite3_bind_double(st, 14, r->kv_read);
    sqlite3_bind_double(st, 15, r->slow_read);
    if (r->cpu_ms >= 0) sqlite3_bind_double(st, 16, r->cpu_ms);
    if (r->gpu_ms >= 0) sqlite3_bind_double(st, 17, r->gpu_ms);
    int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
    sqlite3_finalize(st);
    return rc;
}

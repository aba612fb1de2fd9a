/* Results schema versions 2 (the device columns of cases), 3 (steady fast-tier bytes,
 * measured peak RSS, the prompt hash and token count of cases, the plan table, fidelity metrics, repeated timings,
 * load average) and 4 (the driver's view of the device peak, per case and per result) and the migrations: a version-1 file written here with raw SQL (the old
 * schema, a run, a case, a result) is read as it is by kvdb_open_readonly; kvdb_open
 * migrates it in place through every step (rows kept, the new columns NULL), a second
 * open migrates nothing; a version-2 file and a version-3 file migrate the same way;
 * kvdb_case_gpu, kvdb_case_gpu_driver and kvdb_case_rss store values and NULLs and refuse
 * an unknown case; a fresh file starts at the current version with NULLs for a case that
 * was never measured (a CPU run), and a result's fast_decode_peak / rss_peak /
 * gpu_driver_peak_bytes read back (<= 0: NULL); a file from a newer kvbench is refused;
 * a schema value that is not a whole number ('abc', 2.5, an escape sequence) is refused
 * naming it as stored (not as version 0), one past 32 bits is not read as its low bits,
 * and a refused file is left byte for byte as it was, read-only or read-write. */
#include <sqlite3.h>
#include <unistd.h>
#include "../results/db.h"
#include "check.h"

static const char *v1_sql =
    "CREATE TABLE version(schema INTEGER NOT NULL);"
    "INSERT INTO version VALUES (1);"
    "CREATE TABLE runs(id INTEGER PRIMARY KEY, run_key TEXT NOT NULL UNIQUE,"
    " created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),"
    " config_json TEXT, workload TEXT, model TEXT, git_commit TEXT, build_flags TEXT,"
    " host TEXT, cpu TEXT, backend TEXT, seed INTEGER);"
    "CREATE TABLE cases(id INTEGER PRIMARY KEY,"
    " run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    " case_key TEXT NOT NULL, workload TEXT, ctx INTEGER, depth REAL, variant TEXT,"
    " seed INTEGER, prefill_s REAL, UNIQUE(run_id, case_key));"
    "CREATE TABLE results(id INTEGER PRIMARY KEY,"
    " case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,"
    " method TEXT NOT NULL, params TEXT,"
    " status TEXT NOT NULL CHECK (status IN ('ok','infeasible','error')),"
    " budget REAL NOT NULL, budget_tokens INTEGER,"
    " score REAL, rel_err REAL, prefill_s REAL, compress_s REAL, decode_s REAL,"
    " decode_tokens INTEGER, tokens_per_s REAL,"
    " fast_bytes INTEGER, fast_peak INTEGER, fast_aux_bytes INTEGER,"
    " slow_bytes INTEGER, slow_peak INTEGER, fast_tokens INTEGER, output TEXT,"
    " created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),"
    " UNIQUE(case_id, method, budget));"
    "CREATE TABLE head_stats(result_id INTEGER NOT NULL REFERENCES results(id) ON DELETE CASCADE,"
    " layer INTEGER NOT NULL, head INTEGER NOT NULL, kept REAL, events REAL, PRIMARY KEY(result_id, layer, head));"
    "CREATE TABLE layer_err(result_id INTEGER NOT NULL REFERENCES results(id) ON DELETE CASCADE,"
    " layer INTEGER NOT NULL, rel_err REAL, PRIMARY KEY(result_id, layer));";

static int raw_exec(const char *path, const char *sql) {
    sqlite3 *h = NULL;
    int rc = sqlite3_open(path, &h) == SQLITE_OK && sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
    if (rc) fprintf(stderr, "raw sql on %s: %s\n", path, h ? sqlite3_errmsg(h) : "open failed");
    sqlite3_close(h);
    return rc;
}

/* One integer (or -1 for NULL, -2 on error) from a query. */
static long long q_int(kv_db *db, const char *sql) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(kvdb_sqlite(db), sql, -1, &st, NULL) != SQLITE_OK) return -2;
    long long v = -2;
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_type(st, 0) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static double q_real(kv_db *db, const char *sql) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(kvdb_sqlite(db), sql, -1, &st, NULL) != SQLITE_OK) return -2;
    double v = -2;
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_type(st, 0) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    return v;
}

int main(void) {
    test_seed();
    char dir[] = "/tmp/kvbench-migrate-XXXXXX";
    if (!mkdtemp(dir)) return 2;
    char v1[256], v2[256], fresh[256], future[256], err[512];
    snprintf(v1, sizeof v1, "%s/v1.db", dir);
    snprintf(v2, sizeof v2, "%s/v2.db", dir);
    snprintf(fresh, sizeof fresh, "%s/fresh.db", dir);
    snprintf(future, sizeof future, "%s/future.db", dir);
    long long prefill_bits = test_int(1, 1 << 30);
    char rows[512];
    snprintf(rows, sizeof rows,
             "INSERT INTO runs(run_key, backend) VALUES ('k1', 'cpu');"
             "INSERT INTO cases(run_id, case_key, ctx, prefill_s) VALUES (1, 'c1', 1024, %lld);"
             "INSERT INTO results(case_id, method, status, budget, score) VALUES (1, 'fullkv', 'ok', 1, 0.5);",
             prefill_bits);
    CHECK(raw_exec(v1, v1_sql) == 0 && raw_exec(v1, rows) == 0, "writing a version-1 file");

    /* read-only: version 1 as it is */
    kv_db *db = kvdb_open_readonly(v1, err, sizeof err);
    CHECK(db != NULL, "read-only open of a version-1 file: %s", err);
    if (db) {
        CHECK(kvdb_schema_version(db) == 1, "read-only version %d", kvdb_schema_version(db));
        CHECK(q_int(db, "SELECT count(*) FROM results r JOIN cases c ON c.id = r.case_id") == 1, "rows of the old file");
        CHECK(q_int(db, "SELECT count(*) FROM pragma_table_info('cases') WHERE name LIKE 'gpu_%'") == 0,
              "a read-only open must not change the file");
        kvdb_close(db);
    }

    /* read-write: migrated in place, twice is harmless */
    for (int round = 0; round < 2; round++) {
        db = kvdb_open(v1, err, sizeof err);
        CHECK(db != NULL, "open (round %d) of the version-1 file: %s", round, err);
        if (!db) break;
        CHECK(kvdb_schema_version(db) == KVDB_SCHEMA_VERSION && q_int(db, "SELECT schema FROM version") == KVDB_SCHEMA_VERSION &&
                  q_int(db, "SELECT count(*) FROM version") == 1,
              "round %d: version %d", round, kvdb_schema_version(db));
        CHECK(q_int(db, "SELECT count(*) FROM pragma_table_info('results') WHERE name IN "
                        "('fast_decode_peak','rss_peak')") == 2 &&
                  q_int(db, "SELECT count(*) FROM pragma_table_info('cases') WHERE name = 'rss_peak'") == 1,
              "round %d: the version-3 columns", round);
        CHECK(q_int(db, "SELECT count(*) FROM pragma_table_info('cases') WHERE name IN "
                        "('gpu_peak_bytes','gpu_used_bytes','gpu_prefill_ms')") == 3,
              "round %d: the device columns", round);
        CHECK(q_int(db, "SELECT count(*) FROM cases WHERE id = 1 AND prompt_sha256 IS NULL AND prompt_tokens IS NULL") == 1,
              "round %d: an old case's prompt columns must be NULL", round);
        CHECK(q_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'plan'") == 1 &&
                  q_int(db, "SELECT count(*) FROM plan") == 0,
              "round %d: the plan table (v3), empty for an old run", round);
        CHECK(q_int(db, "SELECT prefill_s FROM cases WHERE id = 1") == prefill_bits &&
                  q_real(db, "SELECT score FROM results") == 0.5 && q_int(db, "SELECT count(*) FROM runs") == 1,
              "round %d: the old rows changed", round);
        if (round == 0)
            CHECK(q_int(db, "SELECT rss_peak FROM cases WHERE id = 1") == -1 &&
                      q_int(db, "SELECT fast_decode_peak FROM results") == -1 &&
                      q_int(db, "SELECT rss_peak FROM results") == -1,
                  "an old case's and result's version-3 columns must be NULL");
        if (round == 0)
            CHECK(q_int(db, "SELECT gpu_peak_bytes FROM cases WHERE id = 1") == -1 &&
                      q_int(db, "SELECT gpu_used_bytes FROM cases WHERE id = 1") == -1 &&
                      q_real(db, "SELECT gpu_prefill_ms FROM cases WHERE id = 1") == -1,
                  "an old case's device columns must be NULL");
        /* version 3: the fidelity and repeat columns of results, the load of cases, NULL in old rows */
        CHECK(q_int(db, "SELECT count(*) FROM pragma_table_info('results') WHERE name IN ('ans_tokens','ans_nll',"
                        "'fid_steps','kl','top1','repeats','compress_spread','decode_spread')") == 8 &&
                  q_int(db, "SELECT count(*) FROM pragma_table_info('cases') WHERE name IN ('load_start','load_end')") == 2,
              "round %d: the version-3 columns", round);
        if (round == 0)
            CHECK(q_int(db, "SELECT count(*) FROM results WHERE ans_nll IS NULL AND kl IS NULL AND top1 IS NULL AND"
                            " repeats IS NULL") == 1, "an old result's version-3 columns must be NULL");
        double l0 = test_unif() * 8, l1 = test_unif() * 8;
        CHECK(kvdb_case_load(db, 1, l0, l1) == 0 && q_real(db, "SELECT load_start FROM cases WHERE id = 1") == l0 &&
                  q_real(db, "SELECT load_end FROM cases WHERE id = 1") == l1,
              "load average read back differs: %s", kvdb_errmsg(db));
        CHECK(kvdb_case_load(db, 99, 1, 1) == -1 && strstr(kvdb_errmsg(db), "no such case"), "load of an unknown case");
        /* values, then NULLs */
        long long peak = (long long)test_int(1, 1 << 30) << 8, used = (long long)test_int(1, 1 << 30) << 9;
        double ms = test_unif() * 1e4;
        CHECK(kvdb_case_gpu(db, 1, peak, used, ms) == 0, "kvdb_case_gpu: %s", kvdb_errmsg(db));
        CHECK(q_int(db, "SELECT gpu_peak_bytes FROM cases WHERE id = 1") == peak &&
                  q_int(db, "SELECT gpu_used_bytes FROM cases WHERE id = 1") == used &&
                  q_real(db, "SELECT gpu_prefill_ms FROM cases WHERE id = 1") == ms,
              "device values read back differ");
        if (round == 1) {
            CHECK(kvdb_case_gpu(db, 1, -1, -1, NAN) == 0, "kvdb_case_gpu with NULLs: %s", kvdb_errmsg(db));
            CHECK(q_int(db, "SELECT gpu_peak_bytes FROM cases WHERE id = 1") == -1 &&
                      q_real(db, "SELECT gpu_prefill_ms FROM cases WHERE id = 1") == -1,
                  "negative / NaN must store NULL");
        }
        CHECK(kvdb_case_gpu(db, 99, 1, 1, 1.0) == -1 && strstr(kvdb_errmsg(db), "no such case") &&
                  strstr(kvdb_errmsg(db), v1),
              "an unknown case: got '%s'", kvdb_errmsg(db));
        long long rss = (long long)test_int(1, 1 << 30) << 10;
        CHECK(kvdb_case_rss(db, 1, rss) == 0 && q_int(db, "SELECT rss_peak FROM cases WHERE id = 1") == rss,
              "kvdb_case_rss: %s", kvdb_errmsg(db));
        CHECK(kvdb_case_rss(db, 1, -1) == 0 && q_int(db, "SELECT rss_peak FROM cases WHERE id = 1") == -1,
              "kvdb_case_rss(-1) must store NULL");
        CHECK(kvdb_case_rss(db, 99, 1) == -1 && strstr(kvdb_errmsg(db), "no such case"), "rss of an unknown case: '%s'",
              kvdb_errmsg(db));
        /* version 4: the driver's view of the prefill's device peak, NULL in old rows */
        if (round == 0)
            CHECK(q_int(db, "SELECT gpu_driver_peak_bytes FROM cases WHERE id = 1") == -1 &&
                      q_int(db, "SELECT gpu_driver_peak_bytes FROM results") == -1,
                  "an old case's and result's driver peak must be NULL");
        long long drv = (long long)test_int(1, 1 << 30) << 11;
        CHECK(kvdb_case_gpu_driver(db, 1, drv) == 0 && q_int(db, "SELECT gpu_driver_peak_bytes FROM cases WHERE id = 1") == drv,
              "kvdb_case_gpu_driver: %s", kvdb_errmsg(db));
        CHECK(kvdb_case_gpu_driver(db, 1, 0) == 0 && q_int(db, "SELECT gpu_driver_peak_bytes FROM cases WHERE id = 1") == -1,
              "kvdb_case_gpu_driver(0) must store NULL");
        CHECK(kvdb_case_gpu_driver(db, 99, 1) == -1 && strstr(kvdb_errmsg(db), "no such case"),
              "driver peak of an unknown case: '%s'", kvdb_errmsg(db));
        kvdb_close(db);
    }

    /* a version-2 file (version 1 plus the device columns) migrates to the current version */
    CHECK(raw_exec(v2, v1_sql) == 0 && raw_exec(v2, rows) == 0 &&
              raw_exec(v2, "ALTER TABLE cases ADD COLUMN gpu_peak_bytes INTEGER;"
                           "ALTER TABLE cases ADD COLUMN gpu_used_bytes INTEGER;"
                           "ALTER TABLE cases ADD COLUMN gpu_prefill_ms REAL;"
                           "ALTER TABLE results ADD COLUMN gpu_peak_bytes INTEGER;"
                           "UPDATE version SET schema = 2;") == 0,
          "writing a version-2 file");
    db = kvdb_open_readonly(v2, err, sizeof err);
    CHECK(db && kvdb_schema_version(db) == 2, "read-only open of a version-2 file: %s", db ? "" : err);
    kvdb_close(db);
    db = kvdb_open(v2, err, sizeof err);
    CHECK(db && kvdb_schema_version(db) == KVDB_SCHEMA_VERSION && q_int(db, "SELECT schema FROM version") == KVDB_SCHEMA_VERSION &&
              q_int(db, "SELECT count(*) FROM pragma_table_info('cases') WHERE name = 'gpu_driver_peak_bytes'") == 1 &&
              q_int(db, "SELECT count(*) FROM pragma_table_info('results') WHERE name = 'rss_peak'") == 1 &&
              q_int(db, "SELECT count(*) FROM pragma_table_info('cases') WHERE name IN ('prompt_sha256','prompt_tokens')") == 2 &&
              q_int(db, "SELECT prefill_s FROM cases WHERE id = 1") == prefill_bits,
          "version 2 -> %d: %s", KVDB_SCHEMA_VERSION, db ? kvdb_errmsg(db) : err);
    kvdb_close(db);

    /* a version-3 file (the version-4 columns dropped from the file above) migrates to 4,
     * its device columns kept and the driver's peak NULL */
    CHECK(raw_exec(v2, "UPDATE cases SET gpu_peak_bytes = 4096 WHERE id = 1;"
                       "ALTER TABLE cases DROP COLUMN gpu_driver_peak_bytes;"
                       "ALTER TABLE results DROP COLUMN gpu_driver_peak_bytes;"
                       "UPDATE version SET schema = 3;") == 0,
          "writing a version-3 file");
    db = kvdb_open_readonly(v2, err, sizeof err);
    CHECK(db && kvdb_schema_version(db) == 3, "read-only open of a version-3 file: %s", db ? "" : err);
    kvdb_close(db);
    db = kvdb_open(v2, err, sizeof err);
    CHECK(db && kvdb_schema_version(db) == 4 && q_int(db, "SELECT schema FROM version") == 4 &&
              q_int(db, "SELECT gpu_peak_bytes FROM cases WHERE id = 1") == 4096 &&
              q_int(db, "SELECT gpu_driver_peak_bytes FROM cases WHERE id = 1") == -1 &&
              q_int(db, "SELECT gpu_driver_peak_bytes FROM results") == -1 &&
              q_int(db, "SELECT prefill_s FROM cases WHERE id = 1") == prefill_bits,
          "version 3 -> 4: %s", db ? kvdb_errmsg(db) : err);
    kvdb_close(db);

    /* a fresh file: the current version, a case never measured has NULLs */
    db = kvdb_open(fresh, err, sizeof err);
    CHECK(db != NULL, "fresh file: %s", err);
    if (db) {
        kvdb_run run = {.run_key = "fresh", .backend = "cpu"};
        int64_t rid = kvdb_run_begin(db, &run, NULL);
        kvdb_case kc = {.case_key = "c", .workload = "niah", .ctx = 512, .depth = 0.5, .prefill_s = 1.25,
                        .prompt_sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", .prompt_tokens = 77};
        int64_t cid = rid > 0 ? kvdb_case_get(db, rid, &kc) : -1;
        CHECK(kvdb_schema_version(db) == KVDB_SCHEMA_VERSION && cid > 0, "fresh file: version %d, case %lld (%s)", kvdb_schema_version(db),
              (long long)cid, kvdb_errmsg(db));
        CHECK(q_int(db, "SELECT count(*) FROM cases WHERE gpu_peak_bytes IS NULL AND gpu_used_bytes IS NULL AND "
                        "gpu_prefill_ms IS NULL AND rss_peak IS NULL AND gpu_driver_peak_bytes IS NULL") == 1,
              "a CPU case must have NULL device columns");
        long long dec = (long long)test_int(1, 1 << 30) << 4, rss = (long long)test_int(1, 1 << 30) << 12;
        kvdb_result a = {.method = "snapkv", .status = "ok", .budget = 0.1, .score = 1, .fast_decode_peak = dec,
                         .rss_peak = rss, .gpu_driver_peak_bytes = rss + 1};
        kvdb_result b = {.method = "h2o", .status = "ok", .budget = 0.1, .score = 0, .fast_decode_peak = 0,
                         .rss_peak = -5};
        CHECK(kvdb_result_put(db, cid, &a) == 0 && kvdb_result_put(db, cid, &b) == 0, "results: %s", kvdb_errmsg(db));
        CHECK(q_int(db, "SELECT fast_decode_peak FROM results WHERE method = 'snapkv'") == dec &&
                  q_int(db, "SELECT rss_peak FROM results WHERE method = 'snapkv'") == rss &&
                  q_int(db, "SELECT fast_decode_peak FROM results WHERE method = 'h2o'") == -1 &&
                  q_int(db, "SELECT rss_peak FROM results WHERE method = 'h2o'") == -1 &&
                  q_int(db, "SELECT gpu_driver_peak_bytes FROM results WHERE method = 'snapkv'") == rss + 1 &&
                  q_int(db, "SELECT gpu_driver_peak_bytes FROM results WHERE method = 'h2o'") == -1,
              "fast_decode_peak / rss_peak / gpu_driver_peak_bytes read back (or NULL for <= 0)");
        CHECK(q_int(db, "SELECT count(*) FROM cases WHERE prompt_sha256 = "
                        "'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' AND prompt_tokens = 77") == 1,
              "the prompt columns as given");
        kvdb_close(db);
    }

    /* a newer file is refused, naming the version */
    CHECK(raw_exec(future, v1_sql) == 0 && raw_exec(future, "UPDATE version SET schema = 99") == 0, "future file");
    db = kvdb_open_readonly(future, err, sizeof err);
    CHECK(!db && strstr(err, "schema version 99") && strstr(err, future), "version 99 read-only: got '%s'", db ? "" : err);
    kvdb_close(db);
    db = kvdb_open(future, err, sizeof err);
    CHECK(!db && strstr(err, "schema version 99"), "version 99 read-write: got '%s'", db ? "" : err);
    kvdb_close(db);

    /* a schema value that is not a whole number is named as stored, not read as 0; one
     * past 32 bits is not read as its low bits (2^32 + 3 is not version 3); the file is
     * left as it was */
    const char *odd[][2] = {{"'abc'", "schema version 'abc' is not a whole number"},
                            {"2.5", "schema version '2.5' is not a whole number"},
                            {"char(27) || '[31mx'", "schema version '\\x1b[31mx' is not a whole number"},
                            {"4294967299", "schema version 4294967299, this kvbench reads versions 1 to"}};
    for (int k = 0; k < 4; k++) {
        char sql[128], before[1 << 14], after[1 << 14];
        unlink(future);
        snprintf(sql, sizeof sql, "UPDATE version SET schema = %s", odd[k][0]);
        CHECK(raw_exec(future, v1_sql) == 0 && raw_exec(future, sql) == 0, "%s", sql);
        FILE *f = fopen(future, "rb");
        size_t nb = f ? fread(before, 1, sizeof before, f) : 0;
        if (f) fclose(f);
        for (int rw = 0; rw < 2; rw++) {
            db = rw ? kvdb_open(future, err, sizeof err) : kvdb_open_readonly(future, err, sizeof err);
            CHECK(!db && strstr(err, odd[k][1]) && strstr(err, future), "schema %s (%s): got '%s'", odd[k][0],
                  rw ? "read-write" : "read-only", db ? "(opened)" : err);
            kvdb_close(db);
        }
        f = fopen(future, "rb");
        size_t na = f ? fread(after, 1, sizeof after, f) : 0;
        if (f) fclose(f);
        CHECK(nb > 0 && na == nb && !memcmp(before, after, nb), "schema %s: the file changed", odd[k][0]);
    }

    const char *names[] = {v1, v2, fresh, future};
    for (int i = 0; i < 4; i++) {
        char side[300];
        unlink(names[i]);
        snprintf(side, sizeof side, "%s-wal", names[i]);
        unlink(side);
        snprintf(side, sizeof side, "%s-shm", names[i]);
        unlink(side);
    }
    rmdir(dir);
    return check_done("test_db_migrate");
}

/* The results database: SQLite in WAL mode, one transaction per result so that a killed
 * run keeps everything it committed and resumes where it stopped. All values go through
 * bound parameters of prepared statements. */
#include "db.h"
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct kv_db {
    sqlite3 *h;
    char *path;
    char shown[160];   /* the path as messages show it: a long one shortened in the middle */
    char err[512];
    sqlite3_stmt *run_find, *run_add, *case_find, *case_add, *res_exists, *res_add, *head_add, *layer_add, *res_v3;
    int version;
    int writable;      /* opened by kvdb_open and its schema is in place */
};

/* Version 3: the run's plan, every (case, method, budget) a command asked for, sharded or
 * not, so that `kvbench merge` can tell which results are still missing. */
#define PLAN_SQL                                                                              \
    "CREATE TABLE IF NOT EXISTS plan("                                                        \
    " run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"                         \
    " case_key TEXT NOT NULL, method TEXT NOT NULL, budget REAL NOT NULL,"                    \
    " PRIMARY KEY(run_id, case_key, method, budget)) WITHOUT ROWID;"

static const char *schema_sql =
    "CREATE TABLE IF NOT EXISTS version(schema INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS runs("
    " id INTEGER PRIMARY KEY,"
    " run_key TEXT NOT NULL UNIQUE,"
    " created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),"
    " config_json TEXT, workload TEXT, model TEXT, git_commit TEXT, build_flags TEXT,"
    " host TEXT, cpu TEXT, backend TEXT, seed INTEGER);"
    "CREATE TABLE IF NOT EXISTS cases("
    " id INTEGER PRIMARY KEY,"
    " run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    " case_key TEXT NOT NULL, workload TEXT, ctx INTEGER, depth REAL, variant TEXT,"
    " seed INTEGER, prefill_s REAL,"
    " gpu_peak_bytes INTEGER, gpu_used_bytes INTEGER, gpu_prefill_ms REAL, rss_peak INTEGER,"
    " prompt_sha256 TEXT, prompt_tokens INTEGER, load_start REAL, load_end REAL, gpu_driver_peak_bytes INTEGER,"
    " UNIQUE(run_id, case_key));"
    "CREATE TABLE IF NOT EXISTS results("
    " id INTEGER PRIMARY KEY,"
    " case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,"
    " method TEXT NOT NULL, params TEXT,"
    " status TEXT NOT NULL CHECK (status IN ('ok','infeasible','error')),"
    " budget REAL NOT NULL, budget_tokens INTEGER,"
    " score REAL, rel_err REAL, prefill_s REAL, compress_s REAL, decode_s REAL,"
    " decode_tokens INTEGER, tokens_per_s REAL,"
    " fast_bytes INTEGER, fast_peak INTEGER, fast_aux_bytes INTEGER,"
    " slow_bytes INTEGER, slow_peak INTEGER, fast_tokens INTEGER,"
    " output TEXT, gpu_peak_bytes INTEGER, fast_decode_peak INTEGER, rss_peak INTEGER,"
    " ans_tokens INTEGER, ans_nll REAL, fid_steps INTEGER, kl REAL, top1 REAL, repeats INTEGER,"
    " compress_spread REAL, decode_spread REAL, gpu_driver_peak_bytes INTEGER,"
    " created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),"
    " UNIQUE(case_id, method, budget));"
    "CREATE TABLE IF NOT EXISTS head_stats("
    " result_id INTEGER NOT NULL REFERENCES results(id) ON DELETE CASCADE,"
    " layer INTEGER NOT NULL, head INTEGER NOT NULL, kept REAL, events REAL,"
    " PRIMARY KEY(result_id, layer, head));"
    "CREATE TABLE IF NOT EXISTS layer_err("
    " result_id INTEGER NOT NULL REFERENCES results(id) ON DELETE CASCADE,"
    " layer INTEGER NOT NULL, rel_err REAL,"
    " PRIMARY KEY(result_id, layer));"
    PLAN_SQL;

/* Version 1 -> 2: the device columns of cases and results (NULL for the rows already there). */
static const char *migrate_v2_sql =
    "ALTER TABLE cases ADD COLUMN gpu_peak_bytes INTEGER;"
    "ALTER TABLE cases ADD COLUMN gpu_used_bytes INTEGER;"
    "ALTER TABLE cases ADD COLUMN gpu_prefill_ms REAL;"
    "ALTER TABLE results ADD COLUMN gpu_peak_bytes INTEGER;"
    "UPDATE version SET schema = 2;";

/* Version 2 -> 3: steady (decode-time) fast-tier bytes and the measured peak RSS; each
 * case's prompt, as SHA-256 of its exact text and its token count (NULL for the rows
 * already there); the plan table (empty for the runs already there: their plan is
 * unknown); the fidelity metrics and repeated timings of results, the load average of
 * cases. */
static const char *migrate_v3_sql =
    "ALTER TABLE results ADD COLUMN fast_decode_peak INTEGER;"
    "ALTER TABLE results ADD COLUMN rss_peak INTEGER;"
    "ALTER TABLE cases ADD COLUMN rss_peak INTEGER;"
    "ALTER TABLE cases ADD COLUMN prompt_sha256 TEXT;"
    "ALTER TABLE cases ADD COLUMN prompt_tokens INTEGER;"
    "ALTER TABLE results ADD COLUMN ans_tokens INTEGER;"
    "ALTER TABLE results ADD COLUMN ans_nll REAL;"
    "ALTER TABLE results ADD COLUMN fid_steps INTEGER;"
    "ALTER TABLE results ADD COLUMN kl REAL;"
    "ALTER TABLE results ADD COLUMN top1 REAL;"
    "ALTER TABLE results ADD COLUMN repeats INTEGER;"
    "ALTER TABLE results ADD COLUMN compress_spread REAL;"
    "ALTER TABLE results ADD COLUMN decode_spread REAL;"
    "ALTER TABLE cases ADD COLUMN load_start REAL;"
    "ALTER TABLE cases ADD COLUMN load_end REAL;"
    PLAN_SQL "UPDATE version SET schema = 3;";

/* Version 3 -> 4: the driver's view of the device peak, per case and per result. */
static const char *migrate_v4_sql =
    "ALTER TABLE cases ADD COLUMN gpu_driver_peak_bytes INTEGER;"
    "ALTER TABLE results ADD COLUMN gpu_driver_peak_bytes INTEGER;"
    "UPDATE version SET schema = 4;";

/* migrate_sql[v]: version v to v + 1. */
static const char *const *migrate_sql[] = {NULL, &migrate_v2_sql, &migrate_v3_sql, &migrate_v4_sql};

/* "results db 'F': what: sqlite message" into db->err (after a failed SQLite call). */
static void fail(kv_db *db, const char *what, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, what);
    vsnprintf(msg, sizeof msg, what, ap);
    va_end(ap);
    snprintf(db->err, sizeof db->err, "results db '%s': %s: %s", db->shown, msg,
             db->h ? sqlite3_errmsg(db->h) : "out of memory");
}

/* "results db 'F': what" for bad arguments, where SQLite has nothing to add. */
static void refuse(kv_db *db, const char *what, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, what);
    vsnprintf(msg, sizeof msg, what, ap);
    va_end(ap);
    snprintf(db->err, sizeof db->err, "results db '%s': %s", db->shown, msg);
}

static int exec(kv_db *db, const char *sql) {
    char *e = NULL;
    if (sqlite3_exec(db->h, sql, NULL, NULL, &e) != SQLITE_OK) {
        snprintf(db->err, sizeof db->err, "results db '%s': %s", db->shown, e ? e : sqlite3_errmsg(db->h));
        sqlite3_free(e);
        return -1;
    }
    return 0;
}

/* Switching a closed file (left in rollback mode) back to WAL takes an exclusive lock. Two
 * processes opening it at once (--jobs, shards) can each hold a shared lock while asking for
 * it, and SQLite then answers one SQLITE_BUSY at once instead of waiting: retry (10 s). */
static int set_wal(kv_db *db) {
    for (int i = 0; i < 200; i++) {
        int rc = sqlite3_exec(db->h, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
        if (rc == SQLITE_OK) return 0;
        if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED) break;
        usleep(50 * 1000);
    }
    return exec(db, "PRAGMA journal_mode=WAL");
}


/* path for a message, at most n-1 bytes: a longer one keeps its first 40 and last
 * bytes around "...", so the reason after it is never cut off (the cuts are moved to
 * UTF-8 character boundaries). */
static void shorten_path(const char *path, char *out, size_t n) {
    size_t len = strlen(path);
    if (len < n) {
        memcpy(out, path, len + 1);
        return;
    }
    size_t head = 40, tail = n - 1 - head - 3;
    while (head > 0 && ((unsigned char)path[head] & 0xC0) == 0x80) head--;
    const char *t = path + len - tail;
    while (*t && ((unsigned char)*t & 0xC0) == 0x80) t++;
    snprintf(out, n, "%.*s...%s", (int)head, path, t);
}

/* A reason a path cannot be a results file, found before SQLite gives its terse one. */
static const char *path_problem(const char *path, int must_exist) {
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return "is a directory, not a results file";
        if (!S_ISREG(st.st_mode)) return "is not a regular file";
        return NULL;
    }
    if (errno != ENOENT) return strerror(errno);
    if (must_exist) return "no such file";
    char *copy = strdup(path);
    if (!copy) return "out of memory";
    const char *dir = dirname(copy);
    const char *why = NULL;
    if (stat(dir, &st) != 0) why = "its directory does not exist";
    else if (!S_ISDIR(st.st_mode)) why = "its parent is not a directory";
    else if (access(dir, W_OK) != 0) why = "its directory is not writable";
    free(copy);
    return why;
}

/* "file:PATH?immutable=1" with PATH percent-encoded, for sqlite3_open_v2 with
 * SQLITE_OPEN_URI. Caller frees. */
static char *immutable_uri(const char *path) {
    size_t n = strlen(path);
    char *u = malloc(3 * n + 32), *w = u;
    if (!u) return NULL;
    w += sprintf(w, "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("/._-~", *p))
            *w++ = (char)*p;
        else
            w += sprintf(w, "%%%02X", *p);
    }
    strcpy(w, "?immutable=1");
    return u;
}

/* Whether PATH-wal exists and is not empty: committed results not yet in the file. */
static int wal_pending(const char *path) {
    char *w = malloc(strlen(path) + 5);
    struct stat st;
    if (!w) return 1;
    sprintf(w, "%s-wal", path);
    int pending = stat(w, &st) == 0 && st.st_size > 0;
    free(w);
    return pending;
}

/* 1 if the open file holds tables and none of them is kvbench's version table: someone
 * else's SQLite file, refused rather than adopted. */
static int foreign_file(kv_db *db, int *has_version) {
    sqlite3_stmt *st = NULL;
    int other = 0, ours = 0;
    if (sqlite3_prepare_v2(db->h, "SELECT name FROM sqlite_master WHERE type = 'table'", -1, &st, NULL) != SQLITE_OK)
        return 0;                                  /* unreadable: the schema step reports it */
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        if (name && !strcmp(name, "version")) ours = 1;
        else if (name && strncmp(name, "sqlite_", 7)) other = 1;
    }
    sqlite3_finalize(st);
    *has_version = ours;
    return other && !ours;
}

static void finalize_all(kv_db *db) {
    sqlite3_stmt **s[] = {&db->run_find, &db->run_add, &db->case_find, &db->case_add,
                          &db->res_exists, &db->res_add, &db->head_add, &db->layer_add, &db->res_v3};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        sqlite3_finalize(*s[i]);
        *s[i] = NULL;
    }
}

void kvdb_close(kv_db *db) {
    if (!db) return;
    finalize_all(db);
    /* Left in rollback-journal mode, a closed file opens read-only from anywhere (WAL
     * mode needs a writable directory for its -shm file). Only the last connection can
     * switch; with others still open this fails at once and they switch when they close. */
    if (db->writable) {
        sqlite3_busy_timeout(db->h, 0);
        sqlite3_exec(db->h, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL);
    }
    sqlite3_close(db->h);
    free(db->path);
    free(db);
}

static int prepare(kv_db *db, sqlite3_stmt **st, const char *sql) {
    if (sqlite3_prepare_v2(db->h, sql, -1, st, NULL) != SQLITE_OK) {
        fail(db, "preparing a statement");
        return -1;
    }
    return 0;
}

/* Reads the schema version into db->version; -1 with db->err set when the file is not
 * ours, or of a version this kvbench cannot use (older ones are fine for reading). */
static int check_version(kv_db *db, int readonly) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->h, "SELECT schema FROM version", -1, &st, NULL) != SQLITE_OK) {
        /* Only a readable file without the table is foreign; an I/O or locking failure
         * (a read-only directory, a full disk) is reported as what it is. */
        int code = sqlite3_errcode(db->h);
        fail(db, code == SQLITE_ERROR || code == SQLITE_NOTADB ? "not a kvbench results file" : "cannot read the file");
        return -1;
    }
    int rc = sqlite3_step(st);
    sqlite3_int64 v = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;   /* not _int: 2^32+3 is not 3 */
    /* the value as stored, for the message: 'abc', 2.5 or NULL is not "schema version 0" */
    char shown[64] = "";
    int whole = rc == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_INTEGER;
    if (rc == SQLITE_ROW && !whole) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        size_t k = 0;
        if (!t) snprintf(shown, sizeof shown, "NULL");
        for (; t && *t && k + 8 < sizeof shown; t++)   /* printable ASCII as is, other bytes as \xNN */
            k += (size_t)snprintf(shown + k, sizeof shown - k, *t >= 0x20 && *t < 0x7f ? "%c" : "\\x%02x", *t);
        if (t && *t) snprintf(shown + k, sizeof shown - k, "...");
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW) {
        refuse(db, "not a kvbench results file (no schema version)");
        return -1;
    }
    if (!whole) {
        refuse(db, "schema version '%s' is not a whole number; this kvbench reads versions 1 to %d", shown,
               KVDB_SCHEMA_VERSION);
        return -1;
    }
    if (v != KVDB_SCHEMA_VERSION && !(readonly && v >= 1 && v < KVDB_SCHEMA_VERSION)) {
        refuse(db, "schema version %lld, this kvbench reads versions 1 to %d", (long long)v, KVDB_SCHEMA_VERSION);
        return -1;
    }
    db->version = (int)v;
    return 0;
}

static kv_db *open_common(const char *path, int readonly, char *err, size_t errlen) {
    if (!path || !*path) {
        snprintf(err, errlen, "results db: no file name given");
        return NULL;
    }
    char shown[sizeof ((kv_db *)0)->shown];
    shorten_path(path, shown, sizeof shown);
    const char *why = path_problem(path, readonly);
    if (why) {
        snprintf(err, errlen, "results db '%s': %s", shown, why);
        return NULL;
    }
    kv_db *db = calloc(1, sizeof *db);
    if (!db || !(db->path = strdup(path))) {
        free(db);
        snprintf(err, errlen, "results db '%s': out of memory", shown);
        return NULL;
    }
    memcpy(db->shown, shown, sizeof shown);
    int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (sqlite3_open_v2(path, &db->h, flags, NULL) != SQLITE_OK) {
        fail(db, "cannot open");
        goto bad;
    }
    sqlite3_extended_result_codes(db->h, 1);
    sqlite3_busy_timeout(db->h, 10000);
    if (readonly) {
        if (exec(db, "PRAGMA foreign_keys=ON") == 0 && check_version(db, 1) == 0) return db;
        /* A WAL-mode file in a directory we cannot write: SQLite cannot make the -shm
         * file it reads through. With no committed pages waiting in a -wal file the
         * main file is complete: read it as immutable. */
        int code = sqlite3_extended_errcode(db->h);
        if ((code & 0xff) != SQLITE_CANTOPEN && (code & 0xff) != SQLITE_READONLY) goto bad;
        if (wal_pending(path)) {
            refuse(db, "cannot read: its -wal file holds commits and the directory is not writable (%s)",
                   sqlite3_errmsg(db->h));
            goto bad;
        }
        char *uri = immutable_uri(path);
        sqlite3_close(db->h);
        db->h = NULL;
        int orc = uri ? sqlite3_open_v2(uri, &db->h, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) : SQLITE_NOMEM;
        free(uri);
        if (orc != SQLITE_OK) {
            fail(db, "cannot open");
            goto bad;
        }
        sqlite3_extended_result_codes(db->h, 1);
        if (exec(db, "PRAGMA foreign_keys=ON") || check_version(db, 1)) goto bad;
        return db;
    }
    int has_version = 0;
    if (foreign_file(db, &has_version)) {
        refuse(db, "not a kvbench results file (an SQLite file with other tables); refused, nothing written");
        goto bad;
    }
    /* a version that is not a whole number, or newer: refused before anything is written */
    if (has_version && check_version(db, 1)) goto bad;
    /* synchronous=NORMAL in WAL keeps every commit across a process crash (kill -9);
     * only a power loss can drop the last commits. */
    if (set_wal(db) || exec(db, "PRAGMA synchronous=NORMAL") ||
        exec(db, "PRAGMA foreign_keys=ON"))
        goto bad;
    if (exec(db, "BEGIN IMMEDIATE")) goto bad;
    if (exec(db, schema_sql)) {
        sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
        goto bad;
    }
    sqlite3_stmt *st = NULL;
    int have = 0;
    if (prepare(db, &st, "SELECT count(*) FROM version") == 0) {
        if (sqlite3_step(st) == SQLITE_ROW) have = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    if (!have) {
        if (prepare(db, &st, "INSERT INTO version(schema) VALUES (?)") == 0) {
            sqlite3_bind_int(st, 1, KVDB_SCHEMA_VERSION);
            int rc = sqlite3_step(st);
            sqlite3_finalize(st);
            if (rc != SQLITE_DONE) fail(db, "writing the schema version");
            else have = 1;
        }
        if (!have) {
            sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
            goto bad;
        }
    }
    {   /* migrate an older file inside this transaction (one process does), step by step */
        int v = 0;
        if (prepare(db, &st, "SELECT schema FROM version") == 0) {
            if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int(st, 0);
            sqlite3_finalize(st);
        }
        for (int k = v; k >= 1 && k < KVDB_SCHEMA_VERSION; k++)
            if (exec(db, *migrate_sql[k])) {
                sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
                goto bad;
            }
    }
    if (exec(db, "COMMIT")) goto bad;
    if (check_version(db, 0)) goto bad;
    db->writable = 1;
    if (prepare(db, &db->run_find, "SELECT id FROM runs WHERE run_key = ?") ||
        prepare(db, &db->run_add,
                "INSERT INTO runs(run_key, config_json, workload, model, git_commit, build_flags, host, cpu,"
                " backend, seed) VALUES (?,?,?,?,?,?,?,?,?,?)") ||
        prepare(db, &db->case_find, "SELECT id FROM cases WHERE run_id = ? AND case_key = ?") ||
        prepare(db, &db->case_add,
                "INSERT INTO cases(run_id, case_key, workload, ctx, depth, variant, seed, prefill_s,"
                " prompt_sha256, prompt_tokens) VALUES (?,?,?,?,?,?,?,?,?,?)") ||
        prepare(db, &db->res_exists, "SELECT 1 FROM results WHERE case_id = ? AND method = ? AND budget = ?") ||
        prepare(db, &db->res_add,
                "INSERT INTO results(case_id, method, params, status, budget, budget_tokens, score, rel_err,"
                " prefill_s, compress_s, decode_s, decode_tokens, tokens_per_s, fast_bytes, fast_peak,"
                " fast_aux_bytes, slow_bytes, slow_peak, fast_tokens, output, gpu_peak_bytes, fast_decode_peak,"
                " rss_peak, gpu_driver_peak_bytes) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)") ||
        prepare(db, &db->head_add, "INSERT INTO head_stats(result_id, layer, head, kept, events) VALUES (?,?,?,?,?)") ||
        prepare(db, &db->layer_add, "INSERT INTO layer_err(result_id, layer, rel_err) VALUES (?,?,?)") ||
        prepare(db, &db->res_v3,
                "UPDATE results SET ans_tokens = ?, ans_nll = ?, fid_steps = ?, kl = ?, top1 = ?, repeats = ?,"
                " compress_spread = ?, decode_spread = ? WHERE id = ?"))
        goto bad;
    return db;
bad:
    snprintf(err, errlen, "%s", db->err);
    kvdb_close(db);
    return NULL;
}

kv_db *kvdb_open(const char *path, char *err, size_t errlen) { return open_common(path, 0, err, errlen); }
kv_db *kvdb_open_readonly(const char *path, char *err, size_t errlen) { return open_common(path, 1, err, errlen); }

struct sqlite3 *kvdb_sqlite(kv_db *db) { return db->h; }
const char *kvdb_path(const kv_db *db) { return db->path; }
const char *kvdb_errmsg(kv_db *db) { return db->err; }

static void bind_text(sqlite3_stmt *st, int i, const char *s) {
    if (s) sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(st, i);
}
/* SQLite turns NaN into NULL anyway; say so explicitly. */
static void bind_real(sqlite3_stmt *st, int i, double x) {
    if (isnan(x)) sqlite3_bind_null(st, i);
    else sqlite3_bind_double(st, i, x);
}
static void bind_u64(sqlite3_stmt *st, int i, uint64_t x) {
    int64_t v;
    memcpy(&v, &x, sizeof v);
    sqlite3_bind_int64(st, i, v);
}

/* Runs a one-row lookup; returns the id, 0 when absent, -1 on error. */
static int64_t lookup(kv_db *db, sqlite3_stmt *st, const char *what) {
    int rc = sqlite3_step(st);
    int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        fail(db, "looking up %s", what);
        id = -1;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return id;
}

static int step_done(kv_db *db, sqlite3_stmt *st, const char *what) {
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) fail(db, "%s", what);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

/* Ends a write begun with BEGIN IMMEDIATE: COMMIT when nothing failed, else ROLLBACK,
 * which keeps the first error in db->err. 0 committed, -1 rolled back. */
static int finish(kv_db *db, int failed) {
    if (!failed && !exec(db, "COMMIT")) return 0;
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

int64_t kvdb_run_begin(kv_db *db, const kvdb_run *r, int *resumed) {
    if (resumed) *resumed = 0;
    if (!r || !r->run_key || !*r->run_key) {
        refuse(db, "a run needs a non-empty run_key");
        return -1;
    }
    if (exec(db, "BEGIN IMMEDIATE")) return -1;
    sqlite3_bind_text(db->run_find, 1, r->run_key, -1, SQLITE_TRANSIENT);
    int64_t id = lookup(db, db->run_find, "the run");
    if (id > 0) {
        if (resumed) *resumed = 1;
    } else if (id == 0) {
        sqlite3_stmt *st = db->run_add;
        bind_text(st, 1, r->run_key);
        bind_text(st, 2, r->config_json);
        bind_text(st, 3, r->workload);
        bind_text(st, 4, r->model);
        bind_text(st, 5, r->git_commit);
        bind_text(st, 6, r->build_flags);
        bind_text(st, 7, r->host);
        bind_text(st, 8, r->cpu);
        bind_text(st, 9, r->backend);
        bind_u64(st, 10, r->seed);
        id = step_done(db, st, "recording the run") ? -1 : sqlite3_last_insert_rowid(db->h);
    }
    if (finish(db, id < 0)) {
        if (resumed) *resumed = 0;
        return -1;
    }
    return id;
}

int64_t kvdb_case_get(kv_db *db, int64_t run_id, const kvdb_case *c) {
    if (!c || !c->case_key || !*c->case_key) {
        refuse(db, "a case needs a non-empty case_key");
        return -1;
    }
    if (exec(db, "BEGIN IMMEDIATE")) return -1;
    sqlite3_bind_int64(db->case_find, 1, run_id);
    sqlite3_bind_text(db->case_find, 2, c->case_key, -1, SQLITE_TRANSIENT);
    int64_t id = lookup(db, db->case_find, "the case");
    if (id == 0) {
        sqlite3_stmt *st = db->case_add;
        sqlite3_bind_int64(st, 1, run_id);
        bind_text(st, 2, c->case_key);
        bind_text(st, 3, c->workload);
        sqlite3_bind_int(st, 4, c->ctx);
        bind_real(st, 5, c->depth);
        bind_text(st, 6, c->variant);
        bind_u64(st, 7, c->seed);
        bind_real(st, 8, c->prefill_s);
        bind_text(st, 9, c->prompt_sha256);
        if (c->prompt_tokens > 0) sqlite3_bind_int(st, 10, c->prompt_tokens);
        else sqlite3_bind_null(st, 10);
        id = step_done(db, st, "recording the case") ? -1 : sqlite3_last_insert_rowid(db->h);
    }
    return finish(db, id < 0) ? -1 : id;
}

int kvdb_schema_version(const kv_db *db) { return db->version; }

int64_t kvdb_case_find(kv_db *db, int64_t run_id, const char *case_key) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->h, "SELECT id FROM cases WHERE run_id = ? AND case_key = ?", -1, &st, NULL))
        return -1;
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_text(st, 2, case_key, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : rc == SQLITE_DONE ? 0 : -1;
    sqlite3_finalize(st);
    return id;
}

int64_t kvdb_run_result_count(kv_db *db, int64_t run_id) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->h, "SELECT count(*) FROM results r JOIN cases c ON c.id = r.case_id WHERE c.run_id = ?",
                           -1, &st, NULL))
        return -1;
    sqlite3_bind_int64(st, 1, run_id);
    int64_t n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    return n;
}

/* One value of a case UPDATE: NULL (nothing measured), an integer or a real. */
typedef struct {
    enum { V_NULL, V_INT, V_REAL } kind;
    int64_t i;
    double d;
} case_val;
static case_val v_int(int64_t x, int measured) { return (case_val){measured ? V_INT : V_NULL, x, 0}; }
static case_val v_real(double x) { return (case_val){isnan(x) ? V_NULL : V_REAL, 0, x}; }

/* The one shape of every per-case measurement: "UPDATE cases SET a = ?, b = ? ... WHERE
 * id = ?" with vals bound in order and the case id last; it must touch exactly one case.
 * what names the measurement in the one-line error. 0 or -1 (db->err set). */
static int update_case(kv_db *db, int64_t case_id, const char *sql, const case_val *vals, int n, const char *what) {
    sqlite3_stmt *st = NULL;
    if (prepare(db, &st, sql)) return -1;
    for (int k = 0; k < n; k++) {
        if (vals[k].kind == V_INT) sqlite3_bind_int64(st, k + 1, vals[k].i);
        else if (vals[k].kind == V_REAL) sqlite3_bind_double(st, k + 1, vals[k].d);
        else sqlite3_bind_null(st, k + 1);
    }
    sqlite3_bind_int64(st, n + 1, case_id);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        fail(db, "recording the %s of case %lld", what, (long long)case_id);
        return -1;
    }
    if (sqlite3_changes(db->h) != 1) {
        refuse(db, "%s for case %lld: no such case", what, (long long)case_id);
        return -1;
    }
    return 0;
}

int kvdb_case_gpu(kv_db *db, int64_t case_id, int64_t peak_bytes, int64_t used_bytes, double prefill_ms) {
    case_val v[3] = {v_int(peak_bytes, peak_bytes >= 0), v_int(used_bytes, used_bytes >= 0),
                     v_real(prefill_ms >= 0 ? prefill_ms : NAN)};
    return update_case(db, case_id, "UPDATE cases SET gpu_peak_bytes = ?, gpu_used_bytes = ?, gpu_prefill_ms = ? WHERE id = ?",
                       v, 3, "device measurements");
}

int kvdb_case_gpu_driver(kv_db *db, int64_t case_id, int64_t bytes) {
    case_val v[1] = {v_int(bytes, bytes > 0)};
    return update_case(db, case_id, "UPDATE cases SET gpu_driver_peak_bytes = ? WHERE id = ?", v, 1,
                       "device driver peak");
}

int kvdb_case_rss(kv_db *db, int64_t case_id, int64_t bytes) {
    case_val v[1] = {v_int(bytes, bytes > 0)};
    return update_case(db, case_id, "UPDATE cases SET rss_peak = ? WHERE id = ?", v, 1, "peak RSS");
}

int kvdb_case_load(kv_db *db, int64_t case_id, double load_start, double load_end) {
    case_val v[2] = {v_real(load_start), v_real(load_end)};
    return update_case(db, case_id, "UPDATE cases SET load_start = ?, load_end = ? WHERE id = ?", v, 2, "load average");
}

int kvdb_result_exists(kv_db *db, int64_t case_id, const char *method, double budget) {
    if (!method) {
        refuse(db, "result lookup without a method name");
        return -1;
    }
    sqlite3_bind_int64(db->res_exists, 1, case_id);
    sqlite3_bind_text(db->res_exists, 2, method, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(db->res_exists, 3, budget);
    int64_t found = lookup(db, db->res_exists, "a result");
    return found < 0 ? -1 : found > 0;
}

static int put_rows(kv_db *db, int64_t case_id, const kvdb_result *r) {
    sqlite3_stmt *st = db->res_add;
    int i = 1;
    sqlite3_bind_int64(st, i++, case_id);
    bind_text(st, i++, r->method);
    bind_text(st, i++, r->params);
    bind_text(st, i++, r->status);
    bind_real(st, i++, r->budget);
    sqlite3_bind_int(st, i++, r->budget_tokens);
    bind_real(st, i++, r->score);
    bind_real(st, i++, r->rel_err);
    bind_real(st, i++, r->prefill_s);
    bind_real(st, i++, r->compress_s);
    bind_real(st, i++, r->decode_s);
    sqlite3_bind_int(st, i++, r->decode_tokens);
    bind_real(st, i++, r->tokens_per_s);
    sqlite3_bind_int64(st, i++, (sqlite3_int64)r->mem.fast_bytes);
    sqlite3_bind_int64(st, i++, (sqlite3_int64)r->mem.fast_peak);
    sqlite3_bind_int64(st, i++, (sqlite3_int64)r->mem.fast_aux_bytes);
    sqlite3_bind_int64(st, i++, (sqlite3_int64)r->mem.slow_bytes);
    sqlite3_bind_int64(st, i++, (sqlite3_int64)r->mem.slow_peak);
    sqlite3_bind_int64(st, i++, (sqlite3_int64)r->mem.fast_tokens);
    bind_text(st, i++, r->output);
    if (r->gpu_peak_bytes > 0) sqlite3_bind_int64(st, i, r->gpu_peak_bytes);
    i++;
    if (r->fast_decode_peak > 0) sqlite3_bind_int64(st, i, r->fast_decode_peak);
    i++;
    if (r->rss_peak > 0) sqlite3_bind_int64(st, i, r->rss_peak);
    i++;
    if (r->gpu_driver_peak_bytes > 0) sqlite3_bind_int64(st, i, r->gpu_driver_peak_bytes);
    i++;
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
        snprintf(db->err, sizeof db->err, "results db '%s': result for case %lld, method %s, budget %g already recorded",
                 db->shown, (long long)case_id, r->method, r->budget);
        return 1;
    }
    if (rc != SQLITE_DONE) {
        fail(db, "recording result %s (case %lld)", r->method, (long long)case_id);
        return -1;
    }
    int64_t rid = sqlite3_last_insert_rowid(db->h);
    /* the version-3 columns, NULL where nothing was measured */
    st = db->res_v3;
    if (r->ans_tokens > 0) sqlite3_bind_int(st, 1, r->ans_tokens), bind_real(st, 2, r->ans_nll);
    if (r->fid_steps > 0) sqlite3_bind_int(st, 3, r->fid_steps), bind_real(st, 4, r->kl), bind_real(st, 5, r->top1);
    if (r->repeats > 0) sqlite3_bind_int(st, 6, r->repeats);
    if (r->repeats > 1) bind_real(st, 7, r->compress_spread), bind_real(st, 8, r->decode_spread);
    sqlite3_bind_int64(st, 9, rid);
    if (step_done(db, st, "recording fidelity and repeated timings")) return -1;
    if (r->heads)
        for (int l = 0; l < r->n_layers; l++)
            for (int h = 0; h < r->n_heads; h++) {
                const kv_headstat *hs = &r->heads[(size_t)l * r->n_heads + h];
                sqlite3_bind_int64(db->head_add, 1, rid);
                sqlite3_bind_int(db->head_add, 2, l);
                sqlite3_bind_int(db->head_add, 3, h);
                bind_real(db->head_add, 4, hs->kept);
                bind_real(db->head_add, 5, hs->events);
                if (step_done(db, db->head_add, "recording head statistics")) return -1;
            }
    if (r->layer_err)
        for (int l = 0; l < r->n_layers; l++) {
            sqlite3_bind_int64(db->layer_add, 1, rid);
            sqlite3_bind_int(db->layer_add, 2, l);
            bind_real(db->layer_add, 3, r->layer_err[l]);
            if (step_done(db, db->layer_add, "recording per-layer errors")) return -1;
        }
    return 0;
}

int kvdb_result_put(kv_db *db, int64_t case_id, const kvdb_result *r) {
    if (!r || !r->method || !*r->method) {
        refuse(db, "a result needs a method name");
        return -1;
    }
    if (!r->status || (strcmp(r->status, "ok") && strcmp(r->status, "infeasible") && strcmp(r->status, "error"))) {
        refuse(db, "result %s: status '%s' is not ok, infeasible or error", r->method, r->status ? r->status : "(null)");
        return -1;
    }
    if ((r->heads || r->layer_err) && (r->n_layers <= 0 || (r->heads && r->n_heads <= 0))) {
        refuse(db, "result %s: per-layer rows given with n_layers=%d, n_heads=%d", r->method, r->n_layers, r->n_heads);
        return -1;
    }
    if (exec(db, "BEGIN IMMEDIATE")) return -1;
    int rc = put_rows(db, case_id, r);
    if (finish(db, rc)) return rc > 0 ? 1 : -1;
    return 0;
}

static const char *zoom_sql =
    "CREATE TABLE IF NOT EXISTS zoom_events("
    " result_id INTEGER NOT NULL REFERENCES results(id) ON DELETE CASCADE,"
    " step INTEGER NOT NULL, layer INTEGER NOT NULL, head INTEGER NOT NULL,"
    " expanded INTEGER NOT NULL, spans INTEGER,"
    " PRIMARY KEY(result_id, step, layer, head));";

/* 1 when zoom_events has the spans column (files made before it lack it), 0, or -1. */
static int zoom_has_spans(kv_db *db) {
    sqlite3_stmt *q = NULL;
    if (prepare(db, &q, "SELECT count(*) FROM pragma_table_info('zoom_events') WHERE name = 'spans'")) return -1;
    int rc = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int(q, 0) > 0 : -1;
    sqlite3_finalize(q);
    return rc;
}

int kvdb_zoom_put(kv_db *db, int64_t case_id, const char *method, double budget,
                  const kvdb_zoom *ev, size_t n) {
    if (!method || (n && !ev)) {
        refuse(db, "zoom events need a method name and rows");
        return -1;
    }
    sqlite3_bind_int64(db->res_exists, 1, case_id);
    sqlite3_bind_text(db->res_exists, 2, method, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(db->res_exists, 3, budget);
    int64_t found = lookup(db, db->res_exists, "a result");
    if (found <= 0) {
        if (found == 0)
            refuse(db, "zoom events for case %lld, method %s, budget %g: no such result (record it first)",
                   (long long)case_id, method, budget);
        return -1;
    }
    sqlite3_stmt *idq = NULL, *add = NULL;
    if (exec(db, "BEGIN IMMEDIATE")) return -1;
    int rc = exec(db, zoom_sql);
    int has = rc ? -1 : zoom_has_spans(db);
    rc = has < 0 || (!has && exec(db, "ALTER TABLE zoom_events ADD COLUMN spans INTEGER")) ||
         prepare(db, &idq, "SELECT id FROM results WHERE case_id = ? AND method = ? AND budget = ?") ||
         prepare(db, &add, "INSERT INTO zoom_events(result_id, step, layer, head, expanded, spans) VALUES (?,?,?,?,?,?)");
    int64_t rid = -1;
    if (!rc) {
        sqlite3_bind_int64(idq, 1, case_id);
        sqlite3_bind_text(idq, 2, method, -1, SQLITE_TRANSIENT);
        sqlite3_bind_double(idq, 3, budget);
        rid = lookup(db, idq, "the result id");
        rc = rid <= 0;
    }
    for (size_t i = 0; i < n && !rc; i++) {
        sqlite3_bind_int64(add, 1, rid);
        sqlite3_bind_int(add, 2, ev[i].step);
        sqlite3_bind_int(add, 3, ev[i].layer);
        sqlite3_bind_int(add, 4, ev[i].head);
        sqlite3_bind_int(add, 5, ev[i].expanded);
        if (ev[i].spans > 0) sqlite3_bind_int(add, 6, ev[i].spans);
        else sqlite3_bind_null(add, 6);
        rc = step_done(db, add, "recording zoom events");
    }
    sqlite3_finalize(idq);
    sqlite3_finalize(add);
    return finish(db, rc);
}

int kvdb_note_put(kv_db *db, int64_t case_id, const char *method, double budget, const char *key,
                  const char *text) {
    if (!method || !key || !text) {
        refuse(db, "a result note needs a method, a key and a text");
        return -1;
    }
    sqlite3_stmt *add = NULL;
    if (exec(db, "BEGIN IMMEDIATE")) return -1;
    int rc = exec(db, "CREATE TABLE IF NOT EXISTS result_notes("
                      " result_id INTEGER NOT NULL REFERENCES results(id) ON DELETE CASCADE,"
                      " key TEXT NOT NULL, text TEXT NOT NULL, PRIMARY KEY(result_id, key));") ||
             prepare(db, &add, "INSERT INTO result_notes(result_id, key, text) SELECT id, ?4, ?5 FROM results"
                               " WHERE case_id = ?1 AND method = ?2 AND budget = ?3");
    if (!rc) {
        sqlite3_bind_int64(add, 1, case_id);
        sqlite3_bind_text(add, 2, method, -1, SQLITE_TRANSIENT);
        sqlite3_bind_double(add, 3, budget);
        sqlite3_bind_text(add, 4, key, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(add, 5, text, -1, SQLITE_TRANSIENT);
        rc = step_done(db, add, "recording a result note");
        if (!rc && sqlite3_changes(db->h) != 1) {
            refuse(db, "note for case %lld, method %s, budget %g: no such result (record it first)",
                   (long long)case_id, method, budget);
            rc = -1;
        }
    }
    sqlite3_finalize(add);
    return finish(db, rc);
}

int kvdb_plan_put(kv_db *db, int64_t run_id, const char *const *case_keys, int n_cases, const char *const *methods,
                  const double *budgets, int n_pairs) {
    if (n_cases < 0 || n_pairs < 0 || (n_cases && !case_keys) || (n_pairs && (!methods || !budgets))) {
        refuse(db, "a plan needs its case keys and (method, budget) pairs");
        return -1;
    }
    sqlite3_stmt *st = NULL;
    if (exec(db, "BEGIN IMMEDIATE")) return -1;
    int rc = prepare(db, &st, "INSERT OR IGNORE INTO plan(run_id, case_key, method, budget) VALUES (?,?,?,?)");
    for (int c = 0; c < n_cases && !rc; c++)
        for (int p = 0; p < n_pairs && !rc; p++) {
            sqlite3_bind_int64(st, 1, run_id);
            bind_text(st, 2, case_keys[c]);
            bind_text(st, 3, methods[p]);
            sqlite3_bind_double(st, 4, budgets[p]);
            rc = step_done(db, st, "recording the run's plan");
        }
    sqlite3_finalize(st);
    return finish(db, rc);
}

/* The results database against real SQLite in a temp directory: values read back with
 * the sqlite3 API equal what was written (bit-exact doubles), resume finds the same run,
 * duplicates are rejected, bad paths fail with the path in the message, and a process
 * killed mid-transaction leaves every committed result intact.
 *
 * Extra modes used by tests/test_report.sh:
 *   test_db --make-fixture PATH   a realistic two-run NIAH results file (fresh seed)
 *   test_db --make-tables-fixture PATH   several runs for report --table: methods, budgets,
 *                                 contexts, params (SeKV ablations and ranks), two models
 *   test_db --make-empty PATH     a results file with the schema and no runs
 *   test_db --registry            the method names in registry order
 *   test_db --cmd report|plot ... the subcommand itself (when ./kvbench does not link it yet) */
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../harness/cli/commands.h"
#include "../results/db.h"
#include "check.h"

/* Doubles over the whole range, subnormals included, so "bit-exact" means something. */
static double rand_double(void) {
    switch (test_int(0, 4)) {
    case 0: return test_unif();
    case 1: return 4.9406564584124654e-324 * test_int(1, 1 << 20);   /* subnormal */
    case 2: return (test_unif() - 0.5) * pow(10.0, test_int(-300, 300));
    default: return test_unif() * 1e3 + test_unif() * 1e-9;
    }
}

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

typedef struct {
    kvdb_result r;
    char method[32], params[64], status[16], output[128];
    kv_headstat heads[64];
    double lerr[16];
} stored_result;

static void rand_result(stored_result *s, const char *method, double budget, const char *status, int L, int H) {
    memset(s, 0, sizeof *s);
    snprintf(s->method, sizeof s->method, "%s", method);
    snprintf(s->params, sizeof s->params, "window=%d,kernel=%d", test_int(1, 64), test_int(1, 9));
    snprintf(s->status, sizeof s->status, "%s", status);
    snprintf(s->output, sizeof s->output, "answer \"%d\", with 'quotes'\nand a newline", test_int(0, 1 << 30));
    kvdb_result *r = &s->r;
    r->method = s->method, r->params = s->params, r->status = s->status, r->output = s->output;
    r->budget = budget;
    r->budget_tokens = test_int(1, 1 << 20);
    r->score = test_unif(), r->rel_err = rand_double();
    r->prefill_s = rand_double(), r->compress_s = rand_double(), r->decode_s = rand_double();
    r->decode_tokens = test_int(1, 512);
    r->tokens_per_s = rand_double();
    r->mem = (kv_mem){(size_t)(test_next() >> 2), (size_t)(test_next() >> 2), (size_t)(test_next() >> 2),
                      (size_t)(test_next() >> 2), (size_t)(test_next() >> 2), (long)(test_next() >> 2)};
    r->n_layers = L, r->n_heads = H;
    for (int i = 0; i < L * H; i++) s->heads[i] = (kv_headstat){rand_double(), rand_double()};
    for (int l = 0; l < L; l++) s->lerr[l] = rand_double();
    r->heads = s->heads, r->layer_err = s->lerr;
    /* version 3: fidelity and repeats, absent (NULL) about half the time */
    if (test_int(0, 1)) r->ans_tokens = test_int(1, 64), r->ans_nll = rand_double();
    if (test_int(0, 1)) r->fid_steps = test_int(1, 16), r->kl = rand_double(), r->top1 = test_unif();
    if (test_int(0, 1)) r->repeats = test_int(1, 5), r->compress_spread = rand_double(), r->decode_spread = rand_double();
}

static const char *col_str(sqlite3_stmt *st, int i) { return (const char *)sqlite3_column_text(st, i); }
static int str_eq(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }
/* NaN goes in as NULL; anything else must come back with the same bits. */
static int real_eq(sqlite3_stmt *st, int i, double want) {
    if (isnan(want)) return sqlite3_column_type(st, i) == SQLITE_NULL;
    return sqlite3_column_type(st, i) == SQLITE_FLOAT && same_bits(sqlite3_column_double(st, i), want);
}

/* Reads the result back through the sqlite3 API on its own connection. */
static void verify_result(const char *path, int64_t case_id, const kvdb_result *r) {
    sqlite3 *h;
    CHECK(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK, "reopen %s", path);
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(h,
                             "SELECT id, params, status, budget_tokens, score, rel_err, prefill_s, compress_s,"
                             " decode_s, decode_tokens, tokens_per_s, fast_bytes, fast_peak, fast_aux_bytes,"
                             " slow_bytes, slow_peak, fast_tokens, output, created FROM results"
                             " WHERE case_id = ? AND method = ? AND budget = ?",
                             -1, &st, NULL) == SQLITE_OK, "%s", sqlite3_errmsg(h));
    sqlite3_bind_int64(st, 1, case_id);
    sqlite3_bind_text(st, 2, r->method, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 3, r->budget);
    CHECK(sqlite3_step(st) == SQLITE_ROW, "result %s case %lld not found", r->method, (long long)case_id);
    int64_t rid = sqlite3_column_int64(st, 0);
    CHECK(str_eq(col_str(st, 1), r->params), "params");
    CHECK(str_eq(col_str(st, 2), r->status), "status");
    CHECK(sqlite3_column_int(st, 3) == r->budget_tokens, "budget_tokens");
    CHECK(real_eq(st, 4, r->score), "score %.17g", r->score);
    CHECK(real_eq(st, 5, r->rel_err), "rel_err %.17g", r->rel_err);
    CHECK(real_eq(st, 6, r->prefill_s), "prefill_s");
    CHECK(real_eq(st, 7, r->compress_s), "compress_s");
    CHECK(real_eq(st, 8, r->decode_s), "decode_s %.17g", r->decode_s);
    CHECK(sqlite3_column_int(st, 9) == r->decode_tokens, "decode_tokens");
    CHECK(real_eq(st, 10, r->tokens_per_s), "tokens_per_s");
    const size_t mem[] = {r->mem.fast_bytes, r->mem.fast_peak, r->mem.fast_aux_bytes, r->mem.slow_bytes,
                          r->mem.slow_peak, (size_t)r->mem.fast_tokens};
    for (int k = 0; k < 6; k++) CHECK((size_t)sqlite3_column_int64(st, 11 + k) == mem[k], "mem field %d", k);
    CHECK(str_eq(col_str(st, 17), r->output), "output");
    CHECK(col_str(st, 18) && strlen(col_str(st, 18)) == 20, "created timestamp");
    CHECK(sqlite3_step(st) == SQLITE_DONE, "exactly one row for %s", r->method);
    sqlite3_finalize(st);

    CHECK(sqlite3_prepare_v2(h, "SELECT ans_tokens, ans_nll, fid_steps, kl, top1, repeats, compress_spread, decode_spread"
                                " FROM results WHERE id = ?", -1, &st, NULL) == SQLITE_OK, "%s", sqlite3_errmsg(h));
    sqlite3_bind_int64(st, 1, rid);
    CHECK(sqlite3_step(st) == SQLITE_ROW, "version-3 columns of %s", r->method);
    CHECK(r->ans_tokens > 0 ? sqlite3_column_int(st, 0) == r->ans_tokens && real_eq(st, 1, r->ans_nll)
                            : sqlite3_column_type(st, 0) == SQLITE_NULL && sqlite3_column_type(st, 1) == SQLITE_NULL,
          "answer NLL of %s", r->method);
    CHECK(r->fid_steps > 0 ? sqlite3_column_int(st, 2) == r->fid_steps && real_eq(st, 3, r->kl) && real_eq(st, 4, r->top1)
                           : sqlite3_column_type(st, 3) == SQLITE_NULL && sqlite3_column_type(st, 4) == SQLITE_NULL,
          "KL/top-1 of %s", r->method);
    CHECK(r->repeats > 0 ? sqlite3_column_int(st, 5) == r->repeats &&
                               (r->repeats > 1 ? real_eq(st, 6, r->compress_spread) && real_eq(st, 7, r->decode_spread)
                                               : sqlite3_column_type(st, 6) == SQLITE_NULL)
                         : sqlite3_column_type(st, 5) == SQLITE_NULL,
          "repeats of %s", r->method);
    sqlite3_finalize(st);

    CHECK(sqlite3_prepare_v2(h, "SELECT layer, head, kept, events FROM head_stats WHERE result_id = ? ORDER BY layer, head",
                             -1, &st, NULL) == SQLITE_OK, "%s", sqlite3_errmsg(h));
    sqlite3_bind_int64(st, 1, rid);
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int l = sqlite3_column_int(st, 0), hd = sqlite3_column_int(st, 1);
        int ok = r->heads && l < r->n_layers && hd < r->n_heads && l * r->n_heads + hd == n;
        CHECK(ok, "head row (%d,%d) out of order or unexpected", l, hd);
        if (ok) {
            CHECK(real_eq(st, 2, r->heads[n].kept), "kept (%d,%d)", l, hd);
            CHECK(real_eq(st, 3, r->heads[n].events), "events (%d,%d)", l, hd);
        }
        n++;
    }
    CHECK(n == (r->heads ? r->n_layers * r->n_heads : 0), "head rows %d", n);
    sqlite3_finalize(st);

    CHECK(sqlite3_prepare_v2(h, "SELECT layer, rel_err FROM layer_err WHERE result_id = ? ORDER BY layer", -1, &st,
                             NULL) == SQLITE_OK, "%s", sqlite3_errmsg(h));
    sqlite3_bind_int64(st, 1, rid);
    n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        CHECK(r->layer_err && sqlite3_column_int(st, 0) == n && real_eq(st, 1, r->layer_err[n]), "layer_err %d", n);
        n++;
    }
    CHECK(n == (r->layer_err ? r->n_layers : 0), "layer rows %d", n);
    sqlite3_finalize(st);
    sqlite3_close(h);
}

static int64_t count_rows(const char *path, const char *sql) {
    sqlite3 *h;
    sqlite3_stmt *st;
    int64_t n = -1;
    if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
    return n;
}

static void test_roundtrip(const char *dir) {
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/rt.db", dir);
    kv_db *db = kvdb_open(path, err, sizeof err);
    CHECK(db, "open: %s", err);
    if (!db) return;
    uint64_t seed = test_next() | (1ull << 63);   /* high bit set: must survive the int64 column */
    kvdb_run run = {"key-a", "{\"workload\":\"niah\",\"ctx\":[1024]}", "niah", "SmolLM2-135M", "abc1234", "-O3", "host1",
                    "cpu x", "cpu", seed};
    int resumed = -1;
    int64_t rid = kvdb_run_begin(db, &run, &resumed);
    CHECK(rid > 0 && resumed == 0, "run_begin %lld resumed %d: %s", (long long)rid, resumed, kvdb_errmsg(db));

    enum { NC = 3, NM = 3 };
    kvdb_case cs[NC];
    char keys[NC][64];
    int64_t cid[NC];
    for (int c = 0; c < NC; c++) {
        snprintf(keys[c], sizeof keys[c], "ctx=%d,depth=%.2f,needle=single", 1024 << c, 0.25 * c);
        cs[c] = (kvdb_case){keys[c], "niah", 1024 << c, test_unif(), "single", test_next(), rand_double(), NULL, 0};
        cid[c] = kvdb_case_get(db, rid, &cs[c]);
        CHECK(cid[c] > 0, "case_get: %s", kvdb_errmsg(db));
    }
    static stored_result res[NC][NM];
    const char *methods[NM] = {"fullkv", "snapkv", "sentencekv"};
    for (int c = 0; c < NC; c++)
        for (int m = 0; m < NM; m++) {
            int L = test_int(1, 16), H = test_int(1, 4);
            rand_result(&res[c][m], methods[m], m ? 0.25 : 1.0, "ok", L, H);
            if (c == 1 && m == 1) {   /* no per-layer rows, no text: NULLs */
                res[c][m].r.heads = NULL, res[c][m].r.layer_err = NULL;
                res[c][m].r.output = NULL, res[c][m].r.params = NULL;
            }
            if (c == 2 && m == 2) {   /* infeasible: NaN stored as NULL */
                res[c][m].r.status = "infeasible";
                res[c][m].r.score = NAN, res[c][m].r.rel_err = NAN;
            }
            CHECK(kvdb_result_put(db, cid[c], &res[c][m].r) == 0, "put: %s", kvdb_errmsg(db));
        }
    /* WAL and foreign keys are on: a case of an unknown run is refused. */
    kvdb_case orphan = {"orphan", "niah", 1, 0, "x", 1, 0, NULL, 0};
    CHECK(kvdb_case_get(db, rid + 1000, &orphan) < 0, "case of a missing run accepted");
    CHECK(strstr(kvdb_errmsg(db), path) && strstr(kvdb_errmsg(db), "FOREIGN KEY"), "fk message: %s", kvdb_errmsg(db));
    {
        sqlite3_stmt *st;
        sqlite3_prepare_v2(kvdb_sqlite(db), "PRAGMA journal_mode", -1, &st, NULL);
        CHECK(sqlite3_step(st) == SQLITE_ROW && !strcmp(col_str(st, 0), "wal"), "journal mode %s while open", col_str(st, 0));
        sqlite3_finalize(st);
    }
    kvdb_close(db);
    {
        sqlite3 *h;
        sqlite3_stmt *st;
        sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL);
        /* closed in rollback mode, so readers without a writable directory can open it */
        sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &st, NULL);
        CHECK(sqlite3_step(st) == SQLITE_ROW && !strcmp(col_str(st, 0), "delete"), "journal mode %s after close", col_str(st, 0));
        sqlite3_finalize(st);
        sqlite3_prepare_v2(h, "SELECT config_json, workload, model, git_commit, build_flags, host, cpu, backend, seed"
                              " FROM runs WHERE id = ?", -1, &st, NULL);
        sqlite3_bind_int64(st, 1, rid);
        CHECK(sqlite3_step(st) == SQLITE_ROW, "run row");
        const char *want[] = {run.config_json, run.workload, run.model, run.git_commit, run.build_flags, run.host,
                              run.cpu, run.backend};
        for (int k = 0; k < 8; k++) CHECK(str_eq(col_str(st, k), want[k]), "run field %d", k);
        int64_t s = sqlite3_column_int64(st, 8);
        CHECK(!memcmp(&s, &seed, sizeof s), "run seed");
        sqlite3_finalize(st);
        sqlite3_prepare_v2(h, "SELECT case_key, workload, ctx, depth, variant, seed, prefill_s FROM cases WHERE id = ?",
                           -1, &st, NULL);
        for (int c = 0; c < NC; c++) {
            sqlite3_bind_int64(st, 1, cid[c]);
            CHECK(sqlite3_step(st) == SQLITE_ROW, "case row");
            CHECK(str_eq(col_str(st, 0), cs[c].case_key) && str_eq(col_str(st, 1), "niah") &&
                  sqlite3_column_int(st, 2) == cs[c].ctx && real_eq(st, 3, cs[c].depth) &&
                  str_eq(col_str(st, 4), "single") && real_eq(st, 6, cs[c].prefill_s), "case %d fields", c);
            int64_t cseed = sqlite3_column_int64(st, 5);
            CHECK(!memcmp(&cseed, &cs[c].seed, sizeof cseed), "case seed");
            sqlite3_reset(st);
        }
        sqlite3_finalize(st);
        sqlite3_close(h);
    }
    for (int c = 0; c < NC; c++)
        for (int m = 0; m < NM; m++) verify_result(path, cid[c], &res[c][m].r);

    /* Reopen: same key resumes, same case keys find the same cases. */
    db = kvdb_open(path, err, sizeof err);
    CHECK(db, "reopen: %s", err);
    if (!db) return;
    resumed = -1;
    CHECK(kvdb_run_begin(db, &run, &resumed) == rid && resumed == 1, "resume gave resumed=%d", resumed);
    kvdb_run other = run;
    other.run_key = "key-b";
    int64_t rid2 = kvdb_run_begin(db, &other, &resumed);
    CHECK(rid2 > 0 && rid2 != rid && resumed == 0, "second run %lld resumed %d", (long long)rid2, resumed);
    for (int c = 0; c < NC; c++) CHECK(kvdb_case_get(db, rid, &cs[c]) == cid[c], "case %d found again", c);
    CHECK(kvdb_case_get(db, rid2, &cs[0]) != cid[0], "same case key in another run is another case");

    CHECK(kvdb_result_exists(db, cid[0], "snapkv", 0.25) == 1, "exists");
    CHECK(kvdb_result_exists(db, cid[2], "sentencekv", 0.25) == 1, "infeasible result exists too");
    CHECK(kvdb_result_exists(db, cid[0], "snapkv", 0.5) == 0, "other budget");
    CHECK(kvdb_result_exists(db, cid[0], "h2o", 0.25) == 0, "other method");
    CHECK(kvdb_result_exists(db, cid[0] + 1000, "snapkv", 0.25) == 0, "other case");

    /* Duplicate put: rejected, nothing written (no second row, no extra head rows). */
    int64_t nres = count_rows(path, "SELECT count(*) FROM results");
    int64_t nhead = count_rows(path, "SELECT count(*) FROM head_stats");
    stored_result dup;
    rand_result(&dup, "snapkv", 0.25, "ok", 3, 2);
    CHECK(kvdb_result_put(db, cid[0], &dup.r) == 1, "duplicate not reported as already recorded (1)");
    CHECK(strstr(kvdb_errmsg(db), "already recorded") && strstr(kvdb_errmsg(db), path), "dup message: %s",
          kvdb_errmsg(db));
    CHECK(count_rows(path, "SELECT count(*) FROM results") == nres, "duplicate added a row");
    CHECK(count_rows(path, "SELECT count(*) FROM head_stats") == nhead, "duplicate added head rows");
    verify_result(path, cid[0], &res[0][1].r);   /* the original is untouched */

    /* Bad status is refused before anything is written. */
    stored_result bad;
    rand_result(&bad, "h2o", 0.25, "done", 2, 2);
    CHECK(kvdb_result_put(db, cid[0], &bad.r) == -1 && strstr(kvdb_errmsg(db), "status"), "bad status: %s",
          kvdb_errmsg(db));
    CHECK(kvdb_result_exists(db, cid[0], "h2o", 0.25) == 0, "bad status left a row");
    /* A failure half-way through a put (injected on the second layer's head rows) rolls back
     * the result row and the head rows already inserted. */
    CHECK(sqlite3_exec(kvdb_sqlite(db),
                       "CREATE TEMP TRIGGER inject BEFORE INSERT ON head_stats WHEN NEW.layer = 1"
                       " BEGIN SELECT RAISE(ABORT, 'injected failure'); END",
                       NULL, NULL, NULL) == SQLITE_OK, "trigger: %s", sqlite3_errmsg(kvdb_sqlite(db)));
    rand_result(&bad, "h2o", 0.25, "ok", 3, 2);
    CHECK(kvdb_result_put(db, cid[0], &bad.r) == -1 && strstr(kvdb_errmsg(db), "injected failure"), "injected: %s",
          kvdb_errmsg(db));
    CHECK(kvdb_result_exists(db, cid[0], "h2o", 0.25) == 0, "failed put left its result row");
    CHECK(count_rows(path, "SELECT count(*) FROM head_stats") == nhead, "failed put left head rows");
    CHECK(count_rows(path, "SELECT count(*) FROM results") == nres, "failed put left a result row");
    sqlite3_exec(kvdb_sqlite(db), "DROP TRIGGER inject", NULL, NULL, NULL);
    CHECK(kvdb_result_put(db, cid[0], &bad.r) == 0, "put after a failed one: %s", kvdb_errmsg(db));
    verify_result(path, cid[0], &bad.r);
    kvdb_close(db);
}

static void expect_open_fails(const char *path, int readonly, const char *why) {
    char err[512] = "";
    kv_db *db = readonly ? kvdb_open_readonly(path, err, sizeof err) : kvdb_open(path, err, sizeof err);
    CHECK(!db, "%s opened", path);
    CHECK(strstr(err, path) && strstr(err, why), "message for %s: '%s' (want '%s')", path, err, why);
    printf("  %s -> %s\n", path, err);
    kvdb_close(db);
}

static void test_bad_paths(const char *dir) {
    char p[512];
    expect_open_fails("/nonexistent/x.db", 0, "directory does not exist");
    expect_open_fails(dir, 0, "is a directory");
    snprintf(p, sizeof p, "%s/garbage.db", dir);
    FILE *f = fopen(p, "w");
    for (int i = 0; i < 4096; i++) fputc('A' + test_int(0, 25), f);
    fclose(f);
    expect_open_fails(p, 0, "not a database");
    expect_open_fails(p, 1, "not a");
    snprintf(p, sizeof p, "%s/missing.db", dir);
    expect_open_fails(p, 1, "no such file");
    struct stat st;
    CHECK(stat(p, &st) != 0, "read-only open created %s", p);
    /* A SQLite file that is not ours. */
    snprintf(p, sizeof p, "%s/other.db", dir);
    sqlite3 *h;
    sqlite3_open(p, &h);
    sqlite3_exec(h, "CREATE TABLE t(x)", NULL, NULL, NULL);
    sqlite3_close(h);
    expect_open_fails(p, 1, "not a kvbench results file");
    /* ... nor adopted for writing: refused, and left without kvbench's tables */
    expect_open_fails(p, 0, "not a kvbench results file (an SQLite file with other tables)");
    sqlite3_open(p, &h);
    sqlite3_stmt *q;
    sqlite3_prepare_v2(h, "SELECT count(*) FROM sqlite_master", -1, &q, NULL);
    CHECK(sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int(q, 0) == 1, "foreign file changed: %d tables",
          sqlite3_column_int(q, 0));
    sqlite3_finalize(q);
    sqlite3_close(h);
}

/* A child commits some results, starts one more transaction and is killed with SIGKILL
 * inside it. The parent finds exactly the committed results and carries on. */
static void test_crash(const char *dir) {
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/crash.db", dir);
    int k = test_int(3, 12);
    kvdb_run run = {"crash", "{}", "niah", "m", "g", "f", "h", "c", "cpu", 7};
    kvdb_case cs = {"ctx=1", "niah", 1, 0.5, "single", 1, 0.1, NULL, 0};
    pid_t pid = fork();
    if (pid == 0) {
        kv_db *db = kvdb_open(path, err, sizeof err);
        if (!db) _exit(3);
        int64_t c = kvdb_case_get(db, kvdb_run_begin(db, &run, NULL), &cs);
        for (int i = 0; i < k; i++) {
            char m[16];
            snprintf(m, sizeof m, "m%d", i);
            stored_result s;
            rand_result(&s, m, 0.5, "ok", 4, 2);
            if (kvdb_result_put(db, c, &s.r)) _exit(4);
        }
        sqlite3_exec(kvdb_sqlite(db), "BEGIN; INSERT INTO results(case_id, method, status, budget) VALUES (1, 'half', 'ok', 1)",
                     NULL, NULL, NULL);
        kill(getpid(), SIGKILL);
        _exit(5);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %d", status);
    kv_db *db = kvdb_open(path, err, sizeof err);
    CHECK(db, "open after crash: %s", err);
    if (!db) return;
    sqlite3_stmt *st;
    sqlite3_prepare_v2(kvdb_sqlite(db), "PRAGMA integrity_check", -1, &st, NULL);
    CHECK(sqlite3_step(st) == SQLITE_ROW && !strcmp(col_str(st, 0), "ok"), "integrity: %s", col_str(st, 0));
    sqlite3_finalize(st);
    CHECK(count_rows(path, "SELECT count(*) FROM results") == k, "results after crash %lld, want %d",
          (long long)count_rows(path, "SELECT count(*) FROM results"), k);
    CHECK(count_rows(path, "SELECT count(*) FROM head_stats") == 8 * k, "head rows after crash");
    int resumed = 0;
    int64_t r = kvdb_run_begin(db, &run, &resumed);
    int64_t c = kvdb_case_get(db, r, &cs);
    CHECK(resumed == 1 && c > 0, "resume after crash");
    for (int i = 0; i < k; i++) {
        char m[16];
        snprintf(m, sizeof m, "m%d", i);
        CHECK(kvdb_result_exists(db, c, m, 0.5) == 1, "committed %s survives", m);
    }
    CHECK(kvdb_result_exists(db, c, "half", 1) == 0, "uncommitted result survived");
    stored_result s;
    rand_result(&s, "half", 1, "ok", 2, 2);
    CHECK(kvdb_result_put(db, c, &s.r) == 0, "write after crash: %s", kvdb_errmsg(db));
    kvdb_close(db);
    verify_result(path, c, &s.r);
}

/* ---- fixture for tests/test_report.sh ---- */

static const char *default_methods[] = {"fullkv", "streamingllm", "h2o", "snapkv", "pyramidkv", "chunkkv", "sentencekv"};

static int fixture_run(kv_db *db, const char *key, int n_methods, const char *const *methods, int nctx, int ndepth,
                       int nvar) {
    static const char *variants[] = {"single", "multikey"};
    kvdb_run run = {key, "{\"fixture\":true}", "niah", "SmolLM2-135M-Instruct-Q4_1", "f1x7ure", "-O3", "host",
                    "cpu", "cpu", test_next()};
    int64_t rid = kvdb_run_begin(db, &run, NULL);
    if (rid < 0) return -1;
    const int L = 4, H = 3, Hkv = 1, d = 64;
    for (int v = 0; v < nvar; v++)
        for (int x = 0; x < nctx; x++)
            for (int y = 0; y < ndepth; y++) {
                int ctx = 512 << x;
                double depth = ndepth > 1 ? (double)y / (ndepth - 1) : 0.5;
                char ck[96];
                snprintf(ck, sizeof ck, "ctx=%d,depth=%.2f,needle=%s", ctx, depth, variants[v]);
                kvdb_case c = {ck, "niah", ctx, depth, variants[v], test_next(), 0.01 * ctx * (1 + test_unif()), NULL, 0};
                int64_t cid = kvdb_case_get(db, rid, &c);
                if (cid < 0) return -1;
                for (int m = 0; m < n_methods; m++)
                    for (int b = 0; b < 2; b++) {
                        int full = !strcmp(methods[m], "fullkv");
                        if (full && b) continue;
                        double budget = full ? 1.0 : b ? 0.5 : 0.25;
                        stored_result s;
                        rand_result(&s, methods[m], budget, "ok", L, H);
                        /* scores in steps of 0.1 (ROUGE x10 style), so ties happen */
                        double q = full ? 0.9 : 0.3 + 0.5 * budget + 0.1 * test_unif() - 0.05 * x;
                        s.r.score = fmin(1, fmax(0, 0.1 * round(10 * (q + 0.2 * (test_unif() - 0.5)))));
                        s.r.rel_err = full ? 0 : 0.1 * test_unif();
                        s.r.decode_tokens = test_int(8, 64);
                        s.r.decode_s = s.r.decode_tokens * (0.005 + 0.02 * test_unif());
                        s.r.tokens_per_s = s.r.decode_tokens / s.r.decode_s;
                        long kept = (long)fmax(1, floor(budget * ctx)) + s.r.decode_tokens;
                        s.r.budget_tokens = (int)fmax(1, floor(budget * ctx));
                        s.r.mem.fast_tokens = kept * L * Hkv;
                        s.r.mem.fast_aux_bytes = strstr(methods[m], "sentence") ? (size_t)(ctx / 20) * L * d * 4 : 0;
                        s.r.mem.fast_bytes = (size_t)s.r.mem.fast_tokens * 2 * d * 4 + s.r.mem.fast_aux_bytes;
                        s.r.mem.fast_peak = s.r.mem.fast_bytes + (size_t)test_int(0, 4096);
                        s.r.mem.slow_bytes = s.r.mem.slow_peak = 0;
                        if (!strcmp(methods[m], "zeta_custom") && v == 1) s.r.status = "infeasible", s.r.score = NAN;
                        else if (test_unif() < 0.05) s.r.status = "error", s.r.score = NAN;
                        if (kvdb_result_put(db, cid, &s.r)) return -1;
                    }
            }
    return 0;
}

static int make_fixture(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0) {
        fprintf(stderr, "test_db: fixture %s exists; give a new path\n", path);
        return 1;
    }
    char err[512];
    kv_db *db = kvdb_open(path, err, sizeof err);
    if (!db) {
        fprintf(stderr, "test_db: %s\n", err);
        return 1;
    }
    /* Methods: the registry's (or the standard names), inserted in a shuffled order, and two
     * names the registry does not know, which the report lists last, alphabetically. */
    const char *names[32];
    int n = 0;
    for (int i = 0; i < kv_method_count() && n < 28; i++) names[n++] = kv_method_at(i)->name;
    if (!n)
        for (size_t i = 0; i < sizeof default_methods / sizeof *default_methods; i++) names[n++] = default_methods[i];
    names[n++] = "zeta_custom";
    names[n++] = "alpha_custom";
    for (int i = n - 1; i > 0; i--) {
        int j = test_int(0, i);
        const char *t = names[i];
        names[i] = names[j], names[j] = t;
    }
    const char *old[] = {"snapkv", "fullkv"};
    int rc = fixture_run(db, "fixture-old", 2, old, 2, 3, 1) || fixture_run(db, "fixture-new", n, names, 3, 5, 2);
    if (rc) fprintf(stderr, "test_db: fixture: %s\n", kvdb_errmsg(db));
    kvdb_close(db);
    return rc;
}

/* ---- fixture for report --table (tests/test_report.sh) ---- */

typedef struct {
    const char *key, *workload, *model;
    const char *const *variants;   /* NULL-terminated */
    const int *ctx;                /* 0-terminated */
    const double *depths;          /* NAN-terminated; empty: no depth (not needle cases) */
    int per_cell;                  /* cases per (variant, ctx, depth) */
    const char *const *methods;    /* NULL-terminated */
    const double *budgets;         /* 0-terminated; fullkv runs once at 1 */
    const char *params;            /* sekv's params in this run, or NULL */
} tables_run;

/* One result with plausible, random numbers: scores fall with a smaller budget and a
 * longer context; SeKV keeps a fraction of its budget on the fast tier and the rest on
 * the slow tier; some results fail. */
static int tables_result(kv_db *db, int64_t cid, const char *method, const char *params, double budget, int ctx) {
    const int L = 4, Hkv = 1, d = 64;
    stored_result s;
    int full = !strcmp(method, "fullkv"), sekv = !strncmp(method, "sekv", 4);
    rand_result(&s, method, budget, "ok", L, 3);
    s.r.params = params;
    double q = full ? 0.95 : 0.35 + 0.6 * budget + (sekv ? 0.1 : 0) - 0.03 * (ctx / 1024) + 0.15 * (test_unif() - 0.5);
    s.r.score = fmin(1, fmax(0, 0.05 * round(20 * q)));   /* steps of 0.05: ties happen */
    s.r.prefill_s = 1e-4 * ctx * (1 + 0.2 * test_unif());
    s.r.compress_s = full ? 0 : 1e-5 * ctx * (1 + test_unif());
    s.r.decode_tokens = test_int(0, 9) ? test_int(4, 48) : 0;   /* sometimes nothing generated */
    s.r.decode_s = s.r.decode_tokens * (0.004 + 0.01 * test_unif());
    s.r.tokens_per_s = s.r.decode_tokens ? s.r.decode_tokens / s.r.decode_s : NAN;
    s.r.budget_tokens = (int)fmax(1, floor(budget * ctx));
    double fast_share = sekv ? 0.3 + 0.5 * test_unif() : 1;   /* SeKV: summaries + anchors on the fast tier */
    long kept = (long)(fast_share * s.r.budget_tokens) + s.r.decode_tokens;
    s.r.mem.fast_tokens = kept * L * Hkv;
    s.r.mem.fast_aux_bytes = sekv || !strcmp(method, "sentencekv") ? (size_t)(ctx / 16) * L * d * 4 : 0;
    s.r.mem.fast_bytes = (size_t)s.r.mem.fast_tokens * 2 * d * 4 + s.r.mem.fast_aux_bytes;
    s.r.mem.fast_peak = s.r.mem.fast_bytes + (size_t)test_int(0, 8192);
    s.r.mem.slow_bytes = sekv ? (size_t)ctx * L * Hkv * 16 * 4 * (1 + test_int(0, 3)) : 0;
    s.r.mem.slow_peak = s.r.mem.slow_bytes + (sekv ? (size_t)test_int(0, 4096) : 0);
    if (!strcmp(method, "zeta_custom") && ctx >= 4096) s.r.status = "infeasible", s.r.score = NAN;
    else if (sekv && test_unif() < 0.1) s.r.status = "infeasible", s.r.score = NAN;
    else if (test_unif() < 0.04) s.r.status = "error", s.r.score = NAN;
    /* SeKV zoom-ins: a few heads expand often, most rarely; head_stats events their sum */
    kvdb_zoom z[4 * 3 * 48];
    int nz = 0;
    if (sekv && s.r.decode_tokens > 0 && !strcmp(s.r.status, "ok"))
        for (int l = 0; l < L; l++)
            for (int h = 0; h < 3; h++) {
                double p = (l * 3 + h) % 5 == 0 ? 0.8 : 0.05;
                int spans = test_int(4, 40), tot = 0;
                for (int t = 0; t < s.r.decode_tokens; t++)
                    if (test_unif() < p) {
                        int e = test_int(1, spans / 2);
                        z[nz++] = (kvdb_zoom){t, l, h, e, spans};
                        tot += e;
                    }
                s.heads[l * 3 + h].events = tot;
            }
    int rc = kvdb_result_put(db, cid, &s.r);
    if (!rc && nz) rc = kvdb_zoom_put(db, cid, method, budget, z, (size_t)nz);
    return rc;
}

static int tables_one(kv_db *db, const tables_run *tr) {
    kvdb_run run = {tr->key, "{\"fixture\":\"tables\"}", tr->workload, tr->model, "t4bles0", "-O3", "host", "cpu",
                    "cpu", test_next()};
    int64_t rid = kvdb_run_begin(db, &run, NULL);
    if (rid < 0) return -1;
    int nd = 0;
    while (!isnan(tr->depths[nd])) nd++;
    for (int v = 0; tr->variants[v]; v++)
        for (int x = 0; tr->ctx[x]; x++)
            for (int y = 0; y < (nd ? nd : 1); y++)
                for (int k = 0; k < tr->per_cell + (nd && y == 1 && x != 1); k++) {   /* some cells get more */
                    double depth = nd ? tr->depths[y] : NAN;
                    char ck[128];
                    snprintf(ck, sizeof ck, "%s/ctx=%d,depth=%.2f,k=%d", tr->variants[v], tr->ctx[x], depth, k);
                    kvdb_case c = {ck, tr->workload, tr->ctx[x], depth, tr->variants[v], test_next(), 1e-4 * tr->ctx[x], NULL, 0};
                    int64_t cid = kvdb_case_get(db, rid, &c);
                    if (cid < 0) return -1;
                    for (int m = 0; tr->methods[m]; m++) {
                        int full = !strcmp(tr->methods[m], "fullkv");
                        const char *params = !strcmp(tr->methods[m], "sekv") ? tr->params : NULL;
                        for (int b = 0; tr->budgets[b] && !(full && b); b++)
                            if (tables_result(db, cid, tr->methods[m], params, full ? 1 : tr->budgets[b], tr->ctx[x]))
                                return -1;
                    }
                }
    return 0;
}

static int make_tables_fixture(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0) {
        fprintf(stderr, "test_db: fixture %s exists; give a new path\n", path);
        return 1;
    }
    char err[512];
    kv_db *db = kvdb_open(path, err, sizeof err);
    if (!db) {
        fprintf(stderr, "test_db: %s\n", err);
        return 1;
    }
    static const char *const niah[] = {"niah", NULL}, *const ruler[] = {"niah_single_1", "vt", "qa_1", NULL};
    static const int ctx3[] = {1024, 2048, 4096, 0}, ctx2[] = {2048, 4096, 0}, ctx_ab[] = {1024, 2048, 0},
                     ctx1[] = {1024, 0};
    static const double d5[] = {0, 0.25, 0.5, 0.75, 1, NAN}, d3[] = {0, 0.5, 1, NAN}, d2[] = {0, 1, NAN},
                        none[] = {NAN};
    static const double b3[] = {0.1, 0.25, 0.5, 0}, b2[] = {0.1, 0.25, 0}, b1[] = {0.1, 0};
    static const char *const all[] = {"fullkv", "streamingllm", "snapkv", "sentencekv", "sekv", "sekv-ref",
                                      "zeta_custom", NULL},
                             *const some[] = {"fullkv", "snapkv", "sentencekv", "sekv", "sekv-spread", NULL},
                             *const sekv[] = {"sekv", NULL}, *const small[] = {"fullkv", "snapkv", "sekv", NULL};
    const char *A = "SmolLM2-135M-Instruct-Q4_1", *B = "Qwen2.5-0.5B-Instruct-Q8_0";
    /* SeKV ablations, each its own run as kvbench run records them; the last two are one
     * setting written two ways (params are compared normalised). */
    static const char *const ablations[] = {"zoom=0", "trained_zoom=0", "fixed_chunk=16", "rank=8",
                                            "rank=64", "rank=16,zoom=0", " zoom=0 ,rank=16", "fixed_chunk=same"};
    tables_run runs[16] = {
        {"tables-niah", "niah", A, niah, ctx3, d5, 1, all, b3, NULL},
        {"tables-ruler", "ruler", A, ruler, ctx2, none, 2, some, b2, NULL},
    };
    int n = 2;
    char keys[8][64];
    for (int i = 0; i < 8; i++) {
        snprintf(keys[i], sizeof keys[i], "tables-sekv-%d", i);
        runs[n++] = (tables_run){keys[i], "niah", A, niah, ctx_ab, d3, 1, sekv, i == 3 ? b2 : b1, ablations[i]};
    }
    runs[n++] = (tables_run){"tables-model-b", "niah", B, niah, ctx1, d2, 1, small, b1, NULL};
    /* C8 and C9 on RULER too (the paper states them across benchmarks): per-workload claim rows */
    static const char *const ruler_ab[] = {"fixed_chunk=same", "rank=8", "rank=64"};
    char rkeys[3][64];
    for (int i = 0; i < 3; i++) {
        snprintf(rkeys[i], sizeof rkeys[i], "tables-ruler-sekv-%d", i);
        runs[n++] = (tables_run){rkeys[i], "ruler", A, ruler, ctx2, none, 2, sekv, b1, ruler_ab[i]};
    }
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) rc = tables_one(db, &runs[i]);
    /* and a run that recorded nothing yet (the latest) */
    kvdb_run empty = {"tables-empty", "{}", "niah", A, "t4bles0", "-O3", "host", "cpu", "cpu", 1};
    if (!rc && kvdb_run_begin(db, &empty, NULL) < 0) rc = -1;
    if (rc) fprintf(stderr, "test_db: tables fixture: %s\n", kvdb_errmsg(db));
    kvdb_close(db);
    return rc;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "--cmd") && argc >= 3) {
        if (!strcmp(argv[2], "report")) return cmd_report(argc - 2, argv + 2);
        if (!strcmp(argv[2], "plot")) return cmd_plot(argc - 2, argv + 2);
        fprintf(stderr, "test_db: --cmd report|plot\n");
        return 2;
    }
    if (argc == 2 && !strcmp(argv[1], "--registry")) {
        for (int i = 0; i < kv_method_count(); i++) printf("%s\n", kv_method_at(i)->name);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "--make-fixture")) {
        test_seed();
        return make_fixture(argv[2]);
    }
    if (argc == 3 && !strcmp(argv[1], "--make-tables-fixture")) {
        test_seed();
        return make_tables_fixture(argv[2]);
    }
    if (argc == 3 && !strcmp(argv[1], "--make-empty")) {
        char err[512];
        kv_db *db = kvdb_open(argv[2], err, sizeof err);
        if (!db) fprintf(stderr, "test_db: %s\n", err);
        kvdb_close(db);
        return db ? 0 : 1;
    }
    if (argc > 1) {
        fprintf(stderr, "usage: test_db [--make-fixture PATH | --make-tables-fixture PATH | --make-empty PATH | --registry | --cmd report|plot ...]\n");
        return 2;
    }
    test_seed();
    char dir[] = "/tmp/kvbench_test_db_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_roundtrip(dir);
    test_bad_paths(dir);
    test_crash(dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (!check_failures && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_done("test_db");
}

/* Fuzz target: `kvbench report` on arbitrary SQLite files. The first byte picks how the
 * file is made: odd, the rest of the input is the file's bytes; even, it is an SQL
 * script run into a fresh file (files, pragmas and attachments refused, run time
 * capped), so the fuzzer reaches well-formed files with hostile contents. Then the
 * default table, every --table (compare with a --base that names settings) and the CSV
 * output are printed to /dev/null. */
#include <sqlite3.h>
#include "fuzz.h"
#include "../../harness/cli/commands.h"

static char dir[64], db[96], wal[112], shm[112];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    snprintf(dir, sizeof dir, "/tmp/kvbench-fuzz-report-XXXXXX");
    if (!mkdtemp(dir)) { perror("fuzz_report: mkdtemp"); exit(1); }
    snprintf(db, sizeof db, "%s/r.db", dir);
    snprintf(wal, sizeof wal, "%s-wal", db);
    snprintf(shm, sizeof shm, "%s-shm", db);
    if (!freopen("/dev/null", "w", stdout)) exit(1);
    return 0;
}

static int authorize(void *u, int op, const char *a, const char *b, const char *c, const char *d) {
    (void)u; (void)a; (void)b; (void)c; (void)d;
    return op == SQLITE_ATTACH || op == SQLITE_DETACH || op == SQLITE_PRAGMA ? SQLITE_DENY : SQLITE_OK;
}
static int progress(void *u) { return ++*(int *)u > 2000; }   /* x 1000 VM steps */

static void from_sql(const uint8_t *data, size_t n) {
    sqlite3 *h;
    if (sqlite3_open(db, &h) != SQLITE_OK) { sqlite3_close(h); return; }
    int steps = 0;
    sqlite3_exec(h, "PRAGMA synchronous=OFF; PRAGMA journal_mode=MEMORY", NULL, NULL, NULL);   /* no fsync */
    sqlite3_set_authorizer(h, authorize, NULL);
    sqlite3_progress_handler(h, 1000, progress, &steps);
    sqlite3_limit(h, SQLITE_LIMIT_LENGTH, 1 << 20);
    char *sql = fuzz_str(data, n);
    sqlite3_exec(h, sql, NULL, NULL, NULL);
    free(sql);
    sqlite3_close(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n < 1 || n > (1 << 20)) return 0;
    unlink(db); unlink(wal); unlink(shm);
    if (data[0] & 1) {
        FILE *f = fopen(db, "wb");
        if (!f || fwrite(data + 1, 1, n - 1, f) != n - 1) abort();
        fclose(f);
    } else {
        from_sql(data + 1, n - 1);
    }
    FILE *saved = stderr;
    stderr = fuzz_null();                          /* the reports' refusals */
    char *v[][8] = {{"report", "--db", db},
                    {"report", "--db", db, "--csv"},
                    {"report", "--db", db, "--by", "ctx"},
                    {"report", "--db", db, "--table", "main", "--csv"},
                    {"report", "--db", db, "--table", "niah"},
                    {"report", "--db", db, "--table", "budget"},
                    {"report", "--db", db, "--table", "rank", "--csv"},
                    {"report", "--db", db, "--table", "ablation"},
                    {"report", "--db", db, "--table", "memory"},
                    {"report", "--db", db, "--table", "latency"},
                    {"report", "--db", db, "--table", "compare", "--base", "snapkv:window=8"},
                    {"report", "--db", db, "--table", "compare", "--base", "sekv@0.1:params_file=none", "--csv"}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        int argc = 0;
        while (argc < 8 && v[i][argc]) argc++;
        (void)cmd_report(argc, v[i]);
    }
    stderr = saved;
    return 0;
}

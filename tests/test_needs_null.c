/* A method without a needs() hook (it asks for no statistics) must run: `kvbench run`
 * called it unguarded and crashed (rc 139) where sim and generate checked for NULL.
 * Linked with -Wl,--wrap for the registry (Makefile): every method is served as a copy
 * with .needs = NULL, and a synthetic run must record every result: FullKV and
 * StreamingLLM, which read no statistics, ok; SnapKV and ChunkKV, given none of the
 * window statistics they select by, fail as a recorded result, not as a crash. */
#include <sqlite3.h>
#include <strings.h>
#include <unistd.h>
#include "../harness/commands.h"
#include "../methods/method.h"
#include "check.h"

const kv_method *__real_kv_method_at(int i);
enum { MAX_M = 64 };
static kv_method copies[MAX_M];

const kv_method *__wrap_kv_method_at(int i) {
    const kv_method *m = __real_kv_method_at(i);
    if (!m || i >= MAX_M) return m;
    copies[i] = *m;
    copies[i].needs = NULL;
    return &copies[i];
}
const kv_method *__wrap_kv_method_find(const char *name) {
    for (int i = 0; i < kv_method_count(); i++)
        if (!strcasecmp(__real_kv_method_at(i)->name, name)) return __wrap_kv_method_at(i);
    return NULL;
}

int main(void) {
    char db[] = "/tmp/kvbench_needs_null_XXXXXX";
    int fd = mkstemp(db);
    if (fd < 0) return perror("mkstemp"), 1;
    close(fd);
    unlink(db);
    char *argv[] = {"run", "--workload", "synthetic-niah", "--methods", "fullkv,streamingllm,snapkv,chunkkv",
                    "--ctx", "512", "--budget", "0.25", "--layers", "2", "--depths", "0.5", "--quiet", "--db", db, NULL};
    int rc = cmd_run((int)(sizeof argv / sizeof *argv) - 1, argv);
    CHECK(rc == 0, "run with .needs = NULL methods: rc %d", rc);
    sqlite3 *h = NULL;
    int ok = -1, all = -1, err = -1;
    if (sqlite3_open(db, &h) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(h, "SELECT count(*), sum(status = 'error'), sum(status = 'ok' AND method IN"
                               " ('fullkv', 'streamingllm')) FROM results", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            all = sqlite3_column_int(st, 0), err = sqlite3_column_int(st, 1), ok = sqlite3_column_int(st, 2);
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
    CHECK(all == 4 && ok == 2, "results %d (want 4), fullkv/streamingllm ok %d of 2 (%d errors)", all, ok, err);
    unlink(db);
    return check_done("test_needs_null");
}

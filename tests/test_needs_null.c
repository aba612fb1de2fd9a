/* A method without a needs() hook (it asks for no statistics) must run: `kvbench run`
 * once called it unguarded and crashed (rc 139). Through the door (method.h) needs is
 * optional and its default is applied at registration, so a table registered with
 * .needs = NULL asks for nothing: FullKV and StreamingLLM, which read no statistics, run
 * ok; SnapKV and ChunkKV, given none of the window statistics they select by, fail as a
 * recorded result, never as a crash. */
#include <sqlite3.h>
#include <stdio.h>
#include <unistd.h>
#include "../harness/cli/commands.h"
#include "../methods/method.h"
#include "check.h"

static const char *const BASE[] = {"fullkv", "streamingllm", "snapkv", "chunkkv"};
static kv_method copies[4];
static char names[4][64];

/* Each base method again as "NAME-noneeds", its needs hook taken away. */
static void register_copies(void) {
    for (int i = 0; i < 4; i++) {
        const kv_method *m = kv_method_find(BASE[i]);
        CHECK(m != NULL, "%s not registered", BASE[i]);
        if (!m) continue;
        copies[i] = *m;
        copies[i].needs = NULL;
        snprintf(names[i], sizeof names[i], "%s-noneeds", BASE[i]);
        copies[i].name = names[i];
        char err[256] = "";
        CHECK(kv_method_register(&copies[i], "test_needs_null", err, sizeof err) == 0, "register %s: %s", names[i], err);
    }
}

int main(void) {
    register_copies();
    char db[] = "/tmp/kvbench_needs_null_XXXXXX";
    int fd = mkstemp(db);
    if (fd < 0) return perror("mkstemp"), 1;
    close(fd);
    unlink(db);
    char *argv[] = {"run", "--workload", "synthetic-niah", "--methods", "fullkv-noneeds,streamingllm-noneeds,snapkv-noneeds,chunkkv-noneeds",
                    "--ctx", "512", "--budget", "0.25", "--layers", "2", "--depths", "0.5", "--quiet", "--db", db, NULL};
    int rc = cmd_run((int)(sizeof argv / sizeof *argv) - 1, argv);
    CHECK(rc == 0, "run with .needs = NULL methods: rc %d", rc);
    sqlite3 *h = NULL;
    int ok = -1, all = -1, err = -1;
    if (sqlite3_open(db, &h) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(h, "SELECT count(*), sum(status = 'error'), sum(status = 'ok' AND method IN"
                               " ('fullkv-noneeds', 'streamingllm-noneeds')) FROM results", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            all = sqlite3_column_int(st, 0), err = sqlite3_column_int(st, 1), ok = sqlite3_column_int(st, 2);
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
    CHECK(all == 4 && ok == 2, "results %d (want 4), fullkv/streamingllm ok %d of 2 (%d errors)", all, ok, err);
    unlink(db);
    return check_done("test_needs_null");
}

/* What report and plot share: opening a results file read-only, picking a run, the
 * order methods are listed in, byte counts in human units, and a colour per method. */
#ifndef KV_RUNINFO_H
#define KV_RUNINFO_H
#include <stddef.h>
#include <stdint.h>
#include "../results/db.h"

typedef struct {
    int64_t id;
    char *run_key, *workload, *model, *git_commit, *backend, *build_flags, *created;
    uint64_t seed;
    const char *decode_rule;  /* "append", "hold", or for runs recorded before kvbench run --decode
                                 existed "hold (before --decode)": the rule they followed */
    int n_runs;             /* runs in the file */
} kv_runinfo;

/* Opens `path` read-only and loads run `run_id` (<= 0: the latest). On failure prints
 * "kvbench CMD: reason" to stderr and returns NULL. */
kv_db *kv_report_open(const char *cmd, const char *path, int64_t run_id, kv_runinfo *ri);
void kv_runinfo_free(kv_runinfo *ri);
/* Every run of the open file, in id order (*n of them); NULL after printing
 * "kvbench CMD: reason". Free with kv_runinfo_free_all. */
kv_runinfo *kv_runinfo_all(const char *cmd, kv_db *db, int *n);
void kv_runinfo_free_all(kv_runinfo *ri, int n);
/* "run 3: workload niah, model M, git abc, seed 42, backend cpu, created T" */
void kv_runinfo_line(const kv_runinfo *ri, char *buf, size_t n);

/* Orders method names: registry order first, unknown names after, alphabetically. */
int kv_method_cmp(const char *a, const char *b);
/* "512 B", "1.5 KiB", "12.0 MiB", "1.20 GiB". */
void kv_human_bytes(double bytes, char *buf, size_t n);
/* A fixed colour ("#rrggbb") per method name, the same in every figure. */
const char *kv_method_color(const char *name);
/* Budget as given: "0.25" or "512". */
void kv_budget_str(double budget, char *buf, size_t n);
#endif

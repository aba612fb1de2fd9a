/* Joining results files (the shards of one run, written on different machines) into one.
 *
 * A run's identity is its row in the runs table: every column but the per-machine ones
 * (id, created, host, cpu, config_json, which also holds the thread count). Whatever
 * columns a newer schema adds to runs are part of the identity automatically.
 *
 * A case or result that is in both files must be equal in every column but the ids and the
 * measurements (timings and device/memory peaks: see merge_is_measurement); children of a
 * result (head_stats, layer_err, zoom_events: every table with a result_id column) come
 * with the result when it is new. Columns are matched by name, so an input from an older
 * schema merges with NULLs for what it lacks. */
#ifndef KV_MERGE_H
#define KV_MERGE_H
#include <stdint.h>
#include "db.h"

/* 1 for a column that measures rather than computes (may differ between two runs of the
 * same result): names ending in _s or _ms, containing _s_, rss or peak_bytes, starting with
 * gpu_, tokens_per_s, created. */
int merge_is_measurement(const char *column);

/* The run identities of a results file, sorted by run_key; for comparing files. */
typedef struct merge_runs merge_runs;
/* Reads them from db (any kvbench results connection); NULL with err set. */
merge_runs *merge_runs_read(kv_db *db, char *err, size_t errlen);
void merge_runs_free(merge_runs *r);
int merge_runs_count(const merge_runs *r);
/* 0 when a and b hold the same run identities; else 1 and one line in why saying what
 * differs (the run key field, or the column and both values), naming the files a_name
 * and b_name. */
int merge_runs_differ(const merge_runs *a, const char *a_name, const merge_runs *b, const char *b_name, char *why,
                      size_t whylen);

typedef struct {
    int64_t runs_new, cases_new, results_new, results_present;
} merge_stats;

/* Merges the results file in_path into out in one transaction: runs matched by run_key,
 * cases by (run, case_key), results by (case, method, budget); new ones copied with their
 * children, present ones compared (a difference is an error naming the case, method,
 * budget and column, and nothing is written); the plan rows are unioned. 0 or -1 with err. */
int merge_file(kv_db *out, const char *in_path, merge_stats *st, char *err, size_t errlen);

/* Settings for a merge into out: a large page cache and in-memory temporary tables (the
 * id maps and the unique indexes of a growing output are what a merge of many files
 * spends its time on). Best effort: nothing fails if SQLite declines. */
void merge_speed_up(kv_db *out);

/* One run's completeness against its plan. */
typedef struct {
    int64_t run_id;
    char workload[64];
    int64_t planned, present, missing, missing_cases;   /* present: planned results found */
    int64_t unplanned;         /* results of the run that no plan row lists */
    char unplanned_eg[256];    /* one of them: "case_key method @ budget" */
} merge_missing;
/* Calls each(case_key, n_missing, n_planned, ctx) for every case of run run_id with
 * planned results not recorded (in case_key order) and fills m. 0 or -1 with err. */
int merge_missing_scan(kv_db *out, int64_t run_id, merge_missing *m,
                       void (*each)(const char *case_key, int missing, int planned, void *ctx), void *ctx, char *err,
                       size_t errlen);

#endif

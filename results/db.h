/* The results database (SQLite, WAL). One run = one configuration; rerunning the same
 * configuration finds the same run and skips (case, method, budget) rows already
 * committed. Each result is committed in its own transaction, so kill -9 loses at most
 * the result being computed. */
#ifndef KV_DB_H
#define KV_DB_H
#include <stdint.h>
#include "../methods/method.h"

typedef struct kv_db kv_db;

/* 2: cases gained gpu_peak_bytes, gpu_used_bytes, gpu_prefill_ms and results gained
 * gpu_peak_bytes (NULL on the CPU).
 * kvdb_open migrates a version-1 file in place; kvdb_open_readonly reads either. */
#define KVDB_SCHEMA_VERSION 2

/* Opens or creates the file and its schema. NULL with a one-line reason naming the file. */
kv_db *kvdb_open(const char *path, char *err, size_t errlen);
/* Opens an existing results file for reading (report, plot): never creates it; NULL with a
 * reason when it is missing, not SQLite, or not a kvbench results file. */
kv_db *kvdb_open_readonly(const char *path, char *err, size_t errlen);
void kvdb_close(kv_db *db);
/* The underlying connection, for read queries (reports, tests). */
struct sqlite3 *kvdb_sqlite(kv_db *db);
const char *kvdb_path(const kv_db *db);

typedef struct {
    const char *run_key;       /* identity: same key = same run (resume) */
    const char *config_json;   /* the full configuration */
    const char *workload, *model;
    const char *git_commit, *build_flags, *host, *cpu, *backend;
    uint64_t seed;
} kvdb_run;
/* Returns the run id (existing one if run_key is known; *resumed set to 1), or -1. */
int64_t kvdb_run_begin(kv_db *db, const kvdb_run *r, int *resumed);

typedef struct {
    const char *case_key;      /* unique within the run, e.g. "ctx=2048,depth=0.50,needle=single" */
    const char *workload;
    int ctx;
    double depth;
    const char *variant;       /* needle kind or task name */
    uint64_t seed;
    double prefill_s;          /* the shared prefill, timed once */
} kvdb_case;
/* Insert or find the case; returns its id or -1. */
int64_t kvdb_case_get(kv_db *db, int64_t run_id, const kvdb_case *c);

/* Device measurements of a case on the CUDA backend: peak_bytes, the allocator's
 * high-water mark over the case (kb_cuda_mem_stats, reset at the case's start);
 * used_bytes, cudaMemGetInfo's total - free at the peak the run could observe;
 * prefill_ms, the shared prefill timed by CUDA events. A negative value (NaN for
 * prefill_ms) stores NULL; the columns stay NULL for CPU runs. 0 or -1. */
int kvdb_case_gpu(kv_db *db, int64_t case_id, int64_t peak_bytes, int64_t used_bytes, double prefill_ms);
/* The file's schema version (1 for an old file opened read-only, else KVDB_SCHEMA_VERSION). */
int kvdb_schema_version(const kv_db *db);

/* 1 if (case, method, budget) is already recorded, 0 if not, -1 on error. */
int kvdb_result_exists(kv_db *db, int64_t case_id, const char *method, double budget);

typedef struct {
    const char *method, *params, *status;   /* status: "ok", "infeasible" or "error" */
    double budget;                           /* as given: fraction (<= 1) or token count */
    int budget_tokens;                       /* resolved tokens per layer per kv head */
    double score;                            /* task score in [0,1] */
    double rel_err;                          /* mean relative error vs FullKV (attention output) */
    double prefill_s, compress_s, decode_s;
    int decode_tokens;
    double tokens_per_s;
    kv_mem mem;
    int64_t gpu_peak_bytes;                  /* CUDA backend: the allocator's high-water mark over
                                                this method's compression and decode (weights
                                                included); <= 0 stores NULL (CPU runs) */
    const char *output;                      /* generated text or NULL */
    int n_layers, n_heads;
    const kv_headstat *heads;                /* [n_layers][n_heads] or NULL */
    const double *layer_err;                 /* [n_layers] or NULL */
} kvdb_result;
/* Records one result with its per-layer/head rows in one transaction; 0, or -1 on an
 * error. A second put for the same (case, method, budget) writes nothing and returns 1
 * ("already recorded" in kvdb_errmsg): two identical runs on one file race for each
 * result, and the loser's copy is already present, not an error. Resume with
 * kvdb_result_exists. Doubles are stored bit-exact, except NaN, which SQLite
 * cannot hold and is stored as NULL. seed (uint64) is stored as its int64 bit pattern. */
int kvdb_result_put(kv_db *db, int64_t case_id, const kvdb_result *r);

const char *kvdb_errmsg(kv_db *db);

/* SeKV zoom-ins (or any method's per-step, per-head events): rows of table
 * zoom_events(result_id, step, layer, head, expanded), created on first use. The result
 * (case, method, budget) must already be recorded with kvdb_result_put. All n rows go in
 * one transaction; recording the same (step, layer, head) twice is rejected. 0 or -1. */
typedef struct {
    int step, layer, head, expanded;
} kvdb_zoom;
int kvdb_zoom_put(kv_db *db, int64_t case_id, const char *method, double budget,
                  const kvdb_zoom *ev, size_t n);

#endif

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
 * 3: results gained fast_decode_peak (fast-tier bytes from the end of compression through
 * decode: the steady state, without the prefill transient) and rss_peak, cases gained
 * rss_peak (the process's measured peak resident set; NULL where it cannot be measured),
 * prompt_sha256 and prompt_tokens (the exact prompt's SHA-256 and token count), and the
 * plan table (run_id, case_key, method, budget): what each command asked for; results
 * gained the fidelity metrics (ans_tokens, ans_nll, fid_steps, kl, top1) and the repeated
 * timings (repeats, compress_spread, decode_spread); cases gained the load average at
 * their start and end (load_start, load_end). NULL in rows written before.
 * 4: cases and results gained gpu_driver_peak_bytes: the driver's view of the device
 * peak (cudaMemGetInfo's total - free, sampled; the CUDA context, the libraries and other
 * processes included), beside the allocator's gpu_peak_bytes; NULL on the CPU and in rows
 * written before.
 * kvdb_open migrates older files in place; kvdb_open_readonly reads any of them. */
#define KVDB_SCHEMA_VERSION 4

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
    const char *prompt_sha256; /* SHA-256 hex of the exact prompt text, or NULL (text workloads) */
    int prompt_tokens;         /* its token count, or 0 */
} kvdb_case;
/* Insert or find the case; returns its id or -1. */
int64_t kvdb_case_get(kv_db *db, int64_t run_id, const kvdb_case *c);
/* The id of the run's case with this key if it is recorded, 0 if not, -1 on error
 * (kvdb_sqlite's errmsg says why). Reads only: a driver deciding what is left to run. */
int64_t kvdb_case_find(kv_db *db, int64_t run_id, const char *case_key);
/* How many results the run holds over all its cases; -1 on error. */
int64_t kvdb_run_result_count(kv_db *db, int64_t run_id);

/* Device measurements of a case on the CUDA backend: peak_bytes, the allocator's
 * high-water mark over the case (kb_cuda_mem_stats, reset at the case's start);
 * used_bytes, cudaMemGetInfo's total - free at the peak the run could observe;
 * prefill_ms, the shared prefill timed by CUDA events. A negative value (NaN for
 * prefill_ms) stores NULL; the columns stay NULL for CPU runs. 0 or -1. */
int kvdb_case_gpu(kv_db *db, int64_t case_id, int64_t peak_bytes, int64_t used_bytes, double prefill_ms);
/* The driver's view of the device peak over a case's shared prefill (CUDA backend:
 * cudaMemGetInfo sampled at every allocation, kb_cuda_mem_sample); bytes <= 0 stores NULL
 * (CPU runs never call it). 0 or -1. */
int kvdb_case_gpu_driver(kv_db *db, int64_t case_id, int64_t bytes);
/* The process's peak resident set over a case's shared prefill (Linux VmHWM, reset at the
 * prefill's start); bytes <= 0 stores NULL. 0 or -1. */
int kvdb_case_rss(kv_db *db, int64_t case_id, int64_t bytes);
/* The 1-minute load average at a case's start and end (getloadavg); 0 or -1. */
int kvdb_case_load(kv_db *db, int64_t case_id, double load_start, double load_end);
/* The file's schema version (1 to 3 for an old file opened read-only, else KVDB_SCHEMA_VERSION). */
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
    int64_t gpu_driver_peak_bytes;           /* CUDA backend: the driver's view of the same
                                                (cudaMemGetInfo sampled); <= 0 stores NULL */
    int64_t fast_decode_peak;                /* most fast-tier bytes from the end of compression
                                                through the last decode step (no prefill
                                                transient); <= 0 stores NULL */
    int64_t rss_peak;                        /* the process's peak resident set over this
                                                method's init, compression and decode (model
                                                weights and the case's prefill included);
                                                <= 0 stores NULL (not measured) */
    const char *output;                      /* generated text or NULL */
    int n_layers, n_heads;
    const kv_headstat *heads;                /* [n_layers][n_heads] or NULL */
    const double *layer_err;                 /* [n_layers] or NULL */
    /* Fidelity against FullKV (harness/drivers/fidelity.c); stored NULL while the count is 0. */
    int ans_tokens;                          /* reference answer tokens scored */
    double ans_nll;                          /* their mean -ln p, teacher-forced (nats/token) */
    int fid_steps;                           /* steps of FullKV's greedy answer compared */
    double kl, top1;                         /* mean KL(FullKV || method) (nats), top-1 agreement */
    /* --repeat: the timed sections ran `repeats` times (0: not recorded); compress_s and
     * decode_s are then medians, the spreads max - min in seconds. */
    int repeats;
    double compress_spread, decode_spread;
} kvdb_result;
/* Records one result with its per-layer/head rows in one transaction; 0, or -1 on an
 * error. A second put for the same (case, method, budget) writes nothing and returns 1
 * ("already recorded" in kvdb_errmsg): two identical runs on one file race for each
 * result, and the loser's copy is already present, not an error. Resume with
 * kvdb_result_exists. Doubles are stored bit-exact, except NaN, which SQLite
 * cannot hold and is stored as NULL. seed (uint64) is stored as its int64 bit pattern. */
int kvdb_result_put(kv_db *db, int64_t case_id, const kvdb_result *r);

const char *kvdb_errmsg(kv_db *db);

/* The run's plan: every case_keys[c] x (methods[p], budgets[p]) the command asked for, all
 * shards' cases included (a shard file then tells `kvbench merge` what the whole run should
 * hold). Rows already there are kept; all in one transaction. 0 or -1. */
int kvdb_plan_put(kv_db *db, int64_t run_id, const char *const *case_keys, int n_cases, const char *const *methods,
                  const double *budgets, int n_pairs);

/* SeKV zoom-ins (or any method's per-step, per-head events): rows of table
 * zoom_events(result_id, step, layer, head, expanded, spans), created on first use
 * (spans: the compressed spans the head could expand, 0 = not known, stored as NULL;
 * a file made before the column gets it added). The result
 * (case, method, budget) must already be recorded with kvdb_result_put. All n rows go in
 * one transaction; recording the same (step, layer, head) twice is rejected. 0 or -1. */
typedef struct {
    int step, layer, head, expanded, spans;
} kvdb_zoom;
int kvdb_zoom_put(kv_db *db, int64_t case_id, const char *method, double budget,
                  const kvdb_zoom *ev, size_t n);

/* What a method chose for one case, as text under a key (SeKV: key "params_used", the
 * parameters it ran with, alpha as fitted for this prompt): table result_notes(result_id,
 * key, text), created on first use. The result must already be recorded. 0 or -1. */
int kvdb_note_put(kv_db *db, int64_t case_id, const char *method, double budget, const char *key,
                  const char *text);

#endif

/* The case loop of `kvbench run`, once for every kind of case: it records the runs and the
 * whole plan, keeps this shard's cases (split by cost) and, with --jobs N, this job's, finds
 * what the results file lacks (resume), prepares each case that lacks something, runs its
 * missing (method, budget) pairs (all in one call when the source decodes them as a
 * batch), commits each result at once, and prints progress, ETA and the summary. What a
 * case is comes from a case source, a table of functions shaped like the method door
 * (methods/method.h): the synthetic workloads (syn_source.c) and the text workloads
 * through the model (model_source.c). */
#ifndef KV_CASE_LOOP_H
#define KV_CASE_LOOP_H
#include <stddef.h>
#include <stdint.h>
#include "shard.h"
#include "../identity/provenance.h"
#include "../../methods/method.h"
#include "../../results/db.h"

/* One case of the plan, in the order the loop runs them. */
typedef struct {
    const char *key;     /* case_key: unique within its run (the source's string) */
    int run;             /* which of the source's runs holds it (0..n_runs-1) */
    double cost;         /* relative work of its preparation: the shard split and the ETA */
    double pair_cost;    /* relative work of one of its results: the ETA */
    const char *label;   /* the progress lines' name for it before its key, or NULL */
} cl_case;

/* A case source. self is its own state; every function gets it. A function that fails
 * prints its one line (run_fail) and returns -1. The optional ones may be NULL. */
typedef struct {
    const char *name;    /* "synthetic", "model" */
    void *self;
    int n_runs;          /* runs recorded by one command (one per synthetic workload) */
    const cl_case *cases;
    int n_cases;
    /* Run r's row: its key and configuration written into key/json, the rest pointing at
     * the source's strings or prov's. */
    int (*run_row)(void *self, int r, const provenance *prov, char *key, size_t key_len, char *json,
                   size_t json_len, kvdb_run *row);
    /* 1: a case's missing pairs go to run_pairs in one call (a batched decode); 0: one
     * pair a call, each committed before the next starts. */
    int batched;
    /* Case c made ready for the pairs (methods[i], budgets[i]), i < n, it lacks (the shared
     * prefill, with the statistics they need), its row filled; label (NULL: quiet) starts
     * any line it prints about the case. *prepared is handed to the functions below. */
    int (*prepare)(void *self, int c, const char *label, const kv_method *const *methods, const double *budgets,
                   int n, void **prepared, kvdb_case *row);
    /* Optional: the case's row is recorded as case_id, before its pairs run (what the
     * source records beside it: device and memory peaks of the preparation). */
    void (*recorded)(void *self, void *prepared, kv_db *db, int64_t case_id);
    /* Every pair (methods[i], budgets[i]), i < n, on the prepared case: results[i] filled,
     * its strings and arrays owned by the source until the next call or release. */
    void (*run_pairs)(void *self, void *prepared, const kv_method *const *methods, const double *budgets, int n,
                      const kvdb_result **results);
    /* Optional: results[i] of the last run_pairs call newly committed as a result of
     * case_id: what the source records beside it (notes, events) and its summary's count. */
    void (*added)(void *self, void *prepared, kv_db *db, int64_t case_id, int c, int i, const kvdb_result *r);
    /* The case is done (finished: every pair ran and was committed) or abandoned. */
    void (*release)(void *self, void *prepared, kv_db *db, int64_t case_id, int finished);
    /* Optional: before --jobs starts its copies, the parent lets go of what each copy
     * loads for itself (the model's weights). */
    void (*unload)(void *self);
    /* Printed after the loop when it ran through (before the "N results written" line);
     * run_ids[r] is run r's row in db. */
    void (*summary)(void *self, kv_db *db, const int64_t *run_ids);
} cl_source;

/* The pairs every case runs, and the loop's settings. */
typedef struct {
    const kv_method *const *methods;   /* the grid's pairs (methods[p], budgets[p]), in order */
    const double *budgets;
    int n_pairs;
    shard_spec shard;
    int jobs;            /* --jobs N: 0 or 1, this process runs the cases; N > 1: N copies do */
    int job_index;       /* a copy of --jobs: its index (every jobs-th of the shard's cases); -1 */
    int threads;         /* --threads (0: the machine's, divided among the jobs) */
    int argc;            /* the command's arguments, for the copies of --jobs */
    char **argv;
    int quiet;
} cl_grid;

/* Runs the source's cases into db: 0, or -1 with the error printed. */
int case_loop_run(const cl_source *src, const cl_grid *g, kv_db *db, const provenance *prov);

/* calloc of at least one element, or "kvbench run: out of memory" and exit 1 */
void *cl_xcalloc(size_t n, size_t size);

/* A byte count for progress lines and summaries: "512 B", "3.5 KiB", "1.2 MiB", "2.50 GiB". */
void cl_fmt_bytes(char *buf, size_t len, double b);
/* A duration for progress lines: "42s", "3m05s", "2h10m", "?" when unknown. */
void cl_fmt_dur(char *buf, size_t n, double s);

#endif

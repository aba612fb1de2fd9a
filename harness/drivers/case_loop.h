/* The case loop of `kvbench run`, once for every kind of case: it records the runs and the
 * whole plan, keeps this shard's cases (split by cost), finds what the results file lacks
 * (resume), prepares each case that lacks something, runs its missing (method, budget)
 * pairs through one call, commits each result at once, and prints progress, ETA and the
 * summary. What a case is comes from a case source, a table of functions shaped like the
 * method door (methods/method.h): the synthetic workloads are one (run.c). */
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
    char key[128];       /* case_key: unique within its run */
    int run;             /* which of the source's runs holds it (0..n_runs-1) */
    double cost;         /* relative work: the shard split, progress and ETA */
    const char *label;   /* the progress lines' name for it (its workload) */
} cl_case;

/* A case source. self is its own state; every function gets it. A function that fails
 * prints its one line (run_fail) and returns -1. */
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
    /* Case c made ready for the pairs (methods[i], budgets[i]), i < n, it lacks (the shared
     * prefill, with the statistics they need), its row filled; *prepared is handed back to
     * run_pairs and release. */
    int (*prepare)(void *self, int c, const kv_method *const *methods, const double *budgets, int n,
                   void **prepared, kvdb_case *row);
    /* Every pair (methods[i], budgets[i]), i < n, on the prepared case: results[i] filled,
     * its strings and arrays owned by the source until the next call or release. */
    void (*run_pairs)(void *self, void *prepared, const kv_method *const *methods, const double *budgets, int n,
                      const kvdb_result **results);
    void (*release)(void *self, void *prepared);
    /* results[p] of case c newly committed as case_id: the summary's count, and what the
     * source records beside a result. */
    void (*added)(void *self, kv_db *db, int64_t case_id, int c, int p, const kvdb_result *r);
    /* Printed after the loop when it ran through (before the "N results written" line). */
    void (*summary)(void *self);
} cl_source;

/* The grid every case runs and the loop's settings. */
typedef struct {
    const kv_method *const *methods;
    int n_methods;
    const double *budgets;
    int n_budgets;
    shard_spec shard;
    int quiet;
} cl_grid;

/* Runs the source's cases into db: 0, or -1 with the error printed. */
int case_loop_run(const cl_source *src, const cl_grid *g, kv_db *db, const provenance *prov);

/* calloc of at least one element, or "kvbench run: out of memory" and exit 1 (run.c uses it too) */
void *cl_xcalloc(size_t n, size_t size);

#endif

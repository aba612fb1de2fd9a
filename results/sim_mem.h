/* kvbench sim's memory breakdown beside its results: table sim_mem, one row per
 * (case, method, budget), created by kvdb_sim_mem_table before the first put. Read back by
 * plot --figure memory (kvq_sim_memory). */
#ifndef KV_SIM_MEM_H
#define KV_SIM_MEM_H
#include <stdint.h>
#include "db.h"

typedef struct {
    int64_t case_id;
    const char *method;
    double budget;
    double weights, act_prefill, act_decode, stats;   /* bytes */
    double fast_prefill_peak, total_steady, total_peak;
    int measured_layers, n_layers, batched;
    double kv_read, slow_read;                         /* bytes read per decode step */
    double cpu_ms, gpu_ms;                             /* < 0 stores NULL (not modelled) */
} kvdb_sim_mem;

/* Creates table sim_mem if the file lacks it. 0 or -1. */
int kvdb_sim_mem_table(kv_db *db);
/* Records (or replaces) one row. 0 or -1. */
int kvdb_sim_mem_put(kv_db *db, const kvdb_sim_mem *r);

#endif

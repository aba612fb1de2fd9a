/* Memory estimates checked before a run starts, so a context too large for the machine
 * is refused up front with the reason instead of failing (or swapping) mid-run. */
#ifndef KV_RUN_MEM_H
#define KV_RUN_MEM_H
#include <stddef.h>

/* Bytes one synthetic case holds at its peak: every layer's K/V ([L][Hkv][n][d]), the
 * prompt queries of a layer ([n][H][d]), the decode queries and the reference outputs
 * ([L][T][H][d]), the column sums ([L][H][ctx]) and window probabilities
 * ([L][H][win][ctx]) of the prefill statistics, the workload's per-token arrays, and a
 * method's cache with its growth and allocator slack. n = ctx + T. */
double run_mem_synthetic(int L, int H, int Hkv, int d, int ctx, int T, int win);

/* This machine's physical memory in bytes (0 if unknown). */
double run_mem_physical(void);

/* The memory this process may still use: the machine's, or less under a cgroup limit
 * (memory.max), ulimit -v or ulimit -d (what is left of them); what gets the amount with its source, e.g. "this
 * machine's 23.4 GiB of memory". */
double run_mem_limit(char *what, size_t whatlen);

/* 0 if need fits in run_mem_limit(); else -1 with "needs about X GiB (what), more than
 * this machine's Y GiB of memory" (or the limit's name) in err. */
int run_mem_check(double need, const char *what, char *err, size_t errlen);
#endif

/* Memory estimates checked before a run starts, so a context too large for the machine
 * is refused up front with the reason instead of failing (or swapping) mid-run. */
#ifndef KV_RUN_MEM_H
#define KV_RUN_MEM_H
#include <stddef.h>

/* Bytes one synthetic case holds at its peak: every layer's K/V ([L][Hkv][n][d]), one
 * method's copy of it, the prompt queries of a layer ([n][H][d]), the decode queries and
 * the reference outputs ([L][T][H][d]), the column sums ([L][H][ctx]) and window
 * probabilities ([L][H][win][ctx]) of the prefill statistics. n = ctx + T. */
double run_mem_synthetic(int L, int H, int Hkv, int d, int ctx, int T, int win);

/* This machine's physical memory in bytes (0 if unknown). */
double run_mem_physical(void);

/* 0 if need fits in the machine's memory; else -1 with "needs about X GiB (what), more
 * than this machine's Y GiB of memory" in err. */
int run_mem_check(double need, const char *what, char *err, size_t errlen);
#endif

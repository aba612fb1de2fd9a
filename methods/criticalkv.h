/* CriticalKV's value weight (criticalkv.c), shared with its head-adaptive form
 * (criticalkv_adakv.c). */
#ifndef KV_CRITICALKV_H
#define KV_CRITICALKV_H
#include "cacheset.h"

/* w[t] = mean over kv head j's query heads h of sum_e |sum_i Wo[e][h d + i] v_t[i]| for the
 * layer's n rows: Wo_h v_t by SGEMM in float32 (as kvpress's matmul), CK_ROWS rows at a time,
 * the L1 sums in double. y holds CK_ROWS x p->embd floats. Reads p->V and p->Wo. */
#define CK_ROWS 256
void criticalkv_wov_norm(const kv_cacheset *c, const kv_prefill *p, int j, double *w, float *y);

/* kv_method.needs of a CriticalKV method m (ExpectedAttention's parameters in its table):
 * the pre-RoPE query rows ExpectedAttention reads, and Wo. */
void criticalkv_needs_of(const kv_method *m, const kv_setup *s, kv_needs *out);

#endif
